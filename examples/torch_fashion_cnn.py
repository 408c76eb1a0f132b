"""A PyTorch CNN trained by several processes that mix through murmur.

    /usr/bin/python3 examples/torch_fashion_cnn.py [--agents 2] [--target 0.90]
        [--bits 8] [--every 4] [--build build] [--max-seconds 900] [--ddp]

Each process runs a murmur agent through the Python binding (python/murmur)
on 127.0.0.1 (gossip of 8-bit deltas over authenticated, encrypted links),
trains a small CNN (conv 5x5 32 - pool - conv 5x5 64 - pool - fc 256 -
fc 10, ReLU; SGD momentum 0.9 at murmur's learning rate) on the shard
files its agent was assigned (murmur.data.load_shard; it follows
re-assignments), evaluates on the 10,000 test images every 200 steps and
reports to its agent. Agent 1 starts with every shard of the Fashion-MNIST
split (16 shards, replication 2); the others fetch theirs. The run ends
when every process has reached --target test accuracy; it prints each
process's time, steps and accuracy, then a line
    result mode=murmur agents=N target=T time_to_target_s=S
(--ddp runs the same CNN, recipe and processes with PyTorch
DistributedDataParallel over gloo instead, for the comparison of
bench/peers/torch_cnn.sh, and prints mode=ddp).
"""
import argparse
import gzip
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 64
EVAL_EVERY = 200


def make_model():
    torch.manual_seed(1)  # the same initial model in every process
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))


def load_idx(prefix):
    with gzip.open(os.path.join(DATA, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x, y.astype(np.int64)


def to_images(x):
    return torch.from_numpy(np.ascontiguousarray(x)).float().div_(255.0).view(-1, 1, 28, 28)


def evaluate(model, xt, yt):
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(xt[i:i + 2000]).argmax(1) == yt[i:i + 2000]).sum())
                      for i in range(0, xt.shape[0], 2000))
    model.train()
    return correct / xt.shape[0]


def worker_murmur(args):
    import murmur
    import murmur.torch
    from murmur.data import load_shard
    torch.set_num_threads(1)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    settings = {"node.data_dir": args.dir, "node.listen": f"127.0.0.1:{args.port}",
                "node.network_key_file": os.path.join(args.dir, "..", "net.key"),
                "model.spec": "host:torch-fashion-cnn", "mixing.bits": args.bits,
                "mixing.interval_steps": args.every, "model.schedule": "cosine:6",
                "shards.replication": 2, "checkpoint.every_steps": 0,
                "membership.probe_interval_ms": 500, "membership.probe_timeout_ms": 250}
    if args.seed_port:
        settings["seeds.seed"] = f"127.0.0.1:{args.seed_port}"
    mixer = murmur.torch.Mixer(model, opt, every=1, settings=settings)
    mixer.wait_ready(timeout=60)
    xt, yt = load_idx("t10k")
    xt, yt = to_images(xt), torch.from_numpy(yt)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen, x, y, order, at = None, None, None, None, 0
    g = torch.Generator().manual_seed(args.index)
    step, acc = 0, 0.0
    while not stop["now"]:
        st = mixer.agent.status()
        if st["shards_generation"] != gen:
            gen, paths, reason = mixer.agent.shards()
            parts = [load_shard(p) for p in paths]
            if parts:
                x = np.concatenate([p[0] for p in parts])
                y = np.concatenate([p[1] for p in parts]).astype(np.int64)
                order, at = None, 0
                print(f"worker={args.index} shards={len(paths)} samples={x.shape[0]} ({reason})",
                      flush=True)
        if x is None:
            time.sleep(0.1)
            mixer.agent.mix(mixer.array, steps=0)
            continue
        if order is None or at + BATCH > len(order):
            order, at = torch.randperm(x.shape[0], generator=g).numpy(), 0
        idx = order[at:at + BATCH]
        at += BATCH
        for group in opt.param_groups:
            group["lr"] = mixer.lr
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(to_images(x[idx])), torch.from_numpy(y[idx]))
        loss.backward()
        opt.step()
        try:
            mixer.step(samples=BATCH)
        except murmur.MurmurError:
            break
        step += 1
        if step % EVAL_EVERY == 0:
            acc = evaluate(model, xt, yt)
            mixer.agent.report(float(loss), math.nan, acc)
            print(f"worker={args.index} step={step} accuracy={acc:.4f} "
                  f"rounds={st['mixing_rounds']} peers={st['peers']}", flush=True)
    mixer.close()
    print(f"worker={args.index} done step={step} accuracy={acc:.4f}", flush=True)


