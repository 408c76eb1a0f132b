"""murmur for Python: the agent runtime of libmurmur (include/murmur.h) from a
Python training loop, through ctypes. Standard library only; NumPy arrays
(and any writable, C-contiguous float32 buffer) are passed without copies.

    import numpy as np, murmur
    w = np.zeros(1000, dtype=np.float32)
    with murmur.Agent(config="agent.conf", node_data_dir="/var/lib/h1",
                      seeds_seed="10.0.0.1:7000") as agent:
        for step in range(10000):
            w -= lr * grad(w)                # your training step, in place
            if agent.mix(w, samples=64) == "replaced":
                reset_optimizer()            # w is a checkpoint's or a peer's model
    # leaving the block: graceful leave, final checkpoint

Settings are those of `murmur agent` (docs/CONFIG.md): a config file
(`config=`), a dict of "section.key" -> value (`settings=`), or keyword
arguments where the first underscore separates the section from the key
(`mixing_bits=8` is mixing.bits, `node_data_dir=...` is node.data_dir).

The agent opens (murmur_open: keys, port, joining the seeds) when it first
gets the model, a float32 buffer: `Agent(..., model=w)` opens at once;
otherwise the first `mix(w)` or `wait_ready(w)` opens it and joins (waits
until the agent holds a model: its checkpoint, a peer's, or w), and that
first mix returns "replaced" when w was replaced. Before that, status(),
shards() and lr raise MurmurError: open with wait_ready(w) to read the
shard assignment before the first step.

The shared library is found from $MURMUR_LIB, then the build directory of
the source tree this package sits in (build/libmurmur.so), then the
system's (`ctypes.util.find_library("murmur")`, libmurmur.so.0).

Threads: one Agent must not be used from two threads at once, except
status(), lr and shards(), as in murmur.h.
"""
import ctypes
import ctypes.util
import math
import os

__all__ = ["Agent", "MurmurError", "library", "version"]

MIX_RESULTS = {0: "none", 1: "mixed", 2: "replaced"}
EINVAL, ECONFIG, ETIMEDOUT = -1, -2, -5  # murmur_err (include/murmur.h)
# Joining waits in slices of this many ms, so that Ctrl-C (KeyboardInterrupt)
# is seen within half a second rather than when the join ends.
_WAIT_SLICE_MS = 500
SOURCES = {0: "own", 1: "checkpoint", 2: "transfer"}


