"""Elementwise primitives: one declaration each, with derivative, kernel and flags.

Owns every elementwise op (unary math, binary arithmetic, comparisons, select, casts) and its
op-level function (``sin(x)`` binds ``sin_p``). Imports core/tracing and its sibling
``_base``; never ``functrace.numpy`` or a backend.

A smooth op declares its partial derivatives once (``d=`` for unary, ``dx=``/``dy=`` for
binary ops) as functions of the primal inputs and output, written with op-level functions;
``_smooth`` turns them into both the vjp rule (``ct * d``) and the jvp rule (``t * d``), so a
derivative written once serves both modes and is itself differentiable. Ops whose derivative
is zero wherever it exists (floor, sign, comparisons) say ``zero_grad=True``. Conventions at
kinks follow docs/numerics.md (shared/NUMERICS.md).
"""

from __future__ import annotations

import numpy as np

from ..core import Op
from ..tracing import bind, cotangent_wanted
from ._base import as_array, dtype_of, elementwise_op, lit

# --------------------------------------------------------------------------------------------
# op-level functions (defined before the rules that use them)
# --------------------------------------------------------------------------------------------


_PY_SCALARS = (bool, int, float, complex)


def _coerce(x, like):
    """Python scalars become 0-d arrays of the other operand's dtype."""
    if isinstance(x, bool | int | float | complex):
        if hasattr(like, "__cuda_array_interface__"):
            return dtype_of(like).type(x)    # a numpy scalar: cupy mixes those, not arrays
        return np.asarray(x, dtype=dtype_of(like))
    return x


def _unary(op: Op):
    def f(x):
        return bind(op, x)
    f.__name__ = op.name
    f.__doc__ = f"Apply the ``{op.name}`` primitive (no promotion, no broadcasting)."
    return f


def _binary(op: Op):
    def f(x, y):
        if isinstance(x, _PY_SCALARS):
            x = _coerce(x, y)
        elif isinstance(y, _PY_SCALARS):
            y = _coerce(y, x)
        return bind(op, x, y)
    f.__name__ = op.name
    f.__doc__ = f"Apply the ``{op.name}`` primitive (operands of one dtype; 0-d broadcasts)."
    return f


def _smooth_unary(op: Op, d):
    """Rules from dy/dx = d(x, y)."""
    def vjp(cts, ins, outs, **p):
        return (mul(cts[0], d(ins[0], outs[0], **p)),)

    def jvp(primals, tangents, outs, **p):
        return (mul(tangents[0], d(primals[0], outs[0], **p)),)
    op.vjp, op.jvp = vjp, jvp


def _smooth_binary(op: Op, dx, dy):
    """Rules from the partials dx(x, y, out), dy(x, y, out); None means a zero partial."""
    def vjp(cts, ins, outs, **p):
        ct = cts[0]
        x, y = ins
        return (None if dx is None or not cotangent_wanted(0) else mul(ct, dx(x, y, outs[0])),
                None if dy is None or not cotangent_wanted(1) else mul(ct, dy(x, y, outs[0])))

    def jvp(primals, tangents, outs, **p):
        x, y = primals
        tx, ty = tangents
        terms = []
        if tx is not None and dx is not None:
            terms.append(mul(tx, dx(x, y, outs[0])))
        if ty is not None and dy is not None:
            terms.append(mul(ty, dy(x, y, outs[0])))
        if not terms:
            return (None,)
        return (terms[0] if len(terms) == 1 else add(terms[0], terms[1]),)
    op.vjp, op.jvp = vjp, jvp


def _to_bool(_):
    return np.dtype(bool)


def _to_real(dt):
    return np.empty(0, dt).real.dtype


# --------------------------------------------------------------------------------------------
# arithmetic
# --------------------------------------------------------------------------------------------

