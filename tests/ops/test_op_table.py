"""The table-driven op tests: every row of ``tests/support/op_cases.py`` checked four ways.

* eager == numpy: outside any transform ``fnp.f`` *is* numpy's function (value, dtype, shape,
  and a plain numpy type, never a wrapper).
* traced == eager: ``ft.trace`` gives a graph that ``verify`` accepts and that evaluates to the
  eager result; the graph survives a JSON round trip.
* gradients: ``check_grads`` (reverse mode) at the row's order, with the default tolerances
  in float64 and check_grads' looser float32 ones in float32; ``ft.grad`` returns gradients
  with the primal's dtype; piecewise-constant rows (order 0) have an exactly zero gradient.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from op_cases import CASES, COVERED_PROTOCOLS, OpCase

import functrace as ft
import functrace.numpy as fnp
from functrace import tree_util
from functrace.test_util import check_grads

pytestmark = pytest.mark.filterwarnings(   # numpy's own warning for fnp.cross of 2-vectors
    "ignore:Arrays of 2-dimensional vectors are deprecated:DeprecationWarning")

_SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
          "uint64": "u64",
          "bool": "b", "complex128": "c128", "complex64": "c64"}


def _dt_id(dt) -> str:
    return "-".join(_SHORT[d] for d in dt) if isinstance(dt, tuple) else _SHORT[dt]


def _params(kind, select=lambda c, dt: True):
    out = []
    for c in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=r) for k, r in c.xfail if k == kind]
        for dt in c.dtypes:
            if select(c, dt):
                out.append(pytest.param(c, dt, id=f"{c.name}-{_dt_id(dt)}", marks=marks))
    return out


def _fn(c: OpCase):
    return functools.partial(c.fn, **c.kwargs) if c.kwargs else c.fn


def _leaves(x):
    return tree_util.tree_leaves(x)


def _is_float_dtype(dt) -> bool:
    return np.dtype(dt).kind == "f"


def _float_args(c, dt):
    return [i for i, d in enumerate(c.arg_dtypes(dt)) if _is_float_dtype(d)]


def _eager(c, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _fn(c)(*args)


# --------------------------------------------------------------------------------------------
# the table itself
# --------------------------------------------------------------------------------------------

_NOT_FUNCTIONS = {"AtIndexer", "linalg", "fft", "annotations"}


def test_table_covers_every_public_fnp_function():
    public = {n for n in dir(fnp) if not n.startswith("_")}
    functions = {n for n in public - _NOT_FUNCTIONS
                 if callable(getattr(fnp, n)) and not isinstance(getattr(fnp, n), type)
                 and not (isinstance(getattr(fnp, n), np.ufunc))}
    functions -= {"result_type", "promote_types", "can_cast", "finfo", "iinfo", "issubdtype",
                  "seterr", "geterr"}     # numpy's own (its floating-point error state): no arrays
    functions |= {f"fft.{n}" for n in fnp.fft.__all__}     # rows name fnp.fft's as "fft.<f>"
    import functrace.scipy.signal as fsig
    functions |= {f"scipy.signal.{n}" for n in fsig.__all__}
    # fnp.linalg's and functrace.scipy.linalg's functions: rows "linalg.<f>", "scipy.linalg.<f>"
    import functrace.scipy.linalg as fsl
    functions |= {f"linalg.{n}" for n in fnp.linalg.__all__
                  if not isinstance(getattr(fnp.linalg, n), type)}
    functions |= {f"scipy.linalg.{n}" for n in fsl.__all__}
    # index expressions (fnp.r_[...], fnp.c_[...]) are objects with __getitem__: rows too
    functions |= {n for n in public if type(getattr(fnp, n)).__name__ == "_Concatenator"}
    covered = {c.covers for c in CASES}
    assert not functions - covered, f"fnp functions with no OpCase row: {functions - covered}"
    covered = {n for n in covered if not n.startswith("scipy.")}   # tests/ops/test_scipy.py
    unknown = covered - functions - set(COVERED_PROTOCOLS)
    assert not unknown, f"rows naming no fnp function: {unknown}"


def test_table_names_are_unique_and_have_references():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    for c in CASES:
        c.reference()   # raises LookupError when a row has no numpy reference


# --------------------------------------------------------------------------------------------
# eager == numpy
# --------------------------------------------------------------------------------------------

def _assert_plain(x, what):
    assert type(x) is np.ndarray or isinstance(x, np.generic), \
        f"{what}: eager result is a {type(x).__name__}, not a plain numpy value"


def _compare_exact(got, want, what, exact=True):
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, numpy gives {len(wl)}"
    assert type(got) is type(want) or not isinstance(want, list | tuple), \
        f"{what}: output container {type(got).__name__}, numpy gives {type(want).__name__}"
    for g, w in zip(gl, wl, strict=True):
        _assert_plain(g, what)
        w = np.asarray(w)
        assert np.asarray(g).dtype == w.dtype, f"{what}: dtype {np.asarray(g).dtype} != {w.dtype}"
        assert np.shape(g) == w.shape, f"{what}: shape {np.shape(g)} != {w.shape}"
        if exact:
            np.testing.assert_array_equal(g, w, err_msg=what, strict=True)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6 if w.dtype == np.float32 else 1e-13,
                                       atol=0, err_msg=what)


@pytest.mark.parametrize("c, dt", _params("eager"))
def test_eager_matches_numpy(c: OpCase, dt):
    args = c.make_args(dt)
    got = _eager(c, args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = c.reference()(*args, **c.kwargs)
    _compare_exact(got, want, c.name, c.exact)


# --------------------------------------------------------------------------------------------
# traced == eager, and the JSON round trip
# --------------------------------------------------------------------------------------------

def _rtol(c, dt_out):
    if c.trace_rtol is not None:
        return c.trace_rtol
    return {np.dtype("float16"): 1e-3, np.dtype("float32"): 1e-5,
            np.dtype("complex64"): 1e-5}.get(np.dtype(dt_out), 1e-12)


def _compare_close(got, want, c, what):
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs, eager gives {len(wl)}"
    for g, w in zip(gl, wl, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != eager {w.dtype}"
        assert g.shape == w.shape, f"{what}: shape {g.shape} != eager {w.shape}"
        if w.dtype.kind in "fc":
            rtol = _rtol(c, w.dtype)
            scale = np.nanmax(np.abs(w), initial=1.0)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def _trace(c, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ft.trace(_fn(c))(*args)


@pytest.mark.parametrize("c, dt", _params("traced"))
def test_traced_matches_eager(c: OpCase, dt):
    args = c.make_args(dt)
    want = _eager(c, args)
    sym = _trace(c, args)
    ft.verify(sym.graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = sym(*args)
    _compare_close(got, want, c, f"{c.name} traced")


@pytest.mark.parametrize("c, dt", _params("json"))
def test_json_round_trip(c: OpCase, dt):
    args = c.make_args(dt)
    sym = _trace(c, args)
    back = ft.Symbol.from_json(sym.to_json())
    assert back == sym
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a, b = sym(*args), back(*args)
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------------------------

def _loss_and_args(c: OpCase, dt, wdtype=None):
    """A scalar function of the row's float arguments: sum(fn(...) * W) over every output."""
    args = c.make_args(dt)
    fidx = _float_args(c, dt)
    outs = _leaves(_eager(c, args))
    rng = np.random.default_rng(1234)
    weights = []
    for o in outs:
        o = np.asarray(o)
        wdt = o.dtype if o.dtype.kind == "f" else (wdtype or np.dtype(c.arg_dtypes(dt)[fidx[0]]))
        weights.append(rng.standard_normal(o.shape).astype(wdt))

    def loss(*fargs):
        full = list(args)
        for i, a in zip(fidx, fargs, strict=True):
            full[i] = a
        total = None
        for o, w in zip(_leaves(_fn(c)(*full)), weights, strict=True):
            if np.dtype(o.dtype) != w.dtype:
                o = fnp.asarray(o, dtype=w.dtype)
            term = fnp.sum(o * w)
            total = term if total is None else total + term
        return total

    return loss, [args[i] for i in fidx]


