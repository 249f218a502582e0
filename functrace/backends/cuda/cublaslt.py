"""Matrix products through cuBLASLt with the algorithm chosen by timing (opt-in on the CUDA
target: ``FUNCTRACE_CUDA_GEMM=lt``).

Owns ``GemmShape`` (a ``dot_general`` as one row-major product, and its column-major
cuBLASLt description), ``gemm_shape_of(eqn)``, ``ColMajorGemm`` (that description executed
with numpy: what the simulator runs, and what the tests check the mapping with) and ``Lt``
(the library through ctypes: descriptors, heuristics, timing, launch).

Why: cupy's ``matmul`` calls cuBLAS's default algorithm for the shape. On an H200 it ran the
MLP's two 13-GFLOP float32 products at 37-39 TFLOP/s where XLA reached 43-49: XLA asks
cuBLASLt for its candidate algorithms and times them when it compiles. ``Lt.plan`` does the
same, once per shape and device: up to 16 candidates from ``cublasLtMatmulAlgoGetHeuristic``
with a 32 MiB workspace, each timed on the call site's stream, and cupy's own product timed
with them; the fastest wins, so a plan is never slower than cupy's path on the machine that
tuned it. Full float32 (``CUBLAS_COMPUTE_32F``) or float64 arithmetic: no TF32.

The row-major trick: a row-major ``(M, N)`` result is the column-major ``(N, M)`` matrix
``D = op(A) op(B)`` with ``A`` the right operand's buffer and ``B`` the left's, so no operand
is copied or transposed; a transposed operand is a transpose flag.

Tuned plans are a bounded LRU per device (``functrace.caches``, "cublaslt.plans": an eighth
of the cache size, 32 plans by default, since each owns a 32 MiB device workspace); an
executable keeps the plans it uses. Descriptors stay alive as long as the ``Lt`` object.

Imports numpy, ctypes and caches; cupy only when ``Lt`` is made (on a GPU). **Not run on a
GPU yet**: ``benchmarks/gpu_check.py`` times it against cupy and jax; it stays opt-in until
then.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import threading
import typing

import numpy as np

from ... import caches
from ...passes.contract import contraction_sizes

log = logging.getLogger("functrace")

__all__ = ["GemmShape", "gemm_shape_of", "ColMajorGemm", "Lt", "LtError"]

R_32F, R_64F = 0, 1                         # cudaDataType
COMPUTE_32F, COMPUTE_64F = 68, 70           # cublasComputeType_t (no TF32)
DESC_TRANSA, DESC_TRANSB = 3, 4             # cublasLtMatmulDescAttributes_t
PREF_MAX_WORKSPACE_BYTES = 1                # cublasLtMatmulPreferenceAttributes_t
OP_N, OP_T = 0, 1                           # cublasOperation_t
WORKSPACE_BYTES = 32 << 20
MAX_CANDIDATES = 16


class LtError(RuntimeError):
    """A cuBLASLt call returned a status other than CUBLAS_STATUS_SUCCESS."""


@dataclasses.dataclass(frozen=True)
class GemmShape:
    """``out (M, N) = X (M, K) @ Y (K, N)``, all row-major (C-contiguous). ``x_t``: the left
    buffer holds X transposed, ``(K, M)``; ``y_t``: the right buffer holds Y transposed,
    ``(N, K)``."""

    m: int
    n: int
    k: int
    x_t: bool
    y_t: bool
    dtype: str

    @property
    def x_shape(self) -> tuple[int, int]:
        return (self.k, self.m) if self.x_t else (self.m, self.k)

    @property
    def y_shape(self) -> tuple[int, int]:
        return (self.n, self.k) if self.y_t else (self.k, self.n)

    def colmajor(self):
        """cuBLASLt's column-major problem ``D (N x M) = op(A) @ op(B)``: (transa, transb,
        A layout, B layout, C/D layout), a layout being (rows, cols, leading dimension);
        A is the right operand's buffer, B the left's."""
        m, n, k = self.m, self.n, self.k
        a = (k, n, k) if self.y_t else (n, k, n)
        b = (m, k, m) if self.x_t else (k, m, k)
        return (OP_T if self.y_t else OP_N, OP_T if self.x_t else OP_N, a, b, (n, m, n))


def gemm_shape_of(e) -> GemmShape | None:
    """The single row-major product a ``dot_general`` equation is, or None (batch axes, axes
    interleaved so that a reshape cannot make a matrix of an operand, an empty product, a
    dtype other than float32/float64)."""
    (xc, yc), (xb, yb) = e.params["dimension_numbers"]
    x, y = e.inputs[0].aval, e.inputs[1].aval
    dt = np.dtype(e.outputs[0].aval.dtype)
    if xb or yb or dt not in (np.dtype(np.float32), np.dtype(np.float64)) \
            or x.dtype != dt or y.dtype != dt:
        return None
    xf = tuple(d for d in range(x.ndim) if d not in xc)
    yf = tuple(d for d in range(y.ndim) if d not in yc)
    ident_x, ident_y = tuple(range(x.ndim)), tuple(range(y.ndim))
    if xf + tuple(xc) == ident_x:
        x_t = False
    elif tuple(xc) + xf == ident_x:
        x_t = True
    else:
        return None
    if tuple(yc) + yf == ident_y:
        y_t = False
    elif yf + tuple(yc) == ident_y:
        y_t = True
    else:
        return None
    _, m, n, k = contraction_sizes(e)
    if min(m, n, k) == 0:
        return None
    return GemmShape(m, n, k, x_t, y_t, dt.name)


def _colmajor_view(buf, rows, cols, ld):
    """A flat buffer as a column-major (rows, cols) matrix with leading dimension ld."""
    return np.lib.stride_tricks.as_strided(buf, (rows, cols),
                                           (buf.itemsize, ld * buf.itemsize))


class ColMajorGemm:
    """``GemmShape.colmajor()`` executed with numpy on flat buffers, as cuBLASLt reads them:
    the simulator's stand-in for ``Lt`` plans, so the mapping and the executor's product
    step are tested without a GPU."""

    def __init__(self, shape: GemmShape):
        self.shape = shape

    def __call__(self, x, y, out, stream=None) -> None:
        if not (x.flags.c_contiguous and y.flags.c_contiguous and out.flags.c_contiguous):
            # cuBLASLt reads memory as stored: a strided operand would be read wrongly
            raise ValueError("cuBLASLt operands must be C-contiguous")
        ta, tb, (ar, ac, lda), (br, bc, ldb), (cr, cc, ldc) = self.shape.colmajor()
        a = _colmajor_view(y.reshape(-1), ar, ac, lda)
        b = _colmajor_view(x.reshape(-1), br, bc, ldb)
        opa = a.T if ta == OP_T else a
        opb = b.T if tb == OP_T else b
        d = opa @ opb                                   # (N, M)
        flat = out.reshape(-1)
        _colmajor_view(flat, cr, cc, ldc)[...] = d


# --------------------------------------------------------------------------------------------
# the library
# --------------------------------------------------------------------------------------------

class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Heuristic(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_P = ctypes.c_void_p
_SIGS = {
    "cublasLtCreate": (ctypes.POINTER(_P),),
    "cublasLtMatmulDescCreate": (ctypes.POINTER(_P), ctypes.c_int, ctypes.c_int),
    "cublasLtMatmulDescSetAttribute": (_P, ctypes.c_int, _P, ctypes.c_size_t),
    "cublasLtMatrixLayoutCreate": (ctypes.POINTER(_P), ctypes.c_int, ctypes.c_uint64,
                                   ctypes.c_uint64, ctypes.c_int64),
    "cublasLtMatmulPreferenceCreate": (ctypes.POINTER(_P),),
    "cublasLtMatmulPreferenceSetAttribute": (_P, ctypes.c_int, _P, ctypes.c_size_t),
    "cublasLtMatmulAlgoGetHeuristic": (_P, _P, _P, _P, _P, _P, _P, ctypes.c_int,
                                       ctypes.POINTER(_Heuristic), ctypes.POINTER(ctypes.c_int)),
    "cublasLtMatmul": (_P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
                       ctypes.POINTER(_Algo), _P, ctypes.c_size_t, _P),
}


def _load_library():
    """libcublasLt, preferring the copy cupy's cuBLAS already loaded (same soname)."""
    import cupy
    cupy.cuda.device.get_cublas_handle()   # cupy's cuBLAS (which loads its Lt) is loaded
    errors = []
    for name in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"):
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
    try:
        from cuda import pathfinder
        lib = pathfinder.load_nvidia_dynamic_lib("cublasLt")
        return ctypes.CDLL(lib.abs_path)
    except Exception as exc:                # any failure: report them all
        errors.append(str(exc))
    raise OSError("libcublasLt not found: " + "; ".join(errors))