class MurmurError(RuntimeError):
    """A libmurmur call failed: .code is the murmur_err, str() the message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Status(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("node_id", ctypes.c_uint64),
                ("address", ctypes.c_char * 64), ("state", ctypes.c_char * 24),
                ("peers", ctypes.c_uint32), ("view_epoch", ctypes.c_uint64),
                ("round", ctypes.c_uint64), ("mixing_rounds", ctypes.c_uint64),
                ("round_aborts", ctypes.c_uint64), ("consensus", ctypes.c_double),
                ("bytes_sent", ctypes.c_uint64), ("bytes_received", ctypes.c_uint64),
                ("steps", ctypes.c_uint64), ("samples", ctypes.c_uint64),
                ("cluster_epochs", ctypes.c_double), ("lr", ctypes.c_float),
                ("shards_held", ctypes.c_uint32), ("shards_primary", ctypes.c_uint32),
                ("shards_generation", ctypes.c_uint64)]


class _ShardList(ctypes.Structure):
    _fields_ = [("generation", ctypes.c_uint64), ("count", ctypes.c_size_t),
                ("paths", ctypes.POINTER(ctypes.c_char_p)), ("reason", ctypes.c_char_p),
                ("why", ctypes.c_char * 96)]


def _find_library():
    env = os.environ.get("MURMUR_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, "..", "..", "build", "libmurmur.so")
    if os.path.exists(tree):
        return os.path.abspath(tree)
    found = ctypes.util.find_library("murmur")
    return found or "libmurmur.so.0"


_lib = None


def library():
    """The loaded libmurmur (ctypes.CDLL), loaded on first use."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_find_library())
    P, F = ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)
    sig = {
        "murmur_version": ([], ctypes.c_char_p),
        "murmur_version_number": ([], ctypes.c_uint),
        "murmur_strerror": ([ctypes.c_int], ctypes.c_char_p),
        "murmur_open": ([ctypes.POINTER(P), ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                         ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
        "murmur_wait_ready": ([P, F, F, ctypes.c_int, ctypes.POINTER(ctypes.c_int)],
                              ctypes.c_int),
        "murmur_mix": ([P, F, ctypes.c_uint32, ctypes.c_uint64], ctypes.c_int),
        "murmur_lr": ([P], ctypes.c_float),
        "murmur_latest": ([P, F], ctypes.c_int),
        "murmur_report": ([P, ctypes.c_double, ctypes.c_double, ctypes.c_double], None),
        "murmur_checkpoint": ([P, F, F], ctypes.c_int),
        "murmur_status_get": ([P, ctypes.POINTER(_Status)], ctypes.c_int),
        "murmur_shards_get": ([P, ctypes.POINTER(ctypes.POINTER(_ShardList))], ctypes.c_int),
        "murmur_shards_free": ([ctypes.POINTER(_ShardList)], None),
        "murmur_shard_damaged": ([P, ctypes.c_char_p], ctypes.c_int),
        "murmur_stop": ([P], None),
        "murmur_close": ([P, F, F], ctypes.c_int),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    _lib = lib
    return lib


def version():
    """The library's version, e.g. "0.2.0"."""
    return library().murmur_version().decode()


def _strerror(code):
    return library().murmur_strerror(code).decode()


def _floats(array, dim, what):
    """A ctypes float pointer into array (no copy): a writable, C-contiguous
    buffer of dim float32 values (a NumPy array, array.array('f'), ...)."""
    if array is None:
        return None
    mv = memoryview(array)
    if mv.format not in ("f", "<f", "=f") or mv.itemsize != 4:
        raise TypeError(f"{what}: need float32 values, got format {mv.format!r}")
    if not mv.c_contiguous:
        raise TypeError(f"{what}: need a C-contiguous buffer")
    if mv.readonly:
        raise TypeError(f"{what}: need a writable buffer")
    if mv.nbytes != 4 * dim:
        raise ValueError(f"{what}: {mv.nbytes // 4} values, the agent has {dim}")
    return ctypes.cast((ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B")),
                       ctypes.POINTER(ctypes.c_float))


def _settings(settings, kwargs):
    out = []
    for k, v in (settings or {}).items():
        out.append(f"{k}={_text(v)}")
    for k, v in kwargs.items():
        if "_" not in k:
            raise TypeError(f"setting {k!r}: write SECTION_KEY, e.g. mixing_bits=8")
        section, key = k.split("_", 1)
        values = v if isinstance(v, (list, tuple)) else [v]
        for item in values:  # seeds_seed=[a, b] repeats the key
            out.append(f"{section}.{key}={_text(item)}")
    return out


def _text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _is_model(x):
    """A model (float32 buffer or length), as opposed to a config path."""
    return x is not None and not isinstance(x, (str, bytes, os.PathLike, dict))


class Agent:
    """One murmur agent (murmur_open) for a model of float32 values.

    Agent(config=None, settings=None, *, model=None, **settings_kw):
    config a config file, settings a dict of "section.key" -> value,
    settings_kw keywords such as mixing_bits=8 (applied in that order, after
    the environment's MURMUR_* variables). model is the model's buffer (a
    NumPy float32 array, array.array("f"), ...: mix(), wait_ready() and
    close() use it when called without one) or its length; without it the
    agent opens at the first mix(array) or wait_ready(array). The old form
    Agent(model, config=None, ...) with the model first is still accepted.
    """

    def __init__(self, config=None, settings=None, *, model=None, **kwargs):
        if _is_model(config):  # the old form: Agent(model, [config], settings=...)
            if model is not None:
                raise TypeError("Agent: the model given twice (first argument and model=)")
            model, config = config, None
            if isinstance(settings, (str, bytes, os.PathLike)):
                config, settings = settings, None
        self._h = None
        self._lib = library()
        self.dim, self.params = None, None
        self._config = os.fsencode(config) if config is not None else None
        if self._config is not None:
            with open(self._config, "rb"):  # a missing file is reported here, not at open
                pass
        self._items = _settings(settings, kwargs)  # bad keywords: TypeError now
        self._need_join = False  # opened by mix(array): that mix joins first
        if model is not None:
            self._open(model)

    def _open(self, model):
        """murmur_open for this model (buffer or length)."""
        if isinstance(model, int):
            dim, params = model, None
        else:
            dim, params = memoryview(model).nbytes // 4, model
            _floats(model, dim, "model")
        arr = (ctypes.c_char_p * (len(self._items) + 1))(*[s.encode() for s in self._items],
                                                         None)
        err = ctypes.create_string_buffer(1024)
        handle = ctypes.c_void_p()
        rc = self._lib.murmur_open(ctypes.byref(handle), self._config, arr, dim, err, len(err))
        if rc:
            raise MurmurError(rc, err.value.decode() or _strerror(rc))
        self._h, self.dim, self.params = handle, dim, params

    @property
    def opened(self):
        """True once the agent has been opened (and until close())."""
        return self._h is not None

    # -- lifecycle --
    def _handle(self):
        if self._h is None:
            if self.dim is None:
                raise MurmurError(EINVAL, "the agent is not open yet: it opens at the first "
                                  "mix(array) or wait_ready(array), or give Agent(model=...)")
            raise MurmurError(-6, "the agent is closed")
        return self._h

    def _open_for(self, params, what):
        """Lazy open: the first call that hands over the model opens the agent."""
        if self._h is not None or self.dim is not None:
            return
        if params is None or isinstance(params, int):
            raise TypeError(f"{what}: the agent is not open yet: give the model, "
                            f"{what}(array), to open it")
        self._open(params)
        self._need_join = True

    def wait_ready(self, params=None, momentum=None, timeout=None):
        """Wait until the agent holds a model; params holds the host's initial
        model and receives the agent's. Returns "own", "checkpoint" or
        "transfer". timeout in seconds (None = forever). Opens the agent
        if it is not open yet (params then required)."""
        self._open_for(params, "wait_ready")
        params = self.params if params is None else params
        src = ctypes.c_int(0)
        p = _floats(params, self.dim, "params")
        m = _floats(momentum, self.dim, "momentum")
        left = None if timeout is None else max(0, int(timeout * 1000))
        while True:  # in slices, so Ctrl-C is not held until the join ends
            ms = _WAIT_SLICE_MS if left is None else min(left, _WAIT_SLICE_MS)
            rc = self._lib.murmur_wait_ready(self._handle(), p, m, ms, ctypes.byref(src))
            if rc != ETIMEDOUT or (left is not None and left <= ms):
                break
            if left is not None:
                left -= ms
        if rc:
            raise MurmurError(rc, _strerror(rc))
        self._need_join = False
        return SOURCES.get(src.value, "own")

    def mix(self, params=None, steps=1, samples=0):
        """After local steps: apply a finished round in place, start one when
        due. Returns "none", "mixed" or "replaced" (reset your optimizer).
        The first mix(array) of an agent not yet open opens it and joins
        (wait_ready): "replaced" if the array became a checkpoint's or a
        peer's model."""
        joined = None
        self._open_for(params, "mix")
        if self._need_join:
            joined = self.wait_ready(params)
        params = self.params if params is None else params
        rc = self._lib.murmur_mix(self._handle(), _floats(params, self.dim, "params"),
                                  int(steps), int(samples))
        if rc < 0:
            raise MurmurError(rc, _strerror(rc))
        if joined is not None and joined != "own":
            return "replaced"
        return MIX_RESULTS[rc]

    @property
    def lr(self):
        """The schedule's learning rate for the next step."""
        return self._lib.murmur_lr(self._handle())

    def latest(self, out):
        """Copy the last mixed model into out (a float32 buffer of dim)."""
        rc = self._lib.murmur_latest(self._handle(), _floats(out, self.dim, "out"))
        if rc:
            raise MurmurError(rc, _strerror(rc))
        return out

    def report(self, train_loss=math.nan, test_loss=math.nan, accuracy=math.nan):
        """Training figures for /status, /metrics and the progress log."""
        self._lib.murmur_report(self._handle(), float(train_loss), float(test_loss),
                                float(accuracy))

    def checkpoint(self, params, momentum=None):
        rc = self._lib.murmur_checkpoint(self._handle(), _floats(params, self.dim, "params"),
                                         _floats(momentum, self.dim, "momentum"))
        if rc:
            raise MurmurError(rc, _strerror(rc))

    def status(self):
        """A dict of the agent's status (murmur_status_get)."""
        st = _Status(size=ctypes.sizeof(_Status))
        rc = self._lib.murmur_status_get(self._handle(), ctypes.byref(st))
        if rc:
            raise MurmurError(rc, _strerror(rc))
        out = {}
        for name, _ in _Status._fields_:
            if name == "size":
                continue
            v = getattr(st, name)
            out[name] = v.decode() if isinstance(v, bytes) else v
        return out

    def shards(self):
        """(generation, [shard file paths], reason): what to train on now."""
        lst = ctypes.POINTER(_ShardList)()
        rc = self._lib.murmur_shards_get(self._handle(), ctypes.byref(lst))
        if rc:
            raise MurmurError(rc, _strerror(rc))
        try:
            l = lst.contents
            paths = [l.paths[i].decode() for i in range(l.count)]
            return l.generation, paths, (l.reason or b"").decode()
        finally:
            self._lib.murmur_shards_free(lst)

    def shard_damaged(self, path):
        """A shard file of the assignment did not load: quarantine and refetch."""
        rc = self._lib.murmur_shard_damaged(self._handle(), path.encode())
        if rc:
            raise MurmurError(rc, _strerror(rc))

    def stop(self):
        self._lib.murmur_stop(self._handle())

    def close(self, params=None, momentum=None):
        """Leave gracefully, apply pending mixing changes to params, write the
        final checkpoint. Returns the agent's exit status (0 = normal)."""
        if self._h is None:
            return 0  # never opened, or closed already
        params = self.params if params is None else params
        h, self._h = self._h, None
        return self._lib.murmur_close(h, _floats(params, self.dim, "params"),
                                      _floats(momentum, self.dim, "momentum"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            self.close()
