"""numpy-style indexing as two primitives: ``gather`` (reads) and ``scatter`` (functional writes).

Owns ``gather_p`` and ``scatter_p`` and their rules. Both take an index *spec*: a tuple with
one entry per index component (Ellipsis already expanded):

* ``("slice", start, stop, step)`` with normalised integers (as ``slice.indices`` gives),
* ``("int", i)`` a non-negative static integer (only when no array index is present),
* ``("none",)`` a new axis,
* ``("arr", k)`` the k-th index-array operand (integer, already non-negative-wrapped by
  ``functrace.numpy``); 0-d arrays stand for integers mixed with arrays.

so ``x[spec]`` means exactly what numpy means, including where the broadcast advanced-index
dimensions go (in place when adjacent, first otherwise). Also attaches the rules of ``sort``
(a permutation: gathered forward, scattered back). Imports core/tracing, ``_base`` and the
families below it (``ops.elementwise``, ``ops.shape``, ``ops.reduce``), never one above.
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from . import elementwise as ew
from ._base import as_array, dtype_of, namespace_of, shape_of
from .reduce import linear_recurrence, shift, sort, sort_p
from .shape import (
    bdim_to_front,
    broadcast_in_dim,
    iota,
    moveaxis,
    reshape,
    size_of,
    transpose,
)


def _py_index(spec, arrays):
    out = []
    for e in spec:
        kind = e[0]
        if kind == "slice":
            # normalised (slice.indices) stops are -1 for "through index 0" with a negative
            # step; as a Python slice that would mean "the last element"
            out.append(slice(e[1], e[2] if e[2] >= 0 else None, e[3]))
        elif kind == "int":
            out.append(e[1])
        elif kind == "none":
            out.append(None)
        else:
            out.append(arrays[e[1]])
    return tuple(out)


def _slice_len(n, start, stop, step):
    return len(range(start, stop, step))


def index_shape(shape, spec, arr_shapes):
    """Result shape of ``x[spec]`` for ``x`` of ``shape`` (numpy's rules, computed
    analytically so tracing never allocates)."""
    consumed = sum(1 for e in spec if e[0] != "none")
    if consumed > len(shape):
        raise ShapeError(f"too many indices ({consumed}) for a {len(shape)}-d array")
    spec = tuple(spec) + tuple(("slice", 0, n, 1) for n in shape[consumed:])
    adv_shape = np.broadcast_shapes(*arr_shapes) if arr_shapes else None
    adv_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
    adjacent = bool(adv_pos) and adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    dims: list = []
    axis = 0
    inserted = False
    for e in spec:
        kind = e[0]
        if kind == "none":
            dims.append(1)
            continue
        n = shape[axis]
        axis += 1
        if kind == "slice":
            dims.append(_slice_len(n, e[1], e[2], e[3]))
        elif kind == "int":
            if not 0 <= e[1] < n:
                raise ShapeError(f"index {e[1]} is out of bounds for axis {axis - 1} "
                                 f"with size {n}")
        else:
            if adjacent and not inserted:
                dims.extend(adv_shape)
                inserted = True
    if adv_pos and not adjacent:
        dims = list(adv_shape) + dims
    return tuple(dims)


def _gather_abstract(x, *idx, spec):
    for a in idx:
        if a.dtype.kind not in "iu":
            raise TypeError(f"index arrays must be integers, got {a.dtype}")
    return AVal(index_shape(x.shape, spec, [a.shape for a in idx]), x.dtype)


def _gather_impl(x, *idx, spec):
    return as_array(x)[_py_index(spec, idx)]


gather_p = Op("gather", _gather_abstract, _gather_impl)


def gather(x, idx_arrays, spec):
    """``x[spec]`` with ``("arr", k)`` entries reading ``idx_arrays[k]``."""
    return bind(gather_p, x, *idx_arrays, spec=tuple(spec))


def _scatter_abstract(x, v, *idx, spec, mode):
    want = index_shape(x.shape, spec, [a.shape for a in idx])
    if v.shape != want or v.dtype != x.dtype:
        raise ShapeError(f"scatter values must be {want} {x.dtype}, got {v.shape} {v.dtype}")
    if mode not in ("set", "add", "mul", "min", "max"):
        raise ValueError(f"unknown scatter mode {mode!r}")
    if mode in ("min", "max") and x.dtype.kind == "c":
        raise TypeError(f"scatter {mode} needs real values, got {x.dtype}")
    return x


def _scatter_impl(x, v, *idx, spec, mode):
    out = as_array(x).copy()
    key = _py_index(spec, idx)
    if mode == "set":
        xp = namespace_of(out)
        if idx and xp is not np:
            v = _last_update_wins(xp, out.shape, v, key)
        out[key] = v
    else:
        uf = getattr(namespace_of(out), _SCATTER_UFUNC[mode])
        if not idx:            # basic indexing never repeats an element: in-place is exact
            out[key] = uf(out[key], v)
        else:
            uf.at(out, key, v)
    return out


_SCATTER_UFUNC = {"add": "add", "mul": "multiply", "min": "minimum", "max": "maximum"}


def _last_update_wins(xp, shape, v, key):
    """``v`` with every update replaced by the last update to the same target. A GPU writes
    repeated targets of ``out[key] = v`` in no fixed order; numpy keeps the last. With equal
    values at equal targets, any order gives numpy's result."""
    pos = xp.arange(v.size, dtype=np.int64).reshape(v.shape)
    owner = xp.full(shape, -1, dtype=np.int64)
    xp.maximum.at(owner, key, pos)
    return v.reshape(-1)[owner[key]]


