"""Extension ops defined the way a user outside the package defines them (functrace.extend),
for tests/ops/test_extend.py (imported, and run in a CUDA-simulator subprocess)."""

import math

import numpy as np

import functrace.numpy as fnp
from functrace.extend import define_elementwise, define_op

#: unary, with a scalar function that uses math, builtins and a closed-over number
_SHIFT = 0.0
softplus = define_elementwise(
    "ext_softplus", lambda x: np.logaddexp(0.0, x),
    scalar=lambda x: math.log1p(math.exp(-abs(x))) + max(x, _SHIFT),
    derivative=lambda x, y: 1 / (1 + fnp.exp(-x)))


def _sq_diff(x, y):
    d = x - y
    return d * d


#: binary, with a def scalar function and one partial per input
sqdiff = define_elementwise(
    "ext_sqdiff", lambda x, y: (x - y) ** 2, scalar=_sq_diff,
    derivative=lambda x, y, out: (2 * (x - y), -2 * (x - y)))


class _Opaque:
    def __call__(self, x):
        return x


_helper = _Opaque()

#: a scalar function a kernel cannot inline (it calls an arbitrary object): unfused
bad = define_elementwise(
    "ext_bad", lambda x: x * 3.0, scalar=lambda x: _helper(x) * 3.0,
    derivative=lambda x, y: fnp.full_like(x, 3.0))


# a non-elementwise op: a reversed cumulative sum along one axis, with all three rules
def _rcumsum_impl(x, *, axis):
    return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis)


def _rcumsum_abstract(x, *, axis):
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} out of range for {x.ndim} dims")
    return x.shape, x.dtype


def _rcumsum_vjp(cts, ins, outs, *, axis):
    return (fnp.cumsum(cts[0], axis=axis),)


def _rcumsum_jvp(primals, tangents, outs, *, axis):
    return (rcumsum(tangents[0], axis=axis),)


def _rcumsum_batch(args, dims, *, axis):
    (x,), (d,) = args, dims
    x = fnp.moveaxis(x, d, 0)
    ax = axis % (x.ndim - 1) + 1
    return rcumsum(x, axis=ax), 0


rcumsum = define_op("ext_rcumsum", _rcumsum_impl, _rcumsum_abstract, vjp=_rcumsum_vjp,
                    jvp=_rcumsum_jvp, batch=_rcumsum_batch)
