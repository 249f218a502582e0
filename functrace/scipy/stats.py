"""functrace.scipy.stats: scipy.stats' distributions as differentiable functions.

Owns one object per distribution (``norm``, ``multivariate_normal``, ``t``, ``beta``, ...)
whose methods take scipy's argument names (``norm.logpdf(x, loc=0, scale=1)``): pdf/pmf,
logpdf/logpmf, cdf, logcdf, sf and logsf where scipy has them. Every method is a composition
of ``functrace.scipy.special`` and ``functrace.numpy`` (log space, far tails), so it runs
eagerly on numpy arrays, traces, and differentiates in every float argument, distribution
parameters included (df, a, b of the cdf/sf through the incomplete gamma/beta functions'
shape-parameter derivatives, to second order: docs/scipy.md). Unlike scipy, float32 arguments
give float32 results. Imports functrace.numpy and functrace.scipy.special only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as fnp
from . import special as sp

__all__ = ["norm", "multivariate_normal", "t", "beta", "gamma", "dirichlet", "poisson",
           "expon", "laplace", "logistic", "uniform", "cauchy", "bernoulli", "binom", "chi2",
           "lognorm", "geom", "nbinom"]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG2 = math.log(2.0)


def _c(v, like):
    return fnp.asarray(v, dtype=like.dtype)


def _where_inf(cond, val, fill):
    return fnp.where(cond, val, _c(fill, val))


class _Continuous:
    """A location-scale family: ``method(x, *shapes, loc=0, scale=1)``; subclasses define
    the standardized ``_logpdf``/``_cdf``/``_sf`` (and ``_logcdf``/``_logsf`` when the log of
    the plain one would underflow)."""

    shapes: tuple[str, ...] = ()

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<functrace.scipy.stats.{self.name}>"

    def _parse(self, x, args, kwargs):
        names = self.shapes + ("loc", "scale")
        vals = dict(zip(names, args, strict=False))
        if len(args) > len(names):
            raise TypeError(f"{self.name}: too many arguments")
        for k, v in kwargs.items():
            if k not in names or k in vals:
                raise TypeError(f"{self.name}: unexpected or repeated argument {k!r}")
            vals[k] = v
        for s in self.shapes:
            if s not in vals:
                raise TypeError(f"{self.name}: missing shape parameter {s!r}")
        vals.setdefault("loc", 0.0)
        vals.setdefault("scale", 1.0)
        xs = sp._floats(x, *[vals[n] for n in names])
        x, rest = xs[0], xs[1:]
        shapes, loc, scale = rest[:-2], rest[-2], rest[-1]
        return (x - loc) / scale, shapes, scale

    def logpdf(self, x, *args, **kwargs):
        z, sh, scale = self._parse(x, args, kwargs)
        return self._logpdf(z, *sh) - fnp.log(scale)

    def pdf(self, x, *args, **kwargs):
        return fnp.exp(self.logpdf(x, *args, **kwargs))

    def cdf(self, x, *args, **kwargs):
        z, sh, _ = self._parse(x, args, kwargs)
        return self._cdf(z, *sh)

    def logcdf(self, x, *args, **kwargs):
        z, sh, _ = self._parse(x, args, kwargs)
        return self._logcdf(z, *sh)

    def sf(self, x, *args, **kwargs):
        z, sh, _ = self._parse(x, args, kwargs)
        return self._sf(z, *sh)

    def logsf(self, x, *args, **kwargs):
        z, sh, _ = self._parse(x, args, kwargs)
        return self._logsf(z, *sh)

    def _logcdf(self, z, *sh):
        return fnp.log(self._cdf(z, *sh))

    def _sf(self, z, *sh):
        return _c(1.0, z) - self._cdf(z, *sh)

    def _logsf(self, z, *sh):
        return fnp.log(self._sf(z, *sh))


class _Norm(_Continuous):
    def _logpdf(self, z):
        return _c(-0.5, z) * z * z - _c(0.5 * _LOG_2PI, z)

    def _cdf(self, z):
        return sp.ndtr(z)

    def _logcdf(self, z):
        return sp.log_ndtr(z)

    def _sf(self, z):
        return sp.ndtr(-z)

    def _logsf(self, z):
        return sp.log_ndtr(-z)

    def ppf(self, q, loc=0.0, scale=1.0):
        q, loc, scale = sp._floats(q, loc, scale)
        return loc + scale * sp.ndtri(q)


class _Expon(_Continuous):
    def _logpdf(self, z):
        return _where_inf(z >= 0, -z, -np.inf)

    def _cdf(self, z):
        return _where_inf(z >= 0, -fnp.expm1(-fnp.maximum(z, _c(0.0, z))), 0.0)

    def _sf(self, z):
        return fnp.exp(-fnp.maximum(z, _c(0.0, z)))

    def _logsf(self, z):
        return -fnp.maximum(z, _c(0.0, z))


class _Laplace(_Continuous):
    def _logpdf(self, z):
        return -fnp.abs(z) - _c(_LOG2, z)

    def _cdf(self, z):
        e = _c(0.5, z) * fnp.exp(-fnp.abs(z))
        return fnp.where(z < 0, e, _c(1.0, z) - e)

    def _logcdf(self, z):
        e = _c(0.5, z) * fnp.exp(-fnp.abs(z))
        return fnp.where(z < 0, fnp.minimum(z, _c(0.0, z)) - _c(_LOG2, z), fnp.log1p(-e))

    def _sf(self, z):
        return self._cdf(-z)

    def _logsf(self, z):
        return self._logcdf(-z)


class _Logistic(_Continuous):
    def _logpdf(self, z):
        return sp.log_expit(z) + sp.log_expit(-z)

    def _cdf(self, z):
        return sp.expit(z)

    def _logcdf(self, z):
        return sp.log_expit(z)

    def _sf(self, z):
        return sp.expit(-z)

    def _logsf(self, z):
        return sp.log_expit(-z)


class _Uniform(_Continuous):
    def _logpdf(self, z):
        return _where_inf((z >= 0) & (z <= 1), _c(0.0, z) * z, -np.inf)

    def _cdf(self, z):
        return fnp.clip(z, 0.0, 1.0)

    def _sf(self, z):
        return fnp.clip(_c(1.0, z) - z, 0.0, 1.0)


class _Cauchy(_Continuous):
    def _logpdf(self, z):
        return -fnp.log1p(z * z) - _c(math.log(math.pi), z)

    def _cdf(self, z):
        return _c(0.5, z) + fnp.arctan(z) / _c(math.pi, z)

    def _sf(self, z):
        return _c(0.5, z) - fnp.arctan(z) / _c(math.pi, z)


class _T(_Continuous):
    shapes = ("df",)

    def _logpdf(self, z, df):
        half = _c(0.5, z)
        return (sp.gammaln(half * (df + 1)) - sp.gammaln(half * df)
                - half * fnp.log(df * _c(math.pi, z))
                - half * (df + 1) * fnp.log1p(z * z / df))

    def _cdf(self, z, df):
        half = _c(0.5, z)
        tail = half * sp.betainc(half * df, fnp.broadcast_to(half, np.shape(df)),
                                 df / (df + z * z))
        return fnp.where(z > 0, _c(1.0, z) - tail, tail)

    def _sf(self, z, df):
        return self._cdf(-z, df)


class _Chi2(_Continuous):
    shapes = ("df",)

    def _logpdf(self, z, df):
        h = df * _c(0.5, z)
        zs = fnp.where(z > 0, z, _c(1.0, z))
        val = sp.xlogy(h - 1, zs) - zs * _c(0.5, z) - sp.gammaln(h) - h * _c(_LOG2, z)
        return _where_inf(z > 0, val, -np.inf)

    def _cdf(self, z, df):
        return sp.gammainc(df * _c(0.5, z), fnp.maximum(z, _c(0.0, z)) * _c(0.5, z))

    def _sf(self, z, df):
        return sp.gammaincc(df * _c(0.5, z), fnp.maximum(z, _c(0.0, z)) * _c(0.5, z))


class _Gamma(_Continuous):
    shapes = ("a",)

    def _logpdf(self, z, a):
        zs = fnp.where(z > 0, z, _c(1.0, z))
        return _where_inf(z > 0, sp.xlogy(a - 1, zs) - zs - sp.gammaln(a), -np.inf)

    def _cdf(self, z, a):
        return sp.gammainc(a, fnp.maximum(z, _c(0.0, z)))

    def _sf(self, z, a):
        return sp.gammaincc(a, fnp.maximum(z, _c(0.0, z)))


class _Beta(_Continuous):
    shapes = ("a", "b")

    def _logpdf(self, z, a, b):
        inside = (z > 0) & (z < 1)
        zs = fnp.where(inside, z, _c(0.5, z))
        val = sp.xlogy(a - 1, zs) + sp.xlog1py(b - 1, -zs) - sp.betaln(a, b)
        return _where_inf(inside, val, -np.inf)

    def _cdf(self, z, a, b):
        return sp.betainc(a, b, fnp.clip(z, 0.0, 1.0))

    def _sf(self, z, a, b):
        return sp.betainc(b, a, fnp.clip(_c(1.0, z) - z, 0.0, 1.0))


class _Lognorm(_Continuous):
    shapes = ("s",)

    def _logpdf(self, z, s):
        zs = fnp.where(z > 0, z, _c(1.0, z))
        lz = fnp.log(zs)
        val = (_c(-0.5, z) * (lz / s) ** 2 - lz - fnp.log(s) - _c(0.5 * _LOG_2PI, z))
        return _where_inf(z > 0, val, -np.inf)

    def _lz(self, z, s):
        return fnp.log(fnp.where(z > 0, z, _c(1.0, z))) / s

    def _cdf(self, z, s):
        return fnp.where(z > 0, sp.ndtr(self._lz(z, s)), _c(0.0, z))

    def _logcdf(self, z, s):
        return _where_inf(z > 0, sp.log_ndtr(self._lz(z, s)), -np.inf)

    def _sf(self, z, s):
        return fnp.where(z > 0, sp.ndtr(-self._lz(z, s)), _c(1.0, z))

    def _logsf(self, z, s):
        return fnp.where(z > 0, sp.log_ndtr(-self._lz(z, s)), _c(0.0, z))


class _Discrete:
    """A discrete family: ``method(k, *shapes, loc=0)`` with pmf/logpmf/cdf/logcdf/sf/logsf."""

    shapes: tuple[str, ...] = ()

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<functrace.scipy.stats.{self.name}>"

    def _parse(self, k, args, kwargs):
        names = self.shapes + ("loc",)
        vals = dict(zip(names, args, strict=False))
        if len(args) > len(names):
            raise TypeError(f"{self.name}: too many arguments")
        for key, v in kwargs.items():
            if key not in names or key in vals:
                raise TypeError(f"{self.name}: unexpected or repeated argument {key!r}")
            vals[key] = v
        vals.setdefault("loc", 0.0)
        xs = sp._floats(k, *[vals[n] for n in names])
        return xs[0] - xs[-1], xs[1:-1]

    def logpmf(self, k, *args, **kwargs):
        k, sh = self._parse(k, args, kwargs)
        ok = (k == fnp.floor(k)) & self._support(k, *sh)
        ks = fnp.where(ok, k, self._inside(k, *sh))
        return _where_inf(ok, self._logpmf(ks, *sh), -np.inf)

    def pmf(self, k, *args, **kwargs):
        return fnp.exp(self.logpmf(k, *args, **kwargs))

    def cdf(self, k, *args, **kwargs):
        k, sh = self._parse(k, args, kwargs)
        return self._cdf(fnp.floor(k), *sh)

    def logcdf(self, k, *args, **kwargs):
        return fnp.log(self.cdf(k, *args, **kwargs))

    def sf(self, k, *args, **kwargs):
        k, sh = self._parse(k, args, kwargs)
        return self._sf(fnp.floor(k), *sh)

    def logsf(self, k, *args, **kwargs):
        return fnp.log(self.sf(k, *args, **kwargs))

    def _inside(self, k, *sh):
        return fnp.zeros_like(k)

    def _support(self, k, *sh):
        return k >= 0

    def _sf(self, k, *sh):
        return _c(1.0, k) - self._cdf(k, *sh)


class _Poisson(_Discrete):
    shapes = ("mu",)

    def _logpmf(self, k, mu):
        return sp.xlogy(k, mu) - mu - sp.gammaln(k + 1)

    def _cdf(self, k, mu):
        kk = fnp.maximum(k, _c(0.0, k))
        return fnp.where(k < 0, _c(0.0, k), sp.gammaincc(kk + 1, mu))

    def _sf(self, k, mu):
        kk = fnp.maximum(k, _c(0.0, k))
        return fnp.where(k < 0, _c(1.0, k), sp.gammainc(kk + 1, mu))


class _Bernoulli(_Discrete):
    shapes = ("p",)

    def _support(self, k, p):
        return (k == 0) | (k == 1)

    def _logpmf(self, k, p):
        return sp.xlogy(k, p) + sp.xlog1py(_c(1.0, k) - k, -p)

    def _cdf(self, k, p):
        one = _c(1.0, k)
        return fnp.where(k < 0, _c(0.0, k), fnp.where(k < 1, one - p, one))


class _Binom(_Discrete):
    shapes = ("n", "p")

    def _support(self, k, n, p):
        return (k >= 0) & (k <= n)

    def _logpmf(self, k, n, p):
        one = _c(1.0, k)
        comb = sp.gammaln(n + one) - sp.gammaln(k + one) - sp.gammaln(n - k + one)
        return comb + sp.xlogy(k, p) + sp.xlog1py(n - k, -p)

    def _cdf(self, k, n, p):
        one = _c(1.0, k)
        inside = (k >= 0) & (k < n)
        ks = fnp.where(inside, k, _c(0.0, k))
        ns = fnp.where(inside, n, ks + 1)
        val = sp.betainc(ns - ks, ks + one, one - p)
        return fnp.where(k < 0, _c(0.0, k), fnp.where(k >= n, one, val))


class _Geom(_Discrete):
    shapes = ("p",)

    def _inside(self, k, p):
        return fnp.ones_like(k)

    def _support(self, k, p):
        return k >= 1

    def _logpmf(self, k, p):
        return sp.xlog1py(k - 1, -p) + fnp.log(p)

    def _cdf(self, k, p):
        return fnp.where(k < 1, _c(0.0, k), -fnp.expm1(fnp.maximum(k, _c(0.0, k))
                                                         * fnp.log1p(-p)))

    def _sf(self, k, p):
        return fnp.where(k < 1, _c(1.0, k), fnp.exp(fnp.maximum(k, _c(0.0, k))
                                                    * fnp.log1p(-p)))


class _NBinom(_Discrete):
    shapes = ("n", "p")

    def _logpmf(self, k, n, p):
        comb = sp.gammaln(n + k) - sp.gammaln(k + 1) - sp.gammaln(n)
        return comb + n * fnp.log(p) + sp.xlog1py(k, -p)

    def _cdf(self, k, n, p):
        kk = fnp.maximum(k, _c(0.0, k))
        return fnp.where(k < 0, _c(0.0, k), sp.betainc(n, kk + 1, p))


norm = _Norm("norm")
expon = _Expon("expon")
laplace = _Laplace("laplace")
logistic = _Logistic("logistic")
uniform = _Uniform("uniform")
cauchy = _Cauchy("cauchy")
t = _T("t")
chi2 = _Chi2("chi2")
gamma = _Gamma("gamma")
beta = _Beta("beta")
lognorm = _Lognorm("lognorm")
poisson = _Poisson("poisson")
bernoulli = _Bernoulli("bernoulli")
binom = _Binom("binom")
geom = _Geom("geom")
nbinom = _NBinom("nbinom")


class _MultivariateNormal:
    """``multivariate_normal.logpdf(x, mean=None, cov=1)``: x has the dimension on its last
    axis; ``cov`` is a matrix, a vector (its diagonal) or a scalar, as in scipy. The result
    drops the point axis of a single point, as scipy does."""

    def __repr__(self):
        return "<functrace.scipy.stats.multivariate_normal>"

    def logpdf(self, x, mean=None, cov=1):
        x = fnp.asarray(x)
        d = x.shape[-1] if x.ndim else 1
        args = [x, 0.0 if mean is None else mean, cov]
        x, mean, cov = [fnp.asarray(a, dtype=sp._dtype(*args)) for a in args]
        if cov.ndim == 0:
            cov = cov * fnp.eye(d, dtype=cov.dtype)
        elif cov.ndim == 1:
            cov = fnp.diag(cov)
        L = fnp.linalg.cholesky(cov)
        diff = x - mean
        flat = fnp.reshape(diff, (-1, d))
        z = fnp.linalg.solve(L, fnp.transpose(flat))            # L z = (x - mean)^T
        maha = fnp.sum(z * z, axis=0)
        logdet = 2.0 * fnp.sum(fnp.log(fnp.diagonal(L)))
        out = -0.5 * (maha + logdet + d * _LOG_2PI)
        return fnp.reshape(out, diff.shape[:-1]) if diff.ndim > 1 else fnp.reshape(out, ())

    def pdf(self, x, mean=None, cov=1):
        return fnp.exp(self.logpdf(x, mean, cov))


class _Dirichlet:
    """``dirichlet.logpdf(x, alpha)``: the components on the first axis of ``x`` (scipy's
    layout), ``len(alpha)`` of them."""

    def __repr__(self):
        return "<functrace.scipy.stats.dirichlet>"

    def logpdf(self, x, alpha):
        dt = sp._dtype(x, alpha)
        x, alpha = fnp.asarray(x, dtype=dt), fnp.asarray(alpha, dtype=dt)
        a = fnp.reshape(alpha, (-1,) + (1,) * (x.ndim - 1))
        lnb = fnp.sum(sp.gammaln(alpha)) - sp.gammaln(fnp.sum(alpha))
        return fnp.sum(sp.xlogy(a - 1, x), axis=0) - lnb

    def pdf(self, x, alpha):
        return fnp.exp(self.logpdf(x, alpha))


multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()
