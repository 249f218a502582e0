"""The CUDA backend's device layer: availability, and the device-array adapters.

Owns everything that touches cupy (or stands in for it): ``check_available`` /
``unavailable_reason`` (the error text naming the extra to install and whether a driver was
found), ``CupyArrays`` (allocation, host<->device copies, kernel arguments through
``__cuda_array_interface__``, streams and events, op impls run with cupy), ``HostArrays`` (a
numpy stand-in with the same interface, for numba's CUDA simulator, which takes numpy
arrays and rejects foreign ``__cuda_array_interface__`` objects), ``default_arrays`` and the
simulator's ``math`` and ``libdevice`` (``SimMath``, ``SimLibdevice``). The executor
(``numba_cuda``) talks to the device only through an adapter, so the simulator tests exercise
all of it but this file's cupy half. Imports errors, ``ops.scalar_recipe`` (the simulator's
exact fma) and ``reference`` only; **cupy and numba are imported when an adapter is made**.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import warnings

import numpy as np

from ...errors import BackendError
from ...ops.scalar_recipe import fma as exact_fma
from ..reference import run_impl_on_device

__all__ = ["INSTALL_HINT", "simulator_enabled", "unavailable_reason", "check_available",
           "HostArrays", "CupyArrays", "default_arrays", "SimMath", "SimLibdevice"]

log = logging.getLogger("functrace")

INSTALL_HINT = ("install the extra matching your NVIDIA driver: pip install 'functrace[cuda13]' "
                "(CUDA 13 driver, R580 or newer) or pip install 'functrace[cuda12]' (CUDA 12 "
                "driver); to run the CUDA code path without a GPU, set NUMBA_ENABLE_CUDASIM=1 "
                "before numba is imported")


# --------------------------------------------------------------------------------------------
# availability
# --------------------------------------------------------------------------------------------

def simulator_enabled() -> bool:
    """Whether numba.cuda is (or will be, when first imported) numba's CUDA simulator."""
    nb = sys.modules.get("numba.core.config")
    if nb is not None and hasattr(nb, "ENABLE_CUDASIM"):
        return bool(nb.ENABLE_CUDASIM)
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")


def _driver_found() -> str | None:
    """The CUDA driver library, if one can be loaded (no GPU needed)."""
    import ctypes
    import ctypes.util
    for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda") or "",
                 "nvcuda.dll"):
        if not name:
            continue
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    return None


def unavailable_reason() -> str | None:
    """Why the real-GPU backend cannot run here (None when it can). Imports cupy/numba."""
    try:
        import cupy
    except ImportError as e:
        drv = _driver_found()
        return (f"cupy is not installed ({e}); NVIDIA driver: "
                f"{'found (' + drv + ')' if drv else 'not found'}")
    try:
        ok = bool(cupy.is_available())
    except Exception:   # any driver/runtime failure means "no GPU"
        ok = False
    if not ok:
        drv = _driver_found()
        try:
            ver = cupy.cuda.runtime.driverGetVersion()
            dv = f", driver supports CUDA {ver // 1000}.{ver % 1000 // 10}"
        except Exception:
            dv = ""
        return (f"no GPU found: cupy.is_available() is False (NVIDIA driver: "
                f"{'found (' + drv + ')' if drv else 'not found'}{dv})")
    try:
        from numba import cuda
        if not cuda.is_available():
            return "numba.cuda finds no usable GPU (is numba-cuda installed for this driver?)"
    except Exception as e:
        return f"numba.cuda cannot be used ({type(e).__name__}: {e})"
    return None


def check_available() -> None:
    """Raise ``BackendError`` saying what is missing when the CUDA backend cannot run."""
    if simulator_enabled():
        return
    why = unavailable_reason()
    if why is not None:
        raise BackendError(f"backend='cuda' cannot be used: {why}. To fix: {INSTALL_HINT}.")


# --------------------------------------------------------------------------------------------
# device-array adapters: the only code that touches cupy (or its numpy stand-in)
# --------------------------------------------------------------------------------------------

_compat_done: list = []


def _cuda():
    from numba import cuda
    if not _compat_done:
        _numpy_compat()
        _compat_done.append(True)
    return cuda


def _load_numba_cuda_registry() -> None:
    import numba.cuda.np.arrayobj  # noqa: F401  (the module that registers the overload)


