"""functrace.scipy: table coverage, the CPU kernels' accuracy (far tails, near poles), and the
behaviours the OpCase table cannot express (special values, missing partials, dtypes).

Accuracy is measured in ulps of the exact value (mpmath at 40 digits) on a few thousand
points per function and range, through ``ft.jit`` (our numba kernels, not scipy). Points near
the roots of log-gamma and digamma for x < 0, where the reflection formula cancels (scipy's
too), are checked with an absolute error instead.
"""

from __future__ import annotations

import numpy as np
import pytest
from op_cases import CASES

import functrace as ft
import functrace.scipy.special as fsp
import functrace.scipy.stats as fst

mp = pytest.importorskip("mpmath")
S = pytest.importorskip("scipy.special")

def _jit(f):
    """``ft.jit`` that compiles on the first call (the kernels, not the reference), and
    fails where a kernel would not compile (the executor would fall back to scipy)."""
    jf = ft.jit(f, eager=True)

    def run(*args):
        out = jf(*args)
        ex = next(iter(jf._cache.values())).run
        ex.lower()
        assert not ex.compile_failures, ex.compile_failures
        return out
    return run


_DISTS_CONT = ("norm", "logistic", "laplace", "expon", "cauchy", "uniform", "lognorm", "t",
               "chi2", "gamma", "beta")
_DISTS_DISC = ("poisson", "bernoulli", "binom", "geom", "nbinom")


def test_table_covers_every_public_scipy_name():
    # special and stats here; scipy.linalg and scipy.signal have their own coverage checks
    covered = {c.covers for c in CASES if c.covers.startswith(("scipy.special.",
                                                               "scipy.stats."))}
    want = {f"scipy.special.{n}" for n in fsp.__all__}
    for d in _DISTS_CONT:
        want |= {f"scipy.stats.{d}.{m}" for m in ("logpdf", "pdf", "cdf", "logcdf", "sf",
                                                  "logsf")}
    for d in _DISTS_DISC:
        want |= {f"scipy.stats.{d}.{m}" for m in ("logpmf", "pmf", "cdf", "logcdf", "sf",
                                                  "logsf")}
    for d in ("multivariate_normal", "dirichlet"):
        want |= {f"scipy.stats.{d}.{m}" for m in ("logpdf", "pdf")}
    assert set(fst.__all__) == set(_DISTS_CONT + _DISTS_DISC
                                   + ("multivariate_normal", "dirichlet"))
    assert not want - covered, f"functrace.scipy names with no OpCase row: {want - covered}"
    assert not covered - want, f"rows naming no functrace.scipy name: {covered - want}"


# --------------------------------------------------------------------------------------------
# kernel accuracy against mpmath
# --------------------------------------------------------------------------------------------

mp.mp.dps = 40
_rng = np.random.default_rng(7)


def _u(a, b, n=400):
    return _rng.uniform(a, b, n)


def _lu(a, b, n=400):
    return np.exp(_rng.uniform(np.log(a), np.log(b), n))


def _exact(f, xs):
    out = np.empty(len(xs))
    for i, x in enumerate(xs):
        v = f(mp.mpf(float(x)))
        out[i] = float(mp.re(v))
    return out


def _max_ulp(got, want):
    ok = np.isfinite(want) & (want != 0)
    assert np.array_equal(np.isfinite(got), np.isfinite(want)), "inf/NaN placement differs"
    return float(np.max(np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))))


def _mp_erfcx(x):
    if x > 1e6:       # the asymptotic series, exact to far below an ulp here
        return (1 - 1 / (2 * x * x) + 3 / (4 * x**4)) / (x * mp.sqrt(mp.pi))
    return mp.exp(x * x) * mp.erfc(x)


def _mp_ndtri(p):
    if p > 1e-10:
        return -mp.sqrt(2) * mp.erfinv(1 - 2 * p)
    return mp.findroot(lambda x: mp.log(mp.ncdf(x)) - mp.log(p), -mp.sqrt(-2 * mp.log(p)))


