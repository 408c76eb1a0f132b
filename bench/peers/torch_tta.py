"""PyTorch side of bench/peers/tta.py: train the Fashion-MNIST MLP
784-256-128-100-10 (ReLU) to a test accuracy, alone or with DistributedDataParallel
(gloo backend, N processes on 127.0.0.1), one thread per process.

    /usr/bin/python3 bench/peers/torch_tta.py --procs N --target 0.88 \
        --lr 0.05 --schedule-epochs 20 --warmup-epochs 1 --min-lr 0 \
        --weight-decay 5e-4 --eval-every STEPS --max-seconds S

Per process: batch 64, SGD momentum 0.9 (torch.optim.SGD), cosine decay of the
learning rate from --lr to --min-lr over --schedule-epochs passes over the
training set (counted in samples of all processes together), linear warm-up
over --warmup-epochs; each process trains on its own random half/quarter of
every epoch's permutation (as DistributedSampler does). Rank 0 evaluates on
the whole 10,000-image test set every --eval-every of its steps and prints
one line per evaluation:
    eval step=S samples=C accuracy=A
and, when A >= --target for the first time,
    target_reached step=S samples=C accuracy=A
then all processes stop. The caller times the lines as they arrive.
"""
import argparse
import gzip
import math
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DIR = "/usr/share/datasets/fashion-mnist"
BATCH = 64


def load(prefix):
    with gzip.open(os.path.join(DIR, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DIR, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


def lr_at(args, samples, n_train):
    e = samples / n_train
    if e < args.warmup_epochs:
        return args.lr * (e / args.warmup_epochs if args.warmup_epochs > 0 else 1)
    span = max(args.schedule_epochs - args.warmup_epochs, 1e-9)
    f = min((e - args.warmup_epochs) / span, 1.0)
    return args.min_lr + (args.lr - args.min_lr) * 0.5 * (1 + math.cos(math.pi * f))


def run(rank, args, port):
    torch.set_num_threads(1)
    world = args.procs
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    torch.manual_seed(1)
    x, y = load("train")
    xt, yt = load("t10k")
    xt = xt.float().div_(255.0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 100), torch.nn.ReLU(),
        torch.nn.Linear(100, 10))
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9,
                          weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = x.shape[0]
    g = torch.Generator().manual_seed(7)
    step = 0
    stop = torch.zeros(1)
    while True:
        perm = torch.randperm(n, generator=g)  # same on every rank
        mine = perm[rank::world]
        for at in range(0, mine.shape[0] - BATCH + 1, BATCH):
            samples = step * BATCH * world
            for group in opt.param_groups:
                group["lr"] = lr_at(args, samples, n)
            idx = mine[at:at + BATCH]
            xb = x[idx].float().div_(255.0)
            opt.zero_grad(set_to_none=True)
            loss_fn(net(xb), y[idx]).backward()
            opt.step()
            step += 1
            if step % args.eval_every == 0:
                if rank == 0:
                    with torch.no_grad():
                        acc = (model(xt).argmax(1) == yt).float().mean().item()
                    samples = step * BATCH * world
                    print(f"eval step={step} samples={samples} accuracy={acc:.4f}", flush=True)
                    if acc >= args.target:
                        print(f"target_reached step={step} samples={samples} accuracy={acc:.4f}",
                              flush=True)
                        stop[0] = 1
                if world > 1:
                    dist.broadcast(stop, 0)
                if stop[0] > 0:
                    if world > 1:
                        dist.destroy_process_group()
                    return


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--target", type=float, default=0.88)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--schedule-epochs", type=float, default=20)
    p.add_argument("--warmup-epochs", type=float, default=1)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--eval-every", type=int, default=938)
    p.add_argument("--port", type=int, default=29517)
    args = p.parse_args()
    if args.procs == 1:
        run(0, args, args.port)
    else:
        mp.spawn(run, args=(args, args.port), nprocs=args.procs, join=True)


if __name__ == "__main__":
    sys.exit(main())
