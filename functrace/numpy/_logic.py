"""Tests, comparisons and case analysis of functrace.numpy: allclose, array_equal, isin, select,
piecewise, ...

Each function runs numpy eagerly outside a transform. Inside one it is a composition of other
``fnp`` functions (so every rule comes from theirs). Boolean results carry no gradient; a
Python ``bool`` that numpy returns (``allclose``, ``array_equal``) is a 0-d boolean array when
traced, usable as a mask (``fnp.where(fnp.allclose(x, y), ...)``) but not in a Python ``if``
under abstract tracing.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, broadcast_all, cast, weak_result_type

__all__ = ["allclose", "array_equal", "array_equiv", "iscomplex", "isreal", "iscomplexobj",
           "isrealobj", "isin", "select", "piecewise"]


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy.allclose; traced, a 0-d boolean array (no gradient).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.allclose(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
        True
    """
    if current_trace() is None:
        return np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    from ._reductions import all as fall
    from ._ufuncs import isclose
    return fall(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """numpy.array_equal (shapes must match exactly); traced, a 0-d boolean array.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.array_equal(np.array([1, 2]), np.array([1, 2]))
        True
    """
    if current_trace() is None:
        return np.array_equal(a1, a2, equal_nan=equal_nan)
    a1, a2 = asarray_any(a1), asarray_any(a2)
    if a1.shape != a2.shape:
        return np.asarray(False)
    return _all_equal(a1, a2, equal_nan)


def _all_equal(a1, a2, equal_nan):
    from ._reductions import all as fall
    from ._ufuncs import equal, isnan, logical_and, logical_or
    eq = equal(a1, a2)
    if equal_nan and np.result_type(a1.dtype, a2.dtype).kind in "fc":
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return fall(eq)


def array_equiv(a1, a2):
    """numpy.array_equiv (equal after broadcasting); traced, a 0-d boolean array.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.array_equiv(np.array([1, 2]), np.array([[1, 2], [1, 2]]))
        True
    """
    if current_trace() is None:
        return np.array_equiv(a1, a2)
    a1, a2 = asarray_any(a1), asarray_any(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return np.asarray(False)
    return _all_equal(a1, a2, False)


def iscomplex(x):
    """numpy.iscomplex: True where the imaginary part is nonzero (no gradient).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.iscomplex(np.array([1 + 1j, 2 + 0j]))
        array([ True, False])
    """
    if current_trace() is None:
        return np.iscomplex(x)
    x = asarray_any(x)
    if x.dtype.kind != "c":
        return ops.broadcast_to_shape(np.asarray(False), x.shape)
    return ops.ne(ops.imag(x), np.zeros((), ops.imag(x).dtype))


def isreal(x):
    """numpy.isreal: True where the imaginary part is zero (no gradient).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.isreal(np.array([1 + 1j, 2 + 0j]))
        array([False,  True])
    """
    if current_trace() is None:
        return np.isreal(x)
    x = asarray_any(x)
    if x.dtype.kind != "c":
        return ops.broadcast_to_shape(np.asarray(True), x.shape)
    return ops.eq(ops.imag(x), np.zeros((), ops.imag(x).dtype))


def iscomplexobj(x):
    """numpy.iscomplexobj: whether the dtype is complex (a Python bool, also when traced).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.iscomplexobj(np.ones(2))
        False
    """
    if current_trace() is None or not isinstance(x, Tracer):
        return np.iscomplexobj(x)
    return x.dtype.kind == "c"


def isrealobj(x):
    """numpy.isrealobj: whether the dtype is not complex (a Python bool, also when traced).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.isrealobj(np.ones(2))
        True
    """
    return not iscomplexobj(x)


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """numpy.isin. Traced, every element is compared with every test element: O(n*m) work and
    memory, fine for moderate sizes (no gradient).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.isin(np.array([1, 2, 3]), [2, 5])
        array([False,  True, False])
    """
    if current_trace() is None:
        return np.isin(element, test_elements, assume_unique=assume_unique, invert=invert,
                       kind=kind)
    e, t = asarray_any(element), asarray_any(test_elements)
    dt = np.result_type(e.dtype, t.dtype)
    e, t = cast(e, dt), cast(t, dt)
    t = ops.reshape(t, (t.size,))
    ee = ops.broadcast_in_dim(e, (*e.shape, t.shape[0]), tuple(range(e.ndim)))
    tt = ops.broadcast_in_dim(t, (*e.shape, t.shape[0]), (e.ndim,))
    eq = ops.eq(ee, tt)
    hit = ops.reduce_or(eq, (e.ndim,)) if t.shape[0] else \
        ops.broadcast_to_shape(np.asarray(False), e.shape)
    return ops.logical_not(hit) if invert else hit


def select(condlist, choicelist, default=0):
    """numpy.select: the first true condition picks its choice (differentiable in the choices
    and the default).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> x = np.array([-2.0, 0.5, 3.0])
        >>> fnp.select([x < 0, x > 1], [-x, x ** 2], default=0.0)
        array([2., 0., 9.])
    """
    if current_trace() is None:
        return np.select(condlist, choicelist, default)
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(choicelist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    # numpy: Python scalars among the choices and the default stay weak (NEP 50)
    choices = [c if type(c) in (int, float, complex) else asarray_any(c) for c in choicelist]
    conds = [asarray_any(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    dflt = default if type(default) in (int, float, complex) else asarray_any(default)
    dt = weak_result_type(*choices, dflt)
    _, xs = broadcast_all(*[cast(c, dt) for c in choices], cast(dflt, dt), *conds)
    n = len(choices)
    out = xs[n]
    for c, v in zip(reversed(xs[n + 1:]), reversed(xs[:n]), strict=True):
        out = ops.select(c, v, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """numpy.piecewise. Traced, each function is applied to the whole of ``x`` (not only where
    its condition holds) and the results are selected elementwise; later conditions win, as in
    numpy. A function singular where its condition is false gives NaN gradients there (the
    ``where`` pitfall of docs/numerics.md): make its argument safe.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> x = np.array([-1.0, 2.0])
        >>> fnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * v])
        array([1., 4.])
    """
    if current_trace() is None:
        return np.piecewise(x, condlist, funclist, *args, **kw)
    x = asarray_any(x)
    if isinstance(condlist, Tracer | np.ndarray):
        # numpy: a 0-d or (for x of rank >= 1) 1-d array is one condition; the rows of a
        # higher-rank array are conditions
        condlist = [condlist] if condlist.ndim == 0 or (condlist.ndim == 1 and x.ndim) else \
            [condlist[i] for i in range(condlist.shape[0])]
    elif np.isscalar(condlist):
        condlist = [condlist]
    conds = [cast(asarray_any(c), bool) for c in condlist]
    n = len(conds)
    if len(funclist) == n + 1:    # the "otherwise" function
        anyc = np.asarray(False)
        for c in conds:
            anyc = ops.logical_or(*broadcast_all(anyc, c)[1])
        conds.append(ops.logical_not(anyc))
    elif len(funclist) != n:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are needed")
    out = ops.broadcast_to_shape(np.zeros((), x.dtype), x.shape)
    for c, f in zip(conds, funclist, strict=True):
        v = f(x, *args, **kw) if callable(f) else f
        v = cast(asarray_any(v), x.dtype)
        _, (c, v) = broadcast_all(c, v)
        if np.shape(c) != x.shape:
            c = ops.broadcast_to_shape(c, x.shape)
        if np.shape(v) != x.shape:
            v = ops.broadcast_to_shape(v, x.shape)
        out = ops.select(c, v, out)
    return out
