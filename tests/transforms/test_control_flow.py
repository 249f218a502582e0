"""Structured control flow: every construct against the equivalent Python loop, finite
differences to second order (both modes), vmap against a loop over the batch, jit on the
CPU executor and the reference interpreter, printing and JSON."""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.test_util import check_grads

RNG = np.random.default_rng(0)
W = RNG.normal(size=(3, 3)) * 0.5
XS = RNG.normal(size=(6, 3))


def rnn_scan(h0, w, xs):
    def step(h, x):
        h = fnp.tanh(w @ h + x)
        return h, fnp.sum(h * h)
    h, ys = ft.scan(step, h0, xs)
    return fnp.sum(h) + fnp.sum(ys * ys)


def rnn_py(h0, w, xs):
    h, ys = h0, []
    for t in range(xs.shape[0]):
        h = fnp.tanh(w @ h + xs[t])
        ys.append(fnp.sum(h * h))
    return fnp.sum(h) + fnp.sum(fnp.stack(ys) ** 2)


def rev_scan(h0, w, xs):
    h, ys = ft.scan(lambda h, x: (fnp.sin(h * x) + w[0], h * x), h0, xs, reverse=True)
    return fnp.sum(h) + fnp.sum(ys * fnp.arange(6.0)[:, None])


def rev_py(h0, w, xs):
    h, ys = h0, [None] * 6
    for t in reversed(range(6)):
        ys[t] = h * xs[t]
        h = fnp.sin(h * xs[t]) + w[0]
    return fnp.sum(h) + fnp.sum(fnp.stack(ys) * fnp.arange(6.0)[:, None])


def pytree_scan(h0, w, xs):
    def step(c, x):
        a, b = c["a"], c["b"]
        return {"a": a * fnp.cos(x["u"]), "b": b + a}, (a, fnp.exp(-x["u"] * b))
    c, (ya, yb) = ft.scan(step, {"a": h0, "b": h0 * 0.5}, {"u": xs})
    return fnp.sum(c["a"] * c["b"]) + fnp.sum(ya) + fnp.sum(yb * w[1])


def pytree_py(h0, w, xs):
    a, b, ya, yb = h0, h0 * 0.5, [], []
    for t in range(6):
        ya.append(a)
        yb.append(fnp.exp(-xs[t] * b))
        a, b = a * fnp.cos(xs[t]), b + a
    return fnp.sum(a * b) + fnp.sum(fnp.stack(ya)) + fnp.sum(fnp.stack(yb) * w[1])


def fori_static(h0, w, xs):
    # a closed-over numpy array indexed by the loop counter: fnp.take (numpy's own
    # indexing cannot take a traced index)
    return fnp.sum(ft.fori_loop(1, 5, lambda i, h: fnp.tanh(w @ h) * i + fnp.take(xs, i, 0),
                                h0))


def fori_py(h0, w, xs):
    h = h0
    for i in range(1, 5):
        h = fnp.tanh(w @ h) * i + xs[i]
    return fnp.sum(h)


def while_fn(h0, w, xs):
    def cond(c):
        return c[0] < 3.0

    def body(c):
        s, h = c
        h = fnp.sin(w @ h) + h
        return s + fnp.sum(h * h) * 0.1 + 0.25, h
    s, h = ft.while_loop(cond, body, (fnp.sum(h0 * 0.0), h0))
    return s + fnp.sum(h)


def while_py(h0, w, xs):
    s, h = fnp.sum(h0 * 0.0), h0
    while s < 3.0:
        h = fnp.sin(w @ h) + h
        s = s + fnp.sum(h * h) * 0.1 + 0.25
    return s + fnp.sum(h)


def cond_fn(h0, w, xs):
    return ft.cond(fnp.sum(h0) > 0, lambda a, b: fnp.sum(fnp.sin(a) * b),
                   lambda a, b: fnp.sum(a * a) - b[0, 0], h0, w)


def cond_py(h0, w, xs):
    return fnp.sum(fnp.sin(h0) * w) if fnp.sum(h0) > 0 else fnp.sum(h0 * h0) - w[0, 0]


def switch_fn(h0, w, xs):
    i = fnp.argmax(h0)
    return fnp.sum(ft.switch(i, [lambda h: h * 2.0, fnp.sin, lambda h: w @ h], h0))


