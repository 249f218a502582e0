"""backward, grad and get_symbol: the recorded history as a Graph, and its gradient.

Owns the backward pass of the imperative API. There is no second autodiff engine here: the
history reachable from the heads becomes an ordinary ``core.Graph`` (the recorded equations,
as they are), ``autodiff.vjp_graph`` makes its gradient graph, the passes optimise it, and the
reference interpreter runs it, or, for ``create_graph=True``, the recorder runs it so that the
gradient computation is recorded too.
Imports autodiff, passes, backends, symbol and the siblings ``_ndarray``, ``_nodes``,
``_marking``.

How a backward works (MXNet's Imperative::Backward, re-thought):
1. Walk the nodes from the heads (post-order, so the equations come out topologically
   ordered). Arrays read by the nodes that no node computed are the graph's inputs: marked
   leaves and constants. Each marked *result* (a non-leaf variable, MXNet's
   ListNonleafVariables) gets ``u' = u + z`` with a new zero input ``z``, and later equations
   read ``u'``; the gradient for ``z`` is the gradient for ``u``.
2. ``vjp_graph`` appends the backward equations to the forward ones. We keep only the
   backward ones; the forward values they read become inputs, fed from what the nodes saved,
   so the forward pass is not run again. The result is cached by the structure of the forward
   graph: a training loop that records the same computation each step reuses it. (The key
   is held strongly, by necessity: each step records a new, equal graph, and the cache must
   outlive it. The cache is a ``signature.SignatureCache``, "autograd.backward_graphs" in
   ``functrace.caches``; ``ft.clear_caches()`` empties it.)
3. Gradients are written to each variable's buffer by its grad_req, and without retain_graph
   the nodes are released: the values they kept are dropped at once (the equations stay,
   for get_symbol), and a second backward through them is an error that says so.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from .. import ops
from ..autodiff import vjp_graph
from ..backends import reference
from ..core import Eqn, Graph, Params, Var
from ..errors import ConcretizationError, FunctraceError, FunctraceValueError, ShapeError, where
from ..ops.elementwise import add_p
from ..passes.simplify import dce, optimize
from ..signature import SignatureCache
from ..symbol import Symbol
from ..tracing import CURRENT_TRACE, eval_graph
from ._ndarray import RECORDER, NDArray, run_recorded, storage_of, wrap
from ._nodes import Node, Slot, as_list
from ._state import RECORDING, TRAINING

__all__ = ["backward", "get_symbol", "grad"]


# --------------------------------------------------------------------------------------------
# The history as a graph
# --------------------------------------------------------------------------------------------

class _History:
    """The graph recorded behind some heads, and what is needed to run its backward pass."""

    __slots__ = ("graph", "in_slots", "nodes", "producer", "saved", "z_keys")

    def __init__(self, graph, nodes, in_slots, z_keys, saved, producer):
        self.graph = graph
        self.nodes = nodes            # the _Nodes, topologically ordered
        self.in_slots = in_slots      # per graph input: the marked leaf's Slot, or None
        self.z_keys = z_keys          # graph input index -> key of a non-leaf variable
        self.saved = saved            # Var -> value kept by the nodes
        self.producer = producer      # Var -> (node, output index)


def _head_error(i: int, h, what: str) -> FunctraceError:
    if isinstance(h, NDArray) and h._node is not None and h._node.freed:
        return FunctraceValueError(
            f"autograd.{what}: the graph that computed head {i} ({h.aval}) was already freed "
            "by an earlier backward/grad call, which releases the values the recorded history "
            "kept unless told otherwise. Pass retain_graph=True to that earlier "
            "call to differentiate the same graph again, or record the computation again "
            f"({where()})")
    desc = h.aval if isinstance(h, NDArray) else type(h).__name__
    return FunctraceValueError(
        f"autograd.{what}: head {i} ({desc}) was not recorded, so there is nothing to "
        "differentiate. Compute it inside `with autograd.record():` from at least one array "
        "marked with autograd.attach_grad(x) (or mark_variables); values computed outside "
        "record(), inside pause(), or only from unmarked arrays have no history "
        f"({where()})")


def _head_ref(h, structure_only: bool):
    if not isinstance(h, NDArray):
        return None
    if structure_only and h._node is not None:   # a released graph still has its equations
        return h._node
    return h._ref()


def _history(heads: Sequence[NDArray], what: str, targets: dict | None = None,
             marks: bool = True, structure_only: bool = False) -> _History:
    """Collect the recorded graph behind ``heads``.

    ``targets`` maps (id(node), output index) to a key for results whose gradient is wanted
    (``grad``'s non-leaf variables); with ``marks`` the nodes' own marked results are added;
    with ``structure_only`` (get_symbol) released nodes are fine: only equations are needed.
    """
    roots = []
    for i, h in enumerate(heads):
        ref = _head_ref(h, structure_only)
        if ref is None:
            raise _head_error(i, h, what)
        if isinstance(ref, Node):
            roots.append(ref)
    # post-order walk: parents before children
    order: list[Node] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, 0)]
        while stack:
            node, i = stack[-1]
            ps = node.parents
            while i < len(ps) and not (isinstance(ps[i], Node) and id(ps[i]) not in seen):
                i += 1
            if i < len(ps):
                child = ps[i]
                if child.freed and not structure_only:
                    raise FunctraceValueError(
                        f"autograd.{what}: part of the graph behind the heads was freed by an "
                        "earlier backward/grad call on another head that shares it. Pass "
                        "retain_graph=True to that earlier call to keep the shared part "
                        f"({where()})")
                stack[-1] = (node, i + 1)
                seen.add(id(child))
                stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)

    inputs: list[Var] = []
    in_slots: list[Slot | None] = []
    index: dict[Var, int] = {}
    eqns: list[Eqn] = []
    subst: dict[Var, Var] = {}
    saved: dict = {}
    producer: dict = {}
    z_keys: dict[int, object] = {}
    zs: list[Var] = []

    def add_input(v, slot):
        if v not in index:
            index[v] = len(inputs)
            inputs.append(v)
            in_slots.append(slot)
        elif slot is not None and in_slots[index[v]] is None:
            in_slots[index[v]] = slot

    for node in order:
        e = node.eqn
        ins = []
        for a, p in zip(e.inputs, node.parents, strict=True):
            if isinstance(a, Var):
                if not isinstance(p, Node):
                    add_input(a, p)
                a = subst.get(a, a)
            ins.append(a)
        eqns.append(e if all(x is y for x, y in zip(ins, e.inputs, strict=True))
                    else Eqn(e.op, ins, e.params, e.outputs, e.source))
        if node.saved:
            saved.update(node.saved)
        for j, o in enumerate(e.outputs):
            producer[o] = (node, j)
        wanted = []
        if marks and node.marks:
            wanted.extend((j, slot) for j, slot in sorted(node.marks.items()))
        if targets:
            wanted.extend((j, targets[(id(node), j)]) for j in range(len(e.outputs))
                          if (id(node), j) in targets)
        for j, key in wanted:   # u' = u + z: the gradient for z is the gradient for u
            u = e.outputs[j]
            z, u2 = Var(u.aval), Var(u.aval)
            eqns.append(Eqn(add_p, (subst.get(u, u), z), Params(), (u2,), e.source))
            subst[u] = u2
            z_keys[len(zs)] = key
            zs.append(z)

    outs = []
    for h in heads:
        ref = _head_ref(h, structure_only)
        if isinstance(ref, Slot):   # a marked leaf is its own head
            add_input(h._var, ref)
        outs.append(subst.get(h._var, h._var))
    n = len(inputs)
    graph = Graph(inputs + zs, eqns, outs)
    return _History(graph, order, in_slots + [None] * len(zs),
                    {n + k: key for k, key in z_keys.items()}, saved, producer)


# --------------------------------------------------------------------------------------------
# The backward graph (cached by the structure of the forward graph)
# --------------------------------------------------------------------------------------------

# (forward graph, wrt, seeds, leaf pattern) -> (backward graph, positions): the forward graph
# is the whole signature (its constants are inputs, its literals part of its structure)
_CACHE = SignatureCache("autograd.backward_graphs")


def _backward_graph(hist: _History, wrt: tuple[int, ...], seeds: tuple):
    """(graph, positions): the optimised gradient graph, whose inputs are the forward values
    at ``positions`` (in the order graph inputs, then equation outputs) followed by one
    cotangent per float head, and whose outputs are the gradients for ``wrt``."""
    g = hist.graph
    key = (g, wrt, seeds, tuple(s is not None for s in hist.in_slots))
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    fwd_vars = list(g.inputs) + [o for e in g.eqns for o in e.outputs]
    position = {v: i for i, v in enumerate(fwd_vars)}
    token = CURRENT_TRACE.set(None)
    seeds_ = ["input" if s else None for s in seeds]
    cacheable = True
    try:
        joint = vjp_graph(g, list(wrt), seeds_)
    except ConcretizationError:
        # a rule runs Python control flow on values (a custom_vjp's fwd with a while): give
        # it this history's values. The graph is specialised to them: not cached.
        values = [np.zeros(v.aval.shape, v.aval.dtype) if i in hist.z_keys
                  else hist.saved.get(v) for i, v in enumerate(g.inputs)]
        joint = vjp_graph(g, list(wrt), seeds_, values=values)
        cacheable = False
    finally:
        CURRENT_TRACE.reset(token)
    n_fwd = len(g.eqns)
    cts = list(joint.inputs[len(g.inputs):])
    grads = list(joint.outputs[len(g.outputs):])
    bwd = dce(Graph(fwd_vars + cts, joint.eqns[n_fwd:], grads))
    need = [v for v in fwd_vars if v in _reads(bwd)]
    # Values the nodes did not keep are recomputed from ones they did (never needed when the
    # saved-value analysis is exact; a safety net if a rule reads more than it did then).
    available = set(hist.saved) | {g.inputs[i] for i in hist.z_keys}
    producer = {o: e for e in g.eqns for o in e.outputs}
    inputs, redo, stack, done = [], set(), list(need), set()
    while stack:
        v = stack.pop()
        if v in done:
            continue
        done.add(v)
        if v in available:
            inputs.append(v)
            continue
        e = producer.get(v)
        if e is None:
            raise FunctraceError(f"internal: the backward pass reads {v!r}, a value no node "
                                 "kept; please report this with the recorded code")
        redo.add(id(e))
        stack.extend(a for a in e.inputs if isinstance(a, Var))
    inputs.sort(key=position.__getitem__)
    again = [e for e in g.eqns if id(e) in redo]
    graph = optimize(Graph(inputs + cts, again + list(bwd.eqns), bwd.outputs))
    result = (graph, tuple(position[v] for v in inputs))
    if cacheable:
        _CACHE.put(key, result)
    return result


def _reads(g: Graph) -> set:
    used = {a for e in g.eqns for a in e.inputs if isinstance(a, Var)}
    used.update(a for a in g.outputs if isinstance(a, Var))
    return used


def _head_values(heads, head_grads, what):
    """(seeds, cotangents): one seed flag per head (float heads take a cotangent)."""
    if head_grads is None:
        head_grads = [None] * len(heads)
    else:
        head_grads = as_list(head_grads)
    if len(head_grads) != len(heads):
        raise FunctraceValueError(
            f"autograd.{what}: got {len(head_grads)} head gradients for {len(heads)} heads; "
            f"give one per head (None for ones) ({where()})")
    seeds, cts = [], []
    for i, (h, hg) in enumerate(zip(heads, head_grads, strict=True)):
        if h.dtype.kind not in "fc":
            seeds.append(False)
            continue
        seeds.append(True)
        if hg is None:
            cts.append(np.ones(h.shape, h.dtype))
            continue
        if not isinstance(hg, NDArray):
            hg = storage_of(hg)
        if tuple(hg.shape) != h.shape:
            raise ShapeError(f"autograd.{what}: head gradient {i} has shape "
                             f"{tuple(hg.shape)}, its head {h.shape}; they must match "
                             f"({where()})")
        if hg.dtype != h.dtype:
            hg = hg.astype(h.dtype)
        cts.append(hg)
    return tuple(seeds), cts


def _run(hist: _History, wrt, seeds, cts, create_graph: bool, train_mode: bool) -> list:
    """The gradients for the graph inputs ``wrt`` (numpy arrays, or recorded NDArrays)."""
    graph, positions = _backward_graph(hist, tuple(wrt), seeds)
    g = hist.graph
    fwd_vars = list(g.inputs) + [o for e in g.eqns for o in e.outputs]
    z_vars = {g.inputs[i] for i in hist.z_keys}
    slots = dict(zip(g.inputs, hist.in_slots, strict=True))
    args = []
    for p in positions:
        v = fwd_vars[p]
        if v in z_vars:
            val = np.zeros(v.aval.shape, v.aval.dtype)
        else:
            val = hist.saved[v]
        if create_graph:   # the same Var and history: what is recorded now joins the graph
            node, j = hist.producer.get(v, (None, 0))
            slot = slots.get(v) if node is None else None
            val = wrap(val, v, node, j, slot)
        args.append(val)
    t_train = TRAINING.set(bool(train_mode))
    try:
        if create_graph:
            cts = [c if isinstance(c, NDArray) else wrap(c) for c in cts]
            given = {id(a) for a in args + cts}
            t_cur, t_rec = CURRENT_TRACE.set(RECORDER), RECORDING.set(True)
            try:
                outs = eval_graph(graph, args + cts)
                # a gradient that *is* an input (d(x*y)/dx = y) gets its own array: a recorded
                # identity, so it never aliases a variable or the caller's head gradient
                outs = [ops.convert_element_type(o, o.dtype) if id(o) in given else o
                        for o in outs]
            finally:
                RECORDING.reset(t_rec)
                CURRENT_TRACE.reset(t_cur)
            return [o if isinstance(o, NDArray) else wrap(storage_of(o)) for o in outs]
        cts = [c._data if isinstance(c, NDArray) else c for c in cts]
        given = {id(a) for a in args + cts}
        t_cur = CURRENT_TRACE.set(None)
        try:
            outs = reference.run(graph, args + cts)
        finally:
            CURRENT_TRACE.reset(t_cur)
        return [o.copy() if id(o) in given else o for o in outs]
    finally:
        TRAINING.reset(t_train)


def _sum(parts, create_graph: bool):
    """Add the gradients of one variable that reached it under several Vars (recorded when
    the gradients are)."""
    if len(parts) == 1:
        return parts[0]
    token = RECORDING.set(True) if create_graph else None
    try:
        total = parts[0]
        for p in parts[1:]:
            total = run_recorded(operator.add)(total, p)
        return total
    finally:
        if token is not None:
            RECORDING.reset(token)


def _free(hist: _History) -> None:
    for node in hist.nodes:
        node.free()


def _retain(retain_graph, create_graph) -> bool:
    # a graph recorded by create_graph reads the forward nodes: keep them by default
    return bool(create_graph) if retain_graph is None else bool(retain_graph)


# --------------------------------------------------------------------------------------------
# backward, grad, get_symbol
# --------------------------------------------------------------------------------------------

def _heads(heads, what) -> list:
    heads = as_list(heads)
    if not heads:
        raise FunctraceValueError(f"autograd.{what}: no heads given ({where()})")
    return heads


def backward(heads, head_grads=None, retain_graph=None, create_graph: bool = False,
             train_mode: bool = True) -> None:
    """Compute the gradients of ``heads`` and write them into the marked variables' buffers.

    Args:
        heads: an NDArray or a list of them, recorded inside ``autograd.record()``.
        head_grads: gradients of the heads (one per head; None for ones, the default).
        retain_graph: keep the recorded graph for another backward. Default: False (the
            graph and the values it kept are released), True when ``create_graph``.
        create_graph: record the gradient computation, so the gradients (``x.grad``) can be
            differentiated again (second order, gradient penalties).
        train_mode: the training flag while the backward pass runs.

    Every marked variable reached from the heads gets its gradient by its grad_req: "write"
    overwrites, "add" accumulates across calls, "null" is skipped. Marked results (non-leaf
    variables) get theirs too.

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x = autograd.attach_grad(np.array([1.0, 2.0]))
        >>> with autograd.record():
        ...     y = (x ** 3).sum()
        >>> autograd.backward(y)
        >>> x.grad
        NDArray([ 3., 12.])
    """
    heads = _heads(heads, "backward")
    hist = _history(heads, "backward")
    wrt, slots = [], []
    for i, slot in enumerate(hist.in_slots):
        if slot is not None and slot.req != "null" and slot.grad is not None:
            wrt.append(i)
            slots.append(slot)
    for i, slot in hist.z_keys.items():
        if slot.req != "null" and slot.grad is not None:
            wrt.append(i)
            slots.append(slot)
    if not wrt:
        raise FunctraceValueError(
            "autograd.backward: no variable reached from the heads requires a gradient (every "
            "marked array there has grad_req='null', or was unmarked with drop_grads). Mark "
            "an input with autograd.attach_grad(x, grad_req='write') before recording, or ask "
            f"for specific gradients with autograd.grad(heads, variables) ({where()})")
    seeds, cts = _head_values(heads, head_grads, "backward")
    grads = _run(hist, wrt, seeds, cts, create_graph, train_mode)
    per_slot: dict[int, list] = {}
    order: list[Slot] = []
    for slot, gval in zip(slots, grads, strict=True):
        if id(slot) not in per_slot:
            per_slot[id(slot)] = []
            order.append(slot)
        per_slot[id(slot)].append(gval)
    for slot in order:
        _write(slot, _sum(per_slot[id(slot)], create_graph), create_graph)
    if not _retain(retain_graph, create_graph):
        _free(hist)


def _write(slot: Slot, gval, create_graph: bool) -> None:
    buf = slot.grad
    if slot.req == "add":
        if create_graph:
            t = RECORDING.set(True)
            try:
                gval = run_recorded(operator.add)(buf, gval)
            finally:
                RECORDING.reset(t)
        else:
            gval = buf._data + gval
    buf._take(gval, keep_graph=create_graph)


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph: bool = False,
         train_mode: bool = True) -> list[NDArray]:
    """The gradients of ``heads`` with respect to ``variables``; ``.grad`` is not touched.

    Args:
        heads: an NDArray or a list of them, recorded inside ``autograd.record()``.
        variables: an NDArray or a list of them: marked variables, or results recorded from
            them (the gradient with respect to an intermediate value).
        head_grads: as for ``backward``.
        retain_graph: keep the graph (default: the value of ``create_graph``).
        create_graph: record the gradient computation (for higher-order gradients).
        train_mode: the training flag while the backward pass runs.

    Returns:
        One NDArray per variable (zeros where a variable does not influence the heads): a
        list when ``variables`` is a list or tuple, else a single NDArray (as in MXNet).

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x = autograd.attach_grad(np.array(2.0))
        >>> with autograd.record():
        ...     y = x ** 3
        ...     gx, = autograd.grad(y, [x], create_graph=True)   # 3 x^2, recorded
        >>> autograd.grad(gx, [x])                               # 6 x
        [NDArray(12.)]
    """
    heads = _heads(heads, "grad")
    single = not isinstance(variables, list | tuple)
    variables = as_list(variables)
    targets: dict = {}
    for k, v in enumerate(variables):
        ref = v._ref() if isinstance(v, NDArray) else None
        if ref is None:
            desc = v.aval if isinstance(v, NDArray) else type(v).__name__
            raise FunctraceValueError(
                f"autograd.grad: variable {k} ({desc}) does not require a gradient: it is "
                "neither marked (autograd.attach_grad / mark_variables) nor recorded from a "
                f"marked array. Mark it before recording the heads ({where()})")
        if isinstance(ref, Node):
            targets[(id(ref), v._index)] = ("var", k)
    hist = _history(heads, "grad", targets=targets, marks=False)
    wrt, owner = [], []
    by_key = {key: i for i, key in hist.z_keys.items()}
    for k, v in enumerate(variables):
        if v._node is None:   # a marked leaf: every graph input that is it
            for i, slot in enumerate(hist.in_slots):
                if slot is v._slot:
                    wrt.append(i)
                    owner.append(k)
        elif ("var", k) in by_key:
            wrt.append(by_key[("var", k)])
            owner.append(k)
    seeds, cts = _head_values(heads, head_grads, "grad")
    grads = _run(hist, wrt, seeds, cts, create_graph, train_mode) if wrt else []
    parts: list[list] = [[] for _ in variables]
    for k, gval in zip(owner, grads, strict=True):
        parts[k].append(gval)
    out = []
    for v, ps in zip(variables, parts, strict=True):
        if not ps:
            out.append(wrap(np.zeros(v.shape, v.dtype)))
        else:
            total = _sum(ps, create_graph)
            out.append(total if isinstance(total, NDArray) else wrap(storage_of(total)))
    if not _retain(retain_graph, create_graph):
        _free(hist)
    return out[0] if single else out


def get_symbol(out) -> Symbol:
    """The recorded graph behind ``out`` as an ``ft.Symbol`` (MXNet's deferred-compute
    get_symbol), ready to print, save with ``to_json``, call or compile.

    The Symbol's inputs are the arrays the recorded operations read that none of them
    computed (marked variables and any other array), in the order they were first read; its
    outputs are ``out`` (one array, or a list/tuple of them). Python scalars are literals.
    It works after a backward released the graph's values too: it needs only the equations.

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x = autograd.attach_grad(np.array([1.0, 2.0]))
        >>> with autograd.record():
        ...     y = (x * x).sum()
        >>> sym = autograd.get_symbol(y)
        >>> float(sym(np.array([3.0, 4.0])))
        25.0
    """
    heads = _heads(out, "get_symbol")
    hist = _history(heads, "get_symbol", marks=False, structure_only=True)
    g = hist.graph
    if isinstance(out, list | tuple):
        return Symbol(g, out_tree=None if len(heads) != 1 else _tuple_tree(1))
    return Symbol(g)


def _tuple_tree(n):
    from .. import tree_util
    return tree_util.tree_structure(tuple(range(n)))


def _backward_method(self, out_grad=None, retain_graph=None, train_mode: bool = True,
                     create_graph: bool = False) -> None:
    """``autograd.backward([self], [out_grad], ...)``."""
    backward(self, None if out_grad is None else [out_grad], retain_graph=retain_graph,
             create_graph=create_graph, train_mode=train_mode)


# NDArray sits below this module; its method is installed here, so the import runs one way
NDArray.backward = _backward_method