def _numpy_compat(load=_load_numba_cuda_registry) -> None:
    """numba-cuda (0.30.4 and earlier) registers an overload for ``np.row_stack`` when its
    first kernel compiles; numpy 2.5 removed that alias, so every compile raised
    AttributeError and every kernel fell back to single ops. Give numba-cuda a stand-in for
    the length of that one import, then take it out of numpy's namespace again."""
    if hasattr(np, "row_stack") or simulator_enabled():
        return

    def row_stack(tup):   # a name for numba to register; numpy 2.4 gave vstack under it
        return np.vstack(tup)

    np.row_stack = row_stack  # noqa: NPY201
    try:
        load()
    except ImportError:
        pass
    finally:
        del np.row_stack  # noqa: NPY201


class HostArrays:
    """numpy arrays as "device" arrays, for numba's CUDA simulator (whose kernels take numpy
    arrays and reject foreign ``__cuda_array_interface__`` objects). Streams are no-ops."""

    name = "numpy (CUDA simulator)"
    simulated = True
    passes_arrays = False      # kernel_arg may copy (the simulator wants contiguous arrays)

    def __init__(self):
        self.xp = np

    def is_device(self, x) -> bool:
        return type(x) is np.ndarray

    def to_device(self, x):
        return np.asarray(x)

    def to_host(self, x):
        return np.asarray(x)

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def own(self, x):
        a = np.asarray(x)
        return a if a.flags.writeable else a.copy()

    def copy(self, x):
        return np.array(x, copy=True)

    def full(self, shape, value, dtype):
        return np.full(shape, value, dtype)

    def kernel_arg(self, x):
        # the simulator copies every argument in and back out, contiguous buffers only:
        # read-only or strided inputs (literals, broadcast or transposed views) are copied
        if x.flags.writeable and (x.flags.c_contiguous or x.flags.f_contiguous):
            return x
        return np.ascontiguousarray(x).copy() if not x.flags.c_contiguous else x.copy()

    def new_stream(self):
        return None

    def launcher(self, kernel, grid, block, stream):
        return kernel[grid, block]

    def stream_scope(self, stream):
        return contextlib.nullcontext()

    def enter(self, stream):
        return None

    def leave(self, stream, caller) -> None:
        pass

    def run_impl(self, op, args, params):
        return op.impl(*args, **params)

    def sm_count(self) -> int:
        return 2

    def contiguous(self, x) -> bool:
        return x.flags.c_contiguous

    def gemm(self, shape, stream):
        """A product ``fn(x, y, out)`` for ``shape`` (``cublaslt.GemmShape``): the column-major
        description cuBLASLt would get, executed with numpy."""
        from .cublaslt import ColMajorGemm
        return ColMajorGemm(shape)


