"""functrace.random: jax.random's keys and samplers, bit for bit where JAX's contract allows.

* Goldens (support/random_golden.py, written by tools/jax_random_golden.py from jax 0.10.2 with
  ``jax_enable_x64=True`` and JAX's default ``jax_threefry_partitionable=True``): ``PRNGKey``,
  ``key``, ``split``, ``fold_in``, ``bits``, ``uniform`` and ``normal`` equal jax's bit for bit
  (seeds incl. 64-bit and negative ones; shapes incl. () and odd sizes; float32, float64,
  complex64), eagerly (here a first call, which runs op by op for small draws;
  test_random_eager.py runs every case through the eager path's interpreter and kernels),
  traced, under ``ft.jit`` on the CPU and under the CUDA simulator; so do
  randint, permutation, choice, bernoulli, categorical, Poisson and float32
  truncated_normal, whose algorithms are bits and float32 arithmetic.
* ``test_live_jax_*``: the same against an installed jax (skipped without one).
* The other samplers: shape, dtype, determinism, and moments within statistical tolerance for
  a fixed key (deterministic, so never flaky).
* Transforms: vmap over keys equals a loop, gradients flow through reparameterised samples,
  and gamma-family samples differentiate in their shape parameters (JAX's implicit
  reparameterisation; a second derivative is a clear error).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from random_checks import words as _words
from random_golden import CASES, DIGESTS

import functrace as ft
import functrace.numpy as fnp
import functrace.random as random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXACT = ("PRNGKey", "key", "split", "fold_in", "bits", "uniform", "normal")


def _args(args, kwargs):
    args = tuple(np.asarray(a) if isinstance(a, list) else a for a in args)
    kwargs = {k: np.asarray(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    return args, kwargs


def _call(name, seed, args, kwargs):
    args, kwargs = _args(args, kwargs)
    if name in ("PRNGKey", "key"):
        return getattr(random, name)(seed)
    return getattr(random, name)(random.PRNGKey(seed), *args, **kwargs)




def _ids(cases):
    return [f"{c[0]}-{c[1]}-{c[2]}-{c[3]}".replace(" ", "") for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_golden_eager(case):
    name, seed, args, kwargs, dtype, shape, words = case
    assert _words(_call(name, seed, args, kwargs)) == (dtype, tuple(shape), words)


def test_golden_cases_cover_the_exact_contract():
    names = {c[0] for c in CASES}
    assert set(EXACT) <= names
    assert {c[3].get("dtype") for c in CASES if c[0] == "normal"} >= {"float32", "float64"}
    assert {c[2][0] for c in CASES if c[0] == "uniform"} >= {(), (1,), (7,), (3, 5)}


@pytest.mark.parametrize("name", sorted(k for k in DIGESTS if not k.startswith("erf_inv")))
def test_golden_large_samples_eager(name):
    kind, seed, dt, n, *bounds = name.split("_")
    k = random.PRNGKey(int(seed))
    if kind == "normal":
        x = random.normal(k, (int(n),), dt)
    else:
        x = random.uniform(k, (int(n),), dt, float(bounds[0]), float(bounds[1]))
    assert hashlib.sha256(x.tobytes()).hexdigest() == DIGESTS[name]


# --------------------------------------------------------------------------------------------
# every way to run it gives the same bits
# --------------------------------------------------------------------------------------------

def _jit_cases():
    """Golden cases of the exact contract with a nonempty shape, grouped by function."""
    return [c for c in CASES if c[0] in ("split", "fold_in", "bits", "uniform", "normal")
            and c[1] in (0, -1)]


def _draws(k):
    """One function drawing many ways (one compile covers them all)."""
    return (random.normal(k, (7,), np.float32), random.normal(k, (3, 5), np.float64),
            random.normal(k, (), np.float64), random.normal(k, (7,), np.complex64),
            random.uniform(k, (7,), np.float32, -2.5, 7.25), random.uniform(k, (3, 5)),
            random.bits(k, (7,), np.uint32), random.bits(k, (3, 5), np.uint64),
            random.bits(k, (1,), np.uint8), random.split(k, 3), random.split(k, (2, 3)),
            random.fold_in(k, 2**31), random.fold_in(random.fold_in(k, 1), 7))


def _same(xs, ys):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("seed", [0, -1])
def test_traced_interpreter_and_jit_equal_eager(seed):
    k = random.PRNGKey(seed)
    eager = _draws(k)
    _same(ft.trace(_draws)(k)(k), eager)                             # the reference interpreter
    _same(ft.jit(_draws, backend="numpy")(k), eager)
    _same(ft.jit(_draws, eager=True)(k), eager)                      # numba CPU kernels


def test_jit_large_samples_equal_jax():
    """Fused CPU kernels over 100,000 elements (every erf_inv branch) against jax's digests."""
    f = ft.jit(lambda k: (random.normal(k, (100000,), np.float32),
                          random.normal(k, (100000,), np.float64),
                          random.uniform(k, (100000,), np.float32, -3.0, 5.0),
                          random.uniform(k, (100000,), np.float64, -3.0, 5.0)), eager=True)
    names = ("normal_{}_float32_100000", "normal_{}_float64_100000",
             "uniform_{}_float32_100000_-3_5", "uniform_{}_float64_100000_-3_5")
    for seed in (0, 1):
        for x, name in zip(f(random.PRNGKey(seed)), names):
            assert hashlib.sha256(x.tobytes()).hexdigest() == DIGESTS[name.format(seed)]


