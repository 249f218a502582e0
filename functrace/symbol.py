"""``ft.Symbol``: the public, immutable wrapper of a traced Graph.

A Symbol pairs a Graph with the pytree structure of the function's arguments and results, so
``sym(x, w)`` takes and returns what the traced function did. It prints as readable code,
round-trips through JSON, exports DOT, and evaluates on the reference interpreter. It lives at
the API level (it needs a backend to be callable), above core's Graph.
"""

from __future__ import annotations

import collections
import json
import keyword

import numpy as np

from . import tree_util
from .core import AVal, Graph
from .errors import FunctraceError, FunctraceTypeError, ShapeError, where

__all__ = ["Symbol", "tree_to_json", "tree_from_json"]


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

    __slots__ = ("graph", "in_tree", "out_tree", "guards", "_checked")

    def __init__(self, graph: Graph, in_tree=None, out_tree=None, guards=()):
        self.graph = graph
        # value-dependent Python decisions taken while tracing (tracing.Guard): checked on
        # every call, so a Symbol never silently computes another branch's code path
        self.guards = tuple(guards)
        self._checked = None
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
        if not (isinstance(other, Symbol) and self.in_tree == other.in_tree
                and self.out_tree == other.out_tree
                and len(self.guards) == len(other.guards)):
            return False
        if not self.guards:
            return self.graph == other.graph
        # guards compare through the graph that computes them (their atoms are its Vars)
        return self._checked_graph() == other._checked_graph() and all(
            a.kind == b.kind and a.why == b.why and _same_expected(a, b)
            for a, b in zip(self.guards, other.guards))

    def __hash__(self):
        return hash((self.graph, self.in_tree, self.out_tree, len(self.guards)))

    def __str__(self):
        from .printing import graph_to_text
        return graph_to_text(self.graph, guards=self.guards)

    def _checked_graph(self) -> Graph:
        """The graph with the guards' atoms as extra outputs (what a call evaluates)."""
        if self._checked is None:
            self._checked = Graph(self.graph.inputs, self.graph.eqns,
                                  tuple(self.graph.outputs) + tuple(g.atom for g in self.guards))
        return self._checked

    def _check_guards(self, values) -> None:
        from .errors import ConcretizationError, GuardError
        from .tracing import source_line
        for g, v in zip(self.guards, values):
            try:
                ok = g.holds(v)
            except ConcretizationError:
                raise ConcretizationError(
                    f"this Symbol was traced on concrete values and took a value-dependent "
                    f"Python decision ({g.why} at {source_line(g.source)}); it cannot run "
                    "on abstract values (under ft.jit or ft.vmap). Trace the function "
                    "itself under the transform instead, or write the decision with "
                    "fnp.where / ft.cond.") from None
            if not ok:
                raise GuardError(
                    f"these inputs take another Python path than the one this Symbol "
                    f"recorded: when traced, {g.describe()} at {source_line(g.source)}. A "
                    "Symbol holds one path of the function; trace it again for these "
                    "inputs (ft.trace(f)(*args)), or write the decision with fnp.where / "
                    "ft.cond so that one graph covers both paths.")

    def __repr__(self):
        return (f"<Symbol {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
                f"{len(self.outputs)} outputs>")

    def __call__(self, *args, **kwargs):
        """Evaluate on the reference interpreter; arguments must match the traced types.

        Inside a transform (``ft.grad(sym)``, ``ft.jit(sym)``, ``ft.vmap(sym)``) the graph's
        equations are re-bound into the enclosing trace instead, so a Symbol composes like
        the function it was traced from."""
        from .tracing import Tracer, current_trace, eval_graph
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if current_trace() is not None or any(isinstance(x, Tracer) for x in leaves):
            if tree != self.in_tree:
                self._structure_error(args, kwargs, leaves, tree)
            for i, (x, v) in enumerate(zip(leaves, self.inputs)):
                if isinstance(x, Tracer):
                    av = x.aval
                else:
                    av = self._leaf_aval(x, i, v)
                if av.shape != v.aval.shape:
                    raise ShapeError(f"Symbol call: argument {i}: expected shape "
                                     f"{v.aval.shape} ({v.aval}), got {av.shape} ({where()})")
            if self.guards:
                outs = eval_graph(self._checked_graph(), leaves)
                n = len(self.graph.outputs)
                self._check_guards(outs[n:])
                outs = outs[:n]
            else:
                outs = eval_graph(self.graph, leaves)
            return tree_util.tree_unflatten(self.out_tree, outs)
        from .backends import reference
        leaves = self._check_args(args, kwargs)
        if self.guards:
            outs = reference.run(self._checked_graph(), leaves)
            n = len(self.graph.outputs)
            self._check_guards(outs[n:])
            outs = outs[:n]
        else:
            outs = reference.run(self.graph, leaves)
        return tree_util.tree_unflatten(self.out_tree, outs)

    def _structure_error(self, args, kwargs, leaves, tree):
        """The error for arguments whose pytree structure differs from the traced ones."""
        got = ", ".join(_describe_arg(a) for a in args)
        if kwargs:
            got += (", " if got else "") + ", ".join(f"{k}={_describe_arg(v)}"
                                                     for k, v in kwargs.items())
        want = ", ".join(str(v.aval) for v in self.inputs)
        if len(leaves) != len(self.inputs):
            raise FunctraceTypeError(
                f"this Symbol takes {len(self.inputs)} array argument(s) ({want}; structure "
                f"{self.in_tree}), got {len(leaves)}: ({got}) ({where()})")
        raise FunctraceTypeError(f"Symbol call: argument structure {tree} differs from the "
                                 f"traced {self.in_tree}; got ({got}) ({where()})")

    @staticmethod
    def _leaf_aval(x, i, v) -> AVal:
        """The type of a concrete argument leaf; FunctraceTypeError for non-array data."""
        try:
            a = x if isinstance(x, np.ndarray) else np.asarray(x)
        except Exception:      # whatever numpy makes of it, it is no array
            a = None
        if a is None or a.dtype.kind not in "biufc":
            what = (f"an array of dtype {a.dtype}" if isinstance(x, np.ndarray)
                    else f"a {type(x).__name__} ({x!r:.40})")
            raise FunctraceTypeError(f"Symbol call: argument {i}: expected an array {v.aval}, "
                                     f"got {what} ({where()})")
        return AVal(a.shape, a.dtype)

    def _check_args(self, args, kwargs):
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            self._structure_error(args, kwargs, leaves, tree)
        out = []
        for i, (x, v) in enumerate(zip(leaves, self.inputs)):
            self._leaf_aval(x, i, v)
            a = np.asarray(x)
            if a.shape != v.aval.shape:
                raise ShapeError(f"Symbol call: argument {i}: expected shape {v.aval.shape} "
                                 f"({v.aval}), got {a.shape} ({where()})")
            if a.dtype != v.aval.dtype:
                if isinstance(x, bool | int | float | complex) or np.can_cast(
                        a.dtype, v.aval.dtype, "same_kind"):
                    a = a.astype(v.aval.dtype)
                else:
                    raise FunctraceTypeError(
                        f"Symbol call: argument {i}: expected dtype {v.aval.dtype}, got "
                        f"{a.dtype} (it does not convert safely; trace the function again "
                        f"for this dtype) ({where()})")
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
        from .graph_json import encode_array, encode_source, graph_to_json
        doc = {"graph": json.loads(graph_to_json(self._checked_graph() if self.guards
                                                 else self.graph)),
               "in_tree": _tree_to_json(self.in_tree),
               "out_tree": _tree_to_json(self.out_tree)}
        if self.guards:
            # the graph's last len(guards) outputs are the guards' atoms
            doc["guards"] = [
                {"kind": g.kind, "why": g.why,
                 "expected": (bool(g.expected) if g.kind == "truth"
                              else encode_array(g.expected)),
                 **({"source": encode_source(g.source)} if g.source is not None else {})}
                for g in self.guards]
        return json.dumps(doc)

    @classmethod
    def from_json(cls, text: str | bytes) -> Symbol:
        """Rebuild a Symbol from ``to_json`` text.

        A document is data, never code: ops are found by name in the op registry, dtypes
        must be numeric, and a namedtuple in the argument or result structure is the class
        ``functrace.tree_util`` knows by that module, name and fields (one flattened in this
        process, or registered with ``tree_util.register_namedtuple``), else a stand-in
        namedtuple with the same name and fields. Nothing is imported, evaluated or
        unpickled. Any malformed document raises ``GraphFormatError`` (a ``ValueError``)
        saying where and what is wrong.

        Example:
            >>> import functrace as ft
            >>> ft.Symbol.from_json('[1, 2]')
            Traceback (most recent call last):
            ...
            functrace.errors.GraphFormatError: Symbol JSON must be an object, got list
        """
        from .errors import FunctraceTypeError, where
        from .graph_json import GraphFormatError, graph_from_document, parse_json_document
        if not isinstance(text, str | bytes | bytearray):
            raise FunctraceTypeError(f"Symbol.from_json takes the JSON text (a str or bytes), "
                                     f"got {type(text).__name__}{where()}")
        d = parse_json_document(text, "Symbol JSON")
        if not isinstance(d, dict):
            raise GraphFormatError(f"Symbol JSON must be an object, got {type(d).__name__}")
        for key in ("graph", "in_tree", "out_tree"):
            if key not in d:
                raise GraphFormatError(f"Symbol JSON lacks the field {key!r}: is this a "
                                       "document written by Symbol.to_json?")
        try:
            g = graph_from_document(d["graph"], "graph")
            in_tree = _tree_from_json(d["in_tree"], "in_tree")
            out_tree = _tree_from_json(d["out_tree"], "out_tree")
            guard_docs = d.get("guards", [])
            if not isinstance(guard_docs, list) or len(guard_docs) > len(g.outputs):
                raise GraphFormatError("Symbol JSON: guards must be a list with one entry "
                                       "per guarded value")
            n_out = len(g.outputs) - len(guard_docs)
            guards = [_guard_from_json(gd, a, f"guards[{i}]")
                      for i, (gd, a) in enumerate(zip(guard_docs, g.outputs[n_out:]))]
        except GraphFormatError:
            raise
        except (KeyError, IndexError, TypeError, AttributeError, OverflowError,
                RecursionError, ValueError) as e:
            # a backstop: every check above names the field; this names at least the kind
            raise GraphFormatError(f"malformed Symbol JSON ({type(e).__name__}: "
                                   f"{str(e)[:200]})") from None
        if in_tree.num_leaves != len(g.inputs) or out_tree.num_leaves != n_out:
            raise GraphFormatError("Symbol JSON: argument/result structure does not match "
                                   "the graph")
        sym = cls(Graph(g.inputs, g.eqns, g.outputs[:n_out]), in_tree, out_tree, guards)
        if guards:
            sym._checked = g
        return sym

    def to_dot(self, name: str = "functrace") -> str:
        """Graphviz DOT text of the graph (no dependency needed)."""
        from .printing import graph_to_dot
        return graph_to_dot(self.graph, name=name)

    def render(self, path: str, format: str | None = None):
        """Render with Graphviz (``pip install 'functrace[viz]'``)."""
        from .printing import render
        return render(self.graph, path, format=format)


