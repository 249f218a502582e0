"""Special-function primitives: erf and its relatives, the gamma family, Hurwitz zeta,
scaled Bessel functions, incomplete gamma and beta (the ops behind ``functrace.scipy``).

Owns one declaration per special function that no composition of other ops computes well.
The numpy impl is scipy.special (the ``scipy`` extra; without it, running an impl is a
``BackendError`` naming the extra) or cupyx.scipy.special for device arrays; the CPU kernels
are our own (``backends.cpu.vecmath_special``, ``vs.v<name>`` in a kernel module, and
``vecmath_incomplete``, ``vi.v<name>``); each derivative is written with op-level functions
(d gammaln = digamma, d digamma = polygamma(1, .), ...), so every order differentiates.

The incomplete gamma and beta functions are differentiable in every operand: in x by closed
forms, in the shape parameters through two more primitives, ``gammainc_da`` (d**n P / da**n)
and ``betainc_dab`` (d**(i+j) I / da**i db**j), computed to order 2 (their impls are
``ops.incomplete``'s, their kernels ``vecmath_incomplete``'s). A partial nobody has written
(zeta in ``s``; a third derivative in a shape parameter) is a ``MissingRuleError`` when a
gradient asks for it, never a silent zero or a wrong number. Imports core, errors, tracing and
the sibling op modules only.
"""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np

from ..errors import BackendError, MissingRuleError
from ..tracing import bind
from . import incomplete
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
           "polygamma", "zeta", "i0e", "i1e", "gammainc", "gammaincc", "betainc", "gammainc_da",
           "betainc_dab", "scipy_special",
           "erf_p", "erfc_p", "erfcx_p", "erfinv_p", "erfcinv_p", "ndtri_p", "gammaln_p",
           "digamma_p", "polygamma_p", "zeta_p", "i0e_p", "i1e_p", "gammainc_p", "gammaincc_p",
           "betainc_p", "gammainc_da_p", "betainc_dab_p"]

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


def _vm(name: str, module: str = "vs"):
    """CPU code: ``vs.v<name>(...)`` (backends.cpu.vecmath_special; ``vi``:
    vecmath_incomplete), the int params first in name order; float32 computed in float64."""
    def f(args, params, in_dts, out_dt):
        lead = [str(int(params[k])) for k in sorted(params)]
        return f"{module}.v{name}({', '.join(lead + list(args))})"
    return sc.cpu(f, kinds="f", alone=True)


_NO_CUDA = "no CUDA kernel yet (cupyx.scipy.special runs it)"
_NO_CUDA_D = "no CUDA kernel yet (its numpy implementation runs on the host)"


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
# regularized incomplete gamma and beta, and their derivatives in the shape parameters
# --------------------------------------------------------------------------------------------

#: the highest derivative in a shape parameter the kernels compute (jets of order 2)
MAX_SHAPE_ORDER = 2


def _shape_order_error(fn: str, what: str):
    raise MissingRuleError(
        f"{fn}: a derivative of order {MAX_SHAPE_ORDER + 1} in {what} is not implemented "
        f"(the shape-parameter derivatives go to order {MAX_SHAPE_ORDER}); differentiate "
        f"fewer times in it, or wrap it in ft.stop_gradient")


def _gammainc_dx(a, x, y):
    # x**(a-1) e**-x / gamma(a), in log space
    return exp(sub(sub(mul(sub(a, lit(1, a)), log(x)), x), gammaln(a)))


def _log_away(x):
    """log(x) with x = 0 replaced by 1: where x**(a-1) makes a partial 0 (a > 1), 0 * log(0)
    would be NaN, and so would every derivative of it (chi2.cdf's at z < 0, for one)."""
    return log(select(eq(x, lit(0, x)), lit(1, x), x))


def _log1m_away(x):
    """log(1 - x) with x = 1 replaced by 0 (as ``_log_away`` for (1-x)**(b-1))."""
    return log1p(neg(select(eq(x, lit(1, x)), lit(0, x), x)))


def _gammainc_da_dx(a, x, n):
    # d/dx d**n P/da**n = d**n/da**n of x**(a-1) e**-x / gamma(a): with l = log x - psi(a),
    # f l (n = 1) and f (l**2 - psi'(a)) (n = 2)
    f = _gammainc_dx(a, x, None)
    lx = sub(_log_away(x), digamma(a))
    if n == 1:
        return mul(f, lx)
    return mul(f, sub(mul(lx, lx), polygamma(a, n=1)))


