"""The incomplete beta function for numba-generated CPU loops: betainc (I_x(a, b)) and its
partial derivatives in (a, b) to the second order.

Owns the scalar kernels behind ``functrace.ops.special``'s ``betainc_p`` and ``betainc_dab_p``
(``vi.v<name>`` in a kernel module, through ``vecmath_incomplete``). Imports numpy, numba,
``vecmath_llvm``'s intrinsics and the public helpers of ``vecmath_incgamma``; nothing else
from functrace.

Algorithms (our own code after the methods of Cephes ``incbet.c`` and DLMF ch. 8):

* below the mean a/(a+b), the continued fraction of I_x(a, b) in z = x/(1-x) (Cephes'
  ``incbd``, an equivalent form of DLMF 8.17.22), by modified Lentz; above it
  I_x(a, b) = 1 - I_{1-x}(b, a) (each side's fraction is stable from its tail to the mean and
  unstable well past it). Measured against the fraction in x, the one in z is as accurate for
  small a and 100-1000 times more accurate for a >= 300, where the fraction in x is small and
  cancels; so only the one in z is used (Cephes switches at (a-1)/(a+b-2)). Cephes' power
  series of (1-t)**(b-1) where b x <= 1 and x <= 0.95;
* the prefactor x**a y**b / (a B(a, b)) (y = 1 - x) as exp(k(a, b)) (x/x0)**a e**(-a u)
  (y/y0)**b e**(-b v) about the mean x0 = a/(a+b), y0 = b/(a+b) (u = x/x0 - 1, v = y/y0 - 1,
  a u = -b v): each factor is exp(a log1pmx(u)) where that series holds, else a pow of the
  ratio (one rounding, times a), multiplied in (mantissa, exponent) form; k(a, b) comes from
  Stirling remainders for arguments >= 10. Not a log x + b log y - log B(a, b), which cancels
  for large a, b;
* the derivatives in (a, b): the same fraction and series in truncated Taylor arithmetic of
  order 2 in two variables (jets (value, d/da, d/db, d2/da2, d2/dadb, d2/db2)), times the
  prefactor's jet from digamma/trigamma expressions that do not cancel for large or small
  parameters; the reflection swaps the roles of a and b in the jet.

Special values follow scipy.special; float32 arguments are computed in float64 and rounded
once.
"""

import math

import numba
import numpy as np

from .vecmath_incgamma import digamma_minus_log as _digamma_mlog
from .vecmath_incgamma import fdigamma as _digamma
from .vecmath_incgamma import fexp as _exp
from .vecmath_incgamma import fexpm1 as _expm1
from .vecmath_incgamma import flgamma as _lgamma
from .vecmath_incgamma import flog as _log
from .vecmath_incgamma import flog1p as _log1p
from .vecmath_incgamma import fpolygamma as _polygamma
from .vecmath_incgamma import ftrigamma as _trigamma
from .vecmath_incgamma import lgamma1p as _lgamma1p
from .vecmath_incgamma import log1pmx as _log1pmx
from .vecmath_incgamma import scaled_product as _scaled
from .vecmath_incgamma import stirling_remainder as _stirling
from .vecmath_llvm import as_result as _as_result
from .vecmath_llvm import fma as _fma

__all__ = ["vbetainc", "vbetainc_dab"]

_njit = numba.njit(inline="always", error_model="numpy")
_jit = numba.njit(error_model="numpy", cache=True)

_INF = math.inf
_NAN = math.nan
_EPS = 1.1102230246251565e-16                 # 2**-53
_TINY = 1e-300
_LOG_2PI = math.log(2.0 * math.pi)
_MAXIT = 10000                                 # values
_MAXIT_D = 400000                              # derivatives


@_jit
def _in_series(t):
    """Where ``_log1pmx(t)`` sums its series (a few ulp, no cancellation)."""
    return -0.7 <= t <= 2.0