def _describe_arg(a) -> str:
    """A short description of a call argument, for error messages."""
    if a is None:
        return "None"
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        dt = np.dtype(a.dtype)
        typ = AVal(tuple(a.shape), dt) if dt.kind in "biufc" else f"{dt}{list(a.shape)}"
        return f"{type(a).__name__} {typ}"
    if isinstance(a, tuple | list):
        return f"{type(a).__name__} of {len(a)}"
    return type(a).__name__


def _same_expected(a, b) -> bool:
    if a.kind == "truth":
        return a.expected == b.expected
    x, y = a.expected, b.expected
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


def _guard_from_json(d, atom, where):
    from .core import Var
    from .graph_json import GraphFormatError, decode_array, decode_source
    from .tracing import Guard
    if not isinstance(d, dict) or d.get("kind") not in ("truth", "value"):
        raise GraphFormatError(f"Symbol JSON: {where} must be an object with kind 'truth' "
                               "or 'value'")
    if not isinstance(atom, Var):
        raise GraphFormatError(f"Symbol JSON: {where} guards a literal")
    why = d.get("why", "")
    if not isinstance(why, str) or len(why) > 200:
        raise GraphFormatError(f"Symbol JSON: {where}.why must be a short string")
    if d["kind"] == "truth":
        expected = d.get("expected")
        if not isinstance(expected, bool):
            raise GraphFormatError(f"Symbol JSON: {where}.expected must be true or false")
    else:
        expected = decode_array(d.get("expected"), f"{where}.expected")
        if expected.shape != atom.aval.shape or expected.dtype != atom.aval.dtype:
            raise GraphFormatError(f"Symbol JSON: {where}.expected does not match the "
                                   "guarded value's type")
    src = decode_source(d["source"], f"{where}.source") if "source" in d else None
    return Guard(atom, d["kind"], expected, src, why)


