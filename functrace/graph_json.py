"""Graph <-> JSON: lossless, versioned, and safe to read from untrusted text.

Owns ``graph_to_json`` / ``graph_from_json`` (and ``graph_from_document`` for a graph inside a
larger document, such as a Symbol's), and the codecs for the pieces other documents reuse:
arrays (``encode_array`` / ``decode_array``) and source lines (``encode_source`` /
``decode_source``). Imports core, errors and printing (the writer names variables exactly as
``str(g)`` does, so a document and a listing can be read together); never ops: op names resolve
in the registry that the package root fills.

Invariants:
* ``graph_from_json(graph_to_json(g)) == g`` for every graph whose params are built from None,
  bool, int, float, complex, str, tuple, numpy dtypes, numpy scalars, Ellipsis, slices,
  Graphs and the types registered with ``register_param_codec`` (custom rules, by name);
  literals keep their exact bytes (``-0.0`` and NaN payloads survive). A float NaN *param*
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
import linecache
import math
import re
import struct
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
from .printing import RESERVED_NAMES, Names, dtype_name, type_str

__all__ = ["FORMAT_VERSION", "MAX_NESTING", "GraphFormatError", "graph_to_json",
           "graph_from_json", "graph_from_document", "parse_json_document", "encode_array",
           "decode_array", "encode_source", "decode_source", "register_param_codec"]

FORMAT_VERSION = 1

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
    return {"dtype": dtype_name(dt), "shape": list(arr.shape),
            "data": base64.b64encode(data).decode("ascii")}


_CANON_NAN_BITS = struct.pack(">d", math.nan).hex()


def _enc_float(x: float) -> Any:
    if math.isfinite(x):
        return float(x)
    if math.isnan(x):
        bits = struct.pack(">d", x).hex()
        return {"float": "nan" if bits == _CANON_NAN_BITS else f"nan:{bits}"}
    return {"float": "inf" if x > 0 else "-inf"}


def _enc_param(v: Any, where: str, names: Names) -> Any:
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
        return {"dtype": dtype_name(v)}
    if isinstance(v, Graph):
        return {"graph": _enc_graph(v, names)}
    if v is Ellipsis:
        return {"ellipsis": None}
    if isinstance(v, slice):
        return {"slice": [_enc_param(x, where, names) for x in (v.start, v.stop, v.step)]}
    codec = _PARAM_ENCODERS.get(type(v))
    if codec is not None:
        tag, encode = codec
        return {tag: encode(v, where, lambda x, w: _enc_param(x, w, names))}
    raise TypeError(f"{where}: cannot store a param of type {type(v).__name__} ({v!r:.60}) "
                    "in graph JSON; params must be None, bool, int, float, complex, str, "
                    "tuple, numpy dtype/scalar, slice or Graph")


# Param types defined above this layer (the custom rules of custom_vjp/custom_jvp calls) say
# how they are stored: type -> (tag, encode(value, where, enc_param) -> JSON), and
# tag -> decode(body, where, dec_param) -> value. A decoder builds its value from data alone:
# it may look names up in registries the process filled, never import or evaluate anything,
# and raises GraphFormatError for anything malformed.
_PARAM_ENCODERS: dict = {}
_PARAM_DECODERS: dict = {}


def register_param_codec(cls: type, tag: str, encode, decode) -> None:
    """Teach graph JSON to store params of type ``cls`` under ``{tag: body}`` (see above)."""
    _PARAM_ENCODERS[cls] = (tag, encode)
    _PARAM_DECODERS[tag] = decode


def _enc_graph(g: Graph, names: Names) -> dict:
    def define(v: Var) -> list:
        return [names.define(v), type_str(v.aval)]

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
    d = _enc_graph(g, Names(reserved=RESERVED_NAMES))   # the same names as str(g) shows

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
    decode = _PARAM_DECODERS.get(tag) if isinstance(tag, str) else None
    if decode is not None:
        return decode(body, f"{where}.{tag}", lambda x, w: _dec_param(x, w, depth + 1))
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

    Op names are resolved in the op registry (every declared op), and the
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
    # op names resolve in the registry, which the package root fills (it imports functrace.ops
    # before any module of it can be used), so nothing is imported here
    return _dec_graph(doc, where)


