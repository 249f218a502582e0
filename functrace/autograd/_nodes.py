"""The recorded history: per-equation nodes, gradient slots, and what a node keeps.

Owns ``Node`` (one recorded equation and links to where its operands came from), ``Slot``
(a marked array's gradient buffer and grad_req). Which operand and result values a node keeps
for the backward pass (MXNet's GetBackwardDependency) is ``autodiff.rule_dependency``.
Imports core; knows nothing of arrays.
"""

from __future__ import annotations

from ..core import Eqn
from ..errors import FunctraceValueError, where

GRAD_REQS = ("write", "add", "null")


def as_list(x) -> list:
    """``x`` as a list: a list or tuple's items, else ``[x]``."""
    return list(x) if isinstance(x, list | tuple) else [x]


# --------------------------------------------------------------------------------------------
# History: nodes and gradient slots
# --------------------------------------------------------------------------------------------

class Slot:
    """Where a marked array's gradient goes: the buffer and its grad_req. A marked leaf's
    slot is also its identity in every graph it is read by (a node's parent)."""

    __slots__ = ("grad", "req")

    def __init__(self, grad, req: str):
        self.grad, self.req = grad, req


class Node:
    """One recorded equation.

    Attributes:
        eqn: the equation; its input atoms are the operands' Vars (or Lits), its outputs the
            result arrays' Vars.
        parents: per input, the ``Node`` that computed it, the ``Slot`` of a marked leaf, or
            None (a constant: an array outside any graph, or a literal).
        saved: Var -> value, only for the operands/results the vjp rule reads (None if none).
        marks: output index -> ``Slot`` of results marked later (non-leaf variables).
        freed: set when a backward without retain_graph released this node: its values are
            gone (no second backward), its equation and links stay (a few hundred bytes) so
            ``get_symbol`` still works.
    """

    __slots__ = ("eqn", "freed", "marks", "parents", "saved")

    def __init__(self, eqn: Eqn, parents: tuple, saved: dict | None):
        self.eqn, self.parents, self.saved = eqn, parents, saved
        self.marks: dict[int, Slot] | None = None
        self.freed = False

    def free(self) -> None:
        self.freed = True
        self.saved = None
        self.marks = None


def check_req(req) -> None:
    if req not in GRAD_REQS:
        raise FunctraceValueError(f"grad_req must be 'write', 'add' or 'null', got {req!r} "
                                  f"({where()})")