neg_p = elementwise_op("neg", np.negative, kernel="(-{0})", linear=True)
add_p = elementwise_op("add", np.add, 2, kernel="({0} + {1})", linear=True)
sub_p = elementwise_op("sub", np.subtract, 2, kernel="({0} - {1})", linear=True)
mul_p = elementwise_op("mul", np.multiply, 2, kernel="({0} * {1})")
div_p = elementwise_op("div", np.true_divide, 2, kernel="({0} / {1})", kinds="fc")
floordiv_p = elementwise_op("floordiv", np.floor_divide, 2, kernel="({0} // {1})",
                            zero_grad=True, kinds="iuf")
rem_p = elementwise_op("rem", np.remainder, 2, kernel="({0} % {1})", kinds="iuf")
fmod_p = elementwise_op("fmod", np.fmod, 2, kernel="math.fmod({0}, {1})", kinds="iuf")
pow_p = elementwise_op("pow", np.power, 2, kernel="({0} ** {1})")
max_p = elementwise_op("max", np.maximum, 2, kernel="max({0}, {1})", kinds="biuf")
min_p = elementwise_op("min", np.minimum, 2, kernel="min({0}, {1})", kinds="biuf")

neg, add, sub, mul, div = map(lambda o: _unary(o) if o is neg_p else _binary(o),
                              (neg_p, add_p, sub_p, mul_p, div_p))
floordiv, rem, fmod, pow, maximum, minimum = map(
    _binary, (floordiv_p, rem_p, fmod_p, pow_p, max_p, min_p))


def _integer_pow_impl(x, *, y):
    if y == 2:
        return np.multiply(x, x)
    if y == 1:
        return x.copy() if isinstance(x, np.ndarray) else x
    if y < 0 and x.dtype.kind in "iub":
        return np.power(x.astype(float), y).astype(x.dtype)
    return np.power(x, x.dtype.type(y) if x.dtype.kind in "fc" else y)


integer_pow_p = elementwise_op("integer_pow", _integer_pow_impl, kernel="({0} ** {y})")


def integer_pow(x, y: int):
    """``x ** y`` for a Python integer ``y`` (exact derivative ``y * x**(y-1)``, no log)."""
    return bind(integer_pow_p, x, y=int(y))


_smooth_binary(add_p, lambda x, y, o: lit(1, o), lambda x, y, o: lit(1, o))
_smooth_binary(sub_p, lambda x, y, o: lit(1, o), lambda x, y, o: lit(-1, o))
_smooth_unary(neg_p, lambda x, y: lit(-1, y))


def _add_vjp(cts, ins, outs):
    return cts[0], cts[0]


def _sub_vjp(cts, ins, outs):
    return cts[0], neg(cts[0])


add_p.vjp, sub_p.vjp = _add_vjp, _sub_vjp
neg_p.vjp = lambda cts, ins, outs: (neg(cts[0]),)
neg_p.jvp = lambda primals, tangents, outs: (None if tangents[0] is None
                                             else neg(tangents[0]),)


def _add_jvp(primals, tangents, outs):
    tx, ty = tangents
    if tx is None:
        return (ty,)
    if ty is None:
        return (tx,)
    return (add(tx, ty),)


def _sub_jvp(primals, tangents, outs):
    tx, ty = tangents
    if ty is None:
        return (tx,)
    if tx is None:
        return (neg(ty),)
    return (sub(tx, ty),)


add_p.jvp, sub_p.jvp = _add_jvp, _sub_jvp


def _mul_vjp(cts, ins, outs):
    x, y = ins
    return (mul(cts[0], y) if cotangent_wanted(0) else None,
            mul(x, cts[0]) if cotangent_wanted(1) else None)


_smooth_binary(mul_p, lambda x, y, o: y, lambda x, y, o: x)   # the jvp rule
mul_p.vjp = _mul_vjp


def _div_vjp(cts, ins, outs):
    ct = cts[0]
    x, y = ins
    ctx = div(ct, y)
    return (ctx if cotangent_wanted(0) else None,
            neg(mul(ctx, outs[0])) if cotangent_wanted(1) else None)


