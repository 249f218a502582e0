"""``ft.Symbol``: the public, immutable wrapper of a traced Graph.

A Symbol pairs a Graph with the pytree structure of the function's arguments and results, so
``sym(x, w)`` takes and returns what the traced function did. It prints as readable code,
round-trips through JSON, exports DOT, and evaluates on the reference interpreter. It lives at
the API level (it needs a backend to be callable), above core's Graph.
"""

from __future__ import annotations

import json

import numpy as np

from . import tree_util
from .core import AVal, Graph
from .errors import FunctraceError

__all__ = ["Symbol"]


class Symbol:
    """An immutable traced graph with its calling convention.

    Attributes:
        graph: the underlying ``core.Graph``.
        inputs: the graph's input variables (flattened arguments, in order).
        outputs: the graph's output atoms (flattened results).
        nodes: the equations, in topological order.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> sym = ft.trace(lambda x: fnp.tanh(x) * 2.0)(np.ones(3))
        >>> len(sym.nodes), sym(np.zeros(3))
        (2, array([0., 0., 0.]))
    """

    __slots__ = ("graph", "in_tree", "out_tree")

    def __init__(self, graph: Graph, in_tree=None, out_tree=None):
        self.graph = graph
        if in_tree is None:
            in_tree = tree_util.tree_structure((tuple(range(len(graph.inputs))), {}))
        if out_tree is None:
            out_tree = tree_util.tree_structure(
                tuple(range(len(graph.outputs))) if len(graph.outputs) != 1 else 0)
        self.in_tree = in_tree
        self.out_tree = out_tree

    @property
    def inputs(self):
        return self.graph.inputs

    @property
    def outputs(self):
        return self.graph.outputs

    @property
    def nodes(self):
        return self.graph.eqns

    @property
    def in_avals(self) -> tuple[AVal, ...]:
        return self.graph.in_avals

    @property
    def out_avals(self) -> tuple[AVal, ...]:
        return self.graph.out_avals

    def __eq__(self, other):
        return (isinstance(other, Symbol) and self.graph == other.graph
                and self.in_tree == other.in_tree and self.out_tree == other.out_tree)

    def __hash__(self):
        return hash((self.graph, self.in_tree, self.out_tree))

    def __str__(self):
        from .printing import graph_to_text
        return graph_to_text(self.graph)

    def __repr__(self):
        return (f"<Symbol {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
                f"{len(self.outputs)} outputs>")

    def __call__(self, *args, **kwargs):
        """Evaluate on the reference interpreter; arguments must match the traced types.

        Inside a transform (``ft.grad(sym)``, ``ft.jit(sym)``, ``ft.vmap(sym)``) the graph's
        equations are re-bound into the enclosing trace instead, so a Symbol composes like
        the function it was traced from."""
        from .tracing import Tracer, _current, eval_graph
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if _current.get() is not None or any(isinstance(x, Tracer) for x in leaves):
            if tree != self.in_tree:
                raise TypeError(f"argument structure {tree} differs from the traced "
                                f"{self.in_tree}")
            for i, (x, v) in enumerate(zip(leaves, self.inputs)):
                av = x.aval if isinstance(x, Tracer) else AVal.of(x)
                if av.shape != v.aval.shape:
                    raise ValueError(f"argument {i}: expected shape {v.aval.shape} "
                                     f"({v.aval}), got {av.shape}")
            outs = eval_graph(self.graph, leaves)
            return tree_util.tree_unflatten(self.out_tree, outs)
        from .backends import numpy_ref
        leaves = self._check_args(args, kwargs)
        outs = numpy_ref.run(self.graph, leaves)
        return tree_util.tree_unflatten(self.out_tree, outs)

    def _check_args(self, args, kwargs):
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            if len(leaves) != len(self.inputs):
                raise TypeError(f"this Symbol takes {len(self.inputs)} array argument(s) "
                                f"({self.in_tree}), got {len(leaves)} ({tree})")
            raise TypeError(f"argument structure {tree} differs from the traced {self.in_tree}")
        out = []
        for i, (x, v) in enumerate(zip(leaves, self.inputs)):
            a = np.asarray(x)
            if a.dtype.kind not in "biufc":
                raise TypeError(f"argument {i}: expected an array {v.aval}, got "
                                f"{type(x).__name__}")
            if a.shape != v.aval.shape:
                raise ValueError(f"argument {i}: expected shape {v.aval.shape} "
                                 f"({v.aval}), got {a.shape}")
            if a.dtype != v.aval.dtype:
                if isinstance(x, bool | int | float | complex) or np.can_cast(
                        a.dtype, v.aval.dtype, "same_kind"):
                    a = a.astype(v.aval.dtype)
                else:
                    raise TypeError(f"argument {i}: expected dtype {v.aval.dtype}, got "
                                    f"{a.dtype}")
            out.append(a)
        return out

    # -- serialisation -------------------------------------------------------------------------
    def to_json(self) -> str:
        """Lossless JSON text (graph, argument and result structure).

        Example:
            >>> import numpy as np, functrace as ft, functrace.numpy as fnp
            >>> sym = ft.trace(lambda x: fnp.exp(x))(np.ones(2))
            >>> ft.Symbol.from_json(sym.to_json()) == sym
            True
        """
        from .printing import graph_to_json
        return json.dumps({"graph": json.loads(graph_to_json(self.graph)),
                           "in_tree": _tree_to_json(self.in_tree),
                           "out_tree": _tree_to_json(self.out_tree)})

    @classmethod
    def from_json(cls, text: str) -> Symbol:
        """Rebuild a Symbol from ``to_json`` text; corrupt text raises ValueError."""
        from .printing import graph_from_json
        try:
            d = json.loads(text)
            g = graph_from_json(json.dumps(d["graph"]))
            in_tree = _tree_from_json(d["in_tree"])
            out_tree = _tree_from_json(d["out_tree"])
        except (KeyError, TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"not a functrace Symbol JSON document: {e}") from None
        if in_tree.num_leaves != len(g.inputs) or out_tree.num_leaves != len(g.outputs):
            raise ValueError("Symbol JSON: argument/result structure does not match the graph")
        return cls(g, in_tree, out_tree)

    def to_dot(self, name: str = "functrace") -> str:
        """Graphviz DOT text of the graph (no dependency needed)."""
        from .printing import graph_to_dot
        return graph_to_dot(self.graph, name=name)

    def render(self, path: str, format: str | None = None):
        """Render with Graphviz (``pip install 'functrace[viz]'``)."""
        from .printing import render
        return render(self.graph, path, format=format)


