"""Public forward-mode and batching transforms: jvp, linearize, vmap, jacfwd, jacrev,
jacobian, hessian.

Owns the user-facing side of the eager forward and batching traces (``tape.JVPTrace``,
``tape.BatchTrace``): pytrees, ``in_axes``/``out_axes``, argument checks, and the Jacobian
builders. Like ``grad``, they re-run the user's function on every call and cache nothing.
Each Jacobian is one batched computation: ``jacrev`` is ``vmap`` over the pullback of one
taped forward pass, ``jacfwd`` is ``vmap`` over ``jvp``, ``hessian = jacfwd(jacrev)``, taken
in chunks of ``chunk_size`` basis vectors when asked so that a large Jacobian fits in memory.
Under ``ft.jit`` the same code records one graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import ops, tree_util
from .arguments import (
    argnums_tuple,
    check_argnums,
    check_callable,
    check_leaf_arg,
    check_out_leaf,
    check_wrt_dtypes,
    describe_out,
    wrt_leaf_indices,
)
from .autodiff import forward_mode_blocker, jvp_graph
from .batching import bdim_to_front, moveaxis
from .core import AVal
from .errors import (
    AxisError,
    FunctraceTypeError,
    FunctraceValueError,
    MissingRuleError,
    ShapeError,
    where,
)
from .ops import as_array
from .passes.simplify import optimize
from .running import (
    call_traced,
    own,
    run_eager,
    run_graph,
    split_vjp_graph,
    taped,
    traced_transform,
)
from .tape import BatchTrace, BatchTracer, JVPTrace, JVPTracer, unwrap, zeros_of
from .tracing import Tracer, current_trace, fresh_constant, using_trace

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
    if not isinstance(primals, tuple | list) or not isinstance(tangents, tuple | list):
        raise FunctraceTypeError(
            "jvp takes the primals and the tangents as tuples (or lists) of arguments: "
            "ft.jvp(f, (x,), (t,)), not ft.jvp(f, x, t); got "
            f"{type(primals).__name__} and {type(tangents).__name__} ({where()})")
    if len(primals) != len(tangents):
        raise FunctraceTypeError(
            f"jvp: {len(primals)} primal argument(s) but {len(tangents)} tangent(s); give one "
            f"tangent per argument ({where()})")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise FunctraceTypeError(f"jvp: tangents must have the primals' structure {p_tree}, "
                                 f"got {t_tree} ({where()})")
    p_leaves = [check_leaf_arg(p, i) for i, p in enumerate(p_leaves)]
    out = [_check_tangent(p, t, i, "jvp") for i, (p, t) in enumerate(zip(p_leaves, t_leaves))]
    return p_leaves, p_tree, out


def _check_tangent(p, t, i, fname):
    """Tangent ``t`` for primal ``p`` (leaf ``i``), checked and cast to the primal's dtype;
    None for a primal that is not float or complex (it has no tangent)."""
    t = check_leaf_arg(t, i, f"{fname}: tangent")
    pa, ta = _aval(p), _aval(t)
    if pa.shape != ta.shape:
        raise ShapeError(f"{fname}: tangent {i} has shape {ta.shape}, primal has {pa.shape} "
                         f"({where()})")
    if pa.dtype.kind not in "fc":
        return None
    if ta.dtype != pa.dtype:
        if isinstance(t, Tracer) or (ta.dtype.kind == "c" and pa.dtype.kind != "c"):
            raise FunctraceTypeError(
                f"{fname}: tangent {i} has dtype {ta.dtype}, primal has {pa.dtype}. Fix: pass "
                f"a tangent of the primal's dtype ({where()})")
        t = as_array(t, dtype=pa.dtype)
    return t


def jvp(fun: Callable, primals: Sequence, tangents: Sequence):
    """Forward mode: ``(fun(*primals), J @ tangents)``.

    ``fun`` runs once, each operation pushing its tangent forward as it runs (nothing is
    cached).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> y, ty = ft.jvp(fnp.sin, (np.array([0.0, 1.0]),), (np.ones(2),))
        >>> ty
        array([1.        , 0.54030231])
    """
    check_callable(fun, "jvp")
    p_leaves, p_tree, t_leaves = _check_tangents(primals, tangents)
    in_tree = tree_util.tree_structure((tuple(primals), {}))
    trace = JVPTrace(current_trace())
    ins = [p if t is None else trace.input(p, t) for p, t in zip(p_leaves, t_leaves)]
    out_leaves, out_tree = run_eager(trace, fun, in_tree, ins)
    outs, tans = [], []
    for o in out_leaves:
        if isinstance(o, JVPTracer) and o._trace is trace:
            outs.append(o._primal)
            tans.append(o._tangent)
        else:
            outs.append(o)
            tans.append(zeros_of(_value(o)))
    if trace.parent is None:
        outs, tans = [own(o) for o in outs], [own(t) for t in tans]
    return (tree_util.tree_unflatten(out_tree, outs),
            tree_util.tree_unflatten(out_tree, tans))


def _value(x):
    return x if hasattr(x, "dtype") else np.asarray(x)


def linearize(fun: Callable, *primals):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` applies the Jacobian at primals
    without recomputing the forward pass (its residuals are kept).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> y, f_jvp = ft.linearize(lambda x: x ** 3, 2.0)
        >>> float(f_jvp(1.0))
        12.0
    """
    check_callable(fun, "linearize")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    n = len(p_leaves)

    def build(tr, in_tree, out_tree):
        g = tr.graph
        # values: custom rules may run Python control flow on the primals (graphs specialised
        # to them: linearize is at these primals anyway)
        full = optimize(jvp_graph(g, list(range(n)), values=list(p_leaves) + tr.captured))
        n_in = len(g.inputs)
        # move the tangent inputs after the captured ones, then split by dependence
        fwd, lin = split_vjp_graph(full, n_in, len(g.outputs))
        return (fwd, lin), None

    (fwd, lin), out_tree, _, leaves, captured = traced_transform(
        fun, primals, {}, build, diff=range(n))
    res = run_graph(fwd, list(leaves) + list(captured))
    k = out_tree.num_leaves
    out, residuals = res[:k], res[k:]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
        if t_tree != p_tree:
            raise FunctraceTypeError(
                f"linearize's f_jvp takes one tangent per primal, with the primals' structure "
                f"{p_tree}; got {t_tree} ({where()})")
        ts = []
        for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
            checked = _check_tangent(p, t, i, "linearize's f_jvp")
            # (an integer primal's tangent is an input of the linear graph all the same)
            ts.append(checked if checked is not None else
                      t if isinstance(t, Tracer) else np.asarray(t, dtype=_aval(p).dtype))
        return tree_util.tree_unflatten(out_tree, run_graph(lin, list(residuals) + ts))

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
            raise FunctraceValueError(f"vmap {what} {prefix!r} has {len(prefix)} entries for "
                                      f"{len(tree)} values ({where()})")
        return [d for p, t in zip(prefix, tree) for d in _prefix_leaves(p, t, what)]
    if isinstance(tree, dict) and isinstance(prefix, dict):
        if set(prefix) != set(tree):
            raise FunctraceValueError(f"vmap {what} keys {sorted(prefix)} differ from the "
                                      f"argument's {sorted(tree)} ({where()})")
        return [d for k in sorted(tree) for d in _prefix_leaves(prefix[k], tree[k], what)]
    raise FunctraceValueError(f"vmap {what} {prefix!r} does not match the structure of "
                              f"{tree!r:.60} ({where()})")


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_size: int | None = None) -> Callable:
    """Vectorise ``fun`` over a batch axis: one batched op per op, never a Python loop.

    Args:
        fun: function of arrays (pytrees allowed).
        in_axes: int, None, or a tuple with one entry per positional argument, each an int,
            None (not batched) or a pytree prefix of that argument (JAX semantics).
        out_axes: the same for the outputs (an int may be negative, counted in the batched
            output; None returns an output that does not depend on the batch unbatched).
        axis_size: the batch size, needed only when no argument is batched.

    ``fun`` runs on every call, with arguments that behave as one example each; each
    operation runs at once as one batched operation (its batch rule). Python control flow
    on a batched value is an error (each example may take another path): use
    ``fnp.where``.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.vmap(lambda x, w: fnp.dot(x, w), in_axes=(0, None))(np.ones((3, 2)), np.ones(2))
        array([2., 2., 2.])
    """
    check_callable(fun, "vmap")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    dims_by_tree: dict = {}     # argument structure -> per-leaf in_axes (no trace involved)

    def batched(*args):
        leaves, tree = tree_util.tree_flatten((args, {}))
        dims = dims_by_tree.get(tree)
        if dims is None:
            axes = (tuple(in_axes) if isinstance(in_axes, tuple | list)
                    else (in_axes,) * len(args))
            if len(axes) != len(args):
                raise FunctraceValueError(
                    f"vmap in_axes has {len(axes)} entries for {len(args)} positional "
                    f"arguments; give one per argument ({where()})")
            dims = [d for a, ax in zip(args, axes) for d in _prefix_leaves(ax, a, "in_axes")]
            if len(dims) != len(leaves):   # keyword arguments are not mapped
                raise FunctraceTypeError(f"vmap maps positional arguments only ({where()})")
            if len(dims_by_tree) < 64:
                dims_by_tree[tree] = dims
        leaves = [check_leaf_arg(x, i) for i, x in enumerate(leaves)]
        norm, size = [], axis_size
        for i, (x, d) in enumerate(zip(leaves, dims)):
            if d is None:
                norm.append(None)
                continue
            shape = _aval(x).shape
            if not -len(shape) <= d < len(shape):
                raise AxisError(f"vmap in_axes {d} is out of range for argument leaf {i} of "
                                f"shape {shape} ({where()})")
            d %= len(shape)
            if size is None:
                size = shape[d]
            elif shape[d] != size:
                raise ShapeError(f"vmap got inconsistent sizes along the mapped axes: {size} "
                                 f"and {shape[d]} (argument leaf {i} has shape {shape}) "
                                 f"({where()})")
            norm.append(d)
        if size is None:
            raise FunctraceValueError("vmap needs at least one batched argument (an in_axes "
                                      f"entry that is not None) or axis_size= ({where()})")
        in_tree = tree_util.tree_structure((tuple(args), {}))
        return _vmap_call(fun, in_tree, leaves, norm, size, out_axes)

    batched.__name__ = f"vmap({getattr(fun, '__name__', 'f')})"
    batched.__doc__ = fun.__doc__
    return batched