def _has_float(c, dt):
    return c.order is not None and bool(_float_args(c, dt))


def _check_grad_dtypes(loss, fargs, zero=False):
    grads = ft.grad(loss, argnums=tuple(range(len(fargs))))(*fargs)
    for g, a in zip(grads, fargs, strict=True):
        assert type(g) is np.ndarray or isinstance(g, np.generic)
        assert np.asarray(g).dtype == a.dtype, f"gradient dtype {np.asarray(g).dtype} for a " \
                                               f"{a.dtype} argument"
        assert np.shape(g) == a.shape
        if zero:
            assert not np.any(np.asarray(g)), f"piecewise-constant function: gradient {g}"


@pytest.mark.parametrize("c, dt", _params(
    "grad", lambda c, dt: _has_float(c, dt)
    and all(np.dtype(d) != np.float32 for d in c.arg_dtypes(dt))))
def test_grads_float64(c: OpCase, dt):
    loss, fargs = _loss_and_args(c, dt)
    if c.order == 0:
        _check_grad_dtypes(loss, fargs, zero=True)
        return
    tol = dict(atol=c.atol, rtol=c.rtol)
    if _low_precision_output(c, dt):
        # float64 inputs, float32 result (dtype=, astype): finite differences are only as
        # good as float32, so use check_grads' float32 step and tolerances
        tol = dict(eps=3e-3, atol=3e-2, rtol=3e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check_grads(loss, fargs, order=c.order, modes=("rev",), **tol)
    _check_grad_dtypes(loss, fargs)


def _low_precision_output(c, dt):
    outs = _leaves(_eager(c, c.make_args(dt)))
    return any(np.asarray(o).dtype.kind == "f" and np.asarray(o).dtype.itemsize < 8
               for o in outs)


@pytest.mark.parametrize("c, dt", _params(
    "grad32", lambda c, dt: _has_float(c, dt)
    and any(np.dtype(d) == np.float32 for d in c.arg_dtypes(dt))))
def test_grads_float32(c: OpCase, dt):
    loss, fargs = _loss_and_args(c, dt)
    if c.order == 0:
        _check_grad_dtypes(loss, fargs, zero=True)
        return
    atol, rtol = c.tol32 or (None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check_grads(loss, fargs, order=c.order, modes=("rev",), atol=atol, rtol=rtol)
    _check_grad_dtypes(loss, fargs)


def test_argmax_gradient_is_zero_not_an_error():
    """argmax/argsort outputs are integers: piecewise constant, so the gradient through them is
    zero (docs/numerics.md). No op with a float output lacks a rule, so no row expects
    MissingRuleError."""
    from functrace.core import registry
    for op in registry.values():
        if not op.differentiable:
            assert op.vjp is None, op.name
    x = np.array([0.3, 2.0, -1.0])
    g = ft.grad(lambda x: fnp.argmax(x) * 1.0 + fnp.argsort(x)[0] * fnp.sum(x * 0.0))(x)
    assert g.dtype == x.dtype
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0])
    # the index still routes the gradient of what it selects
    g = ft.grad(lambda x: x[fnp.argmax(x)] * 3.0)(x)
    np.testing.assert_array_equal(g, [0.0, 3.0, 0.0])


