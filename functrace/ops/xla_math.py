"""Float primitives that compute what XLA computes, rounding for rounding: ``fma`` and
``erf_inv_xla`` (``jax.lax.erf_inv``). ``functrace.random`` builds JAX's samplers on them, so
``random.normal`` equals ``jax.random.normal`` bit for bit.

Owns ``fma_p`` (``a * b + c`` rounded once) and ``erf_inv_xla_p`` with their recipes
(``ops.scalar_recipe``: one branch-free scalar function gives the numpy impl and the CPU and
CUDA kernel helpers). What was matched, and how it was found: jax 0.10.2's CPU executable for
``jax.random.normal`` (XLA dumps: ``XLA_FLAGS=--xla_dump_to=...``; the optimised LLVM IR and
the object code) computes ``erf_inv`` as Giles' single- and double-precision polynomials in
``w = -log1p(-x*x)`` (stablehlo's chlo decomposition), ``log1p`` as XLA's intrinsic (a Cephes
rational function for ``|x| < sqrt(2) - 1``, else ``log(1 + x)``), ``log`` of float32 as
Eigen's ``plog`` (Cephes polynomial, frexp by bit manipulation) and ``log`` of float64 as
libm's; and LLVM contracts every ``a * b + c`` whose product has no other use into an FMA (on
machines with FMA3: every x86-64 CPU since 2013, every ARM64 CPU). The recipes write those
FMAs explicitly. Checked against jax on 3x10**6 normals per dtype (tests/api/test_random.py
keeps golden values; tools/jax_random_golden.py makes them).

``erfinv`` (``ops.special``) is scipy's erfinv; ``erf_inv_xla`` is JAX's, a different
rounding of the same function. Imports core, tracing and the sibling op modules only.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..core import ScalarCode
from ..tracing import bind
from . import scalar_recipe as sr
from ._base import as_array, lit
from .elementwise import elementwise_op, exp, mul

__all__ = ["fma", "erf_inv_xla", "fma_p", "erf_inv_xla_p", "xla_log1p", "eigen_log_f32",
           "erf_inv_f32", "erf_inv_f64"]


def _f32(bits: int) -> float:
    """The float32 with this bit pattern (constants as XLA's IR spells them)."""
    return float(np.array(bits, np.uint32).view(np.float32))


# --------------------------------------------------------------------------------------------
# recipes
# --------------------------------------------------------------------------------------------

def eigen_log_f32(m, v):
    """float32 log as Eigen's ``plog_float`` (XLA's CPU log): frexp by bits, the mantissa
    moved to [sqrt(1/2), sqrt(2)), a degree-8 Cephes polynomial, FMAs where XLA contracts.
    Subnormal inputs are clamped to the smallest normal (as Eigen does)."""
    tiny = m.f(_f32(0x00800000))
    x = m.where(v > tiny, v, tiny)
    b = m.bits(x)
    e = m.cast((b >> m.const(23, np.int32)) - m.const(127, np.int32), np.float32) + m.f(1)
    mant = m.from_bits((b & m.const(-2139095041, np.int32)) | m.const(0x3F000000, np.int32))
    small = mant < m.f(_f32(0x3F3504F3))                 # sqrt(1/2)
    xm = (mant + m.f(-1)) + m.where(small, mant, m.f(0))
    e = e - m.where(small, m.f(1), m.f(0))
    x2 = xm * xm
    x3 = x2 * xm
    y = m.fma(m.fma(xm, m.f(_f32(0x3D9021BB)), m.f(_f32(0xBDEBD1B8))), xm, m.f(_f32(0x3DEF251A)))
    y1 = m.fma(m.fma(xm, m.f(_f32(0xBDFE5D4F)), m.f(_f32(0x3E11E9BF))), xm,
               m.f(_f32(0xBE2AAE50)))
    y2 = m.fma(m.fma(xm, m.f(_f32(0x3E4CCEAC)), m.f(_f32(0xBE7FFFFC))), xm,
               m.f(_f32(0x3EAAAAAA)))
    y = m.fma(m.fma(m.fma(y, x3, y1), x3, y2), x3, e * m.f(_f32(0xB95E8083)))
    r = m.fma(e, m.f(_f32(0x3F318000)), m.fma(-x2, m.f(0.5), xm) + y)
    r = m.where(v == m.f(0), m.f(-math.inf), r)
    r = m.where(v == m.f(math.inf), m.f(math.inf), r)
    return m.where(v < m.f(0), m.f(math.nan), m.where(v != v, v, r))


_LOG1P_DEN = (1.5062909083469192043167E1, 8.3047565967967209469434E1,
              2.2176239823732856465394E2, 3.0909872225312059774938E2,
              2.1642788614495947685003E2, 6.0118660497603843919306E1)
_LOG1P_NUM = (4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
              6.5787325942061044846969E0, 2.9911919328553073277375E1,
              6.0949667980987787057556E1, 5.7112963590585538103336E1,
              2.0039553499201281259648E1)


def xla_log1p(m, x):
    """XLA's log1p intrinsic: ``log(1 + x)`` for ``|x| >= sqrt(2) - 1``, else ``x - x**2/2 +
    x**3 * P(x)/Q(x)`` (Cephes' rational function, evaluated as XLA's IR does: ``0*x + c``
    starts each polynomial)."""
    x2 = x * x
    zero_x = x * m.f(0)
    den = zero_x + m.f(1)
    for c in _LOG1P_DEN:
        den = m.fma(den, x, m.f(c))
    num = zero_x + m.f(_LOG1P_NUM[0])
    for c in _LOG1P_NUM[1:]:
        num = m.fma(num, x, m.f(c))
    small = x + m.fma(x2, m.f(-0.5), (x * x2) * (num / den))
    # float64's large branch calls libm: computed only where needed (a branch in kernels)
    f32 = m.dtype == np.float32
    return m.where_else(m.abs(x) < m.f(0.41421356237309504880), small,
                        lambda v: eigen_log_f32(m, v + m.f(1)) if f32 else m.log(v + m.f(1)), x,
                        branch=not f32)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), as XLA spells them