def test_jit_compiles_once_per_shape_and_the_key_is_an_input():
    f = ft.jit(lambda k: random.normal(k, (4,)))
    k1, k2 = random.split(random.key(0))
    a, b = f(k1), f(k2)
    assert not np.array_equal(a, b)                  # not frozen at trace time
    _same([f(k1)], [a])
    _same([a, b], [random.normal(k1, (4,)), random.normal(k2, (4,))])


def test_graph_prints_and_round_trips_through_json():
    sym = ft.trace(lambda k: random.normal(k, (3,), np.float32))(random.key(0))
    text = str(sym)
    assert "threefry2x32" in text and "erf_inv_xla" in text and "fma" in text
    again = ft.Symbol.from_json(sym.to_json())
    _same([again(random.key(5))], [random.normal(random.key(5), (3,), np.float32)])


def test_cuda_simulator_equals_eager(tmp_path):
    pytest.importorskip("numba")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""),
               FUNCTRACE_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          os.path.join("tests", "support", "cuda_sim_random_cases.py")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert " passed" in out.stdout


# --------------------------------------------------------------------------------------------
# transforms
# --------------------------------------------------------------------------------------------

def test_vmap_over_keys_equals_a_loop():
    keys = random.split(random.key(3), 5)

    def f(k):
        return (random.normal(k, (4,)), random.uniform(k, (2, 3), np.float32, -1.0, 2.0),
                random.bits(k, (3,), np.uint32), random.split(k, 2), random.fold_in(k, 9),
                random.randint(k, (3,), 0, 100), random.gamma(k, 2.0, (3,)),
                random.poisson(k, 3.0, (3,)), random.permutation(k, 6))

    batched = ft.vmap(f)(keys)
    loop = [np.stack(xs) for xs in zip(*[f(k) for k in keys])]
    _same(batched, loop)
    _same(ft.jit(ft.vmap(f), eager=True)(keys), loop)


def test_vmap_over_fold_in_data_and_seeds():
    k = random.key(0)
    steps = np.arange(4)
    _same([ft.vmap(lambda i: random.fold_in(k, i))(steps)],
          [np.stack([random.fold_in(k, int(i)) for i in steps])])
    _same([ft.vmap(random.PRNGKey)(np.array([0, 42, -1]))],
          [np.stack([random.PRNGKey(s) for s in (0, 42, -1)])])


def test_gradient_through_reparameterised_samples():
    k = random.key(1)
    z = random.normal(k, (1000,))

    def loss(mu, sigma):
        return fnp.mean(mu + sigma * random.normal(k, (1000,)))

    g_mu, g_sigma = ft.grad(loss, argnums=(0, 1))(0.5, 2.0)
    assert g_mu == pytest.approx(1.0, rel=1e-15)
    np.testing.assert_allclose(g_sigma, z.mean(), rtol=1e-14)
    g = ft.jit(ft.grad(loss, argnums=(0, 1)))(0.5, 2.0)
    np.testing.assert_allclose(g, (1.0, z.mean()), rtol=1e-14)
    # second order, forward mode
    assert ft.hessian(lambda s: fnp.sum((s * random.normal(k, (3,))) ** 2))(1.0) == \
        pytest.approx(2 * np.sum(random.normal(k, (3,)) ** 2))
    _, t = ft.jvp(lambda s: s * random.normal(k, (3,)), (2.0,), (1.0,))
    _same([t], [random.normal(k, (3,))])


