"""Control-flow primitives: counted loops, branches, while loops, and sub-graph calls.

Owns ``loop_p`` (a counted loop: what ``ft.scan`` and ``ft.fori_loop`` bind, and what
``passes.roll`` folds an unrolled Python loop back into), ``cond_p`` (``ft.cond``/``ft.switch``),
``while_p`` (``ft.while_loop``), ``specialize_p`` (a graph built for a run-time integer: the
reverse pass of a while loop, whose trip count is known only when it runs), and the sub-graph
ops ``checkpoint_p``, ``custom_vjp_call_p`` and ``custom_jvp_call_p``. Every one holds its
sub-graphs as params (printed, kept through JSON); their vjp, jvp and batch rules are graph
transforms of those sub-graphs, attached by the transform layer (``autodiff``, ``batching``,
``control_rules``). Also ``debug_print_p`` (``ft.debug.print``: an ``effect`` op, a host
callback every pass keeps and every backend runs). Imports core/tracing only.

Semantics of ``loop(*consts, *inits, *arrays; body, length, n_consts, n_carry, xs)``::

    carry = inits
    for j in range(length):
        x_j = [a[start + j*step : start + j*step + span : strides] for a, (start, step, span,
               strides) in zip(arrays, xs)]          # per axis
        carry, y_j = body(*consts, *carry, *x_j)     # body returns carries, then ys
        ys[k][j] = y_j[k]
    return (*carry, *ys)                             # ys stacked along a new leading axis

``cond(index, *operands; branches)`` runs ``branches[clip(index, 0, len - 1)](*operands)``.

``while(*cond_consts, *body_consts, *init; cond, body, n_cond_consts, n_body_consts)`` runs
``while cond(*cond_consts, *carry): carry = body(*body_consts, *carry)`` and returns
``(*carry, trips)``: the trip count (int64) is an output so that the reverse pass can run
the loop backwards that many times.

``specialize(n, *args; build, out_types)`` evaluates the graph ``specialized_graph(build,
int(n))`` on ``args``: ``build`` is a tuple of params (JSON-safe) naming a recipe in
``SPECIALIZERS``, and ``out_types`` the result types, which never depend on ``n``.
"""

from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from .. import caches
from ..core import AVal, Eqn, Graph, Op, Var
from ..errors import ShapeError
from ..tracing import current_trace, eval_graph
from ._base import as_array, namespace_of

__all__ = ["SUBGRAPH_RUNNER", "run_subgraph", "holds_graphs", "loop_p", "loop_slices",
           "loop_read_spec", "cond_p", "branch_index", "while_p", "specialize_p",
           "specialized_graph", "SPECIALIZERS", "checkpoint_p", "custom_vjp_call_p",
           "custom_jvp_call_p", "debug_print_p"]


#: how the impls of these ops evaluate their sub-graphs when they run outside any trace:
#: None (the reference interpreter, ``eval_graph``) or ``(graph, args) -> outputs``. A
#: compiled target sets it around a sub-graph op's step, so a loop body, a branch or a while
#: condition runs as that target's compiled code.
SUBGRAPH_RUNNER: ContextVar = ContextVar("functrace_subgraph_runner", default=None)


def run_subgraph(graph: Graph, args) -> list:
    """``graph`` evaluated on ``args``: by the current target's runner when one is set and
    no trace is recording, else by ``eval_graph`` (which records into a trace)."""
    runner = SUBGRAPH_RUNNER.get()
    if runner is None or current_trace() is not None:
        return eval_graph(graph, list(args))
    return list(runner(graph, list(args)))


def _fresh(v):
    """A new array holding ``v``, in ``v``'s array module (numpy, or cupy on a GPU): the
    impls below copy what a sub-graph passes through unchanged, so that an output never
    aliases an operand."""
    return namespace_of(v).array(v, copy=True)


def holds_graphs(params) -> bool:
    """Whether an equation's params hold a sub-graph (directly or inside tuples)."""
    stack = list(params.values())
    while stack:
        v = stack.pop()
        if isinstance(v, Graph):
            return True
        if isinstance(v, tuple):
            stack.extend(v)
    return False