# --------------------------------------------------------------------------
# incomplete beta: values
# --------------------------------------------------------------------------

@_jit
def _ibeta_k(a, b):
    """log(B0(a, b) / B(a, b)) - log a with B0 = a**a b**b / c**c (c = a + b): a function of
    a and b alone, by Stirling remainders for arguments >= 10 (no cancellation)."""
    c = a + b
    if a >= 10.0 and b >= 10.0:
        return 0.5 * (_log(b) - _log(a) - _log(c) - _LOG_2PI) - _stirling(a) - _stirling(b) \
            + _stirling(c)
    if b >= 10.0:
        return a * _log(a) - a - _lgamma1p(a) - 0.5 * _log1p(a / b) - _stirling(b) \
            + _stirling(c)
    if a >= 10.0:
        return b * _log(b) - b - _lgamma1p(b) + _log(b) - _log(a) - 0.5 * _log1p(b / a) \
            - _stirling(a) + _stirling(c)
    return a * _log(a) + b * _log(b) - c * _log(c) - _lgamma1p(a) - _lgamma(b) + _lgamma(c)


@_jit
def _ibeta_prefix(a, b, x, y, xexact):
    """(x**a y**b / (a B(a, b)), log(x/x0), log(y/y0), log x, log y) for a, b > 0 and
    x, y in (0, 1) with x + y = 1 (``xexact``: x is the exact operand and y = 1 - x rounded,
    else the other way round), about the mean x0 = a/(a+b), y0 = b/(a+b):

        x**a y**b / (a B) = exp(k(a, b)) (x/x0)**a e**(-a u) (y/y0)**b e**(-b v)

    with u = x/x0 - 1, v = y/y0 - 1 and a u = -b v = x b - y a. Each factor (x/x0)**a
    e**(-a u) is exp(a _log1pmx(u)) where the series holds, else a pow of the ratio (one
    rounding, times a) and the e**(-+ a u) of the two factors cancel exactly."""
    logx = _log(x) if xexact else _log1p(-y)
    logy = _log1p(-x) if xexact else _log(y)
    dd = _fma(x, b, -(y * a))                 # x b - y a = a u = -b v
    u = dd / a
    v = -dd / b
    s = _ibeta_k(a, b)
    lin = 0.0                                  # the e**(-+ dd) factors not in a series
    pa = 0.0                                   # the powers ra**pa rb**pb, and their log lm
    pb = 0.0
    ra = 1.0
    rb = 1.0
    lm = 0.0
    if _in_series(u):
        lx = _log1p(u)
        s += a * _log1pmx(u)
    else:
        ra = _fma(x, b / a, x) if u < 0.0 else 1.0 + u
        ok = 0.0 < ra < _INF
        lx = _log(ra) if ok else logx - _log(a) + _log(a + b)
        if ok and abs(a * lx) < 1400.0:
            pa = a
            lm += a * lx
        else:
            s += a * lx
        lin -= dd
    if _in_series(v):
        ly = _log1p(v)
        s += b * _log1pmx(v)
    else:
        rb = _fma(y, a / b, y) if v < 0.0 else 1.0 + v
        ok = 0.0 < rb < _INF
        ly = _log(rb) if ok else logy - _log(b) + _log(a + b)
        if ok and abs(b * ly) < 1400.0:
            pb = b
            lm += b * ly
        else:
            s += b * ly
        lin += dd
    s += lin
    if abs(s) < 1400.0:
        f = _scaled(s, ra, pa, rb, pb, 1.0)
    else:
        f = _exp(s + lm)
    return f, lx, ly, logx, logy


