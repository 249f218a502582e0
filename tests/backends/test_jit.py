"""``ft.jit``: caching per signature, static and donated arguments, errors, composition, the
lowered source, and every row of the OpCase table (values and gradients) under
``jit(backend="cpu")`` against the reference interpreter.

The table rows run in chunks: one jitted function per chunk returns every row's outputs, so
groups of different rows over one loop shape share kernels. Chunks of values are kept small
(30 rows): a chunk of 150 fuses into a few huge kernels, and LLVM's time grows faster than
their size (rows 0-149: 157 s in one chunk, 98 s in chunks of 30). The default run checks
each row in its first dtype; ``-m slow`` adds the other dtypes (float32 variants of float64
rows, mostly: the float32 kernels are also covered by test_numba_cpu and test_vecmath).
Tolerances: float64 rtol 1e-12 (scaled by the output's magnitude, as in
test_op_table), float32 rtol 1e-5; integers and booleans exactly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from backend_checks import kernel_cache_dir

import functrace as ft
import functrace.numpy as fnp
from functrace import tree_util

pytest.importorskip("numba")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-kernels") as d:
        yield d


def _loss(params, x, y):
    h = fnp.tanh(x @ params["w"] + params["b"])
    return fnp.mean((h - y) ** 2)


def _data(n=8):
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(5, 3)), "b": rng.normal(size=3)}
    return params, rng.normal(size=(n, 5)), rng.normal(size=(n, 3))


def test_value_and_grad_on_pytrees_matches_and_traces_once_per_signature():
    calls = []

    def loss(params, x, y):
        calls.append(1)
        return _loss(params, x, y)

    step = ft.jit(ft.value_and_grad(loss), eager=True)
    params, x, y = _data()
    want_l, want_g = ft.value_and_grad(_loss)(params, x, y)
    for _ in range(3):
        l, g = step(params, x, y)
    assert len(calls) == 1
    assert set(g) == {"w", "b"} and g["w"].dtype == np.float64
    np.testing.assert_allclose(l, want_l, rtol=1e-13)
    for k in g:
        np.testing.assert_allclose(g[k], want_g[k], rtol=1e-12, atol=1e-14)
    params2, x2, y2 = _data(n=11)          # a new shape: traced again
    step(params2, x2, y2)
    assert len(calls) == 2
    step(params, x.astype(np.float32), y)  # a new dtype: traced again
    assert len(calls) == 3


def test_static_argnums_and_kwargs():
    def f(x, n, scale=1.0):
        for _ in range(n):           # Python control flow on a static value
            x = fnp.sin(x) * scale
        return x

    jf = ft.jit(f, static_argnums=(1,), eager=True)
    x = np.linspace(0, 1, 5)
    np.testing.assert_allclose(jf(x, 3), f(x, 3), rtol=1e-14)
    np.testing.assert_allclose(jf(x, 2, scale=0.5), f(x, 2, scale=0.5), rtol=1e-14)
    assert len(jf._cache) == 2
    with pytest.raises(TypeError, match="hashable"):
        ft.jit(lambda x, s: x, static_argnums=1)(x, [1, 2])


def test_value_dependent_control_flow_on_abstract_args_is_a_concretization_error():
    def f(x):
        if fnp.sum(x) > 0:      # the offending line
            return x
        return -x

    with pytest.raises(ft.ConcretizationError, match="the offending line"):
        ft.jit(f).lower(ft.ShapeDtype((3,), np.float64))
    with pytest.raises(ft.ConcretizationError, match="the offending line"):
        ft.jit(f, max_variants=0)(np.ones(3))
    # with concrete arrays, one guarded variant per path (tests/api/test_jit_guards.py)
    np.testing.assert_array_equal(ft.jit(f)(-np.ones(3)), np.ones(3))


def test_retrace_when_a_global_or_closure_changes():
    scale = {"v": 2.0}
    k = np.array([1.0, 2.0])

    def f(x):
        return x * k * scale["v"]

    jf = ft.jit(f, backend="numpy")
    x = np.ones(2)
    np.testing.assert_allclose(jf(x), [2.0, 4.0])
    k[0] = 10.0                           # in-place change of a closed-over array
    np.testing.assert_allclose(jf(x), [20.0, 4.0])


def test_donate_argnums_reuses_the_input_buffer():
    f = ft.jit(lambda x, y: fnp.tanh(x * 2.0) + y, donate_argnums=0, eager=True)
    x, y = np.linspace(-1, 1, 100), np.ones(100)
    want = np.tanh(2 * x) + y
    out = f(x.copy(), y)
    x2 = x.copy()
    out = f(x2, y)
    np.testing.assert_allclose(out, want, rtol=1e-14)
    assert np.shares_memory(out, x2)


def test_lower_gives_graph_source_and_compile():
    f = ft.jit(lambda x: fnp.sum(fnp.exp(-x ** 2)))
    lo = f.lower(ft.ShapeDtype((100,), "float32"))
    assert lo.graph.in_avals == (ft.AVal((100,), "float32"),)
    src = lo.source
    assert "def kernel(" in src and "vm.vexp" in src and "def driver(" in src
    c = lo.compile()
    x = np.linspace(-1, 1, 100).astype(np.float32)
    out = c(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.sum(np.exp(-x ** 2)), rtol=1e-5)


def test_backends_and_errors():
    x = np.linspace(0, 1, 4)
    assert np.allclose(ft.jit(fnp.sin, backend="numpy")(x), np.sin(x))
    try:                      # the CUDA target needs a GPU; without one: a clear error
        out = ft.jit(fnp.sin, backend="cuda")(x)
        np.testing.assert_allclose(out.get() if hasattr(out, "get") else out, np.sin(x))
    except ft.BackendError as e:
        assert "cuda" in str(e).lower() or "gpu" in str(e).lower()
    with pytest.raises(ValueError, match="unknown backend"):
        ft.jit(fnp.sin, backend="tpu")


def test_jit_composes_with_transforms():
    f = ft.jit(lambda x: fnp.sum(fnp.sin(x) ** 2), eager=True)
    x = np.linspace(-1, 1, 6)
    want = 2 * np.sin(x) * np.cos(x)
    np.testing.assert_allclose(ft.grad(f)(x), want, rtol=1e-13)                 # grad(jit)
    np.testing.assert_allclose(ft.jit(ft.grad(f), eager=True)(x), want, rtol=1e-13)
    np.testing.assert_allclose(ft.jit(ft.jit(f))(x), np.sum(np.sin(x) ** 2), rtol=1e-14)
    h = ft.jit(ft.hessian(lambda x: fnp.sum(x ** 3)), eager=True)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(h, np.diag([6.0, 12.0]))


def test_decorator_forms_and_outputs():
    @ft.jit
    def f(x):
        return {"s": fnp.sum(x), "d": x * 2, "c": 3.0}

    @ft.jit(static_argnums=1)
    def g(x, n):
        return x * n

    out = f(np.ones(3))
    assert set(out) == {"s", "d", "c"} and float(out["c"]) == 3.0
    np.testing.assert_allclose(g(np.ones(2), 3), [3.0, 3.0])


def test_first_call_is_interpreted_then_compiled():
    f = ft.jit(lambda x: fnp.tanh(fnp.sin(x) * 3.0))
    x = np.linspace(-2, 2, 50)
    a = f(x)
    ex = next(iter(f._cache.values())).run
    b = f(x)
    assert ex.compiled
    np.testing.assert_allclose(a, b, rtol=1e-14)


# --------------------------------------------------------------------------------------------
# the OpCase table under jit
# --------------------------------------------------------------------------------------------

try:
    from op_cases import CASES
except ImportError:   # the table is being written
    CASES = []

#: rows per jitted function: values, gradients (see the module docstring)
CHUNK = {False: 30, True: 50}


def _fn(c):
    from op_cases import bound_fn
    return bound_fn(c)


def _rows(grad: bool):
    from op_cases import backend_rows
    return backend_rows(grad)


def _chunks(grad: bool):
    """The rows in chunks: each row's first dtype in the default run, the others marked
    ``slow``."""
    rows = _rows(grad)
    first = [r for r in rows if r[1] == r[0].dtypes[0]]
    rest = [r for r in rows if r[1] != r[0].dtypes[0]]
    n = CHUNK[grad]
    out = []
    for tag, part, marks in (("rows", first, ()), ("more", rest, (pytest.mark.slow,))):
        out += [pytest.param(part[i:i + n], id=f"{tag}{i}-{i + len(part[i:i + n]) - 1}",
                             marks=marks) for i in range(0, len(part), n)]
    return out


def _tol(dt):
    return {np.dtype("float32"): 1e-5}.get(np.dtype(dt), 1e-12)


def _compare(got, want, what, low=False):
    gl, wl = tree_util.tree_leaves(got), tree_util.tree_leaves(want)
    assert len(gl) == len(wl), what
    for g, w in zip(gl, wl, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"{what}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        if w.dtype.kind in "fc":
            rtol = _tol(np.float32 if low else w.dtype)
            scale = np.nanmax(np.abs(w), initial=1.0)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def _abstract_ok(fn, args):
    """Rows whose output shape depends on values (boolean masks, ...) cannot be jitted."""
    try:
        ft.jit(fn).lower(*args)
    except ft.ConcretizationError:
        return False
    return True


def _run_chunk(items, make):
    """items: (name, fn, args, low) per row (``low``: float32 math inside, so float32
    tolerances); returns failures after comparing jit vs interpreter."""
    fns, argss, wants, names, lows = [], [], [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn, args, low in items:
            if not _abstract_ok(fn, args):
                continue
            fns.append(fn)
            argss.append(args)
            names.append(name)
            lows.append(low)
            wants.append(make(fn, args))

    def all_rows(*argss_):
        return [fn(*a) for fn, a in zip(fns, argss_, strict=True)]

    jf = ft.jit(all_rows, eager=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = jf(*argss)
    ex = next(iter(jf._cache.values())).run
    prog = ex.lower()
    assert not ex.compile_failures, ex.compile_failures
    # groups the CPU target leaves to numpy by design (they still run, on numpy)
    allowed = ("logsumexp over more than the innermost loop axis",
               "softmax over more than the innermost loop axis")
    assert all(r in allowed for _, r in prog.unsupported), prog.unsupported
    failures = []
    for name, g, w, low in zip(names, got, wants, lows, strict=True):
        try:
            _compare(g, w, name, low)
        except AssertionError as e:
            failures.append(f"{name}: {str(e)[:300]}")
    return failures, len(prog.kernels)


@pytest.mark.parametrize("rows", _chunks(grad=False))
def test_op_table_values_under_jit(rows):
    items = [(f"{c.name}[{dt}]", _fn(c), c.make_args(dt), False) for c, dt in rows]

    def make(fn, args):
        return ft.trace(fn)(*args)(*args)        # the reference interpreter

    failures, _ = _run_chunk(items, make)
    assert not failures, "\n".join(failures)


def _grad_item(c, dt):
    from op_cases import weighted_grad
    g, fargs, low = weighted_grad(c, dt)
    return (f"grad {c.name}[{dt}]", g, fargs, low)


@pytest.mark.parametrize("rows", _chunks(grad=True))
def test_op_table_grads_under_jit(rows):
    items = [_grad_item(c, dt) for c, dt in rows]

    def make(fn, args):
        return fn(*args)                          # ft.grad on the interpreter

    failures, _ = _run_chunk(items, make)
    assert not failures, "\n".join(failures)
