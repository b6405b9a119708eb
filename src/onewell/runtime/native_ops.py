"""Validating Python wrappers of the native thread pool and the small ops of a step (onewell/_native/ops.h).

    ThreadPool(n_threads)                        persistent workers (n_threads counts the caller); .close()
    rmsnorm(x, w, eps, out=None)                 x: (dim,) or (rows, dim)
    layernorm(x, w, b, eps, path="avx2")         LayerNorm with bias (encoders), on the generic or AVX2 kernel
    rope_table(pos, n_rot, freq_base)            -> (n_tok, n_rot/2, 2) float32 {cos, sin}
    rope(x, pos, freq_base, style, n_rot=None)   in place on x: (n_tok, n_head, head_dim) or (n_head, head_dim)
    rope_apply(x, table, style)                  the same with a table from rope_table
    attention(q, k, v, n_ctx=None, scale=None, pool=None, out=None)
                                                 q: (n_head, hd); k, v: (cap, n_head_kv, hd) float32 or float16,
                                                 or uint8 (cap, n_head_kv, hd/32*34): q8_0 blocks (kv_store)
    kv_store(x, kv_type, path=None)              x: (..., hd) float32 -> the KV cache's stored form of kv_type
    swiglu(g, u, out=None), geglu(g, u, out=None), softcap(x, cap, out=None), add(a, b, out=None), add_bias(x, bias) (in place), softmax(x, out=None), argmax(x)
    f32_to_f16(x) -> float16, f16_to_f32(x) -> float32

Every shape, dtype, contiguity and size is checked here before C sees it (C repeats only the memory-safety
checks); the GIL is released while C runs. Results are the same for any pool size (ops.h: determinism).
"""
from __future__ import annotations

import numpy as np

from onewell._native import _core

ROPE_STYLES = {"normal": 0, "neox": 1}
ISA_PATHS = ("generic", "avx2", "avx512", "neon", "dotprod")
# the ops paths each ISA level allows, most portable first (the ops have no dotprod code: that level runs neon)
_OPS_LADDER = {"generic": ("generic",), "avx2": ("generic", "avx2"), "avxvnni": ("generic", "avx2"),
               "avx512": ("generic", "avx2", "avx512"),
               "neon": ("generic", "neon"), "dotprod": ("generic", "neon")}
# the ops path that goes with each kernel path (native_kernels.KERNEL_PATHS), for tests pairing the two
KERNEL_PATH_OPS_ISA = {"generic": "generic", "avx2": "avx2", "avx2-vnni": "avx2", "avx512": "avx512",
                       "neon": "neon", "neon-dotprod": "neon"}
MAX_THREADS = 1024


class ThreadPool:
    """The native pool: n_threads - 1 persistent workers plus the calling thread. Idle workers sleep."""

    def __init__(self, n_threads: int):
        if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)):
            raise TypeError(f"n_threads must be an int, got {type(n_threads).__name__}")
        if not 1 <= int(n_threads) <= MAX_THREADS:
            raise ValueError(f"n_threads must be 1..{MAX_THREADS}, got {n_threads}")
        self._capsule = _core.pool_create(int(n_threads))
        self._n_threads = int(n_threads)

    @property
    def n_threads(self) -> int:
        return self._n_threads

    @property
    def capsule(self):
        """The handle C functions take; raises once the pool is closed."""
        if self._capsule is None:
            raise ValueError("the thread pool is closed")
        return self._capsule

    @property
    def spin_us(self) -> float:
        """How long idle workers spin before sleeping in the kernel (microseconds)."""
        return _core.pool_spin_us(self.capsule)

    @spin_us.setter
    def spin_us(self, us: float) -> None:
        if not 0 <= float(us) <= 1e9:
            raise ValueError(f"spin_us must be 0..1e9, got {us}")
        _core.pool_set_spin_us(self.capsule, float(us))

    def overhead_seconds(self, n_calls: int = 1000, n_items: int = 64, chunk: int = 0, static: bool = False) -> float:
        """Mean wall time of one parallel_for over empty tasks (the per-call cost of the pool)."""
        if n_calls < 1 or n_items < 0:
            raise ValueError("n_calls must be >= 1 and n_items >= 0")
        return _core.pool_overhead(self.capsule, int(n_calls), int(n_items), int(chunk), bool(static))

    def chunks_by_worker(self, n_items: int, chunk: int, work: int = 0) -> list[int]:
        """Runs one dynamic job of n_items items (each `work` busy iterations); returns how many chunks each
        thread ran (index 0 = the caller). Shows who took part; the sum is the number of chunks."""
        if not 0 <= n_items <= 1 << 28 or work < 0:
            raise ValueError("n_items must be 0..2^28 and work >= 0")
        return _core.pool_chunks_by_worker(self.capsule, int(n_items), int(chunk), int(work))

    def close(self) -> None:
        """Stops the workers (when no other reference to the handle is alive). Idempotent."""
        self._capsule = None

    def __enter__(self) -> ThreadPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._capsule is None else f"spin {self.spin_us:g} us"
        return f"ThreadPool(n_threads={self._n_threads}, {state})"


