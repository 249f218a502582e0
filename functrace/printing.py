"""Graph -> text (runnable-looking Python), Graph <-> JSON (lossless), Graph -> Graphviz DOT.

Owns how a ``Graph`` looks to people and how it is stored: ``graph_to_text`` (what
``str(graph)`` shows), ``graph_to_json`` / ``graph_from_json`` and ``graph_to_dot`` / ``render``.
Imports only ``core``, ``errors``, numpy and the standard library; the op registry is filled by
importing ``functrace.ops``, which ``graph_from_json`` does lazily when it needs to resolve op
names (printing sits below the ops in the layer order and must not import them at load time).

Invariants:
* Variable names are made at print time, in order of definition (``a, b, ..., z, ba, bb, ...``
  as in JAX), so equal graphs print equal text and golden tests are stable. Nothing here reads
  a Var's identity beyond "which definition is this".
* ``graph_from_json(graph_to_json(g)) == g`` for every graph whose params are built from None,
  bool, int, float, complex, str, tuple, numpy dtypes, numpy scalars, Ellipsis, slices and
  Graphs; literals keep their exact bytes (``-0.0`` and NaN payloads survive). A float NaN *param*
  keeps its bits, but Python's ``nan != nan`` means such a graph compares equal to its copy only
  when Params canonicalises NaN (core's business, not this file's).
* Decoding never trusts its input: every error is a ``GraphFormatError`` (a ``ValueError``)
  naming the path inside the document (``graph.eqns[3].inputs[1]``) and what is wrong, and
  the rebuilt graph is re-type-checked with ``core.verify``. Nothing a document names is
  imported, evaluated or unpickled: ops are looked up by name in the op registry, dtypes
  must be bool/integer/float/complex, literals are base64 bytes whose length must agree
  with their shape (so no literal is larger than its document), nesting is bounded
  (``MAX_NESTING``), and a decoded source line is shown as stored, never read from disk.
"""

from __future__ import annotations

import base64
import json
import keyword
import linecache
import math
import os
import re
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from .core import (
    AVal,
    Eqn,
    Graph,
    Lit,
    SourceInfo,
    Var,
    dtype_from_short,
    dtype_short,
    get_op,
    verify,
)
from .errors import FunctraceError, GraphFormatError

__all__ = [
    "FORMAT_VERSION",
    "GraphFormatError",
    "graph_from_json",
    "graph_to_dot",
    "graph_to_json",
    "graph_to_text",
    "render",
]

FORMAT_VERSION = 1

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


_RESERVED = ("f", "np", "const")   # the default function name and words the text uses


class _Names:
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


def _dtype_name(dt: np.dtype) -> str:
    """'f64' style; non-native byte orders keep numpy's exact spelling ('>f8')."""
    dt = np.dtype(dt)
    return dtype_short(dt) if dt.isnative else dt.str


def _type_str(aval: AVal) -> str:
    return f"{_dtype_name(aval.dtype)}[{','.join(map(str, aval.shape))}]"


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
        return f"{s}:{_dtype_name(lit.val.dtype)}"
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
    p = _TextPrinter(source, types, _Names(reserved=(name, *_RESERVED)))
    p.block(g, name, "", guards)
    return _align(p.lines)


class _TextPrinter:
    def __init__(self, source: bool, types: bool, names: _Names):
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
# JSON
# --------------------------------------------------------------------------------------------
#
# Layout (version 1):
#   {"functrace_graph": 1, "inputs": [["a", "f64[8,3]"], ...],
#    "eqns": [{"op": "add", "inputs": ["c", {"lit": {...}}], "params": {...},
#              "outputs": [["d", "f64[8,4]"]], "source": {"file":, "line":, "function":}}],
#    "outputs": ["d"]}
# An atom is a variable name (string) or {"lit": array}; an array is {"dtype": "f64",
# "shape": [..], "data": base64 of the little-endian C-order bytes}. A param is a JSON
# null/bool/int/string/finite float, a list (a tuple: params are hashable, so they never hold
# lists), or an object with exactly one tag key: float (non-finite), complex, dtype, scalar
# (numpy scalar), slice, ellipsis, graph. Nested graphs have their own name scope (a Graph is
# closed). The writer names variables exactly as str(g) does, so the two can be read together.

def _enc_array(arr: np.ndarray) -> dict:
    dt = arr.dtype
    le = dt.newbyteorder("<") if dt.isnative and dt.byteorder != "|" else dt
    data = np.ascontiguousarray(arr.astype(le, copy=False)).tobytes()
    return {"dtype": _dtype_name(dt), "shape": list(arr.shape),
            "data": base64.b64encode(data).decode("ascii")}


