"""functrace.numpy's machinery: eager dispatch, numpy dtype promotion, explicit broadcasting.

Owns the rules that make ``fnp.f`` behave exactly like ``np.f``: outside any transform a
function calls numpy directly (so values, dtypes and shapes *are* numpy's); inside one, dtypes
are resolved by asking numpy itself (``ufunc.resolve_dtypes``, or numpy on a 1-element dummy for
non-ufuncs, cached per dtype signature), operands are cast with ``convert_element_type`` and
broadcast with ``broadcast_in_dim``, and only then is the op bound. Ops never promote.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import caches, ops
from ..core import AVal, on_device
from ..tracing import Tracer, host_copy

__all__ = ["asarray_any", "aval", "dtype_key", "resolve_ufunc",
           "cast", "bcast", "broadcast_all", "ufunc_apply", "normalize_axis", "normalize_axes",
           "result_dtype_like_numpy", "is_weak_scalar", "weak_result_type"]


_PY_SCALARS = (bool, int, float, complex)


def aval(x) -> AVal:
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, np.ndarray):
        return AVal(x.shape, x.dtype)
    if on_device(x):
        return AVal.of(x)
    return AVal.of(np.asarray(x))


def asarray_any(x):
    """Tracers pass through; everything else becomes a numpy array (rejecting object data).
    A GPU array met while tracing is a constant of the graph: its host copy."""
    if isinstance(x, Tracer):
        return x
    if on_device(x):
        x = host_copy(x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biufc":
            raise TypeError(f"functrace cannot trace arrays of dtype {x.dtype}")
        return x
    if isinstance(x, list | tuple) and any(isinstance(e, Tracer) for e in _iter_nested(x)):
        return _stack_items(x)
    a = np.asarray(x)
    if a.dtype.kind not in "biufc":
        raise TypeError(f"functrace cannot use {type(x).__name__} {x!r:.60} as an array "
                        f"(dtype {a.dtype})")
    return a


def _stack_items(x):
    """A list or tuple that holds tracers as one array, as ``np.array`` reads nested rows: its
    items (each made an array the same way), promoted to one dtype and stacked on a new first
    axis (``fnp.stack``'s work, done here so that this module imports no other of the
    package)."""
    xs = [asarray_any(e) for e in x]
    dt = np.result_type(*[dtype_key(e) for e in xs])
    xs = [cast(e, dt) for e in xs]
    if len({e.shape for e in xs}) != 1:
        raise ValueError("setting an array element with a sequence: the items have shapes "
                         f"{', '.join(str(e.shape) for e in xs)}, which are not all equal")
    return ops.concatenate([ops.reshape(e, (1, *e.shape)) for e in xs], 0)


def _iter_nested(x):
    for e in x:
        if isinstance(e, list | tuple):
            yield from _iter_nested(e)
        else:
            yield e


def is_weak_scalar(x) -> bool:
    """A Python scalar (weakly typed under NEP 50); numpy scalars such as ``np.float64``
    (a subclass of ``float``) are strongly typed and are not."""
    return isinstance(x, _PY_SCALARS) and not isinstance(x, np.generic)


def dtype_key(x):
    """A dtype for numpy's ufunc resolution: Python scalars stay *weak* (NEP 50)."""
    if isinstance(x, Tracer) or type(x) is np.ndarray:
        return x.dtype
    if isinstance(x, np.generic):
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(bool)
    if isinstance(x, _PY_SCALARS):
        return type(x)
    if isinstance(x, Tracer) or on_device(x):
        return np.dtype(x.dtype)
    return np.asarray(x).dtype


def weak_result_type(*xs) -> np.dtype:
    """``np.result_type`` of operands with NEP 50's weak Python scalars (``x_f32`` with
    ``1.0`` gives float32), for the non-ufunc functions (where, clip, ...)."""
    return np.result_type(*[x if is_weak_scalar(x) else
                            (x if isinstance(x, np.dtype) else dtype_key(x)) for x in xs])


@caches.lru_cached("numpy.ufunc_dtypes", maxsize=4096)
def resolve_ufunc(uf: np.ufunc, dtypes: tuple):
    """(input dtypes, output dtype) numpy's ufunc machinery picks for these operands.

    Ops take operands of one dtype, so a mixed loop (numpy 2 compares int64 with uint64
    directly) is computed in the common type (float64 for int64/uint64: inexact only beyond
    2**53)."""
    res = uf.resolve_dtypes(dtypes + (None,) * uf.nout)
    in_dts = tuple(res[:uf.nin])
    if len(set(in_dts)) > 1:
        in_dts = (np.result_type(*in_dts),) * len(in_dts)
    return in_dts, res[uf.nin]


def cast(x, dtype):
    """Convert to ``dtype`` (Python scalars become 0-d arrays of it)."""
    if type(dtype) is not np.dtype and not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    if isinstance(x, _PY_SCALARS):
        return np.asarray(x, dtype=dtype)
    if isinstance(x, Tracer):
        return x if x.dtype == dtype else ops.convert_element_type(x, dtype)
    x = np.asarray(x)
    return x if x.dtype == dtype else x.astype(dtype)


