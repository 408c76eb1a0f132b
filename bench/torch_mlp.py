"""The bench_train workload in PyTorch, for bench/extra_torch.sh.

mlp:256,128,100 (784-256-128-100-10, ReLU) at batch 64, SGD momentum 0.9,
weight decay 5e-4, one thread (torch.set_num_threads(1)). Data: Fashion-MNIST
pixels loaded once as a uint8 tensor (random pixels if the files are absent);
each step gathers a shuffled mini-batch, converts to float /255 (as murmur's
"unit" normalisation), forward, cross-entropy, backward, optimizer step --
the same per-step work as bench/bench_train.c. Prints the median of RUNS runs
as samples_per_s=N.

    /usr/bin/python3 bench/torch_mlp.py [runs] [steps]
"""
import gzip
import os
import sys
import time

import numpy as np
import torch

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
WARMUP = 100
BATCH = 64
DIR = "/usr/share/datasets/fashion-mnist"

torch.set_num_threads(1)
torch.manual_seed(1)


def load():
    p_img = os.path.join(DIR, "train-images-idx3-ubyte.gz")
    p_lab = os.path.join(DIR, "train-labels-idx1-ubyte.gz")
    if os.path.exists(p_img) and os.path.exists(p_lab):
        with gzip.open(p_img) as f:
            x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
        with gzip.open(p_lab) as f:
            y = np.frombuffer(f.read(), np.uint8, offset=8)
        return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64)), "fashion-mnist"
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 256, (60000, 784), dtype=torch.uint8, generator=g),
            torch.randint(0, 10, (60000,), generator=g), "random")


x_all, y_all, source = load()
model = torch.nn.Sequential(
    torch.nn.Linear(784, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 128), torch.nn.ReLU(),
    torch.nn.Linear(128, 100), torch.nn.ReLU(),
    torch.nn.Linear(100, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
loss_fn = torch.nn.CrossEntropyLoss()
order = torch.randperm(x_all.shape[0])
at = 0
times = []
for run in range(RUNS):
    t0 = 0.0
    for s in range(WARMUP + STEPS):
        if s == WARMUP:
            t0 = time.perf_counter()
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
times.sort()
med = times[RUNS // 2]
n = STEPS * BATCH
print(f"torch_mlp torch={torch.__version__} threads={torch.get_num_threads()} data={source} "
      f"runs={RUNS} steps={STEPS}")
print(f"  samples_per_s={n / med:.0f}  (min {n / times[-1]:.0f} .. max {n / times[0]:.0f})  "
      f"step_us={med / STEPS * 1e6:.1f}")