class _Plan:
    """One tuned product: descriptors, the chosen algorithm (or None: cupy's matmul was as
    fast), the workspace."""

    __slots__ = ("shape", "desc", "layouts", "pref", "algo", "ws", "ws_size", "alpha", "beta",
                 "seconds", "candidates")


def _plan_cache() -> caches.LRU:
    """GemmShape -> tuned ``_Plan`` (each with its own device workspace: kept few)."""
    return caches.LRU("cublaslt.plans", scale=0.125)


class Lt:
    """cuBLASLt on the current device. ``plan(shape, stream, xp)`` tunes a product once per
    shape; ``run(plan, x, y, out, stream_ptr)`` launches it on the stream."""

    _instances: typing.ClassVar[dict] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls) -> Lt:
        import cupy
        dev = cupy.cuda.Device().id
        with cls._lock:
            lt = cls._instances.get(dev)
            if lt is None:
                lt = cls._instances[dev] = cls()
            return lt

    def __init__(self):
        import cupy
        self.cp = cupy
        self._bind(_load_library())
        self.handle = _P()
        self._check(self.lib.cublasLtCreate(ctypes.byref(self.handle)), "cublasLtCreate")
        self.plans = _plan_cache()
        self._keep: list = []               # descriptors live as long as the library object

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise LtError(f"{what} returned status {status}")

    def _layout(self, dtype_code, rows, cols, ld):
        h = _P()
        self._check(self.lib.cublasLtMatrixLayoutCreate(ctypes.byref(h), dtype_code, rows, cols,
                                                        ld), "cublasLtMatrixLayoutCreate")
        self._keep.append(h)
        return h

    def plan(self, shape: GemmShape, stream) -> _Plan:
        """The tuned plan for ``shape`` (cached). ``stream``: a cupy stream to time on."""
        p = self.plans.get(shape)
        if p is None:
            p = self.plans[shape] = self._tune(shape, stream)
        return p

    @classmethod
    def with_library(cls, lib) -> Lt:
        """An instance over ``lib`` (a loaded libcublasLt) without a handle or cupy: enough
        for ``describe``, which needs no GPU (the tests check the descriptors with it)."""
        self = cls.__new__(cls)
        self.cp, self.handle, self.plans, self._keep = None, _P(), _plan_cache(), []
        self._bind(lib)
        return self

    def _bind(self, lib) -> None:
        for fn, args in _SIGS.items():
            f = getattr(lib, fn)
            f.argtypes, f.restype = args, ctypes.c_int
        self.lib = lib

    def describe(self, shape: GemmShape) -> _Plan:
        """The plan's descriptors (matmul, the three layouts, the preference): host-only
        calls. Raises ``LtError`` if the library refuses one."""
        lib = self.lib
        f64 = shape.dtype == "float64"
        code = R_64F if f64 else R_32F
        ta, tb, la, lb, lc = shape.colmajor()
        p = _Plan()
        p.shape = shape
        p.desc = _P()
        self._check(lib.cublasLtMatmulDescCreate(ctypes.byref(p.desc),
                                                 COMPUTE_64F if f64 else COMPUTE_32F, code),
                    "cublasLtMatmulDescCreate")
        self._keep.append(p.desc)
        for attr, val in ((DESC_TRANSA, ta), (DESC_TRANSB, tb)):
            v = ctypes.c_int32(val)
            self._check(lib.cublasLtMatmulDescSetAttribute(p.desc, attr, ctypes.byref(v),
                                                           ctypes.sizeof(v)),
                        "cublasLtMatmulDescSetAttribute")
        p.layouts = tuple(self._layout(code, *lay) for lay in (la, lb, lc))
        pref = _P()
        self._check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
                    "cublasLtMatmulPreferenceCreate")
        self._keep.append(pref)
        ws = ctypes.c_uint64(WORKSPACE_BYTES)
        self._check(lib.cublasLtMatmulPreferenceSetAttribute(
            pref, PREF_MAX_WORKSPACE_BYTES, ctypes.byref(ws), ctypes.sizeof(ws)),
            "cublasLtMatmulPreferenceSetAttribute")
        p.pref = pref
        return p

    def _tune(self, shape: GemmShape, stream) -> _Plan:
        cp, lib = self.cp, self.lib
        p = self.describe(shape)
        pref, f64 = p.pref, shape.dtype == "float64"
        heur = (_Heuristic * MAX_CANDIDATES)()
        count = ctypes.c_int(0)
        a, b, c = p.layouts
        self._check(lib.cublasLtMatmulAlgoGetHeuristic(
            self.handle, p.desc, a, b, c, c, pref, MAX_CANDIDATES, heur, ctypes.byref(count)),
            "cublasLtMatmulAlgoGetHeuristic")
        scalar = ctypes.c_double if f64 else ctypes.c_float
        p.alpha, p.beta = scalar(1.0), scalar(0.0)
        p.ws = cp.empty(WORKSPACE_BYTES, np.uint8)
        p.ws_size = WORKSPACE_BYTES
        dt = np.dtype(shape.dtype)
        rng = cp.random.default_rng(0)
        x = rng.standard_normal(shape.x_shape, dtype=dt)
        y = rng.standard_normal(shape.y_shape, dtype=dt)
        out = cp.empty((shape.m, shape.n), dt)
        xm = x.T if shape.x_t else x
        ym = y.T if shape.y_t else y
        with stream:
            timed = [(_time(cp, stream, lambda: cp.matmul(xm, ym)), None, "cupy's matmul")]
            for i in range(count.value):
                h = heur[i]
                if h.state != 0 or h.workspace_size > WORKSPACE_BYTES:
                    continue
                algo = _Algo()
                ctypes.memmove(ctypes.byref(algo), ctypes.byref(h.algo), ctypes.sizeof(_Algo))
                p.algo = algo
                try:
                    t = _time(cp, stream, lambda: self.run(p, x, y, out, stream.ptr))
                except LtError:
                    continue
                timed.append((t, algo, f"algorithm {i}"))
        p.candidates = len(timed) - 1
        p.seconds, p.algo, name = min(timed, key=lambda r: r[0])
        log.info("functrace: cuBLASLt %s: %d candidates timed, %s is fastest (%.1f us; cupy's "
                 "matmul %.1f us)", shape, p.candidates, name, p.seconds * 1e6,
                 timed[0][0] * 1e6)
        return p

    def run(self, p: _Plan, x, y, out, stream_ptr: int) -> None:
        """``out = X @ Y`` with the plan's algorithm on the stream (x, y, out C-contiguous)."""
        a, b, c = p.layouts
        o = out.data.ptr
        self._check(self.lib.cublasLtMatmul(
            self.handle, p.desc, ctypes.byref(p.alpha), y.data.ptr, a, x.data.ptr, b,
            ctypes.byref(p.beta), o, c, o, c, ctypes.byref(p.algo), p.ws.data.ptr, p.ws_size,
            stream_ptr), "cublasLtMatmul")


def _time(cp, stream, fn, reps: int = 5) -> float:
    """Seconds per call of ``fn`` on ``stream`` (one warm-up call, then ``reps``)."""
    fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record(stream)
    for _ in range(reps):
        fn()
    stop.record(stream)
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / 1e3 / reps
