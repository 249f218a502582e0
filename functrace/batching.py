"""Batching (vmap) as a graph transform: ``batch_graph(graph, in_dims, axis_size)``.

Owns the interpreter that pushes a batch dimension through a graph, and the batch rules of
op families (elementwise, reductions, shape ops, gather/scatter, contractions, linear algebra,
sub-graph ops). Imports core, tracing, ops and autodiff; never the API layer or a backend.

A batch rule has the signature ``rule(args, dims, **params) -> (outs, out_dims)``: ``args`` are
values in the current trace, ``dims[i]`` is the batch axis of ``args[i]`` or ``None`` (not
batched). Rules emit *batched ops*, never a Python loop over the batch: an op without a rule
is an error that names it (MissingRuleError), not a silent per-example fallback.

Rules are attached to the ops here, by family, because most of them are generic (an
elementwise op batches the same way whatever it computes); an op that needs its own rule
sets ``op.batch`` next to its declaration, which takes precedence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import ops
from .core import AVal, Graph, Lit, Var, registry
from .errors import MissingRuleError
from .tracing import SOURCE_OVERRIDE as _source_override
from .tracing import Tracer, bind, source_line, trace_to_graph

__all__ = ["batch_graph", "moveaxis", "bdim_to_front", "install_rules"]


def _shape(x):
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def moveaxis(x, src: int, dst: int):
    """Move axis ``src`` of ``x`` to position ``dst`` (a transpose op)."""
    nd = len(_shape(x))
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return ops.transpose(x, tuple(perm))


def bdim_to_front(x, d, size):
    """The value with its batch axis first; unbatched values are broadcast to have one."""
    if d is None:
        shape = _shape(x)
        return ops.broadcast_in_dim(x, (size,) + tuple(shape), tuple(range(1, len(shape) + 1)))
    return moveaxis(x, d, 0)


def _size_of(args, dims):
    for a, d in zip(args, dims):
        if d is not None:
            return _shape(a)[d]
    raise AssertionError("no batched argument")


# --------------------------------------------------------------------------------------------
# generic rules
# --------------------------------------------------------------------------------------------

def _elementwise_rule(op):
    def rule(args, dims, **params):
        size = _size_of(args, dims)
        unb = [tuple(s for i, s in enumerate(_shape(a)) if i != d) if d is not None
               else tuple(_shape(a)) for a, d in zip(args, dims)]
        out_shape = next((s for s in unb if s), ())
        new = []
        for a, d, s in zip(args, dims, unb):
            if d is not None:
                a = moveaxis(a, d, 0)
                if not s and out_shape:
                    a = ops.broadcast_in_dim(a, (size,) + out_shape, (0,))
            elif s:
                a = ops.broadcast_in_dim(a, (size,) + out_shape,
                                         tuple(range(1, len(out_shape) + 1)))
            new.append(a)
        out = bind(op, *new, **params)
        if op.multiple_results:
            return out, (0,) * len(out)
        return (out,), (0,)
    return rule


def _axes_rule(op, key):
    """Ops whose params name axes of their single operand (reductions, scans, rev, sort)."""
    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        x = moveaxis(x, d, 0)
        p = dict(params)
        v = p[key]
        p[key] = tuple(a + 1 for a in v) if isinstance(v, tuple) else v + 1
        out = bind(op, x, **p)
        if op.multiple_results:
            return out, (0,) * len(out)
        return (out,), (0,)
    return rule


def _leading_batch_rule(op):
    """Ops that accept any leading batch dimensions (numpy.linalg style)."""
    def rule(args, dims, **params):
        size = _size_of(args, dims)
        new = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
        out = bind(op, *new, **params)
        if op.multiple_results:
            return out, (0,) * len(out)
        return (out,), (0,)
    return rule


# --------------------------------------------------------------------------------------------
# shape ops
# --------------------------------------------------------------------------------------------

def _bid_rule(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    size = _shape(x)[0]
    return (ops.broadcast_in_dim(x, (size,) + tuple(shape),
                                 (0,) + tuple(b + 1 for b in broadcast_dimensions)),), (0,)


def _reshape_rule(args, dims, *, new_sizes):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    return (ops.reshape(x, (_shape(x)[0],) + tuple(new_sizes)),), (0,)


def _transpose_rule(args, dims, *, permutation):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    return (ops.transpose(x, (0,) + tuple(p + 1 for p in permutation)),), (0,)


def _slice_rule(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    n = _shape(x)[0]
    return (ops.slice_op(x, (0,) + tuple(start_indices), (n,) + tuple(limit_indices),
                         (1,) + tuple(strides)),), (0,)


def _pad_rule(args, dims, *, config):
    (x, v), (dx, dv) = args, dims
    size = _size_of(args, dims)
    x = bdim_to_front(x, dx, size)
    cfg = ((0, 0, 0),) + tuple(config)
    if dv is None:
        return (ops.pad(x, v, cfg),), (0,)
    # a batched pad value: pad with 0, then add v where the padding went
    dt = x.dtype
    zero = np.zeros((), dt)
    body = ops.pad(x, zero, cfg)
    mask = ops.pad(ops.broadcast_in_dim(zero, _shape(x), ()), np.ones((), dt), cfg)
    vb = ops.broadcast_in_dim(moveaxis(v, dv, 0), _shape(body), (0,))
    return (ops.add(body, ops.mul(mask, vb)),), (0,)


def _concat_rule(args, dims, *, dimension):
    size = _size_of(args, dims)
    xs = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
    return (ops.concatenate(xs, dimension + 1),), (0,)


def _iota_rule(args, dims, **params):   # pragma: no cover - iota has no operands
    raise AssertionError("iota has no operands to batch")


# --------------------------------------------------------------------------------------------
# contractions
# --------------------------------------------------------------------------------------------

def _dot_rule(args, dims, *, dimension_numbers):
    (x, y), (dx, dy) = args, dims
    (xc, yc), (xb, yb) = dimension_numbers
    if dx is not None and dy is not None:
        x, y = moveaxis(x, dx, 0), moveaxis(y, dy, 0)
        dn = ((tuple(c + 1 for c in xc), tuple(c + 1 for c in yc)),
              ((0,) + tuple(b + 1 for b in xb), (0,) + tuple(b + 1 for b in yb)))
        return (ops.dot_general(x, y, dn),), (0,)
    if dx is not None:
        x = moveaxis(x, dx, 0)
        dn = ((tuple(c + 1 for c in xc), yc), (tuple(b + 1 for b in xb), yb))
        return (ops.dot_general(x, y, dn),), (len(xb),)
    # only y is batched: contract with y first so the batch axis comes right after the batch
    # dims, then restore (batch, B, x free, y free) order; the transpose is the identity in the
    # common matrix-vector case, so no copy is made
    y = moveaxis(y, dy, 0)
    dn = ((tuple(c + 1 for c in yc), xc), (tuple(b + 1 for b in yb), xb))
    z = ops.dot_general(y, x, dn)      # (batch, B, y free rest, x free)
    nb = len(xb)
    ny_rest = len(_shape(y)) - 1 - len(yc) - len(yb)
    nx_free = len(_shape(x)) - len(xc) - len(xb)
    perm = (tuple(range(nb + 1)) + tuple(range(nb + 1 + ny_rest, nb + 1 + ny_rest + nx_free))
            + tuple(range(nb + 1, nb + 1 + ny_rest)))
    return (ops.transpose(z, perm),), (nb,)


# --------------------------------------------------------------------------------------------
# gather / scatter
# --------------------------------------------------------------------------------------------

def _batched_index_arrays(idx, idims, size):
    """Index arrays with a leading batch axis, shaped to broadcast against each other."""
    shapes = [tuple(s for i, s in enumerate(_shape(a)) if i != d) if d is not None
              else tuple(_shape(a)) for a, d in zip(idx, idims)]
    A = np.broadcast_shapes(*shapes) if shapes else ()
    out = []
    for a, d, s in zip(idx, idims, shapes):
        if d is not None:
            a = moveaxis(a, d, 0)
            a = ops.reshape(a, (size,) + (1,) * (len(A) - len(s)) + s)
        out.append(a)
    return out, A


def _gather_rule(args, dims, *, spec):
    x, idx = args[0], list(args[1:])
    dx, idims = dims[0], list(dims[1:])
    size = _size_of(args, dims)
    if all(d is None for d in idims):
        # only x is batched: a leading full slice keeps everything else as it was
        x = moveaxis(x, dx, 0)
        new_spec = (("slice", 0, size, 1),) + tuple(spec)
        out = ops.gather(x, idx, new_spec)
        arr_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
        adjacent = bool(arr_pos) and arr_pos == list(range(arr_pos[0], arr_pos[-1] + 1))
        if arr_pos and not adjacent:
            A = np.broadcast_shapes(*[_shape(a) for a in idx])
            return (out,), (len(A),)
        return (out,), (0,)
    idx_b, A = _batched_index_arrays(idx, idims, size)
    if dx is None:
        out = ops.gather(x, idx_b, spec)
        arr_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
        adjacent = arr_pos == list(range(arr_pos[0], arr_pos[-1] + 1))
        # the advanced block (with the batch axis first) sits where numpy puts it
        pos = 0 if not adjacent else _dims_before(spec, arr_pos[0])
        return (out,), (pos,)
    x = moveaxis(x, dx, 0)
    b_idx = np.arange(size).reshape((size,) + (1,) * len(A))
    new_spec = (("arr", len(idx_b)),) + tuple(spec)
    return (ops.gather(x, idx_b + [b_idx], new_spec),), (0,)


def _dims_before(spec, pos):
    """Result dims produced by the basic entries of ``spec`` before entry ``pos``."""
    return sum(1 for e in spec[:pos] if e[0] in ("slice", "none"))


def _scatter_rule(args, dims, *, spec, mode):
    x, v, idx = args[0], args[1], list(args[2:])
    dx, dv, idims = dims[0], dims[1], list(dims[2:])
    size = _size_of(args, dims)
    x = bdim_to_front(x, dx, size)
    idx_b, A = _batched_index_arrays(idx, idims, size)
    v = bdim_to_front(v, dv, size)
    arr_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
    b_idx = np.arange(size).reshape((size,) + (1,) * len(A))
    new_spec = (("arr", len(idx_b)),) + tuple(spec)
    if arr_pos:
        adjacent = arr_pos == list(range(arr_pos[0], arr_pos[-1] + 1))
        pre = _dims_before(spec, arr_pos[0]) if adjacent else 0
        if pre:
            # v is laid out (B, pre..., A..., post...); the new index puts A first
            nv = len(_shape(v))
            perm = ([0] + list(range(1 + pre, 1 + pre + len(A))) + list(range(1, 1 + pre))
                    + list(range(1 + pre + len(A), nv)))
            v = ops.transpose(v, tuple(perm))
        # batched index arrays need the batch entry to pair with their own batch axis
        out = ops.scatter(x, v, idx_b + [b_idx], new_spec, mode)
        return (out,), (0,)
    out = ops.scatter(x, v, [np.arange(size)], new_spec, mode)
    return (out,), (0,)


# --------------------------------------------------------------------------------------------
# sub-graph ops
# --------------------------------------------------------------------------------------------

def _subgraph_rule(op, key):
    def rule(args, dims, **params):
        g = params[key]
        size = _size_of(args, dims)
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


def _custom_jvp_batch(args, dims, *, fun_graph, rule):
    from . import tree_util
    from .autodiff import _JvpRule
    size = _size_of(args, dims)
    new = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
    n = len(new)

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
    new_rule = _JvpRule(jvp_b, rule.in_tree, rule.out_tree, rule.name)
    bg = batch_graph(fun_graph, [0] * n, size)
    out = bind(registry["custom_jvp_call"], *new, fun_graph=bg, rule=new_rule)
    return out, (0,) * len(out)


def _custom_vjp_batch(args, dims, *, fun_graph, rule):
    from . import tree_util
    from .autodiff import _Rule, zeros_like
    size = _size_of(args, dims)
    new = [bdim_to_front(a, d, size) for a, d in zip(args, dims)]
    box = {}
    per_example = [_unbatched_aval(x) for x in new]
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

        def flat_bwd(*rc):
            r = tree_util.tree_unflatten(res_tree, list(rc[:n_res]))
            c = tree_util.tree_unflatten(rule.out_tree, list(rc[n_res:]))
            got = rule.bwd(r, c)
            leaves, off = [], 0
            for g_, a in zip(got, ex):
                k = len(tree_util.tree_leaves(a))
                if g_ is None:   # a zero cotangent for this argument
                    g_leaves = [zeros_like(av) for av in per_example[off:off + k]]
                else:
                    g_leaves = tree_util.tree_leaves(g_)
                leaves.extend(g_leaves)
                off += k
            return leaves
        leaves = _vmapped(flat_bwd, size)(*res_leaves, *tree_util.tree_leaves(ct))
        out, off = [], 0
        for a in ex:
            k = len(tree_util.tree_leaves(a))
            out.append(tree_util.tree_unflatten(tree_util.tree_structure(a),
                                                leaves[off:off + k]))
            off += k
        return tuple(out)

    new_rule = _Rule(fwd, bwd, rule.in_tree, rule.out_tree, rule.name)
    bg = batch_graph(fun_graph, [0] * len(new), size)
    out = bind(registry["custom_vjp_call"], *new, fun_graph=bg, rule=new_rule)
    return out, (0,) * len(out)


# --------------------------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------------------------

_AXES_KEYS = {"reduce_sum": "axes", "reduce_max": "axes", "reduce_min": "axes",
              "reduce_prod": "axes", "reduce_and": "axes", "reduce_or": "axes",
              "logsumexp": "axes", "l2norm": "axes", "argmax": "axis", "argmin": "axis",
              "cumsum": "axis", "cumprod": "axis", "rev": "dimensions", "sort": "axis"}
_SPECIFIC = {"broadcast_in_dim": _bid_rule, "reshape": _reshape_rule,
             "transpose": _transpose_rule, "slice": _slice_rule, "pad": _pad_rule,
             "concatenate": _concat_rule, "iota": _iota_rule, "dot_general": _dot_rule,
             "gather": _gather_rule, "scatter": _scatter_rule}
_LINALG = ("cholesky", "triangular_solve", "inv", "det", "slogdet", "eigh", "svd", "qr")
_SUBGRAPH = {"checkpoint": "graph"}
_CUSTOM = {"custom_jvp_call": _custom_jvp_batch, "custom_vjp_call": _custom_vjp_batch}


def install_rules() -> None:
    """Attach the family batch rules to every op that has none (idempotent)."""
    for name, op in registry.items():
        if op.batch is not None:
            continue
        if name in _SPECIFIC:
            op.batch = _SPECIFIC[name]
        elif name in _AXES_KEYS:
            op.batch = _axes_rule(op, _AXES_KEYS[name])
        elif op.elementwise:
            op.batch = _elementwise_rule(op)
        elif name in _LINALG:
            op.batch = _leading_batch_rule(op)
        elif name in _SUBGRAPH:
            op.batch = _subgraph_rule(op, _SUBGRAPH[name])
        elif name in _CUSTOM:
            op.batch = _CUSTOM[name]


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
    install_rules()
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
                    if e.op.batch is None:
                        raise MissingRuleError(
                            f"vmap: {e.op.name} has no batching rule (recorded at "
                            f"{source_line(e.source)}); functrace never falls back to a "
                            "per-example loop")
                    outs, odims = e.op.batch(list(vals), list(dims), **e.params)
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
