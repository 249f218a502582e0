"""Structured control flow: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``.

Owns the user-facing constructs, with ``jax.lax``'s signatures and semantics. Each traces the
user's functions into sub-graphs (pytrees in and out, closures over outer values turned into
explicit operands) and binds one op of ``ops.control``: ``loop`` (scan, fori_loop with
static bounds, map), ``while`` (while_loop, fori_loop with traced bounds) and ``cond``
(cond, switch). The ops' vjp, jvp and batch rules live in ``control_rules``; compiled
backends run the sub-graphs as compiled loops. API layer: imports tracing, tree_util, ops
and control_rules.

A construct whose deciding value is a plain Python or numpy value (``cond(True, ...)``,
``fori_loop(0, 3, ...)`` outside any transform) still binds its op, so the same code traces
the same way everywhere; only ``cond``/``switch`` with a concrete index outside every
trace call the chosen branch directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import (
    control_rules,  # noqa: F401  (attaches the rules of the control-flow ops)
    ops,
    tree_util,
)
from .core import AVal, Graph, Var, on_device, to_host
from .errors import ConcretizationError, FunctraceTypeError, ShapeError, where
from .ops.control import branch_index, cond_p, loop_p, loop_read_spec, while_p
from .passes.loops import counter_rows
from .tracing import Tracer, bind, current_trace, trace_to_graph

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


# --------------------------------------------------------------------------------------------
# tracing a user function into a sub-graph
# --------------------------------------------------------------------------------------------

def _leaf_value(x):
    """A pytree leaf as an operand: tracers and device arrays as they are, anything else
    as a numpy array."""
    if isinstance(x, Tracer) or on_device(x):
        return x
    if isinstance(x, np.ndarray):
        return x
    return np.asarray(x)


def _concrete(x) -> np.ndarray:
    """A concrete index, predicate or bound as a host array (a cupy scalar is copied: a
    synchronisation, as any Python decision on a device value)."""
    return np.asarray(to_host(x) if on_device(x) else x)


def _aval(x) -> AVal:
    return x.aval if isinstance(x, Tracer) else AVal.of(x)


class _Sub:
    """A user function traced on abstract leaves: its graph (inputs: the explicit leaves,
    then the captured outer values), the captured values, and the output tree."""

    __slots__ = ("graph", "captured", "out_tree")

    def __init__(self, graph, captured, out_tree):
        self.graph, self.captured, self.out_tree = graph, captured, out_tree


def _trace_sub(fn: Callable, in_tree, in_avals: Sequence[AVal], what: str,
               prep: Callable | None = None) -> _Sub:
    """Trace ``fn(*tree_unflatten(in_tree, leaves))`` with abstract leaves of ``in_avals``.

    ``prep`` maps the traced leaves before they are unflattened (scan reshapes its per-trip
    rows). Python control flow on a traced value inside ``fn`` is a ConcretizationError
    naming the line, since the sub-graph must hold for every value.
    """
    box = {}

    def flat(*xs):
        leaves = list(xs) if prep is None else prep(list(xs))
        out = fn(*tree_util.tree_unflatten(in_tree, leaves))
        out_leaves, box["tree"] = tree_util.tree_flatten(out)
        return [o if isinstance(o, Tracer) else _leaf_value(o) for o in out_leaves]

    name = getattr(fn, "__name__", "the function")
    tr = trace_to_graph(flat, list(in_avals))
    if tr.guards:
        g = tr.guards[0]
        raise ConcretizationError(
            f"{what} {name} made a Python decision on a value it closes over "
            f"({g.describe()}); a {what} is traced once for every value, so decide with "
            "ft.cond / ft.switch inside it, or pass the value in as an operand")
    return _Sub(tr.graph, list(tr.captured), box["tree"])


def _reorder(g: Graph, order: Sequence[int]) -> Graph:
    """``g`` with its inputs permuted: input ``k`` of the result is ``g.inputs[order[k]]``."""
    return Graph([g.inputs[i] for i in order], g.eqns, g.outputs)


def _types(avals) -> str:
    return "(" + ", ".join(str(a) for a in avals) + ")"


def _check_carry(out_avals, in_avals, out_tree, in_tree, what: str, name: str,
                 hidden: int = 0):
    if out_tree != in_tree:
        raise FunctraceTypeError(
            f"{what} {name} must return a carry with the structure of its input carry: got "
            f"{out_tree}, expected {in_tree} ({where()})")
    bad = [(k, i, o) for k, (i, o) in enumerate(zip(in_avals, out_avals)) if i != o]
    if bad:
        k, i, o = bad[0]
        leaf = "the carry" if len(in_avals) - hidden == 1 else f"carry leaf {k - hidden}"
        raise FunctraceTypeError(
            f"{what} {name} changes the type of {leaf}: it comes in as {i} and goes "
            f"out as {o}; a loop carry keeps its shape and dtype. Fix: give the initial "
            f"value that type (e.g. fnp.asarray(init, dtype=...)) ({where()})")


# --------------------------------------------------------------------------------------------
# cond / switch
# --------------------------------------------------------------------------------------------

def switch(index, branches: Sequence[Callable], *operands):
    """Apply ``branches[index]`` to ``operands``, with ``index`` clamped to the branches.

    Like ``jax.lax.switch``: every branch takes the same operands and returns the same
    pytree of types. When ``index`` is a traced value, all branches are traced into one
    ``cond`` equation and the choice is made when the graph runs; gradients flow through the
    branch taken (and only into it). A plain Python or numpy ``index`` outside every
    transform just calls the branch.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> f = lambda i, x: ft.switch(i, [fnp.sin, fnp.cos, lambda x: x * 2.0], x)
        >>> float(ft.grad(f, argnums=1)(2, 1.5))
        2.0
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise FunctraceTypeError(f"switch needs a non-empty sequence of functions, got "
                                 f"{branches!r} ({where()})")
    if not isinstance(index, Tracer) and current_trace() is None:
        i = _concrete(index)
        if i.shape != () or i.dtype.kind not in "biu":
            raise FunctraceTypeError(f"switch: the index must be an integer scalar, got "
                                     f"{i.dtype}{list(i.shape)} ({where()})")
        return branches[branch_index(i, len(branches))](*operands)
    idx = _index_operand(index)
    leaves, in_tree = tree_util.tree_flatten(tuple(operands))
    leaves = [_leaf_value(x) for x in leaves]
    avals = [_aval(x) for x in leaves]
    subs = [_trace_sub(b, in_tree, avals, "branch") for b in branches]
    trees = {s.out_tree for s in subs}
    if len(trees) > 1:
        raise FunctraceTypeError(f"switch/cond: the branches return different structures: "
                                 f"{' vs '.join(str(t) for t in trees)} ({where()})")
    outs = [s.graph.out_avals for s in subs]
    for b, o in zip(branches, outs):
        if o != outs[0]:
            raise FunctraceTypeError(
                f"switch/cond: branch {getattr(b, '__name__', '?')} returns {_types(o)}, "
                f"another returns {_types(outs[0])}; every branch must return the same "
                f"shapes and dtypes ({where()})")
    # closure conversion: every captured value of every branch becomes an operand
    captured: list = []
    ids: dict[int, int] = {}
    for s in subs:
        for c in s.captured:
            if id(c) not in ids:
                ids[id(c)] = len(captured)
                captured.append(c)
    n = len(leaves)
    graphs = []
    for s in subs:
        ins = list(s.graph.inputs[:n])
        mine = dict(zip((ids[id(c)] for c in s.captured), s.graph.inputs[n:]))
        ins += [mine.get(k) or Var(_aval(c)) for k, c in enumerate(captured)]
        graphs.append(Graph(ins, s.graph.eqns, s.graph.outputs))
    res = bind(cond_p, idx, *leaves, *captured, branches=tuple(graphs))
    return tree_util.tree_unflatten(subs[0].out_tree, list(res))