# Pytree structures are stored as a small description of an example tree whose leaves are
# their own indices (None, tuples, lists, dicts, namedtuples).

def _tree_to_json(tree):
    example = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    return _encode(example)


def _encode(x):
    if isinstance(x, int):
        return {"leaf": x}
    if x is None:
        return {"none": True}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        t = type(x)
        return {"namedtuple": [t.__module__, t.__qualname__, list(x._fields)],
                "items": [_encode(e) for e in x]}
    if isinstance(x, tuple):
        return {"tuple": [_encode(e) for e in x]}
    if isinstance(x, list):
        return {"list": [_encode(e) for e in x]}
    if isinstance(x, dict):
        return {"dict": [[k, _encode(v)] for k, v in x.items()]}
    raise FunctraceError(f"cannot save a pytree node of type {type(x).__name__} to JSON")


def _decode(d):
    if "leaf" in d:
        return d["leaf"]
    if "none" in d:
        return None
    if "tuple" in d:
        return tuple(_decode(e) for e in d["tuple"])
    if "namedtuple" in d:
        return _namedtuple_type(*d["namedtuple"])(*[_decode(e) for e in d["items"]])
    if "list" in d:
        return [_decode(e) for e in d["list"]]
    if "dict" in d:
        return {k: _decode(v) for k, v in d["dict"]}
    raise ValueError(f"bad pytree description {d!r}")


def _namedtuple_type(module, qualname, fields):
    """The namedtuple class by import (so structures compare equal), or a stand-in with the
    same name and fields when its module cannot be imported."""
    import collections
    import importlib
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, type) and tuple(getattr(obj, "_fields", ())) == tuple(fields):
            return obj
    except (ImportError, AttributeError):
        pass
    return collections.namedtuple(qualname.split(".")[-1], fields)


def _tree_from_json(d):
    return tree_util.tree_structure(_decode(d))
