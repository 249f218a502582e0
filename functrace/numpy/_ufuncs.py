"""Elementwise functions of functrace.numpy, generated from one table of numpy ufuncs.

Each entry pairs a numpy ufunc with the op-level function that computes it for operands that
``_core.ufunc_apply`` has already promoted and broadcast. Outside a transform the numpy ufunc
itself runs (exact numpy results, ~0.1 µs of overhead).
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import (
    asarray_any,
    broadcast_all,
    cast,
    resolve_ufunc,
    result_dtype_like_numpy,
    ufunc_apply,
    weak_result_type,
)

__all__: list[str] = []


def _make(name, uf, prim):
    # fast paths for the common calls: operand dtypes (and Python scalar types) -> (loop
    # dtypes, result dtype), as numpy resolves them
    fast: dict = {}

    def types_of(key):
        types = fast.get(key)
        if types is None:
            types = fast[key] = resolve_ufunc(uf, key)
        return types

    def f(*args, **kwargs):
        if current_trace() is None:
            return uf(*args, **kwargs)
        if not kwargs:
            n = len(args)
            if n == 1 and isinstance(args[0], Tracer):     # one traced operand
                x = args[0]
                dt = x.dtype
                in_dts, out_dt = types_of((dt,))
                if in_dts[0] == dt:
                    out = prim(x)
                    return out if out.dtype == out_dt else ops.convert_element_type(out,
                                                                                   out_dt)
            elif n == 2:
                x, y = args
                ty = type(y)
                if isinstance(x, Tracer) and (ty is float or ty is int):   # x * 2.0
                    dt = x.dtype
                    in_dts, out_dt = types_of((dt, ty))
                    if in_dts[0] == dt:
                        out = prim(x, np.asarray(y, in_dts[1]))
                        return out if out.dtype == out_dt else ops.convert_element_type(
                            out, out_dt)
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise TypeError(f"functrace.numpy.{name}: keyword(s) {sorted(kwargs)} are not "
                            "supported on traced arrays (arrays are immutable: no out=)")
        if len(args) != uf.nin:
            raise TypeError(f"{name}() takes {uf.nin} positional arguments, got {len(args)}")
        if dtype is not None:
            args = [cast(a, dtype) for a in args]
        return ufunc_apply(uf, prim, *args)
    f.__name__ = f.__qualname__ = name
    # an argument inside the function's domain (nan == nan would be False)
    integer = not any(t[0] in "efdg" for t in uf.types)   # numpy's bit ufuncs: no float loop
    example = ("(6)" if uf.nin == 1 else "(6, 3)") if integer else \
        "(1.5)" if name in ("arccosh", "acosh") else "(0.5)" if uf.nin == 1 else "(0.5, 2.0)"
    grad_note = ("Integer and bool operands only, as in numpy (no gradient flows through "
                 "integers)." if integer else
                 "Piecewise constant: its gradient is zero wherever it is defined "
                 "(docs/numerics.md)." if name in _PIECEWISE_CONSTANT else
                 "Differentiable where numpy's function is smooth.")
    f.__doc__ = (f"numpy.{uf.__name__}, traceable.\n\n"
                 f"Same signature, dtypes and broadcasting as ``numpy.{uf.__name__}``. "
                 f"{grad_note}\n\n"
                 f"Example:\n    >>> import functrace.numpy as fnp\n"
                 f"    >>> fnp.{name}{example} == np.{uf.__name__}{example}\n"
                 "    np.True_\n")
    globals()[name] = f
    __all__.append(name)
    return f


_PIECEWISE_CONSTANT = {
    "floor", "ceil", "trunc", "fix", "rint", "sign", "signbit", "isnan", "isinf", "isfinite",
    "floor_divide", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not"}


def _int_identity(prim):
    """floor/ceil/trunc/rint of integers are the integers themselves (numpy 2 keeps the
    dtype); only floats reach the op."""
    def f(x):
        return prim(x) if x.dtype.kind in "fc" else x
    return f


def _square(x):
    return ops.integer_pow(x, 2)


def _reciprocal(x):
    if x.dtype.kind in "iub":
        return ops.floordiv(np.ones((), x.dtype), x)
    return ops.div(np.ones((), x.dtype), x)


def _positive(x):
    return x


def _scale(c):
    def f(x):
        return ops.mul(x, np.asarray(c, x.dtype))
    return f


def _fmax(x, y):
    m = ops.maximum(x, y)
    return ops.select(ops.isnan(y), x, ops.select(ops.isnan(x), y, m)) \
        if x.dtype.kind in "fc" else m


def _fmin(x, y):
    m = ops.minimum(x, y)
    return ops.select(ops.isnan(y), x, ops.select(ops.isnan(x), y, m)) \
        if x.dtype.kind in "fc" else m


def _logaddexp2(x, y):
    ln2 = np.asarray(np.log(2.0), x.dtype)
    return ops.div(ops.logaddexp(ops.mul(x, ln2), ops.mul(y, ln2)), ln2)


def _heaviside(x, h0):
    # numpy: NaN where x is NaN (x itself, with no derivative), h0 where x == 0
    z, one = np.zeros((), x.dtype), np.ones((), x.dtype)
    rest = ops.select(ops.eq(x, z), h0, ops.stop_gradient(x))
    return ops.select(ops.lt(x, z), z, ops.select(ops.gt(x, z), one, rest))


def _sign(x):
    return ops.sign(x)


def _power(x, y):
    return ops.pow(x, y)


def _true_divide(x, y):
    return ops.div(x, y)


_UNARY = {
    "negative": (np.negative, ops.neg), "positive": (np.positive, _positive),
    "sin": (np.sin, ops.sin), "cos": (np.cos, ops.cos), "tan": (np.tan, ops.tan),
    "arcsin": (np.arcsin, ops.asin), "arccos": (np.arccos, ops.acos),
    "arctan": (np.arctan, ops.atan), "sinh": (np.sinh, ops.sinh), "cosh": (np.cosh, ops.cosh),
    "tanh": (np.tanh, ops.tanh), "arcsinh": (np.arcsinh, ops.asinh),
    "arccosh": (np.arccosh, ops.acosh), "arctanh": (np.arctanh, ops.atanh),
    "exp": (np.exp, ops.exp), "exp2": (np.exp2, ops.exp2), "expm1": (np.expm1, ops.expm1),
    "log": (np.log, ops.log), "log2": (np.log2, ops.log2), "log10": (np.log10, ops.log10),
    "log1p": (np.log1p, ops.log1p), "sqrt": (np.sqrt, ops.sqrt), "cbrt": (np.cbrt, ops.cbrt),
    "square": (np.square, _square), "reciprocal": (np.reciprocal, _reciprocal),
    "absolute": (np.absolute, ops.abs), "abs": (np.absolute, ops.abs),
    "fabs": (np.fabs, ops.abs), "sign": (np.sign, _sign),
    "floor": (np.floor, _int_identity(ops.floor)), "ceil": (np.ceil, _int_identity(ops.ceil)),
    "trunc": (np.trunc, _int_identity(ops.trunc)), "fix": (np.trunc, _int_identity(ops.trunc)),
    "rint": (np.rint, _int_identity(ops.round)),
    "isnan": (np.isnan, ops.isnan), "isinf": (np.isinf, ops.isinf),
    "isfinite": (np.isfinite, ops.isfinite), "signbit": (np.signbit, ops.signbit),
    "logical_not": (np.logical_not, ops.logical_not), "conjugate": (np.conjugate, ops.conj),
    "conj": (np.conjugate, ops.conj), "deg2rad": (np.deg2rad, _scale(np.pi / 180)),
    "radians": (np.radians, _scale(np.pi / 180)), "rad2deg": (np.rad2deg, _scale(180 / np.pi)),
    "degrees": (np.degrees, _scale(180 / np.pi)),
}
_BINARY = {
    "add": (np.add, ops.add), "subtract": (np.subtract, ops.sub),
    "multiply": (np.multiply, ops.mul), "divide": (np.divide, _true_divide),
    "true_divide": (np.true_divide, _true_divide),
    "floor_divide": (np.floor_divide, ops.floordiv), "remainder": (np.remainder, ops.rem),
    "mod": (np.mod, ops.rem), "fmod": (np.fmod, ops.fmod), "power": (np.power, _power),
    "float_power": (np.float_power, _power), "maximum": (np.maximum, ops.maximum),
    "minimum": (np.minimum, ops.minimum), "fmax": (np.fmax, _fmax), "fmin": (np.fmin, _fmin),
    "arctan2": (np.arctan2, ops.atan2), "hypot": (np.hypot, ops.hypot),
    "logaddexp": (np.logaddexp, ops.logaddexp), "logaddexp2": (np.logaddexp2, _logaddexp2),
    "copysign": (np.copysign, ops.copysign), "heaviside": (np.heaviside, _heaviside),
    "equal": (np.equal, ops.eq), "not_equal": (np.not_equal, ops.ne),
    "less": (np.less, ops.lt), "less_equal": (np.less_equal, ops.le),
    "greater": (np.greater, ops.gt), "greater_equal": (np.greater_equal, ops.ge),
    "logical_and": (np.logical_and, ops.logical_and),
    "logical_or": (np.logical_or, ops.logical_or),
    "logical_xor": (np.logical_xor, ops.logical_xor),
}



# numpy's bit operations: integer operands take the bitwise ops, bool operands the logical
# ones (numpy's bitwise_and of bools is logical_and; ``~`` of a bool is ``not``)
def _bits(logical, bitwise):
    def prim(*xs):
        return (logical if xs[0].dtype == np.bool_ else bitwise)(*xs)
    return prim


_BITS = {
    "bitwise_and": (np.bitwise_and, _bits(ops.logical_and, ops.bitwise_and)),
    "bitwise_or": (np.bitwise_or, _bits(ops.logical_or, ops.bitwise_or)),
    "bitwise_xor": (np.bitwise_xor, _bits(ops.logical_xor, ops.bitwise_xor)),
    "invert": (np.invert, _bits(ops.logical_not, ops.invert)),
    "bitwise_not": (np.invert, _bits(ops.logical_not, ops.invert)),
    "left_shift": (np.left_shift, ops.left_shift),      # bool << bool: an int8 loop
    "right_shift": (np.right_shift, ops.right_shift),
}
for _alias, _of in (("bitwise_invert", "invert"), ("bitwise_left_shift", "left_shift"),
                    ("bitwise_right_shift", "right_shift")):
    if hasattr(np, _alias):                         # numpy >= 2 spells them both ways
        _BITS[_alias] = _BITS[_of]

# numpy 2's array-API spellings: the same ufuncs under a second name (np.acos is np.arccos)
_ALIASES = {"acos": "arccos", "asin": "arcsin", "atan": "arctan", "acosh": "arccosh",
            "asinh": "arcsinh", "atanh": "arctanh", "atan2": "arctan2"}
for _alias, _of in _ALIASES.items():
    if hasattr(np, _alias):
        (_UNARY if _of in _UNARY else _BINARY)[_alias] = (_UNARY | _BINARY)[_of]

for _n, (_uf, _prim) in {**_UNARY, **_BINARY, **_BITS}.items():
    _make(_n, _uf, _prim)

# x ** k with a Python integer k: the integer_pow op (exact x*x for k=2, derivative k*x**(k-1)
# without a log).
_power_generic = globals()["power"]


def power(x1, x2, /, **kwargs):
    """numpy.power; ``x ** k`` for a Python int ``k`` (or integral float) and a float or
    complex base traces as ``integer_pow``, whose derivative needs no log.

    Example:
        >>> import functrace.numpy as fnp
        >>> float(fnp.power(3.0, 2))
        9.0
    """
    if current_trace() is None:
        return np.power(x1, x2, **kwargs)
    if (not kwargs and isinstance(x2, int | float) and not isinstance(x2, bool)
            and float(x2).is_integer() and builtins.abs(x2) <= 64):
        x = asarray_any(x1)
        dt = np.result_type(x.dtype, x2) if isinstance(x, np.ndarray) else None
        xdt = x.dtype if isinstance(x, Tracer) else dt
        if xdt.kind in "fc":   # x2 is a weak Python scalar (NEP 50): x_f32 ** 2 is float32
            return ops.integer_pow(cast(x, np.result_type(xdt, x2)), int(x2))
    return _power_generic(x1, x2, **kwargs)


pow = power   # numpy 2's name (np.pow is np.power)


def where(condition, x=None, y=None, /):
    """numpy.where; the three-argument form is a select (differentiable in x and y).

    The one-argument form returns indices and needs a concrete condition.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.where(np.array([True, False]), 1.0, 2.0)
        array([1., 2.])
    """
    if current_trace() is None:
        return np.where(condition) if x is None and y is None else np.where(condition, x, y)
    if x is None and y is None:
        from ._indexing import nonzero
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    c = cast(asarray_any(condition), bool)
    dt = weak_result_type(x, y)
    x, y = cast(x, dt), cast(y, dt)
    _, (c, x, y) = broadcast_all(c, x, y)
    if np.shape(c) == () and not isinstance(c, Tracer):
        c = np.asarray(c)
    return ops.select(c, x, y)


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kwargs):
    """numpy.clip; the gradient is 1 on the closed interval [a_min, a_max] (docs/numerics.md).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.clip(np.array([-2.0, 0.5, 3.0]), -1.0, 1.0)
        array([-1. ,  0.5,  1. ])
    """
    if min is not None or max is not None:   # numpy 2's keyword names
        if (min is not None and a_min is not None) or (max is not None and a_max is not None):
            raise TypeError("clip: pass a_min/a_max or min/max, not both")
        a_min = a_min if min is None else min
        a_max = a_max if max is None else max
    if current_trace() is None:
        return np.clip(a, a_min, a_max, out=out, **kwargs)
    if out is not None or kwargs:
        raise TypeError("clip: out= and ufunc keywords are not supported on traced arrays")
    a = asarray_any(a)
    dt = weak_result_type(a, *[b for b in (a_min, a_max) if b is not None])
    flt = np.dtype(dt).kind in "fc"
    lo = cast(a_min, dt) if a_min is not None else \
        np.asarray(-np.inf if flt else np.iinfo(dt).min, dt)
    hi = cast(a_max, dt) if a_max is not None else \
        np.asarray(np.inf if flt else np.iinfo(dt).max, dt)
    _, (a, lo, hi) = broadcast_all(cast(a, dt), lo, hi)
    return ops.clip(a, lo, hi)


def sinc(x, /):
    """numpy.sinc (normalised: sin(pi x)/(pi x)); its derivative at 0 is 0.

    Example:
        >>> import functrace.numpy as fnp
        >>> float(fnp.sinc(0.0))
        1.0
    """
    if current_trace() is None:
        return np.sinc(x)
    x = asarray_any(x)
    return ops.sinc(cast(x, result_dtype_like_numpy(np.sinc, x.dtype)))   # ints: float64


def round(a, decimals=0, out=None):
    """numpy.round (half to even); zero gradient.

    Example:
        >>> import functrace.numpy as fnp
        >>> float(fnp.round(2.5))
        2.0
    """
    if current_trace() is None:
        return np.round(a, decimals, out)
    a = asarray_any(a)
    decimals = int(decimals)
    if a.dtype.kind == "b":
        a = cast(a, result_dtype_like_numpy(np.round, a.dtype))   # numpy: float16
    if a.dtype.kind not in "fc":
        if decimals >= 0:
            return a
        # integers to tens, hundreds, ...: half to even, as numpy
        s = np.asarray(10.0 ** -decimals)
        return cast(ops.mul(ops.round(ops.div(cast(a, np.float64), s)), s), a.dtype)
    if decimals == 0:
        return ops.round(a)
    # numpy multiplies by 10**d for d > 0 and divides by 10**-d for d < 0 (25 * 0.1 is not
    # 2.5 in floating point, 25 / 10 is)
    if decimals > 0:
        s = np.asarray(10.0 ** decimals, a.dtype)
        return ops.div(ops.round(ops.mul(a, s)), s)
    s = np.asarray(10.0 ** -decimals, a.dtype)
    return ops.mul(ops.round(ops.div(a, s)), s)


around = round


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """numpy.nan_to_num.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.nan_to_num(np.array([np.nan, 1.0]))
        array([0., 1.])
    """
    if current_trace() is None:
        return np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    x = asarray_any(x)
    if x.dtype.kind == "c":   # numpy: the real and imaginary parts separately
        kw = dict(nan=nan, posinf=posinf, neginf=neginf)
        re, im = nan_to_num(ops.real(x), **kw), nan_to_num(ops.imag(x), **kw)
        return ops.add(ops.convert_element_type(re, x.dtype),
                       ops.mul(ops.convert_element_type(im, x.dtype), np.asarray(1j, x.dtype)))
    if x.dtype.kind != "f":
        return x
    info = np.finfo(x.dtype)
    hi = np.asarray(info.max if posinf is None else posinf, x.dtype)
    lo = np.asarray(info.min if neginf is None else neginf, x.dtype)
    z = np.asarray(nan, x.dtype)
    x = ops.select(ops.isnan(x), z, x)
    inf = ops.isinf(x)
    return ops.select(inf, ops.select(ops.gt(x, np.zeros((), x.dtype)), hi, lo), x)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy.isclose (not differentiable: returns booleans).

    Example:
        >>> import functrace.numpy as fnp
        >>> bool(fnp.isclose(1.0, 1.0 + 1e-9))
        True
    """
    if current_trace() is None:
        return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    a, b = asarray_any(a), asarray_any(b)
    dt = weak_result_type(a, b, 1.0)   # numpy's: result_type(y, 1.) (ints: float64)
    _, (a, b) = broadcast_all(cast(a, dt), cast(b, dt))
    d = ops.abs(ops.sub(a, b))
    tol = ops.add(np.asarray(atol, d.dtype), ops.mul(np.asarray(rtol, d.dtype), ops.abs(b)))
    close = ops.logical_or(ops.eq(a, b), ops.le(d, tol))
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.isnan(a), ops.isnan(b)))
    return close