# Pytree structures are stored as a small description of an example tree whose leaves are
# their own indices (None, tuples, lists, dicts, OrderedDicts, namedtuples). Reading one back
# never imports anything: namedtuple classes come from tree_util's index of the types this
# process knows (met or registered), else a stand-in namedtuple is made with the stored name
# and fields (validated identifiers, so collections.namedtuple's own code generation only
# ever sees plain names).

_MAX_TREE_DEPTH = 100     # pytree levels; real argument structures nest a few levels


def tree_to_json(tree):
    """The JSON form of a pytree structure (as Symbol documents store it)."""
    return _tree_to_json(tree)


def tree_from_json(d, where: str):
    """A pytree structure from ``tree_to_json``'s form; GraphFormatError if malformed."""
    return _tree_from_json(d, where)


def _tree_to_json(tree):
    example = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    return _encode(example)


_KEY_TYPES = (str, int, float, bool, type(None))


def _encode_items(x):
    for k in x:
        if not isinstance(k, _KEY_TYPES):
            raise FunctraceError(f"cannot save a pytree dict key of type {type(k).__name__} "
                                 f"({k!r:.40}) to JSON; keys must be str, int, float, bool "
                                 "or None")
    return [[k, _encode(v)] for k, v in x.items()]


def _encode(x):
    if isinstance(x, int):
        return {"leaf": x}
    if x is None:
        return {"none": True}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        t = type(x)
        return {"namedtuple": [t.__module__, t.__qualname__, list(x._fields)],
                "items": [_encode(e) for e in x]}
    if type(x) is tuple:
        return {"tuple": [_encode(e) for e in x]}
    if type(x) is list:
        return {"list": [_encode(e) for e in x]}
    if type(x) is dict:
        return {"dict": _encode_items(x)}
    if type(x) is collections.OrderedDict:
        return {"odict": _encode_items(x)}
    raise FunctraceError(f"cannot save a pytree node of type {type(x).__name__} to JSON "
                         "(stored structures hold None, tuple, list, dict, OrderedDict and "
                         "namedtuple nodes)")


