"""Scalar recipes: a branch-free scalar function written once, run three ways, bit for bit.

Owns the machinery behind the ops whose every rounding is fixed by an outside definition
(``ops.random``'s threefry hash, ``ops.xla_math``'s ``erf_inv`` as XLA computes it): a *recipe*
is a Python function ``recipe(m, *xs)`` of straight-line code, with selects (``m.where``)
instead of branches (``m.where_else`` keeps a costly else-value lazy: a masked computation on
arrays, an ``if`` block in the helpers), explicit fused multiply-adds (``m.fma``) and typed
constants (``m.f(v)``, ``m.const(v, dtype)``). Run with ``NumpyMath`` on arrays it is the op's numpy
impl (the living definition); run with ``TextMath`` on symbols it records every operation and
renders the source of a scalar helper for a target's kernel modules (``helper_source``):
numba CPU (``llvm.fma`` and bit casts from ``backends.cpu.vecmath_llvm``) or numba CUDA
(libdevice's ``fma``/``fmaf``, ``fmul_rn``/``dmul_rn`` products that NVVM never contracts,
``float_as_int``...). One text, three runs, so the targets cannot drift apart.

Exactness rules the renderings keep: every float product is rounded on its own (no target
contracts ``a * b + c`` unless the recipe asks with ``m.fma``); integer arithmetic wraps at
the operand width (numba widens ``uint32 + uint32`` to 64 bits, so each integer op is
computed wide and cast back); float32 stays float32. ``fma`` on numpy arrays is emulated
exactly (``fma``: float64 products with round-to-odd for float32, Boldo and Melquiond's
error-free emulation for float64). ``m.log`` is float64's libm ``log`` (glibc's, which XLA
calls too): the numpy run calls ``math.log`` per element (numpy's own SIMD log differs in the
last bit on about one input in 1,600).

Imports numpy and math only (text for the targets; nothing here imports numba or a backend).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["fma", "NumpyMath", "TextMath", "Sym", "helper_source", "helper_name"]


# --------------------------------------------------------------------------------------------
# exact fused multiply-add on numpy arrays
# --------------------------------------------------------------------------------------------

def _two_sum(a, b):
    """``s + e == a + b`` exactly, ``s = RN(a + b)`` (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    """``p + e == a * b`` exactly for float64 (Dekker's product with Veltkamp's split)."""
    p = a * b

    def split(x):
        c = x * 134217729.0           # 2**27 + 1
        hi = c - (c - x)
        return hi, x - hi
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _round_to_odd(s, e):
    """The round-to-odd value of ``s + e`` where ``s = RN(s + e)``: ``s`` when exact or odd,
    else its neighbour toward ``s + e``."""
    bits = s.view(np.int64)
    move = (e != 0) & ((bits & 1) == 0) & np.isfinite(s)
    return np.where(move, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def fma(a, b, c):
    """``a * b + c`` rounded once (IEEE fusedMultiplyAdd), for float32 or float64 numpy arrays
    or scalars of one dtype; what ``llvm.fma`` and libdevice's ``fma`` compute.

    float32: the product is exact in float64 and the float64 sum rounds to the right float32
    except where it lands on a float32 rounding midpoint (or in float32's subnormal range):
    those few are summed rounded to odd in float64, which makes the second rounding correct.
    float64:
    Boldo and Melquiond's emulation (exact product and sum, the low parts added rounded to odd,
    then one rounding to nearest). Non-finite results (overflow, inf or nan operands) are the
    plain ``a * b + c``.

    >>> float(fma(np.float64(0.1), np.float64(10.0), np.float64(-1.0)))
    5.551115123125783e-17
    """
    a, b, c = (np.asarray(v) for v in (a, b, c))
    dt = np.result_type(a, b, c)
    scalar = a.ndim == b.ndim == c.ndim == 0
    with np.errstate(all="ignore"):
        if dt == np.float32:
            p = a.astype(np.float64) * b.astype(np.float64)     # exact
            s = p + c.astype(np.float64)
            out = s.astype(np.float32)
            # RN32(RN64(x)) is RN32(x) unless RN64(x) is a float32 rounding midpoint (low 29
            # bits of the float64 fraction 1000...0) or in float32's subnormal range: redo
            # those (rare) with the sum rounded to odd
            redo = ((s.view(np.int64) & 0x1FFFFFFF) == 0x10000000) | (
                (np.abs(s) < 2.0 ** -126) & (s != 0))
            if redo.any():
                s, p, c64 = np.broadcast_arrays(s, p, c.astype(np.float64))
                out = np.array(np.broadcast_to(out, s.shape))
                out[redo] = _round_to_odd(*_two_sum(p[redo], c64[redo])).astype(np.float32)
        elif dt == np.float64:
            uh, ul = _two_prod(a, b)
            th, tl = _two_sum(c, uh)
            out = th + _round_to_odd(*_two_sum(tl, ul))
            out = np.where(np.isfinite(out), out, a * b + c)
        else:
            raise TypeError(f"fma of {dt} operands (float32 or float64)")
    return out[()] if scalar else out


# --------------------------------------------------------------------------------------------
# the numpy run: the ops' impls
# --------------------------------------------------------------------------------------------

_math_log = np.frompyfunc(math.log, 1, 1)


def _libm_log(x):
    """float64 ``log`` as libm (glibc) computes it, elementwise: log(0) = -inf, negative or nan
    inputs give nan."""
    x = np.asarray(x, np.float64)
    out = np.full(x.shape, np.nan)
    pos = x > 0
    if pos.any():
        out[pos] = _math_log(x[pos]).astype(np.float64)
    out[x == 0] = -np.inf
    return out


class NumpyMath:
    """The recipe vocabulary on numpy arrays (``dtype``: the recipe's float type)."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def f(self, v):
        return self.dtype.type(v)

    @staticmethod
    def const(v, dtype):
        return np.dtype(dtype).type(v)

    @staticmethod
    def cast(x, dtype):
        return np.asarray(x).astype(dtype)

    @staticmethod
    def where(c, a, b):
        return np.where(c, a, b)

    @staticmethod
    def fma(a, b, c):
        return fma(a, b, c)

    @staticmethod
    def where_else(c, a, fn, *args, branch: bool = True):
        """``where(c, a, fn(*args))`` with ``fn`` computed only where ``c`` is False (arrays
        of one shape); the text run emits a branch when ``branch``."""
        c = np.asarray(c)
        out = np.array(np.broadcast_to(a, c.shape))
        rest = ~c
        if rest.any():
            out[rest] = fn(*[np.asarray(x)[rest] for x in args])
        return out

    @staticmethod
    def sqrt(x):
        return np.sqrt(x)

    @staticmethod
    def abs(x):
        return np.abs(x)

    @staticmethod
    def log(x):
        return _libm_log(x)

    @staticmethod
    def bits(x):
        """The bit pattern of a float array as a signed integer of its width."""
        x = np.asarray(x)
        return x.view(np.dtype(f"int{8 * x.dtype.itemsize}"))

    @staticmethod
    def from_bits(i):
        i = np.asarray(i)
        return i.view(np.dtype(f"float{8 * i.dtype.itemsize}"))


# --------------------------------------------------------------------------------------------
# the text run: scalar helpers for kernel modules
# --------------------------------------------------------------------------------------------

def _ctor(dt: np.dtype) -> str:
    return "np.bool_" if dt.kind == "b" else f"np.{dt.name}"


def _const_text(v, dt: np.dtype) -> str:
    v = np.asarray(v).astype(dt)[()].item()
    if dt.kind == "f":
        if math.isnan(v):
            return f"{_ctor(dt)}(np.nan)"
        if math.isinf(v):
            return f"{_ctor(dt)}({'np.inf' if v > 0 else '-np.inf'})"
        return f"{_ctor(dt)}({float(v)!r})"
    if dt.kind == "b":
        return "True" if v else "False"
    return f"{_ctor(dt)}({int(v)})"


class Sym:
    """A value of the text run: a name (or constant text) in the helper and its dtype."""

    __slots__ = ("m", "text", "dtype")

    def __init__(self, m: TextMath, text: str, dtype):
        self.m, self.text, self.dtype = m, text, np.dtype(dtype)

    def _other(self, y) -> Sym:
        return y if isinstance(y, Sym) else Sym(self.m, self.m.literal(y, self.dtype), self.dtype)

    def _bin(self, op: str, y, swap: bool = False) -> Sym:
        a, b = (self._other(y), self) if swap else (self, self._other(y))
        return self.m.binary(op, a, b)

    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> Sym:
        return self.m.emit(f"(-{self.text})", self.dtype)


def _operator(op: str, swap: bool = False):
    def method(self, y):
        return self._bin(op, y, swap)
    return method


for _name, _op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("and", "&"),
                   ("or", "|"), ("xor", "^"), ("lshift", "<<"), ("rshift", ">>")):
    setattr(Sym, f"__{_name}__", _operator(_op))
    setattr(Sym, f"__r{_name}__", _operator(_op, swap=True))
for _name, _op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="),
                   ("ne", "!=")):
    setattr(Sym, f"__{_name}__", _operator(_op))


_CMP = frozenset({"<", "<=", ">", ">=", "==", "!="})
#: per target: the helper's decorator and the module-level names its body uses
_PRELUDE = {
    "cpu": ("import math  # noqa: E402\n"
            "from functrace.backends.cpu.vecmath_llvm import f2i as _ftr_f2i  # noqa: E402\n"
            "from functrace.backends.cpu.vecmath_llvm import fma as _ftr_fma  # noqa: E402\n"
            "from functrace.backends.cpu.vecmath_llvm import i2f as _ftr_i2f  # noqa: E402\n",
            '@numba.njit(inline="always", error_model="numpy", nogil=True)'),
    "cuda": ("", "@cuda.jit(device=True)"),
}


class TextMath:
    """The recipe vocabulary on ``Sym``s: each operation appends one line ``tN = expr``."""

    def __init__(self, dtype, target: str, const_prefix: str | None = None):
        if target not in _PRELUDE:
            raise ValueError(f"unknown target {target!r} (cpu or cuda)")
        self.dtype, self.target = np.dtype(dtype), target
        self.lines: list[str] = []
        self.indent = ""
        # numba types every ``np.uint32(13)`` in a body as a call; a module-level name is a
        # frozen constant of the same type (a recipe of 20 Threefry rounds: ~0.3 s less
        # compile per kernel that inlines it)
        self.const_prefix = const_prefix
        self.consts: dict[str, str] = {}          # constant text -> module-level name

    def literal(self, v, dtype) -> str:
        """The text of the constant ``v`` of ``dtype`` in the body: the constant itself, or
        with ``const_prefix`` (and not a bool) the module-level name bound to it."""
        dt = np.dtype(dtype)
        text = _const_text(v, dt)
        if self.const_prefix is None or dt.kind == "b":
            return text
        name = self.consts.get(text)
        if name is None:
            name = self.consts[text] = f"{self.const_prefix}{len(self.consts)}"
        return name

    def emit(self, expr: str, dtype) -> Sym:
        name = f"t{len(self.lines)}"
        self.lines.append(f"{self.indent}{name} = {expr}")
        return Sym(self, name, dtype)

    def where_else(self, c, a, fn, *args, branch: bool = True) -> Sym:
        """``a if c else fn(*args)``: with ``branch``, an ``if`` whose else-block computes
        ``fn`` (worth it around a libm call, which no loop vectorises anyway); without, the
        straight-line select (vectorisable)."""
        if not branch:
            return self.where(c, a, fn(*args))
        c, a = self.sym(c), self.sym(a)
        out = self.emit(a.text, a.dtype)
        self.lines.append(f"{self.indent}if not {c.text}:")
        outer, self.indent = self.indent, self.indent + "    "
        try:
            r = self.sym(fn(*args))
            self.lines.append(f"{self.indent}{out.text} = {r.text}")
        finally:
            self.indent = outer
        return out

    def sym(self, x, dtype=None) -> Sym:
        if isinstance(x, Sym):
            return x
        return Sym(self, self.literal(x, np.dtype(dtype or self.dtype)), dtype or self.dtype)

    def f(self, v) -> Sym:
        return self.sym(v)

    def const(self, v, dtype) -> Sym:
        return self.sym(v, np.dtype(dtype))

    def cast(self, x, dtype) -> Sym:
        dt = np.dtype(dtype)
        x = self.sym(x)
        return x if x.dtype == dt else self.emit(f"{_ctor(dt)}({x.text})", dt)

    def binary(self, op: str, a: Sym, b: Sym) -> Sym:
        if a.dtype != b.dtype:
            raise TypeError(f"recipe operands of {op} differ: {a.dtype} and {b.dtype}")
        dt = a.dtype
        if op in _CMP:
            return self.emit(f"({a.text} {op} {b.text})", np.dtype(bool))
        if dt.kind in "iu":
            # computed 64 bits wide (no overflow for 32-bit operands), wrapped back. numba
            # widens two integers of one signedness to 64 bits of it by itself (shifts: the
            # left operand's), so only the CUDA text spells the widening out
            if self.target == "cpu":
                text = f"({a.text} {op} {b.text})"
                return self.emit(text if dt.itemsize == 8 else f"{_ctor(dt)}{text}", dt)
            wide = "np.uint64" if dt.kind == "u" else "np.int64"
            return self.emit(f"{_ctor(dt)}({wide}({a.text}) {op} {wide}({b.text}))", dt)
        if op == "*" and self.target == "cuda":
            fn = "libdevice.fmul_rn" if dt == np.float32 else "libdevice.dmul_rn"
            return self.emit(f"{fn}({a.text}, {b.text})", dt)
        return self.emit(f"({a.text} {op} {b.text})", dt)

    def where(self, c, a, b) -> Sym:
        a, b = self.sym(a), self.sym(b)
        return self.emit(f"({a.text} if {self.sym(c).text} else {b.text})", a.dtype)

    def fma(self, a, b, c) -> Sym:
        a, b, c = self.sym(a), self.sym(b), self.sym(c)
        if self.target == "cpu":
            fn = "_ftr_fma"
        else:
            fn = "libdevice.fmaf" if a.dtype == np.float32 else "libdevice.fma"
        return self.emit(f"{fn}({a.text}, {b.text}, {c.text})", a.dtype)

    def sqrt(self, x) -> Sym:
        x = self.sym(x)
        return self.emit(f"{'np' if self.target == 'cpu' else 'math'}.sqrt({x.text})", x.dtype)

    def abs(self, x) -> Sym:
        x = self.sym(x)
        return self.emit(f"abs({x.text})", x.dtype)

    def log(self, x) -> Sym:
        x = self.sym(x)
        if x.dtype != np.float64:
            raise TypeError("m.log is float64's libm log; write float32 logs as a recipe")
        fn = "math.log" if self.target == "cpu" else "libdevice.log"
        return self.emit(f"{fn}({x.text})", x.dtype)

    def bits(self, x) -> Sym:
        x = self.sym(x)
        it = np.dtype(f"int{8 * x.dtype.itemsize}")
        if self.target == "cpu":
            return self.emit(f"_ftr_f2i({x.text})", it)
        fn = "libdevice.float_as_int" if x.dtype == np.float32 else "libdevice.double_as_longlong"
        return self.emit(f"{fn}({x.text})", it)

    def from_bits(self, i) -> Sym:
        i = self.sym(i)
        ft = np.dtype(f"float{8 * i.dtype.itemsize}")
        if self.target == "cpu":
            return self.emit(f"_ftr_i2f({i.text})", ft)
        fn = "libdevice.int_as_float" if ft == np.float32 else "libdevice.longlong_as_double"
        return self.emit(f"{fn}({i.text})", ft)


def helper_name(name: str, dtypes) -> str:
    """The helper's name in a kernel module: the recipe's name and its operand dtypes."""
    return "ftr_" + name + "_" + "_".join(np.dtype(d).name for d in dtypes)


def helper_source(recipe: Callable, name: str, in_dtypes, float_dtype, target: str,
                  out_dtype=None) -> str:
    """The source of ``recipe`` as a standalone scalar function for ``target``'s kernel
    modules (decorated, with the module-level names it needs), named ``helper_name(name,
    in_dtypes)``. ``out_dtype``: cast the result (default: the recipe's)."""
    fn_name = helper_name(name, in_dtypes)
    m = TextMath(float_dtype, target, const_prefix=f"_{fn_name}_k" if target == "cpu" else None)
    args = [Sym(m, f"a{i}", d) for i, d in enumerate(in_dtypes)]
    out = m.sym(recipe(m, *args))
    if out_dtype is not None:
        out = m.cast(out, out_dtype)
    prelude, decorator = _PRELUDE[target]
    consts = "".join(f"{name} = {text}\n" for text, name in m.consts.items())
    body = "\n".join("    " + line for line in m.lines)
    sig = ", ".join(a.text for a in args)
    return (f"{prelude}{consts}\n\n{decorator}\ndef {fn_name}({sig}):\n"
            f"{body}\n    return {out.text}")