_CANON_NAN_BITS = struct.pack(">d", math.nan).hex()


def _enc_float(x: float) -> Any:
    if math.isfinite(x):
        return float(x)
    if math.isnan(x):
        bits = struct.pack(">d", x).hex()
        return {"float": "nan" if bits == _CANON_NAN_BITS else f"nan:{bits}"}
    return {"float": "inf" if x > 0 else "-inf"}


def _enc_param(v: Any, where: str, names: _Names) -> Any:
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, np.generic):           # before int/float: np.float64 is a float
        return {"scalar": _enc_array(np.asarray(v))}
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return _enc_float(v)
    if isinstance(v, complex):
        return {"complex": [_enc_float(v.real), _enc_float(v.imag)]}
    if isinstance(v, tuple):                 # params are hashable: a JSON list is a tuple
        return [_enc_param(x, f"{where}[{i}]", names) for i, x in enumerate(v)]
    if isinstance(v, np.dtype):
        return {"dtype": _dtype_name(v)}
    if isinstance(v, Graph):
        return {"graph": _enc_graph(v, names)}
    if v is Ellipsis:
        return {"ellipsis": None}
    if isinstance(v, slice):
        return {"slice": [_enc_param(x, where, names) for x in (v.start, v.stop, v.step)]}
    raise TypeError(f"{where}: cannot store a param of type {type(v).__name__} ({v!r:.60}) "
                    "in graph JSON; params must be None, bool, int, float, complex, str, "
                    "tuple, numpy dtype/scalar, slice or Graph")


def _enc_graph(g: Graph, names: _Names) -> dict:
    def define(v: Var) -> list:
        return [names.define(v), _type_str(v.aval)]

    def atom(a, where: str) -> Any:
        if isinstance(a, Lit):
            return {"lit": _enc_array(a.val)}
        if a in names.of:
            return names.of[a]
        raise GraphFormatError(f"{where}: reads {a!r}, which the graph never defines "
                               "(malformed graph; core.verify names the problem)")

    inputs = [define(v) for v in g.inputs]
    eqns = []
    for i, e in enumerate(g.eqns):
        where = f"eqns[{i}] ({e.op.name})"
        row = {"op": e.op.name,
               "inputs": [atom(a, where) for a in e.inputs],
               "params": {k: _enc_param(v, f"{where}.params.{k}", names)
                          for k, v in e.params.items()},
               "outputs": [define(o) for o in e.outputs]}
        if e.source is not None:
            row["source"] = encode_source(e.source)
        if e.op.module and not e.op.module.startswith("functrace"):
            row["module"] = e.op.module   # an extension op: the module to import (never imported)
        eqns.append(row)
    return {"inputs": inputs, "eqns": eqns,
            "outputs": [atom(a, f"outputs[{i}]") for i, a in enumerate(g.outputs)]}


def graph_to_json(g: Graph) -> str:
    """Serialise a graph to JSON text (one equation per line), losslessly.

    Ops are stored by name, literals as dtype + shape + base64 bytes, params with type tags
    so that tuples, dtypes, non-finite floats and sub-graphs come back as they were. The
    source line of each equation is kept. ``graph_from_json`` reverses it.
    """
    d = _enc_graph(g, _Names(reserved=_RESERVED))   # the same names as str(g) shows

    def dumps(x):
        return json.dumps(x, allow_nan=False)

    eqns = ",\n  ".join(dumps(e) for e in d["eqns"])
    return (f'{{"functrace_graph": {FORMAT_VERSION},\n'
            f' "inputs": {dumps(d["inputs"])},\n'
            f' "eqns": [' + (f"\n  {eqns}\n ]" if eqns else "]") + ",\n"
            f' "outputs": {dumps(d["outputs"])}}}\n')


# A document nests no deeper than this: param tuples inside params, and graphs held in params
# of graphs, each count one level. Real graphs nest a handful of levels; the bound keeps every
# recursive walk over a decoded graph (decoding, verify, hashing, printing) far from Python's
# recursion limit.
MAX_NESTING = 64

# Sizes a document may state: numpy's limits (dimensions, bytes of one array).
_MAX_NDIM = 64
_MAX_BYTES = np.iinfo(np.intp).max
_MAX_TYPE_TEXT = 512
# Control characters other than tab and newline are refused in stored source text, which is
# printed as is (a terminal escape sequence in a file name would otherwise reach the screen).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _fail(where: str, msg: str):
    raise GraphFormatError(f"bad graph JSON at {where}: {msg}")


