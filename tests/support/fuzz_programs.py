"""Random programs for the differential fuzzer (``tests/backends/test_fuzz.py``, docs/testing.md).

A *program* is data: input shapes, a list of steps (an op, the values it reads, its constant
parameters) and the values it returns. ``run_program(prog, xp, args)`` evaluates it with any
numpy-like namespace: ``xp=np`` on arrays is the plain-numpy reference, ``xp=fnp`` inside a
transform is the functrace program. So one description gives both sides of every comparison,
and a failing program prints as a literal that ``tests/support/fuzz_regressions.py`` keeps.

``programs()`` is the hypothesis strategy: 5-20 steps drawn from elementwise math (unary,
binary, with constants, ``where``, ``clip``, integer powers), broadcasts, reductions over
axes, views (reshape, transpose, slices with steps, flips, squeeze/expand, swapaxes),
contractions (matmul, dot, einsum), gathers (integer-array indexing, ``take``),
``concatenate``, ``pad``, ``cumsum``, ``softmax`` and ``logsumexp``, in float32 or float64;
about one program in six also has control flow (``scan``, ``fori_loop`` with static or traced
bounds, ``map``, ``while_loop``, ``cond``/``switch``, one level nested in another), whose
numpy side is the Python loop or ``if``. Input values come from a
drawn seed: ordinary values mixed with +-0, +-inf, NaN, subnormals and huge values for value
checks; ordinary values of moderate size for gradient checks.

The checks themselves (compiled vs interpreter vs numpy, jit(grad) vs grad, vmap vs a loop,
with their tolerances) are in ``tests/support/fuzz_check.py``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import os
import random
from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

import functrace as ft

__all__ = ["Step", "Prog", "S", "P", "programs", "generate", "random_program", "random_batch",
           "run_program", "make_args", "value_shapes", "BASES", "fuzz_seed", "has_control_flow",
           "CONTROL"]

MAX_SIZE = 48          # elements per value: kernels compile the same, numpy stays cheap
MAX_DIM = 5

# --------------------------------------------------------------------------------------------
# program data
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Step:
    """``op`` (a key of ``OPS``) applied to the values ``args`` with constants ``params``."""

    op: str
    args: tuple[int, ...]
    params: tuple = ()

    def __repr__(self):
        return f"S({self.op!r}, {self.args!r}, {self.params!r})"


@dataclasses.dataclass(frozen=True)
class Prog:
    """A program: value ``i < len(inputs)`` is input ``i``, value ``len(inputs) + k`` is the
    result of ``steps[k]``; ``outputs`` are value indices. ``seed`` makes the input values;
    ``special`` is the fraction of special values (inf, NaN, +-0, subnormal, huge) in the
    value-check inputs; ``values`` (nested tuples, one per input) replaces them, for
    hand-written regressions."""

    dtype: str
    inputs: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    seed: int = 0
    special: float = 0.25
    values: tuple | None = None

    def __repr__(self):
        steps = ",\n    ".join(repr(s) for s in self.steps)
        extra = "" if self.values is None else f", values={self.values!r}"
        return (f"P({self.dtype!r}, {self.inputs!r}, (\n    {steps},\n), "
                f"outputs={self.outputs!r}, seed={self.seed}, special={self.special}{extra})")

    def source(self) -> str:
        """The program as readable Python (``xp`` is numpy or functrace.numpy)."""
        n = len(self.inputs)
        names = [f"x{i}" for i in range(n)]
        lines = [f"def f({', '.join(names)}):"]
        _source_steps(self.steps, names, "v", "    ", lines)
        lines.append(f"    return {', '.join(names[o] for o in self.outputs)}")
        return "\n".join(lines)


#: the inputs of a control-flow step's bodies (see "control flow" below), by name
_BODY_INPUTS = {"scan": ("carry", "row"), "fori": ("i", "carry"), "while": ("x",),
                "fori_traced": ("i", "carry"), "map": ("row",)}
#: leading arguments of a control-flow step that its bodies do not close over
_NOT_OUTER = {"scan": 2, "fori_traced": 2}


def _source_steps(steps, names, prefix, indent, lines):
    """Append the lines of ``steps`` (their values named ``prefix<k>``) to ``lines``; a
    control-flow step's bodies follow it, indented."""
    for s in steps:
        args = ", ".join(names[a] for a in s.args)
        if s.op in _BODY_INPUTS or s.op == "cond":
            bodies = s.params[0] if s.op == "cond" else (s.params[0],)
            rest = s.params[1:]
            lines.append(f"{indent}{prefix}{len(names)} = {s.op}({args}, "
                         f"{', '.join(repr(p) for p in rest)}) with")
            fixed = _BODY_INPUTS.get(s.op, ())
            outer = [names[a] for a in s.args[_NOT_OUTER.get(s.op, 1):]]
            if s.op == "cond":
                fixed, outer = (), outer
            for b, (bsteps, bouts) in enumerate(bodies):
                bnames = list(fixed) + outer
                lines.append(f"{indent}  {'branch ' + str(b) if s.op == 'cond' else 'body'}"
                             f"({', '.join(bnames)}):")
                p = f"{prefix}{len(names)}_{b}_" if s.op == "cond" else f"{prefix}{len(names)}_"
                _source_steps(bsteps, bnames, p, indent + "    ", lines)
                lines.append(f"{indent}    return {', '.join(bnames[o] for o in bouts)}")
        else:
            lines.append(f"{indent}{prefix}{len(names)} = {s.op}({args}"
                         f"{', ' if s.params else ''}{', '.join(repr(p) for p in s.params)})")
        names.append(f"{prefix}{len(names)}")


S, P = Step, Prog       # short names for the literals printed by repr (fuzz_regressions.py)


def value_shapes(prog: Prog) -> list[tuple[int, ...]]:
    """Shape of every value of the program (by evaluating it on zeros with numpy)."""
    vals = run_program(prog, np, [np.zeros(s, prog.dtype) for s in prog.inputs], all_values=True)
    return [np.shape(v) for v in vals]


# --------------------------------------------------------------------------------------------
# evaluation: one table, any numpy-like namespace
# --------------------------------------------------------------------------------------------

def _const(c, dt):
    """A constant parameter: a Python float stays a (weakly typed) scalar, a nested tuple
    becomes an array of the program's dtype."""
    if isinstance(c, tuple):
        return np.asarray(c, dtype=dt)
    return c


