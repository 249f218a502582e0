"""Public forward-mode and batching transforms: jvp, linearize, vmap, jacfwd, jacrev,
jacobian, hessian.

Owns the user-facing side of ``autodiff.jvp_graph`` and ``batching.batch_graph``: pytrees,
``in_axes``/``out_axes``, argument checks, caching (through ``api._cached_transform``), and the
Jacobian builders, each of which is *one* batched graph (jacrev = vmap over the vjp graph,
jacfwd = vmap over the jvp graph, hessian = jacfwd(jacrev)), evaluated in chunks of
``chunk_size`` basis vectors when asked, so a large Jacobian fits in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import tree_util
from .api import (
    _argnums_tuple,
    _cached_transform,
    _check_wrt_dtypes,
    _run,
    _split,
    _wrt_leaf_indices,
)
from .autodiff import jvp_graph, vjp_graph
from .batching import batch_graph
from .core import AVal, Graph
from .ops._base import as_array
from .passes.simplify import dce, optimize
from .tracing import Tracer

__all__ = ["jvp", "linearize", "vmap", "jacfwd", "jacrev", "jacobian", "hessian"]


def _aval(x) -> AVal:
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, AVal):
        return x
    return AVal.of(x)


# --------------------------------------------------------------------------------------------
# jvp / linearize
# --------------------------------------------------------------------------------------------

def _check_tangents(primals, tangents):
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"jvp: tangents must have the primals' structure {p_tree}, got {t_tree}")
    out = []
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        pa, ta = _aval(p), _aval(t)
        if pa.shape != ta.shape:
            raise ValueError(f"jvp: tangent {i} has shape {ta.shape}, primal has {pa.shape}")
        if pa.dtype.kind in "fc" and ta.dtype != pa.dtype:
            if isinstance(t, Tracer):
                raise TypeError(f"jvp: tangent {i} has dtype {ta.dtype}, primal has {pa.dtype}")
            t = as_array(t, dtype=pa.dtype)
        out.append(t if pa.dtype.kind in "fc" else np.zeros(pa.shape, pa.dtype))
    return p_leaves, out


def jvp(fun: Callable, primals: Sequence, tangents: Sequence):
    """Forward mode: ``(fun(*primals), J @ tangents)``.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> y, ty = ft.jvp(fnp.sin, (np.array([0.0, 1.0]),), (np.ones(2),))
        >>> ty
        array([1.        , 0.54030231])
    """
    primals, tangents = tuple(primals), tuple(tangents)
    _, t_leaves = _check_tangents(primals, tangents)
    n = len(t_leaves)

    def build(tr, in_tree, out_tree):
        return optimize(jvp_graph(tr.graph, list(range(n)))), None

    graph, out_tree, _, leaves, captured = _cached_transform(
        ("jvp",), fun, primals, {}, build)
    outs = _run(graph, list(leaves) + list(captured) + list(t_leaves))
    k = out_tree.num_leaves
    return (tree_util.tree_unflatten(out_tree, outs[:k]),
            tree_util.tree_unflatten(out_tree, outs[k:]))


def linearize(fun: Callable, *primals):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` applies the Jacobian at primals
    without recomputing the forward pass (its residuals are kept).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> y, f_jvp = ft.linearize(lambda x: x ** 3, 2.0)
        >>> float(f_jvp(1.0))
        12.0
    """
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    n = len(p_leaves)

    def build(tr, in_tree, out_tree):
        g = tr.graph
        full = optimize(jvp_graph(g, list(range(n))))
        n_in = len(g.inputs)
        # move the tangent inputs after the captured ones, then split by dependence
        fwd, lin = _split(full, n_in, len(g.outputs))
        return (fwd, lin), None

    (fwd, lin), out_tree, _, leaves, captured = _cached_transform(
        ("linearize",), fun, primals, {}, build)
    res = _run(fwd, list(leaves) + list(captured))
    k = out_tree.num_leaves
    out, residuals = res[:k], res[k:]
    p_avals = [_aval(p) for p in p_leaves]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
        if t_tree != p_tree:
            raise TypeError(f"f_jvp expects tangents with structure {p_tree}, got {t_tree}")
        ts = [t if isinstance(t, Tracer) else np.asarray(t, dtype=a.dtype)
              for t, a in zip(t_leaves, p_avals)]
        return tree_util.tree_unflatten(out_tree, _run(lin, list(residuals) + ts))

    return tree_util.tree_unflatten(out_tree, out), f_jvp


# --------------------------------------------------------------------------------------------
# vmap
# --------------------------------------------------------------------------------------------