class CupyArrays:
    """cupy arrays on the current CUDA device; kernels launched by numba.cuda on our stream."""

    name = "cupy"
    simulated = False
    passes_arrays = True       # kernel_arg(x) is x

    def __init__(self):
        import cupy
        self.cp = cupy
        self.xp = cupy
        self.cuda = _cuda()

    def is_device(self, x) -> bool:
        return isinstance(x, self.cp.ndarray)

    def to_device(self, x):
        return self.cp.asarray(x)

    def to_host(self, x):
        return self.cp.asnumpy(x) if isinstance(x, self.cp.ndarray) else np.asarray(x)

    def empty(self, shape, dtype):
        return self.cp.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return self.cp.zeros(shape, dtype)

    def own(self, x):
        return x if isinstance(x, self.cp.ndarray) else self.cp.asarray(x)

    def copy(self, x):
        return x.copy()

    def full(self, shape, value, dtype):
        return self.cp.full(shape, value, dtype)

    # -- CUDA graphs (Executable._graph_call) --------------------------------------------------
    def capture(self, stream, run):
        """Capture ``run()`` on our stream into a CUDA graph. Everything allocated meanwhile
        comes from a private memory pool, returned with the graph and kept with it: memory a
        captured step frees (a temporary) must not be handed to anyone else while the graph
        may replay. Returns (graph, pool, run's result)."""
        cp = self.cp
        s = stream[0]
        pool = cp.cuda.MemoryPool()
        with cp.cuda.using_allocator(pool.malloc):
            s.begin_capture()
            try:
                result = run()
            except BaseException:
                with contextlib.suppress(Exception):
                    s.end_capture()               # an invalidated capture still has to end
                raise
            graph = s.end_capture()
        graph.upload(s)
        return graph, pool, result

    def copy_into(self, dst, src, stream) -> None:
        """``dst[...] = src`` on our stream (a device-to-device copy when ``src`` is
        contiguous; ``dst`` is a C-contiguous buffer of the same shape and dtype)."""
        cp = self.cp
        if not isinstance(src, cp.ndarray):
            src = cp.asarray(src)
        if src._c_contiguous and src.dtype == dst.dtype:
            cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                        cp.cuda.runtime.memcpyDeviceToDevice, stream[2])
        else:
            cp.copyto(dst, src)

    def launch_graph(self, graph, stream) -> None:
        graph.launch(stream[0])

    def copy_out(self, x, stream):
        """A new array holding ``x`` (an output buffer the next replay overwrites)."""
        cp = self.cp
        y = cp.empty(x.shape, x.dtype)
        if x._c_contiguous:
            cp.cuda.runtime.memcpyAsync(y.data.ptr, x.data.ptr, x.nbytes,
                                        cp.cuda.runtime.memcpyDeviceToDevice, stream[2])
        else:
            cp.copyto(y, x)
        return y

    def kernel_arg(self, x):
        # cupy arrays go to kernels as they are: ``_Launch`` packs their pointer, shape and
        # strides itself (and converts them for numba's own launch path, without a sync)
        return x

    def new_stream(self):
        s = self.cp.cuda.Stream(non_blocking=False)
        return s, self.cuda.external_stream(s.ptr), s.ptr

    def launcher(self, kernel, grid, block, stream):
        return _Launch(self, kernel, grid, block, stream)

    def stream_scope(self, stream):
        return stream[0]

    def enter(self, stream):
        """Called on the caller's stream, before entering ours: our stream waits for work
        the caller queued on a non-legacy stream. Returns the caller's stream for ``leave``.
        (The legacy default stream, ptr 0, and our blocking stream order themselves.)"""
        cur = self.cp.cuda.get_current_stream()
        if cur.ptr != 0 and cur.ptr != stream[0].ptr:
            stream[0].wait_event(cur.record())
        return cur

    def leave(self, stream, caller) -> None:
        """After leaving our stream: the caller's stream waits for the work we queued."""
        if caller is not None and caller.ptr != 0 and caller.ptr != stream[0].ptr:
            caller.wait_event(stream[0].record())

    def run_impl(self, op, args, params):
        return run_impl_on_device(op.name, op.impl, args, params, op.multiple_results,
                                  self.cp)

    def sm_count(self) -> int:
        dev = self.cp.cuda.Device()
        return int(dev.attributes["MultiProcessorCount"])

    def contiguous(self, x) -> bool:
        return x._c_contiguous

    def gemm(self, shape, stream):
        """A product ``fn(x, y, out)`` for ``shape`` on our stream, tuned now: cuBLASLt's
        fastest algorithm for it, or cupy's matmul where that was as fast (``cublaslt.Lt``).
        Raises if cuBLASLt cannot be used."""
        from .cublaslt import Lt
        lt = Lt.get()
        plan = lt.plan(shape, stream[0])
        if plan.algo is None:
            cp, xt, yt = self.cp, shape.x_t, shape.y_t
            xs, ys = shape.x_shape, shape.y_shape

            def by_cupy(x, y, out):
                xm, ym = x.reshape(xs), y.reshape(ys)
                cp.matmul(xm.T if xt else xm, ym.T if yt else ym, out=out)
            return by_cupy
        ptr = stream[2]
        return lambda x, y, out: lt.run(plan, x, y, out, ptr)


def _dim3(d) -> tuple[int, int, int]:
    d = tuple(d) if isinstance(d, tuple | list) else (d,)
    return tuple(int(x) for x in d) + (1,) * (3 - len(d))