def switch_py(h0, w, xs):
    i = int(np.argmax(np.asarray(ft.stop_gradient(h0))))
    return fnp.sum([lambda h: h * 2.0, fnp.sin, lambda h: w @ h][i](h0))


def map_fn(h0, w, xs):
    return fnp.sum(ft.map(lambda x: fnp.tanh(w @ x + h0), xs) ** 2)


def map_py(h0, w, xs):
    return fnp.sum(fnp.stack([fnp.tanh(w @ xs[t] + h0) for t in range(6)]) ** 2)


def nested(h0, w, xs):
    def outer(h, x):
        inner = ft.fori_loop(0, 3, lambda i, g: fnp.sin(g) * x + h, h)
        return ft.cond(fnp.sum(inner) > 0, lambda v: v * 0.5, fnp.cos, inner), inner[0]
    h, ys = ft.scan(outer, h0, xs)
    return fnp.sum(h) + fnp.sum(ys)


def nested_py(h0, w, xs):
    h, ys = h0, []
    for t in range(6):
        g = h
        for _ in range(3):
            g = fnp.sin(g) * xs[t] + h
        h = g * 0.5 if fnp.sum(g) > 0 else fnp.cos(g)
        ys.append(g[0])
    return fnp.sum(h) + fnp.sum(fnp.stack(ys))


