"""The `where` trap: find (and optionally rewrite) selects whose untaken branch is singular.

``where(c, log(x), 0)`` has a NaN gradient wherever ``c`` is false and ``log`` is singular at
``x``: the untaken branch's derivative (inf) is multiplied by a zero cotangent. The
mathematically plain answer is kept by default (docs/numerics.md); this module finds the
pattern so that ``grad`` can warn with the user's line, and ``make_where_safe`` rewrites it to
the "double where" form (the singular op's input is replaced by a safe value where the branch
is not taken). Analyses return side tables and never mutate a graph. Imports core and ops.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from ..core import Eqn, Graph, Lit, Var, registry

__all__ = ["find_unsafe_where", "make_where_safe", "SINGULAR"]


class _Singular(Mapping):
    """op name -> ``op.singular`` (the index of the operand where it is singular, a value at
    which it is smooth), for every declared op that has one: a live view of the
    declarations, never a table of its own."""

    def __getitem__(self, name: str) -> tuple[int, float]:
        op = registry.get(name)
        if op is None or op.singular is None:
            raise KeyError(name)
        return op.singular

    def __contains__(self, name) -> bool:
        op = registry.get(name)
        return op is not None and op.singular is not None

    def __iter__(self) -> Iterator[str]:
        return (n for n, op in list(registry.items()) if op.singular is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


SINGULAR: Mapping[str, tuple[int, float]] = _Singular()

_MAX_DEPTH = 4


def _producers(g: Graph) -> dict[Var, Eqn]:
    return {o: e for e in g.eqns for o in e.outputs}


def _singular_ancestors(v, prod, depth=_MAX_DEPTH):
    """Singular equations that feed ``v`` through at most ``depth`` elementwise steps."""
    found = []
    stack = [(v, 0)]
    seen = set()
    while stack:
        a, d = stack.pop()
        if not isinstance(a, Var) or a in seen or d > depth:
            continue
        seen.add(a)
        e = prod.get(a)
        if e is None or not e.op.elementwise:
            continue
        if e.op.singular is not None:
            found.append(e)
        if e.op.name == "select":
            continue   # a nested select is its own guard
        stack.extend((x, d + 1) for x in e.inputs)
    return found


def _guarded(x, cond, prod):
    e = prod.get(x) if isinstance(x, Var) else None
    return e is not None and e.op.name == "select" and e.inputs[0] == cond


def find_unsafe_where(g: Graph) -> list[tuple[Eqn, Eqn, int]]:
    """(select eqn, singular eqn, branch) for every select whose branch ``branch`` (1 = taken
    where the condition is true, 2 = where false) is computed by an unguarded singular op."""
    prod = _producers(g)
    out = []
    for e in g.eqns:
        if e.op.name != "select" or e.outputs[0].aval.dtype.kind not in "fc":
            continue
        cond = e.inputs[0]
        for branch in (1, 2):
            for s in _singular_ancestors(e.inputs[branch], prod):
                idx, _ = s.op.singular
                if not _guarded(s.inputs[idx], cond, prod):
                    out.append((e, s, branch))
    return out


def make_where_safe(g: Graph) -> Graph:
    """Rewrite each unsafe select to the double-where form: the singular op's operand becomes
    ``select(c, x, safe)`` (or ``select(c, safe, x)``) so that the untaken branch is smooth.
    Values are unchanged where the branch is taken; gradients there are unchanged too."""
    from .. import ops
    fixes: dict[Eqn, tuple] = {}
    for sel, s, branch in find_unsafe_where(g):
        fixes.setdefault(s, (sel.inputs[0], branch))
    if not fixes:
        return g
    eqns = []
    for e in g.eqns:
        fix = fixes.get(e)
        if fix is None:
            eqns.append(e)
            continue
        cond, branch = fix
        idx, safe = e.op.singular
        x = e.inputs[idx]
        safe_lit = Lit(np.asarray(safe, x.aval.dtype))
        if cond.aval.shape not in ((), x.aval.shape):
            eqns.append(e)   # a condition broadcast differently: leave it (rare)
            continue
        guarded = Var(x.aval)
        on_true, on_false = (x, safe_lit) if branch == 1 else (safe_lit, x)
        eqns.append(Eqn(ops.elementwise.select_p, (cond, on_true, on_false), {}, (guarded,),
                        e.source))
        ins = list(e.inputs)
        ins[idx] = guarded
        eqns.append(Eqn(e.op, ins, e.params, e.outputs, e.source))
    return Graph(g.inputs, eqns, g.outputs)
