"""The bench_train workload for a cnn spec in PyTorch, for bench/extra_torch_cnn.sh.

Builds the network a murmur cnn spec names (model/spec.h: c<N>k<K>[s][p][g],
p<K>[s], a<K>[s], f<N>, d<RATE>, optional i<C>x<H>x<W>; "cnn" is the default,
read from model/spec.h so the two cannot drift apart) as torch.nn layers:
Conv2d (no bias when group normalisation follows) + GroupNorm + ReLU,
MaxPool2d, AvgPool2d, Flatten + Linear + ReLU, Dropout, and the Linear output
layer. Batch 64, SGD momentum 0.9, weight decay 5e-4, one thread
(torch.set_num_threads(1)), training mode (dropout on). Data: Fashion-MNIST
pixels loaded once as a uint8 tensor (random pixels if the files are absent);
each step gathers a shuffled mini-batch, converts to float /255 (murmur's
"unit" normalisation), forward, cross-entropy, backward, optimizer step -- the
per-step work of bench/bench_train.c. Prints the parameter count (it must
equal murmur's) and the median of RUNS runs as samples_per_s=N (wall clock)
and cpu_samples_per_s=N (process CPU time, as bench_train).

    /usr/bin/python3 bench/torch_cnn.py [runs] [steps] [spec]
"""
import gzip
import os
import re
import sys
import time

import numpy as np
import torch

BATCH = 64
DIR = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))

torch.set_num_threads(1)
torch.manual_seed(1)


def default_spec():
    with open(os.path.join(HERE, "..", "model", "spec.h")) as f:
        m = re.search(r'#define MODEL_CNN_DEFAULT "([^"]*)"', f.read())
    return m.group(1)


def build(spec, classes=10, dim=784):
    """torch.nn.Sequential for a murmur cnn spec (valid specs only)."""
    if spec == "cnn":
        spec = default_spec()
    assert spec.startswith("cnn:"), spec
    items = spec[4:].split(",")
    side = int(round(dim ** 0.5))
    c, h, w = 1, side, side
    if items[0].startswith("i"):
        c, h, w = (int(v) for v in items[0][1:].split("x"))
        items = items[1:]
    layers, flat = [], None
    for it in items:
        kind, rest = it[0], it[1:]
        if kind == "c":
            m = re.fullmatch(r"(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?(?:g(\d+))?", rest)
            n, k = int(m.group(1)), int(m.group(2))
            s = int(m.group(3) or 1)
            p = int(m.group(4)) if m.group(4) is not None else (k - 1) // 2
            g = int(m.group(5) or 0)
            layers.append(torch.nn.Conv2d(c, n, k, stride=s, padding=p, bias=not g))
            if g:
                layers.append(torch.nn.GroupNorm(g, n))
            layers.append(torch.nn.ReLU())
            c, h, w = n, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        elif kind in "pa":
            m = re.fullmatch(r"(\d+)(?:s(\d+))?", rest)
            k = int(m.group(1))
            s = int(m.group(2) or k)
            pool = torch.nn.MaxPool2d if kind == "p" else torch.nn.AvgPool2d
            layers.append(pool(k, stride=s))
            h, w = (h - k) // s + 1, (w - k) // s + 1
        elif kind == "f":
            if flat is None:
                layers.append(torch.nn.Flatten())
                flat = c * h * w
            layers += [torch.nn.Linear(flat, int(rest)), torch.nn.ReLU()]
            flat = int(rest)
        elif kind == "d":
            layers.append(torch.nn.Dropout(float(rest)))
        else:
            raise ValueError(it)
    if flat is None:
        layers.append(torch.nn.Flatten())
        flat = c * h * w
    layers.append(torch.nn.Linear(flat, classes))
    return torch.nn.Sequential(*layers)


def load():
    p_img = os.path.join(DIR, "train-images-idx3-ubyte.gz")
    p_lab = os.path.join(DIR, "train-labels-idx1-ubyte.gz")
    if os.path.exists(p_img) and os.path.exists(p_lab):
        with gzip.open(p_img) as f:
            x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
        with gzip.open(p_lab) as f:
            y = np.frombuffer(f.read(), np.uint8, offset=8)
        return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64)), "fashion-mnist"
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 256, (60000, 1, 28, 28), dtype=torch.uint8, generator=g),
            torch.randint(0, 10, (60000,), generator=g), "random")


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    spec = sys.argv[3] if len(sys.argv) > 3 else "cnn"
    warmup = min(100, steps // 3)  # as bench_train
    x_all, y_all, source = load()
    model = build(spec)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    order = torch.randperm(x_all.shape[0])
    at = 0
    times, cpu = [], []
    for _ in range(runs):
        t0 = c0 = 0.0
        for s in range(warmup + steps):
            if s == warmup:
                t0 = time.perf_counter()
                c0 = time.process_time()
            if at + BATCH > x_all.shape[0]:
                at = 0
            idx = order[at:at + BATCH]
            at += BATCH
            xb = x_all[idx].float().div_(255.0)
            yb = y_all[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    times.sort()
    cpu.sort()
    med = times[runs // 2]
    n = steps * BATCH
    print(f"torch_cnn torch={torch.__version__} threads={torch.get_num_threads()} data={source} "
          f"spec={spec} params={params} runs={runs} steps={steps}")
    print(f"  samples_per_s={n / med:.0f}  (min {n / times[-1]:.0f} .. max {n / times[0]:.0f})  "
          f"step_us={med / steps * 1e6:.1f}")
    cmed = cpu[runs // 2]
    print(f"  cpu_samples_per_s={n / cmed:.0f}  (min {n / cpu[-1]:.0f} .. max {n / cpu[0]:.0f})  "
          f"cpu_step_us={cmed / steps * 1e6:.1f}")


if __name__ == "__main__":
    main()
