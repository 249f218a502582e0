"""How an un-jitted transform runs the user's function, shared by api and forward.

Owns running ``fun`` once under an eager trace (a tape, a JVP or batch trace): ``call_traced``,
``taped``, ``run_eager``; tracing it into a graph to transform (``traced_transform``) and
running that graph (``run_graph``); handing results to the user (``own``, ``unwrap_tree``); and
splitting a joint vjp graph into forward and backward halves (``split_vjp_graph``). Nothing is
cached here: every call re-runs the user's Python. API layer: imports arguments, tape, tracing,
passes and the reference backend.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import tree_util
from .arguments import check_leaf_arg, check_out_leaf, flatten_fun
from .backends import reference
from .backends.malloc_tuning import tune_once
from .core import Graph, Var, on_device
from .passes.simplify import dce
from .tape import TapeTrace, unwrap
from .tracing import CURRENT_TRACE, Tracer, current_trace, eval_graph, trace_to_graph

__all__ = ["traced_transform", "run_graph", "call_traced", "taped", "run_eager", "own",
           "unwrap_tree", "split_vjp_graph"]


def traced_transform(fun: Callable, args, kwargs, build, examples=None, flat=None,
                      diff=None):
    """Trace ``fun`` at ``args`` and transform the graph with ``build(traced, in_tree,
    out_tree)``. Nothing is cached: the user's Python runs on every call (random draws and
    globals behave as written).

    ``examples(leaves)`` may replace the leaves used for tracing; ``flat`` is ``(leaves,
    in_tree)`` of ``(args, kwargs)`` when the caller already has it; ``diff`` lists the
    leaves the transform differentiates (converting a value that depends on them to a
    number is then a TracerConversionError). Returns (graph, out_tree, extra, leaves,
    captured)."""
    leaves, in_tree = flat if flat is not None else tree_util.tree_flatten(
        (tuple(args), kwargs or {}))
    leaves = [check_leaf_arg(x, i) for i, x in enumerate(leaves)]
    flat_fn, box = flatten_fun(fun, in_tree)
    tr = trace_to_graph(flat_fn, examples(leaves) if examples is not None else leaves,
                        diff=diff or ())
    out_tree = box[0]
    graph, extra = build(tr, in_tree, out_tree)
    return graph, out_tree, extra, leaves, tr.captured


def run_graph(graph, args):
    """Evaluate a transformed graph: re-bind into an enclosing trace, or interpret."""
    if current_trace() is not None or any(isinstance(a, Tracer) for a in args):
        return eval_graph(graph, list(args))
    return reference.run(graph, args)


def call_traced(trace, fun, in_tree, leaves):
    """``fun`` called on ``leaves`` (unflattened to ``in_tree``) with ``trace`` current."""
    tune_once()     # numpy temporaries: keep glibc from mmap-ing and unmapping each one
    args, kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
    token = CURRENT_TRACE.set(trace)
    try:
        return fun(*args, **kwargs)
    finally:
        CURRENT_TRACE.reset(token)


def taped(fun, in_tree, leaves, wrt):
    """``fun`` run once on a new tape, ``leaves[i]`` for ``i`` in ``wrt`` differentiated:
    (the tape, the leaves as passed, the output)."""
    trace = TapeTrace(current_trace())
    ins = list(leaves)
    for i in wrt:
        ins[i] = trace.leaf(ins[i])
    try:
        out = call_traced(trace, fun, in_tree, ins)
    finally:
        trace.active = False
    return trace, ins, out


def run_eager(trace, fun, in_tree, ins):
    """``fun`` run once on the eager ``trace``: its output leaves (checked) and structure."""
    try:
        out = call_traced(trace, fun, in_tree, ins)
    finally:
        trace.active = False
    out_leaves, out_tree = tree_util.tree_flatten(out)
    return [check_out_leaf(o, i) for i, o in enumerate(out_leaves)], out_tree


def own(x):
    """A result handed to the user at top level: a writable numpy array (ops may return
    read-only broadcast views); tracers and device arrays pass through."""
    if isinstance(x, np.ndarray):
        return x if x.flags.writeable else x.copy()
    if isinstance(x, Tracer) or on_device(x):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    return np.asarray(x)


def unwrap_tree(tree, trace):
    top = trace.parent is None
    return tree_util.tree_map(lambda x: own(unwrap(x, trace)) if top else unwrap(x, trace),
                              tree)


def split_vjp_graph(g, n_primal_in: int, n_out: int):
    """Split a joint vjp graph into forward (primals -> outputs + residuals) and backward
    (residuals + cotangents -> gradients) graphs by dependence on the cotangent inputs."""
    ct_inputs = set(g.inputs[n_primal_in:])
    bwd_vars = set(ct_inputs)
    fwd_eqns, bwd_eqns = [], []
    for e in g.eqns:
        if any(isinstance(a, Var) and a in bwd_vars for a in e.inputs):
            bwd_eqns.append(e)
            bwd_vars.update(e.outputs)
        else:
            fwd_eqns.append(e)
    grads = g.outputs[n_out:]
    # residuals: forward vars (or primal inputs) read by the backward graph or returned as grads
    residuals = []
    seen = set()
    for a in [a for e in bwd_eqns for a in e.inputs] + list(grads):
        if isinstance(a, Var) and a not in bwd_vars and a not in seen:
            seen.add(a)
            residuals.append(a)
    fwd = dce(Graph(g.inputs[:n_primal_in], fwd_eqns, list(g.outputs[:n_out]) + residuals))
    bwd = Graph(residuals + list(g.inputs[n_primal_in:]), bwd_eqns, grads)
    return fwd, bwd
