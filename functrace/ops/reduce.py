"""Reductions and scans: sum, max, min, prod, argmax/argmin, cumsum/cumprod, logsumexp, softmax,
l2norm, sort/argsort, all/any.

Owns these ops and their rules. ``axes`` params are sorted tuples; results drop the reduced
axes (``keepdims`` is a reshape done by ``functrace.numpy``), but softmax's keep its operand's
shape. Conventions (docs/numerics.md):
ties of max/min split the gradient evenly; logsumexp of all -inf and the norm of a zero vector
have a zero gradient. Also attaches the vjp rules of ``broadcast_in_dim`` and ``pad``, which
sum a cotangent (``ops.shape`` is below this module and cannot name ``reduce_sum``), and owns
``shift`` and ``linear_recurrence``, the doubling scan cumprod's rules run on (the scatter
rules of ``ops.indexing`` use them too). Imports core/tracing, ``_base``, ``ops.elementwise``
and ``ops.shape`` only; ``ops.indexing`` is above it and attaches sort's rules.
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from . import elementwise as ew
from ._base import dtype_of, lit, namespace_of, shape_of
from .shape import (
    broadcast_in_dim,
    broadcast_in_dim_p,
    concatenate,
    pad,
    pad_p,
    reshape,
    rev,
    slice_op,
    transpose,
)


def _check_axes(x, axes):
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"axes {axes} invalid for a {x.ndim}-d operand")


def _reduced_shape(shape, axes):
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _reduction(name, impl, out_dtype=None, **flags):
    def abstract_eval(x, *, axes):
        _check_axes(x, axes)
        return AVal(_reduced_shape(x.shape, axes), out_dtype(x.dtype) if out_dtype else x.dtype)
    return Op(name, abstract_eval, impl, reduction=True, batch_family="axes", batch_axes="axes",
              fresh=True, c_result=True, **flags)


def _norm_axes(axes):
    return tuple(sorted(int(a) for a in axes))


def _bcast_back(y, x_shape, axes):
    """Broadcast a reduced value back over the reduced axes of ``x_shape``."""
    kept = tuple(i for i in range(len(x_shape)) if i not in axes)
    return broadcast_in_dim(y, x_shape, kept)


# ufunc.reduce directly: the same numbers as np.sum/np.max, without their wrapper overhead
reduce_sum_p = _reduction("reduce_sum",
                          lambda x, *, axes: np.add.reduce(x, axis=axes, dtype=x.dtype),
                          linear=True, reduce_kind="sum")
# np.max, not np.maximum.reduce: the function dispatches to cupy, the ufunc method does not
reduce_max_p = _reduction("reduce_max", lambda x, *, axes: np.max(x, axis=axes),
                          reduce_kind="max")
reduce_min_p = _reduction("reduce_min", lambda x, *, axes: np.min(x, axis=axes),
                          reduce_kind="min")
reduce_prod_p = _reduction("reduce_prod",
                           lambda x, *, axes: np.prod(x, axis=axes, dtype=x.dtype),
                           reduce_kind="prod")
reduce_and_p = _reduction("reduce_and", lambda x, *, axes: np.all(x, axis=axes),
                          out_dtype=lambda d: np.dtype(bool), zero_grad=True, reduce_kind="and")
reduce_or_p = _reduction("reduce_or", lambda x, *, axes: np.any(x, axis=axes),
                         out_dtype=lambda d: np.dtype(bool), zero_grad=True, reduce_kind="or")


def _make(op):
    def f(x, axes):
        axes = _norm_axes(axes)
        if not axes and op.linear:
            return x
        return bind(op, x, axes=axes)
    f.__name__ = op.name
    f.__doc__ = f"``{op.name}`` over ``axes`` (dropped from the result)."
    return f


reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_and, reduce_or = map(
    _make, (reduce_sum_p, reduce_max_p, reduce_min_p, reduce_prod_p, reduce_and_p, reduce_or_p))


def _sum_vjp(cts, ins, outs, *, axes):
    return (_bcast_back(cts[0], shape_of(ins[0]), axes),)


reduce_sum_p.vjp = _sum_vjp
reduce_sum_p.jvp = lambda primals, tangents, outs, *, axes: (
    None if tangents[0] is None else reduce_sum(tangents[0], axes),)


# The transpose of a broadcast is a sum: the vjp rules of broadcast_in_dim and pad (declared in
# ops.shape, below this module) are attached here.


def _bid_summed_axes(xshape, shape, bd):
    """Output axes the vjp sums over, and whether a reshape is needed afterwards."""
    keep = set(bd)
    sum_axes = [d for d in range(len(shape)) if d not in keep]
    ones = [d for i, d in enumerate(bd) if xshape[i] == 1 and shape[d] != 1]
    return tuple(sorted(sum_axes + ones))


def _bid_vjp(cts, ins, outs, *, shape, broadcast_dimensions):
    x = ins[0]
    xshape = shape_of(x)
    axes = _bid_summed_axes(xshape, shape, broadcast_dimensions)
    ct = reduce_sum(cts[0], axes) if axes else cts[0]
    if shape_of(ct) != xshape:
        ct = reshape(ct, xshape)
    return (ct,)


def _pad_vjp(cts, ins, outs, *, config):
    x = ins[0]
    ct = cts[0]
    xs = shape_of(x)
    starts = [lo for lo, hi, it in config]
    limits = [lo + max(0, n - 1) * (it + 1) + 1 if n else lo
              for (lo, hi, it), n in zip(config, xs)]
    strides = [it + 1 for lo, hi, it in config]
    ct_x = slice_op(ct, starts, limits, strides)
    axes = tuple(range(len(xs)))
    ct_v = reduce_sum(ct, axes)
    ct_v = ew.sub(ct_v, reduce_sum(ct_x, axes)) if axes else ct_v
    return ct_x, ct_v


broadcast_in_dim_p.vjp = _bid_vjp
pad_p.vjp = _pad_vjp


def _minmax_vjp(cts, ins, outs, *, axes):
    x = ins[0]
    xs = shape_of(x)
    y = _bcast_back(outs[0], xs, axes)
    mask = ew.convert_element_type(ew.eq(x, y), dtype_of(x))
    count = _bcast_back(reduce_sum(mask, axes), xs, axes)
    return (ew.mul(_bcast_back(cts[0], xs, axes), ew.div(mask, count)),)


def _minmax_jvp(primals, tangents, outs, *, axes):
    t = tangents[0]
    if t is None:
        return (None,)
    x = primals[0]
    xs = shape_of(x)
    mask = ew.convert_element_type(ew.eq(x, _bcast_back(outs[0], xs, axes)), dtype_of(x))
    return (ew.div(reduce_sum(ew.mul(t, mask), axes), reduce_sum(mask, axes)),)


reduce_max_p.vjp = reduce_min_p.vjp = _minmax_vjp
reduce_max_p.jvp = reduce_min_p.jvp = _minmax_jvp


def _prod_others(x, axes):
    """prod over ``axes`` of all elements but the one at each position (zero-safe).

    Moves the reduced axes last, flattens them, and multiplies exclusive cumulative products
    from both ends; no division, so zeros in ``x`` are handled exactly.
    """
    xs = shape_of(x)
    kept = [i for i in range(len(xs)) if i not in axes]
    perm = tuple(kept) + tuple(axes)
    xt = transpose(x, perm)
    lead = tuple(xs[i] for i in kept)
    n = int(np.prod([xs[a] for a in axes], dtype=np.int64))
    if n == 0:
        return x   # an empty product has no factors: any array of x's (empty) shape
    flat = reshape(xt, lead + (n,))
    one = broadcast_in_dim(lit(1, x), lead + (1,), ())
    last = len(lead)
    left = cumprod(flat, last)
    right = cumprod(flat, last, reverse=True)
    zero_start, full = [0] * (last + 1), list(lead) + [n]
    lim = list(full)
    lim[last] = n - 1
    left_ex = concatenate([one, slice_op(left, zero_start, lim)], last)
    st = list(zero_start)
    st[last] = 1
    right_ex = concatenate([slice_op(right, st, full), one], last)
    others = reshape(ew.mul(left_ex, right_ex), tuple(xs[i] for i in perm))
    return transpose(others, tuple(np.argsort(perm)))


def _prod_vjp(cts, ins, outs, *, axes):
    x = ins[0]
    return (ew.mul(_bcast_back(cts[0], shape_of(x), axes), _prod_others(x, axes)),)


def _prod_jvp(primals, tangents, outs, *, axes):
    t = tangents[0]
    if t is None:
        return (None,)
    return (reduce_sum(ew.mul(t, _prod_others(primals[0], axes)), axes),)


reduce_prod_p.vjp, reduce_prod_p.jvp = _prod_vjp, _prod_jvp

# --------------------------------------------------------------------------------------------
# arg reductions (not differentiable: their output is an integer index)
# --------------------------------------------------------------------------------------------


def _arg_abstract(x, *, axis):
    _check_axes(x, (axis,))
    return AVal(_reduced_shape(x.shape, (axis,)), np.intp)


argmax_p = Op("argmax", _arg_abstract, lambda x, *, axis: np.argmax(x, axis=axis),
              differentiable=False, reduction=True, batch_family="axes", batch_axes="axis",
              fresh=True, c_result=True)
argmin_p = Op("argmin", _arg_abstract, lambda x, *, axis: np.argmin(x, axis=axis),
              differentiable=False, reduction=True, batch_family="axes", batch_axes="axis",
              fresh=True, c_result=True)


def argmax(x, axis):
    """Index of the first maximum along ``axis`` (int64)."""
    return bind(argmax_p, x, axis=int(axis))


def argmin(x, axis):
    """Index of the first minimum along ``axis`` (int64)."""
    return bind(argmin_p, x, axis=int(axis))

# --------------------------------------------------------------------------------------------
# scans
# --------------------------------------------------------------------------------------------


def _scan_abstract(x, *, axis, reverse):
    _check_axes(x, (axis,))
    return x


def _scan_impl(fn):
    def impl(x, *, axis, reverse):
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
        return fn(x, axis=axis, dtype=x.dtype)
    return impl


cumsum_p = Op("cumsum", _scan_abstract, _scan_impl(np.cumsum), linear=True,
              batch_family="axes", batch_axes="axis", fresh=True)
cumprod_p = Op("cumprod", _scan_abstract, _scan_impl(np.cumprod), batch_family="axes",
               batch_axes="axis", fresh=True)


def cumsum(x, axis, reverse=False):
    """Inclusive cumulative sum along ``axis`` (from the end when ``reverse``)."""
    return bind(cumsum_p, x, axis=int(axis), reverse=bool(reverse))


def cumprod(x, axis, reverse=False):
    """Inclusive cumulative product along ``axis``."""
    return bind(cumprod_p, x, axis=int(axis), reverse=bool(reverse))


cumsum_p.vjp = lambda cts, ins, outs, *, axis, reverse: (cumsum(cts[0], axis, not reverse),)
cumsum_p.jvp = lambda primals, tangents, outs, *, axis, reverse: (
    None if tangents[0] is None else cumsum(tangents[0], axis, reverse),)


# cumprod's derivatives without dividing by x (exact with zeros, at every order). With
# E_i = prod_{k<i} x_k (the exclusive cumprod), d out_j / d x_i = E_i * prod_{i<k<=j} x_k for
# j >= i, so
#   vjp: ct_x_i = E_i * R_i,  R_i = ct_i + x_{i+1} R_{i+1}   (a reverse linear recurrence)
#   jvp: T_j = t_j E_j + x_j T_{j-1}                          (a forward linear recurrence)
# Recurrences run as a log-depth doubling scan of slices, pads, mul and add: ops with rules.
# ``reverse=True`` is the same with the axis flipped.


def shift(x, axis, d, fill):
    """Shift along ``axis`` by ``d`` (d > 0: towards higher indices), filling with ``fill``."""
    xs = shape_of(x)
    n = xs[axis]
    start, limit = [0] * len(xs), list(xs)
    cfg = [(0, 0, 0)] * len(xs)
    if d > 0:
        limit[axis] = n - d
        cfg[axis] = (d, 0, 0)
    else:
        start[axis] = -d
        cfg[axis] = (0, -d, 0)
    return pad(slice_op(x, start, limit), lit(fill, x), cfg)


def linear_recurrence(a, b, axis, backward):
    """y_i = b_i + a_i * y_{i-1} (``backward``: y_i = b_i + a_i * y_{i+1}); y outside is 0."""
    n = shape_of(b)[axis]
    step = -1 if backward else 1
    d = 1
    while d < n:
        b = ew.add(b, ew.mul(a, shift(b, axis, step * d, 0)))
        if 2 * d < n:
            a = ew.mul(a, shift(a, axis, step * d, 0))
        d *= 2
    return b


def _exclusive_cumprod(x, axis):
    if shape_of(x)[axis] == 0:
        return x
    return shift(cumprod(x, axis), axis, 1, 1)


def _flip(x, axis, reverse):
    return rev(x, (axis,)) if reverse else x


def _cumprod_vjp(cts, ins, outs, *, axis, reverse):
    x = _flip(ins[0], axis, reverse)
    ct = _flip(cts[0], axis, reverse)
    if shape_of(x)[axis] == 0:
        return (_flip(ct, axis, reverse),)
    r = linear_recurrence(shift(x, axis, -1, 0), ct, axis, backward=True)
    return (_flip(ew.mul(_exclusive_cumprod(x, axis), r), axis, reverse),)


def _cumprod_jvp(primals, tangents, outs, *, axis, reverse):
    t = tangents[0]
    if t is None:
        return (None,)
    x = _flip(primals[0], axis, reverse)
    t = _flip(t, axis, reverse)
    if shape_of(x)[axis] == 0:
        return (_flip(t, axis, reverse),)
    y = linear_recurrence(x, ew.mul(t, _exclusive_cumprod(x, axis)), axis, backward=False)
    return (_flip(y, axis, reverse),)


cumprod_p.vjp, cumprod_p.jvp = _cumprod_vjp, _cumprod_jvp

# --------------------------------------------------------------------------------------------
# logsumexp and the 2-norm: own ops, for stable values and the docs/numerics.md conventions
# --------------------------------------------------------------------------------------------


def _lse_impl(x, *, axes):
    m = (np.max(x, axis=axes, keepdims=True) if x.size
         else namespace_of(x).zeros((1,) * x.ndim, x.dtype))
    if not np.isfinite(m).all():
        m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    with np.errstate(divide="ignore"):
        e = np.exp(x - m)
        s = np.log(np.sum(e, axis=axes, keepdims=True))
    s += m
    return s.reshape(tuple(n for i, n in enumerate(s.shape) if i not in axes))


logsumexp_p = _reduction("logsumexp", _lse_impl, reduce_kind="logsumexp")


def logsumexp(x, axes):
    """log(sum(exp(x))) over ``axes``, stable; all -inf gives -inf with zero gradient."""
    return bind(logsumexp_p, x, axes=_norm_axes(axes))


def _softmax_impl(x, *, axes, masked_zero):
    xp = namespace_of(x)
    if x.size == 0:
        return xp.empty_like(x)
    m = xp.max(x, axis=axes, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros((), x.dtype)).astype(x.dtype)   # else shift by 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = xp.exp(x - m)
        s = xp.sum(e, axis=axes, keepdims=True)
        scale = 1 / s
        if masked_zero:      # a row of all -inf: every exp is 0, so is the sum
            scale = xp.where(s == 0, xp.zeros((), s.dtype), scale)
        return (e * scale).astype(x.dtype)


def _softmax_abstract(x, *, axes, masked_zero):
    _check_axes(x, axes)
    if x.dtype.kind != "f":
        raise TypeError(f"softmax of {x.dtype} data: it needs a float dtype")
    return AVal(x.shape, x.dtype)


#: exp(x - logsumexp(x, axes)) in one op: the reduction passes of logsumexp (maximum, sum of
#: exp(x - maximum)) keep each exp, so a kernel computes one exp per element where the
#: composition computes two. ``masked_zero``: a row of all -inf gives 0 (logsumexp's
#: gradient there, docs/numerics.md) rather than NaN (scipy's and jax's softmax value).
softmax_p = Op("softmax", _softmax_abstract, _softmax_impl, reduction=True,
               batch_family="axes", batch_axes="axes", fresh=True, c_result=True,
               reduce_kind="softmax")


def softmax(x, axes, masked_zero=False):
    """exp(x - logsumexp(x, axes)) with ``x``'s shape; a row of all -inf gives NaN, or 0 with
    ``masked_zero``."""
    return bind(softmax_p, x, axes=_norm_axes(axes), masked_zero=bool(masked_zero))


def _softmax_jacobian_times(y, v, axes):
    """``J v`` for ``y = softmax(x)``: ``y * (v - sum(v * y))``. J is symmetric, so this is
    also ``v J``: the jvp and the vjp are the same product."""
    dot = _bcast_back(reduce_sum(ew.mul(v, y), axes), shape_of(y), axes)
    return ew.mul(y, ew.sub(v, dot))


def _softmax_vjp(cts, ins, outs, *, axes, masked_zero):
    return (_softmax_jacobian_times(outs[0], cts[0], axes),)


def _softmax_jvp(primals, tangents, outs, *, axes, masked_zero):
    t = tangents[0]
    return (None if t is None else _softmax_jacobian_times(outs[0], t, axes),)


def _softmax_expand(x, *, axes, masked_zero):
    # for a target with no softmax kernel: logsumexp (a kernel reduction there) and an
    # elementwise exp, two exps per element (what logsumexp's gradient was before the op)
    ob = _bcast_back(logsumexp(x, axes), shape_of(x), axes)
    if not masked_zero:
        return ew.exp(ew.sub(x, ob))
    dead = ew.logical_and(ew.isinf(ob), ew.lt(ob, lit(0, ob)))
    safe = ew.select(dead, lit(0, ob), ob)
    return ew.select(dead, lit(0, x), ew.exp(ew.sub(x, safe)))


softmax_p.vjp, softmax_p.jvp = _softmax_vjp, _softmax_jvp
softmax_p.expand = _softmax_expand


def _lse_weights(x, axes):
    # the weights exp(x - logsumexp(x)) as one op, not from logsumexp's output: a gradient
    # then needs no logsumexp pass of its own, and each weight costs one exp
    return softmax(x, axes, masked_zero=True)


def _lse_vjp(cts, ins, outs, *, axes):
    x = ins[0]
    return (ew.mul(_bcast_back(cts[0], shape_of(x), axes), _lse_weights(x, axes)),)


def _lse_jvp(primals, tangents, outs, *, axes):
    t = tangents[0]
    if t is None:
        return (None,)
    return (reduce_sum(ew.mul(t, _lse_weights(primals[0], axes)), axes),)


logsumexp_p.vjp, logsumexp_p.jvp = _lse_vjp, _lse_jvp


def _l2_impl(x, *, axes):
    a = np.abs(x)
    return np.sqrt(np.sum(a * a, axis=axes)).astype(a.dtype)


def _l2_abstract(x, *, axes):
    _check_axes(x, axes)
    return AVal(_reduced_shape(x.shape, axes), np.empty(0, x.dtype).real.dtype)


l2norm_p = Op("l2norm", _l2_abstract, _l2_impl, reduction=True, batch_family="axes",
              batch_axes="axes", fresh=True, c_result=True)


def l2norm(x, axes):
    """sqrt(sum(|x|^2)) over ``axes``; the gradient at the zero vector is 0 (docs/numerics.md)."""
    return bind(l2norm_p, x, axes=_norm_axes(axes))


def _l2_unit(x, out, axes):
    xs = shape_of(x)
    ob = _bcast_back(out, xs, axes)
    safe = ew.select(ew.eq(ob, lit(0, ob)), lit(1, ob), ob)
    if dtype_of(x).kind == "c":
        return ew.div(x, ew.convert_element_type(safe, dtype_of(x)))
    return ew.div(x, safe)


def _l2_vjp(cts, ins, outs, *, axes):
    x = ins[0]
    ct = _bcast_back(cts[0], shape_of(x), axes)
    if dtype_of(x).kind == "c":
        ct = ew.convert_element_type(ct, dtype_of(x))
        return (ew.mul(ct, ew.conj(_l2_unit(x, outs[0], axes))),)
    return (ew.mul(ct, _l2_unit(x, outs[0], axes)),)


def _l2_jvp(primals, tangents, outs, *, axes):
    t = tangents[0]
    if t is None:
        return (None,)
    u = _l2_unit(primals[0], outs[0], axes)
    if dtype_of(t).kind == "c":
        return (reduce_sum(ew.real(ew.mul(ew.conj(u), t)), axes),)
    return (reduce_sum(ew.mul(u, t), axes),)


l2norm_p.vjp, l2norm_p.jvp = _l2_vjp, _l2_jvp

# --------------------------------------------------------------------------------------------
# sort / argsort
# --------------------------------------------------------------------------------------------


def _sort_abstract(x, *, axis):
    _check_axes(x, (axis,))
    return (x, AVal(x.shape, np.intp))


def _sort_impl(x, *, axis):
    idx = np.argsort(x, axis=axis, kind="stable")
    return np.take_along_axis(x, idx, axis=axis), idx


sort_p = Op("sort", _sort_abstract, _sort_impl, multiple_results=True, batch_family="axes",
             batch_axes="axis", fresh=True)


def sort(x, axis):
    """Sorted values and the permutation that sorts (stable)."""
    return bind(sort_p, x, axis=int(axis))



# sort's rules permute with gather/scatter: ops/indexing.py attaches them
