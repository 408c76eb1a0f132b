"""The Python binding (python/murmur) against libmurmur: run by
tests/integration/python_binding.sh with MURMUR_LIB, MURMUR_BIN and a
temporary directory. Two agents in this process mix NumPy arrays (and an
array.array without NumPy), the status and shard calls work, errors raise
MurmurError with libmurmur's message, the context manager leaves and
checkpoints, a restart resumes from that checkpoint; a third agent made as
the issue writes it, Agent(config=FILE, **settings) with no model, opens at
its first mix(array), joins (its array replaced by the cluster's model) and
mixes; with PyTorch, the Mixer shares one flat buffer with the module's
parameters.
"""
import array
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import murmur  # noqa: E402

TMP = sys.argv[1]
BIN = os.environ["MURMUR_BIN"]
PORT = 26000 + os.getpid() % 3000
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def keys(name):
    d = os.path.join(TMP, name)
    subprocess.run([BIN, "keygen", "--out", d], check=True, stdout=subprocess.DEVNULL)
    return d


subprocess.run([BIN, "keygen", "--network-key", os.path.join(TMP, "net.key")], check=True,
               stdout=subprocess.DEVNULL)
COMMON = {"node.network_key_file": os.path.join(TMP, "net.key"),
          "model.spec": "host:py-test", "model.schedule_unit": "steps",
          "mixing.interval_steps": 4, "membership.probe_interval_ms": 200,
          "membership.probe_timeout_ms": 100}

check(murmur.version().count(".") == 2, "version")

# errors carry libmurmur's message
try:
    murmur.Agent(10, settings=COMMON, mixing_bits=3, node_data_dir=keys("bad"),
                 node_listen=f"127.0.0.1:{PORT + 9}")
    check(False, "bad bits accepted")
except murmur.MurmurError as e:
    check(e.code == -2 and "mixing.bits" in str(e), f"config error: {e}")
try:
    murmur.Agent(10, settings=COMMON, nodedatadir="x")
    check(False, "bad keyword accepted")
except TypeError:
    check(True, "")

# Agent(config=FILE, **settings): the settings of COMMON in a config file
CONF = os.path.join(TMP, "agent.conf")
with open(CONF, "w") as fh:
    sections = {}
    for k, v in COMMON.items():
        section, key = k.split(".", 1)
        sections.setdefault(section, []).append(f"{key} = {v}")
    for section, lines in sections.items():
        fh.write(f"[{section}]\n" + "\n".join(lines) + "\n")
# no model: nothing opens (no port, no keys read) until the first mix(array)
lazy = murmur.Agent(config=CONF, mixing_bits=3, node_data_dir=keys("lazy"),
                    node_listen=f"127.0.0.1:{PORT + 9}")
check(not lazy.opened and lazy.dim is None, "no model: not open")
try:
    lazy.status()
    check(False, "status of an agent not open")
except murmur.MurmurError as e:
    check(e.code == -1 and "not open yet" in str(e), f"status before open: {e}")
try:
    lazy.mix()
    check(False, "mix() with no array opened the agent")
except TypeError as e:
    check("mix(array)" in str(e), f"mix() before open: {e}")
try:  # the configuration is checked when the agent opens: at this mix
    lazy.mix(array.array("f", [0.0] * 10))
    check(False, "bad bits accepted at open")
except murmur.MurmurError as e:
    check(e.code == -2 and "mixing.bits" in str(e) and not lazy.opened, f"open error: {e}")
check(lazy.close() == 0, "close of an agent never opened")
try:
    murmur.Agent(config=os.path.join(TMP, "no-such.conf"))
    check(False, "missing config file accepted")
except FileNotFoundError:
    check(True, "")

try:
    import numpy as np
except ImportError:
    np = None