def _prefix_leaves(prefix, tree, what):
    """Broadcast an axes prefix (int/None or a pytree prefix) to the leaves of ``tree``."""
    if prefix is None or isinstance(prefix, int | np.integer):
        return [prefix] * len(tree_util.tree_leaves(tree))
    if isinstance(tree, tuple | list) and isinstance(prefix, tuple | list):
        if len(prefix) != len(tree):
            raise ValueError(f"vmap {what} {prefix!r} has {len(prefix)} entries for "
                             f"{len(tree)} values")
        return [d for p, t in zip(prefix, tree) for d in _prefix_leaves(p, t, what)]
    if isinstance(tree, dict) and isinstance(prefix, dict):
        if set(prefix) != set(tree):
            raise ValueError(f"vmap {what} keys {sorted(prefix)} differ from {sorted(tree)}")
        return [d for k in sorted(tree) for d in _prefix_leaves(prefix[k], tree[k], what)]
    raise ValueError(f"vmap {what} {prefix!r} does not match the structure of {tree!r:.60}")


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_size: int | None = None) -> Callable:
    """Vectorise ``fun`` over a batch axis: one batched graph, never a Python loop.

    Args:
        fun: function of arrays (pytrees allowed).
        in_axes: int, None, or a tuple with one entry per positional argument, each an int,
            None (not batched) or a pytree prefix of that argument (JAX semantics).
        out_axes: the same for the outputs.
        axis_size: the batch size, needed only when no argument is batched.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.vmap(lambda x, w: fnp.dot(x, w), in_axes=(0, None))(np.ones((3, 2)), np.ones(2))
        array([2., 2., 2.])
    """
    if not isinstance(in_axes, tuple | list) and in_axes is not None and not isinstance(
            in_axes, int | np.integer):
        raise TypeError(f"vmap in_axes must be an int, None or a tuple, got {in_axes!r}")
    dims_by_tree: dict = {}     # argument structure -> per-leaf in_axes
    out_key = _hashable(out_axes)

    def batched(*args):
        leaves, tree = tree_util.tree_flatten((args, {}))
        dims = dims_by_tree.get(tree)
        if dims is None:
            axes = (tuple(in_axes) if isinstance(in_axes, tuple | list)
                    else (in_axes,) * len(args))
            if len(axes) != len(args):
                raise ValueError(f"vmap in_axes has {len(axes)} entries for {len(args)} "
                                 "positional arguments")
            dims = dims_by_tree[tree] = [d for a, ax in zip(args, axes)
                                         for d in _prefix_leaves(ax, a, "in_axes")]
            if len(dims) != len(leaves):   # keyword arguments are not mapped
                raise TypeError("vmap maps positional arguments only")
        norm, size = [], axis_size
        for i, (x, d) in enumerate(zip(leaves, dims)):
            if d is None:
                norm.append(None)
                continue
            shape = x.shape if isinstance(x, np.ndarray | Tracer) else _aval(x).shape
            if not -len(shape) <= d < len(shape):
                raise ValueError(f"vmap in_axes {d} is out of range for argument leaf {i} of "
                                 f"shape {shape}")
            d %= len(shape)
            if size is None:
                size = shape[d]
            elif shape[d] != size:
                raise ValueError(f"vmap got inconsistent sizes along the mapped axes: {size} "
                                 f"and {shape[d]} (argument leaf {i})")
            norm.append(d)
        if size is None:
            raise ValueError("vmap needs at least one batched argument or axis_size=")

        def examples(ls):
            return [AVal(tuple(s for j, s in enumerate(_aval(x).shape) if j != d),
                         _aval(x).dtype) if d is not None else x for x, d in zip(ls, norm)]

        def build(tr, in_tree, out_tree):
            ex = tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
            odims = _prefix_leaves(out_axes, ex, "out_axes")
            g = tr.graph
            n_cap = len(g.inputs) - len(norm)
            bg = batch_graph(g, list(norm) + [None] * n_cap, size,
                             [None if od is None else od % (_out_ndim(g, k) + 1)
                              for k, od in enumerate(odims)])
            return optimize(bg), None

        graph, out_tree, _, lv, captured = _cached_transform(
            ("vmap", tuple(norm), size, out_key), fun, args, {}, build,
            examples=examples, flat=(leaves, tree))
        outs = _run(graph, list(lv) + list(captured))
        return tree_util.tree_unflatten(out_tree, outs)

    batched.__name__ = f"vmap({getattr(fun, '__name__', 'f')})"
    batched.__doc__ = fun.__doc__
    return batched


def _out_ndim(g: Graph, k: int) -> int:
    return len(g.outputs[k].aval.shape)


def _hashable(x):
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    if isinstance(x, list | tuple):
        return tuple(_hashable(v) for v in x)
    return x


# --------------------------------------------------------------------------------------------
# Jacobians
# --------------------------------------------------------------------------------------------