CASES = {
    "scan_rnn": (rnn_scan, rnn_py),
    "scan_reverse": (rev_scan, rev_py),
    "scan_pytree": (pytree_scan, pytree_py),
    "fori_static": (fori_static, fori_py),
    "while": (while_fn, while_py),
    "cond": (cond_fn, cond_py),
    "switch": (switch_fn, switch_py),
    "map": (map_fn, map_py),
    "nested": (nested, nested_py),
}
H0S = [np.array([0.3, -0.2, 0.5]), np.array([-0.4, -0.1, 0.2])]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("k", [0, 1])
def test_value_and_grad_match_python_loop(name, k):
    f, ref = CASES[name]
    args = (H0S[k], W, XS)
    np.testing.assert_allclose(f(*args), ref(*args), rtol=1e-12, atol=1e-12)
    for argnums in (0, 1, 2):
        np.testing.assert_allclose(ft.grad(f, argnums)(*args), ft.grad(ref, argnums)(*args),
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_order_against_finite_differences(name):
    f, _ = CASES[name]
    check_grads(f, (H0S[0], W, XS), order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_matches_python_loop(name):
    f, ref = CASES[name]
    np.testing.assert_allclose(ft.hessian(f)(H0S[0], W, XS), ft.hessian(ref)(H0S[0], W, XS),
                               rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_jit_matches_eager(name, backend):
    f, ref = CASES[name]
    jf = ft.jit(f, backend=backend)
    jg = ft.jit(ft.value_and_grad(f, argnums=(0, 1, 2)), backend=backend)
    for h0 in H0S:
        np.testing.assert_allclose(jf(h0, W, XS), ref(h0, W, XS), rtol=1e-12, atol=1e-12)
        v, gs = jg(h0, W, XS)
        want = ft.grad(ref, argnums=(0, 1, 2))(h0, W, XS)
        for a, b in zip(gs, want):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_matches_loop_over_batch(name):
    f, ref = CASES[name]
    h0s = RNG.normal(size=(4, 3))
    got = ft.vmap(f, in_axes=(0, None, None))(h0s, W, XS)
    want = np.array([ref(h, W, XS) for h in h0s])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    xss = RNG.normal(size=(6, 3, 2))
    got = ft.vmap(f, in_axes=(None, None, 2))(H0S[0], W, xss)
    want = np.array([ref(H0S[0], W, xss[..., b]) for b in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    gv = ft.vmap(ft.grad(f), in_axes=(0, None, None))(h0s, W, XS)
    gw = np.array([ft.grad(ref)(h, W, XS) for h in h0s])
    np.testing.assert_allclose(gv, gw, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbol_json_round_trip(name):
    f, ref = CASES[name]
    sym = ft.trace(ft.grad(f, argnums=1))(H0S[0], W, XS)
    text = str(sym)
    assert "loop(" in text or "cond(" in text or "while(" in text
    back = ft.Symbol.from_json(sym.to_json())
    for h0 in H0S:
        np.testing.assert_allclose(back(h0, W, XS), ft.grad(ref, 1)(h0, W, XS), rtol=1e-10)


def test_while_trip_count_depends_on_value():
    f = ft.jit(ft.value_and_grad(lambda x: ft.while_loop(lambda v: v > 1.0,
                                                         lambda v: v * 0.5, x)))
    for x, trips in [(10.0, 4), (3.0, 2), (0.5, 0), (1000.0, 10)]:
        v, g = f(x)
        assert v == pytest.approx(x * 0.5 ** trips) and g == pytest.approx(0.5 ** trips)


def test_batched_while_freezes_finished_lanes():
    f = ft.vmap(lambda x: ft.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x))
    xs = np.array([10.0, 3.0, 0.5, 1000.0])
    np.testing.assert_allclose(f(xs), [0.625, 0.75, 0.5, 1000 * 0.5 ** 10])
    g = ft.vmap(ft.grad(lambda x: ft.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x)))
    np.testing.assert_allclose(g(xs), [0.5 ** 4, 0.25, 1.0, 0.5 ** 10])
    h = ft.grad(lambda xs: fnp.sum(f(xs) ** 2))
    np.testing.assert_allclose(h(xs), 2 * f(xs) * np.array([0.5 ** 4, 0.25, 1.0, 0.5 ** 10]))


def test_fori_loop_with_traced_bounds_is_a_while_loop():
    def f(x, n):
        return ft.fori_loop(0, n, lambda i, v: v * x + i, 1.0)
    jf = ft.jit(ft.grad(f))
    for n in (0, 1, 5):
        want = ft.grad(lambda x: _py_fori(x, n))(2.0)
        assert jf(2.0, np.int64(n)) == pytest.approx(want)


def _py_fori(x, n):
    v = 1.0
    for i in range(n):
        v = v * x + i
    return v


def test_scan_length_and_no_xs():
    c, ys = ft.scan(lambda c, _: (c + 1.0, c * 2.0), 0.0, None, length=4)
    assert c == 4.0
    np.testing.assert_array_equal(ys, [0.0, 2.0, 4.0, 6.0])


def test_cond_with_concrete_predicate_and_closures():
    w = np.array([1.0, 2.0])
    assert ft.cond(True, lambda: fnp.sum(w), lambda: 0.0 * fnp.sum(w)) == 3.0
    g = ft.grad(lambda a: ft.cond(a[0] > 0, lambda: fnp.sum(a * w), lambda: fnp.sum(a)))
    np.testing.assert_array_equal(g(np.array([1.0, 1.0])), w)
    np.testing.assert_array_equal(g(np.array([-1.0, 1.0])), [1.0, 1.0])


def test_switch_clamps_the_index():
    br = [lambda x: x + 1.0, lambda x: x * 10.0]
    f = ft.jit(lambda i, x: ft.switch(i, br, x))
    assert f(np.int32(-5), 1.0) == 2.0 and f(np.int32(7), 1.0) == 10.0


def test_errors_name_the_problem():
    with pytest.raises(ft.FunctraceTypeError, match="changes the type of the carry"):
        ft.scan(lambda c, x: (c * x, x), np.float32(1.0), np.ones(3))
    with pytest.raises(ft.FunctraceTypeError, match="same shapes and dtypes"):
        ft.jit(lambda x: ft.cond(x > 0, lambda x: x, lambda x: fnp.stack([x, x]), x))(1.0)
    with pytest.raises(ft.FunctraceTypeError, match="boolean scalar"):
        ft.while_loop(lambda v: v, lambda v: v - 1.0, 3.0)
    with pytest.raises(ft.ConcretizationError):
        ft.scan(lambda c, x: (c if c > 0 else -c, x), 1.0, np.ones(3))


def test_fori_loop_type_error_names_body_fun_not_internals():
    with pytest.raises(ft.FunctraceTypeError, match=r"fori_loop: body_fun .* the carry"):
        ft.fori_loop(0, 3, lambda i, v: v * np.ones((), np.float64), np.float32(1.0))


def test_numpy_array_indexed_by_loop_counter_suggests_take():
    xs = np.arange(3.0)
    with pytest.raises(ft.ConcretizationError, match=r"fnp\.take"):
        ft.fori_loop(0, 3, lambda i, v: v + xs[i], 0.0)
    assert ft.fori_loop(0, 3, lambda i, v: v + fnp.take(xs, i, 0), 0.0) == 3.0


@pytest.mark.parametrize("ck", [False, True])
def test_compiled_scan_gradient_runs_the_forward_loop_once(ck):
    """The primal loop and the reverse rule's forward-with-residuals loop are twins: the
    compiled gradient keeps one (and a checkpointed body compiles inline, stacking only the
    carry: the rows of xs are read again)."""
    rng = np.random.default_rng(1)
    w, xs = rng.normal(0, 0.3, (4, 4)), rng.normal(size=(30, 4))

    def loss(w, xs):
        def step(h, x):
            return fnp.tanh(w @ h + x), None
        h, _ = ft.scan(ft.checkpoint(step) if ck else step, fnp.zeros(4), xs)
        return fnp.sum(h * h)
    g = ft.jit(ft.grad(loss), eager=True)
    np.testing.assert_allclose(g(w, xs), ft.grad(loss)(w, xs), rtol=1e-12)
    src = g.lower(w, xs).source
    assert src.count("# loop:") == 2, src
    assert "checkpoint" not in src.split("def driver")[1]


@pytest.mark.parametrize("kind", ["while", "scan", "cond"])
def test_a_value_used_only_in_comparisons_gets_no_cotangent(kind):
    """As in the Python loop: ``p`` reaches the result only through a comparison, so it gets
    no cotangent at all (a zero one times exp's infinite derivative would be NaN)."""
    w = np.array([np.inf, 2.0])

    def f(x, w):
        p = fnp.exp(w)
        k = fnp.where(p[0] > 0, 2.0, 3.0)
        if kind == "while":
            return ft.while_loop(lambda c: c < 3.0, lambda c: c * k, x)
        if kind == "scan":
            return ft.scan(lambda c, r: (c * fnp.where(p[0] > 0, 2.0, 3.0) + r, None), x,
                           np.ones(3))[0]
        return ft.cond(x > 0, lambda x, p: x * fnp.where(p[1] > 0, 2.0, 3.0),
                       lambda x, p: -x, x, p)
    for g in (ft.grad(f, argnums=1), ft.jit(ft.grad(f, argnums=1))):
        np.testing.assert_array_equal(g(0.5, w), [0.0, 0.0])


def test_compiled_loop_reuses_scratch_but_never_an_answer():
    """The compiled loop's fast paths against the interpreter: rows read in reverse order are
    indexed in place (scan reverse=True, and the gradient's reverse loop), scratch buffers are
    reused from call to call through a free list, and concurrent calls (threads: the loop
    releases the GIL) each get their own. A first answer survives later calls."""
    import threading

    def loss(w, xs):
        h, ys = ft.scan(lambda h, x: (fnp.tanh(w @ h + x), h * x), fnp.zeros(3), xs,
                        reverse=True)
        return fnp.sum(h * h) + fnp.sum(ys)

    f = ft.jit(ft.value_and_grad(loss, argnums=(0, 1)), eager=True)
    rng = np.random.default_rng(11)
    cases = [(rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(7, 3))) for _ in range(6)]
    src = f.lower(*cases[0]).source
    assert src.count("def loop") == 2 and "T - 1 - j" in src     # both loops compiled
    want = [ft.value_and_grad(loss, argnums=(0, 1))(w, xs) for w, xs in cases]
    first = f(*cases[0])
    kept = [np.array(a) for a in ft.tree_util.tree_leaves(first)]
    got = [f(w, xs) for w, xs in cases]
    for a, b in zip(ft.tree_util.tree_leaves(first), kept):
        np.testing.assert_array_equal(a, b)          # not overwritten by later calls
    out = [None] * len(cases)

    def run(i):
        for _ in range(20):
            out[i] = f(*cases[i])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, o, w in zip(got, out, want):
        for a, b, c in zip(*(ft.tree_util.tree_leaves(t) for t in (g, o, w))):
            np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_loop_calls_vecmath_and_views_buffers_bit_for_bit(dtype):
    """A compiled loop calls the vecmath functions (``vecmath_calls``: compiled once, cached,
    not inlined at numba-IR level) and views its flat buffers with ``views.shaped`` (not
    numba's reshape): its results equal, bit for bit, those of the same trips unrolled into
    ordinary kernels (inlined vecmath, numpy-shaped operands), in both float types."""
    rng = np.random.default_rng(5)
    m = rng.normal(size=(2, 3)).astype(dtype)
    xs = rng.normal(size=(3, 2, 3)).astype(dtype)
    h0 = rng.normal(size=(2, 3)).astype(dtype)

    def step(c, x):
        c = fnp.tanh(c * m + x) + fnp.exp(-c * c) * fnp.sin(c) + fnp.log1p(c * c)
        return c, fnp.sum(c * m, axis=1)

    def looped(h, xs):
        return ft.scan(step, h, xs)

    def unrolled(h, xs):
        ys = []
        for t in range(xs.shape[0]):
            h, y = step(h, xs[t])
            ys.append(y)
        return h, fnp.stack(ys)
    jl, ju = ft.jit(looped, eager=True), ft.jit(unrolled, eager=True)
    src = jl.lower(h0, xs).source
    assert "# loop:" in src and "vc.vtanh" in src and "av.shaped(" in src, src
    assert ".reshape(" not in src.split("def loop")[1].split("# ----")[0]
    # a huge sin argument (the kernels' libm branch: docs/executor.md, "sin, cos, tan")
    big = h0.copy()
    big[0, 0] = 3e7
    for h in (h0, big):
        for a, b in zip(jl(h, xs), ju(h, xs)):
            assert a.dtype == dtype
            np.testing.assert_array_equal(a, b)
    g = ft.jit(ft.grad(lambda h, xs: fnp.sum(looped(h, xs)[1])), eager=True)
    want = ft.grad(lambda h, xs: fnp.sum(unrolled(h, xs)[1]))(h0, xs)
    np.testing.assert_allclose(g(h0, xs), want, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_gradient_of_a_map_that_no_input_reaches_differentiably():
    """A loop with no float carry whose results depend on no input through differentiable
    ops (``sign``, ``floor``) gives no cotangent: its reverse rule binds no backward loop (a
    loop with no results crashed the optimizer; found by the fuzzer's ``ft.map`` steps)."""
    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)

    def f(x):
        return fnp.sum(ft.map(lambda r: fnp.sign(x) * fnp.floor(r), x))
    for g in (ft.grad(f), ft.jit(ft.grad(f), backend="numpy"), ft.jit(ft.grad(f))):
        np.testing.assert_array_equal(g(x), np.zeros_like(x))


def test_a_loop_body_that_cannot_compile_is_logged_with_the_op_and_line(caplog):
    """A scan/fori body the compiled loop cannot hold (a gather, a nested cond) runs as a
    Python loop over kernels: the stdlib logger ``functrace`` says so at INFO, naming the op
    that forced it and the user's line; a body that compiles logs nothing of the kind."""
    import logging
    xs = np.arange(5.0)

    def gather(x):      # (at i itself it would be a per-trip read, which compiles)
        return ft.fori_loop(0, 4, lambda i, acc: acc + fnp.take(xs, i + 1, 0) * x, 0.0)

    def nested(x):
        return ft.scan(lambda c, r: (ft.cond(c > 0, lambda: c * r, lambda: c - r), c), x,
                       xs)[0]

    def fine(x):
        return ft.scan(lambda c, r: (fnp.tanh(c * r), c), x, xs)[0]
    with caplog.at_level(logging.INFO, logger="functrace"):
        assert ft.jit(gather)(2.0) == 20.0
        assert ft.jit(nested)(1.0) == nested(1.0)
        assert np.isclose(ft.jit(fine)(0.5), fine(0.5))
    msgs = [r.getMessage() for r in caplog.records if "not as one compiled loop" in r.getMessage()]
    assert len(msgs) == 2, msgs
    assert "gather (" in msgs[0] and "test_control_flow.py:" in msgs[0], msgs[0]
    assert "fnp.take(xs, i + 1, 0)" in msgs[0] and "(4 trips)" in msgs[0], msgs[0]
    assert "cond (" in msgs[1] and "(5 trips)" in msgs[1], msgs[1]


def test_eager_scan_gradient_runs_the_forward_loop_once():
    """Un-jitted ``grad`` of a scan computes the forward loop once: the tape runs the loop
    with its residual stacks (``loop_p.vjp_forward``) and the reverse rule reads them, rather
    than running the forward pass again. Counted with an op whose numpy impl counts its
    calls (one per trip); values against the compiled graph on the interpreter. When an
    output gets no cotangent the rule's plan differs and it recomputes (twice, still right)."""
    from functrace.extend import define_elementwise
    calls = [0]

    def impl(x):
        calls[0] += 1
        return x * x
    sq = define_elementwise("test_cf_counted_square", impl, scalar=lambda x: x * x,
                            derivative=lambda x, y: 2.0 * x)

    def loss(w, xs, use_ys=True):
        h, ys = ft.scan(lambda h, x: (fnp.tanh(w * sq(h) + x), h * x), fnp.zeros(3), xs)
        return fnp.sum(h) + (fnp.sum(ys * ys) if use_ys else 0.0)
    rng = np.random.default_rng(4)
    w, xs = 0.7, rng.normal(size=(9, 3))
    for use_ys, passes in ((True, 1), (False, 2)):
        def f(w, xs, use_ys=use_ys):
            return loss(w, xs, use_ys)
        ft.grad(f, argnums=(0, 1))(w, xs)         # first call: traces, plans
        calls[0] = 0
        got = ft.grad(f, argnums=(0, 1))(w, xs)
        assert calls[0] == passes * 9, (use_ys, calls[0])
        want = ft.jit(ft.grad(f, argnums=(0, 1)), backend="numpy")(w, xs)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    # higher order still composes: the tape over a tape records the loops as before
    np.testing.assert_allclose(ft.hessian(loss)(w, xs),
                               ft.jit(ft.hessian(loss), backend="numpy")(w, xs), rtol=1e-12)


@pytest.mark.parametrize("lo, hi, rows", [(0, 5, True), (1, 4, True), (-5, -1, True),
                                          (-3, 0, True), (-2, 2, False), (2, 2, False)])
def test_fori_rows_gathered_at_the_counter_are_per_trip_reads(lo, hi, rows):
    """``fnp.take(xs, i, 0)`` / ``ys[i]`` at a static fori_loop's counter become per-trip
    row reads (``passes.loops.counter_rows``), so the loop and its gradient compile as one
    numba loop each; indices that cross zero (numpy's wrap) or a loop with no trip keep the
    gather. Values and gradients against the Python loop, eager, jitted and on the
    interpreter, float64 and float32."""
    from functrace.core import Graph
    for dt in (np.float64, np.float32):
        xs = np.linspace(-1.0, 1.5, 10).reshape(5, 2).astype(dt)

        def f(x, ys):
            return ft.fori_loop(lo, hi, lambda i, acc: fnp.sin(acc * x + ys[i])
                                + fnp.take(xs, i, 0), fnp.zeros(2, dt))

        def f_py(x, ys):
            acc = np.zeros(2, dt)
            for i in range(lo, hi):
                acc = np.sin(acc * x + ys[i]) + xs[i]
            return acc

        def loss(x, ys):
            return fnp.sum(f(x, ys) ** 2)

        x, ys = dt(0.7), (xs[::-1] * 0.5).copy()
        tol = dict(rtol=1e-5, atol=1e-6) if dt == np.float32 else dict(rtol=1e-12,
                                                                         atol=1e-14)
        for fn in (ft.jit(f), ft.jit(f, backend="numpy")):    # (eager: ys[i] needs ys
            np.testing.assert_allclose(fn(x, ys), f_py(x, ys), **tol)     # traced)
        value, _ = ft.value_and_grad(loss, argnums=(0, 1))(x, ys)
        np.testing.assert_allclose(value, (f_py(x, ys) ** 2).sum(), **tol)
        eps = 1e-6
        fd = (f_py(0.7 + eps, ys.astype(np.float64)) ** 2).sum() - \
            (f_py(0.7 - eps, ys.astype(np.float64)) ** 2).sum()
        g = ft.grad(loss, argnums=(0, 1))
        want = g(x, ys)
        np.testing.assert_allclose(want[0], fd / (2 * eps), rtol=1e-3 if dt == np.float32
                                   else 1e-6, atol=1e-6)
        for gj in (ft.jit(g), ft.jit(g, backend="numpy")):
            for a, b in zip(gj(x, ys), want):
                np.testing.assert_allclose(a, b, **tol)
        sym = ft.trace(f)(x, ys)    # (traced: ys[i] records a gather)
        body = next(e.params["body"] for e in sym.nodes if e.op.name == "loop")
        assert isinstance(body, Graph)
        names = {e.op.name for e in body.eqns}
        assert ("gather" not in names) == rows, names
        src = ft.jit(g).lower(x, ys).source.split("def driver")[1]
        if rows:    # forward and gradient loops both compiled
            assert src.count("# loop:") == 2 and "= f" not in src.split("# loop:")[0], src
