"""Scalar code of the built-in elementwise ops, per target: expression templates (text only).

Owns what the op declarations in ``elementwise.py`` say about their code inside generated
kernels: the numba-CPU templates (numpy's exact semantics; transcendental math from
``backends.vecmath``'s vectorisable polynomials, named ``vm.*`` in a kernel module, and the
``backends.cpu_scalar`` helpers, ``cs.*``) and the numba-CUDA templates (libdevice math,
typed constants, products that never contract into an FMA), plus the text helpers both use
(``const_expr``, ``dtype_ctor``, ``logic_expr``, ``convert_expr``) and ``Unsupported``. A
template is a format string over the operands ``{0}, {1}, ...`` and the params, or a callable
``(args, params, in_dtypes, out_dtype) -> str``. Text only: never imports numba, a backend,
or anything of functrace but ``core``.

The names a template may use in a kernel module: ``np``, ``math``, ``numba`` (CPU), ``vm``,
``vs`` (``vecmath_special``), ``vi`` (``vecmath_incomplete``) and ``cs`` (CPU), ``libdevice``
(CUDA).
"""

from __future__ import annotations

import math

import numpy as np

from ..core import ScalarCode

__all__ = ["Unsupported", "dtype_ctor", "const_expr", "logic_expr", "convert_expr", "cpu", "cuda",
           "vecmath", "libdevice", "VECMATH_F32", "nan_max", "nan_min"]


class Unsupported(Exception):
    """The group cannot be expressed as a kernel (the executor runs it with numpy)."""


def dtype_ctor(dt: np.dtype) -> str:
    """The numpy scalar constructor that types a value in generated code."""
    dt = np.dtype(dt)
    return "np.bool_" if dt.kind == "b" else f"np.{dt.name}"


def const_expr(value, dtype) -> str:
    """Source text of a typed scalar constant (exact: repr round-trips)."""
    dt = np.dtype(dtype)
    v = np.asarray(value, dt).item()
    if dt.kind == "b":
        return "True" if v else "False"
    if dt.kind in "iu":
        return f"{dtype_ctor(dt)}({int(v)})"
    if dt.kind == "f":
        if math.isnan(v):
            txt = "np.nan"
        elif math.isinf(v):
            txt = "np.inf" if v > 0 else "-np.inf"
        else:
            txt = repr(float(v))
        return f"{dtype_ctor(dt)}({txt})"
    raise Unsupported(f"constant of dtype {dt}")


def logic_expr(op):
    """Expression builder for the logical ops (``and``, ``or``, ``xor``, ``not``): non-bool
    operands are tested against zero first, as numpy does."""
    def f(args, params, in_dts, out_dt):
        a = [x if np.dtype(d).kind == "b" else f"({x} != 0)" for x, d in zip(args, in_dts)]
        if op == "not":
            return f"(not {a[0]})"
        if op == "xor":
            return f"({a[0]} != {a[1]})"
        return f"({a[0]} {op} {a[1]})"
    return f


def convert_expr(args, params, in_dts, out_dt):
    """Expression builder for ``convert_element_type`` (to bool: ``!= 0``, as numpy)."""
    dt = np.dtype(params["new_dtype"])
    if dt.kind == "b":
        return f"({args[0]} != 0)"
    return f"{dtype_ctor(dt)}({args[0]})"


def cpu(expr=None, kinds: str = "biuf", alone: bool = False) -> ScalarCode:
    """The numba-CPU code of an op (None: its ``scalar``)."""
    return ScalarCode(expr, kinds, alone)


def cuda(expr=None, kinds: str = "biuf", alone: bool = False) -> ScalarCode:
    """The numba-CUDA code of an op (None: its ``scalar``)."""
    return ScalarCode(expr, kinds, alone)


# --------------------------------------------------------------------------------------------
# numba CPU
# --------------------------------------------------------------------------------------------

#: the ops with a native float32 polynomial in ``backends.vecmath`` (``VECMATH_F32``); the
#: other vecmath functions compute float32 in float64
VECMATH_F32 = frozenset({"exp", "log", "tanh", "sigmoid"})


