"""Array helpers for numba-compiled loops (``cpu_loop``): ``shaped(buf, shape)``, a flat
C-contiguous buffer seen with another C shape, without numba's ``reshape``; ``copy(dst,
src)``, one flat buffer into another, and ``scratch(n, dtype)``, a new buffer, both
compiled once into numba's disk cache.

Why: numba's ``ndarray.reshape`` checks its argument at run time through a helper
(``_attempt_nocopy_reshape``) that numba compiles as a subroutine the first time a process
lowers a reshape (~0.25 s, measured on the scan RNN benchmark's first loop), and every call
site lowers the checks again. A compiled loop's buffers are flat, C-contiguous and sized by
the code generator, which writes the shape as a tuple literal of the same element count, so
the view needs no check: ``shaped`` builds the array structure (same data, meminfo and
parent; C strides of ``shape``) directly. A buffer of any other layout is a typing error,
never a wrong view.

``copy``: every ``for q in range(n): dst[q] = src[q]`` a loop module writes itself costs
~35 ms of numba lowering and LLVM (a loop copies results not written in place, each trip);
called, the copy is compiled once per signature and cached next to this file, and LLVM
inlines it into the caller. Each call site still costs compile time (~30 ms), so loops copy
their carries in and out in the Python runner instead (``cpu_loop.make_runner``).

Imports numba and numpy only; nothing in functrace imports it except generated kernel and
loop modules.
"""

import numba
import numpy as np
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from .numba_target import configure as _configure_numba

_configure_numba()   # numba's CPU features for our kernels, before the first @njit here

__all__ = ["shaped", "copy", "scratch"]


@intrinsic
def shaped(typingctx, buf, shape):
    """``buf`` (a C-contiguous array) viewed with C shape ``shape`` (a tuple of integers whose
    product is ``buf.size``: the caller's promise, not checked)."""
    if not (isinstance(buf, types.Array) and buf.layout == "C"
            and isinstance(shape, types.BaseTuple)
            and all(isinstance(t, types.Integer) for t in shape)):
        return None
    ndim = len(shape)
    ret = buf.copy(ndim=ndim, layout="C")

    def codegen(context, builder, sig, args):
        arr, shp = args
        src = make_array(sig.args[0])(context, builder, arr)
        dst = make_array(sig.return_type)(context, builder)
        dims = [context.cast(builder, d, t, types.intp) for d, t in
                zip(cgutils.unpack_tuple(builder, shp, ndim), sig.args[1])]
        strides, step = [], src.itemsize
        for d in reversed(dims):
            strides.append(step)
            step = builder.mul(step, d)
        populate_array(dst, data=src.data, shape=dims, strides=strides[::-1],
                       itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return impl_ret_borrowed(context, builder, sig.return_type, dst._getvalue())
    return ret(buf, shape), codegen


@numba.njit(cache=True, error_model="numpy", boundscheck=False, nogil=True)
def copy(dst, src):
    """``dst[:] = src`` for 1-d buffers of the same length (numba's slice assignment costs
    ~1.6 s of compile)."""
    for q in range(dst.shape[0]):
        dst[q] = src[q]


@numba.njit(cache=True, error_model="numpy", boundscheck=False, nogil=True)
def scratch(n, dtype):
    """``np.empty(n, dtype)``, compiled once per dtype into numba's cache: a kernel that
    calls ``np.empty`` itself has numba compile numpy's allocation code in every process
    (~0.2 s the first time; the chunked reductions' buffer)."""
    return np.empty(n, dtype)