def _jac_common(fun, argnums, args, mode, chunk_size, holomorphic, has_aux):
    nums, single = _argnums_tuple(argnums, len(args))
    wrt = _wrt_leaf_indices(args, {}, nums)
    _check_wrt_dtypes(tree_util.tree_leaves(args), wrt, "jac" + mode, True)
    leaves = tree_util.tree_leaves(args)

    def build(tr, in_tree, out_tree):
        g = tr.graph
        n_out_main = len(g.outputs)
        if has_aux:
            ex = tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
            n_out_main = len(tree_util.tree_leaves(ex[0]))
        main = Graph(g.inputs, g.eqns, g.outputs[:n_out_main])
        out_avals = [a.aval for a in main.outputs]
        for av in out_avals:
            if av.dtype.kind not in "fc":
                raise TypeError(f"jac{mode} needs float outputs, got {av.dtype}")
        n_in = len(g.inputs)
        if mode == "rev":
            joint = vjp_graph(main, wrt, ["input"] * len(main.outputs))
            grads_only = dce(Graph(joint.inputs, joint.eqns, joint.outputs[len(main.outputs):]))
            basis_avals = out_avals
        else:
            joint = jvp_graph(main, wrt)
            grads_only = dce(Graph(joint.inputs, joint.eqns, joint.outputs[len(main.outputs):]))
            basis_avals = [g.inputs[i].aval for i in wrt]
        n = sum(a.size for a in basis_avals)
        chunk = n if not chunk_size else min(int(chunk_size), n)
        if n == 1:
            # one basis vector (the gradient of a scalar): no batch axis to push through the
            # graph, just a unit axis on the way in and out (keeps hessian = jacfwd(jacrev)
            # free of size-1 batch dimensions)
            bg = _unit_batch(grads_only, n_in, basis_avals)
        else:
            bg = batch_graph(grads_only, [None] * n_in + [0] * len(basis_avals), max(chunk, 1))
        aux_graph = None
        if has_aux:
            aux_graph = dce(Graph(g.inputs, g.eqns, g.outputs[n_out_main:]))
        return optimize(bg), (out_avals, basis_avals, chunk, aux_graph, n_out_main)

    graph, out_tree, extra, lv, captured = _cached_transform(
        ("jac", mode, tuple(wrt), chunk_size, has_aux), fun, args, {}, build)
    out_avals, basis_avals, chunk, aux_graph, n_out_main = extra
    base = list(lv) + list(captured)
    n = sum(a.size for a in basis_avals)
    rows = _run_chunks(graph, base, basis_avals, n, max(chunk, 1))
    # rows[k]: for each result leaf k (one per wrt input for rev, per output for fwd),
    # an array (n, *shape)
    if mode == "rev":
        # rows are gradients w.r.t. each wrt input, indexed by output element
        in_avals = [_aval(leaves[i]) for i in wrt]
        blocks = _assemble(rows, out_avals, in_avals, rev=True)
    else:
        in_avals = basis_avals
        blocks = _assemble(rows, out_avals, in_avals, rev=False)
    # blocks[o][i]: d out_o / d in_i with shape out.shape + in.shape
    main_ex = tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    main_tree = tree_util.tree_structure(main_ex[0] if has_aux else main_ex)
    per_out = []
    for o in range(len(out_avals)):
        per_arg, off = [], 0
        for nnum in nums:
            a_leaves, a_tree = tree_util.tree_flatten(args[nnum])
            per_arg.append(tree_util.tree_unflatten(
                a_tree, [blocks[o][off + j] for j in range(len(a_leaves))]))
            off += len(a_leaves)
        per_out.append(per_arg[0] if single else tuple(per_arg))
    res = tree_util.tree_unflatten(main_tree, per_out)
    if has_aux:
        aux = tree_util.tree_unflatten(
            tree_util.tree_structure(main_ex[1]), _run(aux_graph, base))
        return res, aux
    return res


def _unit_batch(g: Graph, n_in: int, basis_avals) -> Graph:
    """``g`` with a leading unit axis added to its basis inputs and to its outputs."""
    from . import ops
    from .tracing import eval_graph, trace_to_graph

    def run(*args):
        base, basis = list(args[:n_in]), args[n_in:]
        outs = eval_graph(g, base + [ops.reshape(b, b.shape[1:]) for b in basis])
        return [ops.reshape(o, (1,) + tuple(np.shape(o) if not isinstance(o, Tracer)
                                            else o.shape)) for o in outs]
    avals = [v.aval for v in g.inputs[:n_in]] + [AVal((1,) + a.shape, a.dtype)
                                                  for a in basis_avals]
    return trace_to_graph(run, avals).graph


def _basis(avals, start, stop, chunk):
    """Rows start..stop of the identity over the flattened ``avals``, padded to ``chunk``."""
    n_rows = stop - start
    out = []
    off = 0
    for av in avals:
        m = av.size
        b = np.zeros((chunk, m), av.dtype)
        for r in range(n_rows):
            j = start + r - off
            if 0 <= j < m:
                b[r, j] = 1
        out.append(b.reshape((chunk,) + av.shape))
        off += m
    return out