def _check_axes_spec(spec, what):
    if spec is None or isinstance(spec, int | np.integer):
        return
    if isinstance(spec, tuple | list):
        for s in spec:
            _check_axes_spec(s, what)
        return
    if isinstance(spec, dict):
        for s in spec.values():
            _check_axes_spec(s, what)
        return
    raise FunctraceTypeError(
        f"vmap {what} entries must be ints, None, or tuples/lists/dicts of them; got "
        f"{type(spec).__name__} {spec!r:.40} ({where()})")


def _vmap_call(fun, in_tree, leaves, dims, size, out_axes):
    """``fun`` on the batched ``leaves`` (batch axis ``dims[i]`` or None); outputs with their
    batch axis at ``out_axes``."""
    trace = BatchTrace(current_trace(), size)
    ins = [x if d is None else trace.input(x, d) for x, d in zip(leaves, dims)]
    out_leaves, out_tree = run_eager(trace, fun, in_tree, ins)
    example = tree_util.tree_unflatten(out_tree, list(range(len(out_leaves))))
    odims = _prefix_leaves(out_axes, example, "out_axes")
    res = []
    for k, (o, od) in enumerate(zip(out_leaves, odims)):
        if isinstance(o, BatchTracer) and o._trace is trace:
            val, d = o._primal, o._bdim
        else:
            val, d = _value(o), None
        if od is None:
            if d is not None:
                raise FunctraceValueError(
                    f"vmap: out_axes=None for output leaf {k}, which depends on the batched "
                    f"inputs; give it an axis (out_axes=0) ({where()})")
            res.append(val)
            continue
        nd = len(val.shape) + (1 if d is None else 0)
        if not -nd <= od < nd:
            raise AxisError(f"vmap out_axes {od} is out of range for output leaf {k}, which "
                            f"has {nd} dimensions with the batch axis ({where()})")
        with using_trace(trace.parent):
            val = moveaxis(bdim_to_front(val, d, size), 0, od % nd)
        res.append(val)
    if trace.parent is None:
        res = [own(r) for r in res]
    return tree_util.tree_unflatten(out_tree, res)