def pool_stress(n_threads: int, n_jobs: int, n_items: int, chunk: int, static: bool = False,
                nested: bool = False, work: int = 0) -> int:
    """Creates a pool, runs n_jobs tiny jobs over n_items items in C, destroys it; checks each item ran exactly
    once per job (raises RuntimeError otherwise). `chunk` is the align of a static job. nested: each task runs
    its range as an inner job on the same pool. work: busy-loop iterations per item (longer jobs, so every
    worker joins). Returns n_jobs * sum(1..n_items) when all went right."""
    if not 1 <= n_threads <= MAX_THREADS or n_jobs < 0 or not 0 <= n_items <= 1 << 28 or work < 0:
        raise ValueError("pool_stress: bad parameters")
    return _core.pool_stress(int(n_threads), int(n_jobs), int(n_items), int(chunk), bool(static), bool(nested),
                             int(work))


def ops_isa() -> str:
    """The ISA path the ops run on: 'avx512', 'avx2', 'neon' or 'generic'."""
    return _core.ops_isa()


def set_ops_isa(name: str) -> None:
    """Switch every op to another ISA path (for tests; not while ops run on other threads)."""
    if name not in ISA_PATHS:
        raise ValueError(f"ISA path must be one of {ISA_PATHS}, got {name!r}")
    _core.ops_set_isa(name)


def available_isas() -> tuple[str, ...]:
    """ISA paths this CPU (and the ONEWELL_ISA cap) allows, most portable first."""
    return _OPS_LADDER[_core.cpu_features()["isa"]]


# ---------------------------------------------------------------------------------------------------------
# checks


def _array(name: str, a, dtypes: tuple, ndims: tuple[int, ...]) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if a.dtype not in dtypes:
        raise TypeError(f"{name} must be {' or '.join(str(np.dtype(d)) for d in dtypes)}, got {a.dtype}")
    if a.ndim not in ndims:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndims))} dimensions, got shape {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    return a


def _f32(name: str, a, ndims: tuple[int, ...] = (1,)) -> np.ndarray:
    return _array(name, a, (np.float32,), ndims)


def _out(name: str, out, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype=dtype)
    _array(name, out, (dtype,), (len(shape),))
    if out.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {out.shape}")
    if not out.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return out


def _writable(name: str, a: np.ndarray) -> None:
    if not a.flags.writeable:
        raise ValueError(f"{name} must be writable (it is changed in place)")


def _pool_capsule(pool: ThreadPool | None):
    if pool is None:
        return None
    if not isinstance(pool, ThreadPool):
        raise TypeError(f"pool must be a ThreadPool or None, got {type(pool).__name__}")
    return pool.capsule


# ---------------------------------------------------------------------------------------------------------
# ops


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float, out: np.ndarray | None = None) -> np.ndarray:
    x = _f32("x", x, (1, 2))
    w = _f32("w", w)
    dim = x.shape[-1]
    if dim == 0 or w.shape != (dim,):
        raise ValueError(f"w must have shape ({dim},) matching x's last dimension (> 0), got {w.shape}")
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    out = _out("out", out, x.shape)
    rows = 1 if x.ndim == 1 else x.shape[0]
    _core.rmsnorm(out, x, w, rows, dim, float(eps))
    return out


