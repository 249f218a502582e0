"""The recorded history: per-equation nodes, gradient slots, and what a node keeps.

Owns ``_Node`` (one recorded equation and links to where its operands came from), ``_Slot``
(a marked array's gradient buffer and grad_req) and ``_dependency``, the analysis that decides
which operand and result values a node keeps for the backward pass (the seed's
GetBackwardDependency). Imports core, tracing and passes; knows nothing of arrays.
"""

from __future__ import annotations

from .. import caches
from ..core import AVal, Eqn, Graph, Params, Var
from ..passes.simplify import dce
from ..tracing import Trace, Tracer, _current

GRAD_REQS = ("write", "add", "null")


# --------------------------------------------------------------------------------------------
# History: nodes and gradient slots
# --------------------------------------------------------------------------------------------

class _Slot:
    """Where a marked array's gradient goes: the buffer and its grad_req. A marked leaf's
    slot is also its identity in every graph it is read by (a node's parent)."""

    __slots__ = ("grad", "req")

    def __init__(self, grad, req: str):
        self.grad, self.req = grad, req


class _Node:
    """One recorded equation.

    Attributes:
        eqn: the equation; its input atoms are the operands' Vars (or Lits), its outputs the
            result arrays' Vars.
        parents: per input, the ``_Node`` that computed it, the ``_Slot`` of a marked leaf, or
            None (a constant: an array outside any graph, or a literal).
        saved: Var -> value, only for the operands/results the vjp rule reads (None if none).
        marks: output index -> ``_Slot`` of results marked later (non-leaf variables).
        freed: set when a backward without retain_graph released this node: its values are
            gone (no second backward), its equation and links stay (a few hundred bytes) so
            ``get_symbol`` still works.
    """

    __slots__ = ("eqn", "freed", "marks", "parents", "saved")

    def __init__(self, eqn: Eqn, parents: tuple, saved: dict | None):
        self.eqn, self.parents, self.saved = eqn, parents, saved
        self.marks: dict[int, _Slot] | None = None
        self.freed = False

    def free(self) -> None:
        self.freed = True
        self.saved = None
        self.marks = None


# (op, params, operand types or literals, output types, active) -> (save_in, save_out): small
# values, but keys may hold literal arrays, so bounded like every cache (functrace.caches)
_DEP_CACHE = caches.LRU("autograd.dependencies", scale=16)


def _dependency(op, params: Params, in_key: tuple, out_avals: tuple, active: tuple):
    """Which inputs and outputs of an equation its vjp rule reads: ``(save_in, save_out)``.

    ``in_key`` holds the input AVal (a Var operand) or the Lit itself; ``active`` says which
    inputs carry a gradient. The rule is traced on abstract values (as vjp_graph would run it)
    and what the pruned gradient graph reads is what must be kept. Cached per signature. Any
    failure keeps everything, which is always correct.
    """
    n_in, n_out = len(in_key), len(out_avals)
    if op.zero_grad or not any(active):
        return (False,) * n_in, (False,) * n_out
    if op.vjp is None or not op.differentiable:   # backward will say so, naming the op
        return (False,) * n_in, (False,) * n_out
    key = (op.name, params, in_key, out_avals, active)
    try:
        hit = _DEP_CACHE.get(key)
    except TypeError:   # an unhashable param: analyse without caching
        key, hit = None, None
    if hit is not None:
        return hit
    trace = Trace(None)
    ins = [trace.new_input(k) if isinstance(k, AVal) else k.val for k in in_key]
    outs = [trace.new_input(a) for a in out_avals]
    cts = tuple(trace.new_input(a) if a.dtype.kind in "fc" else None for a in out_avals)
    token = _current.set(trace)
    try:
        got = op.vjp(cts, tuple(ins), tuple(outs), **params)
        res = [trace.to_atom(c) for c, act in zip(got, active, strict=True)
               if act and c is not None]
    except Exception:   # a rule that needs values (or fails): keep everything
        res = None
    finally:
        _current.reset(token)
        trace.active = False
    if res is None:
        result = ((True,) * n_in, (True,) * n_out)
    else:
        g = dce(Graph(trace.inputs, trace.eqns, res))
        used = {a for e in g.eqns for a in e.inputs if isinstance(a, Var)}
        used.update(a for a in g.outputs if isinstance(a, Var))
        result = (tuple(isinstance(t, Tracer) and t._var in used for t in ins),
                  tuple(t._var in used for t in outs))
    if key is not None:
        _DEP_CACHE[key] = result
    return result


def _check_req(req) -> None:
    if req not in GRAD_REQS:
        raise ValueError(f"grad_req must be 'write', 'add' or 'null', got {req!r}")

