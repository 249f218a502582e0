"""Loop rolling (passes.roll), the ``loop`` op, and compiled loops on the CPU (cpu_loop).

Every compiled result is compared with the reference interpreter on the unrolled graph, and
the RNN gradient with its hand-derived gradient."""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.backends import reference as numpy_ref
from functrace.backends.cpu import executor as numba_cpu
from functrace.backends.cpu import kernels as cpu_kernels
from functrace.backends.cpu import loop as cpu_loop
from functrace.core import AVal, verify
from functrace.errors import ShapeError
from functrace.graph_json import graph_from_json, graph_to_json
from functrace.ops import loop_p
from functrace.passes.roll import MIN_TRIPS, roll_loops


def rnn_loss(W, xs):
    h = fnp.zeros(W.shape[0], W.dtype)
    for t in range(xs.shape[0]):
        h = fnp.tanh(W @ h + xs[t])
    return fnp.sum(h * h)


def rnn_hand(W, xs):
    hs = [np.zeros(W.shape[0], W.dtype)]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(W @ hs[-1] + xs[t]))
    dW = np.zeros_like(W)
    dh = 2 * hs[-1]
    for t in range(xs.shape[0], 0, -1):
        dz = dh * (1 - hs[t] * hs[t])
        dW += np.outer(dz, hs[t - 1])
        dh = W.T @ dz
    return dW


def graph_of(f, *args):
    return ft.trace(f)(*args).graph


def loops_in(g):
    return [e for e in g.eqns if e.op is loop_p]


def program_of(g):
    return numba_cpu.Program(g)


@pytest.fixture
def rnn_args():
    rng = np.random.default_rng(0)
    return rng.normal(0, 0.3, (6, 6)), rng.normal(size=(30, 6))


# --------------------------------------------------------------------------------------------
# the pass, on the interpreter
# --------------------------------------------------------------------------------------------

def test_rnn_gradient_rolls_into_a_forward_and_a_backward_loop(rnn_args):
    W, xs = rnn_args
    g = graph_of(ft.grad(rnn_loss), W, xs)
    r = roll_loops(g)
    verify(r)
    loops = loops_in(r)
    assert len(loops) == 2
    assert len(r.eqns) < len(g.eqns) // 5
    assert all(e.params["length"] >= MIN_TRIPS for e in loops)
    # the backward loop walks the forward loop's stacked states in reverse
    back = loops[1]
    assert any(spec[1][0] == -1 for spec in back.params["xs"])
    want = numpy_ref.run(g, [W, xs])[0]
    got = numpy_ref.run(r, [W, xs])[0]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(got, rnn_hand(W, xs), rtol=1e-12, atol=1e-14)
    # a rolled graph prints and round-trips through JSON like any other
    assert "loop(" in str(r)
    assert graph_from_json(graph_to_json(r)) == r


def test_short_runs_and_independent_repeats_stay_unrolled():
    xs = np.arange(12.0).reshape(6, 2)

    def short(xs):
        h = xs[0]
        for t in range(1, MIN_TRIPS - 2):
            h = fnp.sin(h) + xs[t]
        return h
    g = graph_of(short, xs)
    assert roll_loops(g) is g

    def independent(x):    # the same equations, but no trip reads another: nothing to roll
        return [fnp.sin(x * float(k)) for k in range(12)]
    g = graph_of(independent, np.ones(3))
    assert not loops_in(roll_loops(g))


def test_a_rejected_body_stays_unrolled(rnn_args):
    W, xs = rnn_args
    g = graph_of(ft.grad(rnn_loss), W, xs)
    seen = []
    r = roll_loops(g, body_ok=lambda eqn: seen.append(eqn) or False)
    assert seen and not loops_in(r)
    assert r == g