def parse_json_document(text: str | bytes, what: str = "graph JSON") -> Any:
    """``json.loads`` for documents from outside: any failure is a GraphFormatError.

    Deep nesting makes ``json.loads`` raise RecursionError; that is reported as a document
    nested too deeply. Other argument types than text are refused the same way."""
    if not isinstance(text, str | bytes | bytearray):
        raise GraphFormatError(f"{what} must be text, got {type(text).__name__}")
    try:
        return json.loads(text)
    except RecursionError:
        raise GraphFormatError(f"{what} is nested too deeply to be a functrace "
                               "document") from None
    except ValueError as exc:           # JSONDecodeError, UnicodeDecodeError, int digit limit
        raise GraphFormatError(f"{what} is not valid JSON: {str(exc)[:200]}") from None


def _get(d: dict, key: str, kind, where: str):
    if not isinstance(d, dict):
        _fail(where, f"expected an object, got {type(d).__name__}")
    if key not in d:
        _fail(where, f"missing field {key!r}")
    v = d[key]
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        _fail(f"{where}.{key}", f"expected {getattr(kind, '__name__', kind)}, "
                                f"got {type(v).__name__} {_short(v)}")
    return v


def _short(v: Any, n: int = 40) -> str:
    """``repr(v)`` cut to about ``n`` characters (a hostile value may be huge or deep)."""
    if isinstance(v, list | dict):
        return f"<{type(v).__name__} of {len(v)}>"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10 ** 30:
        return "<a huge integer>"
    return f"{v!r:.{n}}"


# What a stored dtype may be spelled as: functrace's short names ('f64'), numpy's names of
# the numeric types ('float64', 'bool') and explicit byte orders ('>i4', '|b1'). Anything
# else (object 'O', strings, structured, subarray, datetime) is refused before numpy parses it.
_DTYPE_RE = re.compile(r"(?:[<>|=]?[biufc][0-9]{1,3}|(?:bool|u?int|float|complex)[0-9]{0,3})")


def _dec_dtype(s: Any, where: str) -> np.dtype:
    """A bool/integer/float/complex dtype, for literals, types and params alike (no op takes
    any other dtype)."""
    if not isinstance(s, str):
        _fail(where, f"dtype must be a string, got {_short(s)}")
    if not _DTYPE_RE.fullmatch(s):
        _fail(where, f"unknown dtype {_short(s)}: not a bool, integer, float or complex type")
    try:
        dt = dtype_from_short(s)
    except (TypeError, ValueError):
        _fail(where, f"unknown dtype {s!r}")
    if dt.kind not in "biufc":
        _fail(where, f"dtype {s!r} is not a bool, integer, float or complex type")
    return dt


def _check_shape(shape: tuple[int, ...], dt: np.dtype, where: str) -> None:
    """A shape numpy can hold: at most 64 dimensions, at most intp-max bytes in all."""
    if len(shape) > _MAX_NDIM:
        _fail(where, f"{len(shape)} dimensions (numpy holds at most {_MAX_NDIM})")
    nbytes = max(dt.itemsize, 1)
    for n in shape:
        nbytes *= max(n, 1)
        if nbytes > _MAX_BYTES:
            _fail(where, "the shape is larger than any array numpy can hold")


_TYPE_RE = re.compile(r"^([A-Za-z0-9<>|=]+)\[([0-9,\s]*)\]$")


def _dec_type(s: Any, where: str) -> AVal:
    m = _TYPE_RE.match(s) if isinstance(s, str) and len(s) <= _MAX_TYPE_TEXT else None
    if m is None:
        _fail(where, f"expected a type like 'f64[8,3]', got {_short(s)}")
    dt = _dec_dtype(m.group(1), where)
    dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
    if any(len(d) > 20 for d in dims):
        _fail(where, "the shape is larger than any array numpy can hold")
    shape = tuple(int(d) for d in dims)
    _check_shape(shape, dt, where)
    return AVal(shape, dt)


def _dec_array(d: Any, where: str) -> np.ndarray:
    dt = _dec_dtype(_get(d, "dtype", str, where), f"{where}.dtype")
    shape = _get(d, "shape", list, where)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        _fail(f"{where}.shape", f"expected non-negative integers, got {_short(shape, 60)}")
    _check_shape(tuple(shape), dt, f"{where}.shape")
    try:
        raw = base64.b64decode(_get(d, "data", str, where), validate=True)
    except ValueError:
        _fail(f"{where}.data", "not valid base64")
    le = dt.newbyteorder("<") if dt.isnative and dt.byteorder != "|" else dt
    want = math.prod(shape) * dt.itemsize       # exact: no int64 wrap-around
    if len(raw) != want:
        _fail(f"{where}.data", f"{len(raw)} bytes for {dtype_short(dt)}{shape} "
                               f"(needs {want})")
    return np.frombuffer(raw, dtype=le).astype(dt).reshape(shape)


