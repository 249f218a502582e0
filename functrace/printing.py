"""Graph -> text (runnable-looking Python) and Graph -> Graphviz DOT.

Owns how a ``Graph`` looks to people: ``graph_to_text`` (what ``str(graph)`` shows; this module
installs ``Graph.__str__``, since core sits below it) and ``graph_to_dot`` / ``render``, and the
variable naming that ``graph_json`` shares so a stored document reads like the listing. Imports
only ``core``, ``errors``, numpy and the standard library.

Invariants:
* Variable names are made at print time, in order of definition (``a, b, ..., z, ba, bb, ...``
  as in JAX), so equal graphs print equal text and golden tests are stable. Nothing here reads
  a Var's identity beyond "which definition is this".
"""

from __future__ import annotations

import keyword
import linecache
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .core import (
    AVal,
    Graph,
    Lit,
    SourceInfo,
    Var,
    dtype_short,
)

__all__ = ["graph_to_text", "graph_to_dot", "render", "Names", "RESERVED_NAMES", "dtype_name",
           "type_str"]

# Source comments start at this column at most, so one long line does not push every comment
# off screen; the user's code text is cut to about this many characters.
_COMMENT_COLUMN_MAX = 72
_CODE_TEXT_MAX = 40
_DOT_PARAM_MAX = 48


# --------------------------------------------------------------------------------------------
# Names and atoms (shared by every format)
# --------------------------------------------------------------------------------------------

def _alpha(n: int) -> str:
    """0 -> 'a', 25 -> 'z', 26 -> 'ba', ... (JAX's scheme: no name starts with 'a' but 'a')."""
    s = ""
    while True:
        n, r = divmod(n, 26)
        s = chr(97 + r) + s
        if n == 0:
            return s


RESERVED_NAMES = ("f", "np", "const")   # the default function name and words the text uses


class Names:
    """Hands out variable names in definition order, skipping keywords and reserved words."""

    def __init__(self, reserved=()):
        self.count = 0
        self.used: set[str] = set(reserved)
        self.of: dict[Var, str] = {}

    def define(self, v: Var) -> str:
        while True:
            s = _alpha(self.count)
            self.count += 1
            if s not in self.used and not keyword.iskeyword(s):
                break
        self.used.add(s)
        self.of[v] = s   # a Graph object printed twice rebinds its Vars: fine, scopes nest
        return s

    def label(self, base: str) -> str:
        """A fresh non-variable name (nested defs): ``base``, ``base_1``, ..."""
        name, i = base, 0
        while name in self.used or keyword.iskeyword(name):
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    def ref(self, v: Var) -> str:
        # a read of an undefined Var only happens in a malformed graph; show it, don't crash
        return self.of.get(v) or f"?{v.aval!r}"


def dtype_name(dt: np.dtype) -> str:
    """'f64' style; non-native byte orders keep numpy's exact spelling ('>f8')."""
    dt = np.dtype(dt)
    return dtype_short(dt) if dt.isnative else dt.str


def type_str(aval: AVal) -> str:
    return f"{dtype_name(aval.dtype)}[{','.join(map(str, aval.shape))}]"


def _scalar_text(x: np.generic) -> str:
    """A 0-d value, shortest round-trip spelling for its own dtype (0.1 as f32 is '0.1')."""
    if x.dtype.kind == "b":
        return repr(bool(x))
    if x.dtype.kind in "iu":
        return str(int(x))
    return str(x)


def _lit_text(lit: Lit) -> str:
    if lit.val.ndim == 0:
        s = _scalar_text(lit.val[()])
        if lit.val.dtype == np.float64 or lit.val.dtype.kind == "b":
            return s
        return f"{s}:{dtype_name(lit.val.dtype)}"
    return f"const({lit.aval!r})"


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------