_smooth_binary(div_p, lambda x, y, o: div(lit(1, o), y), lambda x, y, o: neg(div(o, y)))
div_p.vjp = _div_vjp
# floor(x / y) is piecewise constant; x % y = x - y*floor(x/y)
_smooth_binary(rem_p, lambda x, y, o: lit(1, o), lambda x, y, o: neg(floor(div(x, y))))
_smooth_binary(fmod_p, lambda x, y, o: lit(1, o), lambda x, y, o: neg(trunc(div(x, y))))


def _pow_dx(x, y, o):
    # y * x**(y-1), written so that x == 0, y >= 1 gives the finite answer (0 for y > 1)
    return mul(y, pow(x, sub(y, lit(1, y))))


def _pow_dy(x, y, o):
    # log(x) * x**y, with 0**y contributing 0 rather than log(0)*0 = nan (NUMERICS.md)
    zero = eq(x, lit(0, x))
    safe_x = select(zero, lit(1, x), x)
    return select(zero, lit(0, o), mul(log(safe_x), o))


_smooth_binary(pow_p, _pow_dx, _pow_dy)


def _ipow_d(x, o, *, y):
    if y == 0:
        return lit(0, o)
    if y == 1:
        return lit(1, o)
    if y == 2:
        return mul(lit(2, o), x)
    return mul(lit(y, o), integer_pow(x, y - 1))


_smooth_unary(integer_pow_p, _ipow_d)


def _tie_split(a, b, o, first):
    """d max(a, b)/da: 1 where a wins, 0.5 on ties, 0 where b wins (NUMERICS.md)."""
    win = gt(a, b) if first else lt(a, b)
    return select(win, lit(1, o), select(eq(a, b), lit(0.5, o), lit(0, o)))


_smooth_binary(max_p, lambda x, y, o: _tie_split(x, y, o, True),
               lambda x, y, o: _tie_split(y, x, o, True))
_smooth_binary(min_p, lambda x, y, o: _tie_split(x, y, o, False),
               lambda x, y, o: _tie_split(y, x, o, False))

# --------------------------------------------------------------------------------------------
# comparisons, logic, select (zero gradient: piecewise constant)
# --------------------------------------------------------------------------------------------

eq_p = elementwise_op("eq", np.equal, 2, kernel="({0} == {1})", out_dtype=_to_bool,
                      zero_grad=True)
ne_p = elementwise_op("ne", np.not_equal, 2, kernel="({0} != {1})", out_dtype=_to_bool,
                      zero_grad=True)
lt_p = elementwise_op("lt", np.less, 2, kernel="({0} < {1})", out_dtype=_to_bool,
                      zero_grad=True)
le_p = elementwise_op("le", np.less_equal, 2, kernel="({0} <= {1})", out_dtype=_to_bool,
                      zero_grad=True)
gt_p = elementwise_op("gt", np.greater, 2, kernel="({0} > {1})", out_dtype=_to_bool,
                      zero_grad=True)
ge_p = elementwise_op("ge", np.greater_equal, 2, kernel="({0} >= {1})", out_dtype=_to_bool,
                      zero_grad=True)
and_p = elementwise_op("and", np.logical_and, 2, kernel="({0} and {1})", out_dtype=_to_bool,
                       zero_grad=True)
or_p = elementwise_op("or", np.logical_or, 2, kernel="({0} or {1})", out_dtype=_to_bool,
                      zero_grad=True)
xor_p = elementwise_op("xor", np.logical_xor, 2, kernel="(bool({0}) != bool({1}))",
                       out_dtype=_to_bool, zero_grad=True)
not_p = elementwise_op("not", np.logical_not, 1, kernel="(not {0})", out_dtype=_to_bool,
                       zero_grad=True)
eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor = map(
    _binary, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p, and_p, or_p, xor_p))
logical_not = _unary(not_p)