def test_gradient_of_uniform_bounds_and_truncated_normal():
    k = random.key(2)
    ft.test_util.check_grads(lambda lo, hi: random.uniform(k, (5,), minval=lo, maxval=hi),
                             (np.float64(-1.0), np.float64(3.0)), order=2)
    f = random.uniform(k, (5,))
    g = ft.grad(lambda lo: random.uniform(k, (5,), minval=lo, maxval=3.0).sum())(-1.0)
    np.testing.assert_allclose(g, np.sum(1 - f), rtol=1e-14)
    ft.test_util.check_grads(lambda s: s * random.truncated_normal(k, -1.0, 2.0, (4,)),
                             (np.float64(1.5),), order=1)


def test_gamma_family_shape_gradients():
    """Implicit reparameterisation: d/da E[sample] estimated from one fixed key's samples
    (deterministic) matches the mean's derivative; jit, forward mode and vmap agree."""
    k, n = random.key(0), 40000
    g = ft.grad(lambda a: fnp.mean(random.gamma(k, a, (n,))))(2.5)
    assert abs(g - 1.0) < 0.02                                    # E = a
    g = ft.grad(lambda a: fnp.mean(random.gamma(k, a, (n,))))(0.2)
    assert abs(g - 1.0) < 0.05
    a, b = 2.0, 3.0                                               # E = a / (a + b)
    g = ft.grad(lambda a: fnp.mean(random.beta(k, a, b, (n,))))(a)
    assert abs(g - b / (a + b) ** 2) < 0.005
    alpha = np.array([1.0, 2.0, 3.0])                              # E[x0] = a0 / sum
    g = ft.grad(lambda s: fnp.mean(random.dirichlet(k, alpha * s, (n // 4,))[:, 0]))(1.0)
    assert abs(g) < 0.005                                          # scale-invariant mean
    _, t = ft.jvp(lambda a: random.gamma(k, a, (5,)), (2.0,), (1.0,))
    np.testing.assert_allclose(t, ft.jacrev(lambda a: random.gamma(k, a, (5,)))(2.0))
    np.testing.assert_allclose(ft.jit(ft.grad(lambda a: fnp.sum(random.t(k, a, (5,)))))(4.0),
                               ft.grad(lambda a: fnp.sum(random.t(k, a, (5,))))(4.0))
    with pytest.raises(ft.MissingRuleError):
        ft.grad(ft.grad(lambda a: fnp.sum(random.gamma(k, a, (3,)))))(2.0)


# --------------------------------------------------------------------------------------------
# the other samplers: shapes, dtypes, determinism, moments
# --------------------------------------------------------------------------------------------

N = 40000
K = random.key(2024)


def _moments(x, mean, var, ns=6.0):
    """Sample mean and variance within ``ns`` standard errors (a fixed key: deterministic)."""
    x = np.asarray(x, np.float64)
    n = x.size
    assert abs(x.mean() - mean) <= ns * np.sqrt(var / n), (x.mean(), mean)
    # the variance's standard error uses the fourth moment; 4 var**2 / n bounds it for
    # the light-tailed cases tested here
    assert abs(x.var() - var) <= ns * 2 * var / np.sqrt(n) * 1.5, (x.var(), var)


SAMPLERS = {
    "uniform": (lambda k, s, d: random.uniform(k, s, d, -1.0, 3.0), 1.0, 16 / 12),
    "normal": (lambda k, s, d: random.normal(k, s, d), 0.0, 1.0),
    "truncated_normal": (lambda k, s, d: random.truncated_normal(k, 0.0, 10.0, s, d),
                         np.sqrt(2 / np.pi), 1 - 2 / np.pi),
    "exponential": (lambda k, s, d: random.exponential(k, s, d), 1.0, 1.0),
    "laplace": (lambda k, s, d: random.laplace(k, s, d), 0.0, 2.0),
    "logistic": (lambda k, s, d: random.logistic(k, s, d), 0.0, np.pi ** 2 / 3),
    "gumbel": (lambda k, s, d: random.gumbel(k, s, d), np.euler_gamma, np.pi ** 2 / 6),
    "gamma": (lambda k, s, d: random.gamma(k, 2.5, s, d), 2.5, 2.5),
    "gamma_small": (lambda k, s, d: random.gamma(k, 0.3, s, d), 0.3, 0.3),
    "beta": (lambda k, s, d: random.beta(k, 2.0, 5.0, s, d), 2 / 7, 10 / (49 * 8)),
    "t": (lambda k, s, d: random.t(k, 9.0, s, d), 0.0, 9 / 7),
    "dirichlet0": (lambda k, s, d: random.dirichlet(k, np.array([1.0, 2.0, 3.0]), s, d)[..., 0],
                   1 / 6, 5 / 252),
    "multivariate_normal": (lambda k, s, d: random.multivariate_normal(
        k, np.array([1.0, -1.0]), np.array([[2.0, 0.6], [0.6, 1.0]]), s, d)[..., 0], 1.0, 2.0),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_samplers(name, dt):
    f, mean, var = SAMPLERS[name]
    x = f(K, (N,), dt)
    assert x.shape == (N,) and x.dtype == dt
    _moments(x, mean, var)
    small = f(K, (2, 3), dt)
    assert small.shape == (2, 3) and small.dtype == dt
    _same([f(K, (2, 3), dt)], [small])                           # deterministic
    assert not np.array_equal(f(random.key(7), (2, 3), dt), small)


def test_cauchy():
    x = random.cauchy(K, (N,))
    assert x.dtype == np.float64 and x.shape == (N,)
    assert abs(np.median(x)) < 0.03
    assert abs(np.mean(np.abs(x) < 1) - 0.5) < 0.01               # quartiles at -1, 1


def test_discrete_samplers():
    b = random.bernoulli(K, 0.3, (N,))
    assert b.dtype == np.bool_
    _moments(b, 0.3, 0.21)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    c = random.categorical(K, np.log(p), shape=(N,))
    assert c.dtype == np.int64 and c.shape == (N,)
    np.testing.assert_allclose(np.bincount(c, minlength=4) / N, p, atol=0.01)
    c2 = random.categorical(K, np.log(np.tile(p, (3, 1))), axis=1, shape=(N // 10, 3))
    assert c2.shape == (N // 10, 3)
    r = random.randint(K, (N,), -3, 7)
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 6
    _moments(r, 1.5, (10 ** 2 - 1) / 12)
    assert random.randint(K, (5,), 0, 10, np.uint8).dtype == np.uint8
    assert (random.randint(K, (5,), 4, 4) == 4).all()              # empty range: minval
    lam = random.poisson(K, 3.5, (N,))
    assert lam.dtype == np.int64
    _moments(lam, 3.5, 3.5)
    big = random.poisson(K, 250.0, (N,), np.int32)
    assert big.dtype == np.int32
    _moments(big, 250.0, 250.0)


def test_permutation_and_choice():
    perm = random.permutation(K, 50)
    assert sorted(perm) == list(range(50)) and not np.array_equal(perm, np.arange(50))
    x = np.arange(12.0).reshape(3, 4)
    cols = random.permutation(K, x, axis=1)
    assert sorted(map(tuple, cols.T)) == sorted(map(tuple, x.T))
    ind = random.permutation(K, x, axis=1, independent=True)
    assert all(sorted(r) == sorted(s) for r, s in zip(ind, x))
    c = random.choice(K, 10, (N,))
    np.testing.assert_allclose(np.bincount(c) / N, np.full(10, 0.1), atol=0.01)
    no = random.choice(K, np.arange(100) * 2, (30,), replace=False)
    assert len(set(no.tolist())) == 30 and no.shape == (30,)
    p = np.array([0.5, 0.0, 0.5])
    cp = random.choice(K, 3, (N,), p=p)
    assert not (cp == 1).any()
    np.testing.assert_allclose(np.mean(cp == 0), 0.5, atol=0.01)
    assert random.choice(K, x, (2,), axis=1).shape == (3, 2)
    with pytest.raises(ValueError, match="larger sample"):
        random.choice(K, 3, (4,), replace=False)


def test_keys_and_arguments():
    assert random.key(7).tobytes() == random.PRNGKey(7).tobytes()
    _same([random.key_data(random.key(7))], [random.key(7)])
    _same([random.wrap_key_data(np.array([1, 2], np.uint32))], [np.array([1, 2], np.uint32)])
    with pytest.raises(TypeError, match="uint32 array of shape"):
        random.normal(np.array([0, 1]), (2,))                # int64: not a key
    with pytest.raises(TypeError, match="with ft\\.vmap"):
        random.normal(random.split(random.key(0)), (2,))      # a batch of keys
    with pytest.raises(TypeError, match="integer scalar"):
        random.key(1.5)
    with pytest.raises(ValueError, match="dtype"):
        random.uniform(random.key(0), (2,), np.int32)
    with pytest.raises(ValueError, match="broadcast"):
        random.uniform(random.key(0), (2,), minval=np.zeros(3))
    assert random.uniform(random.key(0), 3).shape == (3,)     # an int shape is accepted
    assert random.bits(random.key(0)).dtype == np.uint64      # numpy's (x64 JAX's) default


def test_samplers_under_jit_equal_eager():
    def f(k):
        return (random.gamma(k, np.array([0.5, 3.0]), (4, 2)), random.beta(k, 2.0, 3.0, (3,)),
                random.poisson(k, np.array([2.0, 40.0])), random.choice(k, 5, (3,)),
                random.categorical(k, np.zeros(4), shape=(3,)), random.exponential(k, (3,)),
                random.truncated_normal(k, -1.0, 1.0, (3,)))
    _same(ft.jit(f, eager=True)(K), f(K))


# --------------------------------------------------------------------------------------------
# live comparison with jax, when it is installed (never a dependency)
# --------------------------------------------------------------------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def test_live_jax_agrees():
    jax = _jax()
    jnp = jax.numpy
    rng = np.random.default_rng(0)
    seeds = [int(s) for s in rng.integers(-2**63, 2**63 - 1, 6, dtype=np.int64)] + [0, 2**40]
    for seed in seeds:
        jk, k = jax.random.PRNGKey(seed), random.PRNGKey(seed)
        pairs = [(jk, k), (jax.random.split(jk, 5), random.split(k, 5)),
                 (jax.random.fold_in(jk, seed & 0xFFFF), random.fold_in(k, seed & 0xFFFF))]
        for shape in [(), (11,), (4, 3)]:
            pairs += [(jax.random.bits(jk, shape, jnp.uint32), random.bits(k, shape, np.uint32)),
                      (jax.random.bits(jk, shape), random.bits(k, shape))]
            for dt in (jnp.float32, jnp.float64):
                pairs += [(jax.random.uniform(jk, shape, dt, -0.3, 1e3),
                           random.uniform(k, shape, dt, -0.3, 1e3)),
                          (jax.random.normal(jk, shape, dt), random.normal(k, shape, dt))]
        pairs += [(jax.random.randint(jk, (9,), -50, 50), random.randint(k, (9,), -50, 50)),
                  (jax.random.permutation(jk, 9), random.permutation(k, 9)),
                  (jax.random.poisson(jk, 20.0, (9,)), random.poisson(k, 20.0, (9,)))]
        for a, b in pairs:
            _same([np.asarray(a)], [b])
    # functrace keys feed jax and back
    jk = jax.random.split(jnp.asarray(random.key(5)))
    _same([np.asarray(jk)], [random.split(random.key(5))])
    # the other samplers follow jax's algorithms; their log/tan/pow are numpy's, not XLA's
    jk, k = jax.random.PRNGKey(3), random.PRNGKey(3)
    for name, args in [("gamma", (2.0, (50,))), ("exponential", ((50,),)),
                       ("beta", (2.0, 3.0, (50,))), ("t", (4.0, (50,))),
                       ("gumbel", ((50,),)), ("laplace", ((50,),))]:
        np.testing.assert_allclose(getattr(random, name)(k, *args),
                                   np.asarray(getattr(jax.random, name)(jk, *args)),
                                   rtol=1e-12, atol=1e-14, err_msg=name)
    # and their implicit reparameterisation gradients
    for name in ("gamma", "loggamma", "t"):
        for a in (0.3, 4.0):
            want = jax.grad(lambda a: getattr(jax.random, name)(jk, a, (20,)).sum())(a)
            got = ft.grad(lambda a: fnp.sum(getattr(random, name)(k, a, (20,))))(a)
            np.testing.assert_allclose(got, float(want), rtol=1e-9, err_msg=name)
    want = jax.grad(lambda a: jax.random.beta(jk, a, 2.0, (20,)).sum())(1.5)
    np.testing.assert_allclose(ft.grad(lambda a: fnp.sum(random.beta(k, a, 2.0, (20,))))(1.5),
                               float(want), rtol=1e-9)


def test_docstring_examples():
    import doctest

    from functrace.ops import random as ops_random
    from functrace.ops import random_rejection, scalar_recipe, xla_math
    from functrace.random import _eager, _keys, _samplers
    for module in (_keys, _samplers, _eager, ops_random, random_rejection, scalar_recipe, xla_math):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, module.__name__


def test_every_public_function_has_an_example_and_the_doc_runs():
    for name in random.__all__:
        doc = getattr(random, name).__doc__ or ""
        assert ">>>" in doc, f"random.{name} has no example"
    text = open(os.path.join(ROOT, "docs", "random.md")).read()
    block = text.split("```python\n")[1].split("```")[0]
    namespace: dict = {}
    exec(compile(block, "docs/random.md", "exec"), namespace)
    g = namespace["ft"].grad(namespace["loss"], argnums=(0, 1))(0.0, 1.0)
    assert g[0] == pytest.approx(1.0)
