"""The one OpCase table: every public function of ``functrace.numpy`` and every array protocol
of a tracer (operators, indexing, ``.at[]``, methods), with argument shapes, dtypes, domains
and the derivative order to check.

``tests/ops/test_op_table.py`` runs each row as: eager == numpy (exact value, dtype, shape, plain
numpy type), traced == eager (plus ``verify`` and a JSON round trip), and gradients
(``check_grads`` at ``order`` in float64 and float32, gradient dtype == primal dtype;
``order=0`` rows must have an exactly zero gradient: piecewise-constant functions).

Adding an op = one row here. A row's name is ``"<covered name>:<variant>"``; the covered name
is an ``fnp`` function (or ``op``/``getitem``/``at``/``method`` for the tracer protocols), and a
test checks that every public ``fnp`` function is covered by some row.

Domains: ``(low, high)`` for every argument, a tuple of per-argument specs (``(low, high)`` or
a sampler ``(rng, shape, dtype) -> array``), or a callable ``rng -> list of arrays`` (floating
arrays are then cast to the row's dtype). Domains keep finite differences valid: away from
kinks, poles and ties.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special

import functrace.numpy as fnp
from functrace.numpy._products import numpy_crosses_2d

SAME = "same"     # np_fn=SAME: ``fn`` itself is the numpy reference (operators, indexing)
F = ("float64", "float32")
F64 = ("float64",)


@dataclasses.dataclass(frozen=True)
class OpCase:
    """One row of the table.

    Attributes:
        name: ``"<covered name>:<variant>"`` (also the pytest id).
        fn: a function of arrays written with ``fnp`` (and operators).
        shapes: one shape per argument.
        dtypes: the dtype parameters: a dtype name (every argument) or a tuple of names (one
            per argument), e.g. ``("int8", "float32")``.
        domain: see the module docstring.
        order: derivative order checked in float64 (3 for smooth elementwise math); 0 means the
            gradient must be exactly zero (piecewise constant); None: no gradient test
            (integer/complex-only rows, functions whose output ignores the inputs' values).
        atol, rtol: check_grads tolerance overrides (float64); tol32: (atol, rtol) for float32.
        trace_rtol: traced-vs-eager tolerance override.
        np_fn: the numpy reference; None means ``np.<fn.__name__>`` (fn is an fnp function of
            the same name); ``SAME`` means fn itself.
        kwargs: keyword arguments given to fn and np_fn.
        exact: eager must equal numpy bit for bit (False: allclose, for a scipy reference).
        xfail: ``((test kind, reason), ...)`` with kinds eager/traced/json/grad/grad32.
    """

    name: str
    fn: Callable
    shapes: tuple
    dtypes: tuple = F
    domain: Any = (-2.0, 2.0)
    order: int | None = 2
    atol: float | None = None
    rtol: float | None = None
    tol32: tuple | None = None
    trace_rtol: float | None = None
    np_fn: Any = None
    kwargs: dict = dataclasses.field(default_factory=dict)
    exact: bool = True
    xfail: tuple = ()

    @property
    def covers(self) -> str:
        return self.name.split(":")[0]

    def reference(self) -> Callable:
        if self.np_fn is SAME:
            return self.fn
        if self.np_fn is not None:
            return self.np_fn
        name = getattr(self.fn, "__name__", "")
        if getattr(fnp, name, None) is self.fn and hasattr(np, name):
            return getattr(np, name)
        raise LookupError(f"case {self.name}: no numpy reference (give np_fn)")

    def arg_dtypes(self, dtype) -> tuple:
        return tuple(dtype) if isinstance(dtype, tuple) else (dtype,) * len(self.shapes)

    def make_args(self, dtype) -> list[np.ndarray]:
        """Deterministic arguments for this row at ``dtype`` (seeded by the row's name)."""
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        dts = self.arg_dtypes(dtype)
        if callable(self.domain):
            args = [np.asarray(a) for a in self.domain(rng)]
            return [a.astype(dt) if a.dtype.kind == "f" and np.dtype(dt).kind in "fc" else a
                    for a, dt in zip(args, dts + (None,) * (len(args) - len(dts)), strict=True)]
        specs = self.domain
        if len(specs) == 2 and all(isinstance(s, int | float) for s in specs):
            specs = (specs,) * len(self.shapes)
        return [_sample(rng, spec, shape, np.dtype(dt))
                for spec, shape, dt in zip(specs, self.shapes, dts, strict=True)]


def _sample(rng, spec, shape, dt: np.dtype) -> np.ndarray:
    if callable(spec):
        return np.asarray(spec(rng, shape, dt))
    lo, hi = spec
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = max(int(np.floor(lo)), np.iinfo(dt).min, 0 if dt.kind == "u" else -(2 ** 62))
        hi = min(int(np.ceil(hi)), np.iinfo(dt).max)
        return np.asarray(rng.integers(lo, hi + 1, shape)).astype(dt)
    x = rng.uniform(lo, hi, shape)
    if dt.kind == "c":
        x = x + 1j * rng.uniform(lo, hi, shape)
    return np.asarray(x).astype(dt)


# --------------------------------------------------------------------------------------------
# samplers
# --------------------------------------------------------------------------------------------

def away(gap, hi):
    """|x| in (gap, hi) with a random sign: away from a kink or pole at 0."""
    def s(rng, shape, dt):
        x = rng.uniform(gap, hi, shape) * rng.choice([-1.0, 1.0], shape)
        return np.asarray(x).astype(dt)
    return s


def positive(gap, hi):
    def s(rng, shape, dt):
        return np.asarray(rng.uniform(gap, hi, shape)).astype(dt)
    return s


def distinct(lo=-2.0, hi=2.0):
    """Values at least (hi-lo)/(2n) apart: no ties for sort/max/median, even under float32
    finite differences."""
    def s(rng, shape, dt):
        n = int(np.prod(shape, dtype=np.int64))
        grid = np.linspace(lo, hi, max(n, 1))[:n]
        x = rng.permutation(grid) + rng.uniform(-0.1, 0.1, n) * (hi - lo) / max(n, 1)
        return x.reshape(shape).astype(dt)
    return s


def off_integers(lo=-3, hi=3, fracs=(0.15, 0.35)):
    """k + f with f in ``fracs``: away from the jumps of floor/ceil/round."""
    def s(rng, shape, dt):
        k = rng.integers(lo, hi, shape)
        f = rng.uniform(*fracs, shape) * rng.choice([1.0, -1.0], shape)
        return np.asarray(k + 0.5 + f).astype(dt)
    return s


def with_specials(rng, shape, dt):
    x = rng.uniform(-2, 2, shape).astype(dt)
    flat = x.reshape(-1)
    flat[: 3] = np.array([np.nan, np.inf, -np.inf], dt)[: flat.size]
    return x


def mod_args(xshape, yshape):
    """x = y * (k + f): x / y stays 0.2 away from an integer (remainder, fmod are smooth)."""
    def d(rng):
        y = away(0.5, 2.0)(rng, yshape, np.float64)
        shape = np.broadcast_shapes(xshape, yshape)
        k = rng.integers(-2, 3, shape) + rng.uniform(0.2, 0.8, shape)
        x = np.broadcast_to(y, shape) * k
        return [np.ascontiguousarray(np.broadcast_to(x, shape)[tuple(
            slice(0, n) for n in xshape)] if xshape == shape else x), y]
    return d


def separated_pair(xshape, yshape, gap=0.2):
    """x and y with |x - y| > gap everywhere (maximum/minimum away from ties)."""
    def d(rng):
        shape = np.broadcast_shapes(xshape, yshape)
        y = rng.uniform(-2, 2, yshape)
        x = np.broadcast_to(y, shape) + away(gap, 1.0)(rng, shape, np.float64)
        if x.shape != tuple(xshape):
            raise ValueError("separated_pair needs xshape == broadcast shape")
        return [x, y]
    return d


def both(f, **kw):
    """Write a row once for both namespaces: ``f(m, *args)`` with m = fnp and m = np."""
    return dict(fn=lambda *a, **k: f(fnp, *a, **k), np_fn=lambda *a, **k: f(np, *a, **k), **kw)


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------

CASES: list[OpCase] = []


def case(name, fn=None, shapes=((2, 3),), **kw):
    CASES.append(OpCase(name, fn, tuple(shapes), **kw))


def B(name, f, shapes=((2, 3),), **kw):
    """A row written once for both namespaces (see ``both``)."""
    d = both(f)
    CASES.append(OpCase(name, d["fn"], tuple(shapes), np_fn=d["np_fn"], **kw))


# ---- unary elementwise math (smooth: third derivatives) ------------------------------------
_SMOOTH_UNARY = {
    "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2), "arcsin": (-0.9, 0.9),
    "arccos": (-0.9, 0.9), "arctan": (-3, 3), "sinh": (-2, 2), "cosh": (-2, 2),
    "tanh": (-2, 2), "arcsinh": (-3, 3), "arccosh": (1.2, 3), "arctanh": (-0.9, 0.9),
    "exp": (-2, 2), "exp2": (-2, 2), "expm1": (-2, 2), "log": (0.2, 3), "log2": (0.2, 3),
    "log10": (0.2, 3), "log1p": (-0.8, 3), "sqrt": (0.2, 3), "cbrt": (away(0.2, 3),),
    "square": (-2, 2), "reciprocal": (away(0.3, 3),), "absolute": (away(0.2, 2),),
    "abs": (away(0.2, 2),), "fabs": (away(0.2, 2),), "negative": (-2, 2), "positive": (-2, 2),
    "deg2rad": (-90, 90), "radians": (-90, 90), "rad2deg": (-2, 2), "degrees": (-2, 2),
    "sinc": (-2, 2),
}
for _n, _dom in _SMOOTH_UNARY.items():
    _f = getattr(fnp, _n)
    case(f"{_n}:2x3", _f, ((2, 3),), domain=_dom, order=3)
    case(f"{_n}:0d", _f, ((),), domain=_dom, dtypes=F64, order=2)
    case(f"{_n}:empty", _f, ((0, 2),), domain=_dom, dtypes=F64, order=1)
case("sin:empty_f32", fnp.sin, ((0, 3),), dtypes=("float32",))
case("exp:3d", fnp.exp, ((2, 1, 3),), dtypes=F64, order=3)
case("sqrt:f16", fnp.sqrt, ((4,),), dtypes=("float16",), domain=(0.5, 2), order=None)

# numpy's dtype rules for integer / bool inputs
for _n, _dt, _dom in [("sin", "int32", (-3, 3)), ("sqrt", "int8", (0, 9)),
                      ("exp", "uint8", (0, 4)), ("log", "int64", (1, 9)),
                      ("arctan", "bool", (0, 1)), ("absolute", "int32", (-5, 5)),
                      ("negative", "int8", (-5, 5)), ("square", "int16", (-9, 9)),
                      ("reciprocal", "int32", (1, 3)), ("sign", "int64", (-3, 3)),
                      ("floor", "int32", (-5, 5)), ("ceil", "uint8", (0, 9)),
                      ("trunc", "int16", (-5, 5)), ("rint", "int64", (-5, 5)),
                      ("isnan", "int32", (-5, 5)), ("isfinite", "bool", (0, 1)),
                      ("logical_not", "int8", (-1, 1)), ("positive", "uint16", (0, 9)),
                      ("cbrt", "int32", (-8, 8)), ("deg2rad", "int32", (-90, 90))]:
    case(f"{_n}:{_dt}", getattr(fnp, _n), ((2, 3),), dtypes=(_dt,), domain=_dom, order=None)

# piecewise constant: zero gradient (documented in docs/numerics.md)
for _n in ("floor", "ceil", "trunc", "fix", "rint", "round", "around"):
    case(f"{_n}:2x3", getattr(fnp, _n), ((2, 3),), domain=(off_integers(),), order=0)
case("round:decimals", fnp.round, ((5,),), domain=(off_integers(),), order=0,
     kwargs={"decimals": 1}, dtypes=F64)
case("round:int", fnp.round, ((5,),), dtypes=("int32",), domain=(-9, 9), order=None)
case("round:int_neg_decimals", fnp.round, ((6,),), dtypes=("int32", "int64"), order=None,
     kwargs={"decimals": -1}, domain=lambda rng: [np.array([15, 25, -15, -25, 1234, 5])])
case("round:neg_decimals", fnp.round, ((6,),), dtypes=F64, order=0, kwargs={"decimals": -1},
     domain=lambda rng: [np.array([15.0, 25.0, -15.0, -25.0, 1234.5, 5.0])])
case("round:bool", fnp.round, ((5,),), dtypes=("bool",), order=None)
case("sinc:int", fnp.sinc, ((5,),), dtypes=("int8", "int16", "bool"), order=None)
case("sign:2x3", fnp.sign, ((2, 3),), domain=(away(0.1, 2),), order=0)
case("signbit:2x3", fnp.signbit, ((2, 3),), domain=(away(0.1, 2),), order=0)
for _n in ("isnan", "isinf", "isfinite"):
    case(f"{_n}:specials", getattr(fnp, _n), ((2, 3),), domain=(with_specials,), order=0)
case("logical_not:float", fnp.logical_not, ((5,),), domain=(-1, 1), order=0)
case("logical_not:bool", fnp.logical_not, ((5,),), dtypes=("bool",), order=None)
case("nan_to_num:specials", fnp.nan_to_num, ((2, 3),), domain=(with_specials,), order=None)
case("nan_to_num:kw", fnp.nan_to_num, ((2, 3),), domain=(with_specials,),
     kwargs={"nan": 1.5, "posinf": 9.0, "neginf": -9.0})
case("nan_to_num:complex", fnp.nan_to_num, ((3,),), dtypes=("complex128",), order=None,
     domain=lambda rng: [np.array([np.nan + 1j, complex(np.inf, np.nan), 2 - np.inf * 1j])])
case("nan_to_num:int", fnp.nan_to_num, ((4,),), dtypes=("int32",), order=None)

# complex values: values and dtypes only
for _n in ("real", "imag", "conj", "conjugate", "abs", "angle", "exp", "sqrt"):
    case(f"{_n}:complex", getattr(fnp, _n), ((2, 3),), dtypes=("complex128", "complex64"),
         order=None)
for _n in ("real", "imag", "conj", "conjugate"):
    case(f"{_n}:2x3", getattr(fnp, _n), ((2, 3),), order=3)
case("angle:real", fnp.angle, ((2, 3),), domain=(away(0.2, 2),), order=0)
case("angle:deg", fnp.angle, ((4,),), dtypes=("complex128",), order=None,
     kwargs={"deg": True})

# ---- binary elementwise ----------------------------------------------------------------------
_PAIRS = {"same": ((2, 3), (2, 3)), "bcast": ((3,), (2, 1)), "0d": ((), (2, 3)),
          "empty": ((0, 3), (1, 3))}
_SMOOTH_BINARY = {
    "add": ((-2, 2), 3), "subtract": ((-2, 2), 3), "multiply": ((-2, 2), 3),
    "divide": (((-2, 2), away(0.5, 2)), 3), "true_divide": (((-2, 2), away(0.5, 2)), 3),
    "power": (((0.5, 2), (-2, 2)), 3), "float_power": (((0.5, 2), (-2, 2)), 2),
    "arctan2": (((-2, 2), away(0.3, 2)), 3), "hypot": ((away(0.3, 2), away(0.3, 2)), 3),
    "logaddexp": ((-2, 2), 3), "logaddexp2": ((-2, 2), 3),
    "copysign": ((away(0.2, 2), away(0.2, 2)), 2),
    "heaviside": ((away(0.2, 2), (-2, 2)), 2),
}
for _n, (_dom, _order) in _SMOOTH_BINARY.items():
    for _v, _sh in _PAIRS.items():
        case(f"{_n}:{_v}", getattr(fnp, _n), _sh, domain=_dom,
             order=_order if _v == "same" else 2, dtypes=F if _v in ("same", "bcast") else F64)
case("add:empty_bcast", fnp.add, ((0, 3), (3,)))
case("multiply:bcast3", fnp.multiply, ((2, 1, 3), (4, 1)), dtypes=F64)
case("add:0d0d", fnp.add, ((), ()))

for _n in ("remainder", "mod", "fmod"):
    case(f"{_n}:same", getattr(fnp, _n), ((2, 3), (2, 3)), domain=mod_args((2, 3), (2, 3)))
    case(f"{_n}:bcast", getattr(fnp, _n), ((2, 3), (3,)), domain=mod_args((2, 3), (3,)),
         dtypes=F64)
    case(f"{_n}:int", getattr(fnp, _n), ((2, 3), (2, 3)), dtypes=("int32",),
         domain=((-9, 9), (1, 4)), order=None)
case("floor_divide:same", fnp.floor_divide, ((2, 3), (2, 3)), domain=mod_args((2, 3), (2, 3)),
     order=0)
case("floor_divide:int", fnp.floor_divide, ((2, 3), (3,)), dtypes=("int64",),
     domain=((-9, 9), (1, 4)), order=None)
for _n in ("maximum", "minimum", "fmax", "fmin"):
    case(f"{_n}:same", getattr(fnp, _n), ((2, 3), (2, 3)),
         domain=separated_pair((2, 3), (2, 3)))
    case(f"{_n}:bcast", getattr(fnp, _n), ((2, 3), (3,)), domain=separated_pair((2, 3), (3,)),
         dtypes=F64)
    case(f"{_n}:int", getattr(fnp, _n), ((2, 3), (3,)), dtypes=("int16",), order=None)
case("fmax:nan", fnp.fmax, ((4,), (4,)), dtypes=F64, order=None,
     domain=lambda rng: [np.array([1.0, np.nan, 2.0, np.nan]), np.array([np.nan, 3.0, 1.0,
                                                                       np.nan])])
case("fmin:nan", fnp.fmin, ((4,), (4,)), dtypes=F64, order=None,
     domain=lambda rng: [np.array([1.0, np.nan, 2.0, np.nan]), np.array([np.nan, 3.0, 1.0,
                                                                       np.nan])])
B("maximum:tie", lambda m, x: m.maximum(x, x), ((4,),), order=2)   # split 0.5/0.5: sum is 1
B("minimum:tie", lambda m, x: m.minimum(x, 2 * x - x), ((4,),), dtypes=F64, order=1)


def _mostly_equal(shape):
    def d(rng):
        x = rng.integers(-2, 3, shape).astype(float)
        y = np.where(rng.random(shape) < 0.5, x, x + rng.choice([-1.0, 1.0], shape))
        return [x, y]
    return d


for _n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    case(f"{_n}:same", getattr(fnp, _n), ((2, 3), (2, 3)), domain=_mostly_equal((2, 3)),
         order=0)
    case(f"{_n}:bcast", getattr(fnp, _n), ((2, 3), (3,)), order=0, dtypes=F64)
    case(f"{_n}:int-float", getattr(fnp, _n), ((2, 3), (3,)), dtypes=(("int32", "float32"),),
         domain=(-3, 3), order=0)
for _n in ("less", "equal"):   # numpy 2 compares int64 with uint64 exactly (no float64 step)
    case(f"{_n}:int64-uint64", getattr(fnp, _n), ((2, 3), (3,)),
         dtypes=(("int64", "uint64"), ("uint64", "int8")), domain=(0, 3), order=None)
for _n in ("logical_and", "logical_or", "logical_xor"):
    case(f"{_n}:bool", getattr(fnp, _n), ((2, 3), (2, 3)), dtypes=("bool",), order=None)
    case(f"{_n}:float", getattr(fnp, _n), ((2, 3), (3,)), domain=(-1, 1), order=0,
         dtypes=F64)

# bit operations: integers bitwise, bools logical (as numpy); the operators &, |, ^, ~, <<, >>
# of traced integers are these, never the logical ops
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    case(f"{_n}:int", getattr(fnp, _n), ((2, 3), (3,)), order=None, domain=(-40, 40),
         dtypes=("int64", "int32", "uint8", ("int8", "uint16"), ("uint64", "uint8")))
    case(f"{_n}:bool", getattr(fnp, _n), ((2, 3), (2, 3)), dtypes=("bool",), order=None)
for _n in ("invert", "bitwise_not", "bitwise_invert"):
    case(f"{_n}:int", getattr(fnp, _n), ((2, 3),), order=None, domain=(-40, 40),
         dtypes=("int64", "int16", "uint8", "uint32", "bool"))
# shift counts past the bit width give numpy's 0 (or -1)
for _n in ("left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift"):
    case(f"{_n}:int", getattr(fnp, _n), ((2, 3), (3,)), order=None, dtypes=(
        "int64", "int32", "uint8", ("int16", "uint8")),
        domain=((0, 100), lambda rng, shape, dt: np.array([0, 3, 70], dt)))
B("op:bit_operators", lambda m, x, y: (x & y) + (x | 3) - (y ^ x) + (~x) + (x << 2) + (y >> 1)
  + (5 & y), ((2, 3), (3,)), dtypes=("int64", "int32"), order=None, domain=(0, 30))
B("op:bool_bit_operators", lambda m, x, y: (x & y) | (~x ^ y), ((2, 3), (3,)), dtypes=("bool",),
  order=None)

# numpy promotion of mixed dtypes (NEP 50)
for _n, _dts in [("add", ("int8", "float32")), ("add", ("int32", "float32")),
                 ("add", ("uint8", "int8")), ("add", ("bool", "bool")),
                 ("multiply", ("bool", "float32")), ("subtract", ("int64", "float16")),
                 ("divide", ("int32", "int32")), ("power", ("int32", "float32")),
                 ("maximum", ("uint8", "float64")), ("arctan2", ("int16", "int16")),
                 ("hypot", ("float32", "float64")), ("less", ("uint8", "int8"))]:
    _dom = (1, 4) if _n in ("divide", "arctan2", "power") else (-2, 2)
    _grad = any(np.dtype(d).kind == "f" for d in _dts) and _n not in ("less",)
    case(f"{_n}:{_dts[0]}-{_dts[1]}", getattr(fnp, _n), ((2, 3), (3,)), dtypes=(_dts,),
         domain=_dom, order=1 if _grad else None, tol32=(0.05, 0.05))

# Python scalars are weak (NEP 50): x_f32 + 1.0 stays float32; numpy scalars are not weak
B("op:add_float_scalar", lambda m, x: x + 1.0, ((2, 3),), order=3)
B("op:radd_int_scalar", lambda m, x: 2 + x, ((2, 3),))
B("op:mul_int_scalar_int8", lambda m, x: x * 3, ((4,),), dtypes=("int8", "uint8"),
  domain=(0, 9), order=None)
B("op:int_plus_float_scalar", lambda m, x: x + 1.5, ((4,),), dtypes=("int32",),
  domain=(-5, 5), order=None)
B("op:f32_plus_np_float64", lambda m, x: x + np.float64(1.0), ((4,),), dtypes=("float32",))
B("op:f16_times_float", lambda m, x: x * 0.5, ((4,),), dtypes=("float16",), order=None)
B("op:rsub_rdiv_rpow", lambda m, x: (1.0 - x) + 3.0 / x + 2.0 ** x, ((2, 3),),
  domain=(away(0.5, 2),), order=3)
B("op:pow_int_scalar", lambda m, x: x ** 3 + x ** 2 + x ** -1 + x ** 0, ((2, 3),),
  domain=(away(0.5, 2),), order=3)
B("op:pow_half_scalar", lambda m, x: x ** 0.5 + x ** 2.0, ((2, 3),), domain=(0.3, 2), order=3)
B("power:int_exponent", lambda m, x: m.power(x, 2) + m.power(x, -2), ((2, 3),),
  domain=(away(0.5, 2),), order=3)
B("power:int_base", lambda m, x: m.power(x, 2), ((2, 3),), dtypes=("int32",), domain=(-5, 5),
  order=None)
B("add:weak_scalar_call", lambda m, x: m.add(x, 1.0) * m.multiply(2, x), ((2, 3),), order=3)
B("op:truediv_floordiv_mod", lambda m, x, y: x / y + x // y + x % y, ((2, 3), (2, 3)),
  domain=mod_args((2, 3), (2, 3)))
B("op:matmul", lambda m, x, y: x @ y, ((2, 3), (3, 4)), order=3)
B("op:rmatmul_array", lambda m, x: np.ones((2, 2)) @ x, ((2, 3),), dtypes=F64)
B("op:neg_pos_abs", lambda m, x: -x + (+x) + abs(x), ((2, 3),), domain=(away(0.2, 2),),
  order=3)
B("op:comparisons", lambda m, x, y: (x < y) + (x <= y) * 2 + (x > y) * 4 + (x >= y) * 8
  + (x == y) * 16 + (x != y) * 32, ((2, 3), (2, 3)), domain=_mostly_equal((2, 3)), order=0)
B("op:and_or_xor_invert", lambda m, x, y: (x & y) | (~x ^ y), ((2, 3), (2, 3)),
  dtypes=("bool",), order=None)
B("op:ndarray_lhs", lambda m, x: (np.ones(x.shape) < x) * (np.ones(x.shape) - x)
  + np.arange(3.0) * x, ((2, 3),), dtypes=F64)
B("op:numpy_scalar_lhs", lambda m, x: np.float64(2) * x + np.float32(1) - np.int64(3) * x,
  ((2, 3),))
# numpy's own functions on tracers dispatch to fnp (never a silent constant)
case("op:numpy_ufuncs_on_tracer", lambda x, y: np.sin(x) * np.add(x, y) + np.maximum(x, 0.5)
     + np.matmul(x, y.T).sum(), ((2, 3), (2, 3)), np_fn=SAME, order=3,
     domain=separated_pair((2, 3), (2, 3)))
case("op:numpy_functions_on_tracer", lambda x, y: np.concatenate([np.sum(x, axis=0),
                                                                  np.ravel(np.where(x > 0, x, y)),
                                                                  np.linalg.norm(y, axis=1)]),
     ((2, 3), (2, 3)), np_fn=SAME, domain=(away(0.2, 2), away(0.2, 2)))
B("op:bcast_sub", lambda m, x, y: x - y, ((2, 1, 3), (4, 1)), dtypes=F64)

# ---- where, clip and friends ---------------------------------------------------------------
B("where:3arg", lambda m, x, y: m.where(x > 0, x, y), ((2, 3), (2, 3)),
  domain=(away(0.2, 2), (-2, 2)))
B("where:bcast_scalar", lambda m, x: m.where(x > 0, x, 0.0), ((2, 3),),
  domain=(away(0.2, 2),))
B("where:bcast_cond", lambda m, x, y: m.where(np.array([True, False, True]), x, y),
  ((2, 3), (3,)), dtypes=F64)
B("where:mixed_dtype", lambda m, x, y: m.where(x > 0, x, y), ((4,), (4,)),
  dtypes=(("float32", "int8"),), domain=(away(0.5, 2), (-3, 3)), order=1)
B("where:1arg", lambda m, x: x[m.where(x > 0)], ((2, 3),), domain=(away(0.2, 2),))
case("clip:scalars", fnp.clip, ((2, 3),), domain=(away(0.1, 2),),
     kwargs={"a_min": -1.0, "a_max": 1.5}, np_fn=lambda a, a_min, a_max: np.clip(a, a_min,
                                                                                  a_max))
B("clip:positional", lambda m, x: m.clip(x, -1.0, 1.5), ((2, 3),), domain=(away(0.1, 2),))
B("clip:none_lo", lambda m, x: m.clip(x, None, 0.5), ((2, 3),), dtypes=F64)
B("clip:none_hi", lambda m, x: m.clip(x, -0.5, None), ((2, 3),), dtypes=F64)
B("clip:array_bounds", lambda m, x, lo, hi: m.clip(x, lo, hi), ((2, 3), (3,), (2, 1)),
  domain=((-2, 2), (-1.5, -0.5), (0.5, 1.5)))
B("clip:int", lambda m, x: m.clip(x, -2, 3), ((2, 3),), dtypes=("int32",), domain=(-5, 5),
  order=None)
B("method:clip", lambda m, x: x.clip(-1.0, 1.0), ((2, 3),), dtypes=F64)
case("isclose:2x3", fnp.isclose, ((2, 3), (2, 3)), domain=_mostly_equal((2, 3)), order=0)
case("isclose:int8", fnp.isclose, ((5,), (5,)), dtypes=("int8",), domain=(-3, 3), order=None)
case("isclose:kw", fnp.isclose, ((4,), (4,)), dtypes=F64, order=None,
     domain=lambda rng: [np.array([1.0, np.nan, 1e-9, 2.0]), np.array([1.0 + 1e-7, np.nan, 0,
                                                                        2.1])],
     kwargs={"rtol": 1e-6, "atol": 1e-10, "equal_nan": True})

# ---- reductions ---------------------------------------------------------------------------
_R3 = ((2, 3, 4),)
for _n in ("sum", "mean", "prod"):
    _f = getattr(fnp, _n)
    _dom = (0.5, 1.5) if _n == "prod" else (-2, 2)
    case(f"{_n}:all", _f, _R3, domain=_dom)
    case(f"{_n}:axis0", _f, _R3, domain=_dom, kwargs={"axis": 0})
    case(f"{_n}:axis-1_keepdims", _f, _R3, domain=_dom, kwargs={"axis": -1, "keepdims": True})
    case(f"{_n}:axes02", _f, _R3, domain=_dom, kwargs={"axis": (0, 2)}, dtypes=F64)
    case(f"{_n}:0d", _f, ((),), domain=_dom, dtypes=F64)
    case(f"{_n}:dtype_f32", _f, ((3, 4),), domain=_dom, dtypes=F64, kwargs={"dtype": "float32"})
    case(f"{_n}:int", _f, ((3, 4),), dtypes=("int8", "int32", "uint8"), domain=(0, 3),
         order=None)
    case(f"{_n}:bool", _f, ((3, 4),), dtypes=("bool",), order=None, kwargs={"axis": 1})
case("sum:empty", fnp.sum, ((0, 3),), kwargs={"axis": 0})
case("prod:empty", fnp.prod, ((0, 3),), kwargs={"axis": 0})
case("sum:where_initial", fnp.sum, ((2, 3),), dtypes=F64,
     kwargs={"where": np.array([True, False, True]), "initial": 1.5})
case("mean:where", fnp.mean, ((2, 3),), dtypes=F64,
     kwargs={"where": np.array([[True, False, True], [True, True, False]]), "axis": 1})
case("prod:with_zero", fnp.prod, ((2, 3),), dtypes=F64, kwargs={"axis": 1},
     domain=lambda rng: [np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.5]])])