def _select_abstract(c, x, y):
    from ..core import AVal
    from ._base import same_dtype_shape
    if c.dtype != np.dtype(bool):
        raise TypeError(f"select's condition must be bool, got {c.dtype}")
    shape, dtype = same_dtype_shape(x, y)
    if c.shape and shape and c.shape != shape:
        raise TypeError(f"select's condition shape {c.shape} differs from {shape}")
    return AVal(c.shape or shape, dtype)


def _select_impl(c, x, y):
    return np.where(c, x, y)


select_p = Op("select", _select_abstract, _select_impl, elementwise=True,
              kernel="({1} if {0} else {2})")


def select(c, x, y):
    """``where(c, x, y)`` on operands of one dtype (0-d operands broadcast)."""
    if isinstance(x, bool | int | float | complex):
        x = _coerce(x, y)
    if isinstance(y, bool | int | float | complex):
        y = _coerce(y, x)
    return bind(select_p, c, x, y)


def _select_vjp(cts, ins, outs):
    c, x, y = ins
    ct = cts[0]
    z = lit(0, outs[0])
    return None, select(c, ct, z), select(c, z, ct)


def _select_jvp(primals, tangents, outs):
    c = primals[0]
    tx, ty = tangents[1], tangents[2]
    if tx is None and ty is None:
        return (None,)
    z = lit(0, outs[0])
    return (select(c, z if tx is None else tx, z if ty is None else ty),)


select_p.vjp, select_p.jvp = _select_vjp, _select_jvp


def _clip_abstract(x, lo, hi):
    from ..core import AVal
    from ._base import same_dtype_shape
    shape, dtype = same_dtype_shape(x, lo, hi)
    return AVal(shape, dtype)


def _clip_impl(x, lo, hi):
    # numpy.clip keeps x where it equals a bound (clip(-0.0, 0.0, 1.0) is -0.0) and
    # propagates NaN from any operand; np.maximum/np.minimum return their *second* operand
    # on ties, hence the order
    return np.minimum(hi, np.maximum(lo, x))


clip_p = Op("clip", _clip_abstract, _clip_impl, elementwise=True,
            kernel="min(max({0}, {1}), {2})")


def clip(x, lo, hi):
    """Clamp ``x`` to ``[lo, hi]``; the gradient is 1 on the closed interval (NUMERICS.md)."""
    return bind(clip_p, x, _coerce(lo, x), _coerce(hi, x))


def _clip_vjp(cts, ins, outs):
    x, lo, hi = ins
    ct = cts[0]
    z = lit(0, outs[0])
    inside = logical_and(ge(x, lo), le(x, hi))
    return (select(inside, ct, z), select(lt(x, lo), ct, z), select(gt(x, hi), ct, z))


def _clip_jvp(primals, tangents, outs):
    x, lo, hi = primals
    z = lit(0, outs[0])
    inside = logical_and(ge(x, lo), le(x, hi))
    t = [tt if tt is not None else z for tt in tangents]
    return (select(inside, t[0], select(lt(x, lo), t[1], t[2])),)


clip_p.vjp, clip_p.jvp = _clip_vjp, _clip_jvp


def _convert_abstract(x, *, new_dtype):
    from ..core import AVal
    return AVal(x.shape, new_dtype)


def _convert_impl(x, *, new_dtype):
    return as_array(x).astype(new_dtype)


convert_element_type_p = Op("convert_element_type", _convert_abstract, _convert_impl,
                            elementwise=True, linear=True, kernel="{0}")


def convert_element_type(x, new_dtype):
    """Cast to ``new_dtype`` (gradients flow between float types; zero into ints)."""
    return bind(convert_element_type_p, x, new_dtype=np.dtype(new_dtype))


