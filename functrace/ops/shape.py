"""Shape primitives: broadcast_in_dim, reshape, transpose, slice, pad, concatenate, rev, iota.

Owns the ops that move data without arithmetic, and their rules. Broadcasting is explicit in
the IR through ``broadcast_in_dim``; its vjp sums the cotangent back, which is the single place
where "broadcasting is summed back" lives; being a reduce_sum, it is attached by
``ops/reduce.py``, next to that op, as is pad's (its padding value's cotangent is a sum).
Imports core/tracing, ``_base`` and ``ops.elementwise`` only: the op families import in the
order elementwise < shape < reduce < indexing < dot, linalg, decomp.
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from . import elementwise as ew
from ._base import as_array, dtype_of, namespace_of, shape_of

# --------------------------------------------------------------------------------------------
# broadcast_in_dim
# --------------------------------------------------------------------------------------------


def _bid_view_map(e):
    x, out = e.inputs[0].aval, e.outputs[0].aval
    bd = e.params["broadcast_dimensions"]
    return tuple(bd[i] if x.shape[i] == out.shape[bd[i]] else None for i in range(x.ndim))


def _bid_abstract(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise ShapeError(f"broadcast_dimensions {broadcast_dimensions} must name one output "
                         f"axis per operand axis ({x.ndim})")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            raise ShapeError(f"cannot broadcast {x.shape} to {shape} along "
                             f"{broadcast_dimensions}")
    if list(broadcast_dimensions) != sorted(broadcast_dimensions):
        raise ShapeError(f"broadcast_dimensions {broadcast_dimensions} must increase")
    return AVal(shape, x.dtype)


def _bid_impl(x, *, shape, broadcast_dimensions):
    x = as_array(x)
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


broadcast_in_dim_p = Op("broadcast_in_dim", _bid_abstract, _bid_impl, linear=True,
                        fusion="view", view_map=_bid_view_map, reindex=True, strided_view=True)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast ``x`` to ``shape``; operand axis i becomes output axis
    ``broadcast_dimensions[i]`` (size 1 or equal). The impl returns a read-only view."""
    shape = tuple(int(s) for s in shape)
    bd = tuple(int(d) for d in broadcast_dimensions)
    if shape_of(x) == shape and bd == tuple(range(len(shape))):
        return x
    return bind(broadcast_in_dim_p, x, shape=shape, broadcast_dimensions=bd)


def broadcast_to_shape(x, shape):
    """numpy-style broadcast (trailing alignment) expressed as broadcast_in_dim."""
    xs = shape_of(x)
    n = len(shape) - len(xs)
    return broadcast_in_dim(x, shape, tuple(range(n, len(shape))))


# the vjp (summing the cotangent back) is a reduce_sum: ops/reduce.py attaches it
broadcast_in_dim_p.jvp = lambda primals, tangents, outs, **p: (
    None if tangents[0] is None else bind(broadcast_in_dim_p, tangents[0], **p),)

# --------------------------------------------------------------------------------------------
# reshape, transpose
# --------------------------------------------------------------------------------------------


def _reshape_abstract(x, *, new_sizes):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise ShapeError(f"cannot reshape {x.shape} ({x.size} elements) to {new_sizes}")
    return AVal(new_sizes, x.dtype)


def _reshape_impl(x, *, new_sizes):
    return np.reshape(x, new_sizes)


def _reshape_view_map(e):
    x, out = e.inputs[0].aval, e.outputs[0].aval
    xs = [i for i, n in enumerate(x.shape) if n != 1]
    os_ = [i for i, n in enumerate(out.shape) if n != 1]
    if [x.shape[i] for i in xs] != [out.shape[i] for i in os_]:
        return None      # not a unit-axis reshape: a kernel cannot fold it
    m: list = [None] * x.ndim
    for i, j in zip(xs, os_):
        m[i] = j
    return tuple(m)


reshape_p = Op("reshape", _reshape_abstract, _reshape_impl, linear=True, fusion="view",
               view_map=_reshape_view_map, reindex=True)