def _run_chunks(graph, base, basis_avals, n, chunk):
    pieces = None
    use_fnp = any(isinstance(x, Tracer) for x in base)
    for start in range(0, max(n, 1), chunk):
        stop = min(start + chunk, n)
        outs = _run(graph, base + _basis(basis_avals, start, stop, chunk))
        outs = [o[: stop - start] for o in outs] if stop - start != chunk else outs
        pieces = [[o] for o in outs] if pieces is None else [p + [o] for p, o in
                                                               zip(pieces, outs)]
    if use_fnp:
        from . import numpy as fnp
        return [p[0] if len(p) == 1 else fnp.concatenate(p, axis=0) for p in pieces]
    return [p[0] if len(p) == 1 else np.concatenate(p, axis=0) for p in pieces]


def _reshape(x, shape):
    if isinstance(x, Tracer):
        from . import numpy as fnp
        return fnp.reshape(x, shape)
    return np.reshape(x, shape)


def _moveaxis0_last(x, k):
    """(n, *s) -> (*s, n) generalised: move the leading axis behind ``k`` axes."""
    if isinstance(x, Tracer):
        from . import numpy as fnp
        return fnp.moveaxis(x, 0, k)
    return np.moveaxis(x, 0, k)


def _assemble(rows, out_avals, in_avals, rev):
    """Turn batched rows into blocks[o][i] of shape out.shape + in.shape."""
    blocks = [[None] * len(in_avals) for _ in out_avals]
    if rev:
        # rows[i] has shape (n_out_total, *in_i.shape); split by output leaf
        off = 0
        for o, oa in enumerate(out_avals):
            for i, ia in enumerate(in_avals):
                r = rows[i][off:off + oa.size]
                blocks[o][i] = _reshape(r, oa.shape + ia.shape)
            off += oa.size
    else:
        # rows[o] has shape (n_in_total, *out_o.shape); split by input leaf
        for o, oa in enumerate(out_avals):
            off = 0
            for i, ia in enumerate(in_avals):
                r = rows[o][off:off + ia.size]            # (in_i.size, *out.shape)
                r = _moveaxis0_last(r, len(oa.shape))      # (*out.shape, in_i.size)
                blocks[o][i] = _reshape(r, oa.shape + ia.shape)
                off += ia.size
    return blocks


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, chunk_size: int | None = None) -> Callable:
    """The Jacobian by reverse mode: vmap over the vjp graph (one batched pass), shape
    ``out.shape + in.shape``. ``chunk_size`` bounds how many rows are computed at once.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    def jac(*args):
        return _jac_common(fun, argnums, args, "rev", chunk_size, holomorphic, has_aux)
    jac.__name__ = f"jacrev({getattr(fun, '__name__', 'f')})"
    return jac


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, chunk_size: int | None = None) -> Callable:
    """The Jacobian by forward mode: vmap over the jvp graph (one batched pass), shape
    ``out.shape + in.shape``. ``chunk_size`` bounds how many columns are computed at once.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.jacfwd(lambda x: fnp.sin(x))(np.zeros(2))
        array([[1., 0.],
               [0., 1.]])
    """
    def jac(*args):
        return _jac_common(fun, argnums, args, "fwd", chunk_size, holomorphic, has_aux)
    jac.__name__ = f"jacfwd({getattr(fun, '__name__', 'f')})"
    return jac


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
             holomorphic: bool = False, chunk_size: int | None = None) -> Callable:
    """The Jacobian, by forward mode when the inputs are smaller than the outputs and by
    reverse mode otherwise (decided per call from the sizes).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.jacobian(lambda x: fnp.sum(x ** 2))(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    def jac(*args):
        nums, _ = _argnums_tuple(argnums, len(args))
        n_in = sum(_aval(x).size for n in nums for x in tree_util.tree_leaves(args[n]))
        from .api import make_graph
        tr, _, _ = make_graph(fun, args)
        outs = tr.graph.outputs
        if has_aux:
            outs = outs[:1]
        n_out = sum(o.aval.size for o in outs)
        mode = "fwd" if n_in <= n_out else "rev"
        return _jac_common(fun, argnums, args, mode, chunk_size, holomorphic, has_aux)
    return jac


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False, chunk_size: int | None = None) -> Callable:
    """The Hessian of a scalar ``fun``: ``jacfwd(jacrev(fun))`` (forward-over-reverse), one
    batched graph; shape ``in.shape + in.shape``.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.hessian(lambda x: fnp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    return jacfwd(jacrev(fun, argnums, has_aux=False, holomorphic=holomorphic), argnums,
                  holomorphic=holomorphic, chunk_size=chunk_size)