def _convert_vjp(cts, ins, outs, *, new_dtype):
    x = ins[0]
    src = dtype_of(x)
    if src.kind not in "fc" or np.dtype(new_dtype).kind not in "fc":
        return (None,)
    ct = cts[0]
    if src.kind == "f" and np.dtype(new_dtype).kind == "c":
        ct = real(ct)
    return (convert_element_type(ct, src),)


def _convert_jvp(primals, tangents, outs, *, new_dtype):
    t = tangents[0]
    if t is None or np.dtype(new_dtype).kind not in "fc" or dtype_of(t).kind not in "fc":
        return (None,)
    return (convert_element_type(t, new_dtype),)


convert_element_type_p.vjp, convert_element_type_p.jvp = _convert_vjp, _convert_jvp


def _identity_impl(x):
    return x


stop_gradient_p = elementwise_op("stop_gradient", _identity_impl, kernel="{0}",
                                 zero_grad=True)


def stop_gradient(x):
    """The identity whose derivative is zero: ``x`` is treated as a constant by grad."""
    return bind(stop_gradient_p, x)


# --------------------------------------------------------------------------------------------
# transcendental and other unary math
# --------------------------------------------------------------------------------------------

def _f(name, impl, kernel, d=None, **kw):
    op = elementwise_op(name, impl, 1, kernel=kernel, **kw)
    if d is not None:
        _smooth_unary(op, d)
    return op


exp_p = _f("exp", np.exp, "math.exp({0})", lambda x, y: y, kinds="fc")
exp2_p = _f("exp2", np.exp2, "(2.0 ** {0})",
            lambda x, y: mul(y, lit(np.log(2.0), y)), kinds="fc")
expm1_p = _f("expm1", np.expm1, "math.expm1({0})", lambda x, y: add(y, lit(1, y)), kinds="fc")
log_p = _f("log", np.log, "math.log({0})", lambda x, y: div(lit(1, y), x), kinds="fc")
log2_p = _f("log2", np.log2, "math.log2({0})",
            lambda x, y: div(lit(1 / np.log(2.0), y), x), kinds="fc")
log10_p = _f("log10", np.log10, "math.log10({0})",
             lambda x, y: div(lit(1 / np.log(10.0), y), x), kinds="fc")
log1p_p = _f("log1p", np.log1p, "math.log1p({0})",
             lambda x, y: div(lit(1, y), add(x, lit(1, x))), kinds="fc")
sin_p = _f("sin", np.sin, "math.sin({0})", lambda x, y: cos(x), kinds="fc")
cos_p = _f("cos", np.cos, "math.cos({0})", lambda x, y: neg(sin(x)), kinds="fc")
tan_p = _f("tan", np.tan, "math.tan({0})", lambda x, y: add(lit(1, y), mul(y, y)), kinds="fc")
asin_p = _f("asin", np.arcsin, "math.asin({0})",
            lambda x, y: rsqrt(sub(lit(1, x), mul(x, x))), kinds="fc")
acos_p = _f("acos", np.arccos, "math.acos({0})",
            lambda x, y: neg(rsqrt(sub(lit(1, x), mul(x, x)))), kinds="fc")
atan_p = _f("atan", np.arctan, "math.atan({0})",
            lambda x, y: div(lit(1, x), add(lit(1, x), mul(x, x))), kinds="fc")
sinh_p = _f("sinh", np.sinh, "math.sinh({0})", lambda x, y: cosh(x), kinds="fc")
cosh_p = _f("cosh", np.cosh, "math.cosh({0})", lambda x, y: sinh(x), kinds="fc")
tanh_p = _f("tanh", np.tanh, "math.tanh({0})", lambda x, y: sub(lit(1, y), mul(y, y)),
            kinds="fc")
asinh_p = _f("asinh", np.arcsinh, "math.asinh({0})",
             lambda x, y: rsqrt(add(mul(x, x), lit(1, x))), kinds="fc")
acosh_p = _f("acosh", np.arccosh, "math.acosh({0})",
             lambda x, y: rsqrt(sub(mul(x, x), lit(1, x))), kinds="fc")