# (name, functrace function, mpmath reference, points, asserted max ulp); the measured
# maxima (docs/scipy.md) are 2-3 ulp
ACCURACY = [
    ("erf", fsp.erf, mp.erf, np.r_[_u(-6, 6), _lu(1e-300, 1e-3)], 3),
    ("erfc", fsp.erfc, mp.erfc, np.r_[_u(-6, 6), _u(0.5, 27.2), _lu(1e-300, 1e-3)], 4),
    ("erfcx", fsp.erfcx, _mp_erfcx, np.r_[_u(-26, 10), _u(10, 1e5), _lu(1e-300, 1e300)], 4),
    ("erfinv", fsp.erfinv, mp.erfinv, np.r_[_u(-1, 1), 1 - _lu(1e-16, 0.1), _lu(1e-300, 1e-3)],
     4),
    ("erfcinv", fsp.erfcinv, lambda y: mp.erfinv(1 - y), np.r_[_u(0.01, 1.99)], 4),
    ("ndtri", fsp.ndtri, _mp_ndtri, np.r_[_u(0.001, 0.999), _lu(1e-300, 1e-3, 100)], 4),
    ("gammaln", fsp.gammaln, mp.loggamma,
     np.r_[_u(0, 20), _lu(1e-300, 1e300), _u(0.9, 1.1), _u(1.9, 2.1)], 4),
    ("digamma", fsp.digamma, mp.digamma, np.r_[_u(0, 20), _lu(1e-300, 1e300), _u(1.4, 1.5)], 4),
    ("polygamma1", lambda x: fsp.polygamma(1, x), lambda x: mp.polygamma(1, x),
     np.r_[_u(0.01, 30), _u(-5.9, -0.1)], 8),
    ("i0e", fsp.i0e, lambda x: mp.exp(-abs(x)) * mp.besseli(0, x),
     np.r_[_u(-30, 30), _lu(1e-300, 1e300)], 4),
    ("i1e", fsp.i1e, lambda x: mp.exp(-abs(x)) * mp.besseli(1, x),
     np.r_[_u(-30, 30), _lu(1e-300, 1e300), -_lu(1e-300, 1e3)], 4),
]


@pytest.mark.parametrize("name, f, ref, xs, bound", ACCURACY, ids=[a[0] for a in ACCURACY])
def test_kernel_accuracy(name, f, ref, xs, bound):
    got = np.asarray(_jit(f)(xs))
    assert _max_ulp(got, _exact(ref, xs)) <= bound


def test_reflection_near_negative_roots_is_absolutely_accurate():
    xs = _u(-20, -0.01, 1500)
    xs = xs[np.abs(xs - np.round(xs)) > 1e-3]
    got = np.asarray(_jit(fsp.gammaln)(xs))
    want = _exact(lambda x: mp.log(abs(mp.gamma(x))), xs)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=2e-14)
    got = np.asarray(_jit(fsp.digamma)(xs))
    np.testing.assert_allclose(got, _exact(mp.digamma, xs), rtol=1e-13, atol=1e-12)


def test_float32_kernels_round_once():
    xs = _u(0.05, 6, 2000).astype(np.float32)
    for f, g in ((fsp.gammaln, S.gammaln), (fsp.erfc, S.erfc), (fsp.digamma, S.digamma),
                 (fsp.i0e, S.i0e)):
        got = _jit(f)(xs)
        assert got.dtype == np.float32
        want = g(xs.astype(np.float64)).astype(np.float32)
        assert np.max(np.abs(got - want) / np.spacing(np.abs(want))) <= 1


# --------------------------------------------------------------------------------------------
# special values (scipy's), tails, missing partials
# --------------------------------------------------------------------------------------------

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -2.0, 1.0, 2.0, 0.5, 1e-310,
                     -1e-310, 1e300, -1e300])


@pytest.mark.parametrize("name", ["erf", "erfc", "erfcx", "erfinv", "erfcinv", "ndtri",
                                  "gammaln", "digamma", "i0e", "i1e", "ndtr", "log_ndtr",
                                  "expit", "log_expit", "entr"])
def test_special_values_match_scipy(name):
    x = SPECIALS if name != "gammaln" else SPECIALS[np.abs(SPECIALS) != 1e-310]
    got = np.asarray(_jit(getattr(fsp, name))(x))
    want = getattr(S, name)(x)
    same = (got == want) | (np.isnan(got) & np.isnan(want)) | (
        np.isfinite(want) & (np.abs(got - want) <= 4 * np.spacing(np.abs(want))))
    assert same.all(), (name, x[~same], got[~same], want[~same])