def _hashable(x):
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    if isinstance(x, list | tuple):
        return tuple(_hashable(v) for v in x)
    return x


# --------------------------------------------------------------------------------------------
# Jacobians
# --------------------------------------------------------------------------------------------

def _jac_common(fun, argnums, args, mode, chunk_size, holomorphic, has_aux, fname=None):
    fname = fname or "jac" + mode
    nums, single = argnums_tuple(argnums, len(args), fname)
    leaves, in_tree = tree_util.tree_flatten((tuple(args), {}))
    leaves = [check_leaf_arg(x, i) for i, x in enumerate(leaves)]
    wrt = wrt_leaf_indices(args, {}, nums)
    check_wrt_dtypes(leaves, wrt, fname, holomorphic, complex_inputs=False)
    in_avals = [_aval(leaves[i]) for i in wrt]
    if mode == "rev":
        rows, out_avals, main_tree, aux = _jac_rows_rev(fun, in_tree, leaves, wrt, chunk_size,
                                                        has_aux, holomorphic)
    else:
        rows, out_avals, main_tree, aux = _jac_rows_fwd(fun, in_tree, leaves, wrt, in_avals,
                                                        chunk_size, has_aux, holomorphic)
    # rows[k]: for rev, per wrt input, an array (n_out_total, *in.shape); for fwd, per
    # output, an array (n_in_total, *out.shape)
    blocks = _assemble(rows, out_avals, in_avals, rev=mode == "rev")
    # blocks[o][i]: d out_o / d in_i with shape out.shape + in.shape
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
    return (res, aux) if has_aux else res


