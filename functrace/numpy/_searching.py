"""Searching, binning and counting of functrace.numpy: searchsorted, digitize, bincount,
histogram, histogram_bin_edges, unique.

Each function runs numpy eagerly outside a transform. Inside one:

* ``searchsorted`` counts, for each query, the sorted values that come before it. The default
  (``method="compare_all"``) compares every query with every value: O(len(a) * len(v)) work
  and memory, one fused elementwise kernel and a sum, the fastest for the sizes ported programs
  use (bins, knots: tens to thousands). ``method="sort"`` sorts the values and the queries
  together instead, O((n + m) log(n + m)), for large inputs. Both put NaN last, as numpy.
* Results that are indices or counts are integers: they work as indices and masks inside a
  transform and carry no gradient. Float results (weighted counts, densities, bin edges) are
  differentiable in the weights and the data.
* Shapes must not depend on values. ``bincount`` takes the extra keyword ``length=`` (as
  ``jax.numpy.bincount``) and ``unique`` takes ``size=`` / ``fill_value=`` (as
  ``jax.numpy.unique``); without them they need concrete values (they work under ``grad`` of
  concrete inputs, where values are known) and raise ``ConcretizationError`` naming the keyword
  under abstract tracing, as ``nonzero`` does.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import ops
from ..errors import ConcretizationError, MissingRuleError
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast

__all__ = ["searchsorted", "digitize", "bincount", "histogram", "histogram_bin_edges",
           "unique"]


def _concrete(x, what, hint):
    """``x``'s value as a numpy array, or a ConcretizationError naming ``hint``."""
    if not isinstance(x, Tracer):
        return np.asarray(x)
    try:
        return np.asarray(x.value)
    except ConcretizationError:
        raise ConcretizationError(
            f"{what} depends on the values of its input, which are not known while tracing "
            f"with abstract inputs: {hint}") from None


def _before(a, v, side):
    """For each ``v``, whether each ``a`` comes before it (NaN sorts last): shape v + a."""
    shape = (*v.shape, a.shape[0])
    A = ops.broadcast_in_dim(a, shape, (v.ndim,))
    V = ops.broadcast_in_dim(v, shape, tuple(range(v.ndim)))
    if side == "left":
        hit = ops.lt(A, V)
        if a.dtype.kind in "fc":
            hit = ops.logical_or(hit, ops.logical_and(ops.isnan(V),
                                                      ops.logical_not(ops.isnan(A))))
    else:
        hit = ops.le(A, V)
        if a.dtype.kind in "fc":
            hit = ops.logical_or(hit, ops.isnan(V))
    return hit


def _rank(perm):
    """The inverse of the permutation ``perm`` (1-d): where each element went."""
    n = perm.shape[0]
    return ops.scatter(ops.broadcast_to_shape(np.zeros((), np.intp), (n,)),
                       ops.iota(np.intp, (n,), 0), [perm], (("arr", 0),), "set")


def searchsorted(a, v, side="left", sorter=None, *, method="compare_all"):
    """numpy.searchsorted (an integer index: no gradient). Traced, ``method="compare_all"``
    (default) is O(len(a) * len(v)); ``method="sort"`` is O((n + m) log(n + m)) (the module
    docstring says when each pays).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.searchsorted(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.5]))
        array([1, 2])
    """
    if current_trace() is None:
        return np.searchsorted(a, v, side=side, sorter=sorter)
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    a, v = asarray_any(a), asarray_any(v)
    if a.ndim != 1:
        raise ValueError("object too deep for desired array")
    if sorter is not None:
        from ._indexing import take
        a = take(a, sorter)
    dt = np.result_type(a.dtype, v.dtype)
    a, v = cast(a, dt), cast(v, dt)
    if method == "compare_all":
        hit = _before(a, v, side)
        return ops.reduce_sum(ops.convert_element_type(hit, np.intp), (v.ndim,))
    if method != "sort":
        raise ValueError(f"searchsorted: method must be 'compare_all' or 'sort', got {method!r}")
    n, m = a.shape[0], v.size
    vf = ops.reshape(v, (m,)) if isinstance(v, Tracer) else np.reshape(v, (m,))
    # stable sort of both: for "left" the queries go first (a tie puts the query before the
    # equal values), for "right" last; the values before a query = its place - its rank
    both = ops.concatenate([vf, a] if side == "left" else [a, vf], 0)
    place = _rank(ops.sort(both, 0)[1])
    place = ops.slice_op(place, (0,), (m,)) if side == "left" else \
        ops.slice_op(place, (n,), (n + m,))
    rank_v = _rank(ops.sort(vf, 0)[1])
    return ops.reshape(ops.sub(place, rank_v), v.shape)


