#!/usr/bin/env python3
"""The simulator under SWIM membership at growing cluster sizes.

Runs `murmur sim` with `membership.mode = swim` (every agent runs the real
protocol core, gossip/node: SWIM, its own view, the mixer on that view) at
N = 1024, 2048, ... up to --max agents (SIM_SWIM_AGENTS_MAX, 16384, by
default): the consensus model (16 values), pairwise gossip with random
peers, a step every 100 ms, 200 ms probe periods, --duration simulated
seconds (10) from a cold start where every agent joins through three others
at once. Prints, and records in docs/BENCHMARKS.md between
<!-- bench:sim_swim_scale begin --> and <!-- bench:sim_swim_scale end -->,
each size's wall and CPU seconds, peak RSS and RSS per member pair (N^2:
every agent holds a table of the whole cluster), events, bytes sent by the
busiest agent, and how many agents' views were not yet exactly the live
set at the end (views_wrong_final), with the growth from the size before.

    python3 bench/sim_swim_scale.py [--build build] [--max 16384] [--duration 10]
                                    [--record docs/BENCHMARKS.md | --no-record]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SCENARIO = """[run]
seed = 1
mode = timed
[model]
kind = consensus
dim = 16
[mixing]
algorithm = gossip
topology = random
[compute]
step_ms = 100
[membership]
mode = swim
"""


def run_one(build, n, duration, tmp):
    ini = os.path.join(tmp, "swim.ini")
    with open(ini, "w") as f:
        f.write(SCENARIO)
    out = os.path.join(tmp, "out%d" % n)
    cmd = [os.path.join(build, "murmur"), "sim", ini, "--out", out, "--quiet",
           "--set", "run.agents=%d" % n, "--set", "run.duration_s=%g" % duration]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = p.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if status != 0:
        sys.stdout.write(text)
        raise SystemExit("sim_swim_scale: murmur sim failed at %d agents" % n)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    return {
        "agents": n,
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "rss_mib": ru.ru_maxrss / 1024.0,
        "rss_per_pair": ru.ru_maxrss * 1024.0 / (n * n),
        "events": s["events"],
        "bytes_max": s["bytes_per_agent_max"],
        "views_wrong": s["views_wrong_final"],
        "hash": s["trace_hash"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--max", type=int, default=16384)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--record", default="docs/BENCHMARKS.md")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    if not os.access(os.path.join(a.build, "murmur"), os.X_OK):
        raise SystemExit("sim_swim_scale: %s/murmur is missing; run make" % a.build)
    rows = []
    n = 1024
    with tempfile.TemporaryDirectory() as tmp:
        while n <= a.max:
            r = run_one(a.build, n, a.duration, tmp)
            print("swim_scale agents=%d wall_s=%.1f cpu_s=%.1f rss_mib=%.0f rss_per_pair=%.0f "
                  "events=%d bytes_per_agent_max=%d views_wrong_final=%d trace_hash=%s" %
                  (r["agents"], r["wall_s"], r["cpu_s"], r["rss_mib"], r["rss_per_pair"],
                   r["events"], r["bytes_max"], r["views_wrong"], r["hash"]), flush=True)
            rows.append(r)
            n *= 2
    load = open("/proc/loadavg").read().split()[:3]
    cmd = "python3 bench/sim_swim_scale.py --build %s --max %d --duration %g" % (
        a.build, a.max, a.duration)
    lines = ["<!-- bench:sim_swim_scale begin -->", "",
             "Produced by `%s` on %s, load average %s on %d cores; do not edit by hand. "
             "Growth = this row / the row above (x4 is N^2)." %
             (cmd, time.strftime("%Y-%m-%d", time.gmtime()), " ".join(load), os.cpu_count()),
             "",
             "| agents | simulated s | wall s | CPU s | growth | peak RSS (MiB) | growth | RSS bytes "
             "per member pair (N^2) | events | busiest agent's bytes sent | views not exact at "
             "the end |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    prev = None
    for r in rows:
        cg = "x%.2f" % (r["cpu_s"] / prev["cpu_s"]) if prev else "-"
        mg = "x%.2f" % (r["rss_mib"] / prev["rss_mib"]) if prev else "-"
        lines.append("| %d | %g | %.1f | %.1f | %s | %.0f | %s | %.0f | %d | %d | %d |" %
                     (r["agents"], a.duration, r["wall_s"], r["cpu_s"], cg, r["rss_mib"], mg,
                      r["rss_per_pair"], r["events"], r["bytes_max"], r["views_wrong"]))
        prev = r
    lines += ["", "<!-- bench:sim_swim_scale end -->"]
    table = "\n".join(lines) + "\n"
    if a.no_record:
        sys.stdout.write(table)
        return
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(table)
        tpath = f.name
    try:
        rc = subprocess.call(["sh", "-c", '. scripts/record.sh && record_block "$0" "$1" "$2"',
                              a.record, "bench:sim_swim_scale", tpath])
    finally:
        os.unlink(tpath)
    if rc != 0:
        raise SystemExit("sim_swim_scale: cannot write %s" % a.record)
    print("sim_swim_scale: recorded in %s" % a.record)


if __name__ == "__main__":
    main()
