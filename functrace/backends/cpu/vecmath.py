"""Vectorisable scalar math functions for numba-generated CPU loops.

This file owns the branch-free scalar elementary functions (``vexp``,
``vlog``, ``vsin``, ...) that the numba backend's code generator emits inside
its loops, plus the ``VECMATH`` name -> function table it looks them up in.
It imports only the standard library, numpy, numba and llvmlite: it must not
import anything from ``functrace`` (nor should anything numba-related live in
any other functrace file; only the numba backend imports this module).

Why this exists
---------------
numba here has no SVML, so ``math.exp`` & co. inside an ``njit`` loop are
scalar libm calls (exp 5.6 ns/element vs numpy's SIMD 1.0 ns, tanh 21 vs 2.3).
The functions below are written as straight-line float/integer arithmetic with
ternaries that LLVM turns into ``select``; a loop like::

    @numba.njit(**vm.JIT_OPTIONS)
    def f(x, out):
        for i in range(x.shape[0]):
            out[i] = vm.vexp(x[i])

is vectorised by LLVM to 512-bit (zmm) packed code (``vfmadd...pd zmm``).
Each function is ``@njit(inline="always", error_model="numpy")`` with **no
fast-math flags**.  ``inline="always"`` inlines at numba-IR level, so the
*caller's* flags are what end up applying: generated loops use ``JIT_OPTIONS``
(no flags either), because any flag reaches the caller's own arithmetic too --
``contract`` fused the user's ``a * 2.0 + b`` into an FMA, ``nsz`` and
``arcp`` changed signed zeros and divisions (tests/backends/test_ieee.py checks kernels
against numpy bit for bit; docs/numerics.md). The fused multiply-adds these
functions want are explicit instead (``_fma``: ``llvm.fma``, in polynomial
steps and error terms), so their results and ulp bounds do not depend on the
caller's flags, and no contraction leaks out of them. ``fastmath=True`` would
also drop inf/NaN semantics, and ``reassoc`` would break the error-free
transformations used for accuracy; ``error_model="python"`` in the caller adds
a zero-check branch to every division, which can stop vectorisation of
vtan/vlog/vlog1p/vtanh/vsigmoid.

Design
------
* Range reduction with the round-to-nearest "shifter" trick
  (``k = (x*c + 1.5*2**52) - 1.5*2**52``), whose low mantissa bits are also
  the integer ``k``: no float->int conversion (which is UB/poison for NaN).
* Bit casts float64<->int64 (and float32<->int32) are tiny
  ``numba.extending.intrinsic`` s emitting ``bitcast``; ``2**k`` is built
  from exponent bits, split in two factors so that gradual underflow rounds
  once and overflow happens exactly where it should.
* Polynomials are this module's own near-minimax fits (weighted least
  squares + Lawson iterations in 50-digit mpmath), evaluated with Horner,
  one explicit FMA per step.
* Special values (inf, NaN, 0, negative, subnormal) by clamps and selects;
  odd functions compute on ``|x|`` and copy the sign of ``x`` back with an
  integer ``copysign``, so ``f(-0.0) == -0.0``.
* sin/cos/tan: Cody-Waite reduction by pi/2 in four pieces with exact
  products and TwoSum, giving a double-double reduced argument, for
  ``|x| < 1e6``.  Larger |x|, inf and NaN go to libm through a call that is
  *predicated*, not speculated: a plain ``math.sin`` in the other arm of the
  ternary is if-converted by LLVM into 8 scalar libm calls per vector for
  every lane (15 ms per 1e6 instead of ~1 ms).  ``_slow_libm`` declares a
  masked vector variant (``vector-function-abi-variant``) of a wrapper, which
  makes LLVM's loop vectoriser treat the call as needing a mask, so libm is
  only called for the lanes that need it and the common path stays in zmm.
  The vectoriser still calls that variant on every vector iteration, and the call
  makes the loop spill its zmm values around it, so generated kernels whose trig
  arguments are cheap use the split versions instead (docs/executor.md, "sin, cos,
  tan"): ``trig_big`` counts the arguments that need libm, ``vsin_fast`` & co.
  (no libm call) serve when there are none, ``vsin_scalar`` & co. (``vsin`` bit for
  bit, a libm call with no vector variant: the loop stays scalar) otherwise.
* float32 arguments are computed in float64 and rounded back to float32
  (<= 0.5 float32 ulp + double rounding).  That costs the same time per
  element as float64 (8 lanes per zmm instead of 16): ~0.55 ms per 1e6 for
  exp vs numpy's float32 SIMD 0.32 ms.  A native float32 exp prototype
  (float32 constants, int32 exponent bits) ran in 0.16 ms, i.e. 3.4x faster
  than the float64 route, so native float32 kernels are the obvious next
  step if float32 throughput matters; they need their own polynomial fits
  (a Taylor degree-6 prototype was only 2.8 ulp).  exp, log, tanh and
  sigmoid have them (``VECMATH_F32``, which the code generator uses for float32
  operands; own fits, float32 arithmetic, 32-bit integer intrinsics for 2**k
  and copysign): per 1e6 float32 elements, exp 0.17 ms (numpy 0.32, float64
  route ~0.55) at <= 0.98 ulp; log 0.22 ms (numpy 0.24, float64 route 0.55)
  at <= 0.83 ulp; tanh 0.25 ms (numpy 0.16) at <= 1.3 ulp (an
  odd polynomial below |x| = 0.875, ``1 - 2e/(1+e)`` with ``e = exp(-2|x|)``
  above); sigmoid 0.21 ms at <= 2.3 ulp.  log2, log10, log1p, expm1, exp2
  and the trigonometric functions still take the float64 route.

Accuracy (float64; ulp = ``np.spacing`` of the exact result, measured against
80-bit long double / mpmath references on 1e6 random points per function,
1e5 for erf; bounds are what ``tests/backends/test_vecmath.py`` asserts; every domain also gets a
log-uniform band of |x| in [1e-300, 1e-3] of both signs)

=========  ==========================================  =========  ========
function   domain                                      max error  asserted
=========  ==========================================  =========  ========
vexp       [-745, 710] (incl. subnormal results)       0.75 ulp   1 ulp
vexpm1     [-40, 710], [-2, 2], [-1e-3, 1e-3]          1.12 ulp   2 ulp
vexp2      [-1075, 1024]                               0.81 ulp   2 ulp
vlog       [1e-310, 1e308] log-uniform, subnormals     0.81 ulp   1 ulp
vlog1p     (-1, 1e308], [-1e-3, 1e-3]                  0.74 ulp   2 ulp
vlog2      [1e-310, 1e308] log-uniform                 0.75 ulp   2 ulp
vlog10     [1e-310, 1e308] log-uniform                 0.85 ulp   2 ulp
vsin       [-1e4, 1e4]; |x| in [1e5, 1e300] (libm)     0.76 ulp   2 ulp *
vcos       [-1e4, 1e4]; |x| in [1e5, 1e300] (libm)     0.77 ulp   2 ulp *
vtan       [-1e4, 1e4]; |x| in [1e5, 1e300] (libm)     2.21 ulp   3 ulp *
vtanh      [-30, 30]                                   2.72 ulp   3 ulp
vsigmoid   [-745, 40] (subnormal results included)     2.19 ulp   3 ulp
verf       [-6, 6]                                     0.81 ulp   3 ulp
=========  ==========================================  =========  ========

(*) or absolute error <= 4e-16.  float32 inputs (computed in float64, rounded
once to float32): <= 0.5 float32 ulp + double rounding, asserted <= 1; vtanh's
native float32 variants: exp 0.98 ulp (asserted <= 1), log 0.83 (<= 1),
tanh 1.25 (<= 2), sigmoid 2.22 (<= 3).
Largest errors: tanh near |x| ~ 0.25 (expm1 cancellation, then e/(e+2)),
sigmoid (exp, 1+e and the division each round), tan (sin/cos quotient).

Special values follow numpy: exp(inf)=inf, exp(-inf)=0, overflow to inf past
709.782712893384, gradual underflow; log(0)=-inf, log(x<0)=nan,
log(inf)=inf; sin/cos/tan(inf)=nan; tanh(+-inf)=+-1; erf(+-inf)=+-1;
NaN in -> NaN out; odd functions keep the sign of zero.
"""