atanh_p = _f("atanh", np.arctanh, "math.atanh({0})",
             lambda x, y: div(lit(1, x), sub(lit(1, x), mul(x, x))), kinds="fc")
sqrt_p = _f("sqrt", np.sqrt, "math.sqrt({0})", lambda x, y: div(lit(0.5, y), y), kinds="fc")
cbrt_p = _f("cbrt", np.cbrt, "np.cbrt({0})",
            lambda x, y: div(lit(1 / 3, y), mul(y, y)), kinds="f")


def _rsqrt_impl(x):
    return 1 / np.sqrt(x)


rsqrt_p = _f("rsqrt", _rsqrt_impl, "(1.0 / math.sqrt({0}))",
             lambda x, y: mul(lit(-0.5, y), div(y, x)), kinds="fc")


def _logistic_impl(x):
    # numerically stable sigmoid: exp(-|x|) never overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


logistic_p = _f("logistic", _logistic_impl, "(1.0 / (1.0 + math.exp(-{0})))",
                lambda x, y: mul(y, sub(lit(1, y), y)), kinds="f")


def _sinc_impl(x):
    return np.sinc(x)


def _sinc_d(x, y):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, and 0 at x = 0 (NUMERICS.md)
    zero = eq(x, lit(0, x))
    safe = select(zero, lit(1, x), x)
    d = div(sub(cos(mul(lit(np.pi, x), safe)), sinc(safe)), safe)
    return select(zero, lit(0, y), d)


sinc_p = _f("sinc", _sinc_impl, "np.sinc({0})", _sinc_d, kinds="f")

abs_p = _f("abs", np.abs, "abs({0})", out_dtype=_to_real)
sign_p = _f("sign", np.sign, "np.sign({0})", zero_grad=True)
floor_p = _f("floor", np.floor, "math.floor({0})", zero_grad=True, kinds="f")
ceil_p = _f("ceil", np.ceil, "math.ceil({0})", zero_grad=True, kinds="f")
trunc_p = _f("trunc", np.trunc, "math.trunc({0})", zero_grad=True, kinds="f")
round_p = _f("round", np.rint, "np.rint({0})", zero_grad=True, kinds="fc")
isnan_p = _f("isnan", np.isnan, "math.isnan({0})", out_dtype=_to_bool, zero_grad=True)
isinf_p = _f("isinf", np.isinf, "math.isinf({0})", out_dtype=_to_bool, zero_grad=True)
isfinite_p = _f("isfinite", np.isfinite, "math.isfinite({0})", out_dtype=_to_bool,
                zero_grad=True)
signbit_p = _f("signbit", np.signbit, "np.signbit({0})", out_dtype=_to_bool, zero_grad=True,
               kinds="f")
conj_p = _f("conj", np.conjugate, "{0}.conjugate()", linear=True)
real_p = _f("real", np.real, "{0}.real", out_dtype=_to_real, linear=True)
imag_p = _f("imag", np.imag, "{0}.imag", out_dtype=_to_real, linear=True)

(exp, exp2, expm1, log, log2, log10, log1p, sin, cos, tan, asin, acos, atan, sinh, cosh,
 tanh, asinh, acosh, atanh, sqrt, cbrt, rsqrt, logistic, sinc, abs, sign, floor, ceil, trunc,
 round, isnan, isinf, isfinite, signbit, conj, real, imag) = map(_unary, (
     exp_p, exp2_p, expm1_p, log_p, log2_p, log10_p, log1p_p, sin_p, cos_p, tan_p, asin_p,
     acos_p, atan_p, sinh_p, cosh_p, tanh_p, asinh_p, acosh_p, atanh_p, sqrt_p, cbrt_p,
     rsqrt_p, logistic_p, sinc_p, abs_p, sign_p, floor_p, ceil_p, trunc_p, round_p, isnan_p,
     isinf_p, isfinite_p, signbit_p, conj_p, real_p, imag_p))