case("prod:initial_where", fnp.prod, ((2, 3),), dtypes=F64, domain=(0.5, 1.5),
     kwargs={"initial": 2.0, "where": np.array([True, True, False])})
case("mean:float_to_int_dtype", fnp.mean, ((3, 4),), dtypes=F64, domain=(0, 9), order=0,
     kwargs={"dtype": "int64", "axis": 1})
case("mean:int_dtype_f32", fnp.mean, ((3, 4),), dtypes=("int32",), domain=(0, 9), order=None,
     kwargs={"dtype": "float32"})
for _n in ("max", "min", "amax", "amin"):
    _f = getattr(fnp, _n)
    case(f"{_n}:all", _f, _R3, domain=(distinct(),))
    case(f"{_n}:axis1", _f, _R3, domain=(distinct(),), kwargs={"axis": 1})
    case(f"{_n}:axes_keepdims", _f, _R3, domain=(distinct(),), dtypes=F64,
         kwargs={"axis": (0, 2), "keepdims": True})
    case(f"{_n}:int", _f, ((3, 4),), dtypes=("int16",), order=None, kwargs={"axis": 0})
case("max:ties", fnp.max, ((2, 3),), dtypes=F64, kwargs={"axis": 1}, order=None,
     domain=lambda rng: [np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])])