import math

import numba
import numpy as np

from .numba_target import exp_variant as _exp_variant
from .vecmath_exp_table import INV_LN2_128 as _INV_LN2_128
from .vecmath_exp_table import LN2_128_HI as _LN2_128_HI
from .vecmath_exp_table import LN2_128_LO as _LN2_128_LO
from .vecmath_exp_table import PACKED as _EXP_TABLE
from .vecmath_f32 import exp_f32 as _exp_f32
from .vecmath_f32 import log_f32 as _log_f32
from .vecmath_f32 import sigmoid_f32 as _sigmoid_f32
from .vecmath_f32 import tanh_f32 as _tanh_f32
from .vecmath_llvm import (
    as_result as _as_result,
)
from .vecmath_llvm import (
    f2i as _f2i,
)
from .vecmath_llvm import (
    fma as _fma,
)
from .vecmath_llvm import (
    i2f as _i2f,
)
from .vecmath_llvm import (
    slow_libm as _slow_libm,
)

__all__ = [
    "VECMATH", "JIT_OPTIONS", "EXP_VARIANT",
    "vexp", "vexp_poly", "vexp_table", "vexpm1", "vexp2", "vlog", "vlog1p", "vlog2", "vlog10",
    "vsin", "vcos", "vtan", "vtanh", "vsigmoid", "verf", "VECMATH_F32", "vexp_f32", "vlog_f32",
    "vtanh_f32", "vsigmoid_f32", "trig_big", "vsin_fast", "vcos_fast", "vtan_fast",
    "vsin_scalar", "vcos_scalar", "vtan_scalar",
]

