"""The CUDA backend's device layer: availability, and the device-array adapters.

Owns everything that touches cupy (or stands in for it): ``check_available`` /
``unavailable_reason`` (the error text naming the extra to install and whether a driver was
found), ``CupyArrays`` (allocation, host<->device copies, kernel arguments through
``__cuda_array_interface__``, streams and events, op impls run with cupy), ``HostArrays`` (a
numpy stand-in with the same interface, for numba's CUDA simulator, which takes numpy
arrays and rejects foreign ``__cuda_array_interface__`` objects), ``default_arrays`` and the
simulator's ``math`` (``SimMath``). The executor (``numba_cuda``) talks to the device only
through an adapter, so the simulator tests exercise all of it but this file's cupy half.
Imports errors only; **cupy and numba are imported when an adapter is made**.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading

import numpy as np

from ..errors import BackendError

__all__ = ["INSTALL_HINT", "simulator_enabled", "unavailable_reason", "check_available",
           "HostArrays", "CupyArrays", "default_arrays", "SimMath"]

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

def _cuda():
    from numba import cuda
    return cuda


class HostArrays:
    """numpy arrays as "device" arrays, for numba's CUDA simulator (whose kernels take numpy
    arrays and reject foreign ``__cuda_array_interface__`` objects). Streams are no-ops."""

    name = "numpy (CUDA simulator)"
    simulated = True

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


class CupyArrays:
    """cupy arrays on the current CUDA device; kernels launched by numba.cuda on our stream."""

    name = "cupy"
    simulated = False

    def __init__(self):
        import cupy
        self.cp = cupy
        self.xp = cupy
        self.cuda = _cuda()
        self._host_ops: set[str] = set()

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

    def kernel_arg(self, x):
        # sync=False: ordering is ours (one stream per call site); numba's default would
        # synchronise the host on the array's stream for every argument of every launch
        return self.cuda.as_cuda_array(x, sync=False)

    def new_stream(self):
        s = self.cp.cuda.Stream(non_blocking=False)
        return s, self.cuda.external_stream(s.ptr)

    def launcher(self, kernel, grid, block, stream):
        return kernel[grid, block, stream[1]]

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
        try:
            res = op.impl(*args, **params)
        except Exception as exc:   # cupy could not run it: the host can
            if op.name not in self._host_ops:
                self._host_ops.add(op.name)
                log.warning("functrace: %s runs on the host (cupy cannot run its numpy impl: "
                            "%s)", op.name, str(exc)[:200])
            host = [self.to_host(a) for a in args]
            res = op.impl(*host, **params)
        if op.multiple_results:
            return tuple(self.own(r) for r in res)
        return self.own(res)

    def sm_count(self) -> int:
        dev = self.cp.cuda.Device()
        return int(dev.attributes["MultiProcessorCount"])


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