def loop_slices(spec, j: int) -> tuple:
    """The basic-indexing tuple that reads trip ``j`` of an array described by ``spec``
    (``(start, step, span, strides)``, one entry per axis)."""
    start, step, span, strides = spec
    out = []
    for s, d, n, st in zip(start, step, span, strides):
        b = s + j * d
        out.append(slice(b, b + n, st))
    return tuple(out)


def loop_read_spec(shape: tuple, reverse: bool = False) -> tuple:
    """The per-trip read of row ``j`` of an array of ``shape`` (row ``L - 1 - j`` when
    ``reverse``): what ``scan`` reads its ``xs`` with. A trip sees shape ``(1, *shape[1:])``."""
    n = len(shape)
    start = ((shape[0] - 1 if reverse else 0),) + (0,) * (n - 1)
    step = ((-1 if reverse else 1),) + (0,) * (n - 1)
    span = (1,) + tuple(shape[1:])
    return (start, step, span, (1,) * n)


def _sliced_aval(a: AVal, spec) -> AVal:
    start, step, span, strides = spec
    if not (len(start) == len(step) == len(span) == len(strides) == a.ndim):
        raise ShapeError(f"loop: a per-trip read of a rank-{a.ndim} array needs one "
                         "(start, step, span, stride) per axis")
    return AVal(tuple(len(range(0, n, st)) for n, st in zip(span, strides)), a.dtype)


def _loop_abstract(*avals, body: Graph, length: int, n_consts: int, n_carry: int, xs):
    n_in = len(body.inputs)
    if len(avals) != n_in or n_consts + n_carry + len(xs) != n_in:
        raise ShapeError(f"loop: body takes {n_in} inputs, got {len(avals)} operands for "
                         f"{n_consts} consts, {n_carry} carries and {len(xs)} per-trip reads")
    for a, v in zip(avals[:n_consts + n_carry], body.inputs):
        if a != v.aval:
            raise ShapeError(f"loop: operand {a} does not match body input {v.aval}")
    for a, spec, v in zip(avals[n_consts + n_carry:], xs, body.inputs[n_consts + n_carry:]):
        if _sliced_aval(a, spec) != v.aval:
            raise ShapeError(f"loop: a trip of {a} is {_sliced_aval(a, spec)}, body expects "
                             f"{v.aval}")
    outs = body.outputs
    for v, c in zip(outs[:n_carry], body.inputs[n_consts:n_consts + n_carry]):
        if v.aval != c.aval:
            raise ShapeError(f"loop: carry {c.aval} comes back as {v.aval}")
    return tuple([v.aval for v in outs[:n_carry]] +
                 [AVal((length,) + v.aval.shape, v.aval.dtype) for v in outs[n_carry:]])


def _loop_impl(*args, body: Graph, length: int, n_consts: int, n_carry: int, xs):
    # array-module generic (cupy on the CUDA target): the per-trip results are stacked in an
    # array of the module the body's results come in, made at the first trip
    consts = list(args[:n_consts])
    carry = list(args[n_consts:n_consts + n_carry])
    arrays = [as_array(a) for a in args[n_consts + n_carry:]]
    outs = body.outputs[n_carry:]
    ys = None
    for j in range(length):
        x_j = [a[loop_slices(spec, j)] for a, spec in zip(arrays, xs)]
        res = run_subgraph(body, consts + carry + x_j)
        carry = list(res[:n_carry])
        if ys is None:
            xp = namespace_of(*args, *res[n_carry:])
            ys = [xp.empty((length,) + v.aval.shape, v.aval.dtype) for v in outs]
        for y, r in zip(ys, res[n_carry:]):
            y[j] = r
    if ys is None:
        xp = namespace_of(*args)
        ys = [xp.empty((length,) + v.aval.shape, v.aval.dtype) for v in outs]
    return tuple([_fresh(c) for c in carry] + ys)


# a counted loop: constants, carries and per-trip strided reads in; the final carries and the
# per-trip results (stacked on a new leading axis) out
loop_p = Op("loop", _loop_abstract, _loop_impl, multiple_results=True, fresh=True,
            c_result=True)


# --------------------------------------------------------------------------------------------
# cond: one of several branch graphs, chosen by a run-time index
# --------------------------------------------------------------------------------------------