@_jit
def _ibeta_coef(a, b, z, n):
    """The n-th partial numerator of F = 1 + d1/(1 + d2/(1 + ...)), the continued fraction
    of I_x(a, b) = x**a y**b / (a B(a, b)) / (y F) in z = x/y (y = 1 - x; Cephes' incbd, an
    equivalent form of DLMF 8.17.22): d_{2m+1} = -(a+m)(b-1-m) z / ((a+2m)(a+2m+1)),
    d_{2m+2} = (m+1)(a+b+m) z / ((a+2m+1)(a+2m+2)). Below the mean it is as accurate as the
    fraction in x for small a and 100-1000 times more accurate for a >= 300 (measured: that
    one's value is small there and cancels), so it is the only one used."""
    m = (n - 1) // 2
    if n & 1:
        return -((a + m) * (b - 1.0 - m) * z) / ((a + 2 * m) * (a + 2 * m + 1.0))
    return ((m + 1.0) * (a + b + m) * z) / ((a + 2 * m + 1.0) * (a + 2 * m + 2.0))


@_jit
def _ibeta_cf(a, b, z):
    """F by the modified Lentz method."""
    h = 1.0
    c = 1.0
    d = 0.0
    for n in range(1, _MAXIT):
        dn = _ibeta_coef(a, b, z, n)
        d = 1.0 + dn * d
        if d == 0.0:
            d = _TINY
        c = 1.0 + dn / c
        if c == 0.0:
            c = _TINY
        d = 1.0 / d
        delta = c * d
        h *= delta
        if abs(delta - 1.0) <= _EPS:
            break
    return h


@_jit
def _ibeta_tail(a, b, x):
    """sum_{n>=1} a (1-b)_n x**n / (n! (a+n)): Cephes' pseries less its first term 1
    (I_x(a, b) = x**a / (a B(a, b)) (1 + tail); for small b x)."""
    s = 0.0
    t = 1.0
    for n in range(1, _MAXIT):
        t *= (n - b) * x / n
        v = a * t / (a + n)
        s += v
        if abs(v) <= _EPS * abs(s):
            break
    return s


@_jit
def _lgamma_shift(a, b):
    """lgamma(a + b) - lgamma(a) for b <= 1e-4 a: four terms of its Taylor series in b."""
    return b * (_digamma(a) + b * (0.5 * _trigamma(a) + b * (_polygamma(2, a) / 6.0
                                                              + b * _polygamma(3, a) / 24.0)))


@_jit
def _near_one(a, y):
    """Where x = 1 - y is within 1e-4 of 1 below the mean (so b < 1e-4 (a+b)) and the series
    in y converges: the fraction in z = x/y would need ~1/y terms and loses digits there."""
    return y < 1e-4 and a * y <= 1.0


@_jit
def _ibeta_near_one(a, b, y):
    """I_x(a, b) = 1 - I_y(b, a) for ``_near_one`` (y exact), without forming 1 - (1 - I):
    I_y(b, a) = R (1 + tail(b, a, y)) with log R = b log y - lgamma(1+b) + lgamma(a+b)
    - lgamma(a), every term O(b), so I = -expm1(log R) - R tail (scipy's Boost does this
    too; the fraction gave 2x errors at b = 1e-300, x = 1 - 2**-53)."""
    lr = b * _log(y) - _lgamma1p(b) + _lgamma_shift(a, b)
    return -_expm1(lr) - _exp(lr) * _ibeta_tail(b, a, y)


@_jit
def _use_pseries(b, x):
    return b * x <= 1.0 and x <= 0.95


@_jit
def _ibeta_direct(a, b, x, y, xexact):
    """I_x(a, b) for x at most the mean a/(a+b) (or b x small); ``xexact`` as in
    ``_ibeta_prefix``."""
    if _near_one(a, y):
        return _ibeta_near_one(a, b, y)
    f, lx, ly, logx, logy = _ibeta_prefix(a, b, x, y, xexact)
    if _use_pseries(b, x):
        # x**a / (a B) = f / y**b
        return f * _exp(-b * logy) * (1.0 + _ibeta_tail(a, b, x))
    return f / (y * _ibeta_cf(a, b, x / y))


