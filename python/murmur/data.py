"""Read murmur shard files (docs/SHARDS.md) from Python, with NumPy.

    from murmur.data import load_shard
    x, y = load_shard(path)   # x: (n, dim) uint8 or float32, y: (n,) uint16

Every check of the C loader is made: magic, version, sizes, the BLAKE2b-256
content address (hashlib), labels below the class count; a bad file raises
ShardError naming it.
"""
import hashlib
import struct

import numpy as np

HEADER = 72
MAGIC = b"MRMSHARD"


class ShardError(ValueError):
    pass


def load_shard(path):
    """(features, labels, classes) of a shard file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER:
        raise ShardError(f"{path}: {len(data)} bytes, shorter than the 72-byte header")
    if data[:8] != MAGIC:
        raise ShardError(f"{path}: not a murmur shard file (magic)")
    version, dtype, reserved, n, dim, classes, index, count, plen = struct.unpack_from(
        "<HBBIIIIIQ", data, 8)
    if version != 1:
        raise ShardError(f"{path}: shard format version {version}, this reader knows 1")
    if dtype not in (1, 2) or reserved or n == 0 or dim == 0 or classes == 0 or index >= count:
        raise ShardError(f"{path}: corrupt header")
    width = 1 if dtype == 1 else 4
    if plen != n * 2 + n * dim * width or len(data) != HEADER + plen:
        raise ShardError(f"{path}: payload size does not match the header")
    digest = hashlib.blake2b(data[8:24] + data[HEADER:], digest_size=32).digest()
    if digest != data[40:72]:
        raise ShardError(f"{path}: content hash mismatch (damaged file)")
    y = np.frombuffer(data, dtype="<u2", count=n, offset=HEADER)
    if n and int(y.max()) >= classes:
        raise ShardError(f"{path}: a label is not below {classes}")
    x = np.frombuffer(data, dtype=np.uint8 if dtype == 1 else "<f4", count=n * dim,
                      offset=HEADER + 2 * n).reshape(n, dim)
    return x, y, classes