case("max:initial_where", fnp.max, ((2, 3),), domain=(distinct(),), dtypes=F64,
     kwargs={"axis": 1, "initial": -5.0, "where": np.array([True, False, True])})
case("min:initial", fnp.min, ((2, 3),), domain=(distinct(),), dtypes=F64,
     kwargs={"initial": 0.0})
case("min:empty_initial", fnp.min, ((0, 3),), dtypes=F64, kwargs={"axis": 0, "initial": 1.0})
for _n in ("var", "std"):
    _f = getattr(fnp, _n)
    case(f"{_n}:all", _f, _R3)
    case(f"{_n}:axis1_ddof1", _f, _R3, kwargs={"axis": 1, "ddof": 1})
    case(f"{_n}:axes_keepdims", _f, _R3, dtypes=F64, kwargs={"axis": (0, 2), "keepdims": True})
    case(f"{_n}:int", _f, ((3, 4),), dtypes=("int32",), domain=(0, 9), order=None)
    case(f"{_n}:dtype_f32", _f, ((3, 4),), dtypes=F64, kwargs={"dtype": "float32", "axis": 0})
    case(f"{_n}:complex", _f, ((3, 4),), dtypes=("complex128",), order=None)
    case(f"{_n}:correction", _f, ((5,),), dtypes=F64, kwargs={"correction": 1})
case("var:constant", fnp.var, ((4,),), dtypes=F64, domain=lambda rng: [np.full(4, 1.5)])
case("std:constant", fnp.std, ((4,),), dtypes=F64, domain=lambda rng: [np.full(4, 1.5)],
     order=1)
for _n in ("argmax", "argmin"):
    _f = getattr(fnp, _n)
    case(f"{_n}:all", _f, _R3, domain=(distinct(),), order=0)
    case(f"{_n}:axis1", _f, _R3, domain=(distinct(),), order=0, kwargs={"axis": 1})
    case(f"{_n}:axis-1_keepdims", _f, _R3, domain=(distinct(),), order=0, dtypes=F64,
         kwargs={"axis": -1, "keepdims": True})
    case(f"{_n}:int", _f, ((3, 4),), dtypes=("int32",), order=None, kwargs={"axis": 0})
B("argmax:gather", lambda m, x: x[m.argmax(x)] * x[m.argmin(x)], ((5,),),
  domain=(distinct(),))
for _n in ("cumsum", "cumprod"):
    _f = getattr(fnp, _n)
    _dom = (0.5, 1.5) if _n == "cumprod" else (-2, 2)
    case(f"{_n}:flat", _f, ((2, 3),), domain=_dom)
    case(f"{_n}:axis0", _f, ((3, 4),), domain=_dom, kwargs={"axis": 0})
    case(f"{_n}:axis-1", _f, ((2, 3, 4),), domain=_dom, kwargs={"axis": -1}, dtypes=F64)
    case(f"{_n}:int", _f, ((3, 4),), dtypes=("int8", "bool"), domain=(0, 2), order=None,
         kwargs={"axis": 1})
    case(f"{_n}:dtype", _f, ((3, 4),), dtypes=F64, domain=_dom,
         kwargs={"axis": 0, "dtype": "float32"})
    case(f"{_n}:empty", _f, ((0, 3),), dtypes=F64, kwargs={"axis": 0})
B("method:cumsum_cumprod", lambda m, x: x.cumsum(axis=1) + x.cumprod(0), ((2, 3),),
  domain=(0.5, 1.5), dtypes=F64)
for _n in ("all", "any"):
    _f = getattr(fnp, _n)
    case(f"{_n}:bool", _f, ((3, 4),), dtypes=("bool",), order=None)
    case(f"{_n}:axis_keepdims", _f, ((3, 4),), dtypes=("bool",), order=None,
         kwargs={"axis": 0, "keepdims": True})
    case(f"{_n}:float", _f, ((3, 4),), dtypes=F64, domain=(-1, 1), order=0,
         kwargs={"axis": 1}, )
    case(f"{_n}:where", _f, ((2, 3),), dtypes=("bool",), order=None,
         kwargs={"where": np.array([True, False, True])})
case("average:plain", fnp.average, ((2, 3),), kwargs={"axis": 1})
case("average:weights", fnp.average, ((2, 3),), dtypes=F64,
     kwargs={"weights": np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 1.0]])})
case("average:weights1d_returned", fnp.average, ((2, 3),), dtypes=F64,
     kwargs={"axis": 1, "weights": np.array([1.0, 2.0, 0.5]), "returned": True})
B("average:traced_weights", lambda m, x, w: m.average(x, axis=0, weights=w), ((3, 2), (3,)),
  domain=((-2, 2), (0.5, 2)), dtypes=F64)
case("average:returned", fnp.average, ((2, 3),), dtypes=F64,
     kwargs={"axis": 1, "returned": True})
case("average:int", fnp.average, ((2, 3),), dtypes=("int32",), domain=(0, 9), order=None)
case("ptp:all", fnp.ptp, ((3, 4),), domain=(distinct(),))
case("ptp:axis_keepdims", fnp.ptp, ((3, 4),), domain=(distinct(),), dtypes=F64,
     kwargs={"axis": 0, "keepdims": True})
case("count_nonzero:all", fnp.count_nonzero, ((3, 4),), dtypes=F64, order=0,
     domain=lambda rng: [rng.integers(-1, 2, (3, 4)).astype(float)])
case("count_nonzero:axis", fnp.count_nonzero, ((3, 4),), dtypes=("int32", "bool"),
     domain=(-1, 1), order=None, kwargs={"axis": 1})


def _with_nans(shape):
    def d(rng):
        x = distinct()(rng, shape, np.float64)
        x.reshape(-1)[[1, 5]] = np.nan
        return [x]
    return d


for _n in ("nansum", "nanmean", "nanmax", "nanmin"):
    case(f"{_n}:all", getattr(fnp, _n), ((2, 3),), domain=_with_nans((2, 3)))
    case(f"{_n}:axis0", getattr(fnp, _n), ((2, 3),), domain=_with_nans((2, 3)), dtypes=F64,
         kwargs={"axis": 0})
    case(f"{_n}:int", getattr(fnp, _n), ((2, 3),), dtypes=("int32",), order=None)
    case(f"{_n}:all_nan_slice", getattr(fnp, _n), ((2, 2),), dtypes=F64, order=None,
         kwargs={"axis": 0}, domain=lambda rng: [np.array([[np.nan, 1.0], [np.nan, 2.0]])])
for _n in ("nansum", "nanmean"):
    case(f"{_n}:dtype", getattr(fnp, _n), ((2, 3),), domain=_with_nans((2, 3)), dtypes=F64,
         kwargs={"axis": 1, "dtype": "float32"})
    case(f"{_n}:int_dtype", getattr(fnp, _n), ((2, 3),), dtypes=("int8",), order=None,
         kwargs={"dtype": "float32"})
case("median:odd", fnp.median, ((5,),), domain=(distinct(),))
case("median:even_axis", fnp.median, ((3, 4),), domain=(distinct(),), kwargs={"axis": 1})
case("median:keepdims", fnp.median, ((3, 4),), domain=(distinct(),), dtypes=F64,
     kwargs={"axis": 0, "keepdims": True})
case("median:int", fnp.median, ((5,),), dtypes=("int32",), order=None)


def _lse_ref(a, axis=None, b=None, keepdims=False):
    return scipy.special.logsumexp(a, axis=axis, b=b, keepdims=keepdims)


case("logsumexp:all", fnp.logsumexp, ((2, 3),), np_fn=_lse_ref, exact=False, order=3)
case("logsumexp:axis_keepdims", fnp.logsumexp, ((2, 3, 4),), np_fn=_lse_ref, exact=False,
     kwargs={"axis": (0, 2), "keepdims": True})
case("logsumexp:b", fnp.logsumexp, ((2, 3),), np_fn=_lse_ref, exact=False, dtypes=F64,
     kwargs={"axis": 1, "b": np.array([0.5, 1.0, 2.0])})
case("logsumexp:large", fnp.logsumexp, ((3,),), np_fn=_lse_ref, exact=False, dtypes=F64,
     domain=lambda rng: [np.array([1000.0, 1001.0, 999.0])])
case("logsumexp:all_neg_inf", fnp.logsumexp, ((3,),), np_fn=_lse_ref, exact=False,
     dtypes=F64, domain=lambda rng: [np.full(3, -np.inf)], order=0)
case("logsumexp:int", fnp.logsumexp, ((3,),), np_fn=_lse_ref, exact=False,
     dtypes=("int32",), order=None)
B("method:reductions", lambda m, x: x.sum() + x.mean(axis=0) + x.prod(axis=1, keepdims=True)
  + x.max(0) - x.min(axis=1, keepdims=True) + x.var() + x.std(0), ((2, 3),),
  domain=(distinct(0.5, 1.5),), dtypes=F64)
B("method:argmax_all_any", lambda m, x: x.argmax() + x.argmin(axis=0) + (x > 0).all(0)
  + (x > 0).any(), ((2, 3),), domain=(distinct(),), order=0, dtypes=F64)

# ---- shape functions ----------------------------------------------------------------------
case("reshape:minus1", fnp.reshape, ((2, 3, 4),), kwargs={"shape": (4, -1)})
case("reshape:0d_to_1", fnp.reshape, ((),), kwargs={"shape": (1, 1)}, dtypes=F64)
case("reshape:empty", fnp.reshape, ((0, 3),), kwargs={"shape": (3, 0)}, dtypes=F64)
case("reshape:int", fnp.reshape, ((6,),), kwargs={"shape": (2, 3)}, dtypes=("int32",),
     order=None)
B("method:reshape", lambda m, x: x.reshape(3, 2) + x.reshape((3, 2)) + x.reshape(-1, 2),
  ((2, 3),), dtypes=F64)
case("ravel:3d", fnp.ravel, ((2, 3, 4),))
B("method:ravel_flatten", lambda m, x: x.ravel() * x.flatten(), ((2, 3),), dtypes=F64)
case("transpose:default", fnp.transpose, ((2, 3, 4),))
case("transpose:axes", fnp.transpose, ((2, 3, 4),), kwargs={"axes": (1, -1, 0)})
B("method:T_mT_transpose", lambda m, x: (x.T, x.mT, x.transpose(2, 0, 1), x.transpose((1, 0, 2))),
  ((2, 3, 4),), dtypes=F64)
case("moveaxis:single", fnp.moveaxis, ((2, 3, 4),), kwargs={"source": 0, "destination": -1})
case("moveaxis:multi", fnp.moveaxis, ((2, 3, 4, 5),), dtypes=F64,
     kwargs={"source": (0, 1), "destination": (-1, 0)})
case("swapaxes:3d", fnp.swapaxes, ((2, 3, 4),), kwargs={"axis1": 0, "axis2": -1})
B("method:swapaxes", lambda m, x: x.swapaxes(0, 1), ((2, 3),), dtypes=F64)
case("expand_dims:0", fnp.expand_dims, ((2, 3),), kwargs={"axis": 0})
case("expand_dims:tuple", fnp.expand_dims, ((2, 3),), kwargs={"axis": (0, -1)}, dtypes=F64)
case("expand_dims:0d", fnp.expand_dims, ((),), kwargs={"axis": 0}, dtypes=F64)
case("squeeze:all", fnp.squeeze, ((1, 3, 1),))
case("squeeze:axis", fnp.squeeze, ((1, 3, 1),), kwargs={"axis": -1}, dtypes=F64)
B("method:squeeze", lambda m, x: x.squeeze(0), ((1, 3),), dtypes=F64)
case("broadcast_to:2d", fnp.broadcast_to, ((3,),), kwargs={"shape": (2, 3)})
case("broadcast_to:from0d", fnp.broadcast_to, ((),), kwargs={"shape": (2, 2)}, dtypes=F64)
case("broadcast_to:ones", fnp.broadcast_to, ((2, 1),), kwargs={"shape": (4, 2, 3)},
     dtypes=F64)
case("broadcast_arrays:pair", fnp.broadcast_arrays, ((3,), (2, 1)))
case("broadcast_arrays:three", fnp.broadcast_arrays, ((), (1, 3), (2, 1)), dtypes=F64)
B("concatenate:axis0", lambda m, x, y: m.concatenate([x, y]), ((2, 3), (1, 3)))
B("concatenate:axis-1", lambda m, x, y: m.concatenate((x, y, x), axis=-1), ((2, 3), (2, 1)),
  dtypes=F64)
B("concatenate:axis_none", lambda m, x, y: m.concatenate([x, y], axis=None), ((2, 3), (4,)),
  dtypes=F64)
B("concatenate:mixed_dtype", lambda m, x, y: m.concatenate([x, y]), ((3,), (2,)),
  dtypes=(("float32", "int32"), ("int8", "float32")), order=1, tol32=(0.05, 0.05))
B("concatenate:with_const", lambda m, x: m.concatenate([x, np.zeros(2, np.float32)]), ((3,),))
B("concatenate:dtype_kw", lambda m, x, y: m.concatenate([x, y], dtype="float32"),
  ((3,), (2,)), dtypes=F64)
B("concatenate:empty_part", lambda m, x, y: m.concatenate([x, y]), ((0, 3), (2, 3)),
  dtypes=F64)
B("stack:axis0", lambda m, x, y: m.stack([x, y]), ((2, 3), (2, 3)))
B("stack:axis-1", lambda m, x, y: m.stack((x, y, x), axis=-1), ((2, 3), (2, 3)), dtypes=F64)
B("stack:0d", lambda m, x, y: m.stack([x, y]), ((), ()), dtypes=F64)
B("stack:python_list_mix", lambda m, x: m.stack([x, 2 * x, np.ones(3)], axis=1), ((3,),),
  dtypes=F64)
B("hstack:1d", lambda m, x, y: m.hstack([x, y]), ((2,), (3,)))
B("hstack:2d", lambda m, x, y: m.hstack([x, y]), ((2, 3), (2, 1)), dtypes=F64)
B("hstack:0d", lambda m, x, y: m.hstack([x, y]), ((), ()), dtypes=F64)
B("vstack:1d", lambda m, x, y: m.vstack([x, y]), ((3,), (3,)))
B("vstack:2d", lambda m, x, y: m.vstack((x, y)), ((2, 3), (1, 3)), dtypes=F64)
B("dstack:1d", lambda m, x, y: m.dstack([x, y]), ((3,), (3,)))
B("dstack:2d", lambda m, x, y: m.dstack([x, y]), ((2, 3), (2, 3)), dtypes=F64)
B("column_stack:1d2d", lambda m, x, y: m.column_stack([x, y]), ((3,), (3, 2)))
for _n, _ios, _sh, _ax in [("split", 3, (6, 2), 0), ("split", [1, -2], (6, 2), 0),
                           ("split", [2, 5, 9], (6, 2), 0), ("split", 2, (2, 4), -1),
                           ("array_split", 4, (6, 2), 0), ("array_split", [3, 1], (6, 2), 0),
                           ("array_split", 2, (3, 5), 1)]:
    case(f"{_n}:{_ios}_axis{_ax}".replace(" ", ""), getattr(fnp, _n), (_sh,),
         kwargs={"indices_or_sections": _ios, "axis": _ax})