def test_tie_conventions():
    """At ties the even split of docs/numerics.md (finite differences cannot check a kink)."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    g = ft.grad(lambda x: fnp.sum(fnp.max(x, axis=1) * np.array([1.0, 3.0])))(x)
    np.testing.assert_array_equal(g, [[0.0, 0.5, 0.5], [1.0, 1.0, 1.0]])
    g = ft.grad(lambda x, y: fnp.sum(fnp.maximum(x, y) * 4.0), argnums=(0, 1))(
        np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    np.testing.assert_array_equal(g[0], [2.0, 0.0])
    np.testing.assert_array_equal(g[1], [2.0, 4.0])
    g = ft.grad(lambda x: fnp.sum(fnp.abs(x)))(np.array([0.0, -2.0]))
    np.testing.assert_array_equal(g, [0.0, -1.0])
    g = ft.grad(lambda x: fnp.sum(fnp.clip(x, -1.0, 1.0)))(np.array([-1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g, [1.0, 1.0, 0.0])


def test_missing_rule_is_a_clear_error(monkeypatch):
    """An op without a vjp rule (or marked non-differentiable) on the gradient path is a
    MissingRuleError naming the op and the user's line, never a silent zero gradient."""
    from functrace.ops import elementwise
    monkeypatch.setattr(elementwise.sin_p, "vjp", None)

    def f(x):
        return fnp.sum(fnp.sin(x) * 2.0)   # the line the error must point to

    with pytest.raises(ft.MissingRuleError, match=r"sin.*test_op_table\.py:\d+") as info:
        ft.grad(f)(np.ones(3))
    assert "fnp.sin(x)" in str(info.value)
    monkeypatch.setattr(elementwise.sin_p, "differentiable", False)
    monkeypatch.setattr(elementwise.sin_p, "vjp", elementwise.cos_p.vjp)
    with pytest.raises(ft.MissingRuleError, match="not differentiable"):
        ft.grad(lambda x: fnp.sum(fnp.sin(x)))(np.ones(3))
