"""How a compiled target runs the sub-graphs of its control-flow steps: ``SubgraphHost``.

A step whose op holds sub-graphs (``loop``, ``cond``, ``while``, ``specialize``, a
checkpoint) runs through the op's impl, and the impl evaluates its sub-graphs with
``ops.control.run_subgraph``, which asks the ``SUBGRAPH_RUNNER`` context variable. An
executable that holds such steps sets that variable, for the length of a call, to its
``SubgraphHost``: each sub-graph then runs as an executable of the same target of its own
(a loop body on the CPU as one numba driver, on the GPU as its kernels: a host loop over
kernels), compiled at its first trip and kept while the parent lives. Nested control flow
nests hosts: a sub-executable that itself holds sub-graphs hosts them in turn.

Both targets' executors use it (``cpu.executor``, ``cuda.executor``). Imports core and ops.
"""

from __future__ import annotations

from collections.abc import Callable

from ...core import Graph
from ...ops.control import SUBGRAPH_RUNNER, holds_graphs

__all__ = ["SubgraphHost", "hosts_subgraphs"]


def hosts_subgraphs(graph: Graph) -> bool:
    """Whether one of ``graph``'s equations holds a sub-graph."""
    return any(holds_graphs(e.params) for e in graph.eqns)


class SubgraphHost:
    """The sub-graphs of one executable's control-flow steps, each run by an executable of
    its own made by ``make(graph)`` (called once per distinct sub-graph).

    ``enter()`` makes this host the sub-graph runner and returns a token for ``leave``; an
    executable whose graph holds no sub-graph (``active`` false) pays nothing (the token is
    None)."""

    __slots__ = ("active", "make", "subs")

    def __init__(self, graph: Graph, make: Callable[[Graph], Callable]):
        self.active = hosts_subgraphs(graph)
        self.make = make
        self.subs: dict = {}         # sub-graph -> its executable, held while the host lives

    def __call__(self, graph: Graph, args) -> list:
        ex = self.subs.get(graph)
        if ex is None:
            ex = self.subs[graph] = self.make(graph)
        return ex(*args)

    def enter(self, runner: Callable | None = None):
        """Set the sub-graph runner (this host, or ``runner``) for the current context;
        None when the graph holds no sub-graph."""
        if not self.active:
            return None
        return SUBGRAPH_RUNNER.set(self if runner is None else runner)

    @staticmethod
    def leave(token) -> None:
        if token is not None:
            SUBGRAPH_RUNNER.reset(token)
