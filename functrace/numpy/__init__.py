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

from ..errors import FunctraceTypeError as _FunctraceTypeError
from ..tracing import USER_ERRORS as _USER_ERRORS
from ..tracing import Tracer as _Tracer
from ..tracing import user_source as _user_source
from ..tracing import source_line as _source_line
from ..tracing import user_error as _user_error
from . import _core, _creation, _indexing, _joining, _products, _reductions, _shape, _ufuncs  # noqa: F401
from . import _calculus, _construction, _logic, _searching, _statistics  # noqa: F401
from ._creation import *  # noqa: F403
from ._indexing import (  # noqa: F401  (re-exported)
    AtArray, AtIndexer, argwhere, flatnonzero, nonzero, take, take_along_axis)
from ._products import *  # noqa: F403
from ._reductions import *  # noqa: F403
from ._shape import *  # noqa: F403
from ._joining import *  # noqa: F403
from ._ufuncs import *  # noqa: F403
from ._logic import *  # noqa: F403
from ._statistics import *  # noqa: F403
from ._calculus import *  # noqa: F403
from ._searching import *  # noqa: F403
from ._construction import *  # noqa: F403
from . import fft, linalg, random  # noqa: F401  (numpy's numpy.random, for autograd ports)

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
bool = _np.bool_
# numpy's floating-point error settings, which the eager (numpy) computations follow
seterr, geterr, errstate = _np.seterr, _np.geterr, _np.errstate


def at(x):
    """``fnp.at(x)[idx].set(v)``: the functional update, for numpy arrays and tracers alike
    (``.set``, ``.add``, ``.multiply``, ``.min``, ``.max``, ``.get``; JAX's ``x.at[idx]``).
    Tracers have ``x.at`` themselves; so do eager results with ``ft.config.eager_at`` on.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.at(np.zeros(2))[0].add(1.0)
        array([1., 0.])
    """
    return AtIndexer(x)


def _binary(fn, name, reflected=False):
    """A Tracer operator calling ``fn``; numpy-style errors it raises for bad operands become
    functrace's, naming the operator and the user's line (``tracing.user_error``)."""
    if reflected:
        def op(self, other):
            try:
                return fn(other, self)
            except _USER_ERRORS as e:
                err = _user_error(e, name, (self,))
                if err is e:
                    raise
                raise err from None
    else:
        def op(self, other):
            try:
                return fn(self, other)
            except _USER_ERRORS as e:
                err = _user_error(e, name, (self,))
                if err is e:
                    raise
                raise err from None
    return op


def _method(fn, name):
    """A Tracer method calling ``fn(self, ...)``, with functrace's errors (see ``_binary``)."""
    def method(self, *a, **k):
        try:
            return fn(self, *a, **k)
        except _USER_ERRORS as e:
            err = _user_error(e, name, (self,))
            if err is e:
                raise
            raise err from None
    return method


def _install_tracer_methods():
    T = _Tracer
    bin_ops = {"add": (_ufuncs.add, "+"), "sub": (_ufuncs.subtract, "-"),
               "mul": (_ufuncs.multiply, "*"), "truediv": (_ufuncs.true_divide, "/"),
               "floordiv": (_ufuncs.floor_divide, "//"), "mod": (_ufuncs.remainder, "%"),
               "pow": (_ufuncs.power, "**"), "matmul": (_products.matmul, "@"),
               "and": (_ufuncs.bitwise_and, "&"), "or": (_ufuncs.bitwise_or, "|"),
               "xor": (_ufuncs.bitwise_xor, "^"), "lshift": (_ufuncs.left_shift, "<<"),
               "rshift": (_ufuncs.right_shift, ">>")}
    for name, (fn, sym) in bin_ops.items():
        what = f"x {sym} y (fnp.{fn.__name__})"
        setattr(T, f"__{name}__", _binary(fn, what))
        setattr(T, f"__r{name}__", _binary(fn, what, reflected=True))
    cmp = {"lt": (_ufuncs.less, "<"), "le": (_ufuncs.less_equal, "<="),
           "gt": (_ufuncs.greater, ">"), "ge": (_ufuncs.greater_equal, ">="),
           "eq": (_ufuncs.equal, "=="), "ne": (_ufuncs.not_equal, "!=")}
    for name, (fn, sym) in cmp.items():
        setattr(T, f"__{name}__", _binary(fn, f"x {sym} y (fnp.{fn.__name__})"))
    T.__neg__ = lambda self: _ufuncs.negative(self)
    T.__pos__ = lambda self: self
    T.__abs__ = lambda self: _ufuncs.absolute(self)
    T.__invert__ = lambda self: _ufuncs.invert(self)
    T.__getitem__ = _binary(_indexing.getitem, "x[index] (indexing)")
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
        setattr(T, name, _method(fn, f"x.{name}"))

    def clip(self, min=None, max=None, **kw):
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
        raise _FunctraceTypeError("traced arrays are immutable: use x = fnp.sort(x) instead of "
                                  f"x.sort(), at {_source_line(_user_source())}")

    def flatten(self, order="C"):
        return _shape.ravel(self)

    T.clip, T.reshape, T.transpose, T.astype, T.flatten = (
        _method(clip, "x.clip"), _method(reshape, "x.reshape"),
        _method(transpose, "x.transpose"), _method(astype, "x.astype"),
        _method(flatten, "x.flatten"))
    T.sort = sort
    T.copy = lambda self: self
    T.__array_ufunc__ = _array_ufunc
    T.__array_function__ = _array_function


