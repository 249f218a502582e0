"""Batching (vmap) as a graph transform: ``batch_graph(graph, in_dims, axis_size)``.

Owns the interpreter that pushes a batch dimension through a graph, and the batch rules of the
sub-graph ops declared below it (``checkpoint``, ``custom_jvp_call``, ``custom_vjp_call``: their
rules batch the sub-graph, so they need this transform). Every other op's rule comes from
its declaration: an ``op.batch`` of its own (shape, dot and indexing ops), or a
``batch_family`` whose rule ``ops.batch_rules.rule_for`` builds. Imports core, tracing, ops and
autodiff; never the API layer or a backend.

A batch rule has the signature ``rule(args, dims, **params) -> (outs, out_dims)``: ``args`` are
values in the current trace, ``dims[i]`` is the batch axis of ``args[i]`` or ``None`` (not
batched). Rules emit *batched ops*, never a Python loop over the batch: an op without a rule
is an error that names it (MissingRuleError), not a silent per-example fallback.

Rules are found through ``rule_for(op)``: the declaration's own ``Op.batch``, or its
``batch_family``'s rule (built on first use), or, for the sub-graph ops, the rule this module
attaches when imported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .autodiff import CustomJvpRule, CustomVjpRule
from .core import AVal, Graph, Lit, Var
from .errors import MissingRuleError
from .ops.batch_rules import bdim_to_front, moveaxis, rule_for, size_of
from .ops.control import checkpoint_p, custom_jvp_call_p, custom_vjp_call_p
from .tracing import SOURCE_OVERRIDE as _source_override
from .tracing import Tracer, bind, source_line, trace_to_graph

__all__ = ["batch_graph", "moveaxis", "bdim_to_front", "batched_vjp_rule", "batched_jvp_rule"]


# --------------------------------------------------------------------------------------------
# sub-graph ops
# --------------------------------------------------------------------------------------------

def _subgraph_rule(op, key):
    def rule(args, dims, **params):
        g = params[key]
        size = size_of(args, dims)
        new_args = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
        bg = batch_graph(g, [0] * len(args), size, [0] * len(g.outputs))
        p = dict(params)
        p[key] = bg
        out = bind(op, *new_args, **p)
        return out, (0,) * len(out)
    return rule


def _unbatched_aval(x):
    a = x.aval if isinstance(x, Tracer) else AVal.of(np.asarray(x))
    return AVal(a.shape[1:], a.dtype)


def _vmapped(fn, size):
    """``fn`` (a function of leaf lists -> leaf list) applied to batch-first leaves, as one
    batched graph evaluated in the current trace."""
    from .tracing import eval_graph

    def run(*leaves):
        tr = trace_to_graph(lambda *xs: fn(*xs), [_unbatched_aval(x) for x in leaves])
        n_cap = len(tr.graph.inputs) - len(leaves)
        bg = batch_graph(tr.graph, [0] * len(leaves) + [None] * n_cap, size)
        return eval_graph(bg, list(leaves) + list(tr.captured))
    return run


def batched_jvp_rule(rule: CustomJvpRule, size: int) -> CustomJvpRule:
    """``rule`` for operands carrying a batch of ``size`` on axis 0 (one batched graph of the
    user's rule, never a loop over examples)."""
    from . import tree_util
    n = rule.in_tree.num_leaves

    def flat_jvp(*pt):
        ps = tree_util.tree_unflatten(rule.in_tree, list(pt[:n]))
        ts = tree_util.tree_unflatten(rule.in_tree, list(pt[n:]))
        out, tout = rule.jvp(tuple(ps), tuple(ts))
        return tree_util.tree_leaves(out) + tree_util.tree_leaves(tout)
    batched = _vmapped(flat_jvp, size)

    def jvp_b(primals, tangents):
        leaves = batched(*tree_util.tree_leaves(primals), *tree_util.tree_leaves(tangents))
        k = rule.out_tree.num_leaves
        return (tree_util.tree_unflatten(rule.out_tree, leaves[:k]),
                tree_util.tree_unflatten(rule.out_tree, leaves[k:]))
    return CustomJvpRule(jvp_b, rule.in_tree, rule.out_tree, rule.name, batched=(rule, size))


def _custom_jvp_batch(args, dims, *, fun_graph, rule):
    size = size_of(args, dims)
    new = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
    bg = batch_graph(fun_graph, [0] * len(new), size)
    out = bind(custom_jvp_call_p, *new, fun_graph=bg, rule=batched_jvp_rule(rule, size))
    return out, (0,) * len(out)


def batched_vjp_rule(rule: CustomVjpRule, size: int) -> CustomVjpRule:
    """``rule`` for operands carrying a batch of ``size`` on axis 0: the user's fwd and bwd,
    each one batched graph."""
    from . import tree_util
    box = {}
    ex = tree_util.tree_unflatten(rule.in_tree, list(range(rule.in_tree.num_leaves)))

    def flat_fwd(*xs):
        out, res = rule.fwd(*tree_util.tree_unflatten(rule.in_tree, list(xs)))
        rl, box["res"] = tree_util.tree_flatten(res)
        return tree_util.tree_leaves(out) + rl

    fwd_b = _vmapped(flat_fwd, size)

    def fwd(*xs):
        leaves = fwd_b(*tree_util.tree_leaves(xs))
        k = rule.out_tree.num_leaves
        res_leaves = leaves[k:]
        return (tree_util.tree_unflatten(rule.out_tree, leaves[:k]),
                (tuple(res_leaves), box["res"]))

    def bwd(res, ct):
        res_leaves, res_tree = res
        n_res = len(res_leaves)
        zero = set()              # arguments whose cotangent the user's bwd gave as None

        def flat_bwd(*rc):
            r = tree_util.tree_unflatten(res_tree, list(rc[:n_res]))
            c = tree_util.tree_unflatten(rule.out_tree, list(rc[n_res:]))
            leaves = []
            for k, g_ in enumerate(rule.bwd(r, c)):
                if g_ is None:
                    zero.add(k)
                else:
                    leaves.extend(tree_util.tree_leaves(g_))
            return leaves
        leaves = _vmapped(flat_bwd, size)(*res_leaves, *tree_util.tree_leaves(ct))
        out, off = [], 0
        for k, a in enumerate(ex):
            if k in zero:
                out.append(None)
                continue
            n = len(tree_util.tree_leaves(a))
            out.append(tree_util.tree_unflatten(tree_util.tree_structure(a),
                                                leaves[off:off + n]))
            off += n
        return tuple(out)

    return CustomVjpRule(_named(fwd, rule.fwd), _named(bwd, rule.bwd),
                         rule.in_tree, rule.out_tree, rule.name, batched=(rule, size))


def _named(wrapper, fn):
    wrapper.__wrapped__ = fn
    return wrapper


def _custom_vjp_batch(args, dims, *, fun_graph, rule):
    size = size_of(args, dims)
    new = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
    bg = batch_graph(fun_graph, [0] * len(new), size)
    out = bind(custom_vjp_call_p, *new, fun_graph=bg, rule=batched_vjp_rule(rule, size))
    return out, (0,) * len(out)


checkpoint_p.batch = _subgraph_rule(checkpoint_p, "graph")
custom_jvp_call_p.batch = _custom_jvp_batch
custom_vjp_call_p.batch = _custom_vjp_batch


# --------------------------------------------------------------------------------------------
# the transform
# --------------------------------------------------------------------------------------------

def batch_graph(g: Graph, in_dims: Sequence[int | None], axis_size: int,
                out_dims: Sequence[int | None] | None = None) -> Graph:
    """The batched version of ``g``.

    Args:
        g: a graph.
        in_dims: per input, the axis that carries the batch, or None (not batched).
        axis_size: the batch size.
        out_dims: per output, where its batch axis goes (default 0); ``None`` returns the
            output unbatched and is an error if it depends on a batched input.

    Returns:
        A graph over the batched input types computing all examples at once with batched ops.
    """
    if out_dims is None:
        out_dims = [0] * len(g.outputs)
    in_avals = []
    for v, d in zip(g.inputs, in_dims):
        shape = list(v.aval.shape)
        if d is not None:
            shape.insert(d, axis_size)
        in_avals.append(AVal(shape, v.aval.dtype))

    def run(*args):
        env: dict[Var, tuple] = {v: (a, d) for v, a, d in zip(g.inputs, args, in_dims)}

        def read(a):
            return (a.val, None) if isinstance(a, Lit) else env[a]
        for e in g.eqns:
            vals, dims = zip(*[read(a) for a in e.inputs]) if e.inputs else ((), ())
            tok = _source_override.set(e.source) if e.source is not None else None
            try:
                if all(d is None for d in dims):
                    out = bind(e.op, *vals, **e.params)
                    outs = out if e.op.multiple_results else (out,)
                    odims = (None,) * len(outs)
                else:
                    rule = rule_for(e.op)
                    if rule is None:
                        raise MissingRuleError(
                            f"vmap: {e.op.name} has no batching rule (recorded at "
                            f"{source_line(e.source)}); functrace never falls back to a "
                            "per-example loop")
                    outs, odims = rule(list(vals), list(dims), **e.params)
            finally:
                if tok is not None:
                    _source_override.reset(tok)
            for o, val, d in zip(e.outputs, outs, odims):
                env[o] = (val, d)
        res = []
        for a, od in zip(g.outputs, out_dims):
            val, d = read(a)
            if od is None:
                if d is not None:
                    raise ValueError("vmap: out_axes=None for an output that depends on the "
                                     "batched inputs")
                res.append(val)
                continue
            val = bdim_to_front(val, d, axis_size)
            res.append(moveaxis(val, 0, od))
        return res

    return trace_to_graph(run, in_avals).graph