def digitize(x, bins, right=False):
    """numpy.digitize (increasing or decreasing bins; an integer index, no gradient). Traced
    bins of unknown direction are searched both ways and the direction picked at run time.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.digitize(np.array([0.5, 1.5, 3.0]), np.array([1.0, 2.0]))
        array([0, 1, 2])
    """
    if current_trace() is None:
        return np.digitize(x, bins, right=right)
    from ._shape import flip
    x, b = asarray_any(x), asarray_any(bins)
    if x.dtype.kind == "c":
        raise TypeError("x may not be complex")
    if b.ndim != 1:
        raise ValueError("bins must be 1d")
    side = "left" if right else "right"
    n = b.shape[0]

    def decreasing():
        return ops.sub(np.asarray(n, np.intp), searchsorted(flip(b), x, side=side))

    if isinstance(b, np.ndarray):
        d = np.diff(b)
        if n > 1 and not (np.all(d >= 0) or np.all(d <= 0)):
            raise ValueError("bins must be monotonically increasing or decreasing")
        return decreasing() if n > 1 and np.all(d <= 0) and not np.all(d >= 0) else \
            searchsorted(b, x, side=side)
    if n < 2:
        return searchsorted(b, x, side=side)
    inc = ops.ge(ops.reshape(ops.slice_op(b, (n - 1,), (n,)), ()),
                 ops.reshape(ops.slice_op(b, (0,), (1,)), ()))
    return ops.select(ops.broadcast_to_shape(inc, x.shape), searchsorted(b, x, side=side),
                      decreasing())


def bincount(x, weights=None, minlength=0, *, length=None):
    """numpy.bincount. ``length=`` (functrace's, as ``jax.numpy.bincount``) fixes the result's
    length (values at or past it are dropped), which a traced call with abstract inputs needs;
    without it the length is ``max(x) + 1`` read from concrete values. Counts are integers (no
    gradient); weighted counts are float64 and differentiable in the weights.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.bincount(np.array([0, 2, 2]))
        array([1, 0, 2])
    """
    if current_trace() is None:
        if length is None:
            return np.bincount(x, weights, minlength)
        xx = np.asarray(x)
        keep = xx < length
        w = None if weights is None else np.asarray(weights)[keep]
        return np.bincount(xx[keep], w, max(minlength, int(length)))[:int(length)]
    xx = asarray_any(x)
    if xx.ndim != 1:
        raise ValueError("object too deep for desired array" if xx.ndim > 1 else
                         "object of too small depth for desired array")
    if xx.dtype.kind not in "iub":
        raise TypeError("Cannot cast array data from dtype('float64') to dtype('int64') "
                        "according to the rule 'safe'")
    xx = cast(xx, np.intp)
    if length is None:
        val = _concrete(xx, "bincount's length (max(x) + 1)",
                        "pass length= (the number of bins) to fix it")
        if val.size and val.min() < 0:
            raise ValueError("'list' argument must have no negative elements")
        length = max(int(val.max()) + 1 if val.size else 0, int(minlength))
    length = operator.index(length)
    if weights is None:
        w, dt = ops.broadcast_to_shape(np.ones((), np.intp), xx.shape), np.dtype(np.intp)
    else:
        w = asarray_any(weights)
        if w.shape != xx.shape:
            raise ValueError("The weights and list don't have the same length.")
        if w.dtype.kind == "c":
            raise TypeError("Cannot cast array data from dtype('complex128') to "
                            "dtype('float64') according to the rule 'safe'")
        dt = np.dtype(np.float64)
        w = cast(w, dt)
    ok = ops.logical_and(ops.ge(xx, np.zeros((), np.intp)), ops.lt(xx, np.asarray(length,
                                                                                  np.intp)))
    # values outside [0, length) go to one extra bin, cut off at the end
    idx = ops.select(ok, xx, ops.broadcast_to_shape(np.asarray(length, np.intp), xx.shape))
    if isinstance(w, np.ndarray):
        w = ops.broadcast_to_shape(w, xx.shape)
    out = ops.scatter(ops.broadcast_to_shape(np.zeros((), dt), (length + 1,)), w, [idx],
                      (("arr", 0),), "add")
    return ops.slice_op(out, (0,), (length,))