@_jit
def _ibeta_side(a, b, x, y, reflect):
    """I_x(a, b) directly, or as 1 - I_y(b, a)."""
    if reflect:
        return 1.0 - _ibeta_direct(b, a, y, x, False)
    return _ibeta_direct(a, b, x, y, True)


@_jit
def _reflect(a, b, x):
    """Whether to evaluate I_x(a, b) as 1 - I_{1-x}(b, a): past the mean, as Cephes (each
    side's fraction is stable from its own tail to the mean, and unstable well past it)."""
    return x > a / (a + b)


@_jit
def _clip01(r):
    """r in [0, 1] (rounding can leave a probability one ulp outside; NaN passes)."""
    if r > 1.0:
        return 1.0
    if r < 0.0:
        return 0.0
    return r


@_jit
def _betainc64(a, b, x):
    if a != a or b != b or x != x:
        return _NAN
    if a < 0.0 or b < 0.0 or x < 0.0 or x > 1.0:
        return _NAN
    if (a == 0.0 and b == 0.0) or (a == _INF and b == _INF):
        return _NAN
    if x == 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    if a == 0.0 or b == _INF:
        return 1.0
    if b == 0.0 or a == _INF:
        return 0.0
    y = 1.0 - x
    if _use_pseries(b, x):
        return _clip01(_ibeta_direct(a, b, x, y, True))
    return _clip01(_ibeta_side(a, b, x, y, _reflect(a, b, x)))


# --------------------------------------------------------------------------
# jets in two parameters: (value, d/da, d/db, d2/da2, d2/dadb, d2/db2)
# --------------------------------------------------------------------------

@_jit
def _j6mul(p, q):
    return (p[0] * q[0], p[0] * q[1] + p[1] * q[0], p[0] * q[2] + p[2] * q[0],
            p[0] * q[3] + 2.0 * p[1] * q[1] + p[3] * q[0],
            p[0] * q[4] + p[1] * q[2] + p[2] * q[1] + p[4] * q[0],
            p[0] * q[5] + 2.0 * p[2] * q[2] + p[5] * q[0])


@_jit
def _j6inv(q):
    r = 1.0 / q[0]
    r2 = r * r
    return (r, -q[1] * r2, -q[2] * r2, (2.0 * q[1] * q[1] * r - q[3]) * r2,
            (2.0 * q[1] * q[2] * r - q[4]) * r2, (2.0 * q[2] * q[2] * r - q[5]) * r2)


@_jit
def _j6add1(p):
    """1 + p."""
    return (1.0 + p[0], p[1], p[2], p[3], p[4], p[5])


@_jit
def _j6close(n, o):
    for i in range(6):
        if abs(n[i] - o[i]) > _EPS * abs(n[i]):
            return False
    return True


@_jit
def _lin(v, da, db):
    """The jet of a linear function of (a, b)."""
    return (v, da, db, 0.0, 0.0, 0.0)


@_jit
def _scale6(s, p):
    return (s * p[0], s * p[1], s * p[2], s * p[3], s * p[4], s * p[5])


@_jit
def _ibeta_coef_jet(a, b, z, n):
    """The jet in (a, b) of ``_ibeta_coef`` (products and quotients of linear factors)."""
    m = (n - 1) // 2
    if n & 1:
        num = _j6mul(_lin(a + m, 1.0, 0.0), _lin(b - 1.0 - m, 0.0, 1.0))
        den = _j6mul(_lin(a + 2 * m, 1.0, 0.0), _lin(a + 2 * m + 1.0, 1.0, 0.0))
        return _scale6(-z, _j6mul(num, _j6inv(den)))
    num = _lin((m + 1.0) * (a + b + m), m + 1.0, m + 1.0)
    den = _j6mul(_lin(a + 2 * m + 1.0, 1.0, 0.0), _lin(a + 2 * m + 2.0, 1.0, 0.0))
    return _scale6(z, _j6mul(num, _j6inv(den)))


