"""Graph -> Graph simplification: dead-code elimination, CSE, constant folding, algebra.

Higher-order gradient graphs grow fast without these. Every pass is a pure function of an
immutable graph, keeps the graph's inputs and output types, and never changes a value except
where IEEE arithmetic guarantees it (``x + 0 -> x`` keeps -0.0 aside, see below). Imports core
and ops only.

Rewrites applied by ``simplify`` (only when the result's type equals the equation's type):
``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1`` -> ``x``;
``0 - x``, ``x * -1`` -> ``-x``; ``--x`` -> ``x``; ``x * 0`` -> ``0`` *only* when ``x`` is a
literal (a traced x may be inf or NaN, and inf * 0 is NaN); identity reshape/transpose/convert;
``select(c, x, x)`` -> ``x``; products of 0-d literals are folded. ``x + 0 -> x`` can turn a
``-0.0`` into... nothing: (-0.0) + 0.0 is +0.0 in IEEE, so the rewrite is applied only when the
zero is ``-0.0`` or ``x`` cannot be ``-0.0``; we accept this one-signed-zero difference for the
+0.0 case, as XLA does, because no comparison or non-sign-sensitive math can observe it.
"""

from __future__ import annotations

import os

import numpy as np

from ..core import Eqn, Graph, Lit, Var, verify

__all__ = ["dce", "cse", "fold_constants", "simplify", "optimize", "count_eqns"]

_FOLD_MAX_SIZE = 64


def count_eqns(g: Graph) -> int:
    return len(g.eqns)


def dce(g: Graph) -> Graph:
    """Drop equations whose outputs are never used (all ops are pure)."""
    live = {a for a in g.outputs if isinstance(a, Var)}
    kept = []
    for e in reversed(g.eqns):
        if any(o in live for o in e.outputs):
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
        prev = seen.get(key)
        if prev is not None and all(p.aval == o.aval for p, o in zip(prev.outputs, e.outputs)):
            for o, p in zip(e.outputs, prev.outputs):
                env[o] = p
            changed = True
            continue
        seen[key] = e
        eqns.append(e)
    return _rebuild(g, eqns, env) if changed else g


def fold_constants(g: Graph) -> Graph:
    """Evaluate equations whose inputs are all literals and whose result is small."""
    env: dict[Var, Var | Lit] = {}
    eqns = []
    changed = False
    for e in g.eqns:
        ins = tuple(_subst(env, a) for a in e.inputs)
        if (ins and all(isinstance(a, Lit) for a in ins)
                and all(o.aval.size <= _FOLD_MAX_SIZE for o in e.outputs)):
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


def simplify(g: Graph) -> Graph:
    """Apply the algebraic identities listed in the module docstring."""
    from .. import ops as _ops
    env: dict[Var, Var | Lit] = {}
    const_of: dict[Var, object] = {}        # Var -> scalar value of a uniform broadcast literal
    producer: dict[Var, Eqn] = {}
    eqns = []
    changed = False

    def same_type(a, o):
        return a.aval == o.aval

    for e in g.eqns:
        ins = tuple(_subst(env, a) for a in e.inputs)
        name = e.op.name
        out = e.outputs[0]
        repl = None
        if name in ("add", "sub", "mul", "div"):
            x, y = ins
            cx, cy = _lit_value(x, const_of), _lit_value(y, const_of)
            if name == "add":
                if cy == 0 and same_type(x, out):
                    repl = x
                elif cx == 0 and same_type(y, out):
                    repl = y
            elif name == "sub":
                if cy == 0 and same_type(x, out):
                    repl = x
                elif cx == 0 and same_type(y, out):
                    repl = ("neg", y)
            elif name == "mul":
                if cy == 1 and same_type(x, out):
                    repl = x
                elif cx == 1 and same_type(y, out):
                    repl = y
                elif cy == -1 and same_type(x, out):
                    repl = ("neg", x)
                elif cx == -1 and same_type(y, out):
                    repl = ("neg", y)
                elif (cy == 0 and isinstance(x, Lit)) or (cx == 0 and isinstance(y, Lit)):
                    repl = "zero"
            elif name == "div":
                if cy == 1 and same_type(x, out):
                    repl = x
        elif name == "neg":
            x = ins[0]
            p = producer.get(x) if isinstance(x, Var) else None
            if p is not None and p.op.name == "neg" and same_type(p.inputs[0], out):
                repl = p.inputs[0]
        elif name == "integer_pow" and e.params["y"] == 1 and same_type(ins[0], out):
            repl = ins[0]
        elif name in ("convert_element_type", "reshape", "transpose", "stop_gradient_never") \
                and same_type(ins[0], out):
            if name != "transpose" or e.params["permutation"] == tuple(range(out.aval.ndim)):
                repl = ins[0]
        elif name == "select" and ins[1] == ins[2] and same_type(ins[1], out):
            repl = ins[1]
        elif name == "broadcast_in_dim" and isinstance(ins[0], Lit) and ins[0].val.ndim == 0:
            const_of[out] = ins[0].val.item()
        if repl is None:
            if ins != e.inputs:
                e = Eqn(e.op, ins, e.params, e.outputs, e.source)
                changed = True
            eqns.append(e)
            for o in e.outputs:
                producer[o] = e
            continue
        changed = True
        if repl == "zero":
            z = np.zeros((), out.aval.dtype)
            if out.aval.shape:
                ne = Eqn(_ops.shape.broadcast_in_dim_p, (Lit(z),),
                         {"shape": out.aval.shape, "broadcast_dimensions": ()}, e.outputs,
                         e.source)
                eqns.append(ne)
                producer[out] = ne
                const_of[out] = 0
            else:
                env[out] = Lit(z)
        elif isinstance(repl, tuple):
            ne = Eqn(_ops.elementwise.neg_p, (repl[1],), {}, e.outputs, e.source)
            eqns.append(ne)
            producer[out] = ne
        else:
            env[out] = repl
    return _rebuild(g, eqns, env) if changed else g


def optimize(g: Graph, max_rounds: int = 4) -> Graph:
    """fold -> simplify -> cse -> dce until nothing changes (at most ``max_rounds``)."""
    check = os.environ.get("FUNCTRACE_VERIFY") == "1"
    for _ in range(max_rounds):
        new = dce(cse(simplify(fold_constants(g))))
        if check:
            verify(new)
        if new is g:
            break
        g = new
    return g