def graph_to_text(g: Graph, *, name: str = "f", source: bool = True,
                  types: bool = False, guards: Sequence = ()) -> str:
    """Print a graph as runnable-looking Python, one line per equation.

    Args:
        g: the graph.
        name: the name of the printed function.
        source: add the user's line (``# file.py:12  code``) as a trailing comment.
        types: annotate each equation's result with its type (``c: f64[8,4] = ...``).

    Literals print inline (``1.0``, ``2.0:f32``, ``3:i64``, ``True``, ``const(f64[3,3])``);
    params print as keywords; sub-graph params print as nested ``def`` blocks just before the
    equation that uses them. ``guards`` (``tracing.Guard``s of a Symbol) print as
    ``guard(...)`` lines before the return: the value-dependent decisions the graph assumes.

    >>> from functrace.tracing import trace_to_graph
    >>> from functrace import ops
    >>> from functrace.core import AVal
    >>> g = trace_to_graph(lambda x: [ops.sin(ops.mul(x, 2.0))], [AVal((3,), "f8")]).graph
    >>> print(graph_to_text(g, source=False))
    def f(a: f64[3]):
        b = mul(a, 2.0)
        c = sin(b)
        return (c,)
    """
    p = _TextPrinter(source, types, Names(reserved=(name, *RESERVED_NAMES)))
    p.block(g, name, "", guards)
    return _align(p.lines)


class _TextPrinter:
    def __init__(self, source: bool, types: bool, names: Names):
        self.source = source
        self.types = types
        self.names = names
        self.lines: list[tuple[str, str | None]] = []   # (code, trailing comment)

    def atom(self, a) -> str:
        if isinstance(a, Lit):
            return _lit_text(a)
        return self.names.ref(a)

    def block(self, g: Graph, fname: str, pad: str, guards: Sequence = ()) -> None:
        args = ", ".join(f"{self.names.define(v)}: {v.aval!r}" for v in g.inputs)
        self.lines.append((f"{pad}def {fname}({args}):", None))
        body = pad + "    "
        prev: tuple[str, int] | None = None
        for e in g.eqns:
            operands = [self.atom(a) for a in e.inputs]    # read before the outputs exist
            kws = [f"{k}={self.param(v, k, body)}" for k, v in e.params.items()]
            outs = [self.names.define(o) for o in e.outputs]
            call = f"{e.op.name}({', '.join(operands + kws)})"
            comment_parts = []
            if not outs:
                code = body + call
            elif len(outs) == 1 and self.types:
                code = f"{body}{outs[0]}: {e.outputs[0].aval!r} = {call}"
            else:
                code = f"{body}{', '.join(outs)} = {call}"
                if self.types and len(outs) > 1:
                    comment_parts.append(", ".join(repr(o.aval) for o in e.outputs))
            src = self.source_comment(e.source, prev)
            if src:
                comment_parts.append(src)
                prev = (e.source.filename, e.source.lineno)
            self.lines.append((code, "  ".join(comment_parts) or None))
        for gd in guards:
            if gd.kind == "truth":
                want = repr(gd.expected)
            else:
                want = _lit_text(Lit(gd.expected))
            code = f"{body}guard({self.atom(gd.atom)}, {gd.kind}={want})"
            src = self.source_comment(gd.source, None) if gd.source is not None else None
            what = gd.describe()
            self.lines.append((code, f"{what}  {src}" if src else what))
        outs = [self.atom(a) for a in g.outputs]
        self.lines.append((f"{body}return ({', '.join(outs)}{',' if len(outs) == 1 else ''})",
                           None))

    def param(self, v: Any, key: str, pad: str) -> str:
        if isinstance(v, Graph):
            dname = self.names.label(key)
            self.block(v, dname, pad)
            return dname
        if isinstance(v, tuple):
            inner = [self.param(x, key, pad) for x in v]
            return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
        if isinstance(v, np.dtype):
            return f"np.{v.name}" if v.isnative else f"np.dtype({v.str!r})"
        return repr(v)

    def source_comment(self, src: SourceInfo | None, prev) -> str | None:
        if not self.source or src is None:
            return None
        loc = f"{os.path.basename(src.filename)}:{src.lineno}"
        if prev == (src.filename, src.lineno):
            return loc                  # same user line as the equation above: no repeat
        code = (src.line or linecache.getline(src.filename, src.lineno)).strip()
        code = " ".join(code.split())
        if len(code) > _CODE_TEXT_MAX:
            code = code[:_CODE_TEXT_MAX - 3] + "..."
        return f"{loc}  {code}" if code else loc


def _align(lines: list[tuple[str, str | None]]) -> str:
    widths = [len(code) for code, c in lines if c]
    col = min(max(widths, default=0), _COMMENT_COLUMN_MAX)
    out = []
    for code, comment in lines:
        out.append(f"{code.ljust(col)}   # {comment}" if comment else code)
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# DOT
# --------------------------------------------------------------------------------------------

