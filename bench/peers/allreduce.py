"""Allreduce on 127.0.0.1: `murmur bench allreduce` against Gloo's allreduce
(torch.distributed, gloo backend) and Open MPI's MPI_Allreduce (--mca btl
tcp,self), at N = 2 and 4 processes and 1/4/16/64 MiB of float32.

    python3 bench/peers/allreduce.py BUILD [--rounds R] [--iters K] [--warmup W]
        [--agents 2,4] [--sizes-mib 1,4,16,64] [--record FILE]

Every tool times its rounds the same way (warm-up rounds, then timed rounds
each started by a barrier, the slowest process's time) and prints lines
ending in time_ms= and busbw_gbps=. One measurement is the median of a
tool's K timed rounds; a round of this script measures every configuration
of one (N, size) once, in an order rotated from round to round
(interleaved, so that the shared machine's load falls on all alike), and
the ratio murmur/peer of that round is taken; the tables give the medians
over R rounds. murmur runs at 32, 8 and 4 bits, encrypted and --auth-only; "CPU ms" is
the CPU time of the busiest murmur agent's process in a round (cpu_ms=).
Targets (issue 12): 32 bits at most 0.8x Gloo's time, 8 bits at most
0.35x.

--record FILE replaces the section between "<!-- bench-peers:allreduce
begin -->" and "<!-- bench-peers:allreduce end -->" (or appends one).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
MURMUR_CONFIGS = [(32, False), (32, True), (8, False), (8, True), (4, False), (4, True)]


def mname(bits, auth):
    return f"murmur {bits} bits{' auth-only' if auth else ''}"


def times_of(out):
    return [float(m.group(1)) for m in re.finditer(r"time_ms=([0-9.]+) busbw_gbps=", out)]


CPU = {}  # (n, size, name) -> [median cpu_ms of the busiest murmur agent, per round]


def run(cmd, timeout=900, key=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  timed out: {' '.join(cmd)}", flush=True)
        return None
    t = times_of(p.stdout)
    if p.returncode != 0 or not t:
        print(f"  failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-500:]}{p.stderr[-1500:]}",
              flush=True)
        return None
    cpu = [float(x) for x in re.findall(r"cpu_ms=([0-9.]+)", p.stdout)]
    if key and cpu:
        CPU.setdefault(key, []).append(statistics.median(cpu))
    return statistics.median(t)


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--agents", default="2,4")
    p.add_argument("--sizes-mib", default="1,4,16,64")
    p.add_argument("--record", metavar="FILE")
    a = p.parse_args()
    murmur = os.path.join(a.build, "murmur")
    mpi_bin = os.path.join(a.build, "bench", "allreduce_mpi")
    have_gloo = subprocess.run([PY, "-c", "import torch.distributed"],
                               capture_output=True).returncode == 0
    have_mpi = os.access(mpi_bin, os.X_OK) and shutil.which("mpirun") is not None
    if not have_gloo:
        print("allreduce: Gloo skipped: PyTorch is not importable by /usr/bin/python3")
    if not have_mpi:
        print(f"allreduce: Open MPI skipped: no {mpi_bin} or no mpirun")
    agents = [int(x) for x in a.agents.split(",")]
    sizes = [int(float(x) * 1024 * 1024) for x in a.sizes_mib.split(",")]
    it = ["--iters", str(a.iters), "--warmup", str(a.warmup)]
    configs = [("gloo", None), ("mpi", None)] + [(mname(b, au), (b, au)) for b, au in MURMUR_CONFIGS]
    res = {}  # (n, size, name) -> [ms per round]
    for n in agents:
        for size in sizes:
            for r in range(a.rounds):
                k = r % len(configs)
                for name, mc in configs[k:] + configs[:k]:
                    if name == "gloo":
                        if not have_gloo:
                            continue
                        cmd = [PY, os.path.join(HERE, "allreduce_gloo.py"), "--agents", str(n),
                               "--size", str(size)] + it
                    elif name == "mpi":
                        if not have_mpi:
                            continue
                        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n),
                               "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
                               mpi_bin, str(size), str(a.iters), str(a.warmup)]
                    else:
                        bits, auth = mc
                        cmd = [murmur, "bench", "allreduce", "--agents", str(n), "--size",
                               str(size), "--bits", str(bits)] + (["--auth-only"] if auth else []) + it
                    ms = run(cmd, key=(n, size, name))
                    res.setdefault((n, size, name), []).append(ms)
                    print(f"N={n} size={size >> 20}MiB round={r + 1} {name}: time_ms={fmt(ms, '.3f')}",
                          flush=True)
    rows = ["| N | MiB | Gloo ms | MPI ms | murmur | ms | CPU ms | / Gloo | / MPI |",
            "|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    verdict = {}  # name -> list of ratios vs gloo (per (n,size))
    for n in agents:
        for size in sizes:
            g = med(res.get((n, size, "gloo"), []))
            m = med(res.get((n, size, "mpi"), []))
            for b, au in MURMUR_CONFIGS:
                name = mname(b, au)
                mine = res.get((n, size, name), [])
                rg = med([x / y for x, y in zip(mine, res.get((n, size, "gloo"), []))
                          if x and y])
                rm = med([x / y for x, y in zip(mine, res.get((n, size, "mpi"), []))
                          if x and y])
                verdict.setdefault(name, []).append(rg)
                rows.append(f"| {n} | {size >> 20} | {fmt(g)} | {fmt(m)} | {b} bits"
                            f"{' auth-only' if au else ''} | {fmt(med(mine))} | "
                            f"{fmt(med(CPU.get((n, size, name), [])))} | {fmt(rg)} | {fmt(rm)} |")
    rows += ["", "| murmur / Gloo time, worst of all N and sizes | value | target |",
             "|---|---:|---:|"]
    for b, au in MURMUR_CONFIGS:
        name = mname(b, au)
        v = [x for x in verdict.get(name, []) if x is not None]
        worst = max(v) if v else None
        target = {32: 0.8, 8: 0.35}.get(b)
        tgt = "-" if target is None else (f"<= {target}" + (
            " (met)" if worst is not None and worst <= target else " (MISSED)"))
        rows.append(f"| {b} bits{' auth-only' if au else ' encrypted'} | {fmt(worst)} | {tgt} |")
    print("\n".join(rows))
    if a.record:
        cmd = "python3 bench/peers/allreduce.py " + " ".join(
            x for x in re.sub(r" --record \S+", "", " ".join(sys.argv[1:])).split())
        record(a.record, rows, cmd, a)
    return 0


def record(path, rows, cmd, a):
    key = "allreduce"
    begin, end = f"<!-- bench-peers:{key} begin -->", f"<!-- bench-peers:{key} end -->"
    text = open(path).read() if os.path.exists(path) else ""
    body = (f"{begin}\nMeasured {time.strftime('%Y-%m-%d')} with `{cmd}` (2 cores, shared "
            f"machine; medians over {a.rounds} interleaved rounds, each the median of "
            f"{a.iters} timed allreduces after {a.warmup} warm-up):\n\n" + "\n".join(rows) +
            f"\n{end}")
    if begin in text and end in text:
        i, j = text.index(begin), text.index(end) + len(end)
        text = text[:i] + body + text[j:]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(f"allreduce: recorded in {path}")


if __name__ == "__main__":
    sys.exit(main())