def _index_operand(index):
    if isinstance(index, Tracer):
        a = index.aval
        if a.shape != () or a.dtype.kind not in "biu":
            raise FunctraceTypeError(f"switch/cond: the index/predicate must be a boolean or "
                                     f"integer scalar, got {a} ({where()})")
        return ops.convert_element_type(index, np.dtype(np.int32))
    i = _concrete(index)
    if i.shape != () or i.dtype.kind not in "biu":
        raise FunctraceTypeError(f"switch/cond: the index/predicate must be a boolean or "
                                 f"integer scalar, got {i.dtype}{list(i.shape)} ({where()})")
    return i.astype(np.int32)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, decided when the
    graph runs.

    Like ``jax.lax.cond``: ``pred`` is a boolean (or integer) scalar, both functions take the
    same operands and return the same pytree of types. Use it where a Python ``if`` on a
    traced value would fix the branch at trace time. Reverse mode recomputes the taken
    branch's forward pass (no residuals are stored), so a cond costs no extra memory.

    Example:
        >>> import functrace as ft, functrace.numpy as fnp
        >>> f = ft.jit(lambda x: ft.cond(x > 0, fnp.sin, lambda x: -x, x))
        >>> float(f(-2.0)), round(float(f(1.0)), 4)
        (2.0, 0.8415)
    """
    if not callable(true_fun) or not callable(false_fun):
        raise FunctraceTypeError(f"cond(pred, true_fun, false_fun, *operands): the branches "
                                 f"must be functions ({where()})")
    if isinstance(pred, Tracer):
        a = pred.aval
        if a.shape != ():
            raise FunctraceTypeError(f"cond: the predicate must be a scalar, got {a}; "
                                     f"reduce it (fnp.all / fnp.any) first ({where()})")
        if a.dtype.kind not in "biu":
            raise FunctraceTypeError(f"cond: the predicate must be boolean, got {a}; "
                                     f"compare it (x > 0) first ({where()})")
        if a.dtype.kind != "b":
            pred = ops.ne(pred, np.zeros((), a.dtype))
    else:
        p = _concrete(pred)
        if p.shape != ():
            raise FunctraceTypeError(f"cond: the predicate must be a scalar, got shape "
                                     f"{p.shape} ({where()})")
        pred = p.astype(bool)
    return switch(pred, [false_fun, true_fun], *operands)


# --------------------------------------------------------------------------------------------
# loops
# --------------------------------------------------------------------------------------------

def _carry_leaves(init, what: str):
    leaves, tree = tree_util.tree_flatten(init)
    leaves = [_leaf_value(x) for x in leaves]
    for x in leaves:
        if _aval(x).dtype.kind not in "biufc":
            raise FunctraceTypeError(f"{what}: carry leaves must be arrays or numbers, got "
                                     f"{type(x).__name__} ({where()})")
    return leaves, tree


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int = 1):
    """Loop ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``; return the final
    carry and the ``y``'s stacked.

    Like ``jax.lax.scan``; in Python terms::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, np.stack(ys)

    ``xs`` and the ``y``'s may be pytrees (or None); ``reverse=True`` walks ``xs`` from the
    end and stores each ``y`` at its own index. The loop is one equation whatever its
    length, so tracing, differentiation and compilation cost do not grow with it; under
    ``ft.jit`` the body runs as a compiled loop. Reverse mode keeps the values the body's
    rules need for every step (stacked; wrap ``f`` in ``ft.checkpoint`` to keep only the
    carries and recompute the rest). ``unroll`` is accepted for JAX compatibility and has no
    effect.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> def cumprod(xs):
        ...     return ft.scan(lambda c, x: (c * x, c * x), 1.0, xs)[1]
        >>> cumprod(np.array([1.0, 2.0, 3.0]))
        array([1., 2., 6.])
        >>> ft.grad(lambda xs: cumprod(xs)[-1])(np.array([1.0, 2.0, 3.0]))
        array([6., 3., 2.])
    """
    if not callable(f):
        raise FunctraceTypeError(f"scan: f must be a function, got {type(f).__name__} "
                                 f"({where()})")
    return _scan(f, init, xs, length, reverse, "scan: the body", getattr(f, "__name__", "f"))


def _scan(f, init, xs, length, reverse, what: str, name: str, hidden: int = 0,
          counter: int | None = None):
    """``scan``; ``what``/``name`` name the user's function in errors, whose first
    ``hidden`` carry leaves are the caller's own (fori_loop's counter, which starts at
    ``counter``: ``passes.loops.counter_rows`` applies)."""
    x_leaves, x_tree = tree_util.tree_flatten(xs)
    x_leaves = [_leaf_value(x) for x in x_leaves]
    lengths = {_aval(x).shape[0] if _aval(x).ndim else None for x in x_leaves}
    if None in lengths:
        raise ShapeError(f"scan: every leaf of xs needs a leading axis to scan over; one is "
                         f"a scalar ({where()})")
    if length is not None:
        lengths.add(int(length))
    if not lengths:
        raise FunctraceTypeError(f"scan: give xs or length= to set the number of steps "
                                 f"({where()})")
    if len(lengths) != 1:
        raise ShapeError(f"scan: the leaves of xs (and length=) disagree on the number of "
                         f"steps: {sorted(lengths)} ({where()})")
    n = lengths.pop()
    c_leaves, c_tree = _carry_leaves(init, "scan")
    c_avals = [_aval(c) for c in c_leaves]
    x_avals = [AVal((1,) + _aval(x).shape[1:], _aval(x).dtype) for x in x_leaves]
    nc, nx = len(c_leaves), len(x_leaves)

    def prep(leaves):   # a trip reads row j as shape (1, ...): drop that axis
        return leaves[:nc] + [ops.reshape(x, a.shape[1:]) for x, a in
                              zip(leaves[nc:], x_avals)]

    def body_fn(carry, x):
        out = f(carry, x)
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise FunctraceTypeError(f"scan: f must return a pair (carry, y), got "
                                     f"{type(out).__name__} ({where()})")
        return tuple(out)

    # (carry, x) as one tree whose leaves are the carry leaves then the x leaves
    in_tree = tree_util.tree_structure((tree_util.tree_unflatten(c_tree, c_avals),
                                        tree_util.tree_unflatten(x_tree, x_avals)))
    sub = _trace_sub(body_fn, in_tree, c_avals + x_avals, "scan body", prep)
    out_tree = sub.out_tree
    carry_tree, y_tree = _split_pair_tree(out_tree, nc)
    g = sub.graph
    _check_carry(g.out_avals[:nc], tuple(c_avals), carry_tree, c_tree, what, name, hidden)
    n_cap = len(sub.captured)
    body = _reorder(g, list(range(nc + nx, nc + nx + n_cap)) + list(range(nc + nx)))
    specs = tuple(loop_read_spec(_aval(x).shape, reverse) for x in x_leaves)
    operands = [*sub.captured, *c_leaves, *x_leaves]
    params = dict(body=body, length=n, n_consts=n_cap, n_carry=nc, xs=specs)
    if counter is not None:     # fori_loop: rows gathered at its counter become reads
        operands, params = counter_rows(operands, params, 0, counter)
    outs = bind(loop_p, *operands, **params)
    carry = list(outs[:nc])
    ys = list(outs[nc:])
    if reverse:
        ys = [ops.rev(y, (0,)) if n > 1 else y for y in ys]
    return (tree_util.tree_unflatten(carry_tree, carry),
            tree_util.tree_unflatten(y_tree, ys))


def _split_pair_tree(tree, n_carry: int):
    """The carry and y trees of a body's ``(carry, y)`` output tree."""
    dummy = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    return tree_util.tree_structure(dummy[0]), tree_util.tree_structure(dummy[1])


