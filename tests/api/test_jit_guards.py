"""Python control flow under ``ft.jit``: one compiled variant per path, checked by guards.

Every result here is compared with the un-jitted function (and numpy), on both sides of each
decision, in alternating calls: a cache must never change an answer. Variant counts are read
with ``Jitted.variants`` and by counting how often Python runs the function (each trace runs
it once; a cached variant does not).
"""

from __future__ import annotations

import collections
import inspect

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.errors import ConcretizationError, GuardError

BACKENDS = ["numpy", "cpu"]


def line_of(fn, text: str) -> int:
    """The file line number of the first line of ``fn``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


class Counted:
    """``fn`` that counts how often Python runs it (once per trace under jit)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


def branchy(x):
    if fnp.sum(x) > 0:                       # the decision
        return fnp.maximum(x, 0.0) * 2.0 + fnp.sin(x)
    return x * x - fnp.cos(x)


def branchy_np(x):
    if np.sum(x) > 0:
        return np.maximum(x, 0.0) * 2.0 + np.sin(x)
    return x * x - np.cos(x)


def sqrt_newton(a, tol=1e-12):
    """A Python while loop on a traced value: the trip count depends on ``a``."""
    y = fnp.ones_like(a)
    while fnp.max(fnp.abs(y * y - a)) > tol * fnp.max(a):     # the loop test
        y = 0.5 * (y + a / y)
    return y


def newton_trips(a, tol=1e-12):
    y, n = np.ones_like(a), 0
    while np.max(np.abs(y * y - a)) > tol * np.max(a):
        y, n = 0.5 * (y + a / y), n + 1
    return n


