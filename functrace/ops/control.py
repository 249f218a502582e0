"""Control-flow primitives: ``loop``, a counted loop over a body graph.

Owns ``loop_p``, and the sub-graph ops ``checkpoint_p``, ``custom_vjp_call_p`` and
``custom_jvp_call_p`` (their rules are attached by ``autodiff`` and ``batching``).
``passes.roll`` creates ``loop_p`` when it finds a Python loop that tracing unrolled
(the same equations repeated, each trip reading the last trip's results), so a compiled
backend can run the trip as one compiled loop instead of thousands of unrolled steps. It is
the rolled form the executors consume; user-facing control flow (``scan``, ``fori_loop``) will
be built on the same op. Imports core/tracing only.

Semantics of ``loop(*consts, *inits, *arrays; body, length, n_consts, n_carry, xs)``::

    carry = inits
    for j in range(length):
        x_j = [a[start + j*step : start + j*step + span : strides] for a, (start, step, span,
               strides) in zip(arrays, xs)]          # per axis
        carry, y_j = body(*consts, *carry, *x_j)     # body returns carries, then ys
        ys[k][j] = y_j[k]
    return (*carry, *ys)                             # ys stacked along a new leading axis
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Graph, Op
from ..errors import ShapeError
from ..tracing import eval_graph

__all__ = ["loop_p", "loop_slices", "checkpoint_p", "custom_vjp_call_p", "custom_jvp_call_p"]


def loop_slices(spec, j: int) -> tuple:
    """The basic-indexing tuple that reads trip ``j`` of an array described by ``spec``
    (``(start, step, span, strides)``, one entry per axis)."""
    start, step, span, strides = spec
    out = []
    for s, d, n, st in zip(start, step, span, strides):
        b = s + j * d
        out.append(slice(b, b + n, st))
    return tuple(out)


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
    consts = list(args[:n_consts])
    carry = list(args[n_consts:n_consts + n_carry])
    arrays = [np.asarray(a) for a in args[n_consts + n_carry:]]
    outs = body.outputs
    ys = [np.empty((length,) + v.aval.shape, v.aval.dtype) for v in outs[n_carry:]]
    for j in range(length):
        x_j = [a[loop_slices(spec, j)] for a, spec in zip(arrays, xs)]
        res = eval_graph(body, consts + carry + x_j)
        carry = list(res[:n_carry])
        for y, r in zip(ys, res[n_carry:]):
            y[j] = r
    return tuple([np.array(c, copy=True) for c in carry] + ys)


# a counted loop: constants, carries and per-trip strided reads in; the final carries and the
# per-trip results (stacked on a new leading axis) out
loop_p = Op("loop", _loop_abstract, _loop_impl, multiple_results=True, fresh=True,
            c_result=True)


# --------------------------------------------------------------------------------------------
# sub-graph ops whose rules are transforms of their sub-graph: ``autodiff`` attaches their
# vjp/jvp rules and ``batching`` their batch rules (both live above this layer)
# --------------------------------------------------------------------------------------------

def _sub_abstract(*avals, graph, **_):
    if tuple(avals) != graph.in_avals:
        raise TypeError(f"sub-graph takes {graph.in_avals}, got {tuple(avals)}")
    return graph.out_avals


def _checkpoint_impl(*args, graph, prevent_cse=True):
    return tuple(eval_graph(graph, list(args)))


# evaluate a sub-graph; its vjp recomputes the forward pass instead of keeping intermediates
checkpoint_p = Op("checkpoint", _sub_abstract, _checkpoint_impl,
                  multiple_results=True)


def _custom_impl(*args, fun_graph, rule):
    return tuple(eval_graph(fun_graph, list(args)))


def _custom_abstract(*avals, fun_graph, rule):
    return _sub_abstract(*avals, graph=fun_graph)


# a function with a user's vjp rule (fwd, bwd) / jvp rule: ``rule`` is the user's rule object
custom_vjp_call_p = Op("custom_vjp_call", _custom_abstract, _custom_impl,
                       multiple_results=True)
custom_jvp_call_p = Op("custom_jvp_call", _custom_abstract, _custom_impl,
                       multiple_results=True)
