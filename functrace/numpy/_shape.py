"""Shape functions of functrace.numpy: reshape, transpose, tile, pad, flip, triu, diag, ...

Each one runs numpy eagerly outside a transform and lowers to the shape ops inside one (all
static: shapes are known at trace time). Joining and splitting arrays (concatenate, stack,
split, ...) is ``_joining``.
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, normalize_axes, normalize_axis

__all__ = ["reshape", "ravel", "transpose", "moveaxis", "swapaxes", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "tile", "repeat", "pad", "flip", "fliplr",
           "flipud", "roll", "rot90", "triu", "tril", "diag", "diagonal", "trace", "atleast_1d",
           "atleast_2d", "atleast_3d", "shape", "ndim", "size", "copy", "sort", "argsort"]


def _resolve_shape(newshape, size):
    if isinstance(newshape, int | np.integer):
        newshape = (int(newshape),)
    newshape = [int(operator.index(s)) for s in newshape]
    if newshape.count(-1) > 1:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(newshape)}: "
                         "can only specify one unknown dimension")
    if -1 in newshape:
        known = int(np.prod([s for s in newshape if s != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape "
                             f"{tuple(newshape)}")
        newshape[newshape.index(-1)] = size // known
    if int(np.prod(newshape, dtype=np.int64)) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(newshape)}")
    return tuple(newshape)


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """numpy.reshape (C order).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.reshape(np.arange(6), (2, -1)).shape
        (2, 3)
    """
    shape = newshape if shape is None else shape
    if current_trace() is None:
        return np.reshape(a, shape, order=order)
    if order != "C":
        raise NotImplementedError(f"only order='C' reshapes are traceable, not order={order!r}; "
                                  "reshape the transposed array instead "
                                  "(fnp.reshape(x.T, s[::-1]).T is order='F')")
    x = asarray_any(a)
    return ops.reshape(x, _resolve_shape(shape, x.size))


def ravel(a, order="C"):
    """numpy.ravel.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.ravel(np.ones((2, 2))).shape
        (4,)
    """
    if current_trace() is None:
        return np.ravel(a, order=order)
    x = asarray_any(a)
    return ops.reshape(x, (x.size,))


def transpose(a, axes=None):
    """numpy.transpose.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.transpose(np.ones((2, 3))).shape
        (3, 2)
    """
    if current_trace() is None:
        return np.transpose(a, axes)
    x = asarray_any(a)
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        axes = tuple(axes)
        if len(axes) != x.ndim:
            raise ValueError(f"axes {axes} don't match an array of shape {x.shape}")
        try:
            perm = tuple(normalize_axis(p, x.ndim) for p in axes)
        except np.exceptions.AxisError as e:
            raise np.exceptions.AxisError(f"axes {axes} for an array of shape {x.shape}: "
                                          f"{e}") from None
        if len(set(perm)) != len(perm):
            raise ValueError(f"axes {axes} repeat an axis (an array of shape {x.shape})")
    return ops.transpose(x, perm)


def moveaxis(a, source, destination):
    """numpy.moveaxis.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.moveaxis(np.ones((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    if current_trace() is None:
        return np.moveaxis(a, source, destination)
    x = asarray_any(a)
    src = [normalize_axis(s, x.ndim) for s in np.atleast_1d(source)]
    dst = [normalize_axis(d, x.ndim) for d in np.atleast_1d(destination)]
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return ops.transpose(x, tuple(order))


def swapaxes(a, axis1, axis2):
    """numpy.swapaxes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.swapaxes(np.ones((2, 3)), 0, 1).shape
        (3, 2)
    """
    if current_trace() is None:
        return np.swapaxes(a, axis1, axis2)
    x = asarray_any(a)
    perm = list(range(x.ndim))
    i, j = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return ops.transpose(x, tuple(perm))


def expand_dims(a, axis):
    """numpy.expand_dims.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.expand_dims(np.ones(3), 0).shape
        (1, 3)
    """
    if current_trace() is None:
        return np.expand_dims(a, axis)
    x = asarray_any(a)
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    nd = x.ndim + len(axes)
    axes = normalize_axes(axes, nd)
    it = iter(x.shape)
    shape = tuple(1 if i in axes else next(it) for i in range(nd))
    return ops.reshape(x, shape)


def squeeze(a, axis=None):
    """numpy.squeeze.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.squeeze(np.ones((1, 3, 1))).shape
        (3,)
    """
    if current_trace() is None:
        return np.squeeze(a, axis)
    x = asarray_any(a)
    if axis is None:
        axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
    else:
        axes = normalize_axes(axis, x.ndim)
        for i in axes:
            if x.shape[i] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not "
                                 f"equal to one (axis {i} of shape {x.shape})")
    return ops.reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


def broadcast_to(array, shape, subok=False):
    """numpy.broadcast_to.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.broadcast_to(np.ones(3), (2, 3)).shape
        (2, 3)
    """
    if current_trace() is None:
        return np.broadcast_to(array, shape, subok=subok)
    x = asarray_any(array)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    np.broadcast_shapes(x.shape, shape)
    if np.broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"cannot broadcast {x.shape} to {shape}")
    return ops.broadcast_to_shape(x, shape)


def broadcast_arrays(*args):
    """numpy.broadcast_arrays.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> [a.shape for a in fnp.broadcast_arrays(np.ones(3), np.ones((2, 1)))]
        [(2, 3), (2, 3)]
    """
    if current_trace() is None:
        return np.broadcast_arrays(*args)
    xs = [asarray_any(a) for a in args]
    shape = np.broadcast_shapes(*[x.shape for x in xs])
    return tuple(ops.broadcast_to_shape(x, shape) for x in xs)


def tile(A, reps):
    """numpy.tile.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.tile(np.array([1.0, 2.0]), 2)
        array([1., 2., 1., 2.])
    """
    if current_trace() is None:
        return np.tile(A, reps)
    x = asarray_any(A)
    reps = (reps,) if isinstance(reps, int | np.integer) else tuple(reps)
    nd = builtins.max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = ops.reshape(x, (1,) * (nd - x.ndim) + x.shape)
    # broadcast to (r0, n0, r1, n1, ...) then merge pairs
    inter = []
    dims = []
    for i, (r, n) in enumerate(zip(reps, x.shape)):
        inter += [r, n]
        dims.append(2 * i + 1)
    y = ops.broadcast_in_dim(x, tuple(inter), tuple(dims))
    return ops.reshape(y, tuple(r * n for r, n in zip(reps, x.shape)))


def repeat(a, repeats, axis=None):
    """numpy.repeat (repeats: an int or a concrete sequence).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.repeat(np.array([1.0, 2.0]), 2)
        array([1., 1., 2., 2.])
    """
    if current_trace() is None:
        return np.repeat(a, repeats, axis)
    x = asarray_any(a)
    if axis is None:
        x = ops.reshape(x, (x.size,))
        axis = 0
    ax = normalize_axis(axis, x.ndim)
    if isinstance(repeats, int | np.integer) or np.ndim(repeats) == 0:
        r = int(repeats)
        shape = x.shape[:ax + 1] + (r,) + x.shape[ax + 1:]
        dims = tuple(i if i <= ax else i + 1 for i in range(x.ndim))
        y = ops.broadcast_in_dim(x, shape, dims)
        return ops.reshape(y, x.shape[:ax] + (x.shape[ax] * r,) + x.shape[ax + 1:])
    reps = np.asarray(repeats)
    idx = np.repeat(np.arange(x.shape[ax]), reps)
    from ._indexing import take
    return take(x, idx, axis=ax)


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy.pad (modes 'constant', 'edge', 'reflect', 'symmetric', 'wrap').

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.pad(np.array([1.0, 2.0]), 1)
        array([0., 1., 2., 0.])
    """
    if current_trace() is None:
        return np.pad(array, pad_width, mode=mode, **kwargs)
    x = asarray_any(array)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    if mode == "constant":
        cv = np.broadcast_to(np.asarray(kwargs.get("constant_values", 0)), (x.ndim, 2))
        if np.all(cv == cv.flat[0]):
            v = np.asarray(cv.flat[0]).astype(x.dtype)
            return ops.pad(x, v, tuple((int(lo), int(hi), 0) for lo, hi in pw))
        for ax in range(x.ndim):   # differing constants: one axis at a time
            cfg = [(0, 0, 0)] * x.ndim
            lo, hi = int(pw[ax, 0]), int(pw[ax, 1])
            cfg[ax] = (lo, 0, 0)
            x = ops.pad(x, np.asarray(cv[ax, 0]).astype(x.dtype), tuple(cfg))
            cfg[ax] = (0, hi, 0)
            x = ops.pad(x, np.asarray(cv[ax, 1]).astype(x.dtype), tuple(cfg))
        return x
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        from ._indexing import take
        for ax in range(x.ndim):
            n = x.shape[ax]
            lo, hi = int(pw[ax, 0]), int(pw[ax, 1])
            if lo == hi == 0:
                continue
            idx = np.pad(np.arange(n), (lo, hi), mode=mode)
            x = take(x, idx, axis=ax)
        return x
    raise NotImplementedError(f"pad mode {mode!r} is not traceable yet")


def flip(m, axis=None):
    """numpy.flip.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.flip(np.array([1.0, 2.0]))
        array([2., 1.])
    """
    if current_trace() is None:
        return np.flip(m, axis)
    x = asarray_any(m)
    return ops.rev(x, normalize_axes(axis, x.ndim))


def fliplr(m):
    """numpy.fliplr.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fliplr(np.eye(2))[0]
        array([0., 1.])
    """
    return flip(m, 1) if current_trace() is not None else np.fliplr(m)


def flipud(m):
    """numpy.flipud.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.flipud(np.eye(2))[0]
        array([0., 1.])
    """
    return flip(m, 0) if current_trace() is not None else np.flipud(m)


def roll(a, shift, axis=None):
    """numpy.roll.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.roll(np.array([1.0, 2.0, 3.0]), 1)
        array([3., 1., 2.])
    """
    if current_trace() is None:
        return np.roll(a, shift, axis)
    x = asarray_any(a)
    if axis is None:
        return ops.reshape(roll(ops.reshape(x, (x.size,)), shift, 0), x.shape)
    shifts = np.broadcast_to(np.atleast_1d(shift), np.shape(np.atleast_1d(axis)))
    for s, ax in zip(shifts, np.atleast_1d(axis)):
        ax = normalize_axis(ax, x.ndim)
        n = x.shape[ax]
        if n == 0:
            continue
        s = int(s) % n
        if s == 0:
            continue
        lo = [0] * x.ndim
        hi = list(x.shape)
        mid = list(lo)
        mid[ax] = n - s
        hi2 = list(x.shape)
        hi2[ax] = n - s
        x = ops.concatenate([ops.slice_op(x, mid, hi), ops.slice_op(x, lo, hi2)], ax)
    return x


def rot90(m, k=1, axes=(0, 1)):
    """numpy.rot90.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.rot90(np.array([[1.0, 2.0], [3.0, 4.0]]))[0]
        array([2., 4.])
    """
    if current_trace() is None:
        return np.rot90(m, k, axes)
    x = asarray_any(m)
    a0, a1 = (normalize_axis(a, x.ndim) for a in axes)
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return ops.transpose(flip(x, a1), tuple(perm))
    return flip(ops.transpose(x, tuple(perm)), a1)


def _tri_mask(n, m, k, lower):
    rows = ops.iota(np.int64, (n, m), 0)
    cols = ops.iota(np.int64, (n, m), 1)
    d = ops.sub(cols, rows)
    kk = np.asarray(k, np.int64)
    return ops.le(d, kk) if lower else ops.ge(d, kk)


def _tri_apply(m, k, lower):
    x = asarray_any(m)
    n, mm = x.shape[-2], x.shape[-1]
    mask = _tri_mask(n, mm, k, lower)
    if x.ndim > 2:
        mask = ops.broadcast_to_shape(mask, x.shape)
    return ops.select(mask, x, np.zeros((), x.dtype))


def triu(m, k=0):
    """numpy.triu.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.triu(np.ones((2, 2)))
        array([[1., 1.],
               [0., 1.]])
    """
    if current_trace() is None:
        return np.triu(m, k)
    return _tri_apply(m, k, False)


def tril(m, k=0):
    """numpy.tril.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.tril(np.ones((2, 2)))
        array([[1., 0.],
               [1., 1.]])
    """
    if current_trace() is None:
        return np.tril(m, k)
    return _tri_apply(m, k, True)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy.diagonal (the diagonal becomes the last axis).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.diagonal(np.arange(4.0).reshape(2, 2))
        array([0., 3.])
    """
    if current_trace() is None:
        return np.diagonal(a, offset, axis1, axis2)
    x = asarray_any(a)
    a1, a2 = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    xt = ops.transpose(x, tuple(rest) + (a1, a2))
    n, m = x.shape[a1], x.shape[a2]
    if offset >= 0:
        length = builtins.max(0, builtins.min(n, m - offset))
        r, c = np.arange(length), np.arange(length) + offset
    else:
        length = builtins.max(0, builtins.min(n + offset, m))
        r, c = np.arange(length) - offset, np.arange(length)
    spec = tuple(("slice", 0, x.shape[i], 1) for i in rest) + (("arr", 0), ("arr", 1))
    return ops.gather(xt, [r, c], spec)


def diag(v, k=0):
    """numpy.diag: the diagonal of a 2-d array, or a 2-d array with ``v`` on its diagonal.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.diag(np.array([1.0, 2.0]))
        array([[1., 0.],
               [0., 2.]])
    """
    if current_trace() is None:
        return np.diag(v, k)
    x = asarray_any(v)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = x.shape[0] + builtins.abs(k)
    r = np.arange(x.shape[0]) + builtins.max(0, -k)
    c = np.arange(x.shape[0]) + builtins.max(0, k)
    z = ops.broadcast_in_dim(np.zeros((), x.dtype), (n, n), ())
    return ops.scatter(z, x, [r, c], (("arr", 0), ("arr", 1)), "set")


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """numpy.trace.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.trace(np.eye(3)))
        3.0
    """
    if current_trace() is None:
        return np.trace(a, offset, axis1, axis2, dtype, out)
    from ._reductions import sum as fsum
    return fsum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def atleast_1d(*arys):
    """numpy.atleast_1d.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.atleast_1d(1.0).shape
        (1,)
    """
    if current_trace() is None:
        return np.atleast_1d(*arys)
    res = [asarray_any(a) for a in arys]
    res = [ops.reshape(x, (1,)) if x.ndim == 0 else x for x in res]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_2d(*arys):
    """numpy.atleast_2d.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.atleast_2d(np.ones(3)).shape
        (1, 3)
    """
    if current_trace() is None:
        return np.atleast_2d(*arys)
    res = []
    for a in arys:
        x = asarray_any(a)
        res.append(ops.reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x)
    return res[0] if len(res) == 1 else tuple(res)


def atleast_3d(*arys):
    """numpy.atleast_3d.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.atleast_3d(np.ones(3)).shape
        (1, 3, 1)
    """
    if current_trace() is None:
        return np.atleast_3d(*arys)
    res = []
    for a in arys:
        x = asarray_any(a)
        if x.ndim == 0:
            x = ops.reshape(x, (1, 1, 1))
        elif x.ndim == 1:
            x = ops.reshape(x, (1, x.shape[0], 1))
        elif x.ndim == 2:
            x = ops.reshape(x, x.shape + (1,))
        res.append(x)
    return res[0] if len(res) == 1 else tuple(res)


def shape(a):
    """numpy.shape (static under tracing).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.shape(np.ones((2, 3)))
        (2, 3)
    """
    return a.shape if isinstance(a, Tracer) else np.shape(a)


def ndim(a):
    """numpy.ndim.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.ndim(np.ones((2, 3)))
        2
    """
    return a.ndim if isinstance(a, Tracer) else np.ndim(a)


def size(a, axis=None):
    """numpy.size.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.size(np.ones((2, 3)))
        6
    """
    if isinstance(a, Tracer):
        return a.size if axis is None else a.shape[axis]
    return np.size(a, axis)


def copy(a, order="K", subok=False):
    """numpy.copy (a traced array is immutable, so this is the identity under tracing).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.copy(np.ones(2))
        array([1., 1.])
    """
    if current_trace() is None:
        return np.copy(a, order=order, subok=subok)
    return asarray_any(a)


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """numpy.sort (stable; differentiable: the gradient is permuted back).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.sort(np.array([3.0, 1.0, 2.0]))
        array([1., 2., 3.])
    """
    if current_trace() is None:
        return np.sort(a, axis=axis, kind=kind, order=order, stable=stable)
    x = asarray_any(a)
    if axis is None:
        x, axis = ops.reshape(x, (x.size,)), 0
    return ops.sort(x, normalize_axis(axis, x.ndim))[0]


def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """numpy.argsort (stable; not differentiable).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.argsort(np.array([3.0, 1.0, 2.0]))
        array([1, 2, 0])
    """
    if current_trace() is None:
        return np.argsort(a, axis=axis, kind=kind, order=order, stable=stable)
    x = asarray_any(a)
    if axis is None:
        x, axis = ops.reshape(x, (x.size,)), 0
    return ops.sort(x, normalize_axis(axis, x.ndim))[1]