def _split_aux(out, has_aux, fname):
    if not has_aux:
        return out, None
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise FunctraceTypeError(
            f"{fname}(has_aux=True) requires the function to return a pair (out, aux); it "
            f"returned {describe_out(out)} ({where()})")
    return out[0], out[1]


def _float_outputs(out_leaves, fname, holomorphic):
    """The output leaves, checked as JAX does: float or complex; complex with holomorphic;
    for jacrev, real without it (the pullback of a complex output is not f'(z))."""
    out_leaves = [check_out_leaf(o, i) for i, o in enumerate(out_leaves)]
    for i, o in enumerate(out_leaves):
        dt = _aval(o).dtype
        if dt.kind not in "fc":
            raise FunctraceTypeError(
                f"{fname} needs float outputs, but output leaf {i} has dtype {dt}. Fix: "
                f"compute it in floating point, or return it as aux (has_aux=True) "
                f"({where()})")
        if holomorphic and dt.kind != "c":
            raise FunctraceTypeError(
                f"{fname}(holomorphic=True) needs complex outputs, but output leaf {i} has "
                f"dtype {dt}. Fix: drop holomorphic=True for a real-valued function "
                f"({where()})")
        if not holomorphic and dt.kind == "c" and fname == "jacrev":
            raise FunctraceTypeError(
                f"jacrev of a complex output (leaf {i}) needs holomorphic=True (the result is "
                f"then f'(z)); for a function that is not holomorphic use ft.vjp, or take the "
                f"real part first ({where()})")
    return out_leaves