def _slice_index(spec):
    return tuple(slice(*e) if isinstance(e, tuple) else e for e in spec)


def _unary(name):
    return lambda xp, dt, a: getattr(xp, name)(a)


def _binary(name):
    return lambda xp, dt, a, b: getattr(xp, name)(a, b)


def _binary_const(name):
    def f(xp, dt, a, c, side):
        c = _const(c, dt)
        fn = getattr(xp, name)
        return fn(a, c) if side == 0 else fn(c, a)
    return f


def _reduce(xp, dt, a, name, axis, keepdims):
    return getattr(xp, name)(a, axis=axis, keepdims=keepdims)


def _softmax(xp, dt, a, axis):
    """functrace's softmax op (``ft.nn.softmax``); on numpy, the textbook formula with
    logsumexp's convention that a non-finite maximum shifts by 0 (a row of all -inf is NaN,
    a +inf gives NaN there and 0 elsewhere), and a true division where the kernel multiplies
    by ``1 / sum``."""
    if xp is not np:
        return ft.nn.softmax(a, axis=axis)
    a = np.asarray(a)
    with np.errstate(all="ignore"):
        m = np.max(a, axis=axis, keepdims=True)
        e = np.exp(a - np.where(np.isfinite(m), m, 0).astype(a.dtype))
        return (e / np.sum(e, axis=axis, keepdims=True)).astype(a.dtype)