case("hsplit:2d", fnp.hsplit, ((2, 4),), kwargs={"indices_or_sections": 2})
case("hsplit:1d", fnp.hsplit, ((6,),), kwargs={"indices_or_sections": [2, 3]}, dtypes=F64)
case("vsplit:2d", fnp.vsplit, ((4, 2),), kwargs={"indices_or_sections": [1]})
case("tile:int", fnp.tile, ((2, 3),), kwargs={"reps": 2})
case("tile:tuple", fnp.tile, ((3,),), kwargs={"reps": (2, 1, 2)}, dtypes=F64)
case("tile:0d", fnp.tile, ((),), kwargs={"reps": 3}, dtypes=F64)
case("repeat:flat", fnp.repeat, ((2, 3),), kwargs={"repeats": 2})
case("repeat:axis", fnp.repeat, ((2, 3),), kwargs={"repeats": 3, "axis": 0}, dtypes=F64)
case("repeat:array", fnp.repeat, ((2, 3),), kwargs={"repeats": [1, 0, 2], "axis": 1})
B("method:repeat", lambda m, x: x.repeat(2, axis=1), ((2, 3),), dtypes=F64)
for _mode, _kw in [("constant", {}), ("constant", {"constant_values": 1.5}),
                   ("constant", {"constant_values": ((1.0, 2.0), (3.0, 4.0))}),
                   ("edge", {}), ("reflect", {}), ("symmetric", {}), ("wrap", {})]:
    _tag = _mode + ("_cv" if _kw and np.ndim(_kw["constant_values"]) == 0 else
                    "_cvs" if _kw else "")
    case(f"pad:{_tag}", fnp.pad, ((3, 4),),
         kwargs={"pad_width": ((1, 2), (2, 0)), "mode": _mode, **_kw})
case("pad:int_width", fnp.pad, ((3,),), kwargs={"pad_width": 2})
case("pad:reflect_wide", fnp.pad, ((3,),), kwargs={"pad_width": (2, 3), "mode": "reflect"},
     dtypes=F64)
case("flip:all", fnp.flip, ((2, 3),))
case("flip:axis", fnp.flip, ((2, 3, 4),), kwargs={"axis": (0, 2)}, dtypes=F64)
case("fliplr:2d", fnp.fliplr, ((2, 3),))
case("flipud:2d", fnp.flipud, ((2, 3),))
case("roll:flat", fnp.roll, ((2, 3),), kwargs={"shift": 2})
case("roll:axis_neg", fnp.roll, ((2, 3),), kwargs={"shift": -1, "axis": 1})
case("roll:multi", fnp.roll, ((2, 3, 4),), kwargs={"shift": (1, 5), "axis": (0, 2)},
     dtypes=F64)
for _k in (1, 2, 3, -1):
    case(f"rot90:k{_k}", fnp.rot90, ((2, 3),), kwargs={"k": _k}, dtypes=F if _k == 1 else F64)
case("rot90:axes", fnp.rot90, ((2, 3, 4),), kwargs={"k": 1, "axes": (2, 0)}, dtypes=F64)
for _n in ("triu", "tril"):
    case(f"{_n}:square", getattr(fnp, _n), ((3, 3),))
    case(f"{_n}:k1_rect", getattr(fnp, _n), ((3, 4),), kwargs={"k": 1}, dtypes=F64)
    case(f"{_n}:k-1_batched", getattr(fnp, _n), ((2, 3, 3),), kwargs={"k": -1}, dtypes=F64)
case("diag:vec", fnp.diag, ((3,),))
case("diag:vec_k", fnp.diag, ((3,),), kwargs={"k": -1}, dtypes=F64)
case("diag:mat", fnp.diag, ((3, 4),))
case("diag:mat_k", fnp.diag, ((3, 4),), kwargs={"k": 2}, dtypes=F64)
case("diagonal:2d", fnp.diagonal, ((3, 4),))
case("diagonal:offset", fnp.diagonal, ((3, 4),), kwargs={"offset": -1}, dtypes=F64)
case("diagonal:3d_axes", fnp.diagonal, ((2, 3, 4),), dtypes=F64,
     kwargs={"offset": 1, "axis1": 2, "axis2": 0})
case("trace:2d", fnp.trace, ((3, 3),))
case("trace:offset_3d", fnp.trace, ((3, 4, 2),), kwargs={"offset": 1}, dtypes=F64)
B("method:trace_diagonal", lambda m, x: x.trace() + x.diagonal(1).sum(), ((3, 3),),
  dtypes=F64)
for _n in ("atleast_1d", "atleast_2d", "atleast_3d"):
    for _sh in ((), (3,), (2, 3)):
        case(f"{_n}:{len(_sh)}d", getattr(fnp, _n), (_sh,), dtypes=F64)
    B(f"{_n}:multi", lambda m, x, y, _n=_n: getattr(m, _n)(x, y), ((), (2,)), dtypes=F64)
B("shape:static", lambda m, x: x * m.shape(x)[1], ((2, 3),))
B("ndim:static", lambda m, x: x * m.ndim(x), ((2, 3),))
B("size:static", lambda m, x: x * m.size(x) + x * m.size(x, 0), ((2, 3),))
case("copy:2d", fnp.copy, ((2, 3),))
B("method:copy", lambda m, x: x.copy() * 2, ((2, 3),), dtypes=F64)
case("sort:last", fnp.sort, ((3, 4),), domain=(distinct(),))
case("sort:axis0", fnp.sort, ((3, 4),), domain=(distinct(),), kwargs={"axis": 0})
case("sort:none", fnp.sort, ((3, 4),), domain=(distinct(),), kwargs={"axis": None},
     dtypes=F64)
case("sort:int", fnp.sort, ((6,),), dtypes=("int32",), order=None)
case("argsort:last", fnp.argsort, ((3, 4),), domain=(distinct(),), order=0)
case("argsort:axis0", fnp.argsort, ((3, 4),), domain=(distinct(),), order=0,
     kwargs={"axis": 0}, dtypes=F64)
case("argsort:none", fnp.argsort, ((3, 4),), domain=(distinct(),), order=0,
     kwargs={"axis": None}, dtypes=F64)
case("argsort:ties_stable", fnp.argsort, ((6,),), dtypes=F64, order=0,
     domain=lambda rng: [np.array([2.0, 1.0, 2.0, 1.0, 0.0, 2.0])])
B("argsort:gather", lambda m, x: m.take_along_axis(x, m.argsort(x, axis=1), axis=1),
  ((3, 4),), domain=(distinct(),))
case("append:flat", fnp.append, ((2, 3), (2,)))
case("append:axis", fnp.append, ((2, 3), (1, 3)), kwargs={"axis": 0}, dtypes=F64)

# ---- indexing ------------------------------------------------------------------------------
_IDX = {
    "int": 1, "neg_int": -1, "slice": slice(1, 3), "neg_step": slice(None, None, -1),
    "neg_step2": slice(3, 0, -2), "neg_start_stop": slice(-3, -1), "empty_slice": slice(2, 1),
    "none": None, "ellipsis_none": (Ellipsis, None), "int_ellipsis_step": (1, ..., slice(None,
                                                                                           None,
                                                                                           2)),
    "none_middle": (slice(None), None, 1), "tuple_ints": (1, 2), "all3": (0, 1, -1),
    "arr": np.array([0, 2, -1]), "list": [0, 0, 1], "arr2d": np.array([[0, 1], [-1, 0]]),
    "slice_arr": (slice(None), np.array([2, 0, 2])), "adjacent": (slice(None),
                                                                  np.array([0, 1]),
                                                                  np.array([2, -1])),
    "non_adjacent": (np.array([0, 1]), slice(None), np.array([1, 2])),
    "int_then_arr_nonadj": (1, slice(None), np.array([0, 2])),
    "int_arr_adjacent": (1, np.array([0, 2])),
    "bcast_arrs": (np.array([[0], [1]]), np.array([1, 2, 0])),
    "arr_none": (np.array([1, 0]), None),
    "empty_arr": np.array([], np.intp),
    "mask": np.array([True, False]), "mask2d": np.array([[True, False, True, False],
                                                        [False, False, True, True],
                                                        [True, True, False, False]]),
    "mask_slice": (slice(None), slice(None), np.array([False, True, True, False, True])),
    "scalar_0d_arr": np.array(1),
}
for _k, _i in _IDX.items():
    _sh = (2, 3, 5) if _k in ("mask_slice", "non_adjacent", "adjacent", "bcast_arrs",
                              "int_then_arr_nonadj", "all3") else \
        (3, 4) if _k == "mask2d" else (4, 3)
    if _k == "mask":
        _sh = (2, 3)
    case(f"getitem:{_k}", lambda x, _i=_i: x[_i], (_sh,), np_fn=SAME,
         dtypes=F if _k in ("int", "arr", "adjacent", "mask2d") else F64)
B("getitem:traced_mask", lambda m, x: x[x > 0], ((3, 4),), domain=(away(0.2, 2),))
B("getitem:traced_mask_rows", lambda m, x: x[x[:, 0] > 0], ((4, 3),), domain=(away(0.2, 2),),
  dtypes=F64)
case("getitem:traced_int_array", lambda x, i: x[i], ((4, 3), (5,)), np_fn=SAME,
     dtypes=(("float64", "int64"), ("float32", "int32")), domain=((-2, 2), (-4, 3)))
case("getitem:traced_int_array_2", lambda x, i, j: x[i, :, j], ((3, 2, 4), (2, 1), (3,)),
     np_fn=SAME, dtypes=(("float64", "int64", "int64"),), domain=((-2, 2), (-3, 2), (-4, 3)))
case("getitem:traced_0d_int", lambda x, i: x[i] * x[::-1, i], ((4, 4), ()), np_fn=SAME,
     dtypes=(("float64", "int64"),), domain=((-2, 2), (-4, 3)))
B("getitem:tracer_index_value", lambda m, x: x[int(m.argmax(x))], ((5,),),
  domain=(distinct(),), dtypes=F64)
case("getitem:repeated", lambda x: x[np.array([1, 1, 1, 0])] * x[[2, 2]].sum(), ((3,),),
     np_fn=SAME)


def _at(x):
    """``x.at`` on a tracer (the property under test); numpy (and cupy) arrays have no
    ``.at``."""
    from functrace.tracing import Tracer
    return x.at if isinstance(x, Tracer) else fnp.at(x)


def _distinct(rng, *shapes):
    """Arrays of ``shapes`` whose values all differ by at least 0.2 (no ties anywhere)."""
    n = sum(int(np.prod(sh)) for sh in shapes)
    vals = rng.permutation(n) * 0.4 - 0.2 * n + rng.uniform(-0.1, 0.1, n)
    out, k = [], 0
    for sh in shapes:
        m = int(np.prod(sh))
        out.append(vals[k:k + m].reshape(sh))
        k += m
    return out


def _np_at(mode, idx):
    def f(x, v):
        out = np.array(x, copy=True)
        if mode == "set":
            out[idx] = v
        else:
            {"add": np.add, "mul": np.multiply, "min": np.minimum,
             "max": np.maximum}[mode].at(out, idx, v)
        return out
    return f


_AT = {"int": (1, ()), "slice": (slice(1, None, 2), (2,)),
       "repeated": (np.array([0, 2, 0, 0]), (4,)), "neg": (np.array([-1, 1]), (2,)),
       "2d_mixed": ((np.array([0, 1, 0]), slice(None)), (3, 3)),
       "none_bcast": ((1, None), ()), "mask": (np.array([True, False, True, False, False]),
                                               (2,))}
for _k, (_i, _vs) in _AT.items():
    _xs = (2, 3) if _k == "2d_mixed" else (5,)
    for _mode, _meth in (("set", "set"), ("add", "add"), ("mul", "multiply")):
        if _k == "none_bcast" and _mode != "add":
            continue
        case(f"at:{_meth}_{_k}", lambda x, v, _i=_i, _meth=_meth: getattr(fnp.at(x)[_i],
                                                                            _meth)(v),
             (_xs, _vs), np_fn=_np_at(_mode, _i), dtypes=F if _k == "repeated" else F64,
             domain=((-2, 2), away(0.5, 1.5)))
# min/max: the domains keep every value apart from the others (no ties: a tie is a kink)
for _k, (_i, _vs) in {"int": (1, ()), "slice": (slice(1, None, 2), (2,)),
                      "repeated": (np.array([0, 2, 0, 0, 3]), (5,)),
                      "2d_mixed": ((np.array([0, 1, 0]), slice(None)), (3, 3))}.items():
    _xs = (2, 3) if _k == "2d_mixed" else (5,)
    for _meth in ("min", "max"):
        case(f"at:{_meth}_{_k}", lambda x, v, _i=_i, _meth=_meth: getattr(fnp.at(x)[_i],
                                                                            _meth)(v),
             (_xs, _vs), np_fn=_np_at(_meth, _i), dtypes=F if _k == "repeated" else F64,
             domain=lambda rng, _xs=_xs, _vs=_vs: _distinct(rng, _xs, _vs))
case("at:set_neg_step", lambda x, v: fnp.at(x)[::-2].set(v), ((5,), (3,)),
     np_fn=_np_at("set", slice(None, None, -2)))
case("at:add_neg_step_2d", lambda x, v: fnp.at(x)[::-1, 2:0:-1].add(v), ((3, 4), (3, 2)),
     np_fn=_np_at("add", (slice(None, None, -1), slice(2, 0, -1))), dtypes=F64)
case("at:multiply_neg_arr", lambda x, v: fnp.at(x)[:, np.array([-1, 0, -1])].multiply(v),
     ((2, 3), (2, 3)), np_fn=_np_at("mul", (slice(None), np.array([-1, 0, -1]))),
     dtypes=F64, domain=((-2, 2), away(0.5, 1.5)))
case("at:multiply_repeated_zero", lambda x, v: fnp.at(x)[np.array([1, 1, 1, 3, 3])].multiply(v),
     ((4,), (5,)), np_fn=_np_at("mul", np.array([1, 1, 1, 3, 3])), dtypes=F64,
     domain=lambda rng: [rng.uniform(-2, 2, 4), np.array([0.5, 0.0, 1.5, 0.0, 0.0])])
case("at:add_scalar_bcast", lambda x: fnp.at(x)[np.array([0, 0, 3])].add(1.0), ((5,),),
     np_fn=lambda x: _np_at("add", np.array([0, 0, 3]))(x, 1.0))
case("at:tracer_property", lambda x, v: _at(x)[np.array([2, 0, 2])].multiply(v) +
     _at(x)[1:].set(v[0]) * _at(x)[0].get(), ((4,), (3,)), dtypes=F64,
     np_fn=lambda x, v: _np_at("mul", np.array([2, 0, 2]))(x, v) +
     _np_at("set", slice(1, None))(x, v[0]) * x[0], domain=((-2, 2), away(0.5, 1.5)))
case("at:traced_index", lambda x, i, v: fnp.at(x)[i].add(v), ((5,), (4,), (4,)),
     dtypes=(("float64", "int64", "float64"),), domain=((-2, 2), (-5, 4), (-2, 2)),
     np_fn=lambda x, i, v: _np_at("add", i)(x, v))

case("take:flat", fnp.take, ((3, 4),), kwargs={"indices": np.array([0, 5, -1, 5])})
case("take:axis", fnp.take, ((3, 4),), kwargs={"indices": [[2, 0], [1, 1]], "axis": 1},
     dtypes=F64)
case("take:axis0_neg", fnp.take, ((3, 4),), kwargs={"indices": [-1, 0], "axis": 0},
     dtypes=F64)
B("method:take", lambda m, x: x.take(np.array([1, 1]), axis=0), ((3, 2),), dtypes=F64)
case("take:mode_clip", fnp.take, ((4,),), kwargs={"indices": np.array([-1, 5, 2]),
                                                 "mode": "clip"})
case("take:mode_wrap", fnp.take, ((2, 3),), dtypes=F64,
     kwargs={"indices": np.array([-4, 5, 2]), "mode": "wrap", "axis": 1})
for _mode in ("clip", "wrap"):
    case(f"take:traced_idx_{_mode}", lambda x, i, _m=_mode: fnp.take(x, i, mode=_m),
         ((4,), (5,)), dtypes=(("float64", "int64"),), domain=((-2, 2), (-7, 7)),
         np_fn=lambda x, i, _m=_mode: np.take(x, i, mode=_m))
case("take_along_axis:axis1", fnp.take_along_axis, ((3, 4),),
     kwargs={"indices": np.array([[0, 3], [1, 1], [-1, 2]]), "axis": 1})