def _abs_vjp(cts, ins, outs):
    x = ins[0]
    if dtype_of(x).kind == "c":
        # d|z| -> ct * conj(z) / |z| (JAX's convention: d|z|^2 at 1+1j is 2-2j), 0 at z == 0
        o = outs[0]
        safe = select(eq(o, lit(0, o)), lit(1, o), o)
        return (mul(convert_element_type(div(cts[0], safe), dtype_of(x)), conj(x)),)
    return (mul(cts[0], sign(x)),)   # sign(0) = 0: d|x| at 0 is 0 (NUMERICS.md)


def _abs_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None,)
    x = primals[0]
    if dtype_of(x).kind == "c":
        o = outs[0]
        safe = select(eq(o, lit(0, o)), lit(1, o), o)
        return (div(real(mul(conj(x), t)), safe),)
    return (mul(t, sign(x)),)


abs_p.vjp, abs_p.jvp = _abs_vjp, _abs_jvp


def _linear_unary_rules(op, f, vjp_f=None):
    op.vjp = lambda cts, ins, outs: ((vjp_f or f)(cts[0]),)
    op.jvp = lambda primals, tangents, outs: (None if tangents[0] is None
                                              else f(tangents[0]),)


_linear_unary_rules(conj_p, conj)


real_p.vjp = lambda cts, ins, outs: (convert_element_type(cts[0], dtype_of(ins[0])),)
real_p.jvp = lambda primals, tangents, outs: (None if tangents[0] is None
                                              else real(tangents[0]),)
imag_p.vjp = lambda cts, ins, outs: (
    mul(convert_element_type(neg(cts[0]), dtype_of(ins[0])),
        np.asarray(1j, dtype_of(ins[0]))),)
imag_p.jvp = lambda primals, tangents, outs: (None if tangents[0] is None
                                              else imag(tangents[0]),)


def _atan2_impl(y, x):
    return np.arctan2(y, x)


atan2_p = elementwise_op("atan2", _atan2_impl, 2, kernel="math.atan2({0}, {1})", kinds="f")
atan2 = _binary(atan2_p)


def _atan2_denom(y, x):
    d = add(mul(x, x), mul(y, y))
    return select(eq(d, lit(0, d)), lit(1, d), d)   # arctan2(0, 0): zero gradient


_smooth_binary(atan2_p, lambda y, x, o: div(x, _atan2_denom(y, x)),
               lambda y, x, o: neg(div(y, _atan2_denom(y, x))))

hypot_p = elementwise_op("hypot", np.hypot, 2, kernel="math.hypot({0}, {1})", kinds="f")
hypot = _binary(hypot_p)


def _hypot_d(first):
    def d(x, y, o):
        safe = select(eq(o, lit(0, o)), lit(1, o), o)
        return div(x if first else y, safe)
    return d


_smooth_binary(hypot_p, _hypot_d(True), _hypot_d(False))

logaddexp_p = elementwise_op("logaddexp", np.logaddexp, 2,
                             kernel="np.logaddexp({0}, {1})", kinds="f")
logaddexp = _binary(logaddexp_p)


def _lae_d(first):
    def d(x, y, o):
        a = x if first else y
        # exp(a - o); when both are -inf, o = -inf and the share is 0.5 (tie split)
        both_inf = logical_and(isinf(o), lt(o, lit(0, o)))
        safe_o = select(both_inf, lit(0, o), o)
        return select(both_inf, lit(0.5, o), exp(sub(a, safe_o)))
    return d


_smooth_binary(logaddexp_p, _lae_d(True), _lae_d(False))

copysign_p = elementwise_op("copysign", np.copysign, 2, kernel="math.copysign({0}, {1})",
                            kinds="f")
copysign = _binary(copysign_p)
_smooth_binary(copysign_p, lambda x, y, o: mul(sign(x), select(signbit(y), lit(-1, o),
                                                              lit(1, o))), None)