def map(f: Callable, xs):
    """``f`` applied to each slice of ``xs`` along its leading axis, results stacked (like
    ``jax.lax.map``): a ``scan`` without a carry, run sequentially.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.map(lambda r: fnp.sum(r * r), np.arange(6.0).reshape(3, 2))
        array([ 1., 13., 41.])
    """
    return scan(lambda c, x: ((), f(x)), (), xs)[1]


def _while(cond_fun, body_fun, init_val, what: str):
    leaves, tree = _carry_leaves(init_val, what)
    avals = [_aval(x) for x in leaves]
    n = len(leaves)
    # the functions take the carry as one argument
    arg_tree = tree_util.tree_structure((tree_util.tree_unflatten(tree, avals),))
    csub = _trace_sub(cond_fun, arg_tree, avals, f"{what}: the condition")
    if csub.out_tree.num_leaves != 1 or csub.graph.out_avals[0].shape != ():
        raise FunctraceTypeError(f"{what}: cond_fun must return a boolean scalar, got "
                                 f"{_types(csub.graph.out_avals)} ({where()})")
    cg = csub.graph
    if cg.out_avals[0].dtype.kind != "b":
        raise FunctraceTypeError(f"{what}: cond_fun must return a boolean scalar, got "
                                 f"{cg.out_avals[0]}; compare it (x > 0) first ({where()})")
    bsub = _trace_sub(body_fun, arg_tree, avals, f"{what}: the body")
    bg = bsub.graph
    _check_carry(bg.out_avals, tuple(avals), bsub.out_tree, tree, f"{what}: the body",
                 getattr(body_fun, "__name__", "body_fun"))
    ncc, nbc = len(csub.captured), len(bsub.captured)
    cgraph = _reorder(cg, list(range(n, n + ncc)) + list(range(n)))
    bgraph = _reorder(bg, list(range(n, n + nbc)) + list(range(n)))
    outs = bind(while_p, *csub.captured, *bsub.captured, *leaves, cond=cgraph, body=bgraph,
                n_cond_consts=ncc, n_body_consts=nbc)
    return tree_util.tree_unflatten(tree, list(outs[:n]))


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; return the final ``val``.

    Like ``jax.lax.while_loop``; the carry ``val`` is a pytree whose types stay fixed.
    Unlike JAX, reverse mode works: the forward pass records the trip count, and the
    gradient runs a counted reverse loop that many times (keeping each step's residuals, as
    ``scan`` does). Forward mode and ``vmap`` work too; a batched condition runs until every
    example is done, with finished examples frozen.

    Example:
        >>> import functrace as ft
        >>> def halve_until_small(x):
        ...     return ft.while_loop(lambda v: v > 1.0, lambda v: v / 2.0, x)
        >>> float(halve_until_small(10.0)), float(ft.grad(halve_until_small)(10.0))
        (0.625, 0.0625)
    """
    if not callable(cond_fun) or not callable(body_fun):
        raise FunctraceTypeError(f"while_loop(cond_fun, body_fun, init_val): cond_fun and "
                                 f"body_fun must be functions ({where()})")
    return _while(cond_fun, body_fun, init_val, "while_loop")


def fori_loop(lower, upper, body_fun: Callable, init_val):
    """``for i in range(lower, upper): val = body_fun(i, val)``; return the final ``val``.

    Like ``jax.lax.fori_loop``. With Python (or numpy) integer bounds it is a counted loop
    (a ``scan``): reverse mode keeps each step's residuals. With traced bounds it is a
    ``while_loop``, which reverse mode also supports here.

    Example:
        >>> import functrace as ft
        >>> def power(x, n):
        ...     return ft.fori_loop(0, n, lambda i, v: v * x, 1.0)
        >>> float(power(2.0, 10)), float(ft.grad(power)(2.0, 10))
        (1024.0, 5120.0)
    """
    if not callable(body_fun):
        raise FunctraceTypeError(f"fori_loop(lower, upper, body_fun, init_val): body_fun "
                                 f"must be a function ({where()})")
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    if static:
        lo, hi = _concrete(lower), _concrete(upper)
        for b in (lo, hi):
            if b.shape != () or b.dtype.kind not in "iu":
                raise FunctraceTypeError(f"fori_loop: bounds must be integer scalars, got "
                                         f"{b.dtype}{list(b.shape)} ({where()})")
        lo_i, hi_i = int(lo), int(hi)
        itype = np.result_type(lo.dtype, hi.dtype) if not (
            isinstance(lower, int) and isinstance(upper, int)) else np.dtype(np.int64)

        def step(carry, _):
            i, val = carry
            return (i + np.asarray(1, itype), body_fun(i, val)), None

        (_, val), _ = _scan(step, (np.asarray(lo_i, itype), init_val), None,
                            max(hi_i - lo_i, 0), False, "fori_loop: body_fun",
                            getattr(body_fun, "__name__", "body_fun"), hidden=1,
                            counter=lo_i)
        return val
    lo = lower if isinstance(lower, Tracer) else _concrete(lower)
    hi = upper if isinstance(upper, Tracer) else _concrete(upper)
    itype = np.result_type(_aval(lo).dtype, _aval(hi).dtype)
    lo = ops.convert_element_type(lo, itype) if _aval(lo).dtype != itype else lo
    hi = ops.convert_element_type(hi, itype) if _aval(hi).dtype != itype else hi

    def c(carry):
        return carry[0] < carry[1]

    def b(carry):
        i, h, val = carry
        return (i + np.asarray(1, itype), h, body_fun(i, val))

    return _while(c, b, (lo, hi, init_val), "fori_loop")[2]
