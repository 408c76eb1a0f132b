"""Where N mixing agents' CPU goes, per thread, from /proc: the CPU time
and the context switches of every thread of every agent over a window,
summed by thread name, and per mixing round.

    /usr/bin/python3 bench/peers/agent_cpu.py BUILD [--agents N]
        [--warmup S] [--window S] [--agent-set KEY=VALUE ...]

The agents are started as tta.py starts them (127.0.0.1, every agent
holding the whole shard set, the MLP of issue 12, the defaults plus
--agent-set). After --warmup seconds, every thread's utime + stime
(/proc/PID/task/TID/stat) and its voluntary and involuntary context
switches (.../status) are read, and again --window seconds later; the
agents' progress lines give the local steps and the mixing rounds in
between (rounds summed over the agents: one agent-round is an agent's
own exchange plus, for pairwise gossip, the pushes it answers meanwhile).

Prints one line per thread name (`murmur` is the training thread,
`murmur-loop` the event loop, `nng:*` NNG's threads) and a last line with
the share of all CPU outside the training threads and that CPU per
agent-round in milliseconds. Print only: nothing is recorded.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tta  # noqa: E402  (the Cluster of the time-to-accuracy bench)

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def threads(pid):
    """{tid: (name, cpu ticks, voluntary, involuntary switches)}"""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        kv = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        out[tid] = (name, int(fields[11]) + int(fields[12]),
                    int(kv["voluntary_ctxt_switches"]), int(kv["nonvoluntary_ctxt_switches"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--agent-set", action="append", default=[])
    a = ap.parse_args()
    extra = []
    for kv in a.agent_set:
        extra += ["--set", kv]
    c = tta.Cluster(a.build, a.agents, extra)
    try:
        c.start()
        time.sleep(a.warmup)
        before = [threads(p.pid) for p in c.procs]
        p0 = c.progress()
        time.sleep(a.window)
        after = [threads(p.pid) for p in c.procs]
        p1 = c.progress()
    finally:
        c.stop()
    if not all(p0) or not all(p1):
        print("agent_cpu: an agent printed no progress line; nothing measured")
        return 1
    tot = {}
    for b, e in zip(before, after):
        for tid, (name, cpu, vol, inv) in e.items():
            o = b.get(tid, (name, 0, 0, 0))
            t = tot.setdefault(name, [0, 0, 0])
            t[0] += cpu - o[1]
            t[1] += vol - o[2]
            t[2] += inv - o[3]
    rounds = sum(int(q["round"]) - int(p["round"]) for p, q in zip(p0, p1))
    steps = sum(int(q["step"]) - int(p["step"]) for p, q in zip(p0, p1))
    print(f"agent_cpu agents={a.agents} window_s={a.window:g} steps={steps} "
          f"agent_rounds={rounds} settings={','.join(a.agent_set) or 'defaults'}")
    per = max(rounds, 1)
    for name, (cpu, vol, inv) in sorted(tot.items()):
        if cpu or vol or inv:
            print(f"  thread={name} cpu_s={cpu * TICK_S:.2f} voluntary_per_round={vol / per:.2f} "
                  f"involuntary_per_round={inv / per:.2f}")
    train = tot.get("murmur", [0])[0]
    other = sum(v[0] for k, v in tot.items() if k != "murmur")
    share = other / (train + other) if train + other else 0.0
    print(f"  outside_training_share={share:.3f} "
          f"outside_training_ms_per_agent_round={1e3 * other * TICK_S / per:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