case("take_along_axis:bcast", fnp.take_along_axis, ((3, 4),), dtypes=F64,
     kwargs={"indices": np.array([[0, 2, 1, 0]]), "axis": 0})
case("take_along_axis:traced_idx", lambda x, i: fnp.take_along_axis(x, i, axis=0),
     ((3, 4), (2, 4)), dtypes=(("float64", "int64"), ("float32", "int32")),
     domain=((-2, 2), (-3, 2)), np_fn=lambda x, i: np.take_along_axis(x, i, axis=0))
case("take_along_axis:none", fnp.take_along_axis, ((3, 4),), dtypes=F64,
     kwargs={"indices": np.array([0, 11, 3]), "axis": None})
B("nonzero:gather", lambda m, x: x[m.nonzero(x > 0)], ((3, 4),), domain=(away(0.2, 2),))
case("nonzero:plain", fnp.nonzero, ((3, 4),), dtypes=F64, order=None,
     domain=lambda rng: [rng.integers(-1, 2, (3, 4)).astype(float)])
B("method:nonzero", lambda m, x: x[(x > 0).nonzero()], ((4,),), domain=(away(0.2, 2),),
  dtypes=F64)
case("flatnonzero:plain", fnp.flatnonzero, ((3, 4),), dtypes=F64, order=None,
     domain=lambda rng: [rng.integers(-1, 2, (3, 4)).astype(float)])
B("flatnonzero:gather", lambda m, x: m.ravel(x)[m.flatnonzero(x > 0)], ((3, 4),),
  domain=(away(0.2, 2),), dtypes=F64)
case("argwhere:plain", fnp.argwhere, ((3, 4),), dtypes=F64, order=None,
     domain=lambda rng: [rng.integers(-1, 2, (3, 4)).astype(float)])

# ---- products ------------------------------------------------------------------------------
for _sa, _sb in [((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,)),
                 ((2, 1, 2, 3), (5, 3, 2)), ((2, 3), (4, 3, 2)), ((4, 2, 3), (3,)),
                 ((3,), (4, 3, 2)), ((0, 3), (3, 2))]:
    _tag = "x".join(map(str, _sa)) + "@" + "x".join(map(str, _sb))
    case(f"matmul:{_tag}", fnp.matmul, (_sa, _sb), order=3 if _sa == (2, 3) and _sb == (3, 4)
         else 2, dtypes=F if _sb == (3, 4) else F64)
case("matmul:int", fnp.matmul, ((2, 3), (3, 2)), dtypes=("int32",), order=None)
case("matmul:mixed", fnp.matmul, ((2, 3), (3, 2)), dtypes=(("int32", "float32"),), order=1)
case("matvec:2d", fnp.matvec, ((2, 3), (3,)))
case("matvec:batched", fnp.matvec, ((4, 2, 3), (4, 3)), dtypes=F64)
for _sa, _sb in [((2, 3), (3, 4)), ((3,), (3,)), ((), (2, 3)), ((2, 3), ()),
                 ((2, 3, 4), (5, 4, 2)), ((3,), (3, 2)), ((2, 3), (3,))]:
    _tag = ("x".join(map(str, _sa)) or "0d") + "." + ("x".join(map(str, _sb)) or "0d")
    case(f"dot:{_tag}", fnp.dot, (_sa, _sb), dtypes=F if _sa == (2, 3) and _sb == (3, 4)
         else F64)
B("method:dot", lambda m, x, y: x.dot(y), ((2, 3), (3,)), dtypes=F64)
for _sa, _sb in [((3,), (3,)), ((2, 3), (4, 3)), ((), (3,)), ((2, 2, 3), (3,))]:
    _tag = ("x".join(map(str, _sa)) or "0d") + "." + ("x".join(map(str, _sb)) or "0d")
    case(f"inner:{_tag}", fnp.inner, (_sa, _sb), dtypes=F if _sa == (3,) else F64)
case("outer:vec", fnp.outer, ((3,), (4,)))
case("outer:mat", fnp.outer, ((2, 2), (3,)), dtypes=F64)
case("tensordot:int", fnp.tensordot, ((2, 3, 4), (3, 4, 5)))
case("tensordot:one", fnp.tensordot, ((2, 3), (3, 4)), kwargs={"axes": 1}, dtypes=F64)
case("tensordot:lists", fnp.tensordot, ((2, 3, 4), (4, 2)), kwargs={"axes": ([2, 0], [0, 1])},
     dtypes=F64)
case("tensordot:zero", fnp.tensordot, ((2,), (3,)), kwargs={"axes": 0}, dtypes=F64)
case("kron:2d", fnp.kron, ((2, 2), (2, 3)))
case("kron:1d2d", fnp.kron, ((2,), (2, 3)), dtypes=F64)
case("cross:3", fnp.cross, ((3,), (3,)))
case("cross:batched", fnp.cross, ((2, 3), (3,)), dtypes=F64)
case("cross:axis", fnp.cross, ((3, 2), (3, 2)), kwargs={"axis": 0}, dtypes=F64)
if numpy_crosses_2d():        # numpy 2.5 removed 2-vector cross products
    case("cross:2", fnp.cross, ((4, 2), (4, 2)), dtypes=F64)
    case("cross:2and3", fnp.cross, ((2,), (3,)), dtypes=F64)
case("vdot:vec", fnp.vdot, ((3,), (3,)))
case("vdot:mat", fnp.vdot, ((2, 3), (3, 2)), dtypes=F64)
case("vdot:complex", fnp.vdot, ((3,), (3,)), dtypes=("complex128",), order=None)
case("vecdot:bcast", fnp.vecdot, ((2, 3), (3,)))
case("vecdot:axis", fnp.vecdot, ((3, 2), (3, 2)), kwargs={"axis": 0}, dtypes=F64)
_EINSUM = {
    "matmul": ("ij,jk->ik", (2, 3), (3, 4)), "batch": ("bij,bjk->bik", (2, 2, 3), (2, 3, 4)),
    "trace": ("ii->", (3, 3)), "diag": ("ii->i", (3, 3)), "outer": ("i,j->ij", (2,), (3,)),
    "ellipsis": ("...ij,...jk->...ik", (2, 2, 3), (2, 3, 2)),
    "ellipsis_bcast": ("...ij,jk->...ik", (4, 2, 3), (3, 2)),
    "implicit": ("ij,jk", (2, 3), (3, 4)), "implicit_transpose": ("ji", (2, 3)),
    "transpose": ("ij->ji", (2, 3)), "sum_all": ("ijk->", (2, 3, 4)),
    "sum_axis": ("ijk->ik", (2, 3, 4)), "dot": ("i,i->", (3,), (3,)),
    "chain": ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    "hadamard": ("ij,ij->ij", (2, 3), (2, 3)), "bilinear": ("i,ij,j->", (2,), (2, 3), (3,)),
    "diag_mul": ("ii,i->i", (3, 3), (3,)), "scalar": (",ij->ij", (), (2, 3)),
    "private_sum": ("ij,k->ik", (2, 3), (4,)), "diag3": ("iij->ij", (2, 2, 3)),
    "two_traces": ("ii,jj->", (2, 2), (3, 3)), "batch_diag": ("bii->bi", (2, 3, 3)),
    "elementwise": ("i,i->i", (3,), (3,)), "full_sum": ("ij->", (2, 3)),
    "ellipsis_sum": ("i...->...", (2, 3, 4)), "repeated_out_of_two": ("ij,ij->", (2, 3),
                                                                      (2, 3)),
    # numpy broadcasts a size-1 axis against the other operands' size for the same letter
    "bcast_batch": ("mnd,mdo->mno", (1, 4, 2), (5, 2, 3)),
    "bcast_batch_right": ("mnd,mdo->mno", (3, 4, 2), (1, 2, 3)),
    "bcast_contracted": ("ij,jk->ik", (2, 1), (3, 4)),
    "bcast_both": ("ij,ij->ij", (1, 3), (4, 1)),
    "bcast_summed": ("ij,ij->", (4, 1), (4, 3)),
    "bcast_ellipsis": ("...ij,...jk->...ik", (1, 2, 3), (4, 3, 2)),
    "bcast_three": ("bi,bij,bj->b", (1, 2), (3, 2, 2), (3, 1)),
}
for _k, (_s, *_shs) in _EINSUM.items():
    case(f"einsum:{_k}", lambda *a, _s=_s: fnp.einsum(_s, *a), tuple(_shs),
         np_fn=lambda *a, _s=_s: np.einsum(_s, *a),
         dtypes=F if _k in ("matmul", "trace", "diag", "chain", "bcast_batch") else F64)
B("einsum:int", lambda m, x, y: m.einsum("ij,j->i", x, y), ((2, 3), (3,)),
  dtypes=("int32",), order=None)
B("einsum:mixed", lambda m, x, y: m.einsum("ij,j->i", x, y), ((2, 3), (3,)),
  dtypes=(("float32", "int32"),), order=1)

# ---- linear algebra: functrace.numpy.linalg and functrace.scipy.linalg ---------------------
# Rows cover "linalg.<name>" and "scipy.linalg.<name>": test_op_table checks that every public
# function of both has a row. Domains keep the functions smooth: well-conditioned matrices,
# distinct eigenvalues and singular values. cholesky/eigh rows build their Hermitian input
# inside the function (x @ x.T + 3 I): the default symmetric gradient and numpy's one-triangle
# function then agree along every direction; ``:triangle`` rows check the exact gradient.
import scipy.linalg as _sla  # noqa: E402

import functrace.scipy.linalg as fsl  # noqa: E402


def BS(name, f, shapes, **kw):
    """A row written once for (fnp, functrace.scipy.linalg) and (np, scipy.linalg)."""
    CASES.append(OpCase(name, lambda *a, **k: f(fnp, fsl, *a, **k), tuple(shapes),
                        np_fn=lambda *a, **k: f(np, _sla, *a, **k), **kw))


def _mats(*specs):
    """A domain: one array per spec, ``("gen", shape)`` well-conditioned square (stack),
    ``("spd", shape)`` Hermitian positive definite, ``("tri", shape)`` triangular-friendly
    (a strong diagonal), ``("sqrt", shape)`` eigenvalues with positive real parts, or a shape
    (standard normal)."""
    def d(rng):
        out = []
        for sp in specs:
            kind, shape = sp if sp and isinstance(sp[0], str) else ("any", sp)
            x = rng.standard_normal(shape)
            n = shape[-1] if shape else 1
            if kind == "gen":
                x = x + 2.5 * n ** 0.5 * np.eye(n)
            elif kind == "spd":
                x = x @ np.swapaxes(x, -1, -2) + n * np.eye(n)
            elif kind == "tri":
                x = x + 3.0 * np.eye(n)
            elif kind == "sqrt":
                x = 0.3 * x + (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)) / n
            out.append(x)
        return out
    return d


def _h(m, x):
    """A Hermitian positive definite matrix built from any ``x``: x x^T + 3 I (in x's dtype,
    so a float32 row stays float32)."""
    return m.matmul(x, m.swapaxes(x, -1, -2)) + 3.0 * m.eye(x.shape[-1], dtype=x.dtype)


_G3, _S3 = ("gen", (3, 3)), ("spd", (3, 3))
_LA = [
    ("cholesky:sym", lambda m, x: m.linalg.cholesky(_h(m, x)), ((3, 3),), {}),
    ("cholesky:triangle", lambda m, a: m.linalg.cholesky(a, **({"gradient": "triangle"} if m
                                                               is fnp else {})), (_S3,), F64),
    ("cholesky:upper", lambda m, x: m.linalg.cholesky(_h(m, x), upper=True), ((3, 3),), F64),
    ("cond:2", lambda m, a: m.linalg.cond(a), (_G3,), F64),
    ("cond:fro", lambda m, a: m.linalg.cond(a, "fro"), (_G3,), F64),
    ("cross:bcast", lambda m, a, b: m.linalg.cross(a, b), ((2, 3), (3,)), F64),
    ("det:3x3", lambda m, a: m.linalg.det(a), (_G3,), {}),
    ("diagonal:offset", lambda m, a: m.linalg.diagonal(a, offset=1), ((2, 3, 3),), F64),
    # eigenvectors only through a phase-invariant function: V diag(w^2) V^-1 (= a @ a)
    ("eig:invariant", lambda m, a: (lambda w, v: m.real(m.matmul(v * w ** 2,
                                                                 m.linalg.inv(v))))(
        *m.linalg.eig(a)), (_G3,), {}),
    ("eigvals:power_sums", lambda m, a: (lambda w: m.stack([m.real(m.sum(w ** 2)),
                                                           m.real(m.prod(w))]))(
        m.linalg.eigvals(a)), (_G3,), {}),
    ("eigh:sym", lambda m, x: (lambda w, v: (w, v ** 2))(*m.linalg.eigh(_h(m, x))),
     ((3, 3),), {}),
    ("eigh:triangle_U", lambda m, a: (lambda w, v: (w, v ** 2))(*m.linalg.eigh(
        a, "U", **({"gradient": "triangle"} if m is fnp else {}))), (_G3,), F64),
    ("eigvalsh:sym", lambda m, x: m.linalg.eigvalsh(_h(m, x)), ((2, 3, 3),), {}),
    ("inv:3x3", lambda m, a: m.linalg.inv(a), (_G3,), {}),
    ("lstsq:tall_vec", lambda m, a, b: m.linalg.lstsq(a, b), ((5, 3), (5,)), {}),
    ("lstsq:wide_mat", lambda m, a, b: m.linalg.lstsq(a, b), ((3, 5), (3, 2)), F64),
    ("matmul:batched", lambda m, a, b: m.linalg.matmul(a, b), ((2, 2, 3), (3, 2)), F64),
    ("matrix_norm:fro", lambda m, a: m.linalg.matrix_norm(a), ((2, 3, 3),), {}),
    ("matrix_norm:nuc", lambda m, a: m.linalg.matrix_norm(a, ord="nuc", keepdims=True),
     ((2, 3, 4),), F64),
    ("matrix_power:3", lambda m, a: m.linalg.matrix_power(a, 3), (_G3,), F64),
    ("matrix_power:neg", lambda m, a: m.linalg.matrix_power(a, -2), (_G3,), F64),
    ("matrix_rank:plain", lambda m, a: m.linalg.matrix_rank(a), (_G3,), dict(order=None)),
    ("matrix_transpose:batched", lambda m, a: m.linalg.matrix_transpose(a), ((2, 3, 4),),
     F64),
    ("multi_dot:chain4", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]),
     ((3,), (3, 4), (4, 2), (2, 5)), {}),
    ("multi_dot:two", lambda m, a, b: m.linalg.multi_dot([a, b]), ((2, 3), (3, 2)), F64),
    ("norm:vec", lambda m, a: m.linalg.norm(a), ((4,),), F64),
    ("norm:mat_inf", lambda m, a: m.linalg.norm(a, np.inf), ((3, 3),), F64),
    ("outer:vec", lambda m, a, b: m.linalg.outer(a, b), ((2,), (3,)), F64),
    ("pinv:tall", lambda m, a: m.linalg.pinv(a), ((4, 3),), F64),
    ("qr:tall", lambda m, a: m.linalg.qr(a), ((4, 3),), F64),
    ("slogdet:3x3", lambda m, a: m.linalg.slogdet(a), (_G3,), F64),
    ("solve:mat", lambda m, a, b: m.linalg.solve(a, b), (_G3, (3, 2)), {}),
    ("svd:invariant", lambda m, a: (lambda u, s, vh: (u ** 2, s, vh ** 2))(
        *m.linalg.svd(a, full_matrices=False)), ((4, 3),), F64),
    ("svdvals:batched", lambda m, a: m.linalg.svdvals(a), ((2, 3, 4),), F64),
    ("tensordot:axes1", lambda m, a, b: m.linalg.tensordot(a, b, axes=1), ((2, 3), (3, 2)),
     F64),
    ("tensorinv:ind1", lambda m, a: m.linalg.tensorinv(m.reshape(a, (4, 2, 2)), ind=1),
     (("gen", (4, 4)),), F64),
    ("tensorsolve:plain", lambda m, a, b: m.linalg.tensorsolve(m.reshape(a, (2, 2, 2, 2)), b),
     (("gen", (4, 4)), (2, 2)), F64),
    ("trace:batched", lambda m, a: m.linalg.trace(a), ((2, 3, 3),), F64),
    ("vecdot:bcast", lambda m, a, b: m.linalg.vecdot(a, b), ((2, 3), (3,)), F64),
    ("vector_norm:axes", lambda m, a: m.linalg.vector_norm(a, axis=(0, 2), ord=3),
     ((2, 3, 2),), {}),
    ("vector_norm:all", lambda m, a: m.linalg.vector_norm(a, keepdims=True), ((2, 3),), F64),
]
for _n, _f, _sp, _kw in _LA:
    _kw = {"dtypes": _kw} if isinstance(_kw, tuple) else dict(_kw)
    _shapes = tuple(sp[1] if sp and isinstance(sp[0], str) else sp for sp in _sp)
    B(f"linalg.{_n}", _f, _shapes, domain=_mats(*_sp), **_kw)


