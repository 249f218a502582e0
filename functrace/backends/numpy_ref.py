"""The reference interpreter: runs any Graph with each op's numpy impl.

This is the living definition of every op; every other backend is tested against it. A graph
is compiled once into a flat plan (slot numbers instead of dict lookups, literals resolved,
and for every step the values whose last use it is), so replaying a small graph costs little
more than calling the same numpy functions directly, and memory is freed as soon as a value is
dead. Imports core only.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..core import Graph, Lit, Var
from .malloc_tuning import tune_once

__all__ = ["Plan", "plan", "run"]


class Plan:
    """A graph lowered to a list of steps over a flat slot array."""

    __slots__ = ("graph", "steps", "n_slots", "n_in", "consts", "const_base", "out_slots",
                 "__weakref__")

    def __init__(self, graph: Graph):
        tune_once()
        self.graph = graph
        slots: dict[Var, int] = {}
        for v in graph.inputs:
            slots[v] = len(slots)
        self.n_in = len(graph.inputs)
        for e in graph.eqns:
            for o in e.outputs:
                slots[o] = len(slots)
        consts: list = []
        const_idx: dict[Lit, int] = {}
        n_vars = len(slots)

        def ref(a):
            if isinstance(a, Lit):
                if a not in const_idx:
                    const_idx[a] = len(consts)
                    consts.append(a.val)
                return n_vars + const_idx[a]
            return slots[a]

        # last use of every var (graph outputs live to the end)
        last: dict[Var, int] = {}
        for i, e in enumerate(graph.eqns):
            for a in e.inputs:
                if isinstance(a, Var):
                    last[a] = i
        outs = {a for a in graph.outputs if isinstance(a, Var)}
        frees_at: list[list[int]] = [[] for _ in graph.eqns]
        for v, i in last.items():
            if v not in outs:
                frees_at[i].append(slots[v])
        steps = []
        for i, e in enumerate(graph.eqns):
            steps.append((e.op.impl, tuple(ref(a) for a in e.inputs), dict(e.params),
                          tuple(slots[o] for o in e.outputs), e.op.multiple_results,
                          tuple(frees_at[i])))
        self.steps = steps
        self.out_slots = tuple(ref(a) for a in graph.outputs)
        self.consts = consts
        self.const_base = n_vars
        self.n_slots = n_vars

    def __call__(self, *args):
        env = list(args)
        env.extend([None] * (self.n_slots - self.n_in))
        env.extend(self.consts)
        for impl, ins, params, outs, multi, frees in self.steps:
            res = impl(*[env[i] for i in ins], **params)
            if multi:
                for o, r in zip(outs, res):
                    env[o] = r
            else:
                env[outs[0]] = res
            for f in frees:
                env[f] = None
        return [env[i] for i in self.out_slots]


_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def plan(graph: Graph) -> Plan:
    """The cached Plan of a graph (keyed by the graph object)."""
    p = _plans.get(graph)
    if p is None:
        p = _plans[graph] = Plan(graph)
    return p


def run(graph: Graph, args) -> list:
    """Evaluate ``graph`` on numpy arrays; returns the list of outputs as arrays.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> g = ft.trace(lambda x: fnp.sin(x) * 2)(np.ones(2)).graph
        >>> run(g, [np.zeros(2)])
        [array([0., 0.])]
    """
    outs = plan(graph)(*args)
    return [_own(o) for o in outs]


def _own(x):
    """Outputs handed to users are writeable arrays (impls may return read-only views)."""
    a = np.asarray(x)
    if not a.flags.writeable:
        a = a.copy()
    return a
