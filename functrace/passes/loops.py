"""Passes over control-flow equations: merging a loop into its twin, and simplifying the
sub-graphs that control-flow equations hold.

Owns ``merge_loop_twins(graph) -> Graph`` and ``map_subgraphs(graph, fn) -> Graph``.
Imports core and ops only.

Why twins appear: the reverse rule of a counted loop binds a *forward loop with residuals*
(the original body plus the values its backward pass reads), and the forward-mode rule binds
a loop computing primals and tangents together; the original loop is still in the graph,
and its results are still read. The twin computes every result of the original from the
same operands, so the original is dropped and its readers read the twin, which moves up to
the original's place (its operands are the original's, so they are all defined there). A
trip is then computed once instead of twice.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import Eqn, Graph, Lit, Var

__all__ = ["merge_loop_twins", "map_subgraphs", "inline_calls"]


def _same_atom(a, b) -> bool:
    if isinstance(a, Var) or isinstance(b, Var):
        return a is b
    return a == b


def _twin_map(a: Eqn, b: Eqn):
    """If loop ``b`` computes every result of loop ``a`` from the same operands, the index
    of ``b``'s result that equals each of ``a``'s results; else None.

    Matching is by identity of the body Vars: ``b``'s body must read ``a``'s body inputs at
    positions of the same kind (constant, carry, per-trip read with the same spec) fed by the
    same operands, and return ``a``'s body results at positions of the same kind (a carry
    returned where that carry's input sits; a stacked result)."""
    pa, pb = a.params, b.params
    if pa["length"] != pb["length"]:
        return None
    ba, bb = pa["body"], pb["body"]
    nca, nha = pa["n_consts"], pa["n_carry"]
    ncb, nhb = pb["n_consts"], pb["n_carry"]
    pos_b = {v: j for j, v in enumerate(bb.inputs)}

    def kind(j, nc, nh):
        return "const" if j < nc else "carry" if j < nc + nh else "x"
    in_map = {}
    for i, v in enumerate(ba.inputs):
        j = pos_b.get(v)
        if j is None or kind(i, nca, nha) != kind(j, ncb, nhb):
            return None
        if not _same_atom(a.inputs[i], b.inputs[j]):
            return None
        if kind(i, nca, nha) == "x" and pa["xs"][i - nca - nha] != pb["xs"][j - ncb - nhb]:
            return None
        in_map[i] = j
    out_b = {}
    for j, o in enumerate(bb.outputs):
        if isinstance(o, Var):
            out_b.setdefault(o, []).append(j)
    res = []
    for k, o in enumerate(ba.outputs):
        if isinstance(o, Lit) or o not in out_b:
            return None
        if k < nha:    # a carry: b must return it as the carry of the same input
            j = in_map[nca + k] - ncb
            if not (0 <= j < nhb and bb.outputs[j] is o):
                return None
            res.append(j)
        else:
            ys = [j for j in out_b[o] if j >= nhb]
            if not ys:
                return None
            res.append(ys[0])
    return res


