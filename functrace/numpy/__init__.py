"""functrace.numpy: numpy's API, traceable and differentiable (like jax.numpy / autograd.numpy).

On plain numpy inputs outside a transform every function *is* numpy's (same values, dtypes,
shapes). Inside a transform the same call records ops, with numpy's promotion and broadcasting
made explicit. This package also installs the array protocol on ``Tracer`` (operators,
indexing, ``.T``, ``.at[]``, methods), the one place where an upper layer plugs into tracing.

Example:
    >>> import numpy as np, functrace as ft, functrace.numpy as fnp
    >>> ft.trace(lambda x: fnp.sum(fnp.sin(x) ** 2))(np.ones(3)).outputs[0].aval
    f64[]
"""

from __future__ import annotations

import numpy as _np

from ..tracing import Tracer as _Tracer
from . import _core, _creation, _indexing, _products, _reductions, _shape, _ufuncs
from ._creation import *  # noqa: F403
from ._indexing import AtIndexer, nonzero, argwhere, flatnonzero, take, take_along_axis
from ._products import *  # noqa: F403
from ._reductions import *  # noqa: F403
from ._shape import *  # noqa: F403
from ._ufuncs import *  # noqa: F403
from . import linalg  # noqa: E402

# dtypes and constants, exactly numpy's objects
(float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_,
 complex64, complex128, intp, dtype, ndarray, newaxis, pi, e, inf, nan, euler_gamma,
 result_type, promote_types, can_cast, finfo, iinfo, issubdtype, floating, integer, number,
 inexact, complexfloating, signedinteger, unsignedinteger) = (
    _np.float16, _np.float32, _np.float64, _np.int8, _np.int16, _np.int32, _np.int64, _np.uint8,
    _np.uint16, _np.uint32, _np.uint64, _np.bool_, _np.complex64, _np.complex128, _np.intp,
    _np.dtype, _np.ndarray, _np.newaxis, _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma,
    _np.result_type, _np.promote_types, _np.can_cast, _np.finfo, _np.iinfo, _np.issubdtype,
    _np.floating, _np.integer, _np.number, _np.inexact, _np.complexfloating,
    _np.signedinteger, _np.unsignedinteger)
bool = _np.bool_  # noqa: A001


def at(x):
    """``fnp.at(x)[idx].set(v)``: the functional update, for numpy arrays and tracers alike.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.at(np.zeros(2))[0].add(1.0)
        array([1., 0.])
    """
    return AtIndexer(x)


def _install_tracer_methods():
    T = _Tracer
    bin_ops = {"add": _ufuncs.add, "sub": _ufuncs.subtract, "mul": _ufuncs.multiply,
               "truediv": _ufuncs.true_divide, "floordiv": _ufuncs.floor_divide,
               "mod": _ufuncs.remainder, "pow": _ufuncs.power, "matmul": _products.matmul,
               "and": _ufuncs.logical_and, "or": _ufuncs.logical_or,
               "xor": _ufuncs.logical_xor}

    def fwd(fn):
        return lambda self, other: fn(self, other)

    def rev(fn):
        return lambda self, other: fn(other, self)

    for name, fn in bin_ops.items():
        setattr(T, f"__{name}__", fwd(fn))
        setattr(T, f"__r{name}__", rev(fn))
    cmp = {"lt": _ufuncs.less, "le": _ufuncs.less_equal, "gt": _ufuncs.greater,
           "ge": _ufuncs.greater_equal, "eq": _ufuncs.equal, "ne": _ufuncs.not_equal}
    for name, fn in cmp.items():
        setattr(T, f"__{name}__", fwd(fn))
    T.__neg__ = lambda self: _ufuncs.negative(self)
    T.__pos__ = lambda self: self
    T.__abs__ = lambda self: _ufuncs.absolute(self)
    T.__invert__ = lambda self: _ufuncs.logical_not(self) if self.dtype == _np.bool_ else \
        _not_supported("~ on integer tracers")
    T.__getitem__ = lambda self, idx: _indexing.getitem(self, idx)
    T.T = property(lambda self: _shape.transpose(self))
    T.mT = property(lambda self: _shape.swapaxes(self, -1, -2))
    T.at = property(lambda self: AtIndexer(self))
    T.real = property(lambda self: _ufuncs.real(self))
    T.imag = property(lambda self: _ufuncs.imag(self))
    for name, fn in {"sum": _reductions.sum, "mean": _reductions.mean,
                     "prod": _reductions.prod, "max": _reductions.max,
                     "min": _reductions.min, "var": _reductions.var, "std": _reductions.std,
                     "argmax": _reductions.argmax, "argmin": _reductions.argmin,
                     "cumsum": _reductions.cumsum, "cumprod": _reductions.cumprod,
                     "all": _reductions.all, "any": _reductions.any,
                     "ravel": _shape.ravel, "squeeze": _shape.squeeze,
                     "swapaxes": _shape.swapaxes, "dot": _products.dot,
                     "conj": _ufuncs.conjugate, "conjugate": _ufuncs.conjugate,
                     "round": _ufuncs.round, "trace": _shape.trace,
                     "diagonal": _shape.diagonal, "repeat": _shape.repeat,
                     "take": _indexing.take, "ptp": _reductions.ptp,
                     "nonzero": _indexing.nonzero}.items():
        setattr(T, name, (lambda f: lambda self, *a, **k: f(self, *a, **k))(fn))

    def clip(self, min=None, max=None, **kw):  # noqa: A002
        return _ufuncs.clip(self, min, max)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], int | _np.integer):
            shape = shape[0]
        return _shape.reshape(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int | _np.integer):
            axes = axes[0]
        return _shape.transpose(self, axes or None)

    def astype(self, dtype, copy=True, **kw):
        return _core.cast(self, dtype)

    def sort(self, axis=-1, **kw):
        raise TypeError("traced arrays are immutable: use x = fnp.sort(x) instead of x.sort()")

    def flatten(self, order="C"):
        return _shape.ravel(self)

    T.clip, T.reshape, T.transpose, T.astype, T.sort, T.flatten = (
        clip, reshape, transpose, astype, sort, flatten)
    T.copy = lambda self: self


def _not_supported(what):
    raise TypeError(f"{what} is not supported on traced arrays")


_install_tracer_methods()