def _jac_rows_rev(fun, in_tree, leaves, wrt, chunk_size, has_aux, holomorphic):
    """One taped forward pass; the pullback of every output basis vector, batched."""
    trace, ins, out = taped(fun, in_tree, leaves, wrt)
    main, aux = _split_aux(out, has_aux, "jacrev")
    out_leaves, main_tree = tree_util.tree_flatten(main)
    out_leaves = _float_outputs(out_leaves, "jacrev", holomorphic)
    out_avals = [_aval(o) for o in out_leaves]
    wanted = [ins[i] for i in wrt]

    def pull(*cts):
        return trace.pullback(list(zip(out_leaves, cts)), wanted)

    rows = _batched_rows(pull, out_avals, chunk_size)
    if aux is not None:
        top = trace.parent is None
        aux = tree_util.tree_map(lambda x: own(unwrap(x, trace)) if top
                                 else unwrap(x, trace), aux)
    return rows, out_avals, main_tree, aux


def _jac_rows_fwd(fun, in_tree, leaves, wrt, in_avals, chunk_size, has_aux, holomorphic):
    """``jvp`` of ``fun`` for every input basis vector, batched (the primal part is
    computed once: it does not depend on the batched tangents)."""
    box: dict = {}

    def push(*ts):
        trace = JVPTrace(current_trace())
        ins = list(leaves)
        for i, t in zip(wrt, ts):
            ins[i] = trace.input(leaves[i], t)
        try:
            out = call_traced(trace, fun, in_tree, ins)
        finally:
            trace.active = False
        main, aux = _split_aux(out, has_aux, "jacfwd")
        out_leaves, box["tree"] = tree_util.tree_flatten(main)
        out_leaves = _float_outputs(out_leaves, "jacfwd", holomorphic)
        box["avals"] = [_aval(o) for o in out_leaves]
        box["aux"] = None if aux is None else tree_util.tree_map(lambda x: unwrap(x, trace),
                                                                 aux)
        return [o._tangent if isinstance(o, JVPTracer) and o._trace is trace
                else zeros_of(_value(o)) for o in out_leaves]

    rows = _batched_rows(push, in_avals, chunk_size)
    aux = box["aux"]
    if aux is not None and current_trace() is None:
        aux = tree_util.tree_map(_unbatched_aux, aux)
    return rows, box["avals"], box["tree"], aux


def _unbatched_aux(x):
    if isinstance(x, Tracer):
        raise FunctraceTypeError("jacfwd(has_aux=True): the aux output depends on the "
                                 f"tangents ({where()})")
    return own(x)


def _batched_rows(fn, basis_avals, chunk_size):
    """``fn(*basis)`` for every basis vector of the flattened ``basis_avals``, batched in
    chunks: one array ``(n, *shape)`` per result of ``fn``. One basis vector needs no batch
    axis (the gradient of a scalar): ``fn`` runs once and a unit axis is added."""
    n = sum(a.size for a in basis_avals)
    if n == 1:
        outs = fn(*[np.ones(a.shape, a.dtype) for a in basis_avals])
        return [_reshape(o, (1,) + tuple(_aval(o).shape)) for o in outs]
    chunk = n if not chunk_size else max(1, min(int(chunk_size), n))
    pieces = None
    for start in range(0, max(n, 1), chunk):
        stop = min(start + chunk, n)
        basis = _basis(basis_avals, start, stop)
        flat_tree = tree_util.tree_structure((tuple(basis), {}))
        outs = _vmap_call(lambda *b: list(fn(*b)), flat_tree, basis, [0] * len(basis),
                          stop - start, 0)
        pieces = [[o] for o in outs] if pieces is None else [p + [o] for p, o in
                                                               zip(pieces, outs)]
    if any(isinstance(o, Tracer) for p in pieces for o in p):
        # the chunks of one output have one dtype and shape but the first axis: the op suffices
        return [p[0] if len(p) == 1 else ops.concatenate(p, 0) for p in pieces]
    return [p[0] if len(p) == 1 else np.concatenate(p, axis=0) for p in pieces]


