"""The ``functrace.scipy`` block of the OpCase table (``op_cases.py`` adds these rows at its
end): one row per public function of ``functrace.scipy.special`` and per method of each
``functrace.scipy.stats`` distribution. A row's covered name is ``scipy.special.<fn>`` or
``scipy.stats.<dist>.<method>``; ``tests/ops/test_scipy.py`` checks that every public name
is covered.

Special functions are scipy's own outside a transform, so their eager check is exact; the
traced check compares our ops and kernels with scipy. The stats methods are compositions
eagerly too: they are compared with scipy.stats within rounding (``exact=False``), with the
result cast to the argument dtype (functrace keeps float32 where scipy.stats widens).
"""

from __future__ import annotations

import numpy as np
import scipy.special as S
import scipy.stats as SS

import functrace.scipy.special as fsp
import functrace.scipy.stats as fst

F = ("float64", "float32")
F64 = ("float64",)


def _pos(lo, hi):
    def s(rng, shape, dt):
        return np.asarray(rng.uniform(lo, hi, shape)).astype(dt)
    return s


def add_rows(case):
    """Append the rows through op_cases' ``case(name, fn, shapes, **kw)``."""

    def sp(name, variant, fn, ref, shapes=((2, 3),), **kw):
        case(f"scipy.special.{name}:{variant}", fn, shapes, np_fn=ref, **kw)

    t32 = (2e-2, 2e-2)
    # ---- error functions and the normal distribution ----
    sp("erf", "plain", fsp.erf, S.erf)
    sp("erfc", "plain", fsp.erfc, S.erfc)
    sp("erfc", "tail", fsp.erfc, S.erfc, domain=(3.0, 8.0), dtypes=F64, rtol=1e-4)
    sp("erfcx", "plain", fsp.erfcx, S.erfcx, domain=(-1.5, 4.0))
    sp("erfinv", "plain", fsp.erfinv, S.erfinv, domain=(-0.9, 0.9), tol32=t32)
    sp("erfcinv", "plain", fsp.erfcinv, S.erfcinv, domain=(0.1, 1.9), tol32=t32)
    sp("ndtr", "plain", fsp.ndtr, S.ndtr, domain=(-4.0, 4.0))
    sp("ndtri", "plain", fsp.ndtri, S.ndtri, domain=(0.05, 0.95), tol32=t32)
    sp("log_ndtr", "plain", fsp.log_ndtr, S.log_ndtr, domain=(-5.0, 5.0))
    sp("log_ndtr", "far_tail", fsp.log_ndtr, S.log_ndtr, domain=(-60.0, -20.0), dtypes=F64)
    # ---- gamma family ----
    sp("gammaln", "plain", fsp.gammaln, S.gammaln, domain=(0.3, 6.0))
    sp("gammaln", "negative", fsp.gammaln, S.gammaln, domain=(-2.8, -2.6), dtypes=F64)
    sp("gamma", "plain", fsp.gamma, S.gamma, domain=(0.3, 5.0))
    sp("loggamma", "plain", fsp.loggamma, S.loggamma, domain=(0.3, 6.0))
    sp("digamma", "plain", fsp.digamma, S.digamma, domain=(0.3, 6.0), tol32=t32)
    sp("psi", "plain", fsp.psi, S.psi, domain=(0.5, 4.0), dtypes=F64)
    sp("polygamma", "n1", lambda x: fsp.polygamma(1, x), lambda x: S.polygamma(1, x),
       domain=(0.5, 4.0), dtypes=F64)
    sp("polygamma", "n3", lambda x: fsp.polygamma(3, x), lambda x: S.polygamma(3, x),
       domain=(0.5, 4.0), dtypes=F64)
    sp("multigammaln", "d3", lambda a: fsp.multigammaln(a, 3), lambda a: S.multigammaln(a, 3),
       shapes=((),), domain=(2.0, 5.0), dtypes=F64)
    sp("betaln", "plain", fsp.betaln, S.betaln, ((2, 3), (2, 3)), domain=(0.3, 5.0))
    sp("beta", "plain", fsp.beta, S.beta, ((2, 3), (3,)), domain=(0.3, 4.0))
    sp("zeta", "q", lambda q: fsp.zeta(3.5, q), lambda q: S.zeta(3.5, q), domain=(0.5, 4.0),
       tol32=t32)
    sp("zeta", "riemann", lambda x: fsp.zeta(x) * 0 + fsp.zeta(x, 2.0),
       lambda x: S.zeta(x) * 0 + S.zeta(x, 2.0), domain=(1.5, 4.0), order=None)
    sp("gammainc", "x", lambda x: fsp.gammainc(2.5, x), lambda x: S.gammainc(2.5, x),
       domain=(0.2, 5.0), dtypes=F64)
    sp("gammaincc", "x", lambda x: fsp.gammaincc(2.5, x), lambda x: S.gammaincc(2.5, x),
       domain=(0.2, 5.0), dtypes=F64)
    sp("betainc", "x", lambda x: fsp.betainc(2.0, 3.5, x), lambda x: S.betainc(2.0, 3.5, x),
       domain=(0.1, 0.9), dtypes=F64)
    # every operand differentiable (the shape parameters through gammainc_da / betainc_dab),
    # to order 2; both sides of x = a (series and continued fraction) and of the mean
    sp("gammainc", "a_x", fsp.gammainc, S.gammainc, ((2, 3), (2, 3)),
       domain=((0.3, 6.0), (0.2, 8.0)), tol32=t32)
    sp("gammaincc", "a_x", fsp.gammaincc, S.gammaincc, ((2, 3), (3,)),
       domain=((0.3, 6.0), (0.2, 8.0)), tol32=t32)
    sp("gammainc", "large_a", fsp.gammainc, S.gammainc, ((3,), (3,)),
       domain=lambda rng: [np.array([40.0, 150.0, 400.0]), np.array([36.0, 160.0, 390.0])],
       dtypes=F64)
    sp("betainc", "a_b_x", fsp.betainc, S.betainc, ((2, 3), (2, 3), (2, 3)),
       domain=((0.4, 6.0), (0.4, 6.0), (0.05, 0.95)), tol32=t32)
    sp("betainc", "bcast", fsp.betainc, S.betainc, ((), (3,), (2, 3)),
       domain=((1.5, 3.0), (0.5, 8.0), (0.1, 0.9)), dtypes=F64)
    # ---- logistic and log-space ----
    sp("expit", "plain", fsp.expit, S.expit, domain=(-6.0, 6.0))
    sp("logit", "plain", fsp.logit, S.logit, domain=(0.05, 0.95))
    sp("log_expit", "plain", fsp.log_expit, S.log_expit, domain=(-30.0, 30.0))
    sp("xlogy", "plain", fsp.xlogy, S.xlogy, ((2, 3), (2, 3)), domain=((-2.0, 2.0), (0.2, 3.0)))
    sp("xlogy", "zero", lambda y: fsp.xlogy(np.zeros(3), y), lambda y: S.xlogy(np.zeros(3), y),
       ((3,),), domain=(0.0, 1.0), dtypes=F64, order=None)
    sp("xlog1py", "plain", fsp.xlog1py, S.xlog1py, ((2, 3), (3,)),
       domain=((-2.0, 2.0), (-0.8, 3.0)))
    sp("entr", "plain", fsp.entr, S.entr, domain=(0.1, 3.0))
    sp("rel_entr", "plain", fsp.rel_entr, S.rel_entr, ((2, 3), (2, 3)), domain=(0.1, 3.0))
    sp("kl_div", "plain", fsp.kl_div, S.kl_div, ((2, 3), (2, 3)), domain=(0.1, 3.0))
    sp("logsumexp", "axis", lambda x: fsp.logsumexp(x, axis=1),
       lambda x: S.logsumexp(x, axis=1))
    sp("logsumexp", "b_keepdims", lambda x, b: fsp.logsumexp(x, axis=0, b=b, keepdims=True),
       lambda x, b: S.logsumexp(x, axis=0, b=b, keepdims=True), ((2, 3), (2, 3)),
       domain=((-2.0, 2.0), (0.5, 2.0)))
    sp("logsumexp", "return_sign",
       lambda x, b: fsp.logsumexp(x, b=b, return_sign=True)[0],
       lambda x, b: S.logsumexp(x, b=b, return_sign=True)[0], ((4,), (4,)),
       domain=lambda rng: [rng.uniform(-1, 1, 4), np.array([1.0, -0.3, 0.2, -0.4])], dtypes=F64)
    sp("softmax", "axis", lambda x: fsp.softmax(x, axis=1), lambda x: S.softmax(x, axis=1))
    sp("softmax", "all", fsp.softmax, S.softmax, dtypes=F64)
    sp("log_softmax", "axis", lambda x: fsp.log_softmax(x, axis=-1),
       lambda x: S.log_softmax(x, axis=-1))
    # ---- Bessel and sinc ----
    sp("i0", "plain", fsp.i0, S.i0, domain=(-10.0, 10.0))
    sp("i0e", "plain", fsp.i0e, S.i0e, domain=(-12.0, 12.0))
    sp("i1", "plain", fsp.i1, S.i1, domain=(-10.0, 10.0))
    sp("i1e", "plain", fsp.i1e, S.i1e, domain=(-12.0, 12.0))
    sp("sinc", "plain", fsp.sinc, np.sinc, domain=(0.2, 2.0))

    # ---- stats ----
    def st(dist, method, fn, ref, shapes, **kw):
        def np_fn(*a):
            dt = np.result_type(*a)
            return np.asarray(ref(*a)).astype(dt if dt == np.float32 else np.float64)
        case(f"scipy.stats.{dist}.{method}:plain", fn, shapes, np_fn=np_fn, exact=False,
             tol32=kw.pop("tol32", t32), **kw)

    x3 = ((2, 3),)
    for m in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"):
        # float32 log of an incomplete beta/gamma near 1 keeps ~5 digits: float64 rows only
        inc = F64 if m in ("logcdf", "logsf") else F
        st("norm", m, lambda x, mu, s, m=m: getattr(fst.norm, m)(x, loc=mu, scale=s),
           lambda x, mu, s, m=m: getattr(SS.norm, m)(x, loc=mu, scale=s),
           x3 + ((3,), ()), domain=((-3.0, 3.0), (-1.0, 1.0), (0.5, 2.0)))
        st("logistic", m, lambda x, mu, s, m=m: getattr(fst.logistic, m)(x, mu, s),
           lambda x, mu, s, m=m: getattr(SS.logistic, m)(x, mu, s),
           x3 + ((3,), ()), domain=((-3.0, 3.0), (-1.0, 1.0), (0.5, 2.0)))
        st("laplace", m, lambda x, s, m=m: getattr(fst.laplace, m)(x, scale=s),
           lambda x, s, m=m: getattr(SS.laplace, m)(x, scale=s),
           x3 + ((),), domain=(lambda rng, sh, dt: (rng.uniform(0.2, 3, sh) * rng.choice(
               [-1, 1], sh)).astype(dt), (0.5, 2.0)))
        st("expon", m, lambda x, s, m=m: getattr(fst.expon, m)(x, scale=s),
           lambda x, s, m=m: getattr(SS.expon, m)(x, scale=s),
           x3 + ((),), domain=((0.1, 3.0), (0.5, 2.0)))
        st("cauchy", m, lambda x, mu, m=m: getattr(fst.cauchy, m)(x, loc=mu),
           lambda x, mu, m=m: getattr(SS.cauchy, m)(x, loc=mu),
           x3 + ((),), domain=((-3.0, 3.0), (-0.5, 0.5)))
        st("uniform", m, lambda x, s, m=m: getattr(fst.uniform, m)(x, 0.0, s),
           lambda x, s, m=m: getattr(SS.uniform, m)(x, 0.0, s),
           x3 + ((),), domain=((0.1, 0.9), (1.1, 2.0)))
        st("lognorm", m, lambda x, s, m=m: getattr(fst.lognorm, m)(x, s),
           lambda x, s, m=m: getattr(SS.lognorm, m)(x, s),
           x3 + ((),), domain=((0.2, 3.0), (0.5, 1.5)))
        # the shape parameters (df, a, b) are arguments of every method: the cdf/sf rows
        # differentiate the incomplete gamma/beta functions in them too
        st("t", m, lambda x, df, m=m: getattr(fst.t, m)(x, df),
           lambda x, df, m=m: getattr(SS.t, m)(x, df),
           x3 + ((),), domain=((-3.0, 3.0), (2.0, 6.0)),
           dtypes=inc)
        st("chi2", m, lambda x, df, m=m: getattr(fst.chi2, m)(x, df),
           lambda x, df, m=m: getattr(SS.chi2, m)(x, df),
           x3 + ((),), domain=((0.3, 5.0), (2.5, 6.0)),
           dtypes=inc)
        st("gamma", m, lambda x, a, s, m=m: getattr(fst.gamma, m)(x, a, scale=s),
           lambda x, a, s, m=m: getattr(SS.gamma, m)(x, a, scale=s),
           x3 + ((), ()), domain=((0.3, 5.0), (1.5, 4.0), (0.5, 2.0)),
           dtypes=inc)
        # float32 cdf/sf of beta eagerly run scipy's float32 betainc loop (Boost in single
        # precision, 1e-5 off at some points): float64 rows only (the special rows cover f32)
        st("beta", m, lambda x, a, b, m=m: getattr(fst.beta, m)(x, a, b),
           lambda x, a, b, m=m: getattr(SS.beta, m)(x, a, b),
           x3 + ((), ()), domain=((0.1, 0.9), (1.5, 4.0), (1.5, 4.0)),
           dtypes=F if m in ("logpdf", "pdf") else F64)
    # discrete: the counts are fixed (finite differences in k would cross integers)
    K = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 6.0]])
    B01 = np.array([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    for m in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"):
        dts = F64   # float64 counts: the results are float64 (as scipy's)
        st("poisson", m, lambda mu, m=m: getattr(fst.poisson, m)(K, mu),
           lambda mu, m=m: getattr(SS.poisson, m)(K, mu), ((3,),), domain=(1.0, 4.0),
           dtypes=dts)
        b = B01 * 0 if m == "logsf" else B01     # sf(1) = 0: its log has no derivative
        st("bernoulli", m, lambda p, m=m, b=b: getattr(fst.bernoulli, m)(b, p),
           lambda p, m=m, b=b: getattr(SS.bernoulli, m)(b, p), ((3,),), domain=(0.2, 0.8),
           dtypes=dts)
        st("binom", m, lambda p, m=m: getattr(fst.binom, m)(K, 7.0, p),
           lambda p, m=m: getattr(SS.binom, m)(K, 7.0, p), ((3,),), domain=(0.2, 0.8),
           dtypes=dts)
        st("geom", m, lambda p, m=m: getattr(fst.geom, m)(K + 1, p),
           lambda p, m=m: getattr(SS.geom, m)(K + 1, p), ((3,),), domain=(0.2, 0.8),
           dtypes=dts)
        st("nbinom", m, lambda p, m=m: getattr(fst.nbinom, m)(K, 3.0, p),
           lambda p, m=m: getattr(SS.nbinom, m)(K, 3.0, p), ((3,),), domain=(0.2, 0.8),
           dtypes=dts)
    for m in ("logpdf", "pdf"):
        st("multivariate_normal", m,
           lambda x, mu, a, m=m: getattr(fst.multivariate_normal, m)(
               x, mu, a @ a.T + np.eye(3, dtype=a.dtype)),
           lambda x, mu, a, m=m: getattr(SS.multivariate_normal, m)(x, mu, a @ a.T + np.eye(3)),
           ((4, 3), (3,), (3, 3)), dtypes=F64)
        st("dirichlet", m, lambda x, al, m=m: getattr(fst.dirichlet, m)(x / x.sum(), al),
           lambda x, al, m=m: getattr(SS.dirichlet, m)(x / x.sum(), al),
           ((3,), (3,)), domain=((0.2, 1.0), (0.5, 3.0)), dtypes=F64)