def merge_loop_twins(g: Graph) -> Graph:
    """``g`` with every loop whose results a later loop (its twin) also computes removed:
    the twin moves up to just after the original or its own last-defined operand, whichever
    is later, when that is before every reader of the original's results."""
    loops = [k for k, e in enumerate(g.eqns) if e.op.name == "loop"]
    if len(loops) < 2:
        return g
    defined = {o: k for k, e in enumerate(g.eqns) for o in e.outputs}
    first_read: dict[Var, int] = {}
    for k, e in enumerate(g.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                first_read.setdefault(a, k)
    n = len(g.eqns)
    for a in g.outputs:
        if isinstance(a, Var):
            first_read.setdefault(a, n)
    place: dict[int, int] = {}             # twin index -> the index it moves after
    env: dict[Var, Var] = {}
    dropped: set[int] = set()
    for ia, ka in enumerate(loops):
        if ka in dropped or ka in place:
            continue
        a = g.eqns[ka]
        readers = min((first_read.get(o, n + 1) for o in a.outputs), default=n + 1)
        for kb in loops[ia + 1:]:
            if kb in dropped or kb in place:
                continue
            b = g.eqns[kb]
            m = _twin_map(a, b)
            if m is None:
                continue
            after = max([ka] + [defined.get(x, -1) for x in b.inputs if isinstance(x, Var)])
            if after >= readers or after >= kb:
                continue
            place[kb] = after
            dropped.add(ka)
            for o, j in zip(a.outputs, m):
                env[o] = b.outputs[j]
            break
    if not dropped:
        return g
    moved_after: dict[int, list[int]] = {}
    for kb, after in place.items():
        moved_after.setdefault(after, []).append(kb)

    def sub(e: Eqn) -> Eqn:
        if any(isinstance(x, Var) and x in env for x in e.inputs):
            return Eqn(e.op, [env.get(x, x) if isinstance(x, Var) else x for x in e.inputs],
                       e.params, e.outputs, e.source)
        return e
    eqns = []
    for k, e in enumerate(g.eqns):
        if k not in dropped and k not in place:
            eqns.append(sub(e))
        for kb in moved_after.get(k, ()):
            eqns.append(sub(g.eqns[kb]))
    outs = [env.get(x, x) if isinstance(x, Var) else x for x in g.outputs]
    return Graph(g.inputs, eqns, outs)


def map_subgraphs(g: Graph, fn: Callable[[Graph], Graph]) -> Graph:
    """``g`` with ``fn`` applied to every sub-graph held directly (or in a tuple) by an
    equation's params; ``fn`` must keep a sub-graph's inputs and output types."""
    changed = False
    eqns = []
    for e in g.eqns:
        new_params = None
        for key, v in e.params.items():
            nv = _map_param(v, fn)
            if nv is not v:
                new_params = dict(e.params) if new_params is None else new_params
                new_params[key] = nv
        if new_params is not None:
            e = Eqn(e.op, e.inputs, new_params, e.outputs, e.source)
            changed = True
        eqns.append(e)
    return Graph(g.inputs, eqns, g.outputs) if changed else g


def _map_param(v, fn):
    if isinstance(v, Graph):
        nv = fn(v)
        return v if nv == v else nv
    if isinstance(v, tuple) and v and all(isinstance(x, Graph) for x in v):
        nv = tuple(_map_param(x, fn) for x in v)
        return v if all(a is b for a, b in zip(nv, v)) else nv
    return v


def inline_calls(g: Graph) -> Graph:
    """``g`` with every equation of a call op (``Op.call_param``: ``checkpoint``, the
    custom-rule calls) replaced by its sub-graph's equations, on fresh variables. Such an op
    only matters to the transforms; once they are done, running its sub-graph inline lets a
    backend fuse it with its neighbours (and compile a loop body holding one)."""
    if not any(e.op.call_param for e in g.eqns):
        return g
    env: dict[Var, object] = {}

    def read(a):
        return env.get(a, a) if isinstance(a, Var) else a
    eqns: list[Eqn] = []
    for e in g.eqns:
        if not e.op.call_param:
            eqns.append(Eqn(e.op, [read(a) for a in e.inputs], e.params, e.outputs, e.source)
                        if any(isinstance(a, Var) and a in env for a in e.inputs) else e)
            continue
        sub = inline_calls(e.params[e.op.call_param])
        local: dict[Var, object] = dict(zip(sub.inputs, [read(a) for a in e.inputs]))
        for se in sub.eqns:
            outs = [Var(o.aval) for o in se.outputs]
            ins = [local.get(a, a) if isinstance(a, Var) else a for a in se.inputs]
            eqns.append(Eqn(se.op, ins, se.params, outs, se.source or e.source))
            local.update(zip(se.outputs, outs))
        for o, so in zip(e.outputs, sub.outputs):
            env[o] = local.get(so, so) if isinstance(so, Var) else so
    return Graph(g.inputs, eqns, [read(a) for a in g.outputs])