def _cond_abstract(index, *avals, branches):
    if index.shape != () or index.dtype.kind not in "iub":
        raise ShapeError(f"cond: the branch index must be an integer scalar, got {index}")
    if not branches:
        raise ShapeError("cond: needs at least one branch")
    for b in branches:
        if b.in_avals != tuple(avals):
            raise ShapeError(f"cond: a branch takes {b.in_avals}, got operands {avals}")
        if b.out_avals != branches[0].out_avals:
            raise ShapeError(f"cond: branches return different types: "
                             f"{branches[0].out_avals} and {b.out_avals}")
    return branches[0].out_avals


def branch_index(index, n: int) -> int:
    """The branch a run-time ``index`` selects among ``n`` (clamped, as ``lax.switch``)."""
    return min(max(int(index), 0), n - 1)


def _cond_impl(index, *args, branches):
    g = branches[branch_index(index, len(branches))]
    return tuple(_fresh(v) if any(v is a for a in args) else v
                 for v in run_subgraph(g, args))


cond_p = Op("cond", _cond_abstract, _cond_impl, multiple_results=True)


# --------------------------------------------------------------------------------------------
# while: a loop whose trip count depends on the values
# --------------------------------------------------------------------------------------------

def _while_abstract(*avals, cond: Graph, body: Graph, n_cond_consts: int, n_body_consts: int):
    nc, nb = n_cond_consts, n_body_consts
    carry = tuple(avals[nc + nb:])
    if tuple(avals[:nc]) + carry != cond.in_avals:
        raise ShapeError(f"while: the condition takes {cond.in_avals}, got "
                         f"{tuple(avals[:nc]) + carry}")
    if tuple(avals[nc:nc + nb]) + carry != body.in_avals:
        raise ShapeError(f"while: the body takes {body.in_avals}, got "
                         f"{tuple(avals[nc:nc + nb]) + carry}")
    if body.out_avals != carry:
        raise ShapeError(f"while: the body returns {body.out_avals} for a carry {carry}")
    if cond.out_avals != (AVal((), np.bool_),):
        raise ShapeError(f"while: the condition must return one boolean scalar, got "
                         f"{cond.out_avals}")
    return carry + (AVal((), np.int64),)


def _while_impl(*args, cond: Graph, body: Graph, n_cond_consts: int, n_body_consts: int):
    nc, nb = n_cond_consts, n_body_consts
    cc, bc = list(args[:nc]), list(args[nc:nc + nb])
    carry = list(args[nc + nb:])
    trips = 0
    while bool(run_subgraph(cond, cc + carry)[0]):
        carry = run_subgraph(body, bc + carry)
        trips += 1
    xp = namespace_of(*args)
    count = np.int64(trips) if xp is np else xp.asarray(trips, dtype=np.int64)
    return tuple([_fresh(c) for c in carry] + [count])


while_p = Op("while", _while_abstract, _while_impl, multiple_results=True, fresh=True)


# --------------------------------------------------------------------------------------------
# specialize: a graph made for a run-time integer (the reverse pass of a while loop)
# --------------------------------------------------------------------------------------------

#: recipe name -> ``(build, n) -> Graph``; ``"fori"`` is below, the transform layer adds
#: ``"vjp"``, ``"jvp"`` and ``"batch"`` (a recipe of a recipe's graph)
SPECIALIZERS: dict = {}

_specialized = caches.LRU("control.specialized", scale=4)


def specialized_graph(build: tuple, n: int) -> Graph:
    """The graph the recipe ``build`` makes for the integer ``n`` (cached)."""
    key = (build, n)
    g = _specialized.get(key)
    if g is None:
        maker = SPECIALIZERS.get(build[0])
        if maker is None:
            raise ShapeError(f"specialize: unknown recipe {build[0]!r}")
        g = _specialized[key] = maker(build, n)
    return g


def _fori_graph(build, n: int) -> Graph:
    """``("fori", body, n_consts, n_carry)``: ``n`` trips of ``body`` over its carries (a
    graph of one ``loop`` equation taking the consts and the initial carries)."""
    _, body, n_consts, n_carry = build
    ins = [Var(v.aval) for v in body.inputs]
    outs = [Var(v.aval) for v in body.outputs[:n_carry]]
    params = dict(body=body, length=int(n), n_consts=n_consts, n_carry=n_carry, xs=())
    return Graph(ins, [Eqn(loop_p, ins, params, outs)], outs)


SPECIALIZERS["fori"] = _fori_graph