def worker_ddp(args):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.seed_port}",
                            rank=args.index - 1, world_size=args.agents)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    model = make_model()
    net = torch.nn.parallel.DistributedDataParallel(model)
    s = math.sqrt(args.agents)  # the agents' default lr_scaling, for a like-for-like recipe
    opt = torch.optim.SGD(net.parameters(), lr=0.05 * s, momentum=0.9, weight_decay=1e-4)
    x, y = load_idx("train")
    xt, yt = load_idx("t10k")
    xt, yt = to_images(xt), torch.from_numpy(yt)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(7)
    step, acc, n = 0, 0.0, x.shape[0]
    flag = torch.zeros(1)
    while True:
        mine = torch.randperm(n, generator=g)[args.index - 1::args.agents].numpy()
        for at in range(0, len(mine) - BATCH + 1, BATCH):
            epochs = step * BATCH * args.agents / n  # cosine over 6 epochs, warm-up 0.25
            lr = 0.05 * s * (epochs / 0.25 if epochs < 0.25 else
                             0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1, (epochs - 0.25) / 5.75))))
            for group in opt.param_groups:
                group["lr"] = lr
            idx = mine[at:at + BATCH]
            opt.zero_grad(set_to_none=True)
            loss_fn(net(to_images(x[idx])), torch.from_numpy(y[idx])).backward()
            opt.step()
            step += 1
            if step % EVAL_EVERY == 0:
                acc = evaluate(model, xt, yt)  # every rank holds the same model
                print(f"worker={args.index} step={step} accuracy={acc:.4f}", flush=True)
                flag[0] = 1.0 if stop["now"] else 0.0
                dist.all_reduce(flag)
                if flag[0] > 0:
                    dist.destroy_process_group()
                    print(f"worker={args.index} done step={step} accuracy={acc:.4f}", flush=True)
                    return


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=2)
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--bits", type=int, default=8)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--max-seconds", type=float, default=900)
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--seed-port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker_ddp(args) if args.ddp else worker_murmur(args)

    mode = "ddp" if args.ddp else "murmur"
    build = os.path.abspath(args.build)
    os.environ.setdefault("MURMUR_LIB", os.path.join(build, "libmurmur.so"))
    tmp = tempfile.mkdtemp(prefix="murmur-cnn-")
    procs = []
    try:
        base = 27000 + os.getpid() % 2000
        if not args.ddp:
            run = lambda *a: subprocess.run([os.path.join(build, "murmur"), *a], check=True,
                                            stdout=subprocess.DEVNULL)
            run("keygen", "--network-key", os.path.join(tmp, "net.key"))
            run("shard", "--shards", "16", "--out", os.path.join(tmp, "all"))
        t0 = time.monotonic()
        for i in range(1, args.agents + 1):
            d = os.path.join(tmp, f"a{i}")
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--index", str(i),
                   "--agents", str(args.agents), "--bits", str(args.bits), "--every",
                   str(args.every)]
            if args.ddp:
                cmd += ["--ddp", "--seed-port", str(base)]
            else:
                os.makedirs(os.path.join(d, "shards"))
                run("keygen", "--out", d)
                shutil.copy(os.path.join(tmp, "all", "catalog"), os.path.join(d, "shards"))
                if i == 1:
                    for f in os.listdir(os.path.join(tmp, "all")):
                        shutil.copy(os.path.join(tmp, "all", f), os.path.join(d, "shards", f))
                cmd += ["--dir", d, "--port", str(base + i)]
                if i > 1:
                    cmd += ["--seed-port", str(base + 1)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1))
            if i == 1 and not args.ddp:
                time.sleep(0.5)
        best = {}
        reached = {}
        os.set_blocking(procs[0].stdout.fileno(), True)
        import selectors
        sel = selectors.DefaultSelector()
        for pr in procs:
            sel.register(pr.stdout, selectors.EVENT_READ, pr)
        while len(reached) < len(procs) and time.monotonic() - t0 < args.max_seconds:
            for key, _ in sel.select(timeout=1):
                line = key.fileobj.readline()
                if not line:
                    sel.unregister(key.fileobj)
                    continue
                print(line, end="", flush=True)
                f = dict(t.split("=", 1) for t in line.split() if "=" in t)
                if "accuracy" in f and "worker" in f:
                    w = int(f["worker"])
                    best[w] = float(f["accuracy"])
                    if best[w] >= args.target and w not in reached:
                        reached[w] = (time.monotonic() - t0, int(f.get("step", 0)))
        total = max((t for t, _ in reached.values()), default=None)
        ok = len(reached) == len(procs)
        for w in sorted(reached):
            print(f"reached worker={w} time_s={reached[w][0]:.1f} step={reached[w][1]}")
        print(f"result mode={mode} agents={args.agents} target={args.target} "
              f"time_to_target_s={total if ok else 'none'} "
              f"accuracy={','.join(f'{best.get(w, 0):.4f}' for w in range(1, len(procs) + 1))}",
              flush=True)
        return 0 if ok else 1
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.send_signal(signal.SIGTERM)
        for pr in procs:
            try:
                pr.wait(30)
            except subprocess.TimeoutExpired:
                pr.kill()
                pr.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