def reshape(x, new_sizes):
    """Reshape (C order) to ``new_sizes`` (no -1: callers resolve it)."""
    new_sizes = tuple(int(s) for s in new_sizes)
    if shape_of(x) == new_sizes:
        return x
    return bind(reshape_p, x, new_sizes=new_sizes)


reshape_p.vjp = lambda cts, ins, outs, **p: (reshape(cts[0], shape_of(ins[0])),)
reshape_p.jvp = lambda primals, tangents, outs, **p: (
    None if tangents[0] is None else reshape(tangents[0], p["new_sizes"]),)


def _transpose_abstract(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"permutation {permutation} is not a permutation of {x.ndim} axes")
    return AVal(tuple(x.shape[p] for p in permutation), x.dtype)


def _transpose_impl(x, *, permutation):
    return np.transpose(x, permutation)


def _transpose_view_map(e):
    perm = e.params["permutation"]
    return tuple(perm.index(p) for p in range(e.inputs[0].aval.ndim))


transpose_p = Op("transpose", _transpose_abstract, _transpose_impl, linear=True, fusion="view",
                 view_map=_transpose_view_map, reindex=True, strided_view=True)


def transpose(x, permutation):
    """Permute axes: output axis i is input axis ``permutation[i]``."""
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    return bind(transpose_p, x, permutation=permutation)


def _transpose_vjp(cts, ins, outs, *, permutation):
    return (transpose(cts[0], tuple(np.argsort(permutation))),)


transpose_p.vjp = _transpose_vjp
transpose_p.jvp = lambda primals, tangents, outs, **p: (
    None if tangents[0] is None else transpose(tangents[0], p["permutation"]),)

# --------------------------------------------------------------------------------------------
# slice, pad, concatenate, rev
# --------------------------------------------------------------------------------------------