_SLA = [
    ("solve_triangular:lower", lambda m, sl, a, b: sl.solve_triangular(a, b, lower=True),
     (("tri", (3, 3)), (3, 2)), {}),
    ("solve_triangular:trans_unit", lambda m, sl, a, b: sl.solve_triangular(
        a, b, trans="T", unit_diagonal=True), (("tri", (3, 3)), (3,)), F64),
    ("solve_triangular:batched", lambda m, sl, a, b: sl.solve_triangular(a, b, trans=2),
     (("tri", (2, 3, 3)), (3,)), F64),
    ("cho_factor:upper", lambda m, sl, x: sl.cho_factor(_h(m, x))[0], ((3, 3),), {}),
    ("cho_factor:lower", lambda m, sl, x: sl.cho_factor(_h(m, x), lower=True)[0], ((3, 3),),
     F64),
    ("cho_solve:upper", lambda m, sl, x, b: sl.cho_solve(sl.cho_factor(_h(m, x)), b),
     ((3, 3), (3, 2)), {}),
    ("cho_solve:lower_vec", lambda m, sl, c, b: sl.cho_solve((c, True), b),
     (("tri", (3, 3)), (3,)), F64),
    ("cholesky:upper", lambda m, sl, x: sl.cholesky(_h(m, x)), ((3, 3),), {}),
    ("cholesky:lower_batched", lambda m, sl, x: sl.cholesky(_h(m, x), lower=True),
     ((2, 3, 3),), F64),
    ("cholesky:triangle", lambda m, sl, a: sl.cholesky(a, **({"gradient": "triangle"} if sl
                                                             is fsl else {})), (_S3,), F64),
    ("lu_factor:square", lambda m, sl, a: sl.lu_factor(a), ((3, 3),), {}),
    ("lu_factor:tall", lambda m, sl, a: sl.lu_factor(a), ((4, 3),), F64),
    ("lu_factor:wide", lambda m, sl, a: sl.lu_factor(a), ((3, 4),), F64),
    ("lu_solve:plain", lambda m, sl, a, b: sl.lu_solve(sl.lu_factor(a), b), (_G3, (3, 2)), {}),
    ("lu_solve:trans", lambda m, sl, a, b: sl.lu_solve(sl.lu_factor(a), b, trans=1),
     (_G3, (3,)), F64),
    ("lu:plu", lambda m, sl, a: sl.lu(a), ((3, 3),), F64),
    ("lu:permute_l_tall", lambda m, sl, a: sl.lu(a, permute_l=True), ((4, 3),), F64),
    ("lu:p_indices_wide", lambda m, sl, a: sl.lu(a, p_indices=True), ((3, 4),), F64),
    ("expm:3x3", lambda m, sl, a: sl.expm(a), ((3, 3),), {}),
    ("expm:batched", lambda m, sl, a: sl.expm(a), ((2, 3, 3),), F64),
    ("sqrtm:nonsymmetric", lambda m, sl, a: sl.sqrtm(a), (("sqrt", (3, 3)),), {}),
    ("block_diag:mixed", lambda m, sl, a, b, c: sl.block_diag(a, b, c), ((2, 2), (3,), ()),
     {}),
    ("inv:general", lambda m, sl, a: sl.inv(a), (_G3,), F64),
    ("inv:pos", lambda m, sl, x: sl.inv(_h(m, x), assume_a="pos"), ((3, 3),), F64),
    ("solve:vec", lambda m, sl, a, b: sl.solve(a, b), (_G3, (3,)), F64),
    ("solve:pos_lower", lambda m, sl, x, b: sl.solve(_h(m, x), b, assume_a="pos", lower=True),
     ((3, 3), (3, 2)), F64),
    ("solve:transposed", lambda m, sl, a, b: sl.solve(a, b, transposed=True), (_G3, (3, 2)),
     F64),
    ("det:batched", lambda m, sl, a: sl.det(a), (("gen", (2, 3, 3)),), F64),
    ("eigh:vectors", lambda m, sl, x: (lambda w, v: (w, v ** 2))(*sl.eigh(_h(m, x))),
     ((3, 3),), F64),
    ("eigh:values_subset", lambda m, sl, x: sl.eigh(_h(m, x), eigvals_only=True,
                                                   subset_by_index=(1, 2)), ((3, 3),), F64),
    ("svd:invariant", lambda m, sl, a: (lambda u, s, vh: (u ** 2, s, vh ** 2))(
        *sl.svd(a, full_matrices=False)), ((3, 4),), F64),
    ("svd:values", lambda m, sl, a: sl.svd(a, compute_uv=False), ((4, 3),), F64),
    ("qr:economic", lambda m, sl, a: sl.qr(a, mode="economic"), ((4, 3),), F64),
    ("qr:r_tall", lambda m, sl, a: sl.qr(a, mode="r"), ((4, 3),), F64),
]
for _n, _f, _sp, _kw in _SLA:
    _kw = {"dtypes": _kw} if isinstance(_kw, tuple) else dict(_kw)
    _shapes = tuple(sp[1] if sp and isinstance(sp[0], str) else sp for sp in _sp)
    BS(f"scipy.linalg.{_n}", _f, _shapes, domain=_mats(*_sp), **_kw)

# ---- fft (functrace.numpy.fft) ---------------------------------------------------------------
# Rows name ``fft.<f>``. Complex spectra are returned as stacked real and imaginary parts (the
# gradient checks take a real loss), and complex inputs are built from two real arguments,
# so gradients through every transform, in both directions, are checked against finite
# differences (irfft ignores the imaginary parts of its DC and Nyquist bins: zero gradient).


def _ri(m, z):
    return m.stack([m.real(z), m.imag(z)])


B("fft.fft:1d", lambda m, x: _ri(m, m.fft.fft(x)), ((8,),))
B("fft.fft:pad_axis0_ortho", lambda m, x: _ri(m, m.fft.fft(x, 6, 0, "ortho")), ((3, 4),))
B("fft.fft:complex_truncate", lambda m, x, y: _ri(m, m.fft.fft(x + 1j * y, n=4)),
  ((5,), (5,)))
B("fft.ifft:forward", lambda m, x, y: _ri(m, m.fft.ifft(x + 1j * y, norm="forward")),
  ((2, 5), (2, 5)))
B("fft.rfft:even", lambda m, x: _ri(m, m.fft.rfft(x)), ((2, 8),))
B("fft.rfft:odd_pad_forward", lambda m, x: _ri(m, m.fft.rfft(x, 9, norm="forward")), ((7,),))
B("fft.rfft:int", lambda m, x: _ri(m, m.fft.rfft(x)), ((6,),), dtypes=("int32",),
  domain=(-5, 5), order=None)
B("fft.irfft:even", lambda m, x, y: m.fft.irfft(x + 1j * y), ((5,), (5,)))
B("fft.irfft:odd_axis0_ortho", lambda m, x, y: m.fft.irfft(x + 1j * y, 7, 0, "ortho"),
  ((4, 3), (4, 3)))
B("fft.irfft:roundtrip", lambda m, x: m.fft.irfft(m.fft.rfft(x), 7), ((7,),))
B("fft.hfft:plain", lambda m, x, y: m.fft.hfft(x + 1j * y), ((2, 4), (2, 4)))
B("fft.hfft:odd_ortho", lambda m, x, y: m.fft.hfft(x + 1j * y, 5, norm="ortho"),
  ((3,), (3,)), dtypes=F64)
B("fft.ihfft:plain", lambda m, x: _ri(m, m.fft.ihfft(x)), ((6,),))
B("fft.fft2:plain", lambda m, x: _ri(m, m.fft.fft2(x)), ((3, 4),))
B("fft.ifft2:s", lambda m, x, y: _ri(m, m.fft.ifft2(x + 1j * y, (2, 5))), ((3, 4), (3, 4)))
B("fft.rfft2:plain", lambda m, x: _ri(m, m.fft.rfft2(x)), ((4, 6),))
B("fft.irfft2:plain", lambda m, x, y: m.fft.irfft2(x + 1j * y), ((3, 4), (3, 4)))
B("fft.fftn:axes", lambda m, x: _ri(m, m.fft.fftn(x, axes=(0, 2))), ((2, 3, 4),))
B("fft.fftn:repeated_axes", lambda m, x: _ri(m, m.fft.fftn(x, axes=(1, 1))), ((2, 3),),
  dtypes=F64)
B("fft.ifftn:plain", lambda m, x, y: _ri(m, m.fft.ifftn(x + 1j * y)), ((2, 3), (2, 3)))
B("fft.rfftn:s_axes", lambda m, x: _ri(m, m.fft.rfftn(x, (4, 6), axes=(1, 0))), ((3, 5),))
B("fft.irfftn:3d", lambda m, x, y: m.fft.irfftn(x + 1j * y), ((2, 3, 3), (2, 3, 3)))
B("fft.irfftn:s_axes", lambda m, x, y: m.fft.irfftn(x + 1j * y, (3, 5), axes=(1, 0)),
  ((4, 2), (4, 2)), dtypes=F64)
B("fft.fftshift:all", lambda m, x: m.fft.fftshift(x), ((3, 4),))
B("fft.ifftshift:axis", lambda m, x: m.fft.ifftshift(x, axes=1), ((3, 5),))
B("fft.fftfreq:static", lambda m, x: x * m.fft.fftfreq(5, 0.5), ((5,),))
B("fft.fftfreq:traced_d", lambda m, d: m.fft.fftfreq(6, d), ((),), domain=(0.5, 2))
B("fft.rfftfreq:traced_d", lambda m, d: m.fft.rfftfreq(7, d), ((),), domain=(0.5, 2))

# ---- functrace.scipy.signal -------------------------------------------------------------------
# Rows name ``scipy.signal.<f>``; the reference is scipy.signal's function.
import scipy.signal as _ss  # noqa: E402

import functrace.scipy.signal as _fsig  # noqa: E402


def S(name, shapes, **kw):
    f = name.split(".")[2].split(":")[0]
    case(name, getattr(_fsig, f), shapes, np_fn=getattr(_ss, f), **kw)


S("scipy.signal.convolve:full_direct", ((7,), (3,)), kwargs={"method": "direct"})
S("scipy.signal.convolve:same_fft", ((8,), (5,)), kwargs={"mode": "same", "method": "fft"})
S("scipy.signal.convolve:valid_swapped", ((3,), (7,)), kwargs={"mode": "valid"})
S("scipy.signal.convolve:2d_auto", ((4, 5), (3, 2)), dtypes=F64)
S("scipy.signal.convolve:int", ((6,), (3,)), dtypes=("int32",), domain=(-5, 5), order=None)
S("scipy.signal.correlate:full", ((6,), (4,)))
S("scipy.signal.correlate:same_fft", ((7,), (4,)), kwargs={"mode": "same", "method": "fft"})
S("scipy.signal.correlate:valid_2d", ((5, 4), (2, 3)), kwargs={"mode": "valid"}, dtypes=F64)
S("scipy.signal.convolve2d:fill_value", ((4, 5), (3, 3)), kwargs={"fillvalue": 1.5})
S("scipy.signal.convolve2d:wrap_same", ((5, 5), (3, 2)),
  kwargs={"mode": "same", "boundary": "wrap"})
S("scipy.signal.convolve2d:symm", ((4, 4), (2, 3)), kwargs={"boundary": "symm"}, dtypes=F64)
S("scipy.signal.correlate2d:same", ((5, 6), (2, 3)), kwargs={"mode": "same"})
S("scipy.signal.correlate2d:valid_swapped", ((2, 3), (4, 5)), kwargs={"mode": "valid"},
  dtypes=F64)
S("scipy.signal.fftconvolve:full", ((8,), (5,)))
S("scipy.signal.fftconvolve:axes_same", ((3, 8), (1, 5)), kwargs={"mode": "same", "axes": 1})


def conv_axes_reference(in1, in2, mode="full", *, axes=None, dot_axes=None):
    """autograd's ``convolve(in1, in2, axes, dot_axes, mode)`` from its definition: for every
    kept index i of in1 and j of in2, the sum over the dot index d of scipy.signal.convolve of
    the convolved axes; in1's kept axes, then in2's, then the convolved ones."""
    da, db = dot_axes or ([], [])
    ca = axes[0] if axes else [k for k in range(in1.ndim) if k not in da]
    cb = axes[1] if axes else [k for k in range(in2.ndim) if k not in db]
    ka = [k for k in range(in1.ndim) if k not in ca and k not in da]
    kb = [k for k in range(in2.ndim) if k not in cb and k not in db]
    a = np.transpose(in1, ka + da + ca)
    b = np.transpose(in2, kb + db + cb)
    nd = int(np.prod([in1.shape[k] for k in da]))
    a = a.reshape((-1, nd) + a.shape[len(ka) + len(da):])
    b = b.reshape((-1, nd) + b.shape[len(kb) + len(db):])
    rows = [[sum(_ss.convolve(a[i, d], b[j, d], mode, method="direct") for d in range(nd))
             for j in range(len(b))] for i in range(len(a))]
    out = np.asarray(rows)
    return out.reshape(tuple(in1.shape[k] for k in ka) + tuple(in2.shape[k] for k in kb)
                       + out.shape[2:])


def SA(variant, shapes, dtypes=F, **kw):
    """A row of convolve with autograd's ``axes``/``dot_axes`` (keyword arguments in kw)."""
    case(f"scipy.signal.convolve:{variant}", _fsig.convolve, shapes, np_fn=conv_axes_reference,
         exact=False, kwargs=kw, dtypes=dtypes)


# a conv-net layer: images (batch, channel, y, x) with filters (channel, filter, y, x)
SA("axes_conv_layer", ((3, 2, 6, 5), (2, 4, 3, 2)), axes=([2, 3], [2, 3]),
   dot_axes=([1], [0]), mode="valid", dtypes=F64)    # float32: sums of 12 terms round apart
SA("axes_kernel_first_full", ((2, 3, 2), (5, 4)), axes=([2], [0]), mode="full")
SA("axes_same_small_first", ((2, 3), (6, 2, 4)), axes=([1], [0]), dot_axes=([0], [1]),
   mode="same")
SA("axes_valid_swapped", ((3, 2), (2, 7)), axes=([0], [1]), mode="valid")
SA("axes_dot_only", ((5, 3), (3, 4)), dot_axes=([1], [0]), mode="full")

# ---- creation ------------------------------------------------------------------------------
B("zeros:shape", lambda m, x: x + m.zeros((2, 3)), ((3,),))
B("zeros:dtype", lambda m, x: x * m.zeros(3, dtype=np.float32), ((3,),), dtypes=F64)
B("ones:shape", lambda m, x: x * m.ones((2, 3)), ((3,),))
B("ones:int", lambda m, x: x * m.ones(3, dtype=int), ((3,),), dtypes=("float32", "int8"),
  order=None)
