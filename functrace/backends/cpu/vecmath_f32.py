"""float32 elementary functions in float32 arithmetic, for the vecmath table.

``vecmath.vexp_f32``, ``vlog_f32``, ``vtanh_f32`` and ``vsigmoid_f32`` call these: 16 lanes per
zmm register instead of 8 for the float64 route. Same rules as ``vecmath``: branch-free
arithmetic with ternaries (LLVM ``select``), explicit FMAs (``vecmath_llvm.fma``) and no
fast-math flag, so the results are the same on every machine. Imports only numpy, numba and
``vecmath_llvm``. The kernel cache hashes this file with vecmath (``target.vecmath_hash``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .vecmath_llvm import (
    copysign_f32 as _copysign_f32,
)
from .vecmath_llvm import (
    fma as _fma,
)
from .vecmath_llvm import (
    log_k_f32 as _log_k_f32,
)
from .vecmath_llvm import (
    log_m_f32 as _log_m_f32,
)
from .vecmath_llvm import (
    pow2_f32 as _pow2_f32,
)
from .vecmath_llvm import (
    scale_f32 as _scale_f32,
)

__all__ = ["exp_neg_f32", "exp_f32", "log_f32", "sigmoid_f32", "tanh_f32"]

_njit = numba.njit(inline="always", error_model="numpy")

# native float32 (tanh): 16 lanes per zmm instead of 8 for the float64 route
_F32 = np.float32
_ONE_F = _F32(1.0)
_SHIFT_F = _F32(12582912.0)          # 0x1.8p23: round-to-nearest shifter for float32
_INVLN2_F = _F32(1.4426950408889634)
_LN2HI_F = _F32(0.693359375)         # 9 bits: k*_LN2HI_F exact for |k| < 2**15
_LN2LO_F = _F32(-2.1219444005469057e-4)
# exp(r) = 1 + r + r^2*Q(r), |r| <= ln2/2: rel. error of the r^2 term's fit 1e-8
_QF = tuple(_F32(v) for v in (0.5, 0.16666573286056519, 0.04166686162352562,
                              0.008363739587366581, 0.0013901573838666081))
# tanh(x) = x + x*t*P(t), t = x^2 <= 0.875^2: rel. error of P's fit 8e-10
_TPF = tuple(_F32(v) for v in (-0.3333333432674408, 0.13333328068256378,
                               -0.0539669431746006, 0.021855462342500687,
                               -0.008788293227553368, 0.0033687385730445385,
                               -0.0010673108045011759, 0.00019301974680274725))
# exp(r) = 1 + r + r^2*Q(r), |r| <= ln2/2, degree 5: rel. error of the r^2 term's fit 1e-9
_QF5 = tuple(_F32(v) for v in (0.5, 0.1666666716337204, 0.04166644811630249,
                               0.008333362638950348, 0.0013935405295342207,
                               0.00019858490850310773))
# log(1+f) = f - hfsq + s*(hfsq + z*L(z)), s = f/(2+f), z = s^2, hfsq = f^2/2: fit 2e-9
_LF = tuple(_F32(v) for v in (0.6666666865348816, 0.40000128746032715, 0.2854993939399719,
                              0.23354090750217438))
_LN2HI_LOG_F = _F32(0.693145751953125)   # 15 bits: k*_LN2HI_LOG_F exact for |k| <= 256
_LN2LO_LOG_F = _F32(1.428606765330187e-06)
_TINY_F = _F32(1.1754943508222875e-38)   # smallest normal float32
_TWO23_F = _F32(8388608.0)
_INF_F = _F32(math.inf)
_NAN_F = _F32(math.nan)
_EXP_HI_F = _F32(100.0)              # exp overflows past 88.72: k stays in range
_EXP_LO_F = _F32(-150.0)             # exp underflows to 0 below -103.97
_TANH_SMALL_F = _F32(0.875)
_TANH_ONE_F = _F32(10.0)             # tanh(x) rounds to 1.0f for |x| > 9.01


@_njit
def exp_neg_f32(y):
    """e**y for float32 y in [-87, 0], in float32 arithmetic: ``exp_f32`` without the
    clamps, the second scale factor and one polynomial degree, for tanh, whose result damps
    the error of e (tanh with ``exp_f32``: 43 us per 131K elements instead of 31-33)."""
    kd = _fma(y, _INVLN2_F, _SHIFT_F)
    scale = _pow2_f32(kd)
    kd = kd - _SHIFT_F
    r = _fma(-kd, _LN2LO_F, _fma(-kd, _LN2HI_F, y))   # kd * _LN2HI_F is exact
    Q = _QF
    q = _fma(r, Q[4], Q[3])
    q = _fma(r, q, Q[2])
    q = _fma(r, q, Q[1])
    q = _fma(r, q, Q[0])
    return (_ONE_F + _fma(r * r, q, r)) * scale


@_njit
def exp_f32(x):
    """e**x for float32 x, in float32 arithmetic: overflow to inf past 88.72, gradual
    underflow, NaN in -> NaN out."""
    x = _EXP_HI_F if x > _EXP_HI_F else x
    x = _EXP_LO_F if x < _EXP_LO_F else x
    kd = _fma(x, _INVLN2_F, _SHIFT_F)
    s = kd
    kd = kd - _SHIFT_F
    r = _fma(-kd, _LN2LO_F, _fma(-kd, _LN2HI_F, x))   # kd * _LN2HI_F is exact
    Q = _QF5
    q = _fma(r, Q[5], Q[4])
    q = _fma(r, q, Q[3])
    q = _fma(r, q, Q[2])
    q = _fma(r, q, Q[1])
    q = _fma(r, q, Q[0])
    return _scale_f32(_ONE_F + _fma(r * r, q, r), s)


@_njit
def log_f32(x):
    """natural log of a float32 in float32 arithmetic: subnormals, log(0) = -inf, log(x<0)
    and log(NaN) = NaN, log(inf) = inf."""
    sub = x < _TINY_F
    xs = x * _TWO23_F if sub else x
    m = _log_m_f32(xs)
    k = _log_k_f32(xs) - (_F32(23.0) if sub else _F32(0.0))
    f = m - _ONE_F                                   # exact
    s = f / (_F32(2.0) + f)
    z = s * s
    L = _LF
    R = _fma(z, L[3], L[2])
    R = _fma(z, R, L[1])
    R = _fma(z, R, L[0])
    hfsq = _F32(0.5) * f * f
    # k * _LN2HI_LOG_F is exact
    r = _fma(k, _LN2HI_LOG_F, ((_fma(s, _fma(z, R, hfsq), k * _LN2LO_LOG_F)) - hfsq) + f)
    r = r if x < _INF_F else x                       # inf -> inf, NaN -> NaN
    r = -_INF_F if x == _F32(0.0) else r
    return _NAN_F if x < _F32(0.0) else r


@_njit
def sigmoid_f32(x):
    e = exp_f32(-abs(x))
    num = _ONE_F if x >= _F32(0.0) else e
    return num / (_ONE_F + e)


@_njit
def tanh_f32(x):
    ax = abs(x)
    ax = _TANH_ONE_F if ax > _TANH_ONE_F else ax     # inf -> 1; NaN passes
    t = ax * ax
    P = _TPF
    p = _fma(t, P[7], P[6])
    p = _fma(t, p, P[5])
    p = _fma(t, p, P[4])
    p = _fma(t, p, P[3])
    p = _fma(t, p, P[2])
    p = _fma(t, p, P[1])
    p = _fma(t, p, P[0])
    small = _fma(ax, t * p, ax)
    e = exp_neg_f32(-(ax + ax))
    big = _ONE_F - (e + e) / (_ONE_F + e)             # 2e/(1+e) <= 0.45: no cancellation
    return _copysign_f32(small if ax < _TANH_SMALL_F else big, x)
