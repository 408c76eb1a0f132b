"""Time to a test accuracy: murmur agents against one `murmur train` process
and PyTorch (one process, and DistributedDataParallel over gloo), side by
side on this machine, interleaved, medians of several rounds; and the
training throughput of agents that mix against a lone agent.

    /usr/bin/python3 bench/peers/tta.py BUILD [--reps R] [--target 0.88]
        [--configs train1,torch1,agents2,ddp2,agents4,ddp4] [--throughput]
        (agents1, one agent alone, on request)
        [--record FILE] [--agent-set KEY=VALUE ...]

Workload (issue 12): Fashion-MNIST MLP 784-256-128-100-10, batch 64 per
process, one BLAS/torch thread per process, accuracy on the full 10,000-image
test set.

- train1: `murmur train --model mlp:256,128,100` with its defaults (cosine
  over 20 epochs, warm-up 1 epoch); evaluated once per epoch (its own
  resolution).
- agentsN: N `murmur agent` processes on 127.0.0.1 with the agent's
  DEFAULTS for training and mixing; only the model spec and what is
  measured are set: model.spec=mlp:256,128,100, model.eval_samples=0 (the
  full test set), model.eval_every_steps (1000 at N=2, 500 at N=4, so the
  cluster evaluates about as often in wall time), progress lines every
  100 ms. Every agent starts with the whole shard set in its shards
  directory (data already on the hosts, as for DDP; 16 shards). The time
  runs from the launch of the first agent until EVERY agent's latest
  evaluation is >= target.
- torch1: bench/peers/torch_tta.py alone with murmur train's recipe.
- ddpN: torch_tta.py --procs N (DDP, gloo, 127.0.0.1): cosine over 8 epochs
  of the data set (the whole cluster's samples: DDP's ranks step together),
  warm-up 0.25, peak lr 0.05*sqrt(N), floor 0.0025*sqrt(N), weight decay
  1e-4, evaluated on rank 0 every 1000 (N=2) / 500 (N=4) steps; time from
  launch to the target_reached line.
Each round runs every config once, in order; ratios are taken within a
round (murmur / peer; below 1 is better) and their median reported.

--throughput: samples/s of each of 2 agents training together (defaults)
against one agent alone, over a 10 s window after a 4 s warm-up, rounds
interleaved, the order alternating (the lone agent first in odd rounds,
the pair first in even ones, A-B-B-A: a drift of the machine's speed
within a round then biases half of the rounds' ratios up and half down
instead of all one way); reports the median ratio (target >= 0.85).

--record FILE replaces the section between the lines
"<!-- bench-peers:tta begin -->" and "<!-- bench-peers:tta end -->" (or
"...:throughput ...") in FILE with this run's table and command; a run with
--agent-set records under its own key (tta-alt-SETTINGS), so alternatives
to the defaults are kept beside them.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = "mlp:256,128,100"


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def kv(line):
    out = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def num(v, default=float("nan")):
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


class Cluster:
    """N agents on 127.0.0.1, every one holding the whole shard set."""

    def __init__(self, build, n, extra=()):
        self.bin = os.path.abspath(os.path.join(build, "murmur"))
        self.n = n
        self.dir = tempfile.mkdtemp(prefix="murmur-tta-")
        self.procs = []
        self.logs = []
        run = lambda *a: subprocess.run([self.bin, *a], check=True, stdout=subprocess.DEVNULL)
        run("keygen", "--network-key", os.path.join(self.dir, "net.key"))
        run("shard", "--shards", "16", "--out", os.path.join(self.dir, "all"))
        for i in range(n):
            d = os.path.join(self.dir, f"a{i}")
            os.makedirs(os.path.join(d, "shards"))
            run("keygen", "--out", d)
            for f in os.listdir(os.path.join(self.dir, "all")):
                shutil.copy(os.path.join(self.dir, "all", f), os.path.join(d, "shards", f))
        self.extra = list(extra)

    def start(self):
        ports = free_ports(self.n)
        for i in range(self.n):
            d = os.path.join(self.dir, f"a{i}")
            args = [self.bin, "agent", "--data-dir", d, "--listen", f"127.0.0.1:{ports[i]}",
                    "--network-key-file", os.path.join(self.dir, "net.key"), "--metrics", "",
                    "--set", f"model.spec={SPEC}", "--set", "log.progress_interval_ms=100",
                    *self.extra]
            if i:
                args += ["--seed", f"127.0.0.1:{ports[0]}"]
            log = open(os.path.join(self.dir, f"a{i}.log"), "w+")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log))

    def progress(self):
        """Latest progress fields of every agent (None where none yet)."""
        out = []
        for i in range(self.n):
            last = None
            with open(os.path.join(self.dir, f"a{i}.log")) as f:
                for line in f:
                    if "event=progress" in line:
                        last = line
            out.append(kv(last) if last else None)
        return out

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


AGENT_SET = []  # --agent-set KEY=VALUE: settings on top of the defaults


def agents_tta(build, n, target, limit):
    every = 1000 if n <= 2 else 500
    extra = []
    for kv in AGENT_SET:
        extra += ["--set", kv]
    c = Cluster(build, n, ["--set", "model.eval_samples=0", "--set",
                           f"model.eval_every_steps={every}", *extra])
    try:
        t0 = time.monotonic()
        c.start()
        while time.monotonic() - t0 < limit:
            time.sleep(0.05)
            pr = c.progress()
            if all(p and num(p.get("accuracy")) >= target for p in pr):
                t = time.monotonic() - t0
                steps = [int(p["step"]) for p in pr]
                return t, steps, sum(steps) * 64
        return None
    finally:
        c.stop()


def lines_tta(cmd, pattern, target, limit, steps_of=None):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         bufsize=1)
    try:
        for line in p.stdout:
            if time.monotonic() - t0 > limit:
                return None
            m = re.search(pattern, line)
            if m and num(m.group(1)) >= target:
                t = time.monotonic() - t0
                f = kv(line)
                steps = steps_of(f) if steps_of else int(f.get("step", 0))
                return t, [steps], steps * 64
        return None
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def train1(build, target, limit):
    cmd = [os.path.join(build, "murmur"), "train", "--model", SPEC, "--epochs", "20"]
    return lines_tta(cmd, r"^epoch=\d+ .*test_accuracy=([0-9.]+)", target, limit,
                     steps_of=lambda f: int(f["epoch"]) * 938)


def torch_run(procs, recipe, target, limit):
    port = free_ports(1)[0]
    every = 938 if procs == 1 else (1000 if procs == 2 else 500)
    cmd = [PY, os.path.join(HERE, "torch_tta.py"), "--procs", str(procs), "--target", str(target),
           "--eval-every", str(every), "--port", str(port), *recipe]
    r = lines_tta(cmd, r"^target_reached .*accuracy=([0-9.]+)", target, limit,
                  steps_of=lambda f: int(f["step"]))
    if r:
        t, steps, _ = r
        r = (t, steps * procs, steps[0] * 64 * procs)
    return r


def torch1(build, target, limit):
    return torch_run(1, ["--lr", "0.05", "--schedule-epochs", "20", "--warmup-epochs", "1",
                         "--min-lr", "0", "--weight-decay", "5e-4"], target, limit)


def ddp(n):
    def f(build, target, limit):
        s = n ** 0.5
        return torch_run(n, ["--lr", f"{0.05 * s}", "--schedule-epochs", "8", "--warmup-epochs",
                             "0.25", "--min-lr", f"{0.0025 * s}", "--weight-decay", "1e-4"],
                         target, limit)
    return f


CONFIGS = {
    "train1": train1,
    # one agent alone with the defaults (not in the default list: what a
    # setting does to a lone agent, beside murmur train)
    "agents1": lambda b, t, l: agents_tta(b, 1, t, l),
    "torch1": torch1,
    "agents2": lambda b, t, l: agents_tta(b, 2, t, l),
    "ddp2": ddp(2),
    "agents4": lambda b, t, l: agents_tta(b, 4, t, l),
    "ddp4": ddp(4),
}
RATIOS = [("agents2", "train1", 0.6), ("agents2", "ddp2", 0.33), ("agents4", "train1", 1.0),
          ("agents4", "ddp4", 0.33), ("train1", "torch1", None), ("agents1", "train1", None)]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def run_tta(args):
    names = args.configs.split(",")
    for nm in names:
        if nm not in CONFIGS:
            sys.exit(f"tta: unknown config {nm}; known: {', '.join(CONFIGS)}")
    res = {nm: [] for nm in names}
    for rep in range(args.reps):
        for nm in names:
            r = CONFIGS[nm](args.build, args.target, args.limit)
            res[nm].append(r)
            if r:
                t, steps, samples = r
                print(f"run rep={rep + 1} config={nm} time_to_target_s={t:.2f} "
                      f"steps={','.join(map(str, steps))} samples={samples}", flush=True)
            else:
                print(f"run rep={rep + 1} config={nm} time_to_target_s=none "
                      f"(not reached within {args.limit} s)", flush=True)
    rows = []
    rows.append("| run | time to %.2f (s, median) | steps per process | samples, all processes |"
                % args.target)
    rows.append("|---|---:|---:|---:|")
    for nm in names:
        ok = [r for r in res[nm] if r]
        t = med([r[0] for r in ok])
        steps = med([statistics.mean(r[1]) for r in ok])
        samples = med([r[2] for r in ok])
        rows.append(f"| {nm} | {fmt(t)} | {fmt(steps, '.0f')} | {fmt(samples, '.0f')} |")
    rows.append("")
    rows.append("| ratio (murmur / peer, median of rounds) | value | target |")
    rows.append("|---|---:|---:|")
    status = 0
    for a, b, goal in RATIOS:
        if a not in res or b not in res:
            continue
        rs = [x[0] / y[0] for x, y in zip(res[a], res[b]) if x and y]
        r = med(rs)
        mark = ""
        if goal is not None and r is not None:
            mark = f"<= {goal}" + (" (met)" if r <= goal else " (MISSED)")
        rows.append(f"| {a} / {b} | {fmt(r, '.3f')} | {mark} |")
        print(f"ratio {a}/{b} = {fmt(r, '.3f')} (rounds: {', '.join(fmt(x, '.3f') for x in rs)})")
    return rows, status


def run_throughput(args):
    window, warm = 10.0, 4.0
    ratios, lone_rates, pair_rates, intervals = [], [], [], []

    extra = []
    for kv in AGENT_SET:
        extra += ["--set", kv]

    def measure(n):
        c = Cluster(args.build, n, extra)
        try:
            c.start()
            time.sleep(warm)
            a = [int(p["step"]) if p else 0 for p in c.progress()]
            t_a = time.monotonic()
            time.sleep(window)
            b = [int(p["step"]) if p else 0 for p in c.progress()]
            dt = time.monotonic() - t_a
            rates = [(y - x) * 64 / dt for x, y in zip(a, b)]
            # the interval each agent's cadence chose (gossip/sched.h)
            intervals.append([p.get("interval_steps", "?") if p else "?" for p in c.progress()])
            return rates
        finally:
            c.stop()

    for rep in range(args.reps):
        if rep % 2 == 0:
            lone = measure(1)[0]
            pair = measure(2)
        else:
            pair = measure(2)
            lone = measure(1)[0]
            intervals[-2:] = intervals[-1:] + intervals[-2:-1]  # lone's first, as in odd rounds
        r = min(pair) / lone if lone else None
        lone_rates.append(lone)
        pair_rates.append(min(pair))
        ratios.append(r)
        print(f"throughput rep={rep + 1} order={'lone,pair' if rep % 2 == 0 else 'pair,lone'} "
              f"lone_samples_per_s={lone:.0f} "
              f"pair_samples_per_s={','.join(f'{x:.0f}' for x in pair)} ratio={fmt(r, '.3f')} "
              f"interval_steps lone={','.join(intervals[-2])} pair={','.join(intervals[-1])}",
              flush=True)
    r = med(ratios)
    rows = ["| run | samples/s per agent (median) |", "|---|---:|",
            f"| 1 agent alone | {fmt(med(lone_rates), '.0f')} |",
            f"| each of 2 agents mixing (the slower) | {fmt(med(pair_rates), '.0f')} |", "",
            "| ratio (2 agents / lone, median of rounds) | value | target |", "|---|---:|---:|",
            f"| samples/s | {fmt(r, '.3f')} | >= 0.85{' (met)' if r and r >= 0.85 else ' (MISSED)'} |",
            "", "Local steps between two rounds at the end of each window (`interval_steps` of the "
            "agents' progress lines; the cadence of `mixing.cost_share`), per round: " +
            "; ".join(f"lone {','.join(intervals[2 * k])}, pair {','.join(intervals[2 * k + 1])}"
                      for k in range(len(intervals) // 2)) + "."]
    print(f"ratio pair/lone = {fmt(r, '.3f')}")
    return rows, 0


def record(path, key, rows, cmd):
    begin, end = f"<!-- bench-peers:{key} begin -->", f"<!-- bench-peers:{key} end -->"
    text = open(path).read() if os.path.exists(path) else ""
    body = (f"{begin}\nMeasured {time.strftime('%Y-%m-%d')} with `{cmd}` "
            f"(2 cores, shared machine):\n\n" + "\n".join(rows) + f"\n{end}")
    if begin in text and end in text:
        i, j = text.index(begin), text.index(end) + len(end)
        text = text[:i] + body + text[j:]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(f"tta: recorded in {path}")


def same_blas_kernels(build):
    """murmur re-executes itself with the OpenBLAS kernels the CPU supports
    when the library falls back to its generic ones (common/blas.h); PyTorch
    loads the same OpenBLAS, so its processes get the same kernels."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return
    out = subprocess.run([os.path.join(build, "murmur"), "version"], capture_output=True,
                         text=True).stdout
    m = re.search(r"^openblas .*\(core (\w+)\)$", out, re.M)
    if m:
        os.environ["OPENBLAS_CORETYPE"] = m.group(1)
        print(f"tta: OpenBLAS kernels {m.group(1)} for every process", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--target", type=float, default=0.88)
    p.add_argument("--limit", type=float, default=150, help="seconds per run")
    p.add_argument("--configs", default="train1,torch1,agents2,ddp2,agents4,ddp4")
    p.add_argument("--throughput", action="store_true")
    p.add_argument("--record", metavar="FILE")
    p.add_argument("--agent-set", action="append", default=[], metavar="KEY=VALUE",
                   help="an agent setting on top of the defaults (repeatable; with --record "
                   "the run gets a section of its own)")
    args = p.parse_args()
    AGENT_SET.extend(args.agent_set)
    same_blas_kernels(args.build)
    cmd = "python3 bench/peers/tta.py " + " ".join(sys.argv[1:])
    if args.throughput:
        rows, st = run_throughput(args)
        key = "throughput"
        if args.agent_set:
            key = "throughput-alt-" + re.sub(r"[^a-z0-9]+", "-",
                                             "-".join(args.agent_set).lower()).strip("-")
            rows.insert(0, "Agent settings on top of the defaults: " +
                        ", ".join(f"`{x}`" for x in args.agent_set) + "\n")
    else:
        rows, st = run_tta(args)
        key = "tta"
        if args.agent_set:
            # an alternative to the defaults gets a section of its own
            key = "tta-alt-" + re.sub(r"[^a-z0-9]+", "-", "-".join(args.agent_set).lower()).strip("-")
            rows.insert(0, "Agent settings on top of the defaults: " +
                        ", ".join(f"`{x}`" for x in args.agent_set) + "\n")
    print("\n".join(rows))
    if args.record:
        record(args.record, key, [r for r in rows], re.sub(r" --record \S+", "", cmd))
    return st


if __name__ == "__main__":
    sys.exit(main())
