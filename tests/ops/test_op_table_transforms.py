"""Forward mode and vmap over the OpCase table.

* jvp: for every differentiable float64 row, ``ft.jvp`` against central differences, and
  <u, J v> computed by jvp and by vjp (higher orders: tests/transforms/test_forward.py).
* vmap: for every row whose arguments are arrays, ``ft.vmap`` over a stack of 3 examples with
  in_axes 0 for every argument, and (hypothesis) random mixes of 0, 1 and None, compared with a
  Python loop of the traced function.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from op_cases import CASES, OpCase

import functrace as ft
import functrace.numpy as fnp
from functrace import tree_util
from functrace.test_util import numerical_jvp

pytestmark = pytest.mark.filterwarnings(
    "ignore:Arrays of 2-dimensional vectors are deprecated:DeprecationWarning")


def _fn(c: OpCase):
    return functools.partial(c.fn, **c.kwargs) if c.kwargs else c.fn


def _float_rows():
    rows = []
    for c in CASES:
        if not c.order or "float64" not in c.dtypes:
            continue
        if any(k.startswith("grad") for k, _ in c.xfail):
            continue
        rows.append(pytest.param(c, id=c.name))
    return rows


def _leaves(x):
    return [np.asarray(v) for v in tree_util.tree_leaves(x)]


def _inner(a, b):
    return sum(float(np.sum(np.real(np.conj(x) * y))) for x, y in zip(_leaves(a), _leaves(b)))


@pytest.mark.parametrize("c", _float_rows())
def test_jvp_matches_finite_differences_and_vjp(c):
    args = c.make_args("float64")
    fl = [i for i, a in enumerate(args) if a.dtype.kind == "f"]
    if not fl:
        pytest.skip("no float argument")
    fn = _fn(c)

    def f(*xs):
        full = list(args)
        for i, x in zip(fl, xs):
            full[i] = x
        return fn(*full)
    primals = [args[i] for i in fl]
    rng = np.random.default_rng(1)
    tangents = [rng.standard_normal(np.shape(p)).astype(p.dtype) for p in primals]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out, tout = ft.jvp(f, tuple(primals), tuple(tangents))
        # rows that compute in float32 (e.g. dtype=float32) get float32 differences
        low = any(np.asarray(o).dtype in (np.float32, np.complex64) for o in _leaves(out))
        num = numerical_jvp(f, primals, tangents, 1e-3 if low else 1e-6)
    u = tree_util.tree_map(lambda o: rng.standard_normal(np.shape(o)), out)
    a, b = _inner(u, tout), _inner(u, num)
    atol = 3e-2 if low else (c.atol if c.atol is not None else 1e-5)
    rtol = 3e-2 if low else (c.rtol if c.rtol is not None else 1e-5)
    assert abs(a - b) <= atol + rtol * max(abs(a), abs(b)), (a, b)
    # <u, J v> computed by forward and by reverse mode agree to rounding
    _, pull = ft.vjp(f, *primals)
    c2 = _inner(pull(u), tangents)
    tol = 1e-5 if low else 1e-9
    assert abs(a - c2) <= tol + tol * max(abs(a), abs(c2)), (a, c2)


def _vmap_rows():
    rows = []
    for c in CASES:
        dt = c.dtypes[0]
        if any(k in ("traced", "eager") for k, _ in c.xfail):
            continue
        if not c.shapes:
            continue
        dt_id = dt if isinstance(dt, str) else "-".join(dt)
        rows.append(pytest.param(c, dt, id=f"{c.name}-{dt_id}"))
    return rows


def _examples(c, dt, n=3):
    """``n`` argument lists for row ``c`` (the first is the row's own; others perturbed)."""
    base = c.make_args(dt)
    rng = np.random.default_rng(7)
    exs = [base]
    for _ in range(1, n):
        ex = []
        for a in base:
            if a.dtype.kind in "fc" and a.size:
                # a small perturbation keeps rows inside their domain (away from kinks)
                scale = 1e-3 * (1 + np.abs(a))
                ex.append((a + scale * rng.uniform(-1, 1, a.shape)).astype(a.dtype))
            else:
                ex.append(a.copy())
        exs.append(ex)
    return exs


def _needs_values(fn, args, axes):
    """Rows whose output shape depends on the values of a batched argument (masks, nonzero,
    an arange bound) cannot be vmapped: vmap traces one example with the batched arguments
    abstract (unbatched ones keep their values), so for them it must raise
    ConcretizationError. Unbatched arguments reach the function as they are (numpy arrays),
    as vmap passes them: a numpy array indexed by a batched integer (``x[i]``, x unbatched)
    needs ``i``'s value too."""
    batched = [i for i, ax in enumerate(axes) if ax is not None]

    def with_unbatched(*bs):
        full = list(args)
        for i, b in zip(batched, bs):
            full[i] = b
        return fn(*full)

    try:
        ft.trace(with_unbatched)(*[ft.ShapeDtype(np.shape(args[i]), np.asarray(args[i]).dtype)
                                   for i in batched])
    except ft.ConcretizationError:
        return True
    return False


def _check_vmap(c, dt, axes):
    fn = _fn(c)
    exs = _examples(c, dt)
    if any(ax is not None for ax in axes) and _needs_values(fn, exs[0], axes):
        batched_args = [ex if ax is None else np.stack([e[i] for e in exs], axis=ax)
                        for i, (ex, ax) in enumerate(zip(exs[0], axes))]
        with pytest.raises(ft.ConcretizationError):
            ft.vmap(fn, in_axes=tuple(axes))(*batched_args)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        loop = [ft.trace(fn)(*ex)(*ex) for ex in exs]
        batched_args = []
        for i, ax in enumerate(axes):
            if ax is None:
                batched_args.append(exs[0][i])
            else:
                batched_args.append(np.stack([ex[i] for ex in exs], axis=ax))
        if all(ax is None for ax in axes):
            return
        # examples that share an unbatched argument must use the first example's value
        ref_exs = [[exs[0][i] if ax is None else ex[i] for i, ax in enumerate(axes)]
                   for ex in exs]
        loop = [ft.trace(fn)(*ex)(*ex) for ex in ref_exs]
        got = ft.vmap(fn, in_axes=tuple(axes))(*batched_args)
    got_l, want_l = tree_util.tree_leaves(got), [tree_util.tree_leaves(r) for r in loop]
    for k, g in enumerate(got_l):
        want = np.stack([np.asarray(w[k]) for w in want_l])
        assert g.shape == want.shape, (g.shape, want.shape)
        assert g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=1e-6 if want.dtype == np.float32 else 1e-12,
                                   atol=1e-6 if want.dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("c,dt", _vmap_rows())
def test_vmap_matches_loop_axis0(c, dt):
    _check_vmap(c, dt, [0] * len(c.shapes))


_ROWS = [p.values for p in _vmap_rows()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_vmap_matches_loop_axes_mixes(data):
    c, dt = data.draw(st.sampled_from(_ROWS))
    axes = []
    for shape in c.shapes:
        choices = [None, 0] + ([1] if len(shape) >= 1 else [])
        axes.append(data.draw(st.sampled_from(choices)))
    _check_vmap(c, dt, axes)


def test_vmap_value_dependent_row_with_unbatched_bound():
    # fnp.arange(n) needs n's value: vmapping only the other argument is fine (n stays
    # concrete), vmapping n is a ConcretizationError
    c = next(c for c in CASES if c.name == "arange:traced_bound")
    _check_vmap(c, c.dtypes[0], [0, None])
    _check_vmap(c, c.dtypes[0], [None, 0])


def test_vmap_of_a_numpy_array_indexed_by_a_batched_integer_names_the_fix():
    # vmap passes an unbatched argument through as the numpy array it is, and numpy's own
    # indexing needs the batched index's value: a ConcretizationError that names fnp.take
    c = next(c for c in CASES if c.name == "getitem:traced_0d_int")
    _check_vmap(c, c.dtypes[0], [None, 0])
    x = np.arange(16.0).reshape(4, 4)
    with pytest.raises(ft.ConcretizationError, match=r"fnp\.take"):
        ft.vmap(lambda x, i: x[i], in_axes=(None, 0))(x, np.array([0, 2]))
    np.testing.assert_array_equal(
        ft.vmap(lambda x, i: fnp.take(x, i, axis=0), in_axes=(None, 0))(x, np.array([0, 2])),
        x[[0, 2]])