scatter_p = Op("scatter", _scatter_abstract, _scatter_impl, fresh=True, c_result=True)


def scatter(x, v, idx_arrays, spec, mode):
    """Functional ``x[spec] = v`` (``mode="set"``), ``+= v`` (``"add"``, repeated indices
    accumulate), ``*= v`` (``"mul"``), or the elementwise minimum / maximum with ``v``
    (``"min"``/``"max"``, over all updates of a repeated index); ``v`` has exactly the
    indexed shape."""
    return bind(scatter_p, x, v, *idx_arrays, spec=tuple(spec), mode=mode)


def _zeros(shape, dtype):
    z = np.zeros((), dtype)
    return broadcast_in_dim(z, shape, ()) if shape else z


def _gather_vjp(cts, ins, outs, *, spec):
    x, idx = ins[0], ins[1:]
    ct = cts[0]
    return (scatter(_zeros(shape_of(x), dtype_of(x)), ct, idx, spec, "add"),) + \
        (None,) * len(idx)


def _gather_jvp(primals, tangents, outs, *, spec):
    t = tangents[0]
    return (None if t is None else gather(t, primals[1:], spec),)


gather_p.vjp, gather_p.jvp = _gather_vjp, _gather_jvp


# Index arrays may repeat an element (x.at[[0, 0]]...). Basic indices never do, so the rules
# below only pay for repeats when index arrays are present:
# * set: numpy keeps the last write; only that update receives a cotangent (``_set_winners``).
# * mul: out_i = x_i * prod_k v_k over the updates k hitting i; d out_i / d v_k is x_i times the
#   product of the *other* updates there (``_mul_others``), computed without dividing by zero.


def _flat_iota(shape):
    """int64 array of ``shape`` holding each element's C-order flat position."""
    if not shape:
        return np.zeros((), np.int64)
    pos, stride = None, 1
    for d in reversed(range(len(shape))):
        term = iota(np.int64, shape, d)
        term = ew.mul(term, np.asarray(stride, np.int64)) if stride != 1 else term
        pos = term if pos is None else ew.add(pos, term)
        stride *= shape[d]
    return pos


def _set_winners(x, v, idx, spec):
    """bool, v's shape: whether each update is the one ``x[idx] = v`` keeps (the last)."""
    pos = _flat_iota(shape_of(v))
    owner = scatter(_zeros(shape_of(x), np.dtype(np.int64)), pos, idx, spec, "set")
    return ew.eq(gather(owner, idx, spec), pos)


def _mul_others(x, v, idx, spec):
    """v's shape: x at each update's target times the product of the *other* updates there.

    The updates are sorted by target (a stable argsort of integers: no gradient); within each
    run of equal targets the exclusive prefix and suffix products are linear recurrences
    (slices, pads, mul, add), so the result is a polynomial in v: no division, exact with
    zeros, and its own derivatives are exact too.
    """
    vs = shape_of(v)
    m = int(np.prod(vs, dtype=np.int64))
    x_t = gather(x, idx, spec)
    if m <= 1:
        return x_t
    dt = dtype_of(v)
    zero, one = np.zeros((), dt), np.ones((), dt)
    target = reshape(gather(_flat_iota(shape_of(x)), idx, spec), (m,))
    vf = reshape(v, (m,))
    _, perm = sort(target, 0)
    t_sorted = gather(target, [perm], (("arr", 0),))
    v_sorted = gather(vf, [perm], (("arr", 0),))
    same_prev = ew.eq(t_sorted, shift(t_sorted, 0, 1, -1))   # targets are >= 0
    same_next = ew.eq(t_sorted, shift(t_sorted, 0, -1, -1))
    before = linear_recurrence(ew.select(same_prev, shift(v_sorted, 0, 1, 0), zero),
                                ew.select(same_prev, zero, one), 0, backward=False)
    after = linear_recurrence(ew.select(same_next, shift(v_sorted, 0, -1, 0), zero),
                               ew.select(same_next, zero, one), 0, backward=True)
    others = scatter(_zeros((m,), dt), ew.mul(before, after), [perm], (("arr", 0),), "set")
    return ew.mul(x_t, reshape(others, vs))