_ERFINV32 = ((2.81022636e-08, -0.000200214257), (3.43273939e-07, 0.000100950558),
             (-3.5233877e-06, 0.00134934322), (-4.39150654e-06, -0.00367342844),
             (0.00021858087, 0.00573950773), (-0.00125372503, -0.0076224613),
             (-0.00417768164, 0.00943887047), (0.246640727, 1.00167406),
             (1.50140941, 2.83297682))


def erf_inv_f32(m, x):
    """XLA's ErfInv32: w = -log1p(-x*x); a degree-8 polynomial in w - 2.5 (w < 5) or
    sqrt(w) - 3; erf_inv(+-1) = +-inf."""
    lg = xla_log1p(m, x * -x)
    lt = lg > m.f(-5)                                   # w < 5, w = -lg
    z = m.where(lt, m.f(-2.5) - lg, m.sqrt(-lg) + m.f(-3))
    p = m.where(lt, m.f(_ERFINV32[0][0]), m.f(_ERFINV32[0][1]))
    for c_lt, c_ge in _ERFINV32[1:]:
        p = m.fma(p, z, m.where(lt, m.f(c_lt), m.f(c_ge)))
    return x * m.where(m.abs(x) == m.f(1), m.f(math.inf), p)


_ERFINV64_W625 = (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)
_ERFINV64_W16 = (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)
_ERFINV64_WGT16 = (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)


def erf_inv_f64(m, x):
    """XLA's ErfInv64: three polynomials (w < 6.25: 23 terms in w - 3.125; w < 16: 19 terms
    in sqrt(w) - 3.25; else 17 terms in sqrt(w) - 5), evaluated in one Horner loop whose
    coefficients are selected per element and whose last steps only the longer ones take."""
    lg = xla_log1p(m, x * -x)
    lt625, lt16 = lg > m.f(-6.25), lg > m.f(-16)
    w = m.where(lt625, m.f(-3.125) - lg, m.sqrt(-lg) - m.where(lt16, m.f(3.25), m.f(5)))

    def coefficient(i):
        c = m.where(lt625, m.f(_ERFINV64_W625[i]), m.f(_ERFINV64_W16[i])) if i < 19 else \
            m.f(_ERFINV64_W625[i])
        return m.where(lt16, c, m.f(_ERFINV64_WGT16[i])) if i < 17 else c

    p = coefficient(0)
    for i in range(1, 17):
        p = m.fma(p, w, coefficient(i))
    for i in range(17, 19):
        p = m.where(lt16, m.fma(p, w, coefficient(i)), p)
    for i in range(19, 23):
        p = m.where(lt625, m.fma(p, w, coefficient(i)), p)
    return x * m.where(m.abs(x) == m.f(1), m.f(math.inf), p)


# --------------------------------------------------------------------------------------------
# recipe ops: the numpy impl and each target's helper come from one recipe
# --------------------------------------------------------------------------------------------

def run_recipe(recipe, float_dtype, *xs):
    """A recipe on numpy arrays (broadcast, computed 1-d so no numpy scalar warns about the
    wrapping it relies on), reshaped to the broadcast shape."""
    xs = np.broadcast_arrays(*[np.asarray(x) for x in xs])
    shape = xs[0].shape
    with np.errstate(all="ignore"):
        out = recipe(sr.NumpyMath(float_dtype), *[x.reshape(-1) for x in xs])
    return np.asarray(out).reshape(shape)