#: options for the njit loops that call these functions: no fast-math flag at all (the
#: generated kernels have none either), so the caller's arithmetic stays numpy's
JIT_OPTIONS = {"error_model": "numpy"}
_JIT = dict(inline="always", error_model="numpy")
_njit = numba.njit(**_JIT)

_h = float.fromhex


_slow_sin = _slow_libm("sin")
_slow_cos = _slow_libm("cos")
_slow_tan = _slow_libm("tan")
_scalar_sin = _slow_libm("sin", vector=False)
_scalar_cos = _slow_libm("cos", vector=False)
_scalar_tan = _slow_libm("tan", vector=False)


# --------------------------------------------------------------------------
# constants
# --------------------------------------------------------------------------

_INF = math.inf
_NAN = math.nan
_SIGN = -0x8000000000000000          # int64 with only the sign bit set
_ABS = 0x7FFFFFFFFFFFFFFF
_SHIFT = _h("0x1.8p52")              # round-to-nearest-integer shifter
_SHIFT_BITS = 0x4338000000000000     # bits of _SHIFT; low bits hold k
_INVLN2 = _h("0x1.71547652b82fep+0")
_INVLN2LO = _h("0x1.777d0ffda0d24p-56")  # 1/ln2 - _INVLN2
_LN2 = _h("0x1.62e42fefa39efp-1")
_LN2HI = _h("0x1.62e42ff000000p-1")  # 32 bits: k*_LN2HI exact for |k|<2^21
_LN2LO = _h("-0x1.718432a1b0e26p-35")
_TWO54 = _h("0x1p54")
_MIN_NORMAL = _h("0x1p-1022")

# exp(r) = 1 + r + r^2/2 + r^3*Q(r), |r| <= ln2/2, rel. error 5e-18
_E0 = _h("0x1.5555555555501p-3")
_E1 = _h("0x1.5555555553207p-5")
_E2 = _h("0x1.11111111288cap-7")
_E3 = _h("0x1.6c16c17cc30f1p-10")
_E4 = _h("0x1.a01a011bfe139p-13")
_E5 = _h("0x1.a019ab2e35959p-16")
_E6 = _h("0x1.71df55a701c63p-19")
_E7 = _h("0x1.289f895581964p-22")
_E8 = _h("0x1.ad1f5c521f041p-26")

# log(1+f) = f - f^2/2 + s*(f^2/2 + z*L(z)), s = f/(2+f), z = s^2
_L0 = _h("0x1.5555555555592p-1")
_L1 = _h("0x1.999999997fdbdp-2")
_L2 = _h("0x1.24924941f0b0fp-2")
_L3 = _h("0x1.c71c52098060bp-3")
_L4 = _h("0x1.74663ef4e67eap-3")
_L5 = _h("0x1.39a1b721f2f56p-3")
_L6 = _h("0x1.2f05a074c197ap-3")
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
_EXP_MASK_HI = -0x10000000000000     # 0xFFF0000000000000 as int64
_INVLN10 = _h("0x1.bcb7b1526e50ep-2")
_LOG10_2HI = _h("0x1.3441350a00000p-2")
_LOG10_2LO = _h("-0x1.0c0219dc1da99p-39")

# sin(y) = y + y^3*S(y^2), cos(y) = 1 - y^2/2 + y^4*C(y^2), |y| <= pi/4
_S0 = _h("-0x1.5555555555548p-3")
_S1 = _h("0x1.111111110f7cfp-7")
_S2 = _h("-0x1.a01a019bfdd44p-13")
_S3 = _h("0x1.71de3567bab57p-19")
_S4 = _h("-0x1.ae5e5a7d692f5p-26")
_S5 = _h("0x1.5d8fcbabf80ecp-33")
_C0 = _h("0x1.555555555554bp-5")
_C1 = _h("-0x1.6c16c16c14f94p-10")
_C2 = _h("0x1.a01a019c848efp-16")
_C3 = _h("-0x1.27e4f7eaf0979p-22")
_C4 = _h("0x1.1ee9d7d1ebe73p-29")
_C5 = _h("-0x1.8fa4a8d63dac3p-37")
# pi/2 = _P1 + _P2 + _P3 + _P3T; _P1.._P3 have <= 33 bits so k*_Pi is exact
_TWO_OVER_PI = _h("0x1.45f306dc9c883p-1")
_P1 = _h("0x1.921fb54400000p+0")
_P2 = _h("0x1.0b4611a600000p-34")
_P3 = _h("0x1.3198a2e000000p-69")
_P3T = _h("0x1.b839a252049c1p-104")
_TRIG_LIMIT = 1.0e6                  # k < 2^20 below this
_TINY = _h("0x1p-30")                # sin(x) = x, tan(x) = x below this (x^3 term < ulp/2)
_EXPM1_TINY = _h("0x1p-54")          # expm1(x) = x below this only: its x^2/2 term is larger

