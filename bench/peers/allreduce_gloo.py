"""Gloo's allreduce (torch.distributed, gloo backend) timed as `murmur bench
allreduce` times its own: N processes on 127.0.0.1, warm-up rounds, then
timed rounds each started by a barrier, the slowest rank's time per round.

    python3 bench/peers/allreduce_gloo.py --agents N --size BYTES [--iters K] [--warmup W]

Prints one line per timed round ending in time_ms= and busbw_gbps= (bus
bandwidth as nccl-tests: BYTES / time x 2(N-1)/N), like murmur's.
"""
import argparse
import os
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, n, port, size, iters, warmup, q):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", rank=rank, world_size=n)
    x = torch.rand(size // 4, dtype=torch.float32)
    times = []
    for r in range(warmup + iters):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        t = time.perf_counter() - t0
        x.div_(n)  # keep the values bounded, as murmur's mean
        if r >= warmup:
            times.append(t)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        q.put(slowest.tolist())
    dist.barrier()
    dist.destroy_process_group()


def run_once(a, ctx):
    """The timed rounds once, on a fresh port; None when a rank failed (the
    port picked may have been taken by another program before rank 0 bound
    it)."""
    import queue
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, a.agents, port, a.size, a.iters, a.warmup, q))
             for r in range(a.agents)]
    for pr in procs:
        pr.start()
    # A rank that dies leaves the others waiting in a collective: give up
    # at once rather than wait for Gloo's own timeout.
    deadline = time.monotonic() + 600
    times = None
    while times is None:
        try:
            times = q.get(timeout=1)
        except queue.Empty:
            dead = [pr for pr in procs if pr.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for pr in procs:
                    pr.kill()
                    pr.join()
                print(f"gloo: a rank failed (exit codes {[pr.exitcode for pr in procs]})",
                      file=sys.stderr)
                return None
    for pr in procs:
        pr.join()
    return times if all(pr.exitcode == 0 for pr in procs) else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    times = None
    for _ in range(3):
        times = run_once(a, ctx)
        if times is not None:
            break
    if times is None:
        return 1
    ring = 2.0 * (a.agents - 1) / a.agents
    for k, t in enumerate(times):
        algbw = a.size / t / 1e9
        print(f"gloo agents={a.agents} size={a.size} run={k + 1} algbw_gbps={algbw:.4f} "
              f"time_ms={t * 1e3:.3f} busbw_gbps={algbw * ring:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