def _bad(where, msg):
    from .graph_json import GraphFormatError
    raise GraphFormatError(f"bad pytree description at {where}: {msg}")


def _decode(d, where, depth):
    if not isinstance(d, dict) or not d:
        _bad(where, f"expected an object with one tag, got {_short(d)}")
    if depth > _MAX_TREE_DEPTH:
        _bad(where, f"nested more than {_MAX_TREE_DEPTH} levels deep")
    keys = set(d)
    if keys == {"leaf"}:
        v = d["leaf"]
        if type(v) is not int or not 0 <= v < 2 ** 31:
            _bad(where, f"a leaf must be its index (a small integer), got {_short(v)}")
        return v
    if keys == {"none"}:
        if d["none"] is not True:
            _bad(where, "'none' must be true")
        return None
    if keys == {"tuple"} or keys == {"list"}:
        (tag, body), = d.items()
        if not isinstance(body, list):
            _bad(f"{where}.{tag}", f"expected a list, got {_short(body)}")
        items = [_decode(e, f"{where}.{tag}[{i}]", depth + 1) for i, e in enumerate(body)]
        return tuple(items) if tag == "tuple" else items
    if keys == {"dict"} or keys == {"odict"}:
        (tag, body), = d.items()
        if not isinstance(body, list):
            _bad(f"{where}.{tag}", f"expected a list of [key, value] pairs, got {_short(body)}")
        out = {} if tag == "dict" else collections.OrderedDict()
        for i, pair in enumerate(body):
            w = f"{where}.{tag}[{i}]"
            if not (isinstance(pair, list) and len(pair) == 2):
                _bad(w, f"expected a [key, value] pair, got {_short(pair)}")
            k, v = pair
            if not isinstance(k, _KEY_TYPES):
                _bad(w, f"a dict key must be a string, number, bool or null, got {_short(k)}")
            if k in out:
                _bad(w, f"the dict key {_short(k)} appears twice")
            out[k] = _decode(v, w, depth + 1)
        return out
    if keys == {"namedtuple", "items"}:
        spec, items = d["namedtuple"], d["items"]
        w = f"{where}.namedtuple"
        if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str)
                and isinstance(spec[1], str) and isinstance(spec[2], list)):
            _bad(w, f"expected [module, qualname, [fields...]], got {_short(spec)}")
        module, qualname, fields = spec
        fields = tuple(fields)
        if not isinstance(items, list) or len(items) != len(fields):
            _bad(f"{where}.items", f"expected a list of {len(fields)} items (one per field)")
        t = _namedtuple_type(module, qualname, fields, w)
        return t(*[_decode(e, f"{where}.items[{i}]", depth + 1) for i, e in enumerate(items)])
    _bad(where, f"unknown pytree node {sorted(map(str, keys))!r:.80}")