def test_gammaln_of_subnormals_is_finite():
    # scipy returns inf for |x| < 2**-1022; the value is -log|x| (docs/scipy.md)
    got = _jit(fsp.gammaln)(np.array([1e-310, -1e-310]))
    np.testing.assert_allclose(got, -np.log(1e-310), rtol=1e-15)


def test_log_ndtr_far_tail_and_its_gradient():
    x = np.array([-1e5, -1e3, -40.0, -10.0])
    got = _jit(fsp.log_ndtr)(x)
    np.testing.assert_allclose(got, S.log_ndtr(x), rtol=1e-14)
    g = _jit(ft.grad(lambda x: fsp.log_ndtr(x).sum()))(x)
    want = _exact(lambda t: mp.npdf(t) / mp.ncdf(t), x)     # d/dx log ndtr = pdf / cdf
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_missing_partials_are_errors_not_zeros():
    # (the incomplete gamma/beta functions' third derivatives in a, b: test_scipy_incomplete)
    with pytest.raises(ft.MissingRuleError, match=r"zeta.*'s'"):
        ft.grad(lambda s: fsp.zeta(s, 1.5))(2.0)


def test_higher_order_gradients_through_the_gamma_family():
    x = 2.5
    np.testing.assert_allclose(ft.grad(ft.grad(ft.grad(fsp.gammaln)))(x), S.polygamma(2, x),
                               rtol=1e-13)
    np.testing.assert_allclose(ft.grad(ft.grad(fsp.erfinv))(0.3),
                               (lambda y: np.pi * y * np.exp(2 * y * y) / 2)(S.erfinv(0.3)),
                               rtol=1e-13)


def test_logsumexp_return_sign_and_dtypes():
    a = np.array([0.0, 1.0, 2.0])
    b = np.array([1.0, -3.0, 0.5])
    got = ft.trace(lambda a, b: fsp.logsumexp(a, b=b, return_sign=True))(a, b)(a, b)
    want = S.logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    assert got[1] == want[1]
    assert _jit(fsp.erf)(np.float32([0.5])).dtype == np.float32
    assert _jit(lambda x: fsp.polygamma(1, x))(np.float32([0.5])).dtype == np.float64


def test_stats_gradients_in_parameters():
    g = ft.grad(lambda mu, s: fst.norm.logpdf(1.3, mu, s), argnums=(0, 1))(0.2, 0.7)
    z = (1.3 - 0.2) / 0.7
    np.testing.assert_allclose(g, (z / 0.7, (z * z - 1) / 0.7), rtol=1e-13)
    g = ft.grad(lambda p: fst.binom.logpmf(3.0, 10.0, p))(0.4)
    np.testing.assert_allclose(g, 3 / 0.4 - 7 / 0.6, rtol=1e-13)


def test_zeta_and_polygamma_far_left_are_summed_in_closed_form():
    """The kernel's Hurwitz zeta at q < -1000 (integer s) sums the terms at negative k + q in
    closed form: summed one by one they took 5 s at q = -1e8 under jit, and near -2**51 never
    ended. Values are scipy's (which sums them one by one)."""
    x = np.array([-1000.7, -999.2, -1e4 - 0.5, -123456.789])
    # odd s at a half-integer q: the terms cancel to ~5e-9 from sums of ~8, in scipy's order
    # and in ours, so both are right to ~1e-15 absolute only
    np.testing.assert_allclose(_jit(lambda x: fsp.zeta(3.0, x))(x), S.zeta(3.0, x),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(_jit(lambda x: fsp.polygamma(1, x))(x), S.polygamma(1, x),
                               rtol=1e-13)
    # scipy 1.17.1's polygamma(1, -1e8 - 0.5), after 8.5 s of summing
    far = np.array([-1e8 - 0.5, -2.0**51 + 0.5])
    got = _jit(lambda x: fsp.polygamma(1, x))(far)
    np.testing.assert_allclose(got[0], 9.869604391089359, rtol=1e-13)
    assert np.isfinite(got[1])