def _basis(avals, start, stop):
    """Rows start..stop of the identity over the flattened ``avals``."""
    n_rows = stop - start
    out = []
    off = 0
    for av in avals:
        m = av.size
        b = np.zeros((n_rows, m), av.dtype)
        for r in range(n_rows):
            j = start + r - off
            if 0 <= j < m:
                b[r, j] = 1
        # fresh, and a function of the shapes alone: caches need not compare it per call
        out.append(fresh_constant(b.reshape((n_rows,) + av.shape)))
        off += m
    return out


def _reshape(x, shape):
    if isinstance(x, Tracer):
        return ops.reshape(x, tuple(shape))
    return np.reshape(x, shape)


def _moveaxis0_last(x, k):
    """(n, *s) -> (*s, n) generalised: move the leading axis behind ``k`` axes."""
    if isinstance(x, Tracer):
        return moveaxis(x, 0, k)
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

    ``holomorphic=True``: ``fun`` is holomorphic in complex inputs, with complex outputs, and
    the result is the complex derivative f'(z) (as in JAX). Without it, complex inputs or
    outputs are a TypeError (for a function that is not holomorphic, use ``ft.vjp``). The same
    holds for ``jacfwd``, ``jacobian`` and ``hessian``, except that ``jacfwd`` of real inputs
    may have complex outputs.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    check_callable(fun, "jacrev")
    check_argnums(argnums, "jacrev")

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
    check_callable(fun, "jacfwd")
    check_argnums(argnums, "jacfwd")

    def jac(*args):
        return _jac_common(fun, argnums, args, "fwd", chunk_size, holomorphic, has_aux)
    jac.__name__ = f"jacfwd({getattr(fun, '__name__', 'f')})"
    return jac


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
             holomorphic: bool = False, chunk_size: int | None = None) -> Callable:
    """The Jacobian, by forward mode when the inputs are smaller than the outputs and by
    reverse mode otherwise (decided per call from the sizes). A function that calls a
    ``custom_vjp`` function (which has no forward-mode rule) is always done in reverse mode.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.jacobian(lambda x: fnp.sum(x ** 2))(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    check_callable(fun, "jacobian")
    check_argnums(argnums, "jacobian")

    def jac(*args):
        nums, _ = argnums_tuple(argnums, len(args), "jacobian")
        n_in = sum(_aval(x).size for n in nums for x in tree_util.tree_leaves(args[n]))
        from .api import make_graph
        tr, _, _ = make_graph(fun, args)
        outs = tr.graph.outputs
        if has_aux:
            outs = outs[:1]
        n_out = sum(o.aval.size for o in outs)
        mode = "fwd" if n_in <= n_out else "rev"
        if mode == "fwd" and forward_mode_blocker(tr.graph) is not None:
            mode = "rev"      # a custom_vjp call: only reverse mode goes through it
        return _jac_common(fun, argnums, args, mode, chunk_size, holomorphic, has_aux)
    return jac


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False, chunk_size: int | None = None) -> Callable:
    """The Hessian of a scalar ``fun``: ``jacfwd(jacrev(fun))`` (forward-over-reverse), one
    batched computation; shape ``in.shape + in.shape``. With ``has_aux``, ``fun`` returns
    ``(value, aux)`` and the result is ``(hessian, aux)``. When forward mode cannot go through
    ``fun`` (it calls a ``custom_vjp`` function, which has no forward-mode rule) the Hessian
    is taken as ``jacrev(jacrev(fun))`` instead (``fun`` then runs once more).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.hessian(lambda x: fnp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    check_callable(fun, "hessian")
    check_argnums(argnums, "hessian")
    inner = jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic)

    def hess(*args):
        try:
            return _jac_common(inner, argnums, args, "fwd", chunk_size, holomorphic, has_aux,
                               "hessian")
        except MissingRuleError as e:
            if not getattr(e, "missing_jvp", False):
                raise
        # reverse-over-reverse: the backward pass of a custom_vjp is ordinary functrace code
        return _jac_common(inner, argnums, args, "rev", chunk_size, holomorphic, has_aux,
                           "hessian")
    hess.__name__ = f"hessian({getattr(fun, '__name__', 'f')})"
    return hess