def _slice_abstract(x, *, start_indices, limit_indices, strides):
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise ShapeError("slice needs a start, limit and stride per axis")
    out = []
    for s, l, st, n in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= s <= l <= n) or st < 1:
            raise ShapeError(f"slice [{s}:{l}:{st}] out of range for size {n}")
        out.append(max(0, -(-(l - s) // st)))
    return AVal(out, x.dtype)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


def _slice_c_result(e) -> bool:
    """A slice of a C array is C when only its first cut axis is cut, with unit stride, and
    every axis before it has extent 1."""
    x = e.inputs[0].aval
    p = e.params
    cut = [i for i in range(x.ndim) if (p["start_indices"][i], p["limit_indices"][i],
                                        p["strides"][i]) != (0, x.shape[i], 1)]
    return not cut or (cut == [min(cut)] and p["strides"][cut[0]] == 1 and all(
        x.shape[i] == 1 for i in range(cut[0])))


slice_p = Op("slice", _slice_abstract, _slice_impl, linear=True, reindex=True,
             c_result=_slice_c_result)


def slice_op(x, start_indices, limit_indices, strides=None):
    """Static strided slice ``x[s0:l0:st0, ...]`` (non-negative, in range)."""
    strides = tuple(strides) if strides is not None else (1,) * len(start_indices)
    return bind(slice_p, x, start_indices=tuple(map(int, start_indices)),
                limit_indices=tuple(map(int, limit_indices)), strides=tuple(map(int, strides)))


def _slice_vjp(cts, ins, outs, *, start_indices, limit_indices, strides):
    xs = shape_of(ins[0])
    os_ = shape_of(outs[0])
    config = []
    for s, st, n, m in zip(start_indices, strides, xs, os_):
        if m == 0:
            config.append((n, 0, 0))
            continue
        last = s + (m - 1) * st
        config.append((s, n - last - 1, st - 1))
    zero = np.zeros((), dtype_of(ins[0]))
    return (pad(cts[0], zero, tuple(config)),)


slice_p.vjp = _slice_vjp
slice_p.jvp = lambda primals, tangents, outs, **p: (
    None if tangents[0] is None else bind(slice_p, tangents[0], **p),)


def _pad_abstract(x, v, *, config):
    if v.shape != () or v.dtype != x.dtype:
        raise ShapeError("pad value must be a 0-d array of the operand's dtype")
    if len(config) != x.ndim:
        raise ShapeError(f"pad config {config} needs one (lo, hi, interior) per axis")
    out = []
    for (lo, hi, it), n in zip(config, x.shape):
        if lo < 0 or hi < 0 or it < 0:
            raise ShapeError("pad amounts must be non-negative (use slice to crop)")
        out.append(lo + hi + n + max(0, n - 1) * it)
    return AVal(out, x.dtype)


def _pad_impl(x, v, *, config):
    shape = [lo + hi + n + max(0, n - 1) * it for (lo, hi, it), n in zip(config, x.shape)]
    out = namespace_of(x).empty(shape, dtype=x.dtype)
    out[...] = v
    out[tuple(slice(lo, lo + max(0, n - 1) * (it + 1) + 1 if n else lo, it + 1)
              for (lo, hi, it), n in zip(config, x.shape))] = x
    return out


pad_p = Op("pad", _pad_abstract, _pad_impl, linear=True, fusion="shifted", fresh=True,
           c_result=True)


def pad(x, value, config):
    """Pad with ``value``: ``config`` holds ``(low, high, interior)`` per axis (all >= 0)."""
    config = tuple((int(a), int(b), int(c)) for a, b, c in config)
    if all(c == (0, 0, 0) for c in config):
        return x
    return bind(pad_p, x, value, config=config)


def _pad_jvp(primals, tangents, outs, *, config):
    tx, tv = tangents
    if tx is None and tv is None:
        return (None,)
    zx = np.zeros((), dtype_of(outs[0]))
    if tx is None:
        tx = broadcast_in_dim(zx, shape_of(primals[0]), ()) if shape_of(primals[0]) else zx
    return (bind(pad_p, tx, zx if tv is None else tv, config=config),)


# the vjp (the padding value's cotangent is a sum) is attached by ops/reduce.py
pad_p.jvp = _pad_jvp


def _concat_abstract(*xs, dimension):
    if not xs:
        raise ShapeError("concatenate needs at least one operand")
    base = xs[0]
    if not 0 <= dimension < base.ndim:
        raise ShapeError(f"axis {dimension} out of range for {base.ndim}-d operands")
    total = 0
    for a in xs:
        if a.dtype != base.dtype or a.ndim != base.ndim or any(
                a.shape[i] != base.shape[i] for i in range(base.ndim) if i != dimension):
            raise ShapeError(f"cannot concatenate {[b.shape for b in xs]} along {dimension}")
        total += a.shape[dimension]
    shape = list(base.shape)
    shape[dimension] = total
    return AVal(shape, base.dtype)


def _concat_impl(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


concatenate_p = Op("concatenate", _concat_abstract, _concat_impl, linear=True, fresh=True,
                   c_result=True)


def concatenate(xs, dimension):
    """Join operands of one dtype along ``dimension``."""
    xs = list(xs)
    if len(xs) == 1:
        return xs[0]
    return bind(concatenate_p, *xs, dimension=int(dimension))


def _concat_vjp(cts, ins, outs, *, dimension):
    ct = cts[0]
    shape = shape_of(ct)
    res, off = [], 0
    for x in ins:
        n = shape_of(x)[dimension]
        start = [0] * len(shape)
        limit = list(shape)
        start[dimension], limit[dimension] = off, off + n
        res.append(slice_op(ct, start, limit))
        off += n
    return tuple(res)


def _concat_jvp(primals, tangents, outs, *, dimension):
    if all(t is None for t in tangents):
        return (None,)
    ts = [t if t is not None else broadcast_in_dim(np.zeros((), dtype_of(p)), shape_of(p), ())
          for p, t in zip(primals, tangents)]
    return (concatenate(ts, dimension),)


concatenate_p.vjp, concatenate_p.jvp = _concat_vjp, _concat_jvp


def _rev_abstract(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions):
        raise ShapeError(f"rev axes {dimensions} out of range for {x.ndim}-d operand")
    return x


def _rev_impl(x, *, dimensions):
    return np.flip(x, dimensions)


rev_p = Op("rev", _rev_abstract, _rev_impl, linear=True, batch_family="axes",
           batch_axes="dimensions")


def rev(x, dimensions):
    """Reverse the order of elements along ``dimensions``."""
    dimensions = tuple(sorted(int(d) for d in dimensions))
    if not dimensions:
        return x
    return bind(rev_p, x, dimensions=dimensions)


rev_p.vjp = lambda cts, ins, outs, **p: (rev(cts[0], p["dimensions"]),)
rev_p.jvp = lambda primals, tangents, outs, **p: (
    None if tangents[0] is None else rev(tangents[0], p["dimensions"]),)

# --------------------------------------------------------------------------------------------
# iota (index arrays: arange, eye, triangular masks)
# --------------------------------------------------------------------------------------------


def _iota_abstract(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"iota dimension {dimension} out of range for shape {shape}")
    return AVal(shape, dtype)


def _iota_impl(*, dtype, shape, dimension):
    idx = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(idx.reshape(view), shape)


iota_p = Op("iota", _iota_abstract, _iota_impl, zero_grad=True, fresh=True)


def iota(dtype, shape, dimension=0):
    """``arange(shape[dimension])`` broadcast along the other axes of ``shape``."""
    return bind(iota_p, dtype=np.dtype(dtype), shape=tuple(map(int, shape)),
                dimension=int(dimension))


iota_p.vjp = lambda cts, ins, outs, **p: ()
iota_p.jvp = lambda primals, tangents, outs, **p: (None,)


# --------------------------------------------------------------------------------------------
# batch rules (``rule(args, dims, **params) -> (outs, out_dims)``; ops.batch_rules)
# --------------------------------------------------------------------------------------------

def moveaxis(x, src: int, dst: int):
    """Move axis ``src`` of ``x`` to position ``dst`` (a transpose op)."""
    nd = len(shape_of(x))
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def bdim_to_front(x, d, size):
    """The value with its batch axis first; unbatched values are broadcast to have one."""
    if d is None:
        shape = shape_of(x)
        return broadcast_in_dim(x, (size, *shape), tuple(range(1, len(shape) + 1)))
    return moveaxis(x, d, 0)


def size_of(args, dims) -> int:
    """The batch size: the extent of the batch axis of the first batched argument."""
    for a, d in zip(args, dims):
        if d is not None:
            return shape_of(a)[d]
    raise AssertionError("no batched argument")


def _bid_rule(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    size = shape_of(x)[0]
    return (broadcast_in_dim(x, (size, *shape),
                             (0, *(b + 1 for b in broadcast_dimensions))),), (0,)


def _reshape_rule(args, dims, *, new_sizes):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    return (reshape(x, (shape_of(x)[0], *new_sizes)),), (0,)


def _transpose_rule(args, dims, *, permutation):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    return (transpose(x, (0, *(p + 1 for p in permutation))),), (0,)


def _slice_rule(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    n = shape_of(x)[0]
    return (slice_op(x, (0, *start_indices), (n, *limit_indices), (1, *strides)),), (0,)


def _pad_rule(args, dims, *, config):
    (x, v), (dx, dv) = args, dims
    size = size_of(args, dims)
    x = bdim_to_front(x, dx, size)
    cfg = ((0, 0, 0), *config)
    if dv is None:
        return (pad(x, v, cfg),), (0,)
    # a batched pad value: pad with 0, then add v where the padding went
    dt = dtype_of(x)
    zero = np.zeros((), dt)
    body = pad(x, zero, cfg)
    mask = pad(broadcast_in_dim(zero, shape_of(x), ()), np.ones((), dt), cfg)
    vb = broadcast_in_dim(moveaxis(v, dv, 0), shape_of(body), (0,))
    return (ew.add(body, ew.mul(mask, vb)),), (0,)


def _concat_rule(args, dims, *, dimension):
    size = size_of(args, dims)
    xs = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
    return (concatenate(xs, dimension + 1),), (0,)


broadcast_in_dim_p.batch, reshape_p.batch, transpose_p.batch = (
    _bid_rule, _reshape_rule, _transpose_rule)
slice_p.batch, pad_p.batch, concatenate_p.batch = _slice_rule, _pad_rule, _concat_rule