def _extremum_shares(x, v, out, idx, spec):
    """For scatter min/max: which of ``x`` and of the updates ``v`` attain the result at
    their place (0/1 in their dtype), and how many attain it at each place of ``x`` (>= 1).
    Ties share the derivative evenly, as reduce max/min does (docs/numerics.md)."""
    dt = dtype_of(x)
    zero, one = np.zeros((), dt), np.ones((), dt)
    at_x = ew.select(ew.eq(x, out), one, zero)
    at_v = ew.select(ew.eq(v, gather(out, idx, spec)), one, zero)
    count = ew.add(at_x, scatter(_zeros(shape_of(x), dt), at_v, idx, spec, "add"))
    return at_x, at_v, count


def _scatter_vjp(cts, ins, outs, *, spec, mode):
    x, v, idx = ins[0], ins[1], ins[2:]
    ct = cts[0]
    nones = (None,) * len(idx)
    if mode in ("min", "max"):
        at_x, at_v, count = _extremum_shares(x, v, outs[0], idx, spec)
        share = ew.div(ct, count)
        return (ew.mul(share, at_x), ew.mul(gather(share, idx, spec), at_v)) + nones
    if mode == "add":
        return (ct, gather(ct, idx, spec)) + nones
    if mode == "set":
        ct_x = scatter(ct, _zeros(shape_of(v), dtype_of(v)), idx, spec, "set")
        ct_v = gather(ct, idx, spec)
        if idx:
            ct_v = ew.select(_set_winners(x, v, idx, spec), ct_v, np.zeros((), dtype_of(v)))
        return (ct_x, ct_v) + nones
    ct_x = scatter(ct, v, idx, spec, "mul")
    if idx:
        ct_v = ew.mul(gather(ct, idx, spec), _mul_others(x, v, idx, spec))
    else:
        ct_v = gather(ew.mul(ct, x), idx, spec)
    return (ct_x, ct_v) + nones


def _scatter_jvp(primals, tangents, outs, *, spec, mode):
    x, v, idx = primals[0], primals[1], primals[2:]
    tx, tv = tangents[0], tangents[1]
    if tx is None and tv is None:
        return (None,)
    if tx is None:
        tx = _zeros(shape_of(x), dtype_of(x))
    if tv is None:
        tv = _zeros(shape_of(v), dtype_of(v))
    if mode in ("set", "add"):
        return (scatter(tx, tv, idx, spec, mode),)
    if mode in ("min", "max"):
        at_x, at_v, count = _extremum_shares(x, v, outs[0], idx, spec)
        t = scatter(ew.mul(tx, at_x), ew.mul(tv, at_v), idx, spec, "add")
        return (ew.div(t, count),)
    # d(x * prod v) = tx * prod v + sum_k tv_k * (x * prod of the other v) on the indexed places
    t = scatter(tx, v, idx, spec, "mul")
    others = _mul_others(x, v, idx, spec) if idx else gather(x, idx, spec)
    extra = scatter(_zeros(shape_of(x), dtype_of(x)), ew.mul(others, tv), idx, spec, "add")
    return (ew.add(t, extra),)


scatter_p.vjp, scatter_p.jvp = _scatter_vjp, _scatter_jvp


def _along_axis_index(shape, idx, axis):
    """Index arrays that make ``x[arrs]`` equal ``take_along_axis(x, idx, axis)``."""
    nd = len(shape)
    arrs = []
    ishape = shape_of(idx)
    for d in range(nd):
        if d == axis:
            arrs.append(idx)
        else:
            view = [1] * nd
            view[d] = ishape[d]
            arrs.append(np.arange(ishape[d]).reshape(view))
    spec = tuple(("arr", k) for k in range(nd))
    return arrs, spec


def take_along_axis(x, idx, axis):
    """``np.take_along_axis`` (idx has x's rank; non-negative indices)."""
    arrs, spec = _along_axis_index(shape_of(x), idx, axis)
    return gather(x, arrs, spec)


