"""Elementwise primitives: one declaration each, with derivative, kernel code and traits.

Owns ``elementwise_op`` (the one constructor of elementwise primitives, also behind
``functrace.extend.define_elementwise``), every built-in elementwise op (unary math, binary
arithmetic, comparisons, select, casts) and its op-level function (``sin(x)`` binds
``sin_p``). Imports core/tracing and its siblings ``_base`` and ``scalar_code``; never
``functrace.numpy`` or a backend. It is the lowest op family (``ops.shape`` and the rest build on
it), so an op's batch rule is only named here (``batch_family="elementwise"``): the transforms
build it through ``ops.batch_rules.rule_for``, which needs ``ops.shape``.

A declaration says everything a pass or a backend needs: the numpy impl, the kernel code
(``scalar=`` for every target, ``cpu=``/``cuda=`` per target, from ``scalar_code``; an op
with neither is never fused, and each target says so), the traits (``cheap``, ``singular``,
``fresh``, ...; see ``core.Op``) and the derivative. A smooth op declares its partial
derivatives once, as functions of the primal inputs and output written with op-level
functions; ``smooth_rules`` turns them into both the vjp rule (``ct * d``) and the jvp rule
(``t * d``), so a derivative written once serves both modes and is itself differentiable.
Ops whose derivative is zero wherever it exists (floor, sign, comparisons) say
``zero_grad=True``. Conventions at kinks follow docs/numerics.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core import AVal, Op
from ..tracing import bind, cotangent_wanted
from . import scalar_code as sc
from ._base import as_array, dtype_of, lit, same_dtype_shape

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


def _times(ct, d):
    """``ct * d`` for a partial ``d`` of any numeric form (a derivative written with
    ``functrace.numpy`` may return a Python number or another dtype)."""
    if isinstance(d, _PY_SCALARS):
        return mul(ct, d)
    if dtype_of(d) != dtype_of(ct):
        d = convert_element_type(d, dtype_of(ct))
    return mul(ct, d)


def _partials(derivative, nin: int) -> tuple:
    """Per-input partial functions ``(*ins, out, **params) -> d`` (None: a zero partial) from
    a derivative: one function of ``(*ins, out)`` returning the partial (one input) or a
    tuple of partials (several), or already a tuple of per-input functions."""
    if isinstance(derivative, tuple | list):
        if len(derivative) != nin:
            raise ValueError(f"derivative gives {len(derivative)} partials for {nin} inputs")
        return tuple(derivative)
    if nin == 1:
        return (derivative,)

    def partial(i):
        def d(*args, **p):
            ds = derivative(*args, **p)
            if not isinstance(ds, tuple | list) or len(ds) != nin:
                raise ValueError(f"the derivative of a {nin}-input op must return {nin} "
                                 f"partials (one per input), got {ds!r:.60}")
            return ds[i]
        return d
    return tuple(partial(i) for i in range(nin))


def smooth_rules(op: Op, derivative, nin: int, coerce: bool = False) -> None:
    """Attach the vjp (``ct * d``) and jvp (``sum of t * d``) rules of an elementwise op from
    its partial derivatives (``_partials``), written with op-level or ``functrace.numpy``
    functions, so the rules differentiate again."""
    ds = _partials(derivative, nin)
    # the package's partials have the operands' dtype; a user's (functrace.numpy) may not
    _times_ = _times if coerce else mul
    if len(ds) == 1:
        d = ds[0]

        def vjp(cts, ins, outs, **p):
            return (_times_(cts[0], d(ins[0], outs[0], **p)),)

        def jvp(primals, tangents, outs, **p):
            return (_times_(tangents[0], d(primals[0], outs[0], **p)),)
    else:
        def vjp(cts, ins, outs, **p):
            ct = cts[0]
            return tuple(None if d is None or not cotangent_wanted(i)
                         else _times_(ct, d(*ins, outs[0], **p)) for i, d in enumerate(ds))

        def jvp(primals, tangents, outs, **p):
            acc = None
            for t, d in zip(tangents, ds):
                if t is not None and d is not None:
                    term = _times_(t, d(*primals, outs[0], **p))
                    acc = term if acc is None else add(acc, term)
            return (acc,)
    op.vjp, op.jvp = vjp, jvp


def elementwise_op(name: str, impl: Callable, nin: int = 1, *, scalar=None, cpu=None,
                   cuda=None, derivative=None, out_dtype: Callable | None = None,
                   kinds: str | None = None, module: str = __name__, **traits) -> Op:
    """Declare an elementwise op: the one constructor of every elementwise primitive (the
    package's and ``functrace.extend.define_elementwise``'s).

    Args:
        name: primitive name.
        impl: numpy function of ``nin`` arrays (the living definition).
        scalar: the kernel code every target uses unless it has its own: a template over
            ``{0}, {1}, ...`` and the params, or a Python function of scalars numba compiles.
        cpu, cuda: ``core.ScalarCode`` of one target (``scalar_code.cpu(...)``...), or a
            string: why that target never fuses the op (every target fuses an op or says why).
        derivative: the partials (``_partials``); None: set ``vjp``/``jvp`` in ``traits``
            or after the declaration.
        out_dtype: maps the operand dtype to the result dtype (default: the same).
        kinds: allowed dtype kinds (numpy ``dtype.kind`` letters), e.g. ``"fc"``.
        **traits: forwarded to ``Op`` (linear, zero_grad, cheap, singular, fresh, ...).
    """

    def abstract_eval(*avals: AVal, **params) -> AVal:
        if len(avals) != nin:
            raise TypeError(f"takes {nin} operands, got {len(avals)}")
        shape, dtype = same_dtype_shape(*avals)
        if kinds is not None and dtype.kind not in kinds:
            raise TypeError(f"does not support dtype {dtype}")
        return AVal(shape, out_dtype(dtype) if out_dtype else dtype)

    code = {t: c for t, c in (("cpu", cpu), ("cuda", cuda)) if c is not None}
    op = Op(name, abstract_eval, impl, elementwise=True, scalar=scalar, code=code,
            batch_family="elementwise", module=module, **traits)
    if derivative is not None:
        smooth_rules(op, derivative, nin, coerce=not module.startswith("functrace"))
    return op


def _to_bool(_):
    return np.dtype(bool)


def _to_real(dt):
    return np.empty(0, dt).real.dtype


# --------------------------------------------------------------------------------------------
# arithmetic
# --------------------------------------------------------------------------------------------

# integer arithmetic the GPU computes exactly like numpy (wrapping); bool arithmetic is left
# to cupy there (numpy's bool add is a logical or)
_INT = sc.cuda(kinds="iuf")

neg_p = elementwise_op("neg", np.negative, scalar="(-{0})", cuda=_INT, linear=True, cheap=True)
add_p = elementwise_op("add", np.add, 2, scalar="({0} + {1})", cuda=_INT, linear=True,
                       cheap=True)
sub_p = elementwise_op("sub", np.subtract, 2, scalar="({0} - {1})", cuda=_INT, linear=True,
                       cheap=True)
mul_p = elementwise_op("mul", np.multiply, 2, scalar="({0} * {1})",
                       cuda=sc.cuda(sc.mul_cuda, "iuf"), cheap=True)
div_p = elementwise_op("div", np.true_divide, 2, scalar="({0} / {1})", cuda=sc.cuda(kinds="f"),
                       kinds="fc", singular=(1, 1.0))
# numpy's floor division and remainder (npy_divmod's corner cases) have no CUDA template yet
_NO_CUDA_DIVMOD = "no CUDA template for numpy's npy_divmod corner cases yet (cupy runs it)"
floordiv_p = elementwise_op("floordiv", np.floor_divide, 2,
                            cpu=sc.cpu(sc.float_helper_cpu("floordiv", "np.floor_divide")),
                            cuda=_NO_CUDA_DIVMOD, zero_grad=True, kinds="iuf")
rem_p = elementwise_op("rem", np.remainder, 2,
                       cpu=sc.cpu(sc.float_helper_cpu("remainder", "np.remainder")),
                       cuda=_NO_CUDA_DIVMOD, kinds="iuf")
fmod_p = elementwise_op("fmod", np.fmod, 2, cpu=sc.cpu(sc.fmod_cpu), cuda=sc.libdevice("fmod"),
                        kinds="iuf")
pow_p = elementwise_op("pow", np.power, 2, cpu=sc.cpu("np.power({0}, {1})"),
                       cuda=sc.libdevice("pow"), singular=(0, 1.0))
max_p = elementwise_op("max", np.maximum, 2, cpu=sc.cpu(sc.maxmin_cpu(True)),
                       cuda=sc.cuda(sc.maxmin_cuda(True), "iuf"), kinds="biuf", cheap=True)
min_p = elementwise_op("min", np.minimum, 2, cpu=sc.cpu(sc.maxmin_cpu(False)),
                       cuda=sc.cuda(sc.maxmin_cuda(False), "iuf"), kinds="biuf", cheap=True)

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


integer_pow_p = elementwise_op("integer_pow", _integer_pow_impl, cpu=sc.cpu(sc.ipow_cpu),
                               cuda=sc.cuda(sc.ipow_cuda, "iuf"), cheap=True, fresh=False)


def integer_pow(x, y: int):
    """``x ** y`` for a Python integer ``y`` (exact derivative ``y * x**(y-1)``, no log)."""
    return bind(integer_pow_p, x, y=int(y))



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


smooth_rules(mul_p, (lambda x, y, o: y, lambda x, y, o: x), 2)   # the jvp rule
mul_p.vjp = _mul_vjp


def _div_vjp(cts, ins, outs):
    ct = cts[0]
    x, y = ins
    ctx = div(ct, y)
    return (ctx if cotangent_wanted(0) else None,
            neg(mul(ctx, outs[0])) if cotangent_wanted(1) else None)


smooth_rules(div_p, (lambda x, y, o: div(lit(1, o), y), lambda x, y, o: neg(div(o, y))), 2)
div_p.vjp = _div_vjp
# floor(x / y) is piecewise constant; x % y = x - y*floor(x/y)
smooth_rules(rem_p, (lambda x, y, o: lit(1, o), lambda x, y, o: neg(floor(div(x, y)))), 2)
smooth_rules(fmod_p, (lambda x, y, o: lit(1, o), lambda x, y, o: neg(trunc(div(x, y)))), 2)


def _pow_dx(x, y, o):
    # y * x**(y-1), written so that x == 0, y >= 1 gives the finite answer (0 for y > 1)
    return mul(y, pow(x, sub(y, lit(1, y))))


def _pow_dy(x, y, o):
    # log(x) * x**y, with 0**y contributing 0 rather than log(0)*0 = nan (docs/numerics.md)
    zero = eq(x, lit(0, x))
    safe_x = select(zero, lit(1, x), x)
    return select(zero, lit(0, o), mul(log(safe_x), o))


smooth_rules(pow_p, (_pow_dx, _pow_dy), 2)


def _ipow_d(x, o, *, y):
    if y == 0:
        return lit(0, o)
    if y == 1:
        return lit(1, o)
    if y == 2:
        return mul(lit(2, o), x)
    return mul(lit(y, o), integer_pow(x, y - 1))


smooth_rules(integer_pow_p, _ipow_d, 1)


def _tie_split(a, b, o, first):
    """d max(a, b)/da: 1 where a wins, 0.5 on ties, 0 where b wins (docs/numerics.md)."""
    win = gt(a, b) if first else lt(a, b)
    return select(win, lit(1, o), select(eq(a, b), lit(0.5, o), lit(0, o)))


smooth_rules(max_p, (lambda x, y, o: _tie_split(x, y, o, True),
                     lambda x, y, o: _tie_split(y, x, o, True)), 2)
smooth_rules(min_p, (lambda x, y, o: _tie_split(x, y, o, False),
                     lambda x, y, o: _tie_split(y, x, o, False)), 2)

# --------------------------------------------------------------------------------------------
# comparisons, logic, select (zero gradient: piecewise constant)
# --------------------------------------------------------------------------------------------

def _compare(name, impl, sym):
    return elementwise_op(name, impl, 2, scalar=f"({{0}} {sym} {{1}})", out_dtype=_to_bool,
                          zero_grad=True, cheap=True)


def _logic(name, impl, nin, which, cheap=True):
    code = sc.logic_expr(which)
    return elementwise_op(name, impl, nin, cpu=sc.cpu(code), cuda=sc.cuda(code),
                          out_dtype=_to_bool, zero_grad=True, cheap=cheap)


eq_p = _compare("eq", np.equal, "==")
ne_p = _compare("ne", np.not_equal, "!=")
lt_p = _compare("lt", np.less, "<")
le_p = _compare("le", np.less_equal, "<=")
gt_p = _compare("gt", np.greater, ">")
ge_p = _compare("ge", np.greater_equal, ">=")
and_p = _logic("and", np.logical_and, 2, "&")
or_p = _logic("or", np.logical_or, 2, "|")
xor_p = _logic("xor", np.logical_xor, 2, "xor", cheap=False)
not_p = _logic("not", np.logical_not, 1, "not")
eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor = map(
    _binary, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p, and_p, or_p, xor_p))
logical_not = _unary(not_p)

# integer bit operations (bool operands take the logical ops: functrace.numpy dispatches).
# Shifts by the bit width or more are defined by numpy (0, or -1 for a negative value shifted
# right) but are undefined behaviour in LLVM and PTX, so shifts stay numpy calls.
_SHIFT_WHY = ("not fused: numpy defines shifts by >= the bit width, the generated code "
              "would not")


def _bits(name, impl, nin, scalar=None, why=None):
    return elementwise_op(name, impl, nin, scalar=scalar, cpu=why, cuda=why, kinds="iu",
                          zero_grad=True, cheap=scalar is not None)


bitwise_and_p = _bits("bitwise_and", np.bitwise_and, 2, "({0} & {1})")
bitwise_or_p = _bits("bitwise_or", np.bitwise_or, 2, "({0} | {1})")
bitwise_xor_p = _bits("bitwise_xor", np.bitwise_xor, 2, "({0} ^ {1})")
invert_p = _bits("invert", np.invert, 1, "(~{0})")
left_shift_p = _bits("left_shift", np.left_shift, 2, why=_SHIFT_WHY)
right_shift_p = _bits("right_shift", np.right_shift, 2, why=_SHIFT_WHY)
bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift = map(
    _binary, (bitwise_and_p, bitwise_or_p, bitwise_xor_p, left_shift_p, right_shift_p))
invert = _unary(invert_p)


def _select_abstract(c, x, y):
    if c.dtype != np.dtype(bool):
        raise TypeError(f"select's condition must be bool, got {c.dtype}")
    shape, dtype = same_dtype_shape(x, y)
    if c.shape and shape and c.shape != shape:
        raise TypeError(f"select's condition shape {c.shape} differs from {shape}")
    return AVal(c.shape or shape, dtype)


def _select_impl(c, x, y):
    return np.where(c, x, y)


select_p = Op("select", _select_abstract, _select_impl, elementwise=True,
              scalar="({1} if {0} else {2})", batch_family="elementwise", cheap=True)


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
    shape, dtype = same_dtype_shape(x, lo, hi)
    return AVal(shape, dtype)


def _clip_impl(x, lo, hi):
    # numpy.clip keeps x where it equals a bound (clip(-0.0, 0.0, 1.0) is -0.0) and
    # propagates NaN from any operand; np.maximum/np.minimum return their *second* operand
    # on ties, hence the order
    return np.minimum(hi, np.maximum(lo, x))


clip_p = Op("clip", _clip_abstract, _clip_impl, elementwise=True, batch_family="elementwise",
            code={"cpu": sc.cpu(sc.clip_cpu), "cuda": sc.cuda(sc.clip_cuda, "iuf")}, cheap=True)


def clip(x, lo, hi):
    """Clamp ``x`` to ``[lo, hi]``; the gradient is 1 on the closed interval (docs/numerics.md)."""
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
    return AVal(x.shape, new_dtype)


def _convert_impl(x, *, new_dtype):
    return as_array(x).astype(new_dtype)


convert_element_type_p = Op("convert_element_type", _convert_abstract, _convert_impl,
                            elementwise=True, linear=True, batch_family="elementwise",
                            code={"cpu": sc.cpu(sc.convert_expr),
                                  "cuda": sc.cuda(sc.convert_expr)},
                            cheap=True, fresh=False)


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


stop_gradient_p = elementwise_op("stop_gradient", _identity_impl, scalar="{0}",
                                 zero_grad=True, cheap=True, fresh=False)


def stop_gradient(x):
    """The identity whose derivative is zero: ``x`` is treated as a constant by grad."""
    return bind(stop_gradient_p, x)


# --------------------------------------------------------------------------------------------
# transcendental and other unary math
# --------------------------------------------------------------------------------------------

#: why some unary ops have no CUDA code (cupy runs them on the GPU), or no code at all
_NO_CUDA = "no CUDA template yet (cupy runs it)"
_COMPLEX = "complex data is never fused"


def _f(name, impl, d=None, *, cpu=None, cuda=_NO_CUDA, **kw):
    if cpu is not None and cpu is not _COMPLEX:
        cpu = sc.cpu(cpu)
    return elementwise_op(name, impl, 1, cpu=cpu, cuda=cuda, derivative=d, **kw)


def _math(name, impl, d, np_name=None, **kw):
    """A unary function numba computes with numpy's ``np.<np_name>`` on the CPU and libdevice
    computes on the GPU."""
    return _f(name, impl, d, cpu=f"np.{np_name or impl.__name__}({{0}})",
              cuda=sc.libdevice(name), kinds="fc", **kw)


def _vm(name, impl, d, fn=None, cuda=None, kinds="fc", **kw):
    """A unary function computed with a vecmath polynomial on the CPU."""
    return elementwise_op(name, impl, 1, cpu=sc.vecmath(fn or name),
                          cuda=cuda or sc.libdevice(name), derivative=d, kinds=kinds, **kw)


exp_p = _vm("exp", np.exp, lambda x, y: y)
exp2_p = _vm("exp2", np.exp2, lambda x, y: mul(y, lit(np.log(2.0), y)),
             cuda=sc.cuda(sc.exp2_cuda, "f", alone=True))
expm1_p = _vm("expm1", np.expm1, lambda x, y: add(y, lit(1, y)))
log_p = _vm("log", np.log, lambda x, y: div(lit(1, y), x), singular=(0, 1.0))
log2_p = _vm("log2", np.log2, lambda x, y: div(lit(1 / np.log(2.0), y), x), singular=(0, 1.0))
log10_p = _vm("log10", np.log10, lambda x, y: div(lit(1 / np.log(10.0), y), x),
              singular=(0, 1.0))
log1p_p = _vm("log1p", np.log1p, lambda x, y: div(lit(1, y), add(x, lit(1, x))),
              singular=(0, 0.0))
sin_p = _vm("sin", np.sin, lambda x, y: cos(x))
cos_p = _vm("cos", np.cos, lambda x, y: neg(sin(x)))
tan_p = _vm("tan", np.tan, lambda x, y: add(lit(1, y), mul(y, y)))
asin_p = _math("asin", np.arcsin, lambda x, y: rsqrt(sub(lit(1, x), mul(x, x))),
               singular=(0, 0.0))
acos_p = _math("acos", np.arccos, lambda x, y: neg(rsqrt(sub(lit(1, x), mul(x, x)))),
               singular=(0, 0.0))
atan_p = _math("atan", np.arctan, lambda x, y: div(lit(1, x), add(lit(1, x), mul(x, x))))
sinh_p = _math("sinh", np.sinh, lambda x, y: cosh(x))
cosh_p = _math("cosh", np.cosh, lambda x, y: sinh(x))
tanh_p = _vm("tanh", np.tanh, lambda x, y: sub(lit(1, y), mul(y, y)))
asinh_p = _math("asinh", np.arcsinh, lambda x, y: rsqrt(add(mul(x, x), lit(1, x))))
acosh_p = _math("acosh", np.arccosh, lambda x, y: rsqrt(sub(mul(x, x), lit(1, x))),
                singular=(0, 2.0))
atanh_p = _math("atanh", np.arctanh, lambda x, y: div(lit(1, x), sub(lit(1, x), mul(x, x))),
                singular=(0, 0.0))
sqrt_p = _math("sqrt", np.sqrt, lambda x, y: div(lit(0.5, y), y), singular=(0, 1.0))
cbrt_p = _f("cbrt", np.cbrt, lambda x, y: div(lit(1 / 3, y), mul(y, y)), cpu="np.cbrt({0})",
            kinds="f", singular=(0, 1.0))


def _rsqrt_impl(x):
    return 1 / np.sqrt(x)


rsqrt_p = _f("rsqrt", _rsqrt_impl, lambda x, y: mul(lit(-0.5, y), div(y, x)), cpu=sc.rsqrt_cpu,
             cuda=sc.cuda(sc.rsqrt_cuda, "f", alone=True), kinds="fc", singular=(0, 1.0))


def _logistic_impl(x):
    # numerically stable sigmoid: exp(-|x|) never overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


logistic_p = _vm("logistic", _logistic_impl, lambda x, y: mul(y, sub(lit(1, y), y)),
                 fn="sigmoid", cuda=sc.cuda(sc.logistic_cuda, "f", alone=True), kinds="f")


def _sinc_impl(x):
    return np.sinc(x)


def _sinc_d(x, y):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, and 0 at x = 0 (docs/numerics.md)
    zero = eq(x, lit(0, x))
    safe = select(zero, lit(1, x), x)
    d = div(sub(cos(mul(lit(np.pi, x), safe)), sinc(safe)), safe)
    return select(zero, lit(0, y), d)


sinc_p = _f("sinc", _sinc_impl, _sinc_d, cpu="np.sinc({0})", kinds="f")

abs_p = _f("abs", np.abs, cpu="np.abs({0})", cuda=sc.cuda(sc.abs_cuda, "iuf"),
           out_dtype=_to_real, cheap=True)
sign_p = _f("sign", np.sign, cpu=sc.sign_expr, cuda=sc.cuda(sc.sign_expr, "iuf"), zero_grad=True,
            cheap=True)
floor_p = _f("floor", np.floor, cpu="np.floor({0})", zero_grad=True, kinds="f")
ceil_p = _f("ceil", np.ceil, cpu="np.ceil({0})", zero_grad=True, kinds="f")
trunc_p = _f("trunc", np.trunc, cpu="np.trunc({0})", zero_grad=True, kinds="f")
round_p = _f("round", np.rint, cpu="np.rint({0})", zero_grad=True, kinds="fc")


def _float_test(name, impl):
    return _f(name, impl, cpu=f"np.{name}({{0}})", cuda=sc.cuda(f"math.{name}({{0}})", "f"),
              out_dtype=_to_bool, zero_grad=True)


isnan_p = _float_test("isnan", np.isnan)
isinf_p = _float_test("isinf", np.isinf)
isfinite_p = _float_test("isfinite", np.isfinite)
signbit_p = _f("signbit", np.signbit, cpu="np.signbit({0})",
               cuda=sc.cuda(sc.signbit_cuda, "f"), out_dtype=_to_bool, zero_grad=True,
               kinds="f")
# complex parts: no kernel computes complex data
conj_p = _f("conj", np.conjugate, cpu=_COMPLEX, cuda=_COMPLEX, linear=True)
real_p = _f("real", np.real, cpu=_COMPLEX, cuda=_COMPLEX, out_dtype=_to_real, linear=True,
            fresh=False)
imag_p = _f("imag", np.imag, cpu=_COMPLEX, cuda=_COMPLEX, out_dtype=_to_real, linear=True,
            fresh=False)

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
    return (mul(cts[0], sign(x)),)   # sign(0) = 0: d|x| at 0 is 0 (docs/numerics.md)


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


atan2_p = elementwise_op("atan2", _atan2_impl, 2, cpu=sc.cpu("np.arctan2({0}, {1})"),
                         cuda=sc.libdevice("atan2"), kinds="f")
atan2 = _binary(atan2_p)


def _atan2_denom(y, x):
    d = add(mul(x, x), mul(y, y))
    return select(eq(d, lit(0, d)), lit(1, d), d)   # arctan2(0, 0): zero gradient


smooth_rules(atan2_p, (lambda y, x, o: div(x, _atan2_denom(y, x)),
                      lambda y, x, o: neg(div(y, _atan2_denom(y, x)))), 2)

hypot_p = elementwise_op("hypot", np.hypot, 2, cpu=sc.cpu("np.hypot({0}, {1})"),
                         cuda=sc.libdevice("hypot"), kinds="f")
hypot = _binary(hypot_p)


def _hypot_d(first):
    def d(x, y, o):
        safe = select(eq(o, lit(0, o)), lit(1, o), o)
        return div(x if first else y, safe)
    return d


smooth_rules(hypot_p, (_hypot_d(True), _hypot_d(False)), 2)

logaddexp_p = elementwise_op("logaddexp", np.logaddexp, 2,
                             cpu=sc.cpu("np.logaddexp({0}, {1})"),
                             cuda=sc.cuda(sc.logaddexp_cuda, "f", alone=True), kinds="f")
logaddexp = _binary(logaddexp_p)


def _lae_d(first):
    def d(x, y, o):
        a = x if first else y
        # exp(a - o); when both are -inf, o = -inf and the share is 0.5 (tie split)
        both_inf = logical_and(isinf(o), lt(o, lit(0, o)))
        safe_o = select(both_inf, lit(0, o), o)
        return select(both_inf, lit(0.5, o), exp(sub(a, safe_o)))
    return d


smooth_rules(logaddexp_p, (_lae_d(True), _lae_d(False)), 2)

copysign_p = elementwise_op("copysign", np.copysign, 2, cpu=sc.cpu("np.copysign({0}, {1})"),
                            cuda=sc.libdevice("copysign"), kinds="f")
copysign = _binary(copysign_p)
smooth_rules(copysign_p, (lambda x, y, o: mul(sign(x), select(signbit(y), lit(-1, o),
                                                                     lit(1, o))), None), 2)