def _logsumexp(xp, dt, a, axis, keepdims):
    """``fnp.logsumexp`` (whose gradient is a softmax with all -inf rows giving 0); on numpy,
    the formula with a non-finite maximum shifted by 0, as docs/numerics.md says."""
    if xp is not np:
        return xp.logsumexp(a, axis=axis, keepdims=keepdims)
    a = np.asarray(a)
    with np.errstate(all="ignore"):
        m = np.max(a, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(a.dtype)
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
        return (out if keepdims else np.squeeze(out, axis=axis)).astype(a.dtype)


def _where(xp, dt, c1, c2, a, b):
    return xp.where(xp.greater(c1, c2), a, b)


def _where_const(xp, dt, c1, a, b, thr):
    return xp.where(c1 > _const(thr, dt), a, b)


def _expand_broadcast(xp, dt, a, axis, shape):
    return xp.broadcast_to(xp.expand_dims(a, axis), shape)


def _matmul(xp, dt, a, b):
    return xp.matmul(a, b)


def _matmul_const(xp, dt, a, c, side):
    c = _const(c, dt)
    return xp.matmul(a, c) if side == 0 else xp.matmul(c, a)


def _matmul_self_t(xp, dt, a, side):
    t = xp.swapaxes(a, -1, -2)
    return xp.matmul(a, t) if side == 0 else xp.matmul(t, a)


def _gather(xp, dt, a, idx, axis):
    idx = np.asarray(idx, dtype=np.int64)
    if axis == 0:
        return a[idx]
    return xp.take(a, idx, axis=axis)


def _concat_const(xp, dt, a, c, axis, side):
    c = _const(c, dt)
    return xp.concatenate([a, c] if side == 0 else [c, a], axis=axis)


#: op key -> function(xp, dtype, *arg values, *params)
OPS: dict = {
    "reshape": lambda xp, dt, a, shape: xp.reshape(a, shape),
    "transpose": lambda xp, dt, a, perm: xp.transpose(a, perm),
    "slice": lambda xp, dt, a, spec: a[_slice_index(spec)],
    "flip": lambda xp, dt, a, axis: xp.flip(a, axis),
    "squeeze": lambda xp, dt, a, axis: xp.squeeze(a, axis),
    "swapaxes": lambda xp, dt, a, i, j: xp.swapaxes(a, i, j),
    "moveaxis": lambda xp, dt, a, i, j: xp.moveaxis(a, i, j),
    "ravel": lambda xp, dt, a: xp.ravel(a),
    "expand_broadcast": _expand_broadcast,
    "broadcast_to": lambda xp, dt, a, shape: xp.broadcast_to(a, shape),
    "reduce": _reduce,
    "softmax": _softmax,
    "logsumexp": _logsumexp,
    "cumsum": lambda xp, dt, a, axis: xp.cumsum(a, axis=axis),
    "where": _where,
    "where_const": _where_const,
    "clip": lambda xp, dt, a, lo, hi: xp.clip(a, lo, hi),
    "ipow": lambda xp, dt, a, k: a ** k,
    "matmul": _matmul,
    "matmul_const": _matmul_const,
    "matmul_self_t": _matmul_self_t,
    "einsum": lambda xp, dt, *a: xp.einsum(a[-1], *a[:-1]),
    "gather": _gather,
    "concat": lambda xp, dt, a, b, axis: xp.concatenate([a, b], axis=axis),
    "concat_const": _concat_const,
    "pad": lambda xp, dt, a, width, c: xp.pad(a, width, constant_values=c),
}

UNARY = ["negative", "abs", "exp", "log", "sin", "cos", "tanh", "sqrt", "square", "expm1",
         "log1p", "arctan", "tan", "sinh", "cosh", "arcsinh", "exp2", "log2", "log10",
         "reciprocal", "floor", "sign", "cbrt", "rint", "arcsin", "arccos", "arctanh",
         "arccosh", "ceil", "trunc", "fabs", "deg2rad"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "arctan2",
          "hypot", "logaddexp", "copysign", "fmod", "floor_divide", "remainder", "heaviside"]
REDUCE = ["sum", "max", "min", "mean", "prod"]
for _n in UNARY:
    OPS[_n] = _unary(_n)
for _n in BINARY:
    OPS[_n] = _binary(_n)
    OPS[_n + "_c"] = _binary_const(_n)


# --------------------------------------------------------------------------------------------
# control flow: a step whose params hold sub-programs (bodies, branches)
# --------------------------------------------------------------------------------------------
#
# A body is ``(steps, outputs)`` over its own values: its inputs (listed per construct below),
# then one value per step; ``outputs`` index them. With ``xp=np`` a construct runs as a plain
# Python loop or ``if``; with ``functrace.numpy`` it is ``ft.scan`` / ``ft.fori_loop`` /
# ``ft.while_loop`` / ``ft.cond`` / ``ft.switch``, or, under ``unrolled(decisions)``, the same
# Python loop again (every branch index and while trip count replayed from ``decisions``, the
# list a numpy run recorded), so the unrolled program traces without reading a value.
#
#   scan  (init, xs, *outer; body, reverse, which)   body inputs: carry, row, *outer
#         -> final carry (which 0), the stacked ys (1), or both raveled and concatenated (2)
#   fori  (init, *outer; body, lower, upper)          body inputs: float(i), carry, *outer
#   fori_traced (init, p, *outer; body, lower, limit, thr)   the same body, from ``lower`` to
#         ``lower + min(count(p > thr), limit)``: a traced upper bound (``ft.fori_loop``
#         makes it a while loop), decided by the values
#   map   (xs, *outer; body)                          body inputs: row, *outer -> the stacked
#         results (``ft.map``)
#   while (init, *outer; body, limit, test, thr, which) carry (i, x): while i < limit and
#         test(x) (sum < thr, max < thr or min > thr): x = body(x), i += 1 -> x (+ i if which)
#   cond  (p, *operands; branches, thresholds)        branch inputs: the operands; the branch
#         taken is the number of thresholds below sum(p) (ft.cond for two branches)

#: None: structured constructs (functrace) / Python loops (numpy); ``[decisions, position,
#: off]`` (see ``unrolled``): numpy appends its decisions, functrace replays them
_DECISIONS: contextvars.ContextVar = contextvars.ContextVar("fuzz_decisions", default=None)

CONTROL = ("scan", "fori", "while", "cond", "fori_traced", "map")


def has_control_flow(prog: Prog) -> bool:
    return any(s.op in CONTROL for s in prog.steps)


def _run_steps(xp, dt, steps, vals):
    wrap = np.asarray if xp is np else (lambda v: v)
    vals = [wrap(v) for v in vals]
    for s in steps:
        vals.append(wrap(OPS[s.op](xp, dt, *[vals[a] for a in s.args], *s.params)))
    return vals


def _body(xp, dt, body, ins):
    steps, outs = body
    vals = _run_steps(xp, dt, steps, ins)
    return [vals[o] for o in outs]


def _python(xp) -> bool:
    """Whether constructs run as Python loops (numpy, or functrace replaying decisions)."""
    return xp is np or _DECISIONS.get() is not None


def _decide(xp, value):
    """A run-time decision: computed (and recorded) by numpy, replayed by functrace."""
    rec = _DECISIONS.get()
    if xp is np:
        if rec is None:
            return value()
        rec[0].append(None)     # before the decisions made while computing this one
        pos = len(rec[0]) - 1
        rec[0][pos] = value()
        return rec[0][pos]
    v = rec[0][rec[1]]
    rec[1] += 1
    return v


def _reaching(fns, operands):
    """The operands that reach a branch's result through differentiable ops in some branch:
    those ``ft.cond``'s reverse pass gives a (dense, zero where untaken) cotangent."""
    from functrace.autodiff import active_vars
    from functrace.tracing import trace_to_graph
    avals = [ft.AVal(np.shape(o), np.dtype(o.dtype)) for o in operands]
    keep = set()
    token = _DECISIONS.set(None)     # traced as functrace constructs: no replayed decisions
    try:
        graphs = [trace_to_graph(lambda *xs, fn=fn: [fn(*xs)], avals).graph for fn in fns]
    finally:
        _DECISIONS.reset(token)
    for g in graphs:
        outs = {o for o in g.outputs if hasattr(o, "aval") and not hasattr(o, "val")}
        keep |= {i for i in range(len(operands)) if not outs.isdisjoint(active_vars(g, [i]))}
    return [o for i, o in enumerate(operands) if i in keep]


def _tie(xp, outs, ins):
    """Unrolled functrace: ``outs`` made to depend on ``ins`` with a zero derivative
    (``where(off, sum(ins), out)``, ``off`` a False input), so that ``ins`` receive zero
    cotangents, not none. A loop's reverse pass gives every float carry a cotangent in every
    trip (zeros where it does not matter), and ``cond``'s gives one to every operand that
    some branch differentiates; a zero times an infinite derivative downstream is NaN: the
    unrolled program does the same. (Inputs that reach no result through differentiable ops
    get none from either.) Values unchanged."""
    rec = _DECISIONS.get()
    ins = [a for a in ins if np.dtype(a.dtype).kind == "f"]
    if xp is np or rec is None or not ins:
        return outs
    z = sum(xp.sum(a) for a in ins)
    return [xp.where(rec[2], z, o) for o in outs]


def _scan(xp, dt, init, xs, *outer, body, reverse, which):
    def step(c, row):
        c, y = _tie(xp, _body(xp, dt, body, [c, row, *outer]), [c])
        return c, y
    if _python(xp):
        n = xs.shape[0]
        c, ys = init, [None] * n
        for j in (range(n - 1, -1, -1) if reverse else range(n)):
            c, ys[j] = step(c, xs[j])
        ys = xp.stack(ys)
    else:
        c, ys = ft.scan(step, init, xs, reverse=reverse)
    if which == 0:
        return c
    if which == 1:
        return _tie(xp, [ys], [c])[0]       # the final carry's cotangent is zeros
    return xp.concatenate([xp.ravel(c), xp.ravel(ys)])


def _fori(xp, dt, init, *outer, body, lower, upper):
    def step(i, c):
        return _tie(xp, _body(xp, dt, body, [xp.asarray(i, dtype=dt), c, *outer]), [c])[0]
    if _python(xp):
        c = init
        for i in range(lower, upper):
            c = step(np.int64(i), c)
        return c
    return ft.fori_loop(lower, upper, step, init)


def _fori_traced(xp, dt, init, p, *outer, body, lower, limit, thr):
    def step(i, c):
        return _tie(xp, _body(xp, dt, body, [xp.asarray(i, dtype=dt), c, *outer]), [c])[0]
    if _python(xp):
        n = _decide(xp, lambda: min(int(np.sum(np.greater(p, thr))), limit))
        c = init
        for i in range(lower, lower + n):
            c = step(np.int64(i), c)
        return _tie(xp, [c], [init])[0]
    # a traced bound: the count of p's elements above thr, at most limit
    upper = lower + xp.minimum(xp.sum(xp.greater(p, thr).astype(np.int64)), limit)
    return ft.fori_loop(lower, upper, step, init)


def _map(xp, dt, xs, *outer, body):
    def f(row):
        return _body(xp, dt, body, [row, *outer])[0]
    if _python(xp):
        return xp.stack([f(xs[j]) for j in range(xs.shape[0])])
    return ft.map(f, xs)


def _test(xp, x, test, thr):
    if test == "sum_lt":
        return xp.sum(x) < thr
    if test == "max_lt":
        return xp.max(x) < thr
    return xp.min(x) > thr


def _while(xp, dt, init, *outer, body, limit, test, thr, which):
    def step_with(x, outer):
        return _body(xp, dt, body, [x, *outer])[0]

    def step(x):
        return _tie(xp, _body(xp, dt, body, [x, *outer]), [x])[0]
    if _python(xp):
        x, i = init, 0
        if xp is np:
            def trips():
                nonlocal x, i
                while i < limit and bool(_test(np, x, test, thr)):
                    x, i = step(x), i + 1
                return i
            _decide(xp, trips)
        else:
            for _ in range(_decide(xp, None)):
                x, i = step(x), i + 1
            # the while loop's reverse pass gives init and every closed-over value the body
            # differentiates a cotangent, zero trips or not (see ``_tie``)
            reached = _reaching([lambda x_, *o: step_with(x_, o)], [init, *outer])
            x = _tie(xp, [x], [init] + [o for o in reached if o is not init])[0]
    else:
        i, x = ft.while_loop(lambda c: xp.logical_and(c[0] < limit, _test(xp, c[1], test, thr)),
                             lambda c: (c[0] + 1, step(c[1])), (np.int64(0), init))
    return x + xp.asarray(i, dtype=dt) if which else x


def _cond(xp, dt, p, *operands, branches, thresholds):
    fns = [lambda *ops, b=b: _body(xp, dt, b, list(ops))[0] for b in branches]
    s = xp.sum(p)
    if _python(xp):
        k = _decide(xp, lambda: sum(bool(s > t) for t in thresholds))
        tied = operands if xp is np or _DECISIONS.get() is None else _reaching(fns, operands)
        return _tie(xp, [fns[k](*operands)], tied)[0]
    if len(branches) == 2:
        return ft.cond(s > thresholds[0], fns[1], fns[0], *operands)
    idx = sum(xp.asarray(s > t, dtype=np.int32) for t in thresholds)
    return ft.switch(idx, fns, *operands)


def _keywords(fn, names):
    return lambda xp, dt, *a: fn(xp, dt, *a[:-len(names)], **dict(zip(names, a[-len(names):])))


OPS["scan"] = _keywords(_scan, ("body", "reverse", "which"))
OPS["fori"] = _keywords(_fori, ("body", "lower", "upper"))
OPS["while"] = _keywords(_while, ("body", "limit", "test", "thr", "which"))
OPS["fori_traced"] = _keywords(_fori_traced, ("body", "lower", "limit", "thr"))
OPS["map"] = _keywords(_map, ("body",))
OPS["cond"] = _keywords(_cond, ("branches", "thresholds"))


@contextlib.contextmanager
def unrolled(decisions: list, off=None):
    """Within: numpy appends its decisions (branch indices, trip counts) to ``decisions``,
    functrace replays them from the start as the unrolled Python program. ``off``: a False
    boolean scalar, an input of the traced function (see ``_tie``)."""
    token = _DECISIONS.set([decisions, 0, off])
    try:
        yield
    finally:
        _DECISIONS.reset(token)


def run_program(prog: Prog, xp, args: Sequence, all_values: bool = False):
    """Evaluate ``prog`` with namespace ``xp`` (numpy, or functrace.numpy under a transform).
    Returns the list of outputs (every value with ``all_values``)."""
    dt = np.dtype(prog.dtype)
    # with numpy, every value stays an array: numpy's scalar arithmetic is not its ufuncs'
    # (np.float32(-2.9743292) ** 2 is 8.846635, np.square gives 8.846634)
    with np.errstate(all="ignore"):
        vals = _run_steps(xp, dt, prog.steps, args)
    if all_values:
        return vals
    return [vals[o] for o in prog.outputs]


# --------------------------------------------------------------------------------------------
# input values
# --------------------------------------------------------------------------------------------

SPECIAL64 = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, -2.2250738585072014e-308,
             1e300, -1e300, 1.7976931348623157e308, -1e30, 710.0, -746.0, 1e16, 1.0, -1.0, 0.5]
