"""Models out of murmur (run by tests/integration/export.sh): load what
`murmur train --save` and `murmur export` wrote with NumPy alone, run the
network on the 10,000 Fashion-MNIST test images and get murmur's own
accuracy; the three formats hold the same values.

    python3 test_export.py DIR MLP_ACCURACY CNN_ACCURACY
"""
import gzip
import json
import os
import struct
import sys

import numpy as np

D = sys.argv[1]
mlp_acc, cnn_acc = float(sys.argv[2]), float(sys.argv[3])
DATA = "/usr/share/datasets/fashion-mnist"


def test_set():
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x.astype(np.float32), y


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__")
    base = 8 + n
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32"
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + e], dtype="<f4").reshape(t["shape"])
    return out, meta


def dense_net(t, x):
    """mlp: dense+ReLU layers, the last one without."""
    layers = sorted({int(k.split(".")[0]) for k in t if k[0].isdigit()})
    h = x
    for i, l in enumerate(layers):
        h = h @ t[f"{l}.weight"].T + t[f"{l}.bias"]
        if i + 1 < len(layers):
            h = np.maximum(h, 0)
    return h


def conv_same(x, w, b):
    """NHWC convolution, stride 1, 'same' padding; w is (Cout, K, K, Cin)."""
    n, hh, ww, c = x.shape
    co, k, _, ci = w.shape
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    out = np.zeros((n, hh, ww, co), dtype=np.float32)
    for dy in range(k):
        for dx in range(k):
            out += xp[:, dy:dy + hh, dx:dx + ww, :] @ w[:, dy, dx, :].T
    return out + b


def maxpool2(x):
    n, h, w, c = x.shape
    return x[:, :h // 2 * 2, :w // 2 * 2, :].reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def accuracy(logits, y):
    return float((logits.argmax(1) == y).mean())


x, y = test_set()
checks = 0

# MLP: npz from --save, safetensors and raw from murmur export of a checkpoint
z = np.load(os.path.join(D, "mlp.npz"))
t = {k: z[k] for k in z.files}
xin = x * t["input.scale"] + t["input.offset"]
acc = accuracy(dense_net(t, xin), y)
print(f"mlp: numpy accuracy {acc:.4f}, murmur printed {mlp_acc:.4f}")
assert abs(acc - mlp_acc) <= 0.0006, (acc, mlp_acc)
checks += 1
s, meta = load_safetensors(os.path.join(D, "mlp.safetensors"))
assert meta["format"] == "murmur" and meta["spec"].startswith("mlp:") and meta["input_dim"] == "784"
assert set(s) == set(t), (sorted(s), sorted(t))
for k in t:
    assert np.array_equal(s[k], t[k]), k  # the checkpoint holds the --save model, bit for bit
    checks += 1
raw = np.fromfile(os.path.join(D, "mlp.raw"), dtype="<f4")
flat = np.concatenate([t[k].reshape(-1) for k in sorted(
    (k for k in t if k[0].isdigit()), key=lambda k: (int(k.split(".")[0]), k.split(".")[1] == "bias"))])
assert raw.shape == flat.shape and np.array_equal(raw, flat)
checks += 1

# CNN (cnn:c8k3,p2 then the output layer): the layout of model/export.h
z = np.load(os.path.join(D, "cnn.npz"))
t = {k: z[k] for k in z.files}
assert t["0.weight"].shape == (8, 3, 3, 1), t["0.weight"].shape
img = (x * t["input.scale"] + t["input.offset"]).reshape(-1, 28, 28, 1)
h = np.maximum(conv_same(img, t["0.weight"], t["0.bias"]), 0)
h = maxpool2(h).reshape(len(x), -1)  # (y, x, c) order
out_layer = max(int(k.split(".")[0]) for k in t if k[0].isdigit())
logits = h @ t[f"{out_layer}.weight"].T + t[f"{out_layer}.bias"]
acc = accuracy(logits, y)
print(f"cnn: numpy accuracy {acc:.4f}, murmur printed {cnn_acc:.4f}")
assert abs(acc - cnn_acc) <= 0.0006, (acc, cnn_acc)
checks += 1
print(f"test_export: {checks} checks passed")