LAYERNORM_PATHS = {"generic": 0, "avx2": 1}


def layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float, path: str = "avx2",
              out: np.ndarray | None = None) -> np.ndarray:
    """LayerNorm with bias of x (dim,) or (rows, dim) on one kernel path ("generic" or "avx2"; avx2 runs the
    generic kernel on a CPU without AVX2)."""
    x = _f32("x", x, (1, 2))
    w, b = _f32("w", w), _f32("b", b)
    dim = x.shape[-1]
    if dim == 0 or w.shape != (dim,) or b.shape != (dim,):
        raise ValueError(f"w and b must have shape ({dim},) matching x's last dimension (> 0), got {w.shape}, {b.shape}")
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    if path not in LAYERNORM_PATHS:
        raise ValueError(f"path must be one of {', '.join(LAYERNORM_PATHS)}, got {path!r}")
    out = _out("out", out, x.shape)
    _core.layernorm(out, x, w, b, 1 if x.ndim == 1 else x.shape[0], dim, float(eps), LAYERNORM_PATHS[path])
    return out


def rope_table(pos, n_rot: int, freq_base: float, freq_factors: np.ndarray | None = None) -> np.ndarray:
    """{cos, sin} table (n_tok, n_rot/2, 2); freq_factors (n_rot/2 values, Llama 3 rope_freqs) divide the angles."""
    pos = np.ascontiguousarray(np.atleast_1d(np.asarray(pos)))
    if pos.ndim != 1 or not np.issubdtype(pos.dtype, np.integer):
        raise TypeError("pos must be an integer or a 1-D array of integers")
    if pos.size and (pos.min() < 0 or pos.max() > np.iinfo(np.int32).max):
        raise ValueError("positions must be in 0..2^31-1")
    if not isinstance(n_rot, (int, np.integer)) or n_rot < 2 or n_rot % 2:
        raise ValueError(f"n_rot must be an even int >= 2, got {n_rot}")
    if not (np.isfinite(freq_base) and freq_base > 0):
        raise ValueError(f"freq_base must be finite and > 0, got {freq_base}")
    if freq_factors is not None:
        freq_factors = _f32("freq_factors", freq_factors)
        if freq_factors.shape != (n_rot // 2,) or not (np.isfinite(freq_factors).all() and (freq_factors > 0).all()):
            raise ValueError(f"freq_factors must be {n_rot // 2} finite positive values, got shape {freq_factors.shape}")
    pos32 = pos.astype(np.int32)
    cs = np.empty((pos.size, n_rot // 2, 2), dtype=np.float32)
    _core.rope_table(cs, pos32, pos.size, int(n_rot), float(freq_base), freq_factors)
    return cs


def rope_apply(x: np.ndarray, table: np.ndarray, style: str) -> np.ndarray:
    """Rotates x (n_tok, n_head, head_dim) — or (n_head, head_dim) for one token — in place; returns x."""
    x = _f32("x", x, (2, 3))
    _writable("x", x)
    table = _f32("table", table, (3,))
    if style not in ROPE_STYLES:
        raise ValueError(f"rope style must be one of {tuple(ROPE_STYLES)}, got {style!r}")
    n_tok, n_head, hd = (1, *x.shape) if x.ndim == 2 else x.shape
    n_rot = table.shape[1] * 2
    if table.shape[0] != n_tok or table.shape[2] != 2:
        raise ValueError(f"table must have shape ({n_tok}, n_rot/2, 2), got {table.shape}")
    if not 2 <= n_rot <= hd:
        raise ValueError(f"n_rot={n_rot} must be in 2..head_dim={hd}")
    _core.rope_apply(x, table, n_tok, n_head, hd, n_rot, ROPE_STYLES[style])
    return x


def rope(x: np.ndarray, pos, freq_base: float, style: str, n_rot: int | None = None) -> np.ndarray:
    """Rotary embedding in place (see rope_apply); pos: one int per token."""
    _f32("x", x, (2, 3))
    n_rot = x.shape[-1] if n_rot is None else n_rot
    return rope_apply(x, rope_table(pos, n_rot, freq_base), style)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, n_ctx: int | None = None, scale: float | None = None,
              pool: ThreadPool | None = None, out: np.ndarray | None = None, softcap: float = 0.0) -> np.ndarray:
    """One query position over the first n_ctx positions of k, v (default: all of them); GQA by head groups.
    The KV type follows k's dtype: float32, float16, or uint8 for q8_0 blocks of 34 bytes per 32 values.
    softcap > 0 soft-caps the scaled scores (softcap * tanh(s / softcap)) before the softmax."""
    q = _f32("q", q, (2,))
    k = _array("k", k, (np.float32, np.float16, np.uint8), (3,))
    v = _array("v", v, (np.float32, np.float16, np.uint8), (3,))
    n_head, hd = q.shape
    cap, n_kv, width = k.shape
    if v.shape != k.shape or v.dtype != k.dtype:
        raise ValueError(f"v {v.shape} {v.dtype} must match k {k.shape} {k.dtype}")
    kv_type = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint8): 2}[k.dtype]
    if kv_type == 2:
        if hd % 32 or width != hd // 32 * 34:
            raise ValueError(f"q8_0 k, v rows of a head must be {hd} // 32 * 34 bytes (head_dim a multiple of 32, "
                             f"from q: {hd}), got {width}")
    elif width != hd or hd == 0:
        raise ValueError(f"head_dim of k ({width}) must equal q's ({hd}) and be > 0")
    if n_kv == 0 or n_head == 0 or n_head % n_kv:
        raise ValueError(f"n_head={n_head} must be a positive multiple of n_head_kv={n_kv}")
    n_ctx = cap if n_ctx is None else int(n_ctx)
    if not 1 <= n_ctx <= cap:
        raise ValueError(f"n_ctx={n_ctx} must be in 1..{cap} (the cache's length)")
    scale = 1.0 / float(np.sqrt(hd)) if scale is None else float(scale)
    if not np.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    if not (np.isfinite(softcap) and softcap >= 0):
        raise ValueError(f"softcap must be finite and >= 0, got {softcap}")
    capsule = _pool_capsule(pool)
    out = _out("out", out, (n_head, hd))
    scores = np.empty((pool.n_threads if pool else 1) * n_ctx, dtype=np.float32)
    _core.attention(capsule, out, q, k, v, scores, n_ctx, n_head, n_kv, hd, scale, kv_type, float(softcap))
    return out