SPECIAL32 = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1.1754944e-38, 1e38,
             -1e38, 3.4028235e38, -1e20, 89.0, -104.0, 1e8, 1.0, -1.0, 0.5]


def make_args(prog: Prog, kind: str, batch: int | None = None) -> list[np.ndarray]:
    """Input arrays: ``kind="special"`` mixes ordinary values with special ones,
    ``kind="smooth"`` gives moderate values (gradient checks). ``batch``: a leading axis."""
    rng = np.random.default_rng([prog.seed, 0 if kind == "special" else 1, batch or 0])
    dt = np.dtype(prog.dtype)
    if kind == "special" and prog.values is not None and not batch:
        return [np.asarray(v, dtype=dt).reshape(s) for v, s in zip(prog.values, prog.inputs)]
    out = []
    for shape in prog.inputs:
        shape = ((batch,) if batch else ()) + tuple(shape)
        if kind == "smooth":
            x = rng.uniform(0.25, 1.75, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            x = rng.uniform(-3, 3, shape)
            special = np.array(SPECIAL64 if dt == np.float64 else SPECIAL32)
            mask = rng.random(shape) < prog.special
            x = np.where(mask, rng.choice(special, shape), x)
        out.append(np.asarray(x, dtype=dt))
    return out


# --------------------------------------------------------------------------------------------
# generation: the same code draws from a random.Random or through hypothesis
# --------------------------------------------------------------------------------------------

def _size(shape) -> int:
    return math.prod(shape)


def _shapes(draw, base=None, max_rank=3, max_size=MAX_SIZE):
    if base is not None and draw.int(0, 4) > 0:
        # a batch of programs over related shapes fuses into fewer, larger kernels
        shape = list(base[draw.int(0, len(base)):])
        for i in range(len(shape)):
            if draw.int(0, 5) == 0:
                shape[i] = 1
        if len(shape) > 1 and draw.int(0, 3) == 0:
            shape = shape[::-1]
        return tuple(shape)
    rank = draw.int(0, max_rank)
    dims = []
    for _ in range(rank):
        dims.append(draw.int(1, MAX_DIM))
        if _size(dims) > max_size:
            dims[-1] = 1
    return tuple(dims)


def _factorisations(n: int, max_rank=4):
    """Shapes of size ``n`` (rank <= max_rank, dims <= 2 * MAX_DIM)."""
    out = [(n,)] if n <= 2 * MAX_DIM * 4 else []
    if n == 1:
        out += [(), (1, 1)]

    def rec(rest, prefix):
        if len(prefix) >= max_rank:
            return
        for d in range(1, min(rest, 2 * MAX_DIM) + 1):
            if rest % d == 0:
                shape = prefix + (d,)
                if rest // d == 1:
                    out.append(shape)
                else:
                    rec(rest // d, shape)
    rec(n, ())
    return sorted(set(out)) or [(n,)]


def _scalar(draw, dt):
    return draw.pick([2.0, 0.5, -3.0, 1.5, -0.0, 0.0, 1e-3, 7.0, -1.0])


def _const_array(draw, shape, dt, rng):
    x = rng.uniform(-2, 2, shape).astype(dt)
    return _totuple(x)


def _totuple(x):
    if x.ndim == 0:
        return float(x)
    return tuple(_totuple(r) if r.ndim else float(r) for r in x)


def _compatible(shape_a, shape_b):
    try:
        out = np.broadcast_shapes(shape_a, shape_b)
    except ValueError:
        return None
    return out if _size(out) <= MAX_SIZE else None


def _pick_value(draw, shapes, pred=lambda s: True, recent=True):
    """A value index: usually one of the last few (chains), sometimes any earlier value."""
    ok = [i for i, s in enumerate(shapes) if pred(s)]
    if not ok:
        return None
    if recent and draw.int(0, 9) < 7:
        return ok[-1 - draw.int(0, min(2, len(ok) - 1))]
    return draw.pick(ok)


def _broadcastable_shape(draw, shape):
    """A shape that broadcasts against ``shape`` (a suffix, with some axes set to 1)."""
    k = draw.int(0, len(shape))
    sub = list(shape[k:])
    for i in range(len(sub)):
        if draw.int(0, 3) == 0:
            sub[i] = 1
    return tuple(sub)


#: step kinds of a program, by weight
KINDS = (["unary"] * 5 + ["binary"] * 4 + ["binary_c"] * 3 + ["view"] * 6 + ["reduce"] * 3 +
         ["where"] * 2 + ["ipow", "clip", "matmul", "matmul", "einsum", "gather", "gather",
                          "concat", "pad", "cumsum", "broadcast", "softmax"])


def _draw_step(draw, shapes, dt, rng, kinds=KINDS, depth=0):
    """One step: (Step, its result shape) or None when the drawn kind does not fit.
    ``kinds``: the kinds to draw from; ``depth``: of a control-flow step (0: outermost)."""
    kind = draw.pick(kinds)
    if kind in CONTROL:
        return _draw_control(draw, kind, shapes, dt, rng, depth)
    a = _pick_value(draw, shapes)
    sa = shapes[a]
    if kind == "unary":
        return Step(draw.pick(UNARY), (a,)), sa
    if kind == "binary":
        name = draw.pick(BINARY)
        if draw.int(0, 5) == 0:
            return Step(name, (a, a)), sa
        b = _pick_value(draw, shapes, lambda s: _compatible(sa, s) is not None, recent=False)
        if b is None:
            return None
        return Step(name, (a, b) if draw.bool() else (b, a)), _compatible(sa, shapes[b])
    if kind == "binary_c":
        name = draw.pick(BINARY)
        if sa and draw.int(0, 2) == 0:
            c = _const_array(draw, _broadcastable_shape(draw, sa), dt, rng)
        else:
            c = _scalar(draw, dt)
        return Step(name + "_c", (a,), (c, draw.int(0, 1))), sa
    if kind == "ipow":
        return Step("ipow", (a,), (draw.pick([2, 3, -1, 4, 0, 1]),)), sa
    if kind == "clip":
        lo = draw.pick([-1.0, -0.5, 0.0])
        return Step("clip", (a,), (lo, lo + draw.pick([0.5, 1.0, 2.0]))), sa
    if kind == "where":
        if draw.bool():
            c = _pick_value(draw, shapes, lambda s: _compatible(sa, s) is not None, False)
            b = _pick_value(draw, shapes, lambda s: _compatible(sa, s) is not None, False)
            if b is None or c is None:
                return None
            out = _compatible(_compatible(sa, shapes[c]), shapes[b])
            if out is None:
                return None
            return Step("where", (a, c, a, b)), out
        b = _pick_value(draw, shapes, lambda s: _compatible(sa, s) is not None, False)
        if b is None:
            return None
        out = _compatible(sa, shapes[b])
        return Step("where_const", (a, a, b), (draw.pick([0.0, 0.5, -1.0]),)), out
    if kind == "reduce":
        name = draw.pick(REDUCE)
        keep = draw.bool()
        if not sa or draw.int(0, 4) == 0:
            axis = None
            out = (1,) * len(sa) if keep else ()
        elif draw.bool():
            ax = draw.int(0, len(sa) - 1)
            axis = ax - len(sa) if draw.bool() else ax
            out = tuple(1 if i == ax else d for i, d in enumerate(sa)) if keep else \
                tuple(d for i, d in enumerate(sa) if i != ax)
        else:
            axs = tuple(sorted({draw.int(0, len(sa) - 1)
                                for _ in range(draw.int(1, len(sa)))}))
            axis = axs
            out = tuple(1 if i in axs else d for i, d in enumerate(sa)) if keep else \
                tuple(d for i, d in enumerate(sa) if i not in axs)
        return Step("reduce", (a,), (name, axis, keep)), out
    if kind == "softmax":
        if not sa:
            return None
        axis = None if draw.int(0, 3) == 0 else draw.int(-len(sa), len(sa) - 1)
        if draw.bool():
            return Step("softmax", (a,), (axis,)), sa
        keep = draw.bool()
        axes = range(len(sa)) if axis is None else (axis % len(sa),)
        out = tuple(1 if i in axes else d for i, d in enumerate(sa)) if keep else \
            tuple(d for i, d in enumerate(sa) if i not in axes)
        return Step("logsumexp", (a,), (axis, keep)), out
    if kind == "cumsum":
        if not sa:
            return None
        ax = draw.int(0, len(sa) - 1)
        return Step("cumsum", (a,), (ax,)), sa
    if kind == "broadcast":
        lead = draw.int(1, 3)
        shape = (lead,) + tuple(sa)
        if _size(shape) > MAX_SIZE:
            return None
        if sa and draw.bool():
            ax = draw.int(0, len(sa))
            shape = sa[:ax] + (lead,) + sa[ax:]
            return Step("expand_broadcast", (a,), (ax, shape)), shape
        return Step("broadcast_to", (a,), (shape,)), shape
    if kind == "view":
        return _draw_view(draw, a, sa)
    if kind == "matmul":
        return _draw_matmul(draw, shapes, a, sa, dt, rng)
    if kind == "einsum":
        if len(sa) != 2:
            return None
        pattern = draw.pick(["ij->ji", "ij->i", "ij,ij->i", "ij,kj->ik",
                                        "ij,jk->ik"])
        m, n = sa
        if pattern.count(",") == 0:
            out = (n, m) if pattern == "ij->ji" else (m,)
            return Step("einsum", (a,), (pattern,)), out
        if pattern == "ij,ij->i":
            return Step("einsum", (a, a), (pattern,)), (m,)
        if pattern == "ij,kj->ik":
            b = _pick_value(draw, shapes, lambda s: len(s) == 2 and s[1] == n, False)
            if m * shapes[b][0] > MAX_SIZE:
                return None
            return Step("einsum", (a, b), (pattern,)), (m, shapes[b][0])
        b = _pick_value(draw, shapes, lambda s: len(s) == 2 and s[0] == n, False)
        if b is None or m * shapes[b][1] > MAX_SIZE:
            return None
        return Step("einsum", (a, b), (pattern,)), (m, shapes[b][1])
    if kind == "gather":
        if not sa:
            return None
        ax = draw.int(0, len(sa) - 1)
        n = sa[ax]
        k = draw.int(1, 6)
        idx = tuple(int(i) for i in rng.integers(-n, n, k))
        if draw.bool():
            idx = tuple(i % n for i in idx)
        out = sa[:ax] + (k,) + sa[ax + 1:]
        if _size(out) > MAX_SIZE:
            return None
        return Step("gather", (a,), (idx, ax)), out
    if kind == "concat":
        if not sa:
            return None
        ax = draw.int(0, len(sa) - 1)
        b = _pick_value(draw, shapes, lambda s: len(s) == len(sa) and all(
            d == e for i, (d, e) in enumerate(zip(s, sa)) if i != ax), False)
        if b is None:
            return None
        out = sa[:ax] + (sa[ax] + shapes[b][ax],) + sa[ax + 1:]
        if _size(out) > MAX_SIZE:
            return None
        if draw.int(0, 2) == 0:
            cshape = sa[:ax] + (draw.int(1, 2),) + sa[ax + 1:]
            out = sa[:ax] + (sa[ax] + cshape[ax],) + sa[ax + 1:]
            if _size(out) > MAX_SIZE:
                return None
            return Step("concat_const", (a,), (_const_array(draw, cshape, dt, rng), ax,
                                               draw.int(0, 1))), out
        return Step("concat", (a, b), (ax,)), out
    if kind == "pad":
        if not sa:
            return None
        width = tuple((draw.int(0, 2), draw.int(0, 2)) for _ in sa)
        out = tuple(d + lo + hi for d, (lo, hi) in zip(sa, width))
        if _size(out) > MAX_SIZE:
            return None
        return Step("pad", (a,), (width, draw.pick([0.0, 1.0, -0.0]))), out
    raise AssertionError(kind)


def _draw_view(draw, a, sa):
    what = draw.pick(["reshape", "reshape", "transpose", "transpose", "slice",
                                 "slice", "flip", "squeeze", "swapaxes", "moveaxis", "ravel"])
    if what == "reshape":
        new = draw.pick(_factorisations(_size(sa)))
        if new and draw.int(0, 3) == 0:      # numpy's -1
            i = draw.int(0, len(new) - 1)
            return Step("reshape", (a,), (new[:i] + (-1,) + new[i + 1:],)), new
        return Step("reshape", (a,), (new,)), new
    if what == "ravel":
        return Step("ravel", (a,)), (_size(sa),)
    if not sa:
        return None
    if what == "transpose":
        perm = draw.perm(range(len(sa)))
        if draw.int(0, 4) == 0:
            return Step("transpose", (a,), (None,)), sa[::-1]
        return Step("transpose", (a,), (perm,)), tuple(sa[p] for p in perm)
    if what == "slice":
        spec, out = [], []
        for d in sa:
            if draw.int(0, 2) == 0:
                spec.append((None, None, None))
                out.append(d)
                continue
            step = draw.pick([1, 1, 2, -1, -2, 3])
            start = draw.int(-d, d - 1)
            stop = draw.pick([None, d, -1, 1, 0])
            n = len(range(*slice(start, stop, step).indices(d)))
            if n == 0:
                start, stop = None, None
                n = len(range(*slice(None, None, step).indices(d)))
            spec.append((start, stop, step))
            out.append(n)
        if draw.int(0, 4) == 0:      # an integer index drops the axis
            ax = draw.int(0, len(sa) - 1)
            spec[ax] = draw.int(-sa[ax], sa[ax] - 1)
            out[ax] = None
        return Step("slice", (a,), (tuple(spec),)), tuple(d for d in out if d is not None)
    if what == "flip":
        ax = draw.int(0, len(sa) - 1)
        return Step("flip", (a,), (ax,)), sa
    if what == "squeeze":
        ones = [i for i, d in enumerate(sa) if d == 1]
        if not ones:
            return None
        ax = draw.pick(ones)
        return Step("squeeze", (a,), (ax,)), tuple(d for i, d in enumerate(sa) if i != ax)
    i, j = draw.int(0, len(sa) - 1), draw.int(0, len(sa) - 1)
    if what == "swapaxes":
        s = list(sa)
        s[i], s[j] = s[j], s[i]
        return Step("swapaxes", (a,), (i, j)), tuple(s)
    s = list(sa)
    d = s.pop(i)
    s.insert(j, d)
    return Step("moveaxis", (a,), (i, j)), tuple(s)


def _draw_matmul(draw, shapes, a, sa, dt, rng):
    if not sa:
        return None
    k = sa[-1]
    how = draw.pick(["value", "const", "self_t"])
    if how == "self_t":
        if len(sa) < 2:
            return None
        side = draw.int(0, 1)
        m = sa[-2] if side == 0 else sa[-1]
        out = sa[:-2] + (m, m)
        if _size(out) > MAX_SIZE:
            return None
        return Step("matmul_self_t", (a,), (side,)), out
    if how == "value":
        if len(sa) > 2:
            ok = lambda s: len(s) == len(sa) and s[:-2] == sa[:-2] and s[-2] == k  # noqa: E731
        else:
            ok = lambda s: 1 <= len(s) <= 2 and s[0] == k  # noqa: E731
        b = _pick_value(draw, shapes, ok, False)
        if b is not None:
            sb = shapes[b]
            out = np.broadcast_shapes(sa[:-2], sb[:-2]) + sa[-2:-1] + sb[-1:] \
                if len(sb) >= 2 else sa[:-1]
            if len(sa) == 1 and len(sb) == 2:
                out = sb[-1:]
            if _size(out) <= MAX_SIZE:
                return Step("matmul", (a, b)), tuple(out)
    n = draw.int(1, 4)
    cshape = (k, n) if draw.bool() else (k,)
    if len(sa) == 1 and len(cshape) == 1:
        out = ()
    elif len(cshape) == 1:
        out = sa[:-1]
    else:
        out = sa[:-1] + (n,)
    if _size(out) > MAX_SIZE:
        return None
    return Step("matmul_const", (a,), (_const_array(draw, cshape, dt, rng), 0)), out


# --------------------------------------------------------------------------------------------
# control-flow steps: bodies are small programs of their own (see "control flow" above)
# --------------------------------------------------------------------------------------------

#: step kinds of a body or a branch: elementwise math and reductions mostly, a few views,
#: contractions and broadcasts; one level of control flow inside another
BODY_KINDS = (["unary"] * 4 + ["binary"] * 4 + ["binary_c"] * 2 + ["reduce"] * 2 +
              ["where", "ipow", "clip", "view", "matmul", "broadcast"])
NESTED_KINDS = ["cond", "fori", "fori_traced", "map"]
#: the fraction of programs with control flow is 1 / CONTROL_ONE_IN
CONTROL_ONE_IN = 10


def _draw_body(draw, in_shapes, dt, rng, depth, min_steps=1, max_steps=3):
    """Steps over values of ``in_shapes`` (a body's inputs): (steps, shapes of all values)."""
    shapes, steps = list(in_shapes), []
    kinds = BODY_KINDS + (NESTED_KINDS if depth == 0 else [])
    n, tries = draw.int(min_steps, max_steps), 0
    while len(steps) < n and tries < 4 * max_steps:
        tries += 1
        got = _draw_step(draw, shapes, dt, rng, kinds, depth + 1)
        if got is None:
            continue
        steps.append(got[0])
        shapes.append(tuple(got[1]))
    return steps, shapes


def _finish(draw, steps, shapes, target):
    """Append steps making a value of shape ``target`` (a carry, a branch's result): one
    that broadcasts to it, broadcast, and often squashed (tanh, sin, clip) so that a carry
    stays bounded over the trips. Returns its index."""
    target = tuple(target)
    ok = [i for i, s in enumerate(shapes) if _compatible(s, target) == target]
    v = ok[-1] if draw.int(0, 3) else draw.pick(ok)

    def add(step):
        steps.append(step)
        shapes.append(target)
        return len(shapes) - 1
    if shapes[v] != target:
        v = add(Step("broadcast_to", (v,), (target,)))
    squash = draw.pick(["tanh", "sin", "clip", None, None])
    if squash == "clip":
        v = add(Step("clip", (v,), (-1.0, 2.0)))
    elif squash:
        v = add(Step(squash, (v,)))
    return v


def _outer(draw, shapes):
    """Outer values a body closes over (none or one)."""
    return () if draw.int(0, 2) else (_pick_value(draw, shapes, recent=False),)


def _draw_control(draw, kind, shapes, dt, rng, depth):
    """A control-flow step (``kind`` in CONTROL) and its result shape, or None."""
    if kind == "scan":
        xs = _pick_value(draw, shapes, lambda s: len(s) >= 1)
        if xs is None:
            return None
        sx = shapes[xs]
        row = sx[1:]
        c = _pick_value(draw, shapes, lambda s: s == row, recent=False) if draw.bool() else None
        c = _pick_value(draw, shapes, recent=False) if c is None else c
        sc = shapes[c]
        outer = _outer(draw, shapes)
        steps, bs = _draw_body(draw, [sc, row] + [shapes[o] for o in outer], dt, rng, depth)
        carry = _finish(draw, steps, bs, sc)
        y = _pick_value(draw, bs)
        which = draw.pick([0, 1, 2])
        out = (sc, (sx[0],) + bs[y], (_size(sc) + sx[0] * _size(bs[y]),))[which]
        if _size(out) > MAX_SIZE:
            which, out = 0, sc
        return Step("scan", (c, xs, *outer),
                    ((tuple(steps), (carry, y)), draw.bool(), which)), out
    if kind == "map":
        xs = _pick_value(draw, shapes, lambda s: len(s) >= 1)
        if xs is None:
            return None
        sx = shapes[xs]
        outer = _outer(draw, shapes)
        steps, bs = _draw_body(draw, [sx[1:]] + [shapes[o] for o in outer], dt, rng, depth)
        y = _pick_value(draw, bs)
        out = (sx[0],) + bs[y]
        if _size(out) > MAX_SIZE:
            return None
        return Step("map", (xs, *outer), ((tuple(steps), (y,)),)), out
    if kind in ("fori", "while", "fori_traced"):
        c = _pick_value(draw, shapes)
        sc = shapes[c]
        outer = _outer(draw, shapes) if kind != "fori_traced" else ()
        counter = [()] if kind != "while" else []
        steps, bs = _draw_body(draw, counter + [sc] + [shapes[o] for o in outer], dt, rng,
                               depth)
        out = _finish(draw, steps, bs, sc)
        body = (tuple(steps), (out,))
        if kind == "fori":
            lo = draw.pick([0, 0, 1, -2])
            return Step("fori", (c, *outer), (body, lo, lo + draw.int(0, 4))), sc
        if kind == "fori_traced":
            # no closed-over values: un-jitted, the bound is a concrete integer (a counted
            # loop: a body's closed-over values get no cotangent when no trip runs), under
            # jit a traced one (a while loop: a zero cotangent), docs/control_flow.md
            p = _pick_value(draw, shapes)
            return Step("fori_traced", (c, p),
                        (body, draw.pick([0, 0, 1, -2]), draw.int(0, 4),
                         draw.pick([-0.5, 0.0, 0.5, 1.0]))), sc
        test = draw.pick(["sum_lt", "max_lt", "min_gt"])
        thr = draw.pick([-1.0, 0.0, 0.5, 1.0, 2.0, 4.0])
        return Step("while", (c, *outer), (body, draw.int(1, 5), test, thr,
                                           draw.int(0, 1))), sc
    assert kind == "cond", kind
    p = _pick_value(draw, shapes)
    operands = (_pick_value(draw, shapes),)
    if draw.bool():
        operands += (_pick_value(draw, shapes, recent=False),)
    target = shapes[operands[0]]
    n = draw.pick([2, 2, 3])
    thresholds = tuple(sorted({draw.pick([-1.0, 0.0, 0.5, 1.0, 2.0]) for _ in range(n - 1)}))
    branches = []
    for _ in range(len(thresholds) + 1):
        steps, bs = _draw_body(draw, [shapes[o] for o in operands], dt, rng, depth, 0, 3)
        out = _finish(draw, steps, bs, target)
        branches.append((tuple(steps), (out,)))
    return Step("cond", (p, *operands), (tuple(branches), thresholds)), target



class RandomDraw:
    """Choices from a ``random.Random`` (bulk runs: program ``j`` of seed ``s`` is
    ``random_program(s, j)``, reproducible on its own)."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd

    def int(self, lo: int, hi: int) -> int:
        return self.rnd.randint(lo, hi)

    def pick(self, seq):
        return self.rnd.choice(list(seq))

    def bool(self) -> bool:
        return self.rnd.random() < 0.5

    def perm(self, seq) -> tuple:
        out = list(seq)
        self.rnd.shuffle(out)
        return tuple(out)


class HypothesisDraw:
    """The same choices drawn by hypothesis (so its shrinker can simplify a program)."""

    def __init__(self, draw):
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def bool(self) -> bool:
        return self.draw(st.booleans())

    def perm(self, seq) -> tuple:
        return tuple(self.draw(st.permutations(list(seq))))


#: shapes the inputs of a batch's programs derive from (so their kernels fuse): see generate
BASES = [(4, 6), (3, 5), (2, 3, 4), (6,), (5, 2), (3, 1, 4)]


#: programs in the default run (``FUNCTRACE_FUZZ_PROGRAMS`` overrides): 0.55-1.9 s of CPU each
#: with a cold kernel cache (idle to loaded machine; 561 s for 300 in a loaded cold run), so
#: 200 keep the fuzzer near 2-3 minutes of CI's two cores. The default seed is fixed, so each
#: CI run repeats the same programs: the long run (``-m slow``, 20,000) and
#: ``FUNCTRACE_FUZZ_SEED=random`` are where new programs come from.
DEFAULT_PROGRAMS = 200


def fuzz_programs() -> int:
    """How many programs the default run compiles (``FUNCTRACE_FUZZ_PROGRAMS``)."""
    return int(os.environ.get("FUNCTRACE_FUZZ_PROGRAMS", str(DEFAULT_PROGRAMS)))


def fuzz_seed() -> int:
    """The run's seed: ``FUNCTRACE_FUZZ_SEED`` (default 0); ``random`` picks one and writes it
    back to the environment, so subprocesses (the CUDA simulator's) use the same."""
    v = os.environ.get("FUNCTRACE_FUZZ_SEED", "0")
    if v == "random":
        v = str(random.SystemRandom().randrange(2**31))
        os.environ["FUNCTRACE_FUZZ_SEED"] = v
    return int(v)


def random_program(seed: int, index: int, base=None, **kw) -> Prog:
    """Program ``index`` of run ``seed`` (``base``: see ``generate``)."""
    return generate(RandomDraw(random.Random(f"functrace-fuzz {seed} {index}")), base=base,
                    **kw)


def random_batch(seed: int, index: int, size: int) -> list[Prog]:
    """Batch ``index`` of run ``seed``: ``size`` programs over one base shape."""
    rnd = random.Random(f"functrace-fuzz-batch {seed} {index}")
    base = rnd.choice(BASES)
    return [random_program(seed, index * size + j, base) for j in range(size)]


@st.composite
def programs(draw, **kw):
    """The hypothesis strategy of programs (``generate``'s arguments)."""
    return generate(HypothesisDraw(draw), **kw)


def generate(draw, dtypes=("float64", "float32"), min_steps=5, max_steps=20,
             base=None, control_flow=True) -> Prog:
    """A random program (see the module docstring) from ``draw`` (``RandomDraw`` or
    ``HypothesisDraw``). ``base``: a shape most inputs derive from (suffixes, unit axes,
    reversed), so a batch of programs shares loop shapes. ``control_flow``: whether some
    programs (one in ``CONTROL_ONE_IN``) hold scans, loops and branches."""
    dt = draw.pick(list(dtypes))
    n_in = draw.int(1, 3)
    inputs = tuple(_shapes(draw, base) for _ in range(n_in))
    seed = draw.int(0, 2**31 - 1)
    rng = np.random.default_rng(seed + 1)      # constants and gather indices
    shapes = list(inputs)
    steps = []
    # about one program in CONTROL_ONE_IN has one or two control-flow steps, at random places
    # (their values are outputs), and half the steps: its bodies, their gradients and
    # branches compile as kernels of their own, which costs compile time like 3-5 steps each
    control = set()
    if control_flow and draw.int(1, CONTROL_ONE_IN) == 1:
        n_steps = draw.int(max(1, min_steps // 2), max(1, max_steps // 2))
        control = {draw.int(0, n_steps - 1) for _ in range(draw.int(1, 2))}
    else:
        n_steps = draw.int(min_steps, max_steps)
    controlled = set()
    tries = 0
    while len(steps) < n_steps and tries < 4 * max_steps:
        tries += 1
        if len(steps) in control:
            got = _draw_step(draw, shapes, np.dtype(dt), rng, list(CONTROL))
            if got is not None:
                controlled.add(len(shapes))
        else:
            got = _draw_step(draw, shapes, np.dtype(dt), rng)
        if got is None:
            continue
        step, shape = got
        steps.append(step)
        shapes.append(tuple(shape))
    last = len(shapes) - 1
    extra = {draw.int(n_in, last) for _ in range(draw.int(0, 2))} | controlled
    outputs = tuple(sorted(set(extra) - {last})) + (last,)
    special = draw.pick([0.0, 0.1, 0.25, 0.5])
    prog = Prog(dt, inputs, tuple(steps), outputs, seed, special)
    assert value_shapes(prog)[-1] == shapes[-1], prog      # the generator knows numpy's shapes
    return prog
