#!/usr/bin/env python3
"""Independent check of the codec golden vectors against docs/CODEC.md.

Decodes tests/vectors/codec_b*.hex with nothing but the documented byte
format (not the C code) and checks: the sizes, each block scale equals
max |x| of the block, padding bits are zero, the code -2^(bits-1) is absent,
and every decoded value is within one quantum of the fixed input (bit-exact
at 32 bits). Run from the repository root:  python3 tests/vectors/codec_check.py
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def f32(v):
    return struct.unpack('<f', struct.pack('<f', v))[0]


def x_in(i):
    """The fixed input, as tests/test_vectors.c codec_vec_input."""
    k = (37 * i) % 101 - 50
    if i < 128:
        return k / 8
    if i < 256:
        return k / 8192
    return 0.0 if i % 3 == 0 else k * 64.0


def load(path):
    kv, hexs, in_bytes = {}, '', False
    for line in open(path).read().split('\n'):
        if line.startswith('#'):
            continue
        if in_bytes:
            hexs += line.strip()
        elif line.strip() == 'bytes':
            in_bytes = True
        elif line.strip():
            k, v = line.split()
            kv[k] = int(v, 0)
    return kv, bytes.fromhex(hexs)


def check(bits):
    kv, b = load(os.path.join(HERE, 'codec_b%d.hex' % bits))
    n, block = kv['n'], kv['block']
    assert kv['bits'] == bits
    pos, out = 0, []
    for off in range(0, n, block):
        nb = min(block, n - off)
        if bits == 32:
            out += struct.unpack('>%df' % nb, b[pos:pos + 4 * nb])
            pos += 4 * nb
            continue
        s = struct.unpack('>f', b[pos:pos + 4])[0]
        pos += 4
        nbytes = (nb * bits + 7) // 8
        stream = int.from_bytes(b[pos:pos + nbytes], 'little')
        pos += nbytes
        L = (1 << (bits - 1)) - 1
        for i in range(nb):
            v = (stream >> (i * bits)) & ((1 << bits) - 1)
            if bits == 1:
                out.append(s if v else -s)
                continue
            q = v - (1 << bits) if v >= (1 << (bits - 1)) else v
            assert q != -(1 << (bits - 1)), 'reserved code'
            out.append(f32(q * f32(s / L)))
        assert stream >> (nb * bits) == 0, 'padding bits not zero'
        assert s == max(abs(x_in(i)) for i in range(off, off + nb)), 'scale'
        quantum = 2 * s if bits == 1 else s / L
        for i in range(off, off + nb):
            assert abs(out[i] - x_in(i)) <= quantum * (1 + 1e-6), (bits, i)
    assert pos == len(b), 'size'
    if bits == 32:
        assert list(out) == [x_in(i) for i in range(n)]
    return len(b)


if __name__ == '__main__':
    for bits in (32, 16, 8, 4, 2, 1):
        print('codec_b%d.hex: %d bytes ok' % (bits, check(bits)))
    sys.exit(0)