def kv_store(x: np.ndarray, kv_type: str, path: str | None = None) -> np.ndarray:
    """x (..., head_dim) float32 as the executor's KV cache stores it (runtime/kv_cache.py: to_bytes is the
    numpy twin): float32, float16 (by the ops ISA) or uint8 q8_0 blocks (..., head_dim / 32 * 34) quantized on
    kernel path `path` (None: this CPU's best)."""
    from onewell.runtime.kv_cache import KV_TYPE_IDS, check_kv_type, kv_bytes

    x = _f32("x", x, tuple(range(1, 33)))
    hd = x.shape[-1]
    if hd == 0 or x.size == 0:
        raise ValueError(f"x must hold at least one row of head_dim > 0 values, got shape {x.shape}")
    kv_type = check_kv_type(kv_type, hd)
    path = _core.kernel_default_path() if path is None else path
    if path not in _core.kernel_paths():
        raise ValueError(f"kernel path {path!r} is not one of this CPU's: {', '.join(_core.kernel_paths())}")
    dtype = {"f32": np.float32, "f16": np.float16, "q8_0": np.uint8}[kv_type]
    width = hd if kv_type != "q8_0" else kv_bytes("q8_0", hd)
    out = np.empty((*x.shape[:-1], width), dtype=dtype)
    _core.kv_store(KV_TYPE_IDS[kv_type], x, hd, x.size // hd, out, path)
    return out


def _same_shape(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name_a} {a.shape} and {name_b} {b.shape} must have the same shape")


def swiglu(g: np.ndarray, u: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """silu(g) * u, element-wise (any shape, contiguous)."""
    g = _f32("g", g, tuple(range(0, 33)))
    u = _f32("u", u, tuple(range(0, 33)))
    _same_shape("g", g, "u", u)
    out = _out("out", out, g.shape)
    _core.swiglu(out, g, u, g.size)
    return out


def geglu(g: np.ndarray, u: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """gelu_tanh(g) * u, element-wise (any shape, contiguous): Gemma's gated FFN."""
    g = _f32("g", g, tuple(range(0, 33)))
    u = _f32("u", u, tuple(range(0, 33)))
    _same_shape("g", g, "u", u)
    out = _out("out", out, g.shape)
    _core.geglu(out, g, u, g.size)
    return out


def softcap(x: np.ndarray, cap: float, out: np.ndarray | None = None) -> np.ndarray:
    """cap * tanh(x / cap), element-wise (logit soft-capping); cap > 0."""
    x = _f32("x", x, tuple(range(0, 33)))
    if not (np.isfinite(cap) and cap > 0):
        raise ValueError(f"cap must be finite and > 0, got {cap}")
    out = _out("out", out, x.shape)
    _core.softcap(out, x, x.size, float(cap))
    return out


def add(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    a = _f32("a", a, tuple(range(0, 33)))
    b = _f32("b", b, tuple(range(0, 33)))
    _same_shape("a", a, "b", b)
    out = _out("out", out, a.shape)
    _core.add(out, a, b, a.size)
    return out


def add_bias(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x[..., d] += bias[d] in place; returns x."""
    x = _f32("x", x, (1, 2))
    _writable("x", x)
    bias = _f32("bias", bias)
    if bias.shape != (x.shape[-1],):
        raise ValueError(f"bias must have shape ({x.shape[-1]},), got {bias.shape}")
    rows = 1 if x.ndim == 1 else x.shape[0]
    _core.add_bias(x, bias, rows, x.shape[-1])
    return x


def softmax(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis of x: (n,) or (rows, n), n > 0."""
    x = _f32("x", x, (1, 2))
    if x.shape[-1] == 0:
        raise ValueError("softmax over an empty axis")
    out = _out("out", out, x.shape)
    rows = 1 if x.ndim == 1 else x.shape[0]
    _core.softmax(out, x, rows, x.shape[-1])
    return out


def argmax(x: np.ndarray) -> int:
    """Index of the first maximum of a 1-D float32 array (a NaN counts as the maximum, like numpy)."""
    x = _f32("x", x)
    if x.size == 0:
        raise ValueError("argmax of an empty array")
    return _core.argmax(x, x.size)


def f32_to_f16(x: np.ndarray) -> np.ndarray:
    x = _f32("x", x, tuple(range(0, 33)))
    out = np.empty(x.shape, dtype=np.float16)
    _core.f32_to_f16(out, x, x.size)
    return out


def f16_to_f32(x: np.ndarray) -> np.ndarray:
    x = _array("x", x, (np.float16,), tuple(range(0, 33)))
    out = np.empty(x.shape, dtype=np.float32)
    _core.f16_to_f32(out, x, x.size)
    return out