class _Launch:
    """One kernel at one launch configuration on one stream, launched through the driver.

    Through numba-cuda's dispatcher (argument typing, a device array object per array,
    cuda.core's launch) a ten-kernel step cost 2.6 ms of host time per call on an H200
    machine; through this path, 0.19-0.21 ms (benchmarks/results/gpu_check_h200.log).
    The first call goes through numba, which compiles (or loads from its cache) the
    specialisation for these arguments and launches it. Then the driver's handle for that
    specialisation is kept with a parameter buffer laid out as numba passes arguments (an
    array is meminfo, parent, size, itemsize, data, shape..., strides...; every field 8
    bytes), and later calls fill the buffer and call ``cuLaunchKernel`` through cupy's driver
    bindings. Arguments that the specialisation does not fit (an array that is no longer
    C-contiguous) go through numba again, which specialises anew. If the fast path cannot be
    set up (another numba-cuda layout), every call stays on numba's path: slower, same
    results. The buffer is shared by the calls of one call site: a lock keeps a thread from
    refilling it between another thread's fill and launch (the driver copies the parameters
    when the launch is queued)."""

    __slots__ = ("ar", "kernel", "grid", "block", "stream", "numba_launch", "fast", "lock")

    def __init__(self, ar, kernel, grid, block, stream):
        self.ar, self.kernel, self.stream = ar, kernel, stream
        self.grid, self.block = _dim3(grid), _dim3(block)
        with warnings.catch_warnings():
            # launch sizes are ours to choose (a 1,024-element step rightly gets a few
            # blocks): numba's "Grid size N will likely result in GPU under-utilization"
            warnings.filterwarnings("ignore", message="Grid size")
            self.numba_launch = kernel[grid, block, stream[1]]
        self.fast = None
        self.lock = threading.Lock()

    def __call__(self, *args):
        with self.lock:
            fast = self.fast
            if fast and fast.pack(args):
                g, b = self.grid, self.block
                fast.launch(fast.func, g[0], g[1], g[2], b[0], b[1], b[2], 0, self.stream[2],
                            fast.params_addr, 0)
                return
            self._through_numba(args)

    def _through_numba(self, args):
        cp, cuda = self.ar.cp, self.ar.cuda
        nargs = [cuda.as_cuda_array(a, sync=False) if isinstance(a, cp.ndarray) else a
                 for a in args]
        self.numba_launch(*nargs)
        if self.fast is False:     # no direct path for this kernel: do not try again
            return
        try:
            self.fast = _Packed.from_numba(self.kernel, nargs, args)
        except Exception as exc:   # numba internals differ: stay on numba's launch path
            log.debug("functrace: no direct launch for %s (%s: %s)",
                      getattr(self.kernel, "__name__", self.kernel), type(exc).__name__, exc)
            self.fast = False


class _Packed:
    """The driver handle of one compiled specialisation and its packed parameter buffer."""

    __slots__ = ("func", "buf", "params", "params_addr", "slots", "launch", "c_flag", "f_flag")

    @classmethod
    def from_numba(cls, kernel, nargs, args) -> _Packed:
        """For the specialisation numba just compiled for ``nargs`` (``args`` as we pass them:
        cupy arrays and ints)."""
        from cupy.cuda import driver
        sig = tuple(kernel.typeof_pyval(a) for a in nargs)
        ov = kernel.overloads.get(sig)
        if ov is None:
            raise LookupError(f"no overload for {sig}")
        handle = ov._codelibrary.get_cufunc().handle
        return cls(sig, args, int(getattr(handle, "value", handle)), driver.launchKernel)

    def __init__(self, sig, args, func: int, launch):
        """``sig``: numba's argument types; ``func``: the CUfunction (or CUkernel) handle;
        ``launch``: ``cuLaunchKernel``'s binding."""
        import ctypes
        import struct

        self.func, self.launch = func, launch
        fields, slots = [], []
        for ty, a in zip(sig, args):
            kind = type(ty).__name__
            j = len(fields)
            if kind == "Array":
                # the executor's shapes are fixed (one plan per abstract signature), and so
                # are the strides of a C- or F-layout specialisation: only the data pointer
                # (and an "A" layout's strides) change from call to call
                nd = ty.ndim
                slots.append(("a", j + 4, ty.layout, j + 5 + nd, j + 5 + 2 * nd))
                fields += [0, 0, a.size, a.dtype.itemsize, 0, *a.shape, *a.strides]
            elif kind == "Integer":
                slots.append(("i", j))
                fields.append(int(a))
            elif kind == "Float":        # kept as its bits; another value goes through numba
                slots.append(("f", a))
                fmt = "<d" if ty.bitwidth == 64 else "<f"
                fields.append(int.from_bytes(struct.pack(fmt, a).ljust(8, b"\0"), "little",
                                             signed=True))
            else:
                raise TypeError(f"argument type {ty} has no direct launch")
        self.slots = slots
        # cupy's own flag attributes are cheaper than building an ``a.flags`` object
        probe = next((a for a in args if hasattr(a, "__cuda_array_interface__")), None)
        self.c_flag = "_c_contiguous" if hasattr(probe, "_c_contiguous") else None
        self.f_flag = "_f_contiguous" if hasattr(probe, "_f_contiguous") else None
        self.buf = (ctypes.c_int64 * max(len(fields), 1))(*fields)
        base = ctypes.addressof(self.buf)
        self.params = (ctypes.c_void_p * max(len(fields), 1))(
            *[base + 8 * i for i in range(len(fields))])
        self.params_addr = ctypes.addressof(self.params)
        if not self.pack(args):
            raise ValueError("the arguments do not fit the specialisation numba chose")

    def pack(self, args) -> bool:
        """Write the arguments into the buffer; False if one does not fit the specialisation."""
        buf = self.buf
        for slot, a in zip(self.slots, args):
            kind = slot[0]
            if kind == "a":
                _, j, layout, s0, s1 = slot
                if layout == "C":
                    if not (getattr(a, self.c_flag) if self.c_flag else a.flags.c_contiguous):
                        return False
                elif layout == "F":
                    if not (getattr(a, self.f_flag) if self.f_flag else a.flags.f_contiguous):
                        return False
                elif s1 > s0:
                    buf[s0:s1] = a.strides
                buf[j] = a.data.ptr
            elif kind == "i":
                buf[slot[1]] = a
            elif a != slot[1]:
                return False
        return True