B("full:value", lambda m, x: x + m.full((2, 3), 2.5), ((3,),))
B("full:traced_fill", lambda m, x: m.full((2, 3), x), ((),), dtypes=F64)
B("full:traced_fill_bcast", lambda m, x: m.full((2, 3), x, dtype=np.float32), ((3,),),
  dtypes=F64)
B("empty:concat", lambda m, x: m.concatenate([x, m.empty((0,))]), ((3,),))
B("empty_like:shape0", lambda m, x: m.concatenate([x, m.empty_like(x, shape=(0,))]), ((3,),))
B("zeros_like:plus", lambda m, x: x + m.zeros_like(x), ((2, 3),))
B("zeros_like:only", lambda m, x: m.zeros_like(x), ((2, 3),), order=None)
B("ones_like:dtype", lambda m, x: x * m.ones_like(x, dtype=np.float32), ((2, 3),))
B("full_like:value", lambda m, x: x * m.full_like(x, 3.0), ((2, 3),))
B("full_like:traced_fill", lambda m, x, v: x * m.full_like(x, v), ((2, 3), ()), dtypes=F64)
B("full_like:int_dtype", lambda m, x: m.full_like(x, 7, dtype=np.int16), ((2, 3),),
  order=None)
B("eye:square", lambda m, x: x @ m.eye(3), ((2, 3),))
B("eye:rect_k", lambda m, x: x * m.eye(2, 3, k=1), ((2, 3),), dtypes=F64)
B("identity:plain", lambda m, x: x @ m.identity(3), ((2, 3),))
B("tri:plain", lambda m, x: x * m.tri(2, 3, k=1), ((2, 3),), dtypes=F64)
B("arange:int", lambda m, x: x * m.arange(3), ((2, 3),))
B("arange:float_step", lambda m, x: x + m.arange(0.0, 1.5, 0.5), ((3,),))
B("arange:traced_bound", lambda m, x, n: x[: 3] * m.arange(n)[:3], ((4,), ()),
  dtypes=(("float64", "int64"),), domain=((-2, 2), (3, 5)))
B("linspace:static", lambda m, x: x * m.linspace(0.0, 1.0, 3), ((3,),))
B("linspace:traced", lambda m, a, b: m.linspace(a, b, 5), ((), ()))
B("linspace:traced_int_dtype", lambda m, a, b: m.linspace(a, b, 5, dtype=np.int32), ((), ()),
  dtypes=F64, domain=(-3, 3), order=None)
B("linspace:traced_noendpoint_retstep", lambda m, a, b: m.linspace(a, b, 4, endpoint=False,
                                                                   retstep=True),
  ((), ()), dtypes=F64)
B("logspace:static", lambda m, x: x * m.logspace(0.0, 1.0, 3), ((3,),))
B("logspace:traced", lambda m, a, b: m.logspace(a, b, 4), ((), ()), domain=(-1, 1))
B("geomspace:static", lambda m, x: x * m.geomspace(1.0, 8.0, 4), ((4,),))
B("array:list_of_tracers", lambda m, x: m.array([x[0], x[1] * 2, 1.0]), ((3,),))
B("array:nested", lambda m, x: m.array([[x[0], x[1]], [x[2], 0.0]], dtype=np.float64),
  ((3,),))
B("array:ndmin", lambda m, x: m.array(x, ndmin=3), ((3,),), dtypes=F64)
B("array:dtype_cast", lambda m, x: m.array(x, dtype=np.float32), ((3,),), dtypes=F64)
B("asarray:passthrough", lambda m, x: m.asarray(x) * 2, ((3,),))
B("asarray:dtype", lambda m, x: m.asarray(x, dtype=np.float64), ((3,),), dtypes=("float32",))
B("asarray:int_to_float", lambda m, x: m.asarray(x, dtype=np.float64), ((3,),),
  dtypes=("int32",), order=None)
B("ascontiguousarray:plain", lambda m, x: m.ascontiguousarray(x) + 1, ((2, 3),))
B("meshgrid:xy", lambda m, x, y: m.meshgrid(x, y), ((2,), (3,)))
B("meshgrid:ij_sparse", lambda m, x, y, z: m.meshgrid(x, y, z, indexing="ij", sparse=True),
  ((2,), (3,), (2,)), dtypes=F64)
B("indices:plain", lambda m, x: x * m.indices((2, 3))[1], ((2, 3),))
B("method:astype", lambda m, x: x.astype(np.float32) * 2, ((3,),), dtypes=F64)
B("method:astype_int", lambda m, x: x.astype(np.int32), ((3,),), dtypes=F64,
  domain=(off_integers(),), order=0)
B("method:len_iter_item", lambda m, x: sum(r * len(x) for r in x), ((3, 2),), dtypes=F64)
B("method:real_imag_conj", lambda m, x: x.real + x.imag + x.conj() + x.conjugate(), ((3,),),
  dtypes=F64)
B("method:round", lambda m, x: x.round() + x.round(1), ((3,),), domain=(off_integers(),),
  order=0, dtypes=F64)

# ---- numpy additions: tests, statistics, calculus, searching, construction -------------------

def _avoiding(points, gap=0.15, lo=-2.0, hi=2.0):
    """Values in (lo, hi) at least ``gap`` away from each of ``points`` (kinks, bin edges)."""
    def s(rng, shape, dt):
        x = rng.uniform(lo, hi, shape)
        for _ in range(100):
            bad = np.min(np.abs(x[..., None] - np.asarray(points)), axis=-1) < gap
            if not bad.any():
                break
            x = np.where(bad, rng.uniform(lo, hi, shape), x)
        return np.asarray(x).astype(dt)
    return s


def increasing(lo=-2.0, hi=2.0):
    """Sorted values at least (hi-lo)/(2n) apart (knots, bin edges, sorted arrays)."""
    def s(rng, shape, dt):
        return np.sort(distinct(lo, hi)(rng, shape, np.float64), axis=-1).astype(dt)
    return s


def _np_copy_update(fn):
    """numpy's in-place ``fn(a, ...)`` (fill_diagonal, put_along_axis) as a function returning
    the updated copy, which is what fnp returns."""
    def f(a, *args, **kw):
        out = np.array(a, copy=True)
        fn(out, *args, **kw)
        return out
    return f


# tests and comparisons: booleans used as masks; the row's gradient flows through the where
B("allclose:close_far", lambda m, x, y: m.where(m.allclose(x, x + 1e-9), x, y)
  + m.where(m.allclose(x, y, rtol=1e-3), x, y), ((2, 3), (3,)), dtypes=F64)
B("array_equal:same", lambda m, x: m.where(m.array_equal(x, x * 1.0), x, 0.0), ((2, 3),),
  dtypes=F64)
B("array_equal:shapes_nan", lambda m, x, y: m.asarray(m.array_equal(x, y)) +
  m.asarray(m.array_equal(x, x, equal_nan=True)), ((2, 3), (3,)), dtypes=F64, order=None,
  domain=(with_specials, (-2, 2)))
B("array_equiv:bcast", lambda m, x: m.where(m.array_equiv(x, x[:1]), 0.0, x), ((2, 3),),
  dtypes=F64)
case("iscomplex:complex", fnp.iscomplex, ((4,),), dtypes=("complex128",), order=None,
     domain=lambda rng: [np.array([1 + 1j, 2 + 0j, -0j, 1e-300j])])
case("iscomplex:real", fnp.iscomplex, ((2, 3),), dtypes=F64, order=0)
case("isreal:complex", fnp.isreal, ((4,),), dtypes=("complex64",), order=None,
     domain=lambda rng: [np.array([1 + 1j, 2 + 0j, -0j, 1e-30j])])
case("isreal:real", fnp.isreal, ((2, 3),), dtypes=("int32",), order=None)
B("iscomplexobj:scale", lambda m, x: x * (2 + m.iscomplexobj(x)), ((3,),), dtypes=F64)
B("isrealobj:scale", lambda m, x: x * (2 + m.isrealobj(x)), ((3,),), dtypes=F64)
case("isin:int", fnp.isin, ((2, 3),), dtypes=("int32",), domain=(0, 4), order=None,
     kwargs={"test_elements": np.array([[1], [3]])})
case("isin:invert_float", fnp.isin, ((5,), (3,)), dtypes=F64, order=0, kwargs={"invert": True},
     domain=lambda rng: [np.array([0.5, 1.0, 2.0, 1.5, -1.0]), np.array([1.0, -1.0, 7.0])])
_KINKS01 = (_avoiding((0.0, 1.0)),)
B("select:two", lambda m, x: m.select([x < 0, x > 1], [-x, x ** 2], default=0.5), ((2, 3),),
  domain=_KINKS01)
B("select:weak_default", lambda m, x, y: m.select([x > 0], [y]), ((2, 3), (3,)),
  dtypes=(("float64", "float32"),), domain=(away(0.2, 2), (-2, 2)), order=1)
B("piecewise:otherwise", lambda m, x: m.piecewise(x, [x < 0, x > 1],
                                                   [lambda v: -v, lambda v: v ** 2, 0.5]),
  ((2, 3),), domain=_KINKS01)
B("piecewise:one_cond_int", lambda m, x: m.piecewise(x, x < 2, [lambda v: v * 3, 1]), ((5,),),
  dtypes=("int32",), order=None, domain=(0, 4))

# quantiles (gradients flow to the neighbouring order statistics and to q)
case("quantile:scalar_q", fnp.quantile, ((7,),), domain=(distinct(),), kwargs={"q": 0.3})
case("quantile:axis_q_array", fnp.quantile, ((3, 5),), domain=(distinct(),), dtypes=F64,
     kwargs={"q": np.array([0.1, 0.5, 1.0]), "axis": 1, "keepdims": True})
B("quantile:traced_q", lambda m, x, q: m.quantile(x, q, axis=0), ((5, 2), (2,)), dtypes=F64,
  domain=(distinct(), (0.1, 0.9)))
B("quantile:methods", lambda m, x: m.stack([m.quantile(x, 0.35, method=k, axis=-1) for k in (
    "lower", "higher", "nearest", "midpoint")]), ((2, 6),), domain=(distinct(),), dtypes=F64)
case("quantile:int", fnp.quantile, ((6,),), dtypes=("int32",), order=None, kwargs={"q": 0.4})
case("percentile:axes", fnp.percentile, ((2, 3, 2),), domain=(distinct(),), dtypes=F64,
     kwargs={"q": [25.0, 50.0], "axis": (0, 2)})
case("nanquantile:axis1", fnp.nanquantile, ((2, 3),), domain=_with_nans((2, 3)), dtypes=F64,
     kwargs={"q": 0.4, "axis": 1})
case("nanquantile:all_nan_slice", fnp.nanquantile, ((2, 2),), dtypes=F64, order=None,
     kwargs={"q": 0.5, "axis": 0}, domain=lambda rng: [np.array([[np.nan, 1.0],
                                                                  [np.nan, 2.0]])])
case("nanpercentile:all", fnp.nanpercentile, ((2, 3),), domain=_with_nans((2, 3)), dtypes=F64,
     kwargs={"q": np.array([10.0, 90.0])})
case("nanmedian:all", fnp.nanmedian, ((2, 3),), domain=_with_nans((2, 3)), dtypes=F64)
case("nanmedian:axis0_keepdims", fnp.nanmedian, ((2, 3),), domain=_with_nans((2, 3)),
     dtypes=F64, kwargs={"axis": 0, "keepdims": True})
case("nanvar:all", fnp.nanvar, ((2, 3),), domain=_with_nans((2, 3)))
for _n in ("nanvar", "nanstd"):
    case(f"{_n}:axis1_ddof1", getattr(fnp, _n), ((2, 3),), domain=_with_nans((2, 3)),
         dtypes=F64, kwargs={"axis": 1, "ddof": 1, "keepdims": True})
case("nanstd:constant", fnp.nanstd, ((4,),), dtypes=F64, order=1,
     domain=lambda rng: [np.array([1.5, np.nan, 1.5, 1.5])])
case("nanprod:axis0", fnp.nanprod, ((2, 3),), domain=_with_nans((2, 3)), kwargs={"axis": 0},
     dtypes=F64)
for _n in ("nancumsum", "nancumprod"):
    case(f"{_n}:flat", getattr(fnp, _n), ((2, 3),), domain=_with_nans((2, 3)), dtypes=F64)
    case(f"{_n}:axis1_int", getattr(fnp, _n), ((2, 3),), dtypes=("int32",), order=None,
         kwargs={"axis": 1})
for _n in ("nanargmax", "nanargmin"):
    case(f"{_n}:axis1", getattr(fnp, _n), ((2, 3),), domain=_with_nans((2, 3)), order=0,
         dtypes=F64, kwargs={"axis": 1})
B("nanargmax:gather", lambda m, x: m.nanmax(x) * x[m.nanargmin(x)], ((5,),), dtypes=F64,
  domain=lambda rng: [np.array([0.3, np.nan, -1.2, 1.7, 0.9])])
case("cov:rowvar_bias", fnp.cov, ((4, 3),), dtypes=F64, kwargs={"rowvar": False, "bias": True})
B("cov:y_weights", lambda m, x, y, w: m.cov(x, y, fweights=np.array([1, 2, 1, 1]), aweights=w),
  ((4,), (4,), (4,)), dtypes=F64, domain=((-2, 2), (-2, 2), (0.5, 2)))
case("corrcoef:rows", fnp.corrcoef, ((3, 4),), dtypes=F64)
case("corrcoef:pair", fnp.corrcoef, ((4,), (4,)), dtypes=("float32",))

# differences, integration, interpolation, convolution, polynomials, i0
case("diff:axis0_n2", fnp.diff, ((4, 3),), kwargs={"n": 2, "axis": 0})
case("diff:prepend_append", fnp.diff, ((2, 3),), dtypes=F64,
     kwargs={"prepend": 0.5, "append": np.ones((2, 1))})
case("diff:bool", fnp.diff, ((5,),), dtypes=("bool", "int8"), order=None)
case("ediff1d:ends", fnp.ediff1d, ((2, 3),), kwargs={"to_begin": 0.5, "to_end": [1.0, 2.0]},
     dtypes=F64)
B("gradient:2d_spacing_edge2", lambda m, f: m.gradient(f, 0.5, edge_order=2), ((3, 4),))
B("gradient:traced_coords", lambda m, f, c: m.gradient(f, m.cumsum(c)),
  ((5,), (5,)), dtypes=F64, domain=((-2, 2), (0.5, 1.5)))
case("gradient:int", fnp.gradient, ((5,),), dtypes=("int32",), order=None)
case("trapezoid:dx", fnp.trapezoid, ((2, 4),), kwargs={"dx": 0.5}, dtypes=F64)
B("trapezoid:traced_x", lambda m, y, x: m.trapezoid(y, m.cumsum(x), axis=0), ((4, 2), (4,)),
  dtypes=F64, domain=((-2, 2), (0.5, 1.5)))
B("interp:traced", lambda m, x, xp, fp: m.interp(x, m.cumsum(xp), fp), ((6,), (4,), (4,)),
  dtypes=F64, domain=(_avoiding((0.5, 1.5, 2.5, 3.5, 4.5), 0.1, -0.5, 5.0), (0.9, 1.1),
                      (-2, 2)))
B("interp:period", lambda m, x, fp: m.interp(x, np.array([0.3, 1.0, 2.5]), fp, period=3.0),
  ((5,), (3,)), dtypes=F64, domain=(_avoiding((0.0, 0.3, 1.0, 2.5, 3.0), 0.1, -1.0, 4.0),
                                    (-2, 2)))
case("interp:f32_nan_left_right", fnp.interp, ((4,), (3,), (3,)), dtypes=("float32",),
     order=None, kwargs={"left": -9.0, "right": 9.0},
     domain=lambda rng: [np.array([np.nan, 1.0, -0.5, 2.5]), np.array([0.0, 1.0, 2.0]),
                         np.array([1.0, 3.0, 2.0])])