def _short(v):
    if isinstance(v, list | dict):
        return f"<{type(v).__name__} of {len(v)}>"
    if isinstance(v, int) and abs(v) > 10 ** 30:
        return "<a huge integer>"
    return f"{v!r:.40}"


def _is_name(s):
    return isinstance(s, str) and s.isidentifier() and not keyword.iskeyword(s)


def _namedtuple_type(module, qualname, fields, where):
    """The namedtuple class tree_util knows by (module, qualname, fields), or a stand-in
    namedtuple with that name and those fields. Never imports ``module``."""
    if not all(_is_name(p) for p in module.split(".")):
        _bad(where, f"the module {_short(module)} is not a dotted name")
    parts = qualname.split(".")
    if not _is_name(parts[-1]) or not all(_is_name(p) or p == "<locals>" for p in parts):
        _bad(where, f"the class name {_short(qualname)} is not a (qualified) name")
    if (not all(_is_name(f) and not f.startswith("_") for f in fields)
            or len(set(fields)) != len(fields)):
        _bad(where, f"the field names {_short(list(fields))} are not distinct identifiers "
                    "without a leading underscore")
    known = tree_util.lookup_namedtuple(module, qualname, fields)
    if known is not None:
        return known
    # Once flattened (below, by tree_structure), the stand-in is itself known to tree_util,
    # so loading the same document again gives an equal Symbol.
    t = collections.namedtuple(parts[-1], fields, module=module)
    t.__qualname__ = qualname
    return t


def _tree_from_json(d, where):
    example = _decode(d, where, 0)
    try:
        leaves, tree = tree_util.tree_flatten(example)
    except ValueError as e:          # unsortable dict keys
        _bad(where, str(e)[:200])
    if leaves != list(range(len(leaves))):
        _bad(where, "the leaves must be numbered 0, 1, 2, ... in flattening order")
    return tree
