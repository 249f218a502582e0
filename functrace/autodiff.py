"""Reverse mode as a graph transform: ``vjp_graph(graph, wrt) -> graph``.

Owns the backward pass (and, later, ``jvp_graph``). Imports core, tracing, ops and passes;
never the API layer, numpy/ or a backend.

How the backward pass works:
* A new trace is opened whose equation list *starts as the forward graph's equations* (the
  graph is immutable, so its Vars and Eqns are reused as they are: no re-tracing).
* Activity analysis marks the variables that depend on a ``wrt`` input through
  differentiable (float or complex) values; only active equations get a rule call.
* The equations are walked in reverse. Each op's vjp rule is ordinary functrace code written
  with op-level functions, so calling it *records* the gradient equations into the same trace:
  the result is a graph made of ops that have rules themselves, and grad(grad(f)) needs nothing
  special. Rules run with the forward equation's source line, so gradient equations point to
  the user's code.
* Cotangents are summed where a value fans out; a missing cotangent is a symbolic zero
  (``None``) that costs nothing; zeros are materialised only for a requested gradient nobody
  reached. A cotangent of a 0-d operand of an elementwise op is summed to 0-d here, the one
  place that un-broadcasts.
* The rules reference only the forward values they need, and the interpreters free each value
  after its last use, so only those values stay alive (the seed's GetBackwardDependency).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import ops
from .core import AVal, Eqn, Graph, Lit, Var
from .errors import MissingRuleError
from .tracing import Trace, Tracer, _current, _source_override, source_line

__all__ = ["vjp_graph", "active_vars", "zeros_like"]


def _differentiable(aval: AVal) -> bool:
    return aval.dtype.kind in "fc"


def active_vars(g: Graph, wrt: Sequence[int]) -> set[Var]:
    """Variables that depend on the inputs ``wrt`` through differentiable values."""
    active = {g.inputs[i] for i in wrt if _differentiable(g.inputs[i].aval)}
    for e in g.eqns:
        if e.op.zero_grad:
            continue
        if any(isinstance(a, Var) and a in active for a in e.inputs):
            for o in e.outputs:
                if _differentiable(o.aval):
                    active.add(o)
    return active


def zeros_like(aval: AVal):
    z = np.zeros((), aval.dtype)
    return ops.broadcast_in_dim(z, aval.shape, ()) if aval.shape else z


def _value_aval(x) -> AVal:
    if isinstance(x, Tracer):
        return x.aval
    return AVal.of(np.asarray(x))


def _fit(ct, aval: AVal, eqn: Eqn):
    """Make a rule's cotangent match its primal's type: sum a broadcast 0-d operand, keep
    the primal dtype (a real cotangent for a complex primal is cast)."""
    cav = _value_aval(ct)
    if cav.shape != aval.shape:
        if aval.shape == ():
            ct = ops.reduce_sum(ct, tuple(range(len(cav.shape))))
        else:
            raise AssertionError(f"vjp rule of {eqn.op.name} returned a cotangent of shape "
                                 f"{cav.shape} for an operand of shape {aval.shape}")
    if cav.dtype != aval.dtype:
        if aval.dtype.kind == "f" and cav.dtype.kind == "c":
            ct = ops.real(ct)
        ct = ops.convert_element_type(ct, aval.dtype)
    return ct


def vjp_graph(g: Graph, wrt: Sequence[int], seeds: Sequence) -> Graph:
    """The joint forward+backward graph of ``g``.

    Args:
        g: a graph.
        wrt: indices of the inputs to differentiate with respect to.
        seeds: one entry per output of ``g``: ``"input"`` (the cotangent becomes a new graph
            input, appended after ``g``'s inputs in output order), a numpy array (a constant
            cotangent, e.g. ``1.0`` for ``grad``), or ``None`` (zero: aux or integer outputs).

    Returns:
        A graph with inputs ``g.inputs + cotangent inputs`` and outputs
        ``g.outputs + one gradient per wrt input`` (gradients have the primal's dtype).
    """
    trace = Trace(_current.get())
    trace.inputs = list(g.inputs)
    trace.n_explicit = len(g.inputs)
    for v in g.inputs:
        trace.sources[v] = None
    trace.eqns = list(g.eqns)
    for e in g.eqns:
        for o in e.outputs:
            trace.producer[o] = e

    def val(a):
        return a.val if isinstance(a, Lit) else Tracer(trace, a)

    active = active_vars(g, wrt)
    ct_env: dict[Var, object] = {}

    def accumulate(v, ct):
        prev = ct_env.get(v)
        ct_env[v] = ct if prev is None else ops.add(prev, ct)

    token = _current.set(trace)
    try:
        for out, seed in zip(g.outputs, seeds):
            if seed is None or not isinstance(out, Var) or out not in active:
                if isinstance(seed, str):
                    trace.new_input(out.aval)   # keep the calling convention
                continue
            if isinstance(seed, str):
                accumulate(out, trace.new_input(out.aval))
            else:
                accumulate(out, np.asarray(seed, out.aval.dtype))
        for e in reversed(g.eqns):
            if not any(o in ct_env for o in e.outputs):
                continue
            cts = tuple(ct_env.pop(o, None) for o in e.outputs)
            if not any(isinstance(a, Var) and a in active for a in e.inputs):
                continue
            if e.op.zero_grad:
                continue
            rule = e.op.vjp
            if rule is None or not e.op.differentiable:
                raise MissingRuleError(
                    f"cannot differentiate through {e.op.name}: it "
                    + ("is not differentiable (its output is discrete)"
                       if not e.op.differentiable else "has no vjp rule")
                    + f"; recorded at {source_line(e.source)}. Wrap its input in "
                    "ft.stop_gradient(...) if no gradient should flow through it.")
            stok = _source_override.set(e.source)
            try:
                in_cts = rule(cts, tuple(val(a) for a in e.inputs),
                              tuple(val(o) for o in e.outputs), **e.params)
            finally:
                _source_override.reset(stok)
            for a, ct in zip(e.inputs, in_cts):
                if ct is None or not isinstance(a, Var) or a not in active:
                    continue
                accumulate(a, _fit(ct, a.aval, e))
        grads = []
        for i in wrt:
            v = g.inputs[i]
            ct = ct_env.get(v)
            grads.append(ct if ct is not None else zeros_like(v.aval))
        out_atoms = list(g.outputs) + [trace.to_atom(x) for x in grads]
    finally:
        _current.reset(token)
        trace.active = False
    return Graph(trace.inputs, trace.eqns, out_atoms)
