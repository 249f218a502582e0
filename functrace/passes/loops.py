"""Passes over control-flow equations: merging a loop into its twin, and simplifying the
sub-graphs that control-flow equations hold.

Owns ``merge_loop_twins(graph) -> Graph``, ``map_subgraphs(graph, fn) -> Graph``,
``inline_calls`` and ``counter_rows`` (a counted loop's gathers at its counter turned into
per-trip reads). Imports core and ops only.

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

import numpy as np

from ..core import AVal, Eqn, Graph, Lit, Var
from ..ops.shape import reshape_p

__all__ = ["merge_loop_twins", "map_subgraphs", "inline_calls", "splice", "counter_rows"]


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
    return splice(g, lambda e: inline_calls(e.params[e.op.call_param]) if e.op.call_param
                  else None)


def splice(g: Graph, sub_of, own_source: bool = True) -> Graph:
    """``g`` with each equation ``e`` for which ``sub_of(e)`` gives a graph (same inputs and
    outputs as ``e``) replaced by that graph's equations, on fresh variables; equations for
    which it gives None are kept (reading the replacements' results). A spliced equation keeps
    its own source line where it has one and ``own_source``, else takes ``e``'s."""
    env: dict[Var, object] = {}

    def read(a):
        return env.get(a, a) if isinstance(a, Var) else a
    eqns: list[Eqn] = []
    for e in g.eqns:
        sub = sub_of(e)
        if sub is None:
            eqns.append(Eqn(e.op, [read(a) for a in e.inputs], e.params, e.outputs, e.source)
                        if any(isinstance(a, Var) and a in env for a in e.inputs) else e)
            continue
        local: dict[Var, object] = dict(zip(sub.inputs, [read(a) for a in e.inputs]))
        for se in sub.eqns:
            outs = [Var(o.aval) for o in se.outputs]
            ins = [local.get(a, a) if isinstance(a, Var) else a for a in se.inputs]
            eqns.append(Eqn(se.op, ins, se.params, outs,
                            (se.source if own_source else None) or e.source))
            local.update(zip(se.outputs, outs))
        for o, so in zip(e.outputs, sub.outputs):
            env[o] = local.get(so, so) if isinstance(so, Var) else so
    return Graph(g.inputs, eqns, [read(a) for a in g.outputs])


def counter_rows(ins: list, params: dict, counter: int, lower: int) -> tuple[list, dict]:
    """A ``loop``'s operands and params with each gather of row ``i`` of a loop-invariant
    array (``fnp.take(xs, i, 0)``, ``xs[i]`` for a traced ``xs``), ``i`` its counter, turned
    into a per-trip read of that row, as ``scan`` reads its ``xs``.

    ``counter``: the carry that counts (its body result is ``carry + 1``), starting at the
    integer ``lower``. A gather reads a body literal or a loop constant, at the counter or at
    numpy's wrap of it (``where(i < 0, i + n, i)``, what ``fnp.take`` records), and is
    rewritten only when every trip's index is in range without crossing zero, so the read
    row is the gathered one (out of range, the gather stays and raises as numpy does).

    Why: ``fori_loop(lo, hi, lambda i, acc: acc + fnp.take(xs, i, 0), ...)`` is the common
    way to walk an array, and a gather has no compiled form inside a loop: the body ran as
    a Python loop over kernels. A per-trip read compiles (the gradient too: its cotangent
    is a stacked result, not a scatter into a carry).
    """
    body: Graph = params["body"]
    length, nc, nh = params["length"], params["n_consts"], params["n_carry"]
    if length <= 0 or not 0 <= counter < nh:
        return ins, params
    c = body.inputs[nc + counter]
    if c.aval.shape != () or c.aval.dtype.kind not in "iu":
        return ins, params
    producer = {o: e for e in body.eqns for o in e.outputs}
    step = producer.get(body.outputs[counter])
    if step is None or step.op.name != "add" or not _adds_one(step, c):
        return ins, params
    pos = {v: i for i, v in enumerate(body.inputs)}

    def is_lit(a, value) -> bool:
        return isinstance(a, Lit) and np.shape(a.val) == () and a.val == value

    def reads_counter(idx, n: int) -> bool:
        if idx is c:
            return True
        sel = producer.get(idx)         # select(lt(c, 0), add(c, n), c)
        if sel is None or sel.op.name != "select" or sel.inputs[2] is not c:
            return False
        lt, wrap = producer.get(sel.inputs[0]), producer.get(sel.inputs[1])
        return (lt is not None and lt.op.name == "lt" and lt.inputs[0] is c
                and is_lit(lt.inputs[1], 0) and wrap is not None and wrap.op.name == "add"
                and wrap.inputs[0] is c and is_lit(wrap.inputs[1], n))

    hi = lower + length - 1
    eqns, new_inputs, new_ins, new_xs = [], [], [], []
    for e in body.eqns:
        arr = e.inputs[0] if e.op.name == "gather" and len(e.inputs) == 2 else None
        src = None
        if arr is not None and e.params["spec"] == (("arr", 0),):
            if isinstance(arr, Lit):
                src = arr
            elif arr in pos and pos[arr] < nc:
                src = ins[pos[arr]]
        shape = tuple(np.shape(arr.val)) if isinstance(arr, Lit) else (
            arr.aval.shape if arr is not None else ())
        if src is None or not shape or not reads_counter(e.inputs[1], shape[0]):
            eqns.append(e)
            continue
        n = shape[0]
        start = lower if 0 <= lower and hi < n else lower + n if -n <= lower and hi < 0 else None
        if start is None:
            eqns.append(e)
            continue
        r = len(shape)
        row = Var(AVal((1,) + shape[1:], e.outputs[0].aval.dtype))
        new_inputs.append(row)
        new_ins.append(src)
        new_xs.append(((start,) + (0,) * (r - 1), (1,) + (0,) * (r - 1), (1,) + shape[1:],
                       (1,) * r))
        eqns.append(Eqn(reshape_p, [row], {"new_sizes": shape[1:]}, e.outputs, e.source))
    if not new_inputs:
        return ins, params
    new_body = Graph(list(body.inputs) + new_inputs, eqns, body.outputs)
    return (list(ins) + new_ins,
            dict(params, body=new_body, xs=tuple(params["xs"]) + tuple(new_xs)))


def _adds_one(e: Eqn, c: Var) -> bool:
    """Whether ``e`` is ``c + 1`` (either order)."""
    a, b = e.inputs
    other = b if a is c else a if b is c else None
    return (other is not None and other is not c and isinstance(other, Lit)
            and np.shape(other.val) == () and other.val == 1)