def _dec_float(x: Any, where: str) -> float:
    if isinstance(x, float | int) and not isinstance(x, bool):
        try:
            return float(x)
        except OverflowError:
            _fail(where, "an integer too large for a float")
    if isinstance(x, dict) and set(x) == {"float"}:
        x = x["float"]
    if x == "inf":
        return math.inf
    if x == "-inf":
        return -math.inf
    if x == "nan":
        return math.nan
    if isinstance(x, str) and re.fullmatch(r"nan:[0-9a-f]{16}", x):
        return struct.unpack(">d", bytes.fromhex(x[4:]))[0]
    _fail(where, f"expected a float, 'inf', '-inf' or 'nan', got {_short(x)}")


def _dec_param(x: Any, where: str, depth: int = 0) -> Any:
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if depth >= MAX_NESTING:
        _fail(where, f"params nested more than {MAX_NESTING} levels deep")
    if isinstance(x, list):
        return tuple(_dec_param(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(x))
    if not isinstance(x, dict) or len(x) != 1:
        _fail(where, f"expected a value or an object with one tag key, got {_short(x, 60)}")
    (tag, body), = x.items()
    if tag == "float":
        return _dec_float(body, where)
    if tag == "complex":
        if not (isinstance(body, list) and len(body) == 2):
            _fail(where, "complex body must be [real, imag]")
        return complex(_dec_float(body[0], where), _dec_float(body[1], where))
    if tag == "dtype":
        return _dec_dtype(body, where)
    if tag == "scalar":
        arr = _dec_array(body, where)
        if arr.ndim != 0:
            _fail(where, "a numpy scalar must have shape []")
        return arr[()]
    if tag == "graph":
        return _dec_graph(body, f"{where}.graph", depth + 1)
    if tag == "ellipsis":
        return Ellipsis
    if tag == "slice":
        if not (isinstance(body, list) and len(body) == 3):
            _fail(where, "slice body must be [start, stop, step]")
        return slice(*(_dec_param(v, where, depth + 1) for v in body))
    _fail(where, f"unknown param tag {_short(tag)}")


# The code text of a decoded equation whose document stores none: a blank that is not empty,
# so the printer shows the location only and never reads the named file (a document may name
# any file on this machine; only a live trace's own source lines are read from disk).
_NO_CODE = " "


def _dec_source(d: Any, where: str) -> SourceInfo:
    filename, lineno = _get(d, "file", str, where), _get(d, "line", int, where)
    if not 0 <= lineno < 2 ** 31:
        _fail(f"{where}.line", f"expected a line number, got {_short(lineno)}")
    extra = []
    for key in ("function", "code", "rule"):
        v = d.get(key, "")
        if not isinstance(v, str):
            _fail(f"{where}.{key}", f"expected a string, got {_short(v)}")
        extra.append(v)
    for key, v in (("file", filename), ("function", extra[0]), ("code", extra[1])):
        if _CONTROL_RE.search(v):
            _fail(f"{where}.{key}", "control characters in source text")
    if not extra[1].strip():
        extra[1] = _NO_CODE
    return SourceInfo(filename, lineno, *extra)


def encode_source(s: SourceInfo) -> dict:
    """The JSON form of a source location (``decode_source`` reverses it)."""
    d = {"file": s.filename, "line": s.lineno, "function": s.function}
    # The code text goes into the document, so a reader never needs (nor reads) the file:
    # "" is a live trace's line, read here where it was traced; a decoded equation carries
    # its stored text (or a blank when it had none).
    code = " ".join((s.line or linecache.getline(s.filename, s.lineno)).split())
    if code:
        d["code"] = code
    if s.rule:
        d["rule"] = s.rule
    return d


def decode_source(d: Any, where: str = "source") -> SourceInfo:
    """A source location from its JSON form; ValueError naming ``where`` if malformed."""
    if not isinstance(d, dict):
        _fail(where, f"expected an object, got {type(d).__name__}")
    return _dec_source(d, where)


def encode_array(arr: np.ndarray) -> dict:
    """The JSON form of a numpy array (dtype, shape, little-endian base64 bytes)."""
    return _enc_array(np.asarray(arr))


def decode_array(d: Any, where: str = "array") -> np.ndarray:
    """An array from ``encode_array``'s form; ValueError naming ``where`` if malformed."""
    if not isinstance(d, dict):
        _fail(where, f"expected an object, got {type(d).__name__}")
    return _dec_array(d, where)


def _dec_graph(d: Any, where: str, depth: int = 0) -> Graph:
    env: dict[str, Var] = {}
    if depth >= MAX_NESTING:
        _fail(where, f"graphs nested more than {MAX_NESTING} levels deep")

    def define(pair: Any, w: str) -> Var:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            _fail(w, f"expected [name, type], got {_short(pair, 60)}")
        name, ty = pair
        if name in env:
            _fail(w, f"variable {name!r} is defined twice")
        v = env[name] = Var(_dec_type(ty, w))
        return v

    def atom(a: Any, w: str):
        if isinstance(a, str):
            if a not in env:
                _fail(w, f"variable {a!r} is used before it is defined")
            return env[a]
        if isinstance(a, dict) and set(a) == {"lit"}:
            return Lit(_dec_array(a["lit"], f"{w}.lit"))
        _fail(w, f"expected a variable name or {{\"lit\": ...}}, got {_short(a, 60)}")

    inputs = [define(p, f"{where}.inputs[{i}]")
              for i, p in enumerate(_get(d, "inputs", list, where))]
    eqns = []
    for i, e in enumerate(_get(d, "eqns", list, where)):
        w = f"{where}.eqns[{i}]"
        name = _get(e, "op", str, w)
        try:
            op = get_op(name)
        except FunctraceError:
            mod = e.get("module")
            _fail(f"{w}.op", f"unknown op {name!r} (not in functrace's op registry)" + (
                f"; it is defined by module {mod!r}: import it before loading (a document "
                "never imports code)" if isinstance(mod, str) else ""))
        w = f"{w} ({name})"
        args = [atom(a, f"{w}.inputs[{j}]") for j, a in enumerate(_get(e, "inputs", list, w))]
        raw_params = e.get("params", {})
        if not isinstance(raw_params, dict):
            _fail(f"{w}.params", "expected an object")
        params = {k: _dec_param(v, f"{w}.params.{k}", depth) for k, v in raw_params.items()}
        src = _dec_source(e["source"], f"{w}.source") if e.get("source") is not None else None
        outs = [define(p, f"{w}.outputs[{j}]")
                for j, p in enumerate(_get(e, "outputs", list, w))]
        eqns.append(Eqn(op, args, params, outs, src))
    outputs = [atom(a, f"{where}.outputs[{i}]")
               for i, a in enumerate(_get(d, "outputs", list, where))]
    g = Graph(inputs, eqns, outputs)
    try:
        verify(g)
    except FunctraceError as exc:
        raise GraphFormatError(f"bad graph JSON at {where}: the graph does not type-check: "
                               f"{exc}") from exc
    return g


def graph_from_json(text: str | bytes) -> Graph:
    """Rebuild a graph from ``graph_to_json`` text; raise GraphFormatError if it is not valid.

    Op names are resolved in the op registry (``functrace.ops`` is imported here), and the
    result is re-checked with ``core.verify``, so a document whose types disagree with the
    ops' type rules is rejected rather than returned. Nothing the document names is imported
    or evaluated, and no malformed document raises anything but GraphFormatError.
    """
    return graph_from_document(parse_json_document(text), "graph")


def graph_from_document(doc: Any, where: str = "graph") -> Graph:
    """``graph_from_json`` on an already parsed document (a dict), e.g. the ``graph`` field
    of a Symbol document; ``where`` names it in error messages."""
    try:
        return _graph_from_document(doc, where)
    except RecursionError:
        # MAX_NESTING keeps the walks shallow; this is the backstop for a caller that is
        # itself deep in its stack
        raise GraphFormatError(f"bad graph JSON at {where}: nested too deeply") from None


def _graph_from_document(doc: Any, where: str) -> Graph:
    if not isinstance(doc, dict):
        raise GraphFormatError(f"graph JSON must be an object, got {type(doc).__name__}")
    if "functrace_graph" not in doc:
        raise GraphFormatError("graph JSON lacks the 'functrace_graph' version field: "
                               "is this a document written by graph_to_json?")
    version = doc["functrace_graph"]
    if type(version) is not int or version != FORMAT_VERSION:
        raise GraphFormatError(f"graph JSON has format version {_short(version)}; this functrace "
                               f"reads version {FORMAT_VERSION}")
    from . import ops  # noqa: F401  (declares every op; lazy: ops sit above printing)
    return _dec_graph(doc, where)


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
    names = _Names()
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