def vecmath(fn: str) -> ScalarCode:
    """CPU code computed with ``backends.vecmath.v<fn>`` (vectorisable polynomials: numba has
    no SVML), its float32 variant where there is one; worth a kernel even alone."""
    fn32 = f"v{fn}_f32" if fn in VECMATH_F32 else None

    def f(args, params, in_dts, out_dt):
        use = fn32 if fn32 and np.dtype(in_dts[0]) == np.float32 else f"v{fn}"
        return f"vm.{use}({args[0]})"
    f.vecmath = fn
    return ScalarCode(f, alone=True)


def ipow_cpu(args, params, in_dts, out_dt):
    x, y = args[0], int(params["y"])
    dt = np.dtype(out_dt)
    if y == 0:
        return const_expr(1, dt)
    if y == 1:
        return x
    if y == 2:
        return f"({x} * {x})"
    if dt.kind in "iu":
        if y < 0:
            raise Unsupported("negative integer power of integers")
        if y <= 8:   # wrapping products, like numpy's integer power
            return "(" + " * ".join([x] * y) + ")"
        return f"np.power({x}, {const_expr(y, dt)})"
    return f"np.power({x}, {const_expr(y, dt)})"


def fmod_cpu(args, params, in_dts, out_dt):
    a, b = args
    dt = np.dtype(in_dts[0])
    if dt.kind == "f":
        return f"np.fmod({a}, {b})"
    if dt.kind == "u":
        return f"np.remainder({a}, {b})"
    # C's truncated remainder from numpy's floored one (x % 0 is 0 for integers)
    r = f"np.remainder({a}, {b})"
    return f"({r} if ({r} == 0) | (({r} < 0) == ({a} < 0)) else {r} - {b})"


def float_helper_cpu(name, fallback):
    """``cs.<name>_f64`` / ``_f32`` (numpy's npy_divmod) on floats, ``fallback`` otherwise."""
    def f(args, params, in_dts, out_dt):
        dt = np.dtype(in_dts[0])
        if dt.kind == "f":
            return f"cs.{name}_f{dt.itemsize * 8}({args[0]}, {args[1]})"
        return f"{fallback}({args[0]}, {args[1]})"
    return f


def sign_expr(args, params, in_dts, out_dt):
    """numpy.sign on every target (the same Python-syntax expression for numba CPU and CUDA)."""
    x = args[0]
    dt = np.dtype(out_dt)
    one, zero = const_expr(1, dt), const_expr(0, dt)
    if dt.kind == "u":
        return f"({one} if {x} > {zero} else {zero})"
    if dt.kind == "b":
        return x
    if dt.kind == "i":
        return f"({one} if {x} > {zero} else (-{one} if {x} < {zero} else {zero}))"
    # numpy: sign(+-0) = +0, sign(nan) = nan
    nan_or_zero = f"({x} if {x} != {x} else {zero})"
    return f"({one} if {x} > {zero} else (-{one} if {x} < {zero} else {nan_or_zero}))"


def rsqrt_cpu(args, params, in_dts, out_dt):
    return f"({const_expr(1, out_dt)} / np.sqrt({args[0]}))"


def _fmax(a: str, b: str) -> str:
    # numpy.maximum on floats: a NaN in either operand is the result; on a tie (+0 and -0
    # compare equal) the *second* operand, as in all of numpy's loops (numba's np.maximum
    # returns the first)
    return f"({a} if ({a} > {b}) | ({a} != {a}) else {b})"


def _fmin(a: str, b: str) -> str:
    return f"({a} if ({a} < {b}) | ({a} != {a}) else {b})"


def maxmin_cpu(is_max: bool):
    fn, npname = (_fmax, "maximum") if is_max else (_fmin, "minimum")

    def f(args, params, in_dts, out_dt):
        if np.dtype(in_dts[0]).kind == "f":
            return fn(args[0], args[1])
        return f"np.{npname}({args[0]}, {args[1]})"
    return f


def clip_cpu(args, params, in_dts, out_dt):
    # the reference's np.minimum(hi, np.maximum(lo, x)), tie and NaN rules included: numpy's
    # clip keeps x where it equals a bound (clip(-0.0, 0.0, 1.0) is -0.0)
    x, lo, hi = args
    if np.dtype(in_dts[0]).kind == "f":
        return _fmin(hi, _fmax(lo, x))
    return f"np.minimum(np.maximum({x}, {lo}), {hi})"