# erf(x) = x + x*P(x^2) on [0, 0.84375]
_ERF_S = tuple(_h(v) for v in (
    "0x1.06eba8214db68p-3", "-0x1.812746b037998p-2", "0x1.ce2f21a03e8cfp-4",
    "-0x1.b82ce31121a93p-6", "0x1.565bccd0a1a21p-8", "-0x1.c02da78fd2d73p-11",
    "0x1.f9a195fdcb936p-14", "-0x1.f4b1cb392723bp-17", "0x1.b830e3b813637p-20",
    "-0x1.50fdbd04a12efp-23", "0x1.6e5d73a6a9e7dp-27",
))
# erf(x) = P(x - 1) on [0.84375, 1.25]
_ERF_MID = tuple(_h(v) for v in (
    "0x1.af767a741088bp-1", "0x1.a911f096fbc26p-2", "-0x1.a911f096fbc10p-2",
    "0x1.1b614b0f52818p-3", "0x1.1b614b0f49d99p-4", "-0x1.1b614b0f43a01p-4",
    "0x1.2e45a5b762b8ap-8", "0x1.f096fcf0e7d1cp-7", "-0x1.39115c3845f1cp-8",
    "-0x1.ee2f58804da5bp-10", "0x1.418054918af80p-10", "0x1.62e598f2ac06bp-14",
    "-0x1.a5114bd592d39p-13", "0x1.0abb68bd9f366p-15", "0x0p+0",
    "0x0p+0",
))
# erf(x) = 1 - exp(-x^2)*P(x - 2) on [1.25, 2.75] (used on [1.25, 2.625))
_ERF_TA = tuple(_h(v) for v in (
    "0x1.058671b52c77fp-2", "-0x1.b57034efd3ef6p-4", "0x1.5672b9ea0f924p-5",
    "-0x1.fa9d3ac992f27p-7", "0x1.6490721a2abeep-8", "-0x1.e028e861e60d5p-10",
    "0x1.369ff874acbbbp-11", "-0x1.83823c0d3cb8cp-13", "0x1.d37c1316915efp-15",
    "-0x1.11581f4bb1b14p-16", "0x1.3693911baccebp-18", "-0x1.585ef490e67dfp-20",
    "0x1.718297b96fa0bp-22", "-0x1.7057e980537a0p-24", "0x1.b524d6d7cfd85p-26",
    "-0x1.3551641d43203p-27",
))
# erf(x) = 1 - exp(-x^2)*P(x - 4.25) on [2.5, 6] (used on [2.625, 6])
_ERF_TB = tuple(_h(v) for v in (
    "0x1.08e62ce842442p-3", "-0x1.da395381e59e8p-6", "0x1.9ef711e603cd0p-8",
    "-0x1.6373107f8b06fp-10", "0x1.2a6a7a78e0b0bp-12", "-0x1.eb2b74bb65f8bp-15",
    "0x1.8f0c727bf7ca6p-17", "-0x1.3e1c39a032d6bp-19", "0x1.834469111b74ep-22",
    "-0x1.d8d740c8e5369p-23", "-0x1.538493aeb4dcbp-24", "-0x1.8631fba6ce7c8p-25",
    "-0x1.625b16b8e4a50p-27", "-0x1.8e429e929ad80p-30", "0x0p+0",
    "0x0p+0",
))




# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

@_njit
def _copysign(r, x):
    """|r| with the sign of x (float64), by integer bit operations."""
    return _i2f((_f2i(r) & _ABS) | (_f2i(x) & _SIGN))


@_njit
def _pow2(k):
    """2.0**k for -1022 <= k <= 1023 (int64)."""
    return _i2f((k + 1023) << 52)


@_njit
def _exp_poly(r):
    p = _fma(r, _E8, _E7)
    p = _fma(r, p, _E6)
    p = _fma(r, p, _E5)
    p = _fma(r, p, _E4)
    p = _fma(r, p, _E3)
    p = _fma(r, p, _E2)
    p = _fma(r, p, _E1)
    return _fma(r, p, _E0)


@_njit
def _exp_tail(r, c):
    """c + r^2/2 + r^3*Q(r): the part of exp(r) - 1 - r after the leading terms."""
    return _fma(r * r, _fma(r, _exp_poly(r), 0.5), c)


# --------------------------------------------------------------------------
# exp family
# --------------------------------------------------------------------------