def real(val):
    """numpy.real.

    Example:
        >>> import functrace.numpy as fnp
        >>> float(fnp.real(1 + 2j))
        1.0
    """
    if current_trace() is None:
        return np.real(val)
    v = asarray_any(val)
    return ops.real(v) if v.dtype.kind == "c" else v


def imag(val):
    """numpy.imag.

    Example:
        >>> import functrace.numpy as fnp
        >>> float(fnp.imag(1 + 2j))
        2.0
    """
    if current_trace() is None:
        return np.imag(val)
    v = asarray_any(val)
    if v.dtype.kind == "c":
        return ops.imag(v)
    return ops.broadcast_to_shape(np.zeros((), v.dtype), v.shape)


def angle(z, deg=False):
    """numpy.angle.

    Example:
        >>> import functrace.numpy as fnp
        >>> float(fnp.angle(1j))
        1.5707963267948966
    """
    if current_trace() is None:
        return np.angle(z, deg)
    z = asarray_any(z)
    if z.dtype.kind == "c":
        a = ops.atan2(ops.imag(z), ops.real(z))
    else:   # numpy: arctan2(0, z), so -0.0 gives pi and nan stays nan
        z = cast(z, result_dtype_like_numpy(np.angle, z.dtype))
        a = ops.atan2(ops.broadcast_to_shape(np.zeros((), z.dtype), z.shape), z)
    return ops.mul(a, np.asarray(180 / np.pi, a.dtype)) if deg else a


__all__ += ["power", "pow", "where", "clip", "sinc", "round", "around", "nan_to_num", "isclose",
            "real", "imag", "angle"]