def _outer_edges(a, range_):
    """numpy's _get_outer_edges, traced: the range's ends, or the data's min and max (a
    one-value range widened by 0.5 each side)."""
    from ._reductions import max as fmax
    from ._reductions import min as fmin
    from ._ufuncs import add, equal, subtract, where
    if range_ is not None:
        first, last = range_
        if not isinstance(first, Tracer) and not isinstance(last, Tracer):
            if first > last:
                raise ValueError("max must be larger than min in range parameter.")
            if not (np.isfinite(first) and np.isfinite(last)):
                raise ValueError(f"supplied range of [{first}, {last}] is not finite")
            if first == last:
                first, last = first - 0.5, last + 0.5
            return first, last
    elif a.size == 0:
        return 0, 1
    else:
        first, last = fmin(a), fmax(a)
    same = equal(first, last)
    return where(same, subtract(first, 0.5), first), where(same, add(last, 0.5), last)


def _bin_edges(a, bins, range_, weights, name):
    from ._core import dtype_key
    from ._creation import linspace
    if isinstance(bins, str):
        raise MissingRuleError(f"{name}(bins={bins!r}): a bin-count rule picks the number of "
                               "bins from the data's values, so the shape is not static; "
                               "pass an integer number of bins or the edges")
    if np.ndim(bins) == 0:
        nb = operator.index(bins)
        if nb < 1:
            raise ValueError("`bins` must be positive, when an integer")
        first, last = _outer_edges(a, range_)
        bin_type = np.result_type(dtype_key(first) if not isinstance(first, int | float)
                                  else first,
                                  dtype_key(last) if not isinstance(last, int | float) else last,
                                  a.dtype)
        if bin_type.kind in "iub":
            bin_type = np.result_type(bin_type, float)
        return linspace(first, last, nb + 1, endpoint=True, dtype=bin_type), nb
    edges = asarray_any(bins)
    if edges.ndim != 1:
        raise ValueError("`bins` must be 1d, when an array")
    if isinstance(edges, np.ndarray) and np.any(edges[:-1] > edges[1:]):
        raise ValueError("`bins` must increase monotonically, when an array")
    return edges, edges.shape[0] - 1


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """numpy.histogram_bin_edges (integer ``bins`` or explicit edges when traced;
    differentiable in the data through its min and max).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.histogram_bin_edges(np.array([0.0, 1.0, 2.0]), bins=2)
        array([0., 1., 2.])
    """
    if current_trace() is None:
        return np.histogram_bin_edges(a, bins=bins, range=range, weights=weights)
    x = asarray_any(a)
    x = ops.reshape(x, (x.size,)) if isinstance(x, Tracer) else np.ravel(x)
    return _bin_edges(x, bins, range, weights, "histogram_bin_edges")[0]


