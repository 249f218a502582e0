"""Special-function primitives: erf and its relatives, the gamma family, Hurwitz zeta,
scaled Bessel functions, incomplete gamma and beta (the ops behind ``functrace.scipy``).

Owns one declaration per special function that no composition of other ops computes well.
The numpy impl is scipy.special (the ``scipy`` extra; without it, running an impl is a
``BackendError`` naming the extra) or cupyx.scipy.special for device arrays; the CPU kernels
are our own (``backends.cpu.vecmath_special``, ``vs.v<name>`` in a kernel module); each
derivative is written with op-level functions (d gammaln = digamma, d digamma =
polygamma(1, .), ...), so every order differentiates. A partial nobody has written (zeta in
``s``, the incomplete functions in their shape parameters) is a ``MissingRuleError`` when a
gradient asks for it, never a silent zero. Imports core, errors, tracing and the sibling op
modules only.
"""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np

from ..errors import BackendError, MissingRuleError
from ..tracing import bind
from . import scalar_code as sc
from ._base import lit
from .elementwise import (
    add,
    div,
    elementwise_op,
    eq,
    exp,
    log,
    log1p,
    mul,
    neg,
    select,
    sign,
    sub,
)

__all__ = ["erf", "erfc", "erfcx", "erfinv", "erfcinv", "ndtri", "gammaln", "digamma",
           "polygamma", "zeta", "i0e", "i1e", "gammainc", "gammaincc", "betainc", "scipy_special",
           "erf_p", "erfc_p", "erfcx_p", "erfinv_p", "erfcinv_p", "ndtri_p", "gammaln_p",
           "digamma_p", "polygamma_p", "zeta_p", "i0e_p", "i1e_p", "gammainc_p", "gammaincc_p",
           "betainc_p"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def scipy_special():
    """scipy.special, or a BackendError that names the extra to install."""
    try:
        return importlib.import_module("scipy.special")
    except ImportError:
        raise BackendError(
            "this special function's reference implementation needs SciPy: "
            "pip install 'functrace[scipy]' (compiled kernels under ft.jit do not)") from None


def _device_special(x):
    cp = sys.modules.get("cupy")
    if cp is not None and isinstance(x, cp.ndarray):
        return importlib.import_module("cupyx.scipy.special")
    return None


def _impl(name: str):
    """scipy.special.<name> (cupyx's for device arrays), keeping the operands' dtype."""
    def impl(*xs, **params):
        mod = _device_special(xs[0]) or scipy_special()
        args = tuple(params.values()) + xs
        with np.errstate(all="ignore"):
            out = getattr(mod, name)(*args)
        return out.astype(xs[0].dtype, copy=False) if hasattr(out, "astype") else out
    impl.__name__ = f"{name}_impl"
    return impl


def _vm(name: str):
    """CPU code: ``vs.v<name>(...)`` (backends.cpu.vecmath_special; float32 computed in
    float64)."""
    def f(args, params, in_dts, out_dt):
        lead = [str(int(params[k])) for k in sorted(params)]
        return f"vs.v{name}({', '.join(lead + list(args))})"
    return sc.cpu(f, kinds="f", alone=True)


_NO_CUDA = "no CUDA kernel yet (cupyx.scipy.special runs it)"
_NO_KERNEL = "no kernel yet: an op step runs scipy.special (cupyx.scipy.special on a device)"


def _op(name, d, nin=1, cpu=None, cuda=_NO_CUDA, **kw):
    return elementwise_op(name, _impl(name), nin, cpu=_vm(name) if cpu is None else cpu,
                          cuda=cuda, derivative=d, kinds="f", **kw)


def _unary(op):
    def f(x, **params):
        return bind(op, x, **params)
    f.__name__ = op.name
    f.__doc__ = f"Apply the ``{op.name}`` primitive (float operands, no promotion)."
    return f


def _binary(op):
    def f(x, y):
        if isinstance(x, int | float):
            x = lit(x, y)
        if isinstance(y, int | float):
            y = lit(y, x)
        return bind(op, x, y)
    f.__name__ = op.name
    f.__doc__ = f"Apply the ``{op.name}`` primitive (operands of one float dtype)."
    return f


def _missing(op_name: str, arg: str):
    def d(*args, **params):
        raise MissingRuleError(
            f"{op_name}: the derivative with respect to {arg!r} is not implemented; "
            f"differentiate only in the other operand (wrap {arg} in ft.stop_gradient)")
    return d


def _gauss(x, scale):
    """scale * exp(-x**2)."""
    return mul(lit(scale, x), exp(neg(mul(x, x))))


# --------------------------------------------------------------------------------------------
# error functions
# --------------------------------------------------------------------------------------------

erf_p = _op("erf", lambda x, y: _gauss(x, _TWO_OVER_SQRT_PI), cpu=sc.vecmath("erf"),
            cuda=sc.libdevice("erf"))
erfc_p = _op("erfc", lambda x, y: _gauss(x, -_TWO_OVER_SQRT_PI), cuda=sc.libdevice("erfc"))
erfcx_p = _op("erfcx", lambda x, y: sub(mul(lit(2, x), mul(x, y)), lit(_TWO_OVER_SQRT_PI, x)))
erfinv_p = _op("erfinv", lambda x, y: mul(lit(_SQRT_PI_OVER_2, y), exp(mul(y, y))),
               singular=(0, 0.0))
erfcinv_p = _op("erfcinv", lambda x, y: mul(lit(-_SQRT_PI_OVER_2, y), exp(mul(y, y))),
                singular=(0, 1.0))
ndtri_p = _op("ndtri", lambda x, y: mul(lit(_SQRT_2PI, y), exp(mul(lit(0.5, y), mul(y, y)))),
              singular=(0, 0.5))

# --------------------------------------------------------------------------------------------
# gamma family
# --------------------------------------------------------------------------------------------

gammaln_p = _op("gammaln", lambda x, y: digamma(x), cuda=sc.libdevice("lgamma"),
                singular=(0, 1.5))
digamma_p = _op("digamma", lambda x, y: polygamma(x, n=1), singular=(0, 1.5))
polygamma_p = _op("polygamma", lambda x, y, *, n: polygamma(x, n=n + 1), singular=(0, 1.5))


def _zeta_dq(s, q, y):
    # d/dq sum (k + q)**-s = -s zeta(s + 1, q)
    return neg(mul(s, zeta(add(s, lit(1, s)), q)))


zeta_p = _op("zeta", (_missing("zeta", "s"), _zeta_dq), nin=2, singular=(1, 1.0))

# --------------------------------------------------------------------------------------------
# exponentially scaled modified Bessel functions
# --------------------------------------------------------------------------------------------


def _i1e_d(x, y):
    # d/dx e**-|x| I1(x) = e**-|x| (I0(x) - I1(x)/x) - sign(x) i1e(x); I1(x)/x -> 1/2 at 0
    zero = eq(x, lit(0, x))
    safe = select(zero, lit(1, x), x)
    ratio = select(zero, lit(0.5, y), div(y, safe))
    return sub(sub(i0e(x), ratio), mul(sign(x), y))


i0e_p = _op("i0e", lambda x, y: sub(i1e(x), mul(sign(x), y)))
i1e_p = _op("i1e", _i1e_d)

# --------------------------------------------------------------------------------------------
# regularized incomplete gamma and beta: scipy runs them (no kernel yet); differentiable in x
# --------------------------------------------------------------------------------------------


def _gammainc_dx(a, x, y):
    # x**(a-1) e**-x / gamma(a), in log space
    return exp(sub(sub(mul(sub(a, lit(1, a)), log(x)), x), gammaln(a)))


gammainc_p = _op("gammainc", (_missing("gammainc", "a"), _gammainc_dx), nin=2,
                 cpu=_NO_KERNEL, cuda=_NO_KERNEL)
gammaincc_p = _op("gammaincc", (_missing("gammaincc", "a"),
                                lambda a, x, y: neg(_gammainc_dx(a, x, y))), nin=2,
                  cpu=_NO_KERNEL, cuda=_NO_KERNEL)


def _betainc_dx(a, b, x, y):
    # x**(a-1) (1-x)**(b-1) / B(a, b), in log space
    one = lit(1, x)
    lb = sub(add(gammaln(a), gammaln(b)), gammaln(add(a, b)))
    return exp(sub(add(mul(sub(a, one), log(x)), mul(sub(b, one), log1p(neg(x)))), lb))


betainc_p = _op("betainc", (_missing("betainc", "a"), _missing("betainc", "b"), _betainc_dx),
                nin=3, cpu=_NO_KERNEL, cuda=_NO_KERNEL)

(erf, erfc, erfcx, erfinv, erfcinv, ndtri, gammaln, digamma, i0e, i1e) = map(_unary, (
    erf_p, erfc_p, erfcx_p, erfinv_p, erfcinv_p, ndtri_p, gammaln_p, digamma_p, i0e_p, i1e_p))
zeta, gammainc, gammaincc = map(_binary, (zeta_p, gammainc_p, gammaincc_p))


def polygamma(x, n: int):
    """The n-th derivative of digamma at ``x`` (``n`` a Python int >= 1; 0 is digamma)."""
    n = int(n)
    if n == 0:
        return digamma(x)
    if n < 0:
        raise ValueError(f"polygamma: order n={n} must be >= 0")
    return bind(polygamma_p, x, n=n)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (operands of one float dtype)."""
    return bind(betainc_p, a, b, x)

