"""Indexing for functrace.numpy: ``x[idx]``, ``x.at[idx].set/add/multiply``, take, nonzero.

Owns the translation of a numpy index expression into ops. Basic indices (ints, slices,
None, Ellipsis) lower to ``slice``/``rev``/``reshape`` (cheap, fusable, with a pad for a
gradient); anything with integer arrays lowers to ``gather``/``scatter`` with a spec that keeps
numpy's placement rules. A boolean mask has a data-dependent shape: it needs a concrete value
(it is converted to integer indices), and with abstract inputs it is a ConcretizationError.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import ops, tree_util
from ..core import on_device
from ..errors import ConcretizationError, FunctraceValueError
from ..tracing import USER_ERRORS, Tracer, current_trace, user_error
from ._core import asarray_any, cast, normalize_axis

__all__ = ["getitem", "AtIndexer", "take", "take_along_axis", "nonzero", "argwhere",
           "flatnonzero"]


def _is_array_index(e):
    return isinstance(e, Tracer | np.ndarray | list) or (
        hasattr(e, "__array__") and not isinstance(e, np.generic | slice))


def _concrete_mask(m):
    if isinstance(m, Tracer):
        try:
            return np.asarray(m.value)
        except ConcretizationError:
            raise ConcretizationError(
                "boolean-mask indexing x[mask] has a shape that depends on the mask's values, "
                "which are not known while tracing with abstract inputs. Use "
                "fnp.where(mask, x, 0) (same shape) instead.") from None
    return np.asarray(m)


def _parse(shape, idx):
    """numpy index -> (spec, index arrays, basic_only)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    # booleans masks -> integer arrays (concrete); lists -> arrays
    expanded = []
    for e in idx:
        if isinstance(e, list):
            e = asarray_any(e)
        if _is_array_index(e) and not isinstance(e, list):
            dt = e.dtype if isinstance(e, Tracer) else np.asarray(e).dtype
            if dt == np.dtype(bool):
                expanded.extend(("mask", a) for a in np.nonzero(_concrete_mask(e)))
                continue
            if dt.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type, "
                                 f"not {dt}")
            expanded.append(("arr", e))
        elif isinstance(e, bool | np.bool_):
            raise IndexError("a scalar boolean index is not supported while tracing")
        else:
            expanded.append(e)
    n_consumed = sum(1 for e in expanded if e is not None and e is not Ellipsis)
    if sum(1 for e in expanded if e is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_consumed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {n_consumed} were indexed")
    full = []
    for e in expanded:
        if e is Ellipsis:
            full.extend([slice(None)] * (len(shape) - n_consumed))
        else:
            full.append(e)
    has_arrays = any(isinstance(e, tuple) for e in full)
    spec, arrays = [], []
    axis = 0
    for e in full:
        if e is None:
            spec.append(("none",))
            continue
        n = shape[axis]
        if isinstance(e, slice):
            spec.append(("slice",) + e.indices(n))
        elif isinstance(e, tuple):
            a = e[1]
            if e[0] == "arr":
                a = _wrap_negative(a, n, axis)
            spec.append(("arr", len(arrays)))
            arrays.append(a)
        else:
            i = operator.index(e)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            i %= n
            if has_arrays:
                spec.append(("arr", len(arrays)))
                arrays.append(np.asarray(i, np.intp))
            else:
                spec.append(("int", i))
        axis += 1
    return tuple(spec), arrays, not has_arrays


def _wrap_negative(a, n, axis):
    if isinstance(a, Tracer):
        zero = np.zeros((), a.dtype)
        return ops.select(ops.lt(a, zero), ops.add(a, np.asarray(n, a.dtype)), a)
    a = np.asarray(a)
    if a.size and (a.max() >= n or a.min() < -n):
        bad = a.max() if a.max() >= n else a.min()
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
    return np.where(a < 0, a + n, a).astype(np.intp, copy=False)


def _basic(x, spec):
    """Lower a spec without arrays to slice/rev/reshape."""
    starts, limits, strides, flips, out_shape = [], [], [], [], []
    axis = 0
    for e in spec:
        if e[0] == "none":
            out_shape.append(1)
            continue
        n = x.shape[axis]
        if e[0] == "int":
            starts.append(e[1])
            limits.append(e[1] + 1)
            strides.append(1)
        else:
            start, stop, step = e[1], e[2], e[3]
            length = len(range(start, stop, step))
            if step < 0:
                flips.append(axis)
                start, step = n - 1 - start, -step
            if length == 0:
                start = 0
            starts.append(start)
            limits.append(start + (length - 1) * step + 1 if length else start)
            strides.append(step)
            out_shape.append(length)
        axis += 1
    for ax in range(axis, x.ndim):
        starts.append(0)
        limits.append(x.shape[ax])
        strides.append(1)
        out_shape.append(x.shape[ax])
    y = ops.rev(x, flips) if flips else x
    if starts != [0] * x.ndim or limits != list(x.shape) or strides != [1] * x.ndim:
        y = ops.slice_op(y, starts, limits, strides)
    return ops.reshape(y, tuple(out_shape))


def getitem(x, idx):
    """``x[idx]`` with numpy's semantics (used by ``Tracer.__getitem__``)."""
    x = asarray_any(x)
    spec, arrays, basic = _parse(x.shape, idx)
    if basic:
        return _basic(x, spec)
    return ops.gather(x, arrays, spec)


class _AtRef:
    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def _scatter(self, values, mode):
        x = asarray_any(self.x)
        spec, arrays, _ = _parse(x.shape, self.idx)
        from ..ops.indexing import index_shape
        want = index_shape(x.shape, spec, [np.shape(a) if not isinstance(a, Tracer) else a.shape
                                           for a in arrays])
        v = cast(asarray_any(values), x.dtype)
        vshape = v.shape
        if vshape != want:
            if np.broadcast_shapes(vshape, want) != want:
                raise ValueError(f"cannot broadcast values of shape {vshape} to the indexed "
                                 f"shape {want}")
            v = ops.broadcast_to_shape(v, want)
        if current_trace() is None:
            return ops.indexing.scatter_p.impl(np.asarray(x), np.asarray(v), *arrays, spec=spec,
                                               mode=mode)
        return ops.scatter(x, v, arrays, spec, mode)

    def _eager_device(self, args) -> bool:
        return current_trace() is None and any(on_device(a) for a in tree_util.tree_leaves(
            (self.x, self.idx, args)))

    def set(self, values):
        """Functional ``x[idx] = values``: returns a new array."""
        return self._update(values, "set")

    def add(self, values):
        """Functional ``x[idx] += values`` (repeated indices accumulate)."""
        return self._update(values, "add")

    def multiply(self, values):
        """Functional ``x[idx] *= values``."""
        return self._update(values, "mul")

    def _update(self, values, mode):
        if self._eager_device((values,)):   # GPU arrays: numpy's semantics, with cupy
            from ._device import call_on_device
            return call_on_device(_at_update, (self.x, self.idx, values, mode), {})
        try:
            return self._scatter(values, mode)
        except USER_ERRORS as e:
            name = {"set": "set", "add": "add", "mul": "multiply"}[mode]
            err = user_error(e, f"x.at[index].{name}", (self.x, values))
            if err is e:
                raise
            raise err from None

    def get(self):
        """``x[idx]``."""
        if self._eager_device(()):
            from ._device import call_on_device
            return call_on_device(getitem, (self.x, self.idx), {})
        return getitem(self.x, self.idx) if current_trace() is not None else \
            np.asarray(self.x)[self.idx]


def _at_update(x, idx, values, mode):
    return _AtRef(x, idx)._scatter(values, mode)


class AtIndexer:
    """``x.at[idx].set(v)`` / ``.add(v)`` / ``.multiply(v)`` / ``.get()`` (JAX style).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.at(np.zeros(3))[1].set(5.0)
        array([0., 5., 0.])
    """

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _AtRef(self.x, idx)


def take(a, indices, axis=None, out=None, mode=None):
    """numpy.take (negative indices count from the end; ``mode`` "raise" (default: out-of-range
    concrete indices raise), "wrap" or "clip", as in numpy).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.take(np.array([1.0, 2.0, 3.0]), [2, 0])
        array([3., 1.])
    """
    if current_trace() is None:
        return np.take(a, indices, axis=axis, out=out, mode=mode)
    x = asarray_any(a)
    if axis is None:
        x, axis = ops.reshape(x, (x.size,)), 0
    ax = normalize_axis(axis, x.ndim)
    idx = asarray_any(indices)
    n = x.shape[ax]
    if mode in (None, "raise"):
        idx = _wrap_negative(idx, n, ax)
    elif mode in ("wrap", "clip"):
        if isinstance(idx, Tracer):
            idx = (ops.rem(idx, np.asarray(n, idx.dtype)) if mode == "wrap" else
                   ops.clip(idx, np.zeros((), idx.dtype), np.asarray(n - 1, idx.dtype)))
        else:
            idx = np.mod(idx, n) if mode == "wrap" else np.clip(idx, 0, n - 1)
    else:
        raise FunctraceValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    spec = tuple(("slice", 0, x.shape[i], 1) for i in range(ax)) + (("arr", 0),)
    return ops.gather(x, [idx], spec)


def take_along_axis(arr, indices, axis):
    """numpy.take_along_axis.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.take_along_axis(np.array([[1.0, 2.0]]), np.array([[1, 0]]), 1)
        array([[2., 1.]])
    """
    if current_trace() is None:
        return np.take_along_axis(arr, indices, axis)
    x = asarray_any(arr)
    idx = asarray_any(indices)
    if axis is None:
        x, axis = ops.reshape(x, (x.size,)), 0
    ax = normalize_axis(axis, x.ndim)
    if idx.ndim != x.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    idx = _wrap_negative(idx, x.shape[ax], ax)
    # broadcast the non-axis dims of indices against x
    shape = tuple(i if d == ax else max(i, n) for d, (i, n) in enumerate(zip(idx.shape,
                                                                              x.shape)))
    if idx.shape != shape:
        idx = ops.broadcast_to_shape(idx, shape)
    return ops.take_along_axis(x, idx, ax)


def nonzero(a):
    """numpy.nonzero (needs concrete values: the result's shape depends on them).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.nonzero(np.array([0.0, 2.0]))
        (array([1]),)
    """
    if current_trace() is None:
        return np.nonzero(a)
    return tuple(np.nonzero(_concrete_mask(a)))


def flatnonzero(a):
    """numpy.flatnonzero (needs concrete values).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.flatnonzero(np.array([0.0, 2.0]))
        array([1])
    """
    return np.flatnonzero(_concrete_mask(a) if current_trace() is not None else a)


def argwhere(a):
    """numpy.argwhere (needs concrete values).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.argwhere(np.array([0.0, 2.0]))
        array([[1]])
    """
    return np.argwhere(_concrete_mask(a) if current_trace() is not None else a)