def _gammainc_da_da(a, x, y, *, n):
    if n >= MAX_SHAPE_ORDER:
        _shape_order_error("gammainc", "'a'")
    return gammainc_da(a, x, n=n + 1)


gammainc_p = _op("gammainc", (lambda a, x, y: gammainc_da(a, x, n=1), _gammainc_dx), nin=2,
                 cpu=_vm("gammainc", "vi"))
gammaincc_p = _op("gammaincc", (lambda a, x, y: neg(gammainc_da(a, x, n=1)),
                                lambda a, x, y: neg(_gammainc_dx(a, x, y))), nin=2,
                  cpu=_vm("gammaincc", "vi"))
gammainc_da_p = elementwise_op(
    "gammainc_da", lambda a, x, *, n: incomplete.gammainc_da(a, x, n), 2,
    cpu=_vm("gammainc_da", "vi"), cuda=_NO_CUDA_D, kinds="f",
    derivative=(_gammainc_da_da, lambda a, x, y, *, n: _gammainc_da_dx(a, x, n)))


def _betainc_dx(a, b, x, y):
    # x**(a-1) (1-x)**(b-1) / B(a, b), in log space
    one = lit(1, x)
    lb = sub(add(gammaln(a), gammaln(b)), gammaln(add(a, b)))
    return exp(sub(add(mul(sub(a, one), log(x)), mul(sub(b, one), log1p(neg(x)))), lb))


def _betainc_dab_dx(a, b, x, i, j):
    # d/dx d**(i+j) I/da**i db**j = the same partial of x**(a-1) (1-x)**(b-1) / B(a, b):
    # with A = log x - psi(a) + psi(a+b), B = log(1-x) - psi(b) + psi(a+b), t = psi'(a+b):
    # f A, f B, f (A**2 - psi'(a) + t), f (A B + t), f (B**2 - psi'(b) + t)
    f = _betainc_dx(a, b, x, None)
    c = add(a, b)
    pc = digamma(c)
    la = add(sub(_log_away(x), digamma(a)), pc)
    lb = add(sub(_log1m_away(x), digamma(b)), pc)
    if (i, j) == (1, 0):
        return mul(f, la)
    if (i, j) == (0, 1):
        return mul(f, lb)
    tc = polygamma(c, n=1)
    if (i, j) == (1, 1):
        return mul(f, add(mul(la, lb), tc))
    if i == 2:
        return mul(f, add(sub(mul(la, la), polygamma(a, n=1)), tc))
    return mul(f, add(sub(mul(lb, lb), polygamma(b, n=1)), tc))


def _betainc_dab_partial(k):
    def d(a, b, x, y, *, i, j):
        if i + j >= MAX_SHAPE_ORDER:
            _shape_order_error("betainc", "'a' and 'b' together")
        return betainc_dab(a, b, x, i=i + (k == 0), j=j + (k == 1))
    return d


betainc_p = _op("betainc", (lambda a, b, x, y: betainc_dab(a, b, x, i=1, j=0),
                            lambda a, b, x, y: betainc_dab(a, b, x, i=0, j=1), _betainc_dx),
                nin=3, cpu=_vm("betainc", "vi"))
betainc_dab_p = elementwise_op(
    "betainc_dab", lambda a, b, x, *, i, j: incomplete.betainc_dab(a, b, x, i, j), 3,
    cpu=_vm("betainc_dab", "vi"), cuda=_NO_CUDA_D, kinds="f",
    derivative=(_betainc_dab_partial(0), _betainc_dab_partial(1),
                lambda a, b, x, y, *, i, j: _betainc_dab_dx(a, b, x, i, j)))

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


def gammainc_da(a, x, n: int):
    """d**n P(a, x) / da**n for n = 1, 2 (P: the regularized lower incomplete gamma)."""
    n = int(n)
    if not 1 <= n <= MAX_SHAPE_ORDER:
        raise ValueError(f"gammainc_da: order n={n} must be 1 or 2")
    return bind(gammainc_da_p, a, x, n=n)


def betainc_dab(a, b, x, i: int, j: int):
    """d**(i+j) I_x(a, b) / da**i db**j for 1 <= i + j <= 2."""
    i, j = int(i), int(j)
    if i < 0 or j < 0 or not 1 <= i + j <= MAX_SHAPE_ORDER:
        raise ValueError(f"betainc_dab: orders i={i}, j={j} must have 1 <= i + j <= 2")
    return bind(betainc_dab_p, a, b, x, i=i, j=j)