@_njit
def _exp64(x):
    # clamp keeps k in range; NaN passes both comparisons unchanged
    x = 1100.0 if x > 1100.0 else x
    x = -1100.0 if x < -1100.0 else x
    kd = _fma(x, _INVLN2, _SHIFT)
    k = _f2i(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    a = _fma(-kd, _LN2HI, x)                # exact (so the same as x - kd * _LN2HI)
    lo = kd * _LN2LO
    r = a - lo
    c = (a - r) - lo                        # rounding error of r
    hi = 1.0 + r
    p = hi + (((1.0 - hi) + r) + _exp_tail(r, c))
    k1 = k >> 1
    # two factors: exact overflow threshold, single rounding on underflow
    return (p * _pow2(k1)) * _pow2(k - k1)


# exp(r) = 1 + r + r^2 (A2 + A3 r + A4 r^2 + A5 r^3), |r| <= ln2/256, rel. error 2**-65.4
# (tools/fit_exp.py 128 5)
_A2 = _h("0x1.ffffffffffdbdp-2")
_A3 = _h("0x1.5555555555464p-3")
_A4 = _h("0x1.55555cf16d5c7p-5")
_A5 = _h("0x1.1111161e991ffp-7")
_LOW53 = (1 << 53) - 1
# one-multiply scaling: S = 2**(k/128) * 2**-c, exp = fma(S, tmp, S) * 2**c, c = 1 or -128:
# the exact overflow threshold, and a single rounding into subnormals
_K_POS = (0x3FF - 1 - 1) << 52
_K_NEG = (0x3FF - 1 + 128) << 52
_C_POS = 2.0
_C_NEG = 2.0 ** -128


@_njit
def _exp64_table(x):
    """exp by a 128-entry table (``numba_target.exp_variant``): x = k ln2/128 + r,
    exp(x) = 2**(k/128) exp(r); the entry gives 2**(j/128) and its rounding error."""
    x = 710.0 if x > 710.0 else x
    x = -750.0 if x < -750.0 else x       # NaN passes both comparisons unchanged
    kd = _fma(x, _INV_LN2_128, _SHIFT)
    bits = _f2i(kd)
    kd = kd - _SHIFT
    r = _fma(-kd, _LN2_128_LO, _fma(-kd, _LN2_128_HI, x))
    e = _EXP_TABLE[bits & 127]
    neg = x < 0.0
    s = _i2f((e & _LOW53) + (bits << 45) + (_K_NEG if neg else _K_POS))
    t = _fma(float(e >> 53), 2.0 ** -62, r)        # r + the entry's rounding error
    r2 = r * r
    tmp = _fma(r2, _fma(r2, _fma(r, _A5, _A4), _fma(r, _A3, _A2)), t)
    return _fma(s, tmp, s) * (_C_NEG if neg else _C_POS)


#: which float64 exp ``vexp`` is: ``"table"`` or ``"poly"`` (``numba_target.exp_variant``)
EXP_VARIANT = _exp_variant()


@_njit
def _exp2_64(x):
    x = 1100.0 if x > 1100.0 else x
    x = -1100.0 if x < -1100.0 else x
    kd = x + _SHIFT
    k = _f2i(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    f = x - kd                              # exact, |f| <= 1/2
    r = _fma(f, _LN2HI, f * _LN2LO)
    hi = 1.0 + r
    p = hi + (((1.0 - hi) + r) + _exp_tail(r, 0.0))
    k1 = k >> 1
    return (p * _pow2(k1)) * _pow2(k - k1)


@_njit
def _expm1_64(x):
    ax = abs(x)
    x = 710.0 if x > 710.0 else x
    x = -60.0 if x < -60.0 else x
    kd = _fma(x, _INVLN2, _SHIFT)
    k = _f2i(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    a = _fma(-kd, _LN2HI, x)                # exact (so the same as x - kd * _LN2HI)
    lo = kd * _LN2LO
    r = a - lo
    c = (a - r) - lo                        # rounding error of r
    # expm1(x) = 2*(t*(1 + expm1(r)) - 1/2), t = 2^(k-1): no overflow at k=1024
    t = _pow2(k - 1)
    a = t - 0.5
    b = t * r                               # exact
    u = a + b
    e = (a - u) + b                         # Fast2Sum: |a| >= |b| or a == 0
    res = 2.0 * (u + _fma(t, _exp_tail(r, c), e))
    res = x if ax < _EXPM1_TINY else res    # also keeps subnormals exact
    return _copysign(res, x)


# --------------------------------------------------------------------------
# log family
# --------------------------------------------------------------------------

@_njit
def _log_kernel(x):
    """For finite x > 0 (incl. subnormal): (k, f, s*(hfsq + R) - hfsq) with
    x = 2^k * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), log(1+f) = f + third."""
    sub = x < _MIN_NORMAL
    xs = x * _TWO54 if sub else x
    ix = _f2i(xs)
    tmp = ix - _SQRT_HALF_BITS
    k = (tmp >> 52) - (54 if sub else 0)
    m = _i2f(ix - (tmp & _EXP_MASK_HI))
    f = m - 1.0                             # exact
    s = f / (2.0 + f)
    z = s * s
    L = _fma(z, _L6, _L5)
    L = _fma(z, L, _L4)
    L = _fma(z, L, _L3)
    L = _fma(z, L, _L2)
    L = _fma(z, L, _L1)
    L = _fma(z, L, _L0)
    hfsq = 0.5 * f * f
    return k, f, hfsq, s * _fma(z, L, hfsq)      # s * (hfsq + z * L(z))


@_njit
def _log_special(res, x):
    res = res if x >= 0.0 else _NAN        # negative and NaN
    res = -_INF if x == 0.0 else res
    res = _INF if x == _INF else res
    return res


@_njit
def _log64(x):
    k, f, hfsq, t = _log_kernel(x)
    dk = float(k)
    # dk * _LN2HI is exact: the FMA rounds what dk * _LN2HI - (...) rounds
    res = _fma(dk, _LN2HI, f - (hfsq - _fma(dk, _LN2LO, t)))
    return _log_special(res, x)


@_njit
def _log2_64(x):
    k, f, hfsq, t = _log_kernel(x)
    # log1p(f) = f + (t - hfsq) as hi + lo, then scaled by 1/ln2
    hi = f - hfsq
    lo = ((f - hi) - hfsq) + t
    res = float(k) + _fma(hi, _INVLN2, _fma(lo, _INVLN2, hi * _INVLN2LO))
    return _log_special(res, x)


@_njit
def _log10_64(x):
    k, f, hfsq, t = _log_kernel(x)
    dk = float(k)
    hi = f - hfsq
    lo = ((f - hi) - hfsq) + t
    res = _fma(dk, _LOG10_2HI, _fma(hi, _INVLN10, _fma(dk, _LOG10_2LO, lo * _INVLN10)))
    return _log_special(res, x)


@_njit
def _log1p64(x):
    u = 1.0 + x
    # TwoSum: c = (1 + x) - u exactly
    bp = u - x
    c = (1.0 - bp) + (x - (u - bp))
    k, f, hfsq, t = _log_kernel(u)
    dk = float(k)
    res = _fma(dk, _LN2HI, f - (hfsq - (t + _fma(dk, _LN2LO, c / u))))
    res = _copysign(res, x)                 # log1p(-0.0) = -0.0
    res = res if x >= -1.0 else _NAN
    res = -_INF if x == -1.0 else res
    res = _INF if x == _INF else res
    return res


# --------------------------------------------------------------------------
# trigonometric
# --------------------------------------------------------------------------

@_njit
def _reduce_pio2(ax):
    """ax = k*pi/2 + (hi + lo) for 0 <= ax < _TRIG_LIMIT; returns (k, hi, lo)
    with |hi| <= pi/4 (+ulp) and the pair accurate to ~1e-40 absolute."""
    kd = _fma(ax, _TWO_OVER_PI, _SHIFT)
    k = _f2i(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    a = _fma(-kd, _P1, ax)                  # exact (k*P1 exact, Sterbenz)
    p2 = kd * _P2                           # exact
    b = a - p2
    bb = b - a
    e1 = (a - (b - bb)) - (p2 + bb)         # TwoSum error of a - p2
    p3 = kd * _P3                           # exact
    c = b - p3
    cc = c - b
    e2 = (b - (c - cc)) - (p3 + cc)         # TwoSum error of b - p3
    lo = _fma(-kd, _P3T, e1 + e2)
    hi = c + lo
    lo = lo - (hi - c)
    return k, hi, lo


@_njit
def _ksin(y, yl):
    z = y * y
    r = _fma(z, _S5, _S4)
    r = _fma(z, r, _S3)
    r = _fma(z, r, _S2)
    r = _fma(z, r, _S1)
    v = z * y
    return y - (_fma(z, _fma(-v, r, 0.5 * yl), -yl) - v * _S0)


@_njit
def _kcos(y, yl):
    z = y * y
    r = _fma(z, _C5, _C4)
    r = _fma(z, r, _C3)
    r = _fma(z, r, _C2)
    r = _fma(z, r, _C1)
    r = _fma(z, r, _C0)
    r = (z * z) * r
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + _fma(-y, yl, r))


@_njit
def _sin_core(x):
    """sin(x) for |x| < _TRIG_LIMIT (anything else: a value of no use)."""
    ax = abs(x)
    k, hi, lo = _reduce_pio2(ax)
    s = _ksin(hi, lo)
    s = ax if ax < _TINY else s
    c = _kcos(hi, lo)
    v = c if (k & 1) != 0 else s
    return _i2f(_f2i(v) ^ ((k & 2) << 62) ^ (_f2i(x) & _SIGN))


@_njit
def _cos_core(x):
    ax = abs(x)
    k, hi, lo = _reduce_pio2(ax)
    s = _ksin(hi, lo)
    c = _kcos(hi, lo)
    v = s if (k & 1) != 0 else c
    return _i2f(_f2i(v) ^ (((k + 1) & 2) << 62))


@_njit
def _tan_core(x):
    ax = abs(x)
    k, hi, lo = _reduce_pio2(ax)
    s = _ksin(hi, lo)
    s = ax if ax < _TINY else s
    c = _kcos(hi, lo)
    odd = (k & 1) != 0
    num = c if odd else s
    den = s if odd else c
    v = num / den
    return _i2f(_f2i(v) ^ ((k & 1) << 63) ^ (_f2i(x) & _SIGN))


@_njit
def _sin64(x):
    return _sin_core(x) if abs(x) < _TRIG_LIMIT else _slow_sin(x)


@_njit
def _cos64(x):
    return _cos_core(x) if abs(x) < _TRIG_LIMIT else _slow_cos(x)


@_njit
def _tan64(x):
    return _tan_core(x) if abs(x) < _TRIG_LIMIT else _slow_tan(x)


# the split versions (see ``trig_big``): no libm call, or a libm call LLVM cannot vectorise


@_njit
def _sin64_fast(x):
    return _sin_core(x) if abs(x) < _TRIG_LIMIT else x - x


@_njit
def _cos64_fast(x):
    return _cos_core(x) if abs(x) < _TRIG_LIMIT else x - x


@_njit
def _tan64_fast(x):
    return _tan_core(x) if abs(x) < _TRIG_LIMIT else x - x


@_njit
def _sin64_scalar(x):
    return _sin_core(x) if abs(x) < _TRIG_LIMIT else _scalar_sin(x)


@_njit
def _cos64_scalar(x):
    return _cos_core(x) if abs(x) < _TRIG_LIMIT else _scalar_cos(x)


@_njit
def _tan64_scalar(x):
    return _tan_core(x) if abs(x) < _TRIG_LIMIT else _scalar_tan(x)


# --------------------------------------------------------------------------
# tanh, sigmoid, erf
# --------------------------------------------------------------------------

@_njit
def _tanh64(x):
    ax = abs(x)
    ax = 40.0 if ax > 40.0 else ax          # tanh(40) == 1.0; inf -> 1
    e = _expm1_64(2.0 * ax)
    return _copysign(e / (e + 2.0), x)


@_njit
def _sigmoid64(x):
    e = _exp64(-abs(x))
    num = 1.0 if x >= 0.0 else e
    return num / (1.0 + e)


@_njit
def _sel3(a, b, c, ma, mb):
    return a if ma else (b if mb else c)


@_njit
def _erf64(x):
    ax = abs(x)
    ax = 6.0 if ax > 6.0 else ax            # erf(6) == 1.0; inf -> 1
    z = ax * ax
    S = _ERF_S
    ps = _fma(z, S[10], S[9])
    ps = _fma(z, ps, S[8])
    ps = _fma(z, ps, S[7])
    ps = _fma(z, ps, S[6])
    ps = _fma(z, ps, S[5])
    ps = _fma(z, ps, S[4])
    ps = _fma(z, ps, S[3])
    ps = _fma(z, ps, S[2])
    ps = _fma(z, ps, S[1])
    ps = _fma(z, ps, S[0])
    small = _fma(ax, ps, ax)
    mid = ax < 1.25
    ta = ax < 2.625
    M, A, B = _ERF_MID, _ERF_TA, _ERF_TB
    u = ax - _sel3(1.0, 2.0, 4.25, mid, ta)
    p = _sel3(M[15], A[15], B[15], mid, ta)
    p = _fma(u, p, _sel3(M[14], A[14], B[14], mid, ta))
    p = _fma(u, p, _sel3(M[13], A[13], B[13], mid, ta))
    p = _fma(u, p, _sel3(M[12], A[12], B[12], mid, ta))
    p = _fma(u, p, _sel3(M[11], A[11], B[11], mid, ta))
    p = _fma(u, p, _sel3(M[10], A[10], B[10], mid, ta))
    p = _fma(u, p, _sel3(M[9], A[9], B[9], mid, ta))
    p = _fma(u, p, _sel3(M[8], A[8], B[8], mid, ta))
    p = _fma(u, p, _sel3(M[7], A[7], B[7], mid, ta))
    p = _fma(u, p, _sel3(M[6], A[6], B[6], mid, ta))
    p = _fma(u, p, _sel3(M[5], A[5], B[5], mid, ta))
    p = _fma(u, p, _sel3(M[4], A[4], B[4], mid, ta))
    p = _fma(u, p, _sel3(M[3], A[3], B[3], mid, ta))
    p = _fma(u, p, _sel3(M[2], A[2], B[2], mid, ta))
    p = _fma(u, p, _sel3(M[1], A[1], B[1], mid, ta))
    p = _fma(u, p, _sel3(M[0], A[0], B[0], mid, ta))
    big = p if mid else _fma(-_exp64(-z), p, 1.0)
    res = small if ax < 0.84375 else big
    return _copysign(res, x)


# --------------------------------------------------------------------------
# public functions: float32 in -> float32 out (computed in float64)
# --------------------------------------------------------------------------

@_njit
def vexp_poly(x):
    """e**x by the polynomial (``EXP_VARIANT == "poly"``), whatever this process chose"""
    return _as_result(_exp64(np.float64(x)), x)


@_njit
def vexp_table(x):
    """e**x by the table (``EXP_VARIANT == "table"``), whatever this process chose"""
    return _as_result(_exp64_table(np.float64(x)), x)


#: e**x: ``vexp_table`` or ``vexp_poly``, as ``EXP_VARIANT`` says. An alias, not a function
#: reading a flag: code numba caches by its own text (``vecmath_calls``) then names the variant
#: it was compiled with, and kernel modules carry the variant in ``target.vecmath_hash()``.
#: ``vecmath_special`` and the incomplete gamma/beta functions use ``vexp_poly`` (the same
#: bits everywhere, and numba caches them by their own file's time stamp only).
vexp = vexp_table if EXP_VARIANT == "table" else vexp_poly


@_njit
def vexp2(x):
    """2**x"""
    return _as_result(_exp2_64(np.float64(x)), x)


@_njit
def vexpm1(x):
    """e**x - 1"""
    return _as_result(_expm1_64(np.float64(x)), x)


@_njit
def vlog(x):
    """natural logarithm"""
    return _as_result(_log64(np.float64(x)), x)


@_njit
def vlog2(x):
    """base-2 logarithm"""
    return _as_result(_log2_64(np.float64(x)), x)


@_njit
def vlog10(x):
    """base-10 logarithm"""
    return _as_result(_log10_64(np.float64(x)), x)


@_njit
def vlog1p(x):
    """log(1 + x)"""
    return _as_result(_log1p64(np.float64(x)), x)


@_njit
def vsin(x):
    """sine (radians)"""
    return _as_result(_sin64(np.float64(x)), x)


@_njit
def vcos(x):
    """cosine (radians)"""
    return _as_result(_cos64(np.float64(x)), x)


@_njit
def vtan(x):
    """tangent (radians)"""
    return _as_result(_tan64(np.float64(x)), x)


@_njit
def trig_big(x):
    """1 if ``vsin``/``vcos``/``vtan`` of x need libm (a finite |x| >= 1e6), else 0 (an
    int: a loop summing it vectorises)."""
    ax = abs(np.float64(x))
    return 1 if (ax >= _TRIG_LIMIT) & (ax != _INF) else 0


@_njit
def vsin_fast(x):
    """``vsin`` where ``trig_big(x) == 0``; no libm call (anything for other x)"""
    return _as_result(_sin64_fast(np.float64(x)), x)


@_njit
def vcos_fast(x):
    """``vcos`` where ``trig_big(x) == 0``; no libm call (anything for other x)"""
    return _as_result(_cos64_fast(np.float64(x)), x)


@_njit
def vtan_fast(x):
    """``vtan`` where ``trig_big(x) == 0``; no libm call (anything for other x)"""
    return _as_result(_tan64_fast(np.float64(x)), x)


@_njit
def vsin_scalar(x):
    """``vsin``, bit for bit, in a form that keeps its loop scalar"""
    return _as_result(_sin64_scalar(np.float64(x)), x)


@_njit
def vcos_scalar(x):
    """``vcos``, bit for bit, in a form that keeps its loop scalar"""
    return _as_result(_cos64_scalar(np.float64(x)), x)


@_njit
def vtan_scalar(x):
    """``vtan``, bit for bit, in a form that keeps its loop scalar"""
    return _as_result(_tan64_scalar(np.float64(x)), x)


@_njit
def vtanh(x):
    """hyperbolic tangent"""
    return _as_result(_tanh64(np.float64(x)), x)


@_njit
def vexp_f32(x):
    """e**x of a float32, in float32 arithmetic"""
    return _exp_f32(x)


@_njit
def vlog_f32(x):
    """natural logarithm of a float32, in float32 arithmetic"""
    return _log_f32(x)


@_njit
def vsigmoid_f32(x):
    """logistic function of a float32, in float32 arithmetic"""
    return _sigmoid_f32(x)


@_njit
def vtanh_f32(x):
    """hyperbolic tangent of a float32, in float32 arithmetic (<= 2 ulp)"""
    return _tanh_f32(x)


@_njit
def vsigmoid(x):
    """logistic function 1 / (1 + exp(-x))"""
    return _as_result(_sigmoid64(np.float64(x)), x)


@_njit
def verf(x):
    """error function"""
    return _as_result(_erf64(np.float64(x)), x)


#: name -> scalar njit function, for the code generator (``vm.VECMATH[name]``
#: or ``vm.v<name>``); "logistic" and "expit" are aliases of "sigmoid".
VECMATH = {
    "exp": vexp,
    "exp2": vexp2,
    "expm1": vexpm1,
    "log": vlog,
    "log2": vlog2,
    "log10": vlog10,
    "log1p": vlog1p,
    "sin": vsin,
    "cos": vcos,
    "tan": vtan,
    "tanh": vtanh,
    "sigmoid": vsigmoid,
    "logistic": vsigmoid,
    "expit": vsigmoid,
    "erf": verf,
}

#: native float32 variants (16 lanes per zmm; the others compute float32 in float64): the code
#: generator calls ``vm.VECMATH_F32[name]`` for float32 operands when there is one
VECMATH_F32 = {
    "exp": vexp_f32,
    "log": vlog_f32,
    "tanh": vtanh_f32,
    "sigmoid": vsigmoid_f32,
    "logistic": vsigmoid_f32,
    "expit": vsigmoid_f32,
}