def _spec_abstract(n, *avals, build, out_types):
    if n.shape != () or n.dtype.kind not in "iu":
        raise ShapeError(f"specialize: the count must be an integer scalar, got {n}")
    return tuple(AVal(s, d) for s, d in out_types)


def _spec_impl(n, *args, build, out_types):
    g = specialized_graph(build, int(n))
    return tuple(_fresh(v) if any(v is a for a in args) else v
                 for v in run_subgraph(g, args))


specialize_p = Op("specialize", _spec_abstract, _spec_impl, multiple_results=True)


# --------------------------------------------------------------------------------------------
# sub-graph ops whose rules are transforms of their sub-graph: ``autodiff`` attaches their
# vjp/jvp rules and ``batching`` their batch rules (both live above this layer)
# --------------------------------------------------------------------------------------------

def _sub_abstract(*avals, graph, **_):
    if tuple(avals) != graph.in_avals:
        raise TypeError(f"sub-graph takes {graph.in_avals}, got {tuple(avals)}")
    return graph.out_avals


def _checkpoint_impl(*args, graph, prevent_cse=True):
    return tuple(run_subgraph(graph, args))


# evaluate a sub-graph; its vjp recomputes the forward pass instead of keeping intermediates
checkpoint_p = Op("checkpoint", _sub_abstract, _checkpoint_impl,
                  multiple_results=True, call_param="graph")


def _custom_impl(*args, fun_graph, rule):
    return tuple(run_subgraph(fun_graph, args))


def _custom_abstract(*avals, fun_graph, rule):
    n_in, n_out = len(fun_graph.inputs), len(fun_graph.outputs)
    if (rule.in_tree.num_leaves, rule.out_tree.num_leaves) != (n_in, n_out):
        raise TypeError(f"the rule's structures have {rule.in_tree.num_leaves} argument and "
                        f"{rule.out_tree.num_leaves} result leaves; the function's graph has "
                        f"{n_in} inputs and {n_out} outputs")
    return _sub_abstract(*avals, graph=fun_graph)


# a function with a user's vjp rule (fwd, bwd) / jvp rule: ``rule`` is the user's rule object
custom_vjp_call_p = Op("custom_vjp_call", _custom_abstract, _custom_impl,
                       multiple_results=True, call_param="fun_graph")
custom_jvp_call_p = Op("custom_jvp_call", _custom_abstract, _custom_impl,
                       multiple_results=True, call_param="fun_graph")


# --------------------------------------------------------------------------------------------
# debug_print: a host callback (ft.debug.print), kept by every pass and run by every backend
# --------------------------------------------------------------------------------------------

def _print_abstract(*avals, fmt, names, statics, lanes):
    return AVal((), np.dtype(bool))        # a token: nothing reads it, the op is an effect


def _host_value(a):
    a = as_array(a)
    if namespace_of(a) is not np:
        from ..core import to_host
        a = to_host(a)
    return np.asarray(a)


def _print_impl(*args, fmt, names, statics, lanes):
    _emit([_host_value(a) for a in args], fmt, names, statics, lanes)
    return np.zeros((), bool)


def _emit(vals, fmt, names, statics, lanes):
    """Print ``fmt`` with the values; under vmap (``lanes``: per batching level, outermost
    first, ``(size, axis of each operand or None)``) once per example, in order."""
    if lanes:
        size, dims = lanes[0]
        for i in range(size):
            _emit([v if d is None else np.take(v, i, axis=d) for v, d in zip(vals, dims)],
                  fmt, names, statics, lanes[1:])
        return
    full = list(vals)
    for pos, v in statics:                # Python values (strings, numbers) passed as is
        full.insert(pos, v)
    n_pos = len(full) - len(names)
    print(fmt.format(*full[:n_pos], **dict(zip(names, full[n_pos:]))), flush=True)


def _print_batch(args, dims, *, fmt, names, statics, lanes):
    size = next(np.shape(a)[d] if not hasattr(a, "shape") else a.shape[d]
                for a, d in zip(args, dims) if d is not None)
    from ..tracing import bind
    tok = bind(debug_print_p, *args, fmt=fmt, names=names, statics=statics,
               lanes=((size, tuple(dims)),) + tuple(lanes))
    return (tok,), (None,)


debug_print_p = Op("debug_print", _print_abstract, _print_impl, effect=True, zero_grad=True,
                   batch=_print_batch)