@_jit
def _ibeta_cf_jet(a, b, z):
    """The jet in (a, b) of ``_ibeta_cf`` by Lentz's recurrence on jets; ``ok`` is False if
    it has not converged."""
    h = _lin(1.0, 0.0, 0.0)
    c = _lin(1.0, 0.0, 0.0)
    d = _lin(0.0, 0.0, 0.0)
    for n in range(1, _MAXIT_D):
        dn = _ibeta_coef_jet(a, b, z, n)
        d = _j6add1(_j6mul(dn, d))
        if d[0] == 0.0:
            d = (_TINY, d[1], d[2], d[3], d[4], d[5])
        c = _j6add1(_j6mul(dn, _j6inv(c)))
        if c[0] == 0.0:
            c = (_TINY, c[1], c[2], c[3], c[4], c[5])
        d = _j6inv(d)
        old = h
        h = _j6mul(h, _j6mul(c, d))
        if _j6close(h, old):
            return h, True
    return h, False


@_jit
def _ibeta_tail_jet(a, b, x):
    """The jet in (a, b) of ``_ibeta_tail``; ``ok`` is False if it has not converged."""
    s = _lin(0.0, 0.0, 0.0)
    t = _lin(1.0, 0.0, 0.0)
    for n in range(1, _MAXIT_D):
        t = _j6mul(t, _lin((n - b) * x / n, 0.0, -x / n))
        v = _j6mul(_j6mul(_lin(a, 1.0, 0.0), t), _j6inv(_lin(a + n, 1.0, 0.0)))
        old = s
        s = (s[0] + v[0], s[1] + v[1], s[2] + v[2], s[3] + v[3], s[4] + v[4], s[5] + v[5])
        if _j6close(s, old):
            return s, True
    return s, False


@_jit
def _ibeta_near_one_jet(a, b, y):
    """The jet in (a, b) of ``_ibeta_near_one``: log R = b log y - lgamma(1+b) + D with
    D = lgamma(a+b) - lgamma(a) and its partials by their Taylor series in b."""
    p1 = _trigamma(a)
    p2 = _polygamma(2, a)
    p3 = _polygamma(3, a)
    ly = _log(y)
    d = _lgamma_shift(a, b)
    da = b * (p1 + b * (0.5 * p2 + b * p3 / 6.0))             # psi(a+b) - psi(a)
    db = _digamma(a) + da                                       # psi(a+b)
    daa = b * (p2 + 0.5 * b * p3)                               # psi'(a+b) - psi'(a)
    dab = p1 + daa                                              # psi'(a+b)
    l0 = b * ly - _lgamma1p(b) + d
    l1 = da
    l2 = ly - _digamma(1.0 + b) + db
    l11 = daa
    l12 = dab
    l22 = dab - _trigamma(1.0 + b)
    e = _exp(l0)
    ej = (e, e * l1, e * l2, e * (l11 + l1 * l1), e * (l12 + l1 * l2), e * (l22 + l2 * l2))
    tj, ok = _ibeta_tail_jet(b, a, y)                           # a jet in (b, a)
    if not ok:
        return (_NAN, _NAN, _NAN, _NAN, _NAN, _NAN)
    rt = _j6mul(ej, (tj[0], tj[2], tj[1], tj[5], tj[4], tj[3]))
    return (-_expm1(l0) - rt[0], -ej[1] - rt[1], -ej[2] - rt[2], -ej[3] - rt[3],
            -ej[4] - rt[4], -ej[5] - rt[5])


@_jit
def _psi_shift(n, z, h):
    """psi^(n)(z + h) - psi^(n)(z) (n = 0, 1; h > 0): five terms of its Taylor series where
    h <= 1e-3 z (the difference cancels there: d2I/db2 lost 9 digits at a = 2e-3,
    b = 1e4), else the difference."""
    if h <= 1e-3 * z:
        acc = 0.0
        fac = 1.0
        for k in range(1, 6):
            fac *= h / k
            acc += fac * _polygamma(n + k, z)
        return acc
    if n == 0:
        return _digamma(z + h) - _digamma(z)
    return _trigamma(z + h) - _trigamma(z)