def _dot_str(s: str) -> str:
    """A DOT double-quoted string ('\\n' in ``s`` becomes a centred line break)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short_param(v: Any) -> str:
    if isinstance(v, Graph):
        return f"<graph {len(v.inputs)} in, {len(v.eqns)} eqns, {len(v.outputs)} out>"
    if isinstance(v, tuple):
        return "(" + ", ".join(map(_short_param, v)) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, np.dtype):
        return f"np.{v.name}"
    return repr(v)


def graph_to_dot(g: Graph, name: str = "functrace") -> str:
    """Graphviz DOT text for a graph (no dependency needed).

    Inputs are ellipses (``a: f64[8,3]``), each equation is a box (``c = add`` plus its scalar
    literal operands and short params), larger literals are note-shaped nodes, edges carry the
    type of the value they move, and outputs are double-bordered ellipses.
    """
    names = Names()
    node: dict[Var, str] = {}
    out = [f"digraph {_dot_str(name)} {{",
           '  node [fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=9];']

    def edge(a, dst: str, extra: str = "") -> None:
        src = node.get(a)
        if src is None:                         # a read of an undefined var (malformed graph)
            src = f"undef{len(out)}"
            out.append(f"  {src} [shape=plaintext, label={_dot_str('?' + repr(a.aval))}];")
        label = f"{names.ref(a)}: {a.aval!r}"
        out.append(f"  {src} -> {dst} [label={_dot_str(label)}{extra}];")

    for i, v in enumerate(g.inputs):
        node[v] = f"in{i}"
        out.append(f"  in{i} [shape=ellipse, "
                   f"label={_dot_str(f'{names.define(v)}: {v.aval!r}')}];")
    for j, e in enumerate(g.eqns):
        nid = f"eqn{j}"
        label = []
        edges = []
        for k, a in enumerate(e.inputs):
            if isinstance(a, Lit) and a.is_scalar:
                label.append(f"arg{k} = {_lit_text(a)}")
            elif isinstance(a, Lit):
                cid = f"lit{j}_{k}"
                out.append(f"  {cid} [shape=note, label={_dot_str(_lit_text(a))}];")
                edges.append(f"  {cid} -> {nid} [label={_dot_str(f'arg{k}')}];")
            else:
                edges.append((a, k))
        for key, v in e.params.items():
            s = f"{key}={_short_param(v)}"
            label.append(s if len(s) <= _DOT_PARAM_MAX else s[:_DOT_PARAM_MAX - 3] + "...")
        outs = [names.define(o) for o in e.outputs]
        head = f"{', '.join(outs)} = {e.op.name}" if outs else e.op.name
        out.append(f"  {nid} [shape=box, label={_dot_str(chr(10).join([head, *label]))}];")
        multi = sum(1 for x in edges if isinstance(x, tuple)) > 1
        for x in edges:
            if isinstance(x, str):
                out.append(x)
            else:
                a, k = x
                edge(a, nid, f", headlabel={_dot_str(str(k))}" if multi else "")
        for o in e.outputs:
            node[o] = nid
    for i, a in enumerate(g.outputs):
        oid = f"out{i}"
        if isinstance(a, Lit):
            out.append(f"  {oid} [shape=ellipse, peripheries=2, "
                       f"label={_dot_str(f'out {i} = {_lit_text(a)}')}];")
            continue
        out.append(f"  {oid} [shape=ellipse, peripheries=2, label={_dot_str(f'out {i}')}];")
        edge(a, oid)
    out.append("}")
    return "\n".join(out) + "\n"


_RENDER_HINT = ("render() needs the graphviz package: pip install 'functrace[viz]' (and the "
                "Graphviz binaries); to_dot() returns the DOT text without it")


def render(g: Graph, path: str | os.PathLike, format: str | None = None) -> str:
    """Draw a graph to ``path`` with the ``graphviz`` package (format from the extension,
    e.g. ``.svg``/``.png``/``.pdf``; PDF when there is none). Returns the path written."""
    try:
        import graphviz
    except ImportError:
        raise ImportError(_RENDER_HINT) from None
    path = os.fspath(path)
    fmt = format or os.path.splitext(path)[1].lstrip(".").lower() or "pdf"
    data = graphviz.Source(graph_to_dot(g)).pipe(format=fmt)
    with open(path, "wb") as f:
        f.write(data)
    return path


# str(graph) is its listing. Graph lives in core, below this module, so the method is installed
# from here (the package root imports printing, so every Graph prints this way).
Graph.__str__ = graph_to_text