def histogram(a, bins=10, range=None, density=None, weights=None):
    """numpy.histogram: ``(counts, bin_edges)``. Counts are integers (no gradient); weighted
    counts are differentiable in the weights, densities and edges in the data (through the
    edges). Traced bins are an integer or explicit edges (not a string rule).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.histogram(np.array([0.0, 0.5, 2.0]), bins=2)
        (array([2, 1]), array([0., 1., 2.]))
    """
    if current_trace() is None:
        return np.histogram(a, bins=bins, range=range, density=density, weights=weights)
    from ._reductions import sum as fsum
    from ._ufuncs import divide
    x = asarray_any(a)
    x = ops.reshape(x, (x.size,)) if isinstance(x, Tracer) else np.ravel(x)
    w = None
    if weights is not None:
        w = asarray_any(weights)
        if w.shape != np.shape(a):
            raise ValueError("weights should have the same shape as a.")
        w = ops.reshape(w, (w.size,)) if isinstance(w, Tracer) else np.ravel(w)
    edges, nb = _bin_edges(x, bins, range, w, "histogram")
    e = asarray_any(edges)
    xe = cast(x, np.result_type(x.dtype, e.dtype))
    e = cast(e, xe.dtype)
    lo = ops.reshape(ops.slice_op(e, (0,), (1,)), ()) if isinstance(e, Tracer) else e[0]
    hi = ops.reshape(ops.slice_op(e, (nb,), (nb + 1,)), ()) if isinstance(e, Tracer) else e[-1]
    idx = ops.sub(searchsorted(e, xe, side="right"), np.ones((), np.intp))
    # the last bin holds its right edge; values outside [lo, hi] are not counted
    idx = ops.select(ops.eq(xe, ops.broadcast_to_shape(hi, xe.shape)),
                     ops.broadcast_to_shape(np.asarray(nb - 1, np.intp), xe.shape), idx)
    keep = ops.logical_and(ops.ge(xe, ops.broadcast_to_shape(lo, xe.shape)),
                           ops.le(xe, ops.broadcast_to_shape(hi, xe.shape)))
    idx = ops.select(keep, idx, ops.broadcast_to_shape(np.asarray(nb, np.intp), xe.shape))
    n = bincount(idx, weights=w, length=nb)
    if w is not None:
        n = cast(n, w.dtype)
    if density:
        db = cast(ops.sub(ops.slice_op(e, (1,), (nb + 1,)), ops.slice_op(e, (0,), (nb,))),
                  np.float64)
        n = divide(divide(n, db), fsum(n))
    return n, edges


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True, size=None, fill_value=None):
    """numpy.unique. Its length depends on the values: traced, it needs concrete values (under
    ``grad`` of concrete inputs the unique values are gathered from the input, so gradients
    flow), or ``size=`` (functrace's, as ``jax.numpy.unique``): the first ``size`` unique values
    in sorted order, padded with ``fill_value`` (default: the smallest value), for abstract
    inputs (``axis=None`` only). Indices, inverse and counts are integers (no gradient).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.unique(np.array([3, 1, 3, 2]))
        array([1, 2, 3])
    """
    if current_trace() is None and size is None:
        return np.unique(ar, return_index=return_index, return_inverse=return_inverse,
                         return_counts=return_counts, axis=axis, equal_nan=equal_nan,
                         sorted=sorted)
    if size is None:
        return _unique_concrete(ar, return_index, return_inverse, return_counts, axis,
                                equal_nan, sorted)
    if current_trace() is None:
        return _unique_sized_eager(ar, return_index, return_inverse, return_counts, axis,
                                   equal_nan, size, fill_value)
    return _unique_sized(ar, return_index, return_inverse, return_counts, axis, equal_nan,
                         size, fill_value)


def _unique_concrete(ar, return_index, return_inverse, return_counts, axis, equal_nan, srt):
    from ._indexing import take
    x = asarray_any(ar)
    val = _concrete(x, "unique's length (the number of distinct values)",
                    "pass size= (and fill_value=) for a fixed-length result, as "
                    "jax.numpy.unique")
    res = np.unique(val, return_index=True, return_inverse=return_inverse,
                    return_counts=return_counts, axis=axis, equal_nan=equal_nan, sorted=srt)
    idx = res[1]
    if axis is None:
        values = take(ops.reshape(x, (x.size,)) if isinstance(x, Tracer) else np.ravel(x), idx)
    else:
        values = take(x, idx, axis=axis)
    out = [values]
    if return_index:
        out.append(idx)
    out.extend(res[2:])
    return out[0] if len(out) == 1 else tuple(out)