if np is not None:
    DIM = 2048
    a_w = np.full(DIM, 3.0, dtype=np.float32)
    b_w = np.full(DIM, 7.0, dtype=np.float32)
    a = murmur.Agent(model=a_w, settings=COMMON, node_data_dir=keys("a"),
                     node_listen=f"127.0.0.1:{PORT}")
    check(a.opened and a.dim == DIM, "model= opens at once")
    check(a.wait_ready(timeout=10) == "own", "a own")
    b = murmur.Agent(b_w, settings=COMMON, node_data_dir=keys("b"),
                     node_listen=f"127.0.0.1:{PORT + 1}", seeds_seed=f"127.0.0.1:{PORT}")
    check(b.wait_ready(timeout=20) == "transfer", "b transfer")
    check(float(b_w[0]) == 3.0, "b took a's model in place")
    for step in range(300):
        a_w += 0.01
        b_w -= 0.01
        check(a.mix(samples=64) in ("none", "mixed"), "a mix")
        check(b.mix(samples=64) in ("none", "mixed"), "b mix")
        time.sleep(0.002)
    gap = abs(float(a_w.mean()) - float(b_w.mean()))
    st = a.status()
    print(f"numpy: gap {gap:.3f} (6.0 without mixing), rounds {st['mixing_rounds']}")
    check(gap < 1.0, f"mixing holds the hosts together: gap {gap}")
    check(st["steps"] == 300 and st["samples"] == 300 * 64, f"counted {st}")
    check(st["peers"] == 1 and st["state"] == "training", f"status {st}")
    check(st["mixing_rounds"] >= 10 and a.lr > 0, "rounds and lr")
    # the form: Agent(config=FILE, **settings); the model at the first mix
    c_w = np.full(DIM, -50.0, dtype=np.float32)
    with murmur.Agent(config=CONF, node_data_dir=keys("c"), node_listen=f"127.0.0.1:{PORT + 3}",
                      seeds_seed=f"127.0.0.1:{PORT}") as c:
        check(not c.opened, "c: not open before its first mix")
        check(c.mix(c_w, samples=64) == "replaced", "c: the first mix joins by transfer")
        check(c.opened and c.dim == DIM, "c: opened for the array's length")
        check(abs(float(c_w.mean()) - float(a_w.mean())) < 1.0,
              f"c: took the cluster's model in place: {c_w.mean()} vs {a_w.mean()}")
        for step in range(100):
            c_w -= 0.01
            check(c.mix(samples=64) in ("none", "mixed"), "c mix (the array remembered)")
            a.mix(samples=64)
            b.mix(samples=64)
            time.sleep(0.002)
        deadline = time.time() + 20  # status() is a snapshot the runtime refreshes
        while True:
            cst = c.status()
            if cst["peers"] == 2 and cst["mixing_rounds"] >= 1 or time.time() > deadline:
                break
            c.mix(steps=0)
            a.mix(steps=0)
            b.mix(steps=0)
            time.sleep(0.05)
        check(cst["steps"] == 101 and cst["mixing_rounds"] >= 1 and cst["peers"] == 2 and
              cst["state"] == "training", f"c status {cst}")
    check(not c.opened, "c: closed by the with block")
    gen, paths, reason = a.shards()
    check(paths == [], "no catalog: no shards")
    out = np.zeros(DIM, dtype=np.float32)
    a.latest(out)
    check(np.isfinite(out).all() and abs(float(out.mean()) - float(a_w.mean())) < 1.0, "latest")
    a.report(0.5, 0.6, 0.7)
    # wrong buffers are refused before any C call
    for bad, exc in ((np.zeros(DIM, dtype=np.float64), TypeError),
                     (np.zeros(DIM + 1, dtype=np.float32), ValueError),
                     (np.zeros(2 * DIM, dtype=np.float32)[::2], TypeError)):
        try:
            a.mix(bad)
            check(False, "bad buffer accepted")
        except exc:
            check(True, "")
    a_w[5] = math.nan
    refused, calls = 0, 0
    while not refused and calls < 2000:  # the call that makes a round due refuses it
        calls += 1
        try:
            a.mix()
        except murmur.MurmurError as e:
            check(e.code == -8, "nonfinite")
            refused = 1
        time.sleep(0.001)
    check(refused == 1, "a round with a NaN refused")
    a_w[5] = a_w[4]
    check(b.close() == 0, "b close")
    with a:
        pass  # leave, pending changes into a_w, final checkpoint of a_w
    final = a_w.copy()
    # restart on a's data directory: resumes from its checkpoint
    w = array.array("f", [0.0] * DIM)  # no NumPy needed for the buffer
    with murmur.Agent(w, settings=COMMON, node_data_dir=os.path.join(TMP, "a"),
                      node_listen=f"127.0.0.1:{PORT}") as again:
        check(again.wait_ready(timeout=10) == "checkpoint", "resumed from checkpoint")
        check(max(abs(w[i] - float(final[i])) for i in range(DIM)) == 0.0, "checkpoint bits")
        check(again.status()["steps"] == 300 + 100 + calls, "steps resumed")

if np is not None:
    # murmur.data reads shard files with the C loader's checks
    from murmur.data import ShardError, load_shard
    out = os.path.join(TMP, "shards")
    subprocess.run([BIN, "shard", "--shards", "4", "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    files = sorted(f for f in os.listdir(out) if f.endswith(".msh"))
    total = 0
    for f in files:
        x, y, classes = load_shard(os.path.join(out, f))
        check(x.dtype == np.uint8 and x.shape[1] == 784 and y.shape[0] == x.shape[0],
              "shard shapes")
        check(classes == 10 and int(y.max()) < 10, "labels")
        total += x.shape[0]
    check(total == 60000, f"samples of the split: {total}")
    bad = os.path.join(out, files[0])
    with open(bad, "r+b") as fh:
        fh.seek(500)
        b = fh.read(1)
        fh.seek(500)
        fh.write(bytes([b[0] ^ 0xFF]))
    try:
        load_shard(bad)
        check(False, "damaged shard accepted")
    except ShardError as e:
        check("hash" in str(e), f"damaged shard: {e}")

try:
    import torch
except ImportError:
    torch = None
if torch is not None and np is not None:
    import murmur.torch as mt
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    mixer = mt.Mixer(net, opt, every=2, settings=COMMON, node_data_dir=keys("t"),
                     node_listen=f"127.0.0.1:{PORT + 2}")
    check(mixer.wait_ready(timeout=10) == "own", "torch own")
    n = sum(p.numel() for p in net.parameters())
    check(mixer.array.size == n and mixer.agent.dim == n, "flat size")
    mixer.array[0] = 42.0  # the buffer IS the parameters
    check(float(next(net.parameters()).view(-1)[0]) == 42.0, "shared storage")
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    for _ in range(6):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        mixer.step(samples=16)
    check(mixer.agent.status()["steps"] == 6, "torch steps counted")
    check(mixer.close() == 0, "torch close")
print(f"python_binding: {checks} checks passed (numpy={'yes' if np is not None else 'no'}, "
      f"torch={'yes' if torch is not None else 'no'})")