# numpy's own functions called on a tracer (np.sin(x), np.concatenate([x, y]), ndarray + x)
# run as functrace.numpy's function of the same name. Without this, numpy would turn the
# tracer into its concrete value through __array__ and the result would silently be a
# constant: a zero gradient. A numpy function fnp lacks is a TypeError saying so.

def _fnp_counterpart(np_fn, module):
    import sys
    ns = sys.modules[__name__]
    sub = module.split(".")[1:] if module.startswith("numpy.") else []
    for part in sub:
        ns = getattr(ns, part, None)
        if ns is None:
            return None
    fn = getattr(ns, np_fn.__name__, None)
    return None if fn is None or fn is np_fn or not callable(fn) else fn


def _check_live(self):
    from ..errors import TracerLeakError
    from ..tracing import current_trace
    if current_trace() is None or not self._trace.active:
        raise TracerLeakError("a traced value was used outside of its transform (stored in a "
                              "global or a closure?), at "
                              f"{_source_line(_user_source())}: return it from the function "
                              "instead")


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    _check_live(self)
    fn = _fnp_counterpart(ufunc, "numpy") if method == "__call__" else None
    if fn is None or "out" in kwargs:
        what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        raise _FunctraceTypeError(
            f"{what} was called on a traced array with {sorted(kwargs) or 'no'} keywords, at "
            f"{_source_line(_user_source())}; it is not traceable. Use functrace.numpy's "
            "function (arrays are immutable: no out=), or np.asarray(x) to take the concrete "
            "value (no gradient flows through it).")
    return fn(*inputs, **kwargs)


def _array_function(self, func, types, args, kwargs):
    _check_live(self)
    module = getattr(func, "__module__", None) or "numpy"
    fn = _fnp_counterpart(func, module)
    if fn is None:
        raise _FunctraceTypeError(
            f"{module}.{func.__name__} was called on a traced array, at "
            f"{_source_line(_user_source())}, and has no functrace.numpy counterpart, so it "
            "cannot be traced or differentiated. Write it with functrace.numpy, or use "
            "np.asarray(x) to take the concrete value (no gradient flows through it).")
    return fn(*args, **kwargs)


_install_tracer_methods()


def _dispatch_device_arrays():
    """Every public function of this namespace, of ``fnp.linalg`` and of ``fnp.fft`` takes GPU
    arrays outside transforms with numpy's semantics (``_device.py``)."""
    import inspect

    from ._device import device_dispatch
    from ._indexing import with_at
    wrapped: dict = {}        # one wrapper per function: aliases (around = round) stay aliases
    for ns in (globals(), vars(linalg), vars(fft)):
        for name, fn in list(ns.items()):
            if (inspect.isfunction(fn) and not name.startswith("_") and name != "at"
                    and fn.__module__.startswith(__name__)):
                if fn not in wrapped:
                    wrapped[fn] = device_dispatch(fn, with_at)
                ns[name] = wrapped[fn]


_dispatch_device_arrays()
del annotations   # the __future__ feature object: not part of the numpy namespace