def _unique_sized_eager(ar, return_index, return_inverse, return_counts, axis, equal_nan,
                        size, fill_value):
    """numpy's unique cut or padded to ``size`` (what the traced ``size=`` path computes)."""
    if axis is not None:
        raise MissingRuleError("unique(size=..., axis=...) is not supported: use axis=None")
    x = np.asarray(ar)
    size = operator.index(size)
    vals, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True,
                                    return_counts=True, equal_nan=equal_nan)
    fill = vals[0] if fill_value is None else np.asarray(fill_value).astype(vals.dtype)

    def fit(a, pad):
        a = a[:size]
        return np.concatenate([a, np.full(size - a.shape[0], pad, a.dtype)])
    out = [fit(vals, fill)]
    if return_index:
        out.append(fit(idx, 0))
    if return_inverse:
        out.append(inv.reshape(x.shape))
    if return_counts:
        out.append(fit(cnt, 0))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_sized(ar, return_index, return_inverse, return_counts, axis, equal_nan, size,
                  fill_value):
    if axis is not None:
        raise MissingRuleError("unique(size=..., axis=...) is not traceable: use axis=None")
    x = asarray_any(ar)
    shape = x.shape
    x = ops.reshape(x, (x.size,)) if isinstance(x, Tracer) else np.ravel(x)
    n = x.shape[0]
    size = operator.index(size)
    if n == 0:
        raise ValueError("unique(size=...) of an empty array")
    s, perm = ops.sort(x, 0)
    diff = ops.ne(ops.slice_op(s, (1,), (n,)), ops.slice_op(s, (0,), (n - 1,)))
    if equal_nan and s.dtype.kind in "fc":
        both_nan = ops.logical_and(ops.isnan(ops.slice_op(s, (1,), (n,))),
                                   ops.isnan(ops.slice_op(s, (0,), (n - 1,))))
        diff = ops.logical_and(diff, ops.logical_not(both_nan))
    first = ops.concatenate([np.ones((1,), bool), diff], 0)
    gid = ops.sub(ops.cumsum(ops.convert_element_type(first, np.intp), 0),
                  np.ones((), np.intp))
    # each run's first element goes to its group's slot; the rest to a slot cut off at the end
    slot = ops.select(ops.logical_and(first, ops.lt(gid, np.asarray(size, np.intp))), gid,
                      ops.broadcast_to_shape(np.asarray(size, np.intp), (n,)))
    spec = (("arr", 0),)
    fill = ops.reshape(ops.slice_op(s, (0,), (1,)), ()) if fill_value is None else \
        cast(asarray_any(fill_value), s.dtype)
    base = ops.broadcast_to_shape(fill, (size + 1,))
    values = ops.slice_op(ops.scatter(base, s, [slot], spec, "set"), (0,), (size,))
    out = [values]
    if return_index:
        zeros = ops.broadcast_to_shape(np.zeros((), np.intp), (size + 1,))
        out.append(ops.slice_op(ops.scatter(zeros, perm, [slot], spec, "set"), (0,), (size,)))
    if return_inverse:
        inv = ops.scatter(ops.broadcast_to_shape(np.zeros((), np.intp), (n,)), gid, [perm],
                          spec, "set")
        out.append(ops.reshape(inv, shape))
    if return_counts:
        cslot = ops.select(ops.lt(gid, np.asarray(size, np.intp)), gid,
                           ops.broadcast_to_shape(np.asarray(size, np.intp), (n,)))
        ones = ops.broadcast_to_shape(np.ones((), np.intp), (n,))
        zeros = ops.broadcast_to_shape(np.zeros((), np.intp), (size + 1,))
        out.append(ops.slice_op(ops.scatter(zeros, ones, [cslot], spec, "add"), (0,), (size,)))
    return out[0] if len(out) == 1 else tuple(out)