class RecipeCode:
    """A target's kernel code for an op computed by a recipe per dtype: the expression is a
    call of the helper, the helper's source comes with it (``lowering.spec`` asks the
    template's ``helper(params, in_dtypes, out_dtype)``)."""

    def __init__(self, name: str, target: str, pick):
        # pick(params, in_dtypes) -> (recipe, float dtype, out dtype or None, variant name)
        self.name, self.target, self.pick = name, target, pick

    def _key(self, params, in_dtypes):
        recipe, fdt, odt, variant = self.pick(params, in_dtypes)
        return recipe, fdt, odt, f"{self.name}_{variant}" if variant else self.name

    def __call__(self, args, params, in_dtypes, out_dtype) -> str:
        *_, name = self._key(params, in_dtypes)
        return f"{sr.helper_name(name, in_dtypes)}({', '.join(args)})"

    def helper(self, params, in_dtypes, out_dtype) -> str:
        recipe, fdt, odt, name = self._key(params, in_dtypes)
        return _helper(recipe, name, tuple(np.dtype(d).str for d in in_dtypes),
                       np.dtype(fdt).str, self.target, None if odt is None else np.dtype(odt).str)


@functools.cache
def _helper(recipe, name, in_dtypes, fdt, target, odt):
    return sr.helper_source(recipe, name, [np.dtype(d) for d in in_dtypes], np.dtype(fdt),
                            target, None if odt is None else np.dtype(odt))


# --------------------------------------------------------------------------------------------
# fma
# --------------------------------------------------------------------------------------------

def _fma_impl(a, b, c):
    return sr.fma(as_array(a), as_array(b), as_array(c))


class _FmaCpu:
    """``llvm.fma`` (vecmath_llvm's intrinsic), imported into the kernel module."""

    def __call__(self, args, params, in_dtypes, out_dtype) -> str:
        return f"_ftr_fma({', '.join(args)})"

    def helper(self, params, in_dtypes, out_dtype) -> str:
        return "from functrace.backends.cpu.vecmath_llvm import fma as _ftr_fma  # noqa: E402"


def _fma_cuda(args, params, in_dts, out_dt):
    fn = "libdevice.fmaf" if np.dtype(out_dt) == np.float32 else "libdevice.fma"
    return f"{fn}({', '.join(args)})"


fma_p = elementwise_op(
    "fma", _fma_impl, 3, cpu=ScalarCode(_FmaCpu(), "f"), cuda=ScalarCode(_fma_cuda, "f"),
    kinds="f", derivative=(lambda a, b, c, y: b, lambda a, b, c, y: a,
                           lambda a, b, c, y: lit(1, y)))


def fma(a, b, c):
    """``a * b + c`` rounded once (IEEE ``fusedMultiplyAdd``; operands of one float dtype,
    0-d operands broadcast). Where XLA contracts a product and a sum, this is what it
    computes.

    >>> import numpy as np
    >>> float(fma(np.float64(0.1), np.float64(10.0), np.float64(-1.0)))  # 0.1*10 - 1 is 0.0
    5.551115123125783e-17
    """
    return bind(fma_p, a, b, c)


# --------------------------------------------------------------------------------------------
# erf_inv as XLA computes it
# --------------------------------------------------------------------------------------------

_ERF_INV = {np.dtype(np.float32): erf_inv_f32, np.dtype(np.float64): erf_inv_f64}
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0


def _erf_inv_impl(x):
    x = as_array(x)
    return run_recipe(_ERF_INV[x.dtype], x.dtype, x).astype(x.dtype, copy=False)


def _erf_inv_pick(params, in_dtypes):
    dt = np.dtype(in_dtypes[0])
    return _ERF_INV[dt], dt, None, dt.name


erf_inv_xla_p = elementwise_op(
    "erf_inv_xla", _erf_inv_impl,
    cpu=ScalarCode(RecipeCode("erf_inv_xla", "cpu", _erf_inv_pick), "f", alone=True),
    cuda=ScalarCode(RecipeCode("erf_inv_xla", "cuda", _erf_inv_pick), "f", alone=True),
    kinds="f", derivative=lambda x, y: mul(lit(_SQRT_PI_OVER_2, y), exp(mul(y, y))),
    singular=(0, 0.0))


def erf_inv_xla(x):
    """The inverse error function as ``jax.lax.erf_inv`` computes it on the CPU, bit for bit
    (float32 and float64 operands; ``erf_inv_xla(+-1) = +-inf``, nan outside [-1, 1]).
    Differentiable: d/dx = sqrt(pi)/2 * exp(y**2).

    >>> import numpy as np
    >>> float(erf_inv_xla(np.float64(0.5)))      # the true value is 0.47693627620446987...
    0.47693627620446977
    """
    return bind(erf_inv_xla_p, x)
