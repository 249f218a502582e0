"""functrace.numpy as a namespace: broadcasting (hypothesis), coverage of numpy's names,
docstrings with examples, and the doctests of every module of the package.

The per-function behaviour (values, dtypes, gradients) is the OpCase table's job
(tests/support/op_cases.py, tests/ops/test_op_table.py).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import functrace as ft
import functrace.numpy as fnp
from functrace.numpy import _ufuncs

_BINARY = {
    "add": lambda m, x, y: m.add(x, y),
    "multiply": lambda m, x, y: m.multiply(x, y),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "arctan2": lambda m, x, y: m.arctan2(x, y),
    "less": lambda m, x, y: m.less(x, y),
    "where": lambda m, x, y: m.where(x > 0, x, y),
    "operators": lambda m, x, y: x * y - y / 2.0 + x,
}
_DIFFERENTIABLE = {"add", "multiply", "maximum", "arctan2", "where", "operators"}


@settings(max_examples=100, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                 min_side=0, max_side=3),
       name=st.sampled_from(sorted(_BINARY)),
       dtypes=st.sampled_from([("float64", "float64"), ("float32", "float32"),
                               ("float32", "int32"), ("int8", "float64"), ("int32", "int32")]),
       seed=st.integers(0, 2 ** 16))
def test_broadcasting_traced_eager_numpy(shapes, name, dtypes, seed):
    f = _BINARY[name]
    (xs, ys), out_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, xs).astype(dtypes[0])
    y = rng.uniform(0.5, 2.5, ys).astype(dtypes[1])   # positive: no 0/0 in arctan2
    want = f(np, x, y)
    eager = f(fnp, x, y)
    assert type(eager) is np.ndarray or isinstance(eager, np.generic)
    assert eager.dtype == want.dtype and eager.shape == want.shape == out_shape
    np.testing.assert_array_equal(eager, want)
    sym = ft.trace(lambda a, b: f(fnp, a, b))(x, y)
    ft.verify(sym.graph)
    got = sym(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = 1e-5 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    if name in _DIFFERENTIABLE and dtypes[0] == dtypes[1] and dtypes[0].startswith("float"):
        dtype = dtypes[0]
        # broadcasting is summed back: each gradient has its own argument's shape and dtype
        w = rng.standard_normal(out_shape).astype(dtype)
        gx, gy = ft.grad(lambda a, b: fnp.sum(f(fnp, a, b) * w), argnums=(0, 1))(x, y)
        assert gx.shape == xs and gy.shape == ys
        assert gx.dtype == x.dtype and gy.dtype == y.dtype
        if name == "add":
            axes_x = tuple(range(len(out_shape) - len(xs)))
            want_gx = np.sum(w, axis=axes_x)
            want_gx = np.sum(want_gx, axis=tuple(i for i, n in enumerate(xs) if n == 1),
                             keepdims=True) if xs else np.sum(w)
            np.testing.assert_allclose(gx, np.reshape(want_gx, xs), rtol=rtol, atol=rtol)


def test_numpy_functions_on_tracers_are_traced_or_refused():
    """np.sin(x) on a tracer records fnp.sin (a gradient flows); a numpy function without an
    fnp counterpart is a TypeError, never a silently constant result (a zero gradient)."""
    x = np.array([0.5, 1.0, 2.0])
    g = ft.grad(lambda x: np.sum(np.exp(x)) + np.mean(np.square(x)))(x)
    np.testing.assert_allclose(g, np.exp(x) + 2 * x / 3, rtol=1e-12)
    for bad in (lambda x: np.unwrap(x), lambda x: np.add.accumulate(x),
                lambda x: np.exp(x, out=np.empty(3))):
        with pytest.raises(TypeError, match="traced array"):
            ft.grad(lambda x: fnp.sum(bad(x)))(x)


_ALL_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16",
               "float32", "float64", "complex64", "complex128"]
_UNARY_NAMES = [*sorted(_ufuncs._UNARY), "sinc", "round", "nan_to_num", "real", "imag", "angle"]
_BINARY_NAMES = sorted(_ufuncs._BINARY)
# complex operands that functrace.numpy refuses (a TypeError naming the dtype), numpy accepts
_NO_COMPLEX = {"maximum", "minimum", "fmax", "fmin", "sinc"}


def _sample(dt, k=0):
    base = np.array([1, 2, 3]) + k
    kind = np.dtype(dt).kind
    if kind == "b":
        return np.array([True, False, True])
    if kind == "c":
        return (base * 0.7 + 0.3j).astype(dt)
    return (base * 0.7).astype(dt) if kind == "f" else base.astype(dt)


def _check_like_numpy(f, *args):
    """Traced ``f`` gives numpy's dtype and values, or both refuse; returns False when
    numpy itself rejects the operands."""
    with np.errstate(all="ignore"):
        try:
            want = f(*args)
        except (TypeError, ValueError, np.exceptions.DTypePromotionError):
            return False
        sym = ft.trace(f)(*[a for a in args if isinstance(a, np.ndarray)])
        got = sym(*[a for a in args if isinstance(a, np.ndarray)])
    assert got.dtype == want.dtype, f"traced dtype {got.dtype}, numpy {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=2e-3, equal_nan=True)
    return True


@pytest.mark.parametrize("name", _UNARY_NAMES + _BINARY_NAMES)
def test_dtype_matrix_matches_numpy(name):
    """Every elementwise function over every dtype (pair), and with weak Python scalars."""
    f = getattr(fnp, name)
    unary = name in _UNARY_NAMES
    combos = [(d,) for d in _ALL_DTYPES] if unary else \
        [(a, b) for a in _ALL_DTYPES for b in _ALL_DTYPES]
    for dts in combos:
        args = [_sample(d, k) for k, d in enumerate(dts)]
        if name in _NO_COMPLEX and any(np.dtype(d).kind == "c" for d in dts):
            with pytest.raises(TypeError, match="complex"):
                ft.trace(f)(*args)
            continue
        try:
            _check_like_numpy(f, *args)
        except AssertionError as e:
            raise AssertionError(f"fnp.{name}{dts}: {e}") from None
    if unary:
        return
    for d in _ALL_DTYPES:
        for sc in (2, 2.5, True, 1 + 1j):
            x = _sample(d)
            for first in (True, False):
                g = (lambda a, sc=sc: f(a, sc)) if first else (lambda a, sc=sc: f(sc, a))
                if name in _NO_COMPLEX and (np.dtype(d).kind == "c" or
                                            isinstance(sc, complex)):
                    continue
                try:
                    _check_like_numpy(g, x)
                except AssertionError as e:
                    raise AssertionError(f"fnp.{name} of {d} and {sc!r}: {e}") from None


def _public_names():
    return [n for n in dir(fnp) if not n.startswith("_")]


def test_exports_at_least_150_numpy_names():
    shared = [n for n in _public_names() if hasattr(np, n)]
    assert len(shared) >= 150, f"only {len(shared)} numpy names: {shared}"


def test_no_stray_public_names():
    # anything public that is not numpy's must be one of functrace's own additions
    extra = {n for n in _public_names() if not hasattr(np, n)}
    assert extra <= {"at", "AtIndexer", "AtArray", "logsumexp"}, extra


def test_every_public_callable_has_an_example():
    missing = []
    for n in _public_names():
        obj = getattr(fnp, n)
        if not callable(obj) or (isinstance(obj, type) and obj is getattr(np, n, None)):
            continue   # numpy's own dtype classes, re-exported as they are
        if obj is getattr(np, n, None):
            continue   # numpy's own functions (result_type, finfo, ...), documented there
        if ">>>" not in (obj.__doc__ or ""):
            missing.append(n)
    assert not missing, f"public fnp callables without a >>> example: {missing}"


def _fnp_modules():
    names = ["functrace.numpy"] + [f"functrace.numpy.{m.name}"
                                   for m in pkgutil.iter_modules(fnp.__path__)]
    return sorted(names)


@pytest.mark.parametrize("modname", _fnp_modules())
def test_doctests(modname):
    mod = importlib.import_module(modname)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                          verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} doctests failed in {modname}"