def scatter_along_axis(v, idx, axis, shape):
    """Adjoint of take_along_axis: zeros of ``shape`` with ``v`` added at ``idx``."""
    arrs, spec = _along_axis_index(shape, idx, axis)
    return scatter(_zeros(shape, dtype_of(v)), v, arrs, spec, "add")


# sort (declared in ops.reduce, below this module) permutes its operand: its cotangent goes back
# through the permutation with a scatter, its tangent follows it with a gather


def _sort_vjp(cts, ins, outs, *, axis):
    ct = cts[0]
    if ct is None:
        return (None,)
    return (scatter_along_axis(ct, outs[1], axis, shape_of(ins[0])),)


def _sort_jvp(primals, tangents, outs, *, axis):
    t = tangents[0]
    return (None if t is None else take_along_axis(t, outs[1], axis), None)


sort_p.vjp, sort_p.jvp = _sort_vjp, _sort_jvp


# --------------------------------------------------------------------------------------------
# batch rules
# --------------------------------------------------------------------------------------------

def _batched_index_arrays(idx, idims, size):
    """Index arrays with a leading batch axis, shaped to broadcast against each other."""
    shapes = [tuple(s for i, s in enumerate(shape_of(a)) if i != d) if d is not None
              else tuple(shape_of(a)) for a, d in zip(idx, idims)]
    A = np.broadcast_shapes(*shapes) if shapes else ()
    out = []
    for a, d, s in zip(idx, idims, shapes):
        if d is not None:
            a = moveaxis(a, d, 0)
            a = reshape(a, (size,) + (1,) * (len(A) - len(s)) + s)
        out.append(a)
    return out, A


def _gather_rule(args, dims, *, spec):
    x, idx = args[0], list(args[1:])
    dx, idims = dims[0], list(dims[1:])
    size = size_of(args, dims)
    if all(d is None for d in idims):
        # only x is batched: a leading full slice keeps everything else as it was
        x = moveaxis(x, dx, 0)
        new_spec = (("slice", 0, size, 1),) + tuple(spec)
        out = gather(x, idx, new_spec)
        arr_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
        adjacent = bool(arr_pos) and arr_pos == list(range(arr_pos[0], arr_pos[-1] + 1))
        if arr_pos and not adjacent:
            A = np.broadcast_shapes(*[shape_of(a) for a in idx])
            return (out,), (len(A),)
        return (out,), (0,)
    idx_b, A = _batched_index_arrays(idx, idims, size)
    if dx is None:
        out = gather(x, idx_b, spec)
        arr_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
        adjacent = arr_pos == list(range(arr_pos[0], arr_pos[-1] + 1))
        # the advanced block (with the batch axis first) sits where numpy puts it
        pos = 0 if not adjacent else _dims_before(spec, arr_pos[0])
        return (out,), (pos,)
    x = moveaxis(x, dx, 0)
    b_idx = np.arange(size).reshape((size,) + (1,) * len(A))
    new_spec = (("arr", len(idx_b)),) + tuple(spec)
    return (gather(x, idx_b + [b_idx], new_spec),), (0,)


def _dims_before(spec, pos):
    """Result dims produced by the basic entries of ``spec`` before entry ``pos``."""
    return sum(1 for e in spec[:pos] if e[0] in ("slice", "none"))


def _scatter_rule(args, dims, *, spec, mode):
    x, v, idx = args[0], args[1], list(args[2:])
    dx, dv, idims = dims[0], dims[1], list(dims[2:])
    size = size_of(args, dims)
    x = bdim_to_front(x, dx, size)
    idx_b, A = _batched_index_arrays(idx, idims, size)
    v = bdim_to_front(v, dv, size)
    arr_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
    b_idx = np.arange(size).reshape((size,) + (1,) * len(A))
    new_spec = (("arr", len(idx_b)),) + tuple(spec)
    if arr_pos:
        adjacent = arr_pos == list(range(arr_pos[0], arr_pos[-1] + 1))
        pre = _dims_before(spec, arr_pos[0]) if adjacent else 0
        if pre:
            # v is laid out (B, pre..., A..., post...); the new index puts A first
            nv = len(shape_of(v))
            perm = ([0] + list(range(1 + pre, 1 + pre + len(A))) + list(range(1, 1 + pre))
                    + list(range(1 + pre + len(A), nv)))
            v = transpose(v, tuple(perm))
        # batched index arrays need the batch entry to pair with their own batch axis
        out = scatter(x, v, idx_b + [b_idx], new_spec, mode)
        return (out,), (0,)
    out = scatter(x, v, [np.arange(size)], new_spec, mode)
    return (out,), (0,)


gather_p.batch, scatter_p.batch = _gather_rule, _scatter_rule
