"""functrace.random's eager fast path (``functrace/random/_eager.py``): outside transforms, the
bit-exact part of every sampler runs as a cached ``ft.jit`` function.

Every eager call can take three routes: op by op (the first call of a small draw, and
everything under ``ft.disable_jit()``), the traced graph on the reference interpreter (the
executor's cold tier) and the compiled CPU kernels. The ``route`` fixture forces one (and
makes the other two fail if they run), so the jax goldens and a differential comparison of
every sampler run through each:

* goldens (support/random_golden.py): every case of the exact contract, and the
  100,000-sample digests, bit for bit through the interpreter and the kernels;
* every sampler, float32 and float64, with ``random.key`` and ``random.PRNGKey`` keys: the
  same bits, dtype, shape and type as under ``ft.disable_jit()``;
* inside ``ft.jit``/``ft.grad``/``ft.vmap`` the samplers trace into the user's graph and the
  internal cache is not used; ``ft.disable_jit`` and ``ft.config.disable_jit`` turn it off;
* a small draw's first call runs op by op (no trace), a large one's goes to the executor.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from random_checks import words as _words
from random_golden import CASES, DIGESTS

import functrace as ft
import functrace.numpy as fnp
import functrace.random as random
from functrace.backends import reference
from functrace.backends.cpu import executor
from functrace.random import _eager


def _fail(what):
    def boom(*args, **kwargs):
        raise AssertionError(f"the {what} ran")
    return boom


@pytest.fixture(params=["interpreter", "compiled"])
def route(request, monkeypatch):
    """Eager draws forced through one tier: the traced graph on the reference interpreter
    (compiling fails), or compiled kernels from the first call (the interpreter fails)."""
    if request.param == "interpreter":
        monkeypatch.setattr(_eager, "tiers_for", lambda n: (False, 10**9, 10**9))
        monkeypatch.setattr(executor.Executable, "compile", _fail("compiler"))
    else:
        monkeypatch.setattr(_eager, "tiers_for", lambda n: (False, 1, 1))
        monkeypatch.setattr(reference, "run", _fail("reference interpreter"))
    yield request.param




def _call(name, seed, args, kwargs):
    args = tuple(np.asarray(a) if isinstance(a, list) else a for a in args)
    kwargs = {k: np.asarray(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    return getattr(random, name)(random.PRNGKey(seed), *args, **kwargs)


GOLDEN = [c for c in CASES if c[0] not in ("PRNGKey", "key")]


def test_golden_cases_through_each_route(route):
    n_fun = len(_eager.compiled_functions())
    for name, seed, args, kwargs, dtype, shape, words in GOLDEN:
        got = _call(name, seed, args, kwargs)
        assert _words(got) == (dtype, tuple(shape), words), (route, name, seed, args, kwargs)
    assert len(_eager.compiled_functions()) > n_fun or route == "compiled"


@pytest.mark.parametrize("name", ["normal_0_float32_100000", "normal_1_float64_100000",
                                  "uniform_0_float32_100000_-3_5",
                                  "uniform_1_float64_100000_-3_5"])
def test_golden_large_samples_through_each_route(route, name):
    kind, seed, dt, n, *bounds = name.split("_")
    k = random.PRNGKey(int(seed))
    if kind == "normal":
        x = random.normal(k, (int(n),), dt)
    else:
        x = random.uniform(k, (int(n),), dt, float(bounds[0]), float(bounds[1]))
    assert hashlib.sha256(x.tobytes()).hexdigest() == DIGESTS[name]


# --------------------------------------------------------------------------------------------
# every sampler: the internal jit against ft.disable_jit (the op-by-op definition)
# --------------------------------------------------------------------------------------------

SAMPLERS = {
    "split": lambda k, d: random.split(k, 5),
    "split:shape": lambda k, d: random.split(k, (2, 3)),
    "split:0d": lambda k, d: random.split(k, ()),
    "fold_in": lambda k, d: random.fold_in(k, 2**32 + 17),
    "bits": lambda k, d: random.bits(k, (300,), np.uint32),
    "bits:64": lambda k, d: random.bits(k, (300,)),
    "bits:8": lambda k, d: random.bits(k, (2, 7), np.uint8),
    "bits:0d": lambda k, d: random.bits(k, ()),
    "bits:0d32": lambda k, d: random.bits(k, (), np.uint32),
    "uniform": lambda k, d: random.uniform(k, (300,), d, -2.5, 7.25),
    "uniform:0d": lambda k, d: random.uniform(k, (), d),
    "uniform:bounds": lambda k, d: random.uniform(k, (2, 3), d, np.zeros(3), np.arange(1, 4.0)),
    "normal": lambda k, d: random.normal(k, (300,), d),
    "normal:0d": lambda k, d: random.normal(k, (), d),
    "normal:complex": lambda k, d: random.normal(k, (30,), np.complex64 if d == np.float32
                                                 else np.complex128),
    "truncated_normal": lambda k, d: random.truncated_normal(k, -1.0, 2.0, (300,), d),
    "truncated_normal:0d": lambda k, d: random.truncated_normal(k, -1.0, 1.0, (), d),
    "truncated_normal:bounds": lambda k, d: random.truncated_normal(
        k, np.array([-1.0, 0.0, 1.0], d), 3.0, (4, 3), d),
    "bernoulli": lambda k, d: random.bernoulli(k, d(0.3), (300,)),
    "bernoulli:0d": lambda k, d: random.bernoulli(k, d(0.5), ()),
    "bernoulli:p": lambda k, d: random.bernoulli(k, np.linspace(0, 1, 7).astype(d)),
    "categorical": lambda k, d: random.categorical(k, np.log(np.array([0.1, 0.2, 0.7], d)),
                                                   shape=(300,)),
    "categorical:noreplace": lambda k, d: random.categorical(
        k, np.zeros((2, 5), d), axis=1, shape=(3, 2), replace=False),
    "randint": lambda k, d: random.randint(k, (300,), -5, 1000),
    "randint:0d": lambda k, d: random.randint(k, (), 0, 5),
    "randint:u8": lambda k, d: random.randint(k, (30,), 3, 200, np.uint8),
    "randint:arrays": lambda k, d: random.randint(k, (2, 3), np.array([0, 5, 9]), 2**40,
                                                  np.int64),
    "permutation": lambda k, d: random.permutation(k, 50),
    "permutation:array": lambda k, d: random.permutation(k, np.arange(12.0, dtype=d)
                                                         .reshape(3, 4), axis=1),
    "choice": lambda k, d: random.choice(k, 10, (30,)),
    "choice:noreplace": lambda k, d: random.choice(k, np.arange(20, dtype=d), (5,), False),
    "choice:p": lambda k, d: random.choice(k, 5, (30,), p=np.array([.1, .2, .3, .2, .2], d)),
    "choice:p_noreplace": lambda k, d: random.choice(k, 5, (3,), False,
                                                     np.array([.1, .2, .3, .2, .2], d)),
    "gamma": lambda k, d: random.gamma(k, 2.5, (300,), d),
    "loggamma": lambda k, d: random.loggamma(k, 0.3, (30,), d),
    "beta": lambda k, d: random.beta(k, 2.0, 3.0, (300,), d),
    "dirichlet": lambda k, d: random.dirichlet(k, np.ones(3, d), (30,), d),
    "exponential:0d": lambda k, d: random.exponential(k, (), d),
    "exponential": lambda k, d: random.exponential(k, (300,), d),
    "laplace": lambda k, d: random.laplace(k, (300,), d),
    "logistic": lambda k, d: random.logistic(k, (300,), d),
    "gumbel": lambda k, d: random.gumbel(k, (300,), d),
    "cauchy": lambda k, d: random.cauchy(k, (300,), d),
    "t": lambda k, d: random.t(k, 5.0, (300,), d),
    "poisson": lambda k, d: random.poisson(k, np.array([3.0, 40.0], d), (30, 2)),
    "multivariate_normal": lambda k, d: random.multivariate_normal(
        k, np.zeros(3, d), np.eye(3, dtype=d) + 0.3, (30,), d),
    "key_data": lambda k, d: random.key_data(random.split(k, 3)),
    "wrap_key_data": lambda k, d: random.wrap_key_data(random.fold_in(k, 3)),
}


def _same(got, want):
    assert type(got) is type(want)
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_every_sampler_is_covered():
    assert {n.split(":")[0] for n in SAMPLERS} | {"PRNGKey", "key"} == set(random.__all__)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("make_key", [random.key, random.PRNGKey], ids=["key", "PRNGKey"])
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_equals_disable_jit(route, name, make_key, dt):
    f = SAMPLERS[name]
    k = make_key(1234)
    with ft.disable_jit():
        want = f(k, dt)
    _same(f(k, dt), want)
    _same(f(k, dt), want)                        # a cached signature gives the same bits
    k2 = random.split(make_key(99), 3)[1]        # a key that is a view of a batch of keys
    with ft.disable_jit():
        want2 = f(k2, dt)
    _same(f(k2, dt), want2)


def test_default_tiers_equal_disable_jit():
    """The tiers as shipped: first call op by op, then interpreter, then compiled kernels."""
    k = random.key(5)
    for f in (lambda: random.normal(k, (7,), np.float32), lambda: random.uniform(k, (3,)),
              lambda: random.randint(k, (4,), 0, 9), lambda: random.split(k)):
        with ft.disable_jit():
            want = f()
        for _ in range(_eager.SMALL_TIERS[1] + 2):
            _same(f(), want)


# --------------------------------------------------------------------------------------------
# where the internal jit is used, and where not
# --------------------------------------------------------------------------------------------

def _entries():
    return [(name, static) for name, static, _ in _eager.compiled_functions()]


def test_a_small_draw_first_runs_untraced_and_a_large_one_goes_to_the_executor():
    k = random.key(11)
    shape = (3, 7, 1)                                     # a shape no other test draws
    random.uniform(k, shape, np.float32)
    assert ("_uniform", (shape, np.dtype(np.float32))) not in _entries()
    random.uniform(k, shape, np.float32)
    assert ("_uniform", (shape, np.dtype(np.float32))) in _entries()
    big = (_eager.LARGE + 3,)
    random.uniform(k, big, np.float32)
    assert ("_uniform", (big, np.dtype(np.float32))) in _entries()


def test_one_trace_per_signature():
    k = random.key(0)
    shape = (5, 1, 3)
    for i in range(4):
        random.normal(random.fold_in(k, i), shape, np.float32)
    jitted = [f for name, static, f in _eager.compiled_functions()
              if name == "_normal_real" and static == (shape, np.dtype(np.float32))]
    assert len(jitted) == 1 and len(jitted[0].variants(k)) == 1


def test_inside_transforms_the_draws_trace_into_the_users_graph():
    k = random.key(3)
    shape = (2, 9)
    n = len(_entries())
    sym = ft.trace(lambda k: random.normal(k, shape, np.float32))(k)
    assert "threefry2x32" in str(sym) and "erf_inv_xla" in str(sym)
    f = ft.jit(lambda k, lo: random.uniform(k, shape, np.float64, lo, 2.0))
    _same(f(k, -1.0), random.uniform(k, shape, np.float64, -1.0, 2.0))
    g = ft.grad(lambda lo: fnp.sum(random.uniform(k, shape, np.float64, lo, 2.0)))(-1.0)
    with ft.disable_jit():
        u = random.uniform(k, shape, np.float64)
    np.testing.assert_allclose(g, np.sum(1 - u), rtol=1e-14)
    keys = random.split(k, 3)
    _same(ft.vmap(lambda k: random.normal(k, shape))(keys),
          np.stack([random.normal(kk, shape) for kk in keys]))
    traced = [e for e in _entries()[n:] if e[1][:1] == (shape,)]
    # only the eager calls made here (uniform, normal and the split) reached the cache
    assert {name for name, _ in traced} <= {"_uniform", "_normal_real"}


@pytest.mark.parametrize("how", ["context", "config"])
def test_disable_jit_turns_the_internal_jit_off(how, monkeypatch):
    monkeypatch.setattr(_eager, "tiers_for", lambda n: (False, 1, 1))
    monkeypatch.setattr(executor.Executable, "compile", _fail("compiler"))
    monkeypatch.setattr(reference, "run", _fail("reference interpreter"))
    k = random.key(8)
    if how == "context":
        with ft.disable_jit():
            x = random.normal(k, (4, 4, 4))
    else:
        ft.config.disable_jit = True
        try:
            x = random.normal(k, (4, 4, 4))
        finally:
            ft.config.disable_jit = False
    assert x.shape == (4, 4, 4)


def test_argument_errors_are_raised_before_any_trace(monkeypatch):
    monkeypatch.setattr(_eager, "tiers_for", lambda n: (False, 1, 1))
    with pytest.raises(ValueError, match="broadcast"):
        random.uniform(random.key(0), (2,), minval=np.zeros(3))
    with pytest.raises(ValueError, match="broadcast"):
        random.randint(random.key(0), (2,), np.zeros(3, int), 5)
    with pytest.raises(TypeError, match="uint32 array of shape"):
        random.normal(np.array([0, 1]), (2,))


def test_executor_cached_after():
    """``cached_after``: a graph whose kernels are all in the disk cache compiles at that
    call (default 1), not earlier; ``hot_after`` still compiles one that is not cached."""
    k = random.key(0)
    graph = ft.jit(lambda k: random.uniform(k, (3,), np.float32)).lower(k).graph
    executor.Executable(graph, eager=True)(k)            # its kernels are on disk now
    ex = executor.Executable(graph, cached_after=3, hot_after=50)
    ex(k), ex(k)
    assert not ex.compiled
    ex(k)
    assert ex.compiled
    first = executor.Executable(graph)                    # default: compiled at call 1
    first(k)
    assert first.compiled


def test_results_of_earlier_calls_are_not_overwritten(route):
    """A compiled signature reuses buffer pools between calls: its outputs must not be
    among them (nor views of the key)."""
    k1, k2 = random.split(random.key(21))
    for f in (lambda k: random.normal(k, (6, 5), np.float32), lambda k: random.split(k, 4),
              lambda k: random.randint(k, (9,), 0, 100), lambda k: random.bits(k, (), np.uint8),
              lambda k: random.truncated_normal(k, -1.0, 1.0, (8,))):
        a = f(k1)
        saved = np.array(a, copy=True)
        b = f(k2)
        assert not np.shares_memory(a, b) and not np.shares_memory(a, k1)
        _same(np.asarray(a), saved)