_default: list = []
_default_lock = threading.Lock()


def default_arrays():
    """The adapter for this process: the numpy stand-in under the simulator, else cupy (after
    ``check_available``, which raises ``BackendError`` when no GPU can be used)."""
    if _default:
        return _default[0]
    with _default_lock:
        if not _default:
            if simulator_enabled():
                _default.append(HostArrays())
            else:
                check_available()
                _default.append(CupyArrays())
    return _default[0]


class SimLibdevice:
    """The libdevice functions generated kernels call, for the CUDA simulator (numba's
    ``libdevice`` stubs return None there): ``dmul_rn``/``fmul_rn`` are IEEE products rounded
    to nearest, which is what numpy scalars compute (float32 stays float32)."""

    @staticmethod
    def dmul_rn(x, y):
        return x * y

    @staticmethod
    def fmul_rn(x, y):
        return x * y

    # what recipe helpers (ops.scalar_recipe) call: exact FMAs, bit casts, libm's log
    @staticmethod
    def fma(x, y, z):
        return exact_fma(np.float64(x), np.float64(y), np.float64(z))

    @staticmethod
    def fmaf(x, y, z):
        return exact_fma(np.float32(x), np.float32(y), np.float32(z))

    @staticmethod
    def float_as_int(x):
        return np.asarray(x, np.float32).view(np.int32)[()]

    @staticmethod
    def int_as_float(i):
        return np.asarray(i, np.int32).view(np.float32)[()]

    @staticmethod
    def double_as_longlong(x):
        return np.asarray(x, np.float64).view(np.int64)[()]

    @staticmethod
    def longlong_as_double(i):
        return np.asarray(i, np.int64).view(np.float64)[()]

    @staticmethod
    def log(x):
        """libm's log (the CPU kernels' and the numpy impls'; on a GPU, ``__nv_log``)."""
        x = float(x)
        return np.float64(math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan))


class SimMath:
    """``math`` for kernels run by the CUDA simulator: IEEE results like libdevice's
    (``log(0) = -inf``, ``sqrt(-1) = nan``, ``exp(1000) = inf``, float32 in -> float32 out)
    where Python's ``math`` raises or returns float64. The kernel *source* is the one the GPU
    compiles; only the name ``math`` in its module is rebound under the simulator."""

    exp, expm1, log, log2, log10, log1p = np.exp, np.expm1, np.log, np.log2, np.log10, np.log1p
    sin, cos, tan, asin, acos, atan = np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan
    sinh, cosh, tanh, asinh, acosh, atanh = (np.sinh, np.cosh, np.tanh, np.arcsinh, np.arccosh,
                                             np.arctanh)
    sqrt, pow, atan2, hypot, copysign, fmod = (np.sqrt, np.power, np.arctan2, np.hypot,
                                               np.copysign, np.fmod)
    isnan, isinf, isfinite = np.isnan, np.isinf, np.isfinite
    fabs, floor, ceil, trunc = np.fabs, np.floor, np.ceil, np.trunc

    @staticmethod
    def erf(x):
        return type(x)(math.erf(x))

    @staticmethod
    def erfc(x):
        return type(x)(math.erfc(x))

    @staticmethod
    def lgamma(x):
        try:
            return type(x)(math.lgamma(x))
        except (ValueError, OverflowError):
            return type(x)(np.inf)