def bcast(x, shape):
    """numpy-style broadcast to ``shape``; 0-d operands are left 0-d (ops broadcast them)."""
    xs = np.shape(x) if not isinstance(x, Tracer) else x.shape
    if xs == tuple(shape) or xs == ():
        return x
    return ops.broadcast_to_shape(x, tuple(shape))


def broadcast_all(*xs):
    shapes = [x.shape if isinstance(x, Tracer) else np.shape(x) for x in xs]
    full = [s for s in shapes if s]
    if not full or all(s == full[0] for s in full):   # fast path: equal shapes or 0-d
        return (full[0] if full else ()), list(xs)
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"operands could not be broadcast together with shapes "
                         f"{' '.join(str(s) for s in shapes)}") from None
    return shape, [bcast(x, shape) for x in xs]


def ufunc_apply(uf: np.ufunc, prim_fn, *args):
    """Trace ``uf(*args)`` as ``prim_fn`` with numpy's promotion and broadcasting."""
    if len(args) == 1 and isinstance(args[0], Tracer):   # the common unary case, quickly
        x = args[0]
        in_dts, out_dt = resolve_ufunc(uf, (x.dtype,))
        if x.dtype != in_dts[0]:
            x = ops.convert_element_type(x, in_dts[0])
        out = prim_fn(x)
        if out.dtype != out_dt:
            out = ops.convert_element_type(out, out_dt)
        return out
    if len(args) == 2:
        x, y = args
        if (isinstance(x, Tracer) and (isinstance(y, Tracer) or type(y) is np.ndarray)
                and x.dtype == y.dtype and x.shape == y.shape) or (
                type(x) is np.ndarray and isinstance(y, Tracer) and x.dtype == y.dtype
                and x.shape == y.shape):
            # operands of one dtype and shape: nothing to promote or broadcast
            in_dts, out_dt = resolve_ufunc(uf, (x.dtype, x.dtype))
            if x.dtype == in_dts[0]:
                out = prim_fn(x, y)
                return out if out.dtype == out_dt else ops.convert_element_type(out, out_dt)
        if isinstance(x, Tracer) and (type(y) is float or type(y) is int):
            # tracer op Python scalar (x * 2.0): the scalar is weak, a 0-d operand broadcasts
            in_dts, out_dt = resolve_ufunc(uf, (x.dtype, type(y)))
            if x.dtype == in_dts[0]:
                out = prim_fn(x, np.asarray(y, in_dts[1]))
                return out if out.dtype == out_dt else ops.convert_element_type(out, out_dt)
        elif isinstance(y, Tracer) and (type(x) is float or type(x) is int):
            in_dts, out_dt = resolve_ufunc(uf, (type(x), y.dtype))
            if y.dtype == in_dts[1]:
                out = prim_fn(np.asarray(x, in_dts[0]), y)
                return out if out.dtype == out_dt else ops.convert_element_type(out, out_dt)
    args = [a if is_weak_scalar(a) else asarray_any(a) for a in args]
    in_dts, out_dt = resolve_ufunc(uf, tuple(dtype_key(a) for a in args))
    args = [cast(a, d) for a, d in zip(args, in_dts)]
    _, args = broadcast_all(*args)
    out = prim_fn(*args)
    if isinstance(out, Tracer) and out.dtype != out_dt:
        out = ops.convert_element_type(out, out_dt)
    elif not isinstance(out, Tracer):
        out = np.asarray(out).astype(out_dt, copy=False)
    return out


def normalize_axis(axis, ndim):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer or a tuple of integers, got "
                        f"{type(axis).__name__} {axis!r:.40}") from None
    if not -ndim <= axis < max(ndim, 1):
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension "
                                      f"{ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int | np.integer):
        return (normalize_axis(axis, ndim),)
    if isinstance(axis, str) or not hasattr(axis, "__iter__") or getattr(axis, "ndim", 1) == 0:
        return (normalize_axis(axis, ndim),)    # raises for anything but an integer
    axes = tuple(normalize_axis(a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in 'axis': {tuple(axis)}")
    return tuple(sorted(axes))


@caches.lru_cached("numpy.result_dtypes", maxsize=4096)
def _dummy_result_dtype(fn, dtypes, kwargs):
    args = [np.ones((1,), d) for d in dtypes]
    return np.asarray(fn(*args, **dict(kwargs))).dtype


def result_dtype_like_numpy(fn, *dtypes, **kwargs) -> np.dtype:
    """The dtype numpy's ``fn`` returns for operands of ``dtypes`` (asked on 1-element
    dummies, cached)."""
    return _dummy_result_dtype(fn, tuple(np.dtype(d) for d in dtypes),
                               tuple(sorted(kwargs.items())))