def test_loop_op_checks_its_operands():
    g = graph_of(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(ShapeError, match="body takes"):
        loop_p.abstract_eval(AVal((3,), "float64"), AVal((3,), "float64"), body=g, length=4,
                             n_consts=0, n_carry=1, xs=())
    with pytest.raises(ShapeError, match="comes back"):
        h = graph_of(lambda x: x[:2], np.ones(3))
        loop_p.abstract_eval(AVal((3,), "float64"), body=h, length=4, n_consts=0, n_carry=1,
                             xs=())


# --------------------------------------------------------------------------------------------
# compiled loops against the interpreter
# --------------------------------------------------------------------------------------------

def check_jit(f, *args, loops=None, rtol=1e-12, atol=1e-13):
    """``ft.jit(f)`` (compiled at once) against the reference interpreter on the unrolled
    graph; ``loops``: how many compiled loops the program must have."""
    g = graph_of(f, *args)
    want = numpy_ref.run(g, list(args))
    prog = program_of(g)
    if loops is not None:
        assert len(prog.loops) == loops, prog.source[-3000:]
    got = ft.jit(f, eager=True)(*args)
    got = got if isinstance(got, list | tuple) else [got]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return prog


@pytest.mark.parametrize("T", [1, 2, 3, 4])
def test_compiled_loop_carries_for_odd_and_even_trip_counts(T):
    """A swapped carry's initial value is copied in by the runner, and its fresh output is
    whichever buffer the last swap leaves as ``cur`` (it depends on T's parity); a carry
    that is also a stacked result is read back from its last row. A second call reuses the
    spare buffers and must leave the first call's results as they were."""
    rng = np.random.default_rng(T)
    W, xs = rng.normal(0, 0.3, (4, 4)), rng.normal(size=(T, 4))

    def f(W, xs):
        def step(c, x):
            h, s = c
            h2 = fnp.tanh(W @ h + x)
            return (h2, s + fnp.sum(h2)), h2      # h2: a carry and a stacked result
        (h, s), hs = ft.scan(step, (fnp.ones(4) * 0.5, 1.0), xs)
        return h, s, hs

    h, s, hs = np.full(4, 0.5), 1.0, []
    for x in xs:
        h = np.tanh(W @ h + x)
        s, hs = s + h.sum(), hs + [h]
    check_jit(f, W, xs, loops=1)
    fj = ft.jit(f, eager=True)
    first = [np.array(a) for a in fj(W, xs)]
    kept = fj(W, xs)
    fj(W * 0.5, xs[::-1].copy())
    for a, b, want in zip(first, kept, [h, s, np.array(hs)]):
        np.testing.assert_allclose(a, want, rtol=1e-13)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rnn_gradient_compiled_loops(dtype):
    rng = np.random.default_rng(1)
    W = rng.normal(0, 0.3, (16, 16)).astype(dtype)
    xs = rng.normal(size=(40, 16)).astype(dtype)
    tol = 1e-12 if dtype == "float64" else 2e-5
    prog = check_jit(ft.grad(rnn_loss), W, xs, loops=2, rtol=tol, atol=tol)
    assert "def loop(" in prog.source
    got = ft.jit(ft.grad(rnn_loss))(W, xs)
    np.testing.assert_allclose(got, rnn_hand(W, xs), rtol=tol * 10, atol=tol)


def test_stacked_results_reductions_and_scalar_carries():
    xs = np.random.default_rng(2).normal(size=(20, 5))

    def f(xs):
        s = fnp.zeros(())
        h = fnp.ones(5)
        outs = []
        for t in range(xs.shape[0]):
            s = 0.9 * s + fnp.sum(fnp.sin(xs[t]))        # a reduction into a 0-d carry
            h = h * 0.5 + fnp.exp(-xs[t] * s)
            outs.append(h * 2.0)                          # every trip's value is returned
        return s, h, fnp.stack(outs)
    check_jit(f, xs, loops=1)


@pytest.mark.parametrize("read", ["column", "strided", "reversed", "block"])
def test_per_trip_reads(read):
    xs = np.random.default_rng(3).normal(size=(24, 24))

    def f(xs):
        h = fnp.zeros(xs.shape[0] if read == "column" else 4 if read == "block" else 24)
        for t in range(10):
            if read == "column":
                x = xs[:, t]
            elif read == "strided":
                x = xs[2 * t]
            elif read == "reversed":
                x = xs[23 - t]
            else:
                x = xs[2 * t:2 * t + 4, 3]
            h = fnp.tanh(h * 0.7 + x)
        return h
    check_jit(f, xs, loops=1)


def test_integer_carry_and_array_constants():
    xs = np.random.default_rng(4).normal(size=(16, 3))
    k0 = np.array([1.0, -2.0, 0.5])

    def f(xs):
        n = fnp.zeros((), "int64")
        h = fnp.zeros(3)
        for t in range(xs.shape[0]):
            n = n + fnp.sum(xs[t] > 0)                   # an int64 carry
            h = fnp.maximum(h, xs[t] * k0) + n * 0.01
        return n, h
    check_jit(f, xs, loops=1)


def test_gradients_with_respect_to_the_per_trip_inputs(rnn_args):
    W, xs = rnn_args
    f = ft.grad(rnn_loss, argnums=(0, 1))
    g = graph_of(f, W, xs)
    got = ft.jit(f, eager=True)(W, xs)
    want = numpy_ref.run(g, [W, xs])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_hessian_of_a_loop():
    x = np.random.default_rng(5).normal(size=4)

    def f(x):
        h = x
        for _ in range(12):
            h = fnp.sin(h) * 0.9 + x
        return fnp.sum(h * h)
    check_jit(ft.hessian(f), x)


def test_a_body_without_a_compiled_form_is_not_rolled():
    xs = np.random.default_rng(6).normal(size=(12, 5))

    def f(xs):
        h = fnp.zeros(5)
        for t in range(xs.shape[0]):
            h = fnp.sort(h + xs[t])       # sort has no kernel: the trips stay unrolled
        return h
    rolled = loops_in(roll_loops(graph_of(f, xs)))     # the pass alone rolls it ...
    assert rolled and isinstance(cpu_loop.plan_body(rolled[0].params["body"]), str)
    assert not cpu_loop.body_ok(rolled[0])
    check_jit(f, xs, loops=0)                             # ... the CPU backend refuses


def test_compiled_loops_are_cached_on_disk(tmp_path, monkeypatch, rnn_args):
    monkeypatch.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    W, xs = rnn_args
    g = graph_of(ft.grad(rnn_loss), W, xs)
    ex = numba_cpu.Executable(g, eager=True)
    assert not ex.lower().all_cached()
    ex(W, xs)
    assert ex.lower().all_cached()
    assert list(tmp_path.glob("ftl_*.py"))


def test_a_loop_that_fails_to_compile_runs_unrolled(monkeypatch, rnn_args):
    W, xs = rnn_args
    g = graph_of(ft.grad(rnn_loss), W, xs)

    def boom(fn, ls):
        raise RuntimeError("no loop today")
    monkeypatch.setattr(cpu_loop, "warm_up", boom)
    ex = numba_cpu.Executable(g, eager=True)
    got = ex(W, xs)[0]
    assert any("no loop today" in m for m in ex.compile_failures)
    assert not ex.lower().loops and not ex.lower().roll
    np.testing.assert_allclose(got, rnn_hand(W, xs), rtol=1e-12, atol=1e-14)


def test_maps_roll_and_irregular_reads_do_not():
    xs = np.random.default_rng(7).normal(size=(12, 4))

    def mapped(xs):                 # no carry: every trip reads its own row
        return fnp.stack([fnp.sin(xs[i]) * 2.0 for i in range(12)])
    check_jit(mapped, xs, loops=1)

    def irregular(x):               # trips read x[i % 3]: not a fixed step per trip
        s = fnp.zeros(4)
        for i in range(12):
            s = s + fnp.sin(x[i % 3]) * x[(i + 1) % 3]
        return s
    g = graph_of(irregular, xs)
    assert roll_loops(g) == g
    check_jit(irregular, xs, loops=0)


# --------------------------------------------------------------------------------------------
# random loop programs: rolled == unrolled on the interpreter, and compiled == interpreter
# --------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_UNARY = [fnp.sin, fnp.tanh, lambda v: v * v, lambda v: -v, fnp.exp]
_BINARY = [lambda a, b: a + b, lambda a, b: a * b, fnp.maximum, lambda a, b: a - 0.5 * b]


@st.composite
def loop_programs(draw):
    trips = draw(st.integers(MIN_TRIPS, MIN_TRIPS + 4))
    n_carry = draw(st.integers(1, 3))
    read = draw(st.sampled_from(["row", "column", "reversed", "strided", "none"]))
    steps = draw(st.lists(st.tuples(st.integers(0, len(_UNARY) - 1),
                                    st.integers(0, len(_BINARY) - 1),
                                    st.integers(0, 5), st.integers(0, 5)),
                          min_size=n_carry, max_size=n_carry + 2))
    reduce_ = draw(st.booleans())
    return trips, n_carry, read, steps, reduce_


def _program(trips, n_carry, read, steps, reduce_):
    def f(xs, w):
        carries = [w * (0.1 * (k + 1)) for k in range(n_carry)]
        outs = []
        for t in range(trips):
            if read == "row":
                x = xs[t]
            elif read == "column":
                x = xs[:, t]
            elif read == "reversed":
                x = xs[2 * trips - 1 - t]
            elif read == "strided":
                x = xs[2 * t]
            else:
                x = w
            vals = carries + [x, w]
            for u, b, i, j in steps:
                vals.append(_BINARY[b](_UNARY[u](vals[i % len(vals)]) * 0.3,
                                       vals[j % len(vals)]))
            new = vals[-n_carry:]
            if reduce_:                                   # a reduction inside the trip
                new[0] = new[0] * 0.5 + fnp.mean(new[-1]) * 0.1
            # a recurrence in every carry, with values kept bounded
            carries = [fnp.tanh(c + 0.5 * old) for c, old in zip(new, carries)]
            outs.append(carries[0])
        return carries + [fnp.stack(outs)]
    return f


@settings(max_examples=40, deadline=None)
@given(loop_programs())
def test_random_loops_roll_without_changing_results(prog):
    trips = prog[0]
    rng = np.random.default_rng(trips)
    xs = rng.normal(size=(2 * trips, 2 * trips))
    w = rng.normal(size=2 * trips)
    f = _program(*prog)
    grad = ft.grad(lambda xs, w: fnp.sum(f(xs, w)[-1] ** 2), argnums=1)
    jvp = lambda xs, w: ft.jvp(lambda w: f(xs, w)[-1], (w,), (w * 0.5,))[1]  # noqa: E731
    for fun in (f, grad, jvp):
        g = graph_of(fun, xs, w)
        r = roll_loops(g)
        verify(r)
        if fun is f:
            assert loops_in(r)          # every generated forward program is a rollable loop
        want = numpy_ref.run(g, [xs, w])
        got = numpy_ref.run(r, [xs, w])
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@settings(max_examples=4, deadline=None)    # ~15 s each with a cold cache (6 until 2026-12)
@given(loop_programs())
def test_random_loops_compiled(prog):
    trips = prog[0]
    rng = np.random.default_rng(trips + 1)
    xs = rng.normal(size=(2 * trips, 2 * trips))
    w = rng.normal(size=2 * trips)
    f = _program(*prog)
    check_jit(ft.grad(lambda xs, w: fnp.sum(f(xs, w)[-1] ** 2), argnums=1), xs, w)


@pytest.mark.parametrize("form", ["W @ h", "h @ W", "batch"])
def test_loops_with_blas_contractions(form):
    """Contractions above small_dots_as_loops' size run as numba's np.dot (BLAS) inside the
    compiled loop, including transposed operands (the backward pass's W.T @ g) and outer
    products."""
    rng = np.random.default_rng(8)
    H = 72                                    # 72 * 72 multiply-adds > SMALL_DOT
    W = rng.normal(0, 0.1, (H, H))
    xs = rng.normal(size=(10, 3 if form == "batch" else 1, H))

    def loss(W, xs):
        h = fnp.zeros((3, H)) if form == "batch" else fnp.zeros(H)
        for t in range(xs.shape[0]):
            x = xs[t] if form == "batch" else xs[t, 0]
            h = fnp.tanh((W @ h if form == "W @ h" else h @ W) + x)
        return fnp.sum(h * h)
    prog = check_jit(ft.grad(loss), W, xs, loops=2)
    assert "np.dot(" in prog.source


def test_without_scipy_contractions_keep_the_trips_unrolled(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scipy" else real(name, *a))
    cpu_loop._plans.clear()
    rng = np.random.default_rng(9)
    W, xs = rng.normal(0, 0.1, (72, 72)), rng.normal(size=(10, 72))
    try:
        check_jit(ft.grad(rnn_loss), W, xs, loops=0)
    finally:
        cpu_loop._plans.clear()


def test_each_loop_compiles_one_specialisation(rnn_args):
    """Per-trip reads are gathered into writeable C arrays, so a call (even with read-only
    inputs) hits the specialisation compiled at warm-up instead of compiling another."""
    W, xs = rnn_args
    xs = xs.copy()
    xs.flags.writeable = False
    g = graph_of(ft.grad(rnn_loss), W, xs)
    ex = numba_cpu.Executable(g, eager=True)
    got = ex(W, xs)[0]
    np.testing.assert_allclose(got, rnn_hand(W, xs), rtol=1e-12, atol=1e-14)
    loops = ex.lower().loops
    assert loops
    for ls in loops:
        assert len(cpu_kernels._loops[ls.key].signatures) == 1


@pytest.mark.parametrize("transform, n_loops", [("jacfwd", 1), ("hessian", 2)])
def test_forward_mode_through_a_loop_rolls(transform, n_loops, rnn_args):
    """jacfwd batches the tangents (each trip may carry its own copy of the basis literal)
    and hessian = jacfwd(jacrev) batches the backward loop too, whose trips need broadcast
    views as values: all of it rolls. Forward mode records each step's primal and tangent
    equations together, so a step of the forward pass is one loop body (one loop for
    jacfwd; the forward and the backward loop for hessian)."""
    W, xs = rnn_args
    f = getattr(ft, transform)(rnn_loss)
    prog = check_jit(f, W, xs[:12])
    assert len(prog.loops) == n_loops
    assert len(prog.kernels) < 16


@pytest.mark.parametrize("read", ["row", "column", "strided", "reversed", "block"])
def test_rolled_loops_have_every_rule(read):
    """A loop the pass rolled is an ordinary ``loop`` equation: reverse mode (to second
    order), forward mode and vmap through it equal the same transforms of the unrolled
    graph, for every kind of per-trip read (the reverse rule scatters a read's cotangent
    back onto its array)."""
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(24, 24))
    w = rng.normal(0, 0.3, 4 if read == "block" else 24)

    def f(w, xs):
        h = w * 0.1
        for t in range(10):
            x = {"row": xs[t], "column": xs[:, t], "strided": xs[2 * t],
                 "reversed": xs[23 - t], "block": xs[2 * t:2 * t + 4, 3]}[read]
            h = fnp.tanh(h * w + x)
        return fnp.sum(h * h)
    g = graph_of(f, w, xs)
    rolled = roll_loops(g)
    assert len(loops_in(rolled)) == 1

    def run(graph):
        def h(w, xs):
            return ft.tracing.eval_graph(graph, [w, xs])[0]
        return h
    fu, fr = run(g), run(rolled)
    for argnums in (0, 1, (0, 1)):
        a, b = ft.grad(fr, argnums)(w, xs), ft.grad(fu, argnums)(w, xs)
        for x, y in zip(a if isinstance(argnums, tuple) else [a],
                        b if isinstance(argnums, tuple) else [b]):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ft.hessian(fr)(w, xs), ft.hessian(fu)(w, xs), rtol=1e-10,
                               atol=1e-13)
    t = rng.normal(size=w.shape)
    np.testing.assert_allclose(ft.jvp(lambda w: fr(w, xs), (w,), (t,))[1],
                               ft.jvp(lambda w: fu(w, xs), (w,), (t,))[1], rtol=1e-12)
    ws = rng.normal(size=(3,) + w.shape)
    np.testing.assert_allclose(ft.vmap(fr, (0, None))(ws, xs), ft.vmap(fu, (0, None))(ws, xs),
                               rtol=1e-12)