case("convolve:full", fnp.convolve, ((5,), (3,)), dtypes=F64)
case("convolve:same_short_a", fnp.convolve, ((2,), (4,)), dtypes=F64, kwargs={"mode": "same"})
case("convolve:int", fnp.convolve, ((4,), (2,)), dtypes=("int32",), order=None)
case("correlate:valid", fnp.correlate, ((5,), (3,)))
for _mode in ("same", "full"):
    case(f"correlate:{_mode}_short_a", fnp.correlate, ((2,), (5,)), dtypes=F64,
         kwargs={"mode": _mode})
case("correlate:complex", fnp.correlate, ((3,), (4,)), dtypes=("complex128",), order=None,
     kwargs={"mode": "same"})
case("polyval:2d", fnp.polyval, ((4,), (2, 3)))
case("polyval:int", fnp.polyval, ((3,), (4,)), dtypes=("int32",), domain=(-3, 3), order=None)
case("polyder:m2", fnp.polyder, ((5,),), kwargs={"m": 2}, dtypes=F64)
case("polyint:k", fnp.polyint, ((3,),), dtypes=F64, kwargs={"m": 2, "k": [1.0, 2.0]})
case("polyint:plain", fnp.polyint, ((3,),), dtypes=("float32",))
B("polyfit:weights_2d", lambda m, x, y, w: m.polyfit(x, y, 2, w=w), ((5,), (5, 2), (5,)),
  dtypes=F64, domain=(distinct(), (-2, 2), (0.5, 2)), trace_rtol=1e-9)
case("vander:N", fnp.vander, ((3,),), kwargs={"N": 4}, dtypes=F64)
case("vander:increasing_int", fnp.vander, ((3,),), dtypes=("int32",), order=None,
     kwargs={"increasing": True})
# (one row: its two 30-term Chebyshev series are the costliest kernels of these rows to compile)
case("i0:both_branches", fnp.i0, ((2, 3),), dtypes=F64, domain=(away(0.3, 12),))

# searching, binning, counting: integer results are indices and masks, with no gradient
case("searchsorted:left", fnp.searchsorted, ((5,), (2, 3)), domain=(increasing(), (-2.5, 2.5)),
     order=0, dtypes=F64)
for _side in ("left", "right"):
    case(f"searchsorted:sort_method_{_side}", lambda a, v, _s=_side: fnp.searchsorted(
        a, v, side=_s, method="sort"), ((5,), (4,)), dtypes=F64, order=None,
        np_fn=lambda a, v, _s=_side: np.searchsorted(a, v, side=_s),
        domain=lambda rng: [np.array([-1.0, 0.0, 0.0, 2.0, np.nan]),
                            np.array([0.0, np.nan, 3.0, -2.0])])
case("searchsorted:right_ties_nan", fnp.searchsorted, ((5,), (4,)), dtypes=F64, order=None,
     kwargs={"side": "right"}, domain=lambda rng: [np.array([-1.0, 0.0, 0.0, 2.0, np.nan]),
                                                   np.array([0.0, np.nan, 3.0, -2.0])])
B("searchsorted:as_index", lambda m, a, v: m.take(a, m.minimum(m.searchsorted(a, v), 4)) * v,
  ((5,), (3,)), dtypes=F64, domain=(increasing(), _avoiding(np.linspace(-2, 2, 5), 0.2)))
case("digitize:increasing", fnp.digitize, ((2, 3), (4,)), domain=((-2.5, 2.5), increasing()),
     order=0, dtypes=F64)
B("digitize:traced_decreasing_right", lambda m, x, b: m.digitize(x, -m.sort(b), right=True),
  ((2, 3), (4,)), domain=((-2.5, 2.5), distinct()), order=0, dtypes=F64)
case("bincount:plain", fnp.bincount, ((6,),), dtypes=("int64",), domain=(0, 4), order=None)
case("bincount:weights", fnp.bincount, ((6,), (6,)), dtypes=(("int64", "float64"),),
     domain=((0, 4), (-2, 2)), kwargs={"minlength": 7})
case("bincount:length", lambda x, w: fnp.bincount(x, w, length=3), ((6,), (6,)),
     dtypes=(("int32", "float64"),), domain=((0, 5), (-2, 2)),
     np_fn=lambda x, w: np.bincount(x[x < 3], w[x < 3], minlength=3))
case("histogram:bins4", fnp.histogram, ((12,),), domain=(distinct(),), kwargs={"bins": 4},
     order=1, dtypes=F64)
B("histogram:weights_density_range", lambda m, x, w: m.histogram(
    x, bins=3, range=(-2.0, 2.0), weights=w, density=True), ((10,), (10,)), dtypes=F64,
  domain=(_avoiding((-2 / 3, 2 / 3), 0.05), (0.5, 2)))
case("histogram:edges_int", fnp.histogram, ((8,),), dtypes=("int32",), domain=(0, 6),
     order=None, kwargs={"bins": np.array([0.0, 1.5, 2.0, 6.0])})
case("histogram_bin_edges:plain", fnp.histogram_bin_edges, ((8,),), domain=(distinct(),),
     dtypes=F64, kwargs={"bins": 3})
_REPEATS = lambda rng: [np.array([2.5, -1.0, 2.5, 0.5, -1.0, 3.0, 0.5, 2.5])]  # noqa: E731
# finite differences would split repeated values (a new shape): gradients on distinct ones
case("unique:distinct_values", fnp.unique, ((6,),), dtypes=F64, domain=(distinct(),))
case("unique:repeats", fnp.unique, ((8,),), dtypes=F64, domain=_REPEATS, order=None)
case("unique:all_outputs", fnp.unique, ((8,),), dtypes=F64, domain=_REPEATS, order=None,
     kwargs={"return_index": True, "return_inverse": True, "return_counts": True})
case("unique:size", lambda x: fnp.unique(x, return_counts=True, size=5, fill_value=-9.0),
     ((8,),), dtypes=F64, domain=_REPEATS, order=None,
     np_fn=lambda x: (np.r_[np.unique(x), -9.0], np.r_[np.unique(x, return_counts=True)[1],
                                                          0]))

# index tricks, index arithmetic, functional updates, numpy 2's spellings
B("r_:mixed", lambda m, x, y: m.r_[x, 0.5, 3:5, y], ((3,), (2,)), dtypes=F64)
B("c_:columns", lambda m, x, y: m.c_[x, y, x], ((3,), (3, 2)), dtypes=F64)
B("row_stack:pair", lambda m, x, y: m.vstack([x, y]) if m is np else m.row_stack([x, y]),
  ((3,), (2, 3)), dtypes=F64)
case("rollaxis:2", fnp.rollaxis, ((2, 3, 4),), kwargs={"axis": 2}, dtypes=F64)
case("rollaxis:start", fnp.rollaxis, ((2, 3, 4),), dtypes=F64, kwargs={"axis": 0, "start": 3})
B("tril_indices:gather", lambda m, x: x[m.tril_indices(3, -1)] + x[m.tril_indices_from(x)][0],
  ((3, 3),), dtypes=F64)
B("triu_indices:gather", lambda m, x: x[m.triu_indices(3, 1, 4)] * x[m.triu_indices_from(x)][1],
  ((3, 4),), dtypes=F64)
B("tril_indices_from:2d", lambda m, x: x[m.tril_indices_from(x, 1)], ((2, 3),), dtypes=F64)
B("triu_indices_from:2d", lambda m, x: x[m.triu_indices_from(x, -1)], ((3, 2),), dtypes=F64)
B("diag_indices:3d", lambda m, x: x[m.diag_indices(2, 3)] * x[m.diag_indices_from(x)],
  ((2, 2, 2),), dtypes=F64)
B("diag_indices_from:2d", lambda m, x: x[m.diag_indices_from(x)], ((3, 3),), dtypes=F64)
case("fill_diagonal:vector", fnp.fill_diagonal, ((3, 3), (3,)), dtypes=F64,
     np_fn=_np_copy_update(np.fill_diagonal))
case("fill_diagonal:wrap_cycle", lambda a, v: fnp.fill_diagonal(a, v, wrap=True),
     ((7, 3), (2,)), dtypes=F64,
     np_fn=lambda a, v: _np_copy_update(np.fill_diagonal)(a, v, True))
case("fill_diagonal:3d_scalar", lambda a: fnp.fill_diagonal(a, 5.0), ((2, 2, 2),),
     dtypes=F64, np_fn=lambda a: _np_copy_update(np.fill_diagonal)(a, 5.0))
case("put_along_axis:axis1", lambda a, v: fnp.put_along_axis(a, np.array([[1], [0]]), v, 1),
     ((2, 3), (2, 1)),
     np_fn=lambda a, v: _np_copy_update(np.put_along_axis)(a, np.array([[1], [0]]), v, 1))
case("put_along_axis:traced_idx_none", lambda a, i, v: fnp.put_along_axis(a, i, v, None),
     ((2, 3), (2,), (2,)), dtypes=(("float64", "int64", "float64"),),
     domain=lambda rng: [rng.uniform(-2, 2, (2, 3)), np.array([4, -6]), rng.uniform(-2, 2, 2)],
     np_fn=lambda a, i, v: _np_copy_update(np.put_along_axis)(a, i, v, None))
case("unravel_index:C", fnp.unravel_index, ((4,),), dtypes=("int64",), domain=(0, 5),
     order=None, kwargs={"shape": (2, 3)})
case("unravel_index:F", fnp.unravel_index, ((4,),), dtypes=("int32",), domain=(0, 5),
     order=None, kwargs={"shape": (2, 3), "order": "F"})
B("unravel_index:as_index", lambda m, x, i: m.take(x, m.ravel_multi_index(
    m.unravel_index(i, (2, 3)), (2, 3))), ((2, 3), (4,)),
  dtypes=(("float64", "int64"),), domain=((-2, 2), (0, 5)))
case("ravel_multi_index:C", lambda i, j: fnp.ravel_multi_index((i, j), (2, 3)),
     ((4,), (4,)), dtypes=("int64",), domain=((0, 1), (0, 2)), order=None,
     np_fn=lambda i, j: np.ravel_multi_index((i, j), (2, 3)))
case("ravel_multi_index:modes_F", lambda i, j: fnp.ravel_multi_index(
    (i, j), (2, 3), mode=("clip", "wrap"), order="F"), ((4,), (4,)), dtypes=("int64",),
    domain=((-3, 4), (-5, 6)), order=None,
    np_fn=lambda i, j: np.ravel_multi_index((i, j), (2, 3), mode=("clip", "wrap"), order="F"))
B("concat:axis1", lambda m, x, y: m.concat([x, y], axis=1), ((2, 3), (2, 1)), dtypes=F64)
case("permute_dims:axes", fnp.permute_dims, ((2, 3, 4),), kwargs={"axes": (2, 0, 1)},
     dtypes=F64)
case("matrix_transpose:3d", fnp.matrix_transpose, ((4, 2, 3),), dtypes=F64)
case("unstack:axis1", fnp.unstack, ((2, 3),), kwargs={"axis": 1}, dtypes=F64)
B("astype:f32", lambda m, x: m.astype(x, np.float32), ((2, 3),), dtypes=F64)
B("astype:int", lambda m, x: m.astype(x, np.int16), ((2, 3),), dtypes=F64,
  domain=(off_integers(),), order=0)
case("cumulative_sum:initial", fnp.cumulative_sum, ((2, 3),),
     kwargs={"axis": 1, "include_initial": True})
case("cumulative_prod:1d", fnp.cumulative_prod, ((4,),), domain=(0.5, 1.5), dtypes=F64)
case("vecmat:batched", fnp.vecmat, ((4, 2), (4, 2, 3)))
case("vecmat:complex", fnp.vecmat, ((2,), (2, 3)), dtypes=("complex128",), order=None)

# numpy 2's names of the inverse trigonometric functions and of power
for _n, _dom in (("acos", (-0.9, 0.9)), ("asin", (-0.9, 0.9)), ("atan", (-3, 3)),
                 ("acosh", (1.2, 3)), ("asinh", (-3, 3)), ("atanh", (-0.9, 0.9))):
    case(f"{_n}:2x3", getattr(fnp, _n), ((2, 3),), domain=_dom, dtypes=F64)
case("atan2:bcast", fnp.atan2, ((2, 3), (3,)), domain=((-2, 2), away(0.3, 2)), dtypes=F64)
B("pow:int_and_array", lambda m, x, y: m.pow(x, 2) + m.pow(x, y), ((2, 3), (3,)),
  domain=((0.5, 2), (-2, 2)))

# ---- functrace.scipy (special and stats): the rows live in scipy_cases.py -------------------
from scipy_cases import add_rows as _add_scipy_rows  # noqa: E402

_add_scipy_rows(case)

COVERED_PROTOCOLS = ("op", "getitem", "at", "method")


# --------------------------------------------------------------------------------------------
# helpers shared by the suites that run the table through other backends
# --------------------------------------------------------------------------------------------

def bound_fn(c: OpCase) -> Callable:
    """The row's function with its keyword arguments bound."""
    import functools
    return functools.partial(c.fn, **c.kwargs) if c.kwargs else c.fn


def weighted_grad(c: OpCase, dt):
    """``(grad_fn, float_args, low_precision)`` for row ``c`` at ``dt``: the gradient, with
    respect to the row's float arguments, of ``sum(out * W)`` over its outputs with fixed
    random weights ``W`` (how the jit and CUDA suites compare a row's gradients)."""
    import warnings

    import functrace as ft
    from functrace import tree_util
    args = c.make_args(dt)
    fidx = [i for i, d in enumerate(c.arg_dtypes(dt)) if np.dtype(d).kind == "f"]
    fn = bound_fn(c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = tree_util.tree_leaves(fn(*args))
    rng = np.random.default_rng(1234)
    weights = [rng.standard_normal(np.shape(o)).astype(
        np.asarray(o).dtype if np.asarray(o).dtype.kind == "f" else args[fidx[0]].dtype)
        for o in outs]

    def loss(*fargs):
        full = list(args)
        for i, a in zip(fidx, fargs, strict=True):
            full[i] = a
        total = 0.0
        for o, w in zip(tree_util.tree_leaves(fn(*full)), weights, strict=True):
            if np.dtype(o.dtype) != w.dtype:
                o = fnp.asarray(o, dtype=w.dtype)
            total = total + fnp.sum(o * w)
        return total

    g = ft.grad(loss, argnums=tuple(range(len(fidx))))
    low = any(np.asarray(o).dtype == np.float32 for o in outs) or any(
        np.dtype(d) == np.float32 for d in c.arg_dtypes(dt))
    return g, [args[i] for i in fidx], low


def backend_rows(grad: bool, skip=lambda c: False) -> list[tuple[OpCase, Any]]:
    """(row, dtype) pairs a compiled backend is checked on: rows that trace, and for ``grad``
    rows with a float argument and a gradient check. float32 variants of gradient rows are
    skipped when a float64 variant exists (it covers the same kernels' code); complex and
    float16 never reach a kernel (numpy runs them). ``skip(row)`` drops more rows."""
    rows = []
    for c in CASES:
        # scipy.stats rows are compositions of the scipy.special rows' ops: their large fused
        # kernels cost minutes of numba compile for no new kernel code
        if c.name.startswith("scipy.stats."):
            continue
        if skip(c) or any(k in ("traced", "eager") for k, _ in c.xfail):
            continue
        if grad and (c.order is None or any(k == "grad" for k, _ in c.xfail)):
            continue
        for dt in c.dtypes:
            dts = c.arg_dtypes(dt)
            if grad and not any(np.dtype(d).kind == "f" for d in dts):
                continue
            if grad and any(np.dtype(d) == np.float32 for d in dts) and len(c.dtypes) > 1:
                continue
            if any(np.dtype(d).kind == "c" or np.dtype(d) == np.float16 for d in dts):
                continue
            rows.append((c, dt))
    return rows
