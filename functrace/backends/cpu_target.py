"""The CPU target's expression table and fusion rules, and the kernel module text.

Owns ``CPU_EXPRS`` (op name -> scalar expression with numpy's exact semantics, computed with
``vecmath`` polynomials for transcendental math), ``fusible`` and ``prefer_kernel`` (what the
fusion pass may put in a CPU kernel, fused ``pad``s included), and ``kernel_module_source``
(the full, content-hashed text of a kernel module). Text only: never imports numba. Imports
core (via codegen) only.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from .codegen import (
    REDUCTION_KINDS,
    Unsupported,
    const_expr,
    convert_expr,
    fusible_pad,
    logic_expr,
    render_cpu,
    spec_key,
)

__all__ = ["CPU_EXPRS", "VECMATH_OPS", "VECMATH_F32_OPS", "fusible", "prefer_kernel",
           "kernel_module_source", "CODEGEN_VERSION"]

#: ops computed with functrace.backends.vecmath (vectorisable polynomials: numba has no SVML)
VECMATH_OPS = {"exp": "vexp", "exp2": "vexp2", "expm1": "vexpm1", "log": "vlog",
               "log2": "vlog2", "log10": "vlog10", "log1p": "vlog1p", "sin": "vsin",
               "cos": "vcos", "tan": "vtan", "tanh": "vtanh", "logistic": "vsigmoid"}
#: the native float32 variants among them (``vecmath.VECMATH_F32``); the others compute
#: float32 in float64
VECMATH_F32_OPS = {"exp": "vexp_f32", "log": "vlog_f32", "tanh": "vtanh_f32",
                   "logistic": "vsigmoid_f32"}


def _vecmath(name):
    fn, fn32 = VECMATH_OPS[name], VECMATH_F32_OPS.get(name)

    def f(args, params, in_dts, out_dt):
        use = fn32 if fn32 and np.dtype(in_dts[0]) == np.float32 else fn
        return f"vm.{use}({args[0]})"
    return f


def _typed_one(dt) -> str:
    return const_expr(1, dt)


def _ipow(args, params, in_dts, out_dt):
    x, y = args[0], int(params["y"])
    dt = np.dtype(out_dt)
    if y == 0:
        return _typed_one(dt)
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


def _fmod(args, params, in_dts, out_dt):
    a, b = args
    dt = np.dtype(in_dts[0])
    if dt.kind == "f":
        return f"np.fmod({a}, {b})"
    if dt.kind == "u":
        return f"np.remainder({a}, {b})"
    # C's truncated remainder from numpy's floored one (x % 0 is 0 for integers)
    r = f"np.remainder({a}, {b})"
    return f"({r} if ({r} == 0) | (({r} < 0) == ({a} < 0)) else {r} - {b})"


def _float_helper(name, fallback):
    def f(args, params, in_dts, out_dt):
        dt = np.dtype(in_dts[0])
        if dt.kind == "f":
            return f"cs.{name}_f{dt.itemsize * 8}({args[0]}, {args[1]})"
        return f"{fallback}({args[0]}, {args[1]})"
    return f


def _sign(args, params, in_dts, out_dt):
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


def _rsqrt(args, params, in_dts, out_dt):
    return f"({_typed_one(out_dt)} / np.sqrt({args[0]}))"


def _fmax(a: str, b: str) -> str:
    # numpy.maximum on floats: a NaN in either operand is the result; on a tie (+0 and -0
    # compare equal) the *second* operand, as in all of numpy's loops (numba's np.maximum
    # returns the first)
    return f"({a} if ({a} > {b}) | ({a} != {a}) else {b})"


def _fmin(a: str, b: str) -> str:
    return f"({a} if ({a} < {b}) | ({a} != {a}) else {b})"


def _maxmin(fn, npname):
    def f(args, params, in_dts, out_dt):
        if np.dtype(in_dts[0]).kind == "f":
            return fn(args[0], args[1])
        return f"np.{npname}({args[0]}, {args[1]})"
    return f


def _clip(args, params, in_dts, out_dt):
    # the reference's np.minimum(hi, np.maximum(lo, x)), tie and NaN rules included: numpy's
    # clip keeps x where it equals a bound (clip(-0.0, 0.0, 1.0) is -0.0)
    x, lo, hi = args
    if np.dtype(in_dts[0]).kind == "f":
        return _fmin(hi, _fmax(lo, x))
    return f"np.minimum(np.maximum({x}, {lo}), {hi})"


#: op name -> expression template for numba CPU kernels (numpy's semantics in every case:
#: NaN propagation and the signed-zero tie of maximum/minimum, float floor/ceil, numpy's
#: remainder and power). Exact operations are plain IEEE operations: kernels carry no
#: fast-math flag (``_JIT_FLAGS``), so nothing is contracted, reassociated or approximated.
#: Ops not listed use the ``kernel`` field of their declaration.
CPU_EXPRS: dict = {
    **{name: _vecmath(name) for name in VECMATH_OPS},
    "neg": "(-{0})", "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
    "div": "({0} / {1})", "max": _maxmin(_fmax, "maximum"), "min": _maxmin(_fmin, "minimum"),
    "floordiv": _float_helper("floordiv", "np.floor_divide"),
    "rem": _float_helper("remainder", "np.remainder"),
    "fmod": _fmod, "pow": "np.power({0}, {1})", "integer_pow": _ipow,
    "sign": _sign, "round": "np.rint({0})", "floor": "np.floor({0})",
    "ceil": "np.ceil({0})", "trunc": "np.trunc({0})", "sqrt": "np.sqrt({0})",
    "rsqrt": _rsqrt, "cbrt": "np.cbrt({0})", "abs": "np.abs({0})",
    "asin": "np.arcsin({0})", "acos": "np.arccos({0})", "atan": "np.arctan({0})",
    "sinh": "np.sinh({0})", "cosh": "np.cosh({0})", "asinh": "np.arcsinh({0})",
    "acosh": "np.arccosh({0})", "atanh": "np.arctanh({0})", "sinc": "np.sinc({0})",
    "atan2": "np.arctan2({0}, {1})", "hypot": "np.hypot({0}, {1})",
    "copysign": "np.copysign({0}, {1})", "logaddexp": "np.logaddexp({0}, {1})",
    "isnan": "np.isnan({0})", "isinf": "np.isinf({0})", "isfinite": "np.isfinite({0})",
    "signbit": "np.signbit({0})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "and": logic_expr("&"), "or": logic_expr("|"), "xor": logic_expr("xor"),
    "not": logic_expr("not"),
    "select": "({1} if {0} else {2})",
    "clip": _clip,
    "convert_element_type": convert_expr, "stop_gradient": "{0}",
}

#: elementwise ops never fused on the CPU (complex parts: complex data is not fused at all)
_NOT_FUSED = {"real", "imag", "conj"}
_KINDS = "biuf"


def _dtype_ok(dt: np.dtype) -> bool:
    return dt.kind in _KINDS and not (dt.kind == "f" and dt.itemsize < 4)


def fusible(e) -> bool:
    """Whether the CPU target can put equation ``e`` in a kernel."""
    op = e.op
    if op.name in _NOT_FUSED:
        return False
    if not all(_dtype_ok(a.aval.dtype) for a in e.inputs) or \
            not all(_dtype_ok(o.aval.dtype) for o in e.outputs):
        return False
    if op.elementwise:
        return op.name in CPU_EXPRS or op.kernel is not None
    if op.name == "pad":      # a guarded shifted read (codegen.fusible_pad)
        return fusible_pad(e, _dtype_ok)
    kind = REDUCTION_KINDS.get(op.name)
    if kind is None:
        return False
    x = e.inputs[0].aval
    axes = tuple(e.params["axes"])
    if not axes:
        return False
    if kind in ("sum", "prod") and x.dtype.kind == "b":
        return False
    if kind == "logsumexp":
        return x.dtype.kind == "f" and axes == tuple(range(x.ndim - len(axes), x.ndim))
    return True


def prefer_kernel(e) -> bool:
    """A group of this single equation still deserves a kernel (numpy is slower there)."""
    return e.op.name in VECMATH_OPS or e.op.name == "logsumexp"



# --------------------------------------------------------------------------------------------
# kernel module text
# --------------------------------------------------------------------------------------------

CODEGEN_VERSION = "6"
#: no ``fastmath``: each of its flags changes results against numpy (tests/test_ieee.py).
#: ``contract`` fuses a*b+c into an FMA (``1e308*2.0 - inf`` gave -inf, numpy NaN), ``nsz``
#: rewrites -(a-b) to b-a (+0.0 where numpy gives -0.0), ``arcp`` turns x/3 and x/s into
#: x*(1/3), x*(1/s) (one ulp off in a third of the results). ``error_model="numpy"`` is what
#: lets the loops vectorise (no division check); vecmath's polynomials use explicit FMAs.
_JIT_FLAGS = 'cache=True, error_model="numpy", boundscheck=False, nogil=True'


_vm_hash: str | None = None


def _vecmath_hash() -> str:
    """Hash of the helper modules kernels call (numba's cache does not track them)."""
    global _vm_hash
    if _vm_hash is None:
        h = hashlib.sha256()
        for name in ("vecmath.py", "cpu_scalar.py"):
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
            with open(path, "rb") as f:
                h.update(f.read())
        _vm_hash = h.hexdigest()[:16]
    return _vm_hash


def kernel_module_source(spec, parallel: bool = False) -> tuple[str, str]:
    """(key, full module source) of the kernel for ``spec``."""
    flags = _JIT_FLAGS + (", parallel=True" if parallel else "")
    body = render_cpu(spec, "kernel", f"@numba.njit({flags})", parallel=parallel)
    head = (f"# functrace kernel (numba CPU), codegen v{CODEGEN_VERSION}, "
            f"vecmath {_vecmath_hash()}\n")
    text = head + ("import numpy as np\nimport numba\n"
                   "from functrace.backends import vecmath as vm\n"
                   "from functrace.backends import cpu_scalar as cs\n\n\n") + body
    key = spec_key(text)
    return key, text.replace("# functrace kernel", f"# functrace kernel {key}", 1)