@_jit
def _ibeta_dab_direct(a, b, x, y, xexact):
    """The jet of I_x(a, b) in (a, b), by the value's method (``_ibeta_direct``)."""
    if _near_one(a, y):
        return _ibeta_near_one_jet(a, b, y)
    f, lx, ly, logx, logy = _ibeta_prefix(a, b, x, y, xexact)
    c = a + b
    # partials of log(x**a y**b / (a B(a, b))): log x - psi(a) + psi(c) - 1/a,
    # log y - psi(b) + psi(c), psi'(c) - psi'(a) + 1/a**2, psi'(c), psi'(c) - psi'(b); for
    # large arguments about the mean (no cancellation), for small a through psi(a + 1)
    if a >= 10.0:
        pa = lx - _digamma_mlog(a) + _digamma_mlog(c) - 1.0 / a
    else:
        pa = logx - _digamma(a + 1.0) + _digamma(c)
    if b >= 10.0:
        pb = ly - _digamma_mlog(b) + _digamma_mlog(c)
    else:
        pb = logy + _psi_shift(0, b, a)
    tc = _trigamma(c)
    if a >= 10.0:
        paa = _psi_shift(1, a, b) + 1.0 / (a * a)
    else:
        paa = tc - _trigamma(a + 1.0)
    pbb = _psi_shift(1, b, a)
    pre = (f, f * pa, f * pb, f * (paa + pa * pa), f * (tc + pa * pb), f * (pbb + pb * pb))
    if _use_pseries(b, x):
        e = _exp(-b * logy)                    # y**-b
        sj, ok = _ibeta_tail_jet(a, b, x)
        if not ok:
            return (_NAN, _NAN, _NAN, _NAN, _NAN, _NAN)
        sj = (1.0 + sj[0], sj[1], sj[2], sj[3], sj[4], sj[5])
        return _j6mul(_j6mul(pre, (e, 0.0, -logy * e, 0.0, 0.0, logy * logy * e)), sj)
    h, ok = _ibeta_cf_jet(a, b, x / y)
    if not ok:
        return (_NAN, _NAN, _NAN, _NAN, _NAN, _NAN)
    return _j6mul(_scale6(1.0 / y, pre), _j6inv(h))


@_jit
def _betainc_dab64(i, j, a, b, x):
    """d**(i+j) I_x(a, b) / da**i db**j for 1 <= i + j <= 2 (NaN outside a, b > 0 finite,
    0 <= x <= 1; 0 at x = 0 and x = 1)."""
    if a != a or b != b or x != x:
        return _NAN
    if not (0.0 < a < _INF and 0.0 < b < _INF and 0.0 <= x <= 1.0):
        return _NAN
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0 - x
    if not _use_pseries(b, x) and _reflect(a, b, x):
        r = _ibeta_dab_direct(b, a, y, x, False)
        # 1 - I_y(b, a): negate, and swap the roles of a and b
        jet = (1.0 - r[0], -r[2], -r[1], -r[5], -r[4], -r[3])
    else:
        jet = _ibeta_dab_direct(a, b, x, y, True)
    if i == 1 and j == 0:
        return jet[1]
    if i == 0 and j == 1:
        return jet[2]
    if i == 2:
        return jet[3]
    if i == 1:
        return jet[4]
    return jet[5]


@_njit
def vbetainc(a, b, x):
    """regularized incomplete beta function I_x(a, b)"""
    return _as_result(_betainc64(np.float64(a), np.float64(b), np.float64(x)), a)


@_njit
def vbetainc_dab(i, j, a, b, x):
    """d**(i+j) I_x(a, b) / da**i db**j, 1 <= i + j <= 2"""
    return _as_result(_betainc_dab64(i, j, np.float64(a), np.float64(b), np.float64(x)), a)