# --------------------------------------------------------------------------------------------
# numba CUDA: libdevice math; every constant typed (float32 kernels never compute in float64)
# --------------------------------------------------------------------------------------------

def nan_max(a: str, b: str) -> str:
    # numpy.maximum: NaN in either operand wins; on ties (+-0) the second operand
    return f"({a} if ({a} > {b} or {a} != {a}) else {b})"


def nan_min(a: str, b: str) -> str:
    return f"({a} if ({a} < {b} or {a} != {a}) else {b})"


def libdevice(fn: str) -> ScalarCode:
    """CUDA code that is one libdevice call (``math.<fn>`` in a kernel), float operands."""
    def f(args, params, in_dts, out_dt):
        return f"math.{fn}({', '.join(args)})"
    return ScalarCode(f, kinds="f", alone=True)


def ipow_cuda(args, params, in_dts, out_dt):
    x, y = args[0], int(params["y"])
    dt = np.dtype(out_dt)
    if y == 0:
        return const_expr(1, dt)
    if y == 1:
        return x
    if y == 2:
        return product_cuda(x, x, dt)
    if dt.kind in "iu":
        if 0 < y <= 8:       # wrapping products, like numpy's integer power
            return "(" + " * ".join([x] * y) + ")"
        raise Unsupported("integer power outside 0..8")
    if y == -1:
        return f"({const_expr(1, dt)} / {x})"
    return f"math.pow({x}, {const_expr(y, dt)})"


#: libdevice's round-to-nearest multiply per float dtype (``libdevice`` in a kernel module)
_MUL_RN = {np.dtype(np.float64): "libdevice.dmul_rn", np.dtype(np.float32): "libdevice.fmul_rn"}


def product_cuda(a: str, b: str, dt) -> str:
    """``a * b`` that no compiler contracts with a following add (floats: ``mul.rn``)."""
    fn = _MUL_RN.get(np.dtype(dt))
    return f"{fn}({a}, {b})" if fn else f"({a} * {b})"


def mul_cuda(args, params, in_dts, out_dt):
    return product_cuda(args[0], args[1], in_dts[0])


def exp2_cuda(args, params, in_dts, out_dt):
    return f"math.pow({const_expr(2, out_dt)}, {args[0]})"


def rsqrt_cuda(args, params, in_dts, out_dt):
    return f"({const_expr(1, out_dt)} / math.sqrt({args[0]}))"


def logistic_cuda(args, params, in_dts, out_dt):
    # the stable form of the numpy impl: exp(-|x|) never overflows
    x, one = args[0], const_expr(1, out_dt)
    return (f"({one} / ({one} + math.exp(-{x})) if {x} >= {const_expr(0, out_dt)} "
            f"else math.exp({x}) / ({one} + math.exp({x})))")


def logaddexp_cuda(args, params, in_dts, out_dt):
    # numpy's npy_logaddexp: equal arguments (incl. +-inf) give x + log(2)
    x, y = args
    d = f"({x} - {y})"
    ln2 = const_expr(np.log(2.0), out_dt)
    return (f"({x} + {ln2} if {x} == {y} else ({x} + math.log1p(math.exp(-{d})) if {d} > "
            f"{const_expr(0, out_dt)} else ({y} + math.log1p(math.exp({d})) if {d} <= "
            f"{const_expr(0, out_dt)} else {d})))")


def abs_cuda(args, params, in_dts, out_dt):
    if np.dtype(in_dts[0]).kind == "b":
        return args[0]
    return f"abs({args[0]})"


def signbit_cuda(args, params, in_dts, out_dt):
    return f"(math.copysign({const_expr(1, in_dts[0])}, {args[0]}) < {const_expr(0, in_dts[0])})"


def maxmin_cuda(is_max: bool):
    def f(args, params, in_dts, out_dt):
        if np.dtype(in_dts[0]).kind == "f":
            return (nan_max if is_max else nan_min)(args[0], args[1])
        return f"max({args[0]}, {args[1]})" if is_max else f"min({args[0]}, {args[1]})"
    return f


def clip_cuda(args, params, in_dts, out_dt):
    x, lo, hi = args
    if np.dtype(in_dts[0]).kind == "f":
        # numpy.clip: x itself where it equals a bound (the ufuncs' ties go to the second)
        return nan_min(hi, nan_max(lo, x))
    return f"min(max({x}, {lo}), {hi})"
