"""Graph -> Graph simplification: dead-code elimination, CSE, constant folding, algebra.

Higher-order gradient graphs grow fast without these. Every pass is a pure function of an
immutable graph that keeps the graph's inputs and output types. Imports core and ops only.

Rewrites applied by ``simplify`` (only when the result's type equals the equation's type),
each exact in IEEE arithmetic for every value of ``x``, signed zeros, infinities and NaN
included: ``x + (-0.0)``, ``(-0.0) + x``, ``x - (+0.0)``, ``x * 1``, ``1 * x``, ``x / 1``,
``x ** 1`` -> ``x``; ``(-0.0) - x``, ``x * -1`` -> ``-x``; ``--x`` -> ``x``; identity
reshape/transpose/convert; ``select(c, x, x)`` -> ``x``; chains of reshapes or of transposes
become one; a broadcast 0-d operand of an elementwise op (also through a chain of broadcasts)
is used directly.
Not applied, because they change results: ``x + (+0.0)`` (``-0.0 + 0.0`` is ``+0.0``, and
``1 / x``, ``copysign`` or ``arctan2`` tell the signs apart: ``arctan2(x + 0.0, -1.0)`` at
``x = -0.0`` is ``pi``, folded it was ``-pi``), ``(+0.0) - x`` -> ``-x``, and
``c1 * (c2 * x)`` -> ``(c1 * c2) * x`` (one rounding instead of two, and ``c2 * x`` may
overflow where the folded product does not).
``x * 0`` -> ``0`` only when ``x`` is a literal: a traced ``x`` may be inf or NaN, and
``inf * 0`` is NaN.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..config import config
from ..core import Eqn, Graph, Lit, Var, verify
from .loops import map_subgraphs, merge_loop_twins

__all__ = ["dce", "cse", "fold_constants", "simplify", "optimize", "count_eqns"]

_FOLD_MAX_SIZE = 64


def count_eqns(g: Graph) -> int:
    return len(g.eqns)


def dce(g: Graph) -> Graph:
    """Drop equations whose outputs are never used (every op is pure but the ``effect`` ones,
    which stay)."""
    live = {a for a in g.outputs if isinstance(a, Var)}
    kept = []
    for e in reversed(g.eqns):
        if e.op.effect or any(o in live for o in e.outputs):
            kept.append(e)
            live.update(a for a in e.inputs if isinstance(a, Var))
    if len(kept) == len(g.eqns):
        return g
    return Graph(g.inputs, reversed(kept), g.outputs)


def _subst(env, a):
    return env.get(a, a) if isinstance(a, Var) else a


def _rebuild(g: Graph, eqns, env) -> Graph:
    return Graph(g.inputs, eqns, [_subst(env, a) for a in g.outputs])


def cse(g: Graph) -> Graph:
    """Merge equations that apply the same op to the same inputs with the same params."""
    env: dict[Var, Var | Lit] = {}
    seen: dict[tuple, Eqn] = {}
    eqns = []
    changed = False
    for e in g.eqns:
        ins = tuple(_subst(env, a) for a in e.inputs)
        if ins != e.inputs:
            e = Eqn(e.op, ins, e.params, e.outputs, e.source)
            changed = True
        key = (e.op.name, tuple((("v", id(a)) if isinstance(a, Var) else ("l", a))
                                for a in ins), e.params)
        prev = None if e.op.effect else seen.get(key)     # two prints print twice
        if prev is not None and all(p.aval == o.aval for p, o in zip(prev.outputs, e.outputs)):
            for o, p in zip(e.outputs, prev.outputs):
                env[o] = p
            changed = True
            continue
        seen[key] = e
        eqns.append(e)
    return _rebuild(g, eqns, env) if changed else g


def fold_constants(g: Graph, max_size: int = _FOLD_MAX_SIZE,
                   keep_scalar_broadcasts: bool = True) -> Graph:
    """Evaluate equations whose inputs are all literals and whose result has at most
    ``max_size`` elements. Graphs meant to be read keep results small (and broadcasts of
    scalars as broadcasts); an executor about to run a graph folds far larger ones."""
    env: dict[Var, Var | Lit] = {}
    eqns = []
    changed = False
    for e in g.eqns:
        ins = tuple(_subst(env, a) for a in e.inputs)
        scalar_bcast = (keep_scalar_broadcasts and e.op.name == "broadcast_in_dim"
                        and ins[0].aval.shape == ())
        if (ins and all(isinstance(a, Lit) for a in ins) and not scalar_bcast
                and not e.op.effect
                and not any(isinstance(v, Graph) for v in e.params.values())
                and all(o.aval.size <= max_size for o in e.outputs)):
            try:
                res = e.op.impl(*[a.val for a in ins], **e.params)
            except Exception:   # leave it to run time, where the error surfaces properly
                res = None
            if res is not None:
                res = res if e.op.multiple_results else (res,)
                for o, r in zip(e.outputs, res):
                    env[o] = Lit(np.asarray(r, dtype=o.aval.dtype).reshape(o.aval.shape))
                changed = True
                continue
        if ins != e.inputs:
            e = Eqn(e.op, ins, e.params, e.outputs, e.source)
            changed = True
        eqns.append(e)
    return _rebuild(g, eqns, env) if changed else g


def _lit_value(a, zero_bcast):
    """The constant scalar value of an atom, if it is a uniform literal (or a broadcast of
    one), else None."""
    if isinstance(a, Lit):
        v = a.val
        if v.ndim == 0:
            return v.item()
        flat = v.reshape(-1)
        if flat.size and np.all(flat == flat[0]) and not np.isnan(flat[0]):
            return flat[0].item()
        return None
    return zero_bcast.get(a)


def _neg_zero(c) -> bool:
    """Whether adding the literal value ``c`` leaves every ``x`` unchanged: an integer 0 or
    a float -0.0 (``-0.0 + 0.0`` is ``+0.0``, ``x + -0.0`` is ``x``)."""
    if isinstance(c, bool | int):
        return c == 0
    return isinstance(c, float) and c == 0 and math.copysign(1.0, c) < 0


def _pos_zero(c) -> bool:
    """Whether subtracting ``c`` leaves every ``x`` unchanged: an integer 0 or +0.0."""
    if isinstance(c, bool | int):
        return c == 0
    return isinstance(c, float) and c == 0 and math.copysign(1.0, c) > 0


def simplify(g: Graph) -> Graph:
    """Apply the algebraic identities listed in the module docstring."""
    env: dict[Var, Var | Lit] = {}
    const_of: dict[Var, object] = {}        # Var -> scalar value of a uniform broadcast literal
    scalar_src: dict[Var, Var | Lit] = {}   # Var -> the 0-d atom it broadcasts
    producer: dict[Var, Eqn] = {}
    eqns = []
    changed = False
    for e in g.eqns:
        ins = _direct_scalars(e, tuple(_subst(env, a) for a in e.inputs), scalar_src)
        repl = _replacement(e, ins, const_of, producer)
        if repl is None:
            if ins != e.inputs:
                e = Eqn(e.op, ins, e.params, e.outputs, e.source)
                changed = True
            _track_scalar_broadcast(e, ins, scalar_src, const_of)
        elif isinstance(repl, Eqn):
            e = repl
            changed = True
        else:
            env[e.outputs[0]] = repl
            changed = True
            continue
        eqns.append(e)
        for o in e.outputs:
            producer[o] = e
    return _rebuild(g, eqns, env) if changed else g


def _same_type(a, o) -> bool:
    return a.aval == o.aval


def _direct_scalars(e: Eqn, ins: tuple, scalar_src) -> tuple:
    """``ins`` with each broadcast 0-d operand of an elementwise op replaced by the 0-d atom
    itself (ops broadcast 0-d operands), as long as another operand still carries the output
    shape."""
    if not (e.op.elementwise and len(ins) > 1
            and any(a in scalar_src for a in ins if isinstance(a, Var))):
        return ins
    shape = e.outputs[0].aval.shape
    shaped = [a for a in ins if not (isinstance(a, Var) and a in scalar_src)
              and a.aval.shape == shape]
    if not shaped:
        return ins
    return tuple(scalar_src[a] if isinstance(a, Var) and a in scalar_src else a for a in ins)


def _track_scalar_broadcast(e: Eqn, ins: tuple, scalar_src, const_of) -> None:
    """Record a kept broadcast of a 0-d atom (and a literal's value) for later equations; a
    broadcast of such a broadcast broadcasts the same atom (a cotangent seed ``1.0`` spread
    over a row, then over a matrix)."""
    if e.op.name != "broadcast_in_dim":
        return
    src = ins[0] if ins[0].aval.shape == () else (
        scalar_src.get(ins[0]) if isinstance(ins[0], Var) else None)
    if src is None:
        return
    out = e.outputs[0]
    scalar_src[out] = src
    if isinstance(src, Lit):
        const_of[out] = src.val.item()


def _replacement(e: Eqn, ins: tuple, const_of, producer) -> Var | Lit | Eqn | None:
    """What ``e`` reading ``ins`` simplifies to: an atom its output becomes, an equation to
    emit in its place, or None (kept)."""
    name, out = e.op.name, e.outputs[0]
    if name in ("add", "sub", "mul", "div"):
        return _arith_identity(e, ins, const_of)
    if name == "neg":
        return _double_neg(ins[0], out, producer)
    if name == "integer_pow":
        return ins[0] if e.params["y"] == 1 and _same_type(ins[0], out) else None
    if name in ("convert_element_type", "reshape", "transpose") and _same_type(ins[0], out):
        if name != "transpose" or e.params["permutation"] == tuple(range(out.aval.ndim)):
            return ins[0]
        return None
    if name in ("reshape", "transpose") and isinstance(ins[0], Var):
        return _merged_chain(e, ins[0], producer)
    if name == "select" and ins[1] == ins[2] and _same_type(ins[1], out):
        return ins[1]
    return None


def _arith_identity(e: Eqn, ins: tuple, const_of) -> Var | Lit | Eqn | None:
    """add/sub/mul/div by a literal that leaves the other operand as it is, negates it, or
    (a literal times zero) gives zero."""
    name, out = e.op.name, e.outputs[0]
    x, y = ins
    cx, cy = _lit_value(x, const_of), _lit_value(y, const_of)
    if name == "add":
        if _neg_zero(cy) and _same_type(x, out):
            return x
        if _neg_zero(cx) and _same_type(y, out):
            return y
    elif name == "sub":
        if _pos_zero(cy) and _same_type(x, out):
            return x
        if _neg_zero(cx) and _same_type(y, out):
            return _negated(e, y)
    elif name == "mul":
        if cy == 1 and _same_type(x, out):
            return x
        if cx == 1 and _same_type(y, out):
            return y
        if cy == -1 and _same_type(x, out):
            return _negated(e, x)
        if cx == -1 and _same_type(y, out):
            return _negated(e, y)
        if (cy == 0 and isinstance(x, Lit)) or (cx == 0 and isinstance(y, Lit)):
            return _zero(e, const_of)
    elif name == "div" and cy == 1 and _same_type(x, out):
        return x
    return None


def _negated(e: Eqn, x) -> Eqn:
    """``neg(x)`` computing ``e``'s output."""
    from .. import ops
    return Eqn(ops.elementwise.neg_p, (x,), {}, e.outputs, e.source)


def _zero(e: Eqn, const_of) -> Lit | Eqn:
    """A zero of ``e``'s output type: a 0-d literal, or a broadcast of one (whose value is
    recorded in ``const_of``)."""
    from .. import ops
    out = e.outputs[0]
    z = np.zeros((), out.aval.dtype)
    if not out.aval.shape:
        return Lit(z)
    const_of[out] = 0
    return Eqn(ops.shape.broadcast_in_dim_p, (Lit(z),),
               {"shape": out.aval.shape, "broadcast_dimensions": ()}, e.outputs, e.source)


def _double_neg(x, out: Var, producer) -> Var | Lit | None:
    """``--y`` -> ``y``."""
    p = producer.get(x) if isinstance(x, Var) else None
    if p is not None and p.op.name == "neg" and _same_type(p.inputs[0], out):
        return p.inputs[0]
    return None


def _merged_chain(e: Eqn, x: Var, producer) -> Var | Lit | Eqn | None:
    """A reshape of a reshape, or a transpose of a transpose, as one equation (or as the inner
    operand when the two cancel)."""
    p = producer.get(x)
    if p is None or p.op.name != e.op.name:
        return None
    inner, out = p.inputs[0], e.outputs[0]
    if e.op.name == "reshape":
        if inner.aval.shape == out.aval.shape:
            return inner
        params = e.params
    else:
        perm1, perm2 = p.params["permutation"], e.params["permutation"]
        params = {"permutation": tuple(perm1[i] for i in perm2)}
        if params["permutation"] == tuple(range(out.aval.ndim)):
            return inner
    return Eqn(e.op, (inner,), params, e.outputs, e.source)


def optimize(g: Graph, max_rounds: int = 4) -> Graph:
    """fold -> simplify -> cse -> dce until nothing changes (at most ``max_rounds``)."""
    check = config.enable_checks or os.environ.get("FUNCTRACE_VERIFY") == "1"
    for _ in range(max_rounds):
        new = dce(merge_loop_twins(dce(cse(simplify(fold_constants(g))))))
        if check:
            verify(new)
        if new is g:
            break
        g = new
    return map_subgraphs(g, optimize)
