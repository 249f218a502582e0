"""Indexing for functrace.numpy: ``x[idx]``, ``x.at[idx].set/add/multiply/min/max/get``,
``AtArray``, take, nonzero.

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
from ..config import config
from ..core import on_device
from ..errors import ConcretizationError, FunctraceValueError
from ..tracing import USER_ERRORS, Tracer, current_trace, user_error
from ._core import asarray_any, cast, normalize_axis

__all__ = ["getitem", "AtIndexer", "AtArray", "with_at", "take", "take_along_axis", "nonzero",
           "argwhere", "flatnonzero"]


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


_MODES = {"set": "set", "add": "add", "mul": "multiply", "min": "min", "max": "max"}


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
            x, v = np.asarray(x), np.asarray(v)
            if mode in ("min", "max") and x.dtype.kind == "c":
                raise TypeError(f"{mode} needs real values, got {x.dtype}")
            return ops.indexing.scatter_p.impl(x, v, *arrays, spec=spec, mode=mode)
        return ops.scatter(x, v, arrays, spec, mode)

    def _eager_device(self, args) -> bool:
        return current_trace() is None and any(on_device(a) for a in tree_util.tree_leaves(
            (self.x, self.idx, args)))

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """Functional ``x[idx] = values``: returns a new array (``x`` is unchanged)."""
        return self._update(values, "set", mode)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """Functional ``x[idx] += values`` (repeated indices accumulate)."""
        return self._update(values, "add", mode)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """Functional ``x[idx] *= values`` (repeated indices multiply)."""
        return self._update(values, "mul", mode)

    mul = multiply

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """Functional ``x[idx] = minimum(x[idx], values)`` (a repeated index takes the minimum
        of all its updates). Where values tie, the derivative is shared evenly among them, as
        for ``fnp.min``."""
        return self._update(values, "min", mode)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """Functional ``x[idx] = maximum(x[idx], values)`` (a repeated index takes the maximum
        of all its updates; ties share the derivative evenly)."""
        return self._update(values, "max", mode)

    def _update(self, values, mode, oob=None):
        _check_oob_mode(oob, _MODES[mode])
        if self._eager_device((values,)):   # GPU arrays: numpy's semantics, with cupy
            from ._device import call_on_device
            return call_on_device(_at_update, (self.x, self.idx, values, mode), {})
        try:
            out = self._scatter(values, mode)
        except USER_ERRORS as e:
            err = user_error(e, f"x.at[index].{_MODES[mode]}", (self.x, values))
            if err is e:
                raise
            raise err from None
        return with_at(out) if config.eager_at or type(self.x) is AtArray else out

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None):
        """``x[idx]``."""
        _check_oob_mode(mode, "get")
        if fill_value is not None:
            raise FunctraceValueError(
                "x.at[index].get(fill_value=...) is not supported: out-of-bounds indices "
                "raise an IndexError (as numpy does). Fix: index in bounds, or select with "
                "fnp.where(valid, x[fnp.clip(i, 0, n - 1)], fill_value)")
        if self._eager_device(()):
            from ._device import call_on_device
            return call_on_device(getitem, (self.x, self.idx), {})
        if current_trace() is not None:
            return getitem(self.x, self.idx)
        out = np.asarray(self.x)[self.idx]
        return with_at(out) if config.eager_at or type(self.x) is AtArray else out


def _check_oob_mode(mode, name):
    """JAX's ``mode=`` (what out-of-bounds indices do): functrace follows numpy and raises
    for them. Modes that would drop or clamp updates silently change values: refused."""
    if mode not in (None, "promise_in_bounds"):
        raise FunctraceValueError(
            f"x.at[index].{name}(mode={mode!r}) is not supported: functrace checks indices "
            "like numpy (an out-of-bounds index raises IndexError). Fix: drop mode=, and "
            "clip or mask the indices yourself (fnp.clip(i, 0, n - 1)) if some may be out "
            "of bounds")


def _at_update(x, idx, values, mode):
    return _AtRef(x, idx)._scatter(values, mode)


class AtIndexer:
    """``x.at[idx].set(v)`` / ``.add(v)`` / ``.multiply(v)`` / ``.min(v)`` / ``.max(v)`` /
    ``.get()`` (JAX style): each returns a new array and never changes ``x``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.at(np.zeros(3))[1].set(5.0)
        array([0., 5., 0.])
        >>> fnp.at(np.zeros(3))[np.array([1, 1])].max(np.array([2.0, 7.0]))
        array([0., 7., 0.])
    """

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _AtRef(self.x, idx)


class AtArray(np.ndarray):
    """A numpy array with JAX's functional-update property ``.at``, and nothing else added.

    ``functrace.numpy`` functions return it outside transforms while ``ft.config.eager_at``
    is on, so that code written for JAX (``x = x.at[i].set(v)``) runs eagerly too. It is an
    ``np.ndarray``: numpy functions take it, and numpy's ufuncs keep the subclass, so arrays
    computed from it have ``.at`` as well. ``.at[...]`` returns a new array and never
    changes ``x``. Make one from any array with ``a.view(fnp.AtArray)`` (or, while the
    switch is on, ``fnp.asarray(a)``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> x = np.zeros(3).view(fnp.AtArray)
        >>> np.asarray(x.at[0].add(2.0))
        array([2., 0., 0.])
    """

    __slots__ = ()

    @property
    def at(self) -> AtIndexer:
        return AtIndexer(self)


def with_at(out):
    """``out`` (an eager result: an array, or a tuple or list of them) with its plain
    ``np.ndarray`` leaves viewed as ``AtArray``; anything else is returned unchanged."""
    t = type(out)
    if t is np.ndarray:
        return out.view(AtArray)
    if t is tuple or t is list:
        return t(with_at(o) for o in out)
    if isinstance(out, tuple) and hasattr(out, "_fields"):      # namedtuple results
        return t(*(with_at(o) for o in out))
    return out


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