# --------------------------------------------------------------------------------------------
# if on a traced value
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_if_both_sides_alternating_two_variants(backend):
    f = Counted(branchy)
    jf = ft.jit(f, backend=backend)
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 1.0, 5)
    for i in range(12):
        x = base * (1.0 if i % 2 == 0 else -1.0) + 0.01 * i
        got = jf(x)
        np.testing.assert_allclose(got, branchy_np(x), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(got, branchy(x), rtol=1e-13, atol=1e-15)
    variants = jf.variants(base)
    assert len(variants) == 2
    # one abstract attempt, then one concrete trace per path; none after that
    assert f.calls == 3
    assert sorted(v.guards[0].expected for v in variants) == [False, True]
    assert all(len(v.guards) == 1 for v in variants)


def test_a_function_without_value_dependent_branches_is_unchanged():
    f = Counted(lambda x: fnp.sum(fnp.tanh(x) ** 2))
    jf = ft.jit(f, backend="numpy")
    for s in (1.0, -1.0, 2.0):
        np.testing.assert_allclose(jf(s * np.ones(3)), np.sum(np.tanh(s * np.ones(3)) ** 2))
    assert f.calls == 1
    (v,) = jf.variants(np.ones(3))
    assert v.guards == ()
    assert len(v.graph.outputs) == 1     # no guard outputs


def test_variants_are_empty_before_the_first_call_and_after_clear_caches():
    jf = ft.jit(branchy, backend="numpy")
    x = np.ones(3)
    assert jf.variants(x) == []
    jf(x), jf(-x)
    assert len(jf.variants(x)) == 2
    ft.clear_caches()
    assert jf.variants(x) == []
    np.testing.assert_allclose(jf(-x), branchy_np(-x))
    assert len(jf.variants(x)) == 1
    jf.clear_cache()
    assert jf.variants(x) == []


def test_nested_decisions_give_one_variant_per_path():
    def f(x):
        s = fnp.sum(x)
        if s > 0:
            y = x * 2.0
            if fnp.max(x) > 3.0:
                return y - 1.0
            return y
        if s < -10.0:
            return -x
        return x + 1.0

    def f_np(x):
        s = np.sum(x)
        if s > 0:
            return x * 2.0 - 1.0 if np.max(x) > 3.0 else x * 2.0
        return -x if s < -10.0 else x + 1.0

    jf = ft.jit(f, backend="cpu")
    xs = [np.array([1.0, 2.0]), np.array([1.0, 5.0]), np.array([-1.0, -2.0]),
          np.array([-8.0, -7.0])]
    for _ in range(3):
        for x in xs:
            np.testing.assert_array_equal(jf(x), f_np(x))
    assert len(jf.variants(xs[0])) == 4


def test_differential_random_inputs_both_backends():
    """Many random inputs around the threshold, each compared with numpy, on both backends."""
    rng = np.random.default_rng(1)
    jfs = [ft.jit(branchy, backend=b) for b in BACKENDS]
    for _ in range(60):
        x = rng.normal(size=4)
        want = branchy_np(x)
        for jf in jfs:
            np.testing.assert_allclose(jf(x), want, rtol=1e-13, atol=1e-15)
    for jf in jfs:
        assert len(jf.variants(np.zeros(4))) == 2


def test_python_scalar_and_zero_d_arguments():
    jf = ft.jit(lambda a, b: a * b if a > b else a - b, backend="numpy")
    for a, b in [(2.0, 1.0), (1.0, 2.0), (3.0, -1.0), (-5.0, 0.0)]:
        assert float(jf(a, b)) == (a * b if a > b else a - b)
        assert float(jf(np.float64(a), np.array(b))) == (a * b if a > b else a - b)


def test_value_read_with_float_is_a_value_guard():
    """``float(x)`` pins the exact value: a variant per distinct value, reused for it."""
    f = Counted(lambda x: x * float(fnp.sum(x)))
    jf = ft.jit(f, backend="numpy")
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    for x in (a, b, a, b, a):
        np.testing.assert_array_equal(jf(x), x * np.sum(x))
    assert len(jf.variants(a)) == 2
    assert f.calls == 3
    assert jf.variants(a)[0].guards[0].kind == "value"


# --------------------------------------------------------------------------------------------
# while on a traced value
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_with_value_dependent_trip_counts(backend):
    jf = ft.jit(sqrt_newton, backend=backend)
    values = [2.0, 100.0, 2.0, 1e6, 100.0, 7.0, 2.0]
    trips = set()
    for v in values:
        a = np.array([v, v / 2.0])
        trips.add(newton_trips(a))
        got = jf(a)
        np.testing.assert_allclose(got, sqrt_newton(a), rtol=1e-15)
        np.testing.assert_allclose(got, np.sqrt(a), rtol=1e-12)
    assert len(trips) > 2
    variants = jf.variants(np.ones(2))
    assert len(variants) == len(trips)
    # each variant is one trip count: its guards are the loop test, True n times, then False
    for v in variants:
        assert [g.expected for g in v.guards][-1] is False
        assert all(g.expected for g in v.guards[:-1])
        assert {g.source.lineno for g in v.guards} == {line_of(sqrt_newton, "the loop test")}
    assert sorted(len(v.guards) - 1 for v in variants) == sorted(trips)


def test_loop_counter_decisions_reuse_variants():
    """The same trip count again reuses its variant: no trace, right answer."""
    f = Counted(sqrt_newton)
    jf = ft.jit(f, backend="numpy")
    a, b = np.array([2.0]), np.array([1e4])
    for x in (a, b, a, b, a, b):
        np.testing.assert_allclose(jf(x), np.sqrt(x), rtol=1e-12)
    assert f.calls == 3


# --------------------------------------------------------------------------------------------
# max_variants
# --------------------------------------------------------------------------------------------

def halve_until_small(x):
    while fnp.max(x) > 1.0:                    # halving loop
        x = x / 2.0
    return x


def test_more_paths_than_max_variants_is_a_guard_error_naming_the_line():
    jf = ft.jit(halve_until_small, backend="numpy", max_variants=3)
    for scale in (1.5, 3.0, 6.0, 1.5, 6.0):      # three trip counts: three paths, then reuse
        x = np.array([0.5, 1.0]) * scale
        np.testing.assert_array_equal(jf(x), halve_until_small(x))
    assert len(jf.variants(np.ones(2))) == 3
    with pytest.raises(GuardError) as e:
        jf(np.array([0.5, 1.0]) * 100.0)            # a fourth path
    msg = str(e.value)
    line = line_of(halve_until_small, "halving loop")
    assert f"test_jit_guards.py:{line}" in msg
    assert "while fnp.max(x) > 1.0" in msg
    for phrase in ("max_variants=3", "ft.cond", "ft.while_loop", "ft.fori_loop",
                   "static_argnums", "max_variants=n"):
        assert phrase in msg, phrase
    assert isinstance(e.value, ValueError) and isinstance(e.value, ft.FunctraceError)
    # the variants already compiled keep answering
    np.testing.assert_array_equal(jf(np.array([3.0, 6.0])), halve_until_small(np.array([3., 6.])))
    assert len(jf.variants(np.ones(2))) == 3


def test_max_variants_counts_per_signature():
    jf = ft.jit(branchy, backend="numpy", max_variants=2)
    for n in (2, 3):
        for s in (1.0, -1.0):
            x = s * np.ones(n)
            np.testing.assert_allclose(jf(x), branchy_np(x))
        assert len(jf.variants(np.ones(n))) == 2


def test_max_variants_one_and_zero():
    jf = ft.jit(branchy, backend="numpy", max_variants=1)
    np.testing.assert_allclose(jf(np.ones(2)), branchy_np(np.ones(2)))
    with pytest.raises(GuardError, match=r"max_variants=1.*test_jit_guards\.py:\d+"):
        jf(-np.ones(2))
    with pytest.raises(ConcretizationError, match=r"ft\.cond"):
        ft.jit(branchy, max_variants=0)(np.ones(2))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_max_variants_must_be_a_non_negative_int(bad):
    with pytest.raises(ValueError, match="max_variants"):
        ft.jit(branchy, max_variants=bad)


def test_max_variants_as_decorator_argument():
    @ft.jit(backend="numpy", max_variants=2)
    def f(x):
        return x if fnp.sum(x) > 0 else -x

    for s in (1.0, -1.0):
        np.testing.assert_array_equal(f(s * np.ones(2)), np.ones(2))
    assert f.max_variants == 2 and len(f.variants(np.ones(2))) == 2


# --------------------------------------------------------------------------------------------
# abstract inputs: the ConcretizationError names the line and the constructs
# --------------------------------------------------------------------------------------------

def test_abstract_inputs_name_the_line_and_the_constructs():
    sd = ft.ShapeDtype((3,), np.float64)
    line = line_of(branchy, "the decision")
    for attempt in (lambda: ft.jit(branchy).lower(sd), lambda: ft.trace(branchy)(sd),
                    lambda: ft.trace(ft.jit(branchy))(sd)):
        with pytest.raises(ConcretizationError) as e:
            attempt()
        msg = str(e.value)
        assert f"test_jit_guards.py:{line}" in msg, msg
        for phrase in ("bool()", "ft.cond", "ft.while_loop", "ft.fori_loop", "static_argnums"):
            assert phrase in msg, phrase


def test_abstract_loop_bound_names_fori_loop():
    def f(x, n):
        acc = x
        for _ in range(n):                        # the loop bound
            acc = acc * 2.0
        return acc

    with pytest.raises(ConcretizationError) as e:
        ft.jit(f).lower(np.ones(2), ft.ShapeDtype((), np.int64))
    msg = str(e.value)
    assert f"test_jit_guards.py:{line_of(f, 'the loop bound')}" in msg
    assert "ft.fori_loop" in msg and "static_argnums" in msg
    # concrete: one variant per value of n, each right
    jf = ft.jit(f, backend="numpy")
    for n in (0, 3, 0, 3, 5):
        np.testing.assert_array_equal(jf(np.ones(2), np.array(n)), np.ones(2) * 2.0 ** n)
    assert len(jf.variants(np.ones(2), np.array(0))) == 3


def test_lower_stays_abstract_for_concrete_arguments():
    with pytest.raises(ConcretizationError, match=r"ft\.while_loop"):
        ft.jit(branchy).lower(np.ones(3))


# --------------------------------------------------------------------------------------------
# pytrees, static and donated arguments, constants, composition
# --------------------------------------------------------------------------------------------

Pair = collections.namedtuple("Pair", ["a", "b"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_arguments_and_outputs_that_differ_per_path(backend):
    def f(p, scale):
        if fnp.sum(p["x"]) > fnp.sum(p["y"]):
            return {"out": p["x"] * scale, "extra": (p["y"], 1.0)}
        return [p["y"] - p["x"]]

    jf = ft.jit(f, backend=backend)
    rng = np.random.default_rng(2)
    for i in range(6):
        x, y = rng.normal(size=3), rng.normal(size=3)
        if i % 2:
            x, y = np.maximum(x, y) + 1.0, np.minimum(x, y)
        p = {"x": x, "y": y}
        got, want = jf(p, 3.0), f(p, 3.0)
        assert type(got) is type(want)
        if isinstance(want, dict):
            np.testing.assert_allclose(got["out"], x * 3.0)
            np.testing.assert_array_equal(got["extra"][0], y)
            assert float(got["extra"][1]) == 1.0
        else:
            np.testing.assert_allclose(got[0], y - x)


def test_namedtuple_arguments_take_the_general_path():
    def f(p):
        return p.a + p.b if fnp.sum(p.a) > 0 else p.a - p.b

    jf = ft.jit(f, backend="numpy")
    for s in (1.0, -1.0, 1.0):
        p = Pair(s * np.ones(2), np.arange(2.0))
        np.testing.assert_array_equal(jf(p), f(Pair(p.a, p.b)))
    assert len(jf.variants(Pair(np.ones(2), np.ones(2)))) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_arguments_have_their_own_variants(backend):
    def f(x, mode, tol):
        if mode == "abs":
            x = fnp.abs(x)
        while fnp.max(x) > tol:
            x = x * 0.5
        return x

    def f_np(x, mode, tol):
        if mode == "abs":
            x = np.abs(x)
        while np.max(x) > tol:
            x = x * 0.5
        return x

    jf = ft.jit(f, backend=backend, static_argnums=(1, 2))
    x = np.array([-8.0, 3.0])
    for mode in ("abs", "id", "abs", "id"):
        for tol in (1.0, 0.1):
            for s in (1.0, 4.0):
                np.testing.assert_array_equal(jf(x * s, mode, tol), f_np(x * s, mode, tol))
    for mode in ("abs", "id"):
        assert len(jf.variants(x, mode, 1.0)) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_donated_arguments_are_not_clobbered_by_a_variant_whose_guards_fail(backend):
    def f(x, y):
        if fnp.sum(x) > 0:
            return x * 2.0 + y
        return x - y

    jf = ft.jit(f, backend=backend, donate_argnums=0, eager=True)
    y = np.arange(4.0)
    for i in range(6):
        x = np.full(4, 1.0 if i % 2 == 0 else -1.0) * (i + 1)
        want = f(x.copy(), y)
        np.testing.assert_array_equal(jf(x, y), want)
    assert all(not v._entry.donate for v in jf.variants(np.ones(4), y))
    # without value-dependent branches donation is unchanged
    plain = ft.jit(lambda x, y: x * 2.0 + y, backend=backend, donate_argnums=0)
    np.testing.assert_array_equal(plain(np.ones(4), y), 2.0 + y)
    assert plain.variants(np.ones(4), y)[0]._entry.donate == (0,)


def test_a_closed_over_array_changed_in_place_retraces_the_variant():
    k = np.array([1.0, 2.0])

    def f(x):
        if fnp.sum(x * k) > 0:
            return x * k
        return -x

    jf = ft.jit(f, backend="numpy")
    x = np.ones(2)
    np.testing.assert_array_equal(jf(x), k)
    np.testing.assert_array_equal(jf(-x), x)
    k[:] = [-3.0, -4.0]                       # x * k now sums negative for x = ones
    np.testing.assert_array_equal(jf(x), -x)
    np.testing.assert_array_equal(jf(-x), [3.0, 4.0])


def test_a_rebound_global_retraces_all_variants():
    def f(x):
        if fnp.sum(x) > THRESHOLD:
            return x + 1.0
        return x - 1.0

    global THRESHOLD
    THRESHOLD = 0.0
    jf = ft.jit(f, backend="numpy")
    x = np.ones(2)
    np.testing.assert_array_equal(jf(x), x + 1.0)
    THRESHOLD = 5.0
    np.testing.assert_array_equal(jf(x), x - 1.0)


THRESHOLD = 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit_inside_grad_is_transparent(backend):
    def g(x):
        if fnp.sum(x) > 0:
            return fnp.sum(fnp.sin(x))
        return fnp.sum(x * x)

    jg = ft.jit(g, backend=backend)
    for s in (1.0, -1.0):
        x = np.array([0.5, 1.0]) * s
        np.testing.assert_allclose(ft.grad(jg)(x), ft.grad(g)(x), rtol=1e-14)
    assert jg.variants(np.ones(2)) == []         # nothing was compiled: jit was traced through


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_inside_jit_with_a_branch(backend):
    def g(x):
        if fnp.sum(x) > 0:
            return fnp.sum(fnp.sin(x))
        return fnp.sum(x * x)

    jf = ft.jit(ft.grad(g), backend=backend)
    for s in (1.0, -1.0, 1.0, -2.0):
        x = np.array([0.5, 1.0]) * s
        want = np.cos(x) if s > 0 else 2.0 * x
        np.testing.assert_allclose(jf(x), want, rtol=1e-14)
    assert len(jf.variants(np.ones(2))) == 2


def test_compiled_variant_checks_its_guards():
    jf = ft.jit(branchy, backend="numpy")
    x = np.array([0.5, 1.0])
    jf(x)
    (lowered,) = jf.variants(x)
    assert "bool()" in repr(lowered.guards[0])
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(x), branchy_np(x))
    with pytest.raises(GuardError, match=r"test_jit_guards\.py:\d+"):
        compiled(-x)


def test_guarded_symbol_under_jit_never_takes_the_other_branch():
    sym = ft.trace(branchy)(np.ones(2))
    jsym = ft.jit(sym, backend="numpy")
    np.testing.assert_allclose(jsym(np.ones(2)), branchy_np(np.ones(2)))
    with pytest.raises(GuardError):
        jsym(-np.ones(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_variant_that_fails_on_another_paths_values_does_not_answer(backend):
    def f(a):
        if fnp.min(fnp.linalg.eigh(a)[0]) > 0:
            return fnp.linalg.cholesky(a)
        return a * 2.0

    jf = ft.jit(f, backend=backend)
    pd, indefinite = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([[1.0, 2.0], [2.0, 1.0]])
    for a in (pd, indefinite, pd, indefinite):
        np.testing.assert_allclose(jf(a), f(a), rtol=1e-14)
    assert len(jf.variants(pd)) == 2
    with pytest.raises(np.linalg.LinAlgError):     # what the first variant meets
        np.linalg.cholesky(indefinite)


def test_device_arrays_guards_are_read_on_the_host(monkeypatch):
    """GPU arrays (the cupy stand-in, which refuses implicit conversion to numpy) through
    jit(backend="numpy"): the guards' values come back on the device and are copied to the
    host to be checked; a ``float()`` value guard too."""
    import fake_cupy
    cp = fake_cupy.install(monkeypatch)

    def f(x):
        if fnp.sum(x) > 0:
            return x * float(fnp.max(x))
        return -x

    jf = ft.jit(f, backend="numpy")
    a, b = np.array([1.0, 2.0]), np.array([-1.0, -3.0])
    for x in (a, b, a, b):
        got = jf(cp.asarray(x))
        assert isinstance(got, fake_cupy.ndarray)
        want = x * np.max(x) if np.sum(x) > 0 else -x
        np.testing.assert_array_equal(got.get(), want)
    assert len(jf.variants(cp.asarray(a))) == 2
