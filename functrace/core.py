"""The IR: abstract values, variables, literals, equations, graphs, and the op declaration.

This file owns the data types every other layer speaks: ``AVal`` (shape + dtype), ``Var``,
``Lit``, ``Eqn``, ``Graph`` and ``Op`` (one registry entry), plus ``verify``. It imports
nothing from functrace except ``errors``.

Invariants:
* Every type is immutable. ``Var`` has identity semantics (two Vars are the same variable
  only if they are the same object); ``Graph`` equality and hash are *structural*: two graphs
  that differ only in which Var objects they use compare and hash equal, so a Graph can be a
  cache key and CSE is a dict lookup.
* A Graph is in single-assignment form and topologically ordered by construction: every
  equation reads only graph inputs, literals, or outputs of earlier equations.
* Params are hashable (ints, floats, strings, tuples, numpy dtypes, Graphs).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .errors import FunctraceError, FunctraceTypeError, ShapeError

__all__ = [
    "AVal", "Var", "Lit", "Eqn", "Graph", "Op", "ScalarCode", "Params", "SourceInfo", "verify",
    "to_dtype", "registry", "get_op", "on_device", "to_host",
]


def to_dtype(dt: Any) -> np.dtype:
    """Normalise anything numpy accepts as a dtype, rejecting object/string dtypes."""
    d = np.dtype(dt)
    if d.kind not in "biufc":
        raise FunctraceTypeError(
            f"functrace arrays hold bool, integer, float or complex data; got dtype {d}. "
            "Convert with np.asarray(x, dtype=float) first.")
    return d


class AVal:
    """Abstract value: the shape and dtype of an array, without its data.

    >>> AVal((2, 3), "float32")
    f32[2,3]
    """

    __slots__ = ("shape", "dtype", "_hash")

    def __init__(self, shape, dtype):
        if type(shape) is not tuple or not all(type(d) is int for d in shape):
            shape = tuple(int(d) for d in shape)
        for d in shape:
            if d < 0:
                raise ShapeError(f"negative dimension in shape {shape}")
        if not isinstance(dtype, np.dtype) or dtype.kind not in "biufc":
            dtype = to_dtype(dtype)
        _set = object.__setattr__
        _set(self, "shape", shape)
        _set(self, "dtype", dtype)
        _set(self, "_hash", hash((shape, dtype.str)))

    def __setattr__(self, k, v):
        raise AttributeError("AVal is immutable")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __eq__(self, other):
        return (isinstance(other, AVal) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"{dtype_short(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __reduce__(self):
        return (AVal, (self.shape, self.dtype))

    @staticmethod
    def of(x) -> AVal:
        """The AVal of a concrete array (host or device) or Python scalar (numpy's dtype
        rules)."""
        if isinstance(x, np.ndarray):
            return AVal(x.shape, x.dtype)
        if on_device(x):
            return AVal(tuple(x.shape), np.dtype(x.dtype))
        return AVal(np.shape(x), np.asarray(x).dtype)


_device_types: dict[type, bool] = {np.ndarray: False, float: False, int: False, bool: False}


def on_device(x) -> bool:
    """Whether ``x`` is an array in GPU memory (cupy, ...): anything whose type exposes
    ``__cuda_array_interface__`` and is not a numpy array. Such arrays refuse implicit
    conversion to numpy; code that needs their values on the host calls ``to_host``.
    Decided once per type: asking an instance would build its interface dict every time
    (cupy's is a property)."""
    t = type(x)
    r = _device_types.get(t)
    if r is None:
        r = _device_types[t] = (not issubclass(t, np.ndarray)
                                and hasattr(t, "__cuda_array_interface__"))
    return r


def to_host(x) -> np.ndarray:
    """A numpy copy of a device array (cupy's ``get``, numba's ``copy_to_host``); host values
    go through ``np.asarray``. Synchronises with the device."""
    if on_device(x):
        if hasattr(x, "get"):
            return x.get()
        if hasattr(x, "copy_to_host"):
            return x.copy_to_host()
    return np.asarray(x)


_SHORT = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
          "uint64": "u64", "bool": "bool", "complex64": "c64", "complex128": "c128"}
_LONG = {v: k for k, v in _SHORT.items()}


def dtype_short(dt: np.dtype) -> str:
    return _SHORT.get(np.dtype(dt).name, np.dtype(dt).name)


def dtype_from_short(s: str) -> np.dtype:
    return np.dtype(_LONG.get(s, s))


_var_ids = itertools.count()


class Var:
    """A graph variable: an SSA name with an abstract value. Identity semantics."""

    __slots__ = ("aval", "_id")

    def __init__(self, aval: AVal):
        self.aval = aval
        self._id = next(_var_ids)

    def __repr__(self):
        return f"Var#{self._id}:{self.aval!r}"


class Lit:
    """A literal constant: an immutable numpy array (0-d for scalars) with value semantics.

    Two literals are equal when their dtype, shape and bytes are equal (so ``-0.0`` and
    ``0.0`` differ, and NaN equals NaN), which keeps CSE and graph equality exact.
    """

    __slots__ = ("val", "aval", "_hash")

    def __init__(self, val):
        arr = np.array(val, copy=True)      # a plain ndarray, even from a subclass
        to_dtype(arr.dtype)
        arr.flags.writeable = False
        self.val = arr
        self.aval = AVal(arr.shape, arr.dtype)
        self._hash = None

    def _key(self):
        return (self.aval, self.val.tobytes())

    def __eq__(self, other):
        return (isinstance(other, Lit) and self.aval == other.aval
                and (self.val is other.val or self.val.tobytes() == other.val.tobytes()))

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def __repr__(self):
        return f"Lit({self.val!r})"

    @property
    def is_scalar(self) -> bool:
        return self.val.ndim == 0


Atom = Var | Lit


class Params(Mapping):
    """An immutable, hashable mapping of equation parameters (sorted by key)."""

    __slots__ = ("_items", "_d", "_hash")

    def __init__(self, d: Mapping | None = None):
        items = tuple(sorted((d or {}).items()))
        self._items = items
        self._d = dict(items)
        self._hash = None

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self):
        return len(self._items)

    def __eq__(self, other):
        if isinstance(other, Params):
            return self._items == other._items
        return isinstance(other, Mapping) and self._d == dict(other)

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self._items)
        return self._hash

    def __repr__(self):
        return "Params(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"

    def replace(self, **kw) -> Params:
        d = dict(self._d)
        d.update(kw)
        return Params(d)


@dataclasses.dataclass(frozen=True, slots=True)
class SourceInfo:
    """Where in user code an equation was recorded (never part of equality)."""

    filename: str
    lineno: int
    function: str = ""
    line: str = ""
    rule: str = ""     # set on equations a gradient rule emitted: the op whose rule it was

    def __str__(self):
        return f"{self.filename}:{self.lineno}"

    def in_rule(self, op_name: str) -> SourceInfo:
        """The same place, marked as emitted by ``op_name``'s derivative rule."""
        if self.rule == op_name:
            return self
        return SourceInfo(self.filename, self.lineno, self.function, self.line, op_name)


class Eqn:
    """One equation: ``outputs = op(*inputs, **params)``.

    Equality is structural on (op, inputs, params, output avals); ``source`` is metadata.
    """

    __slots__ = ("op", "inputs", "params", "outputs", "source")

    def __init__(self, op: Op, inputs, params, outputs, source: SourceInfo | None = None):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "inputs", tuple(inputs))
        object.__setattr__(self, "params", params if isinstance(params, Params)
                           else Params(params))
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "source", source)

    def __setattr__(self, k, v):
        raise AttributeError("Eqn is immutable")

    def __repr__(self):
        return f"Eqn({self.op.name}, {self.inputs}, {self.params}, {self.outputs})"


class Graph:
    """A closed, typed, single-assignment graph: ``outputs = f(*inputs)``.

    Attributes:
        inputs: the input Vars, in order.
        eqns: the equations, topologically ordered.
        outputs: the output atoms (Vars or Lits), in order.

    Equality and hashing are structural (alpha-equivalent graphs are equal).
    """

    __slots__ = ("inputs", "eqns", "outputs", "_key", "_hash", "__weakref__")

    def __init__(self, inputs, eqns, outputs):
        object.__setattr__(self, "inputs", tuple(inputs))
        object.__setattr__(self, "eqns", tuple(eqns))
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "_key", None)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, k, v):
        raise AttributeError("Graph is immutable")

    @property
    def in_avals(self) -> tuple[AVal, ...]:
        return tuple(v.aval for v in self.inputs)

    @property
    def out_avals(self) -> tuple[AVal, ...]:
        return tuple(a.aval for a in self.outputs)

    def canonical_key(self) -> tuple:
        """A hashable structural key: variables renamed by first definition order."""
        if self._key is None:
            names: dict[Var, int] = {}

            def name(a):
                if isinstance(a, Var):
                    return names.get(a, ("free", a.aval))
                return a

            for v in self.inputs:
                names[v] = len(names)
            ins = tuple(v.aval for v in self.inputs)
            eqs = []
            for e in self.eqns:
                row = (e.op.name, tuple(name(a) for a in e.inputs), e.params,
                       tuple(o.aval for o in e.outputs))
                for o in e.outputs:
                    names[o] = len(names)
                eqs.append(row)
            outs = tuple(name(a) for a in self.outputs)
            object.__setattr__(self, "_key", (ins, tuple(eqs), outs))
        return self._key

    def __eq__(self, other):
        if self is other:
            return True
        return isinstance(other, Graph) and hash(self) == hash(other) and \
            self.canonical_key() == other.canonical_key()

    def __hash__(self):
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(self.canonical_key()))
        return self._hash

    def __repr__(self):
        return f"<Graph {len(self.inputs)} inputs, {len(self.eqns)} eqns, " \
               f"{len(self.outputs)} outputs>"

    # str(graph), the printed listing, is installed by printing.py (a layer above core)


# --------------------------------------------------------------------------------------------
# The op declaration
# --------------------------------------------------------------------------------------------

registry: dict[str, Op] = {}


@dataclasses.dataclass(frozen=True)
class ScalarCode:
    """How one target computes an elementwise op inside a generated kernel.

    Attributes:
        expr: a template over the operands ``{0}, {1}, ...`` and the params, or a callable
            ``(args, params, in_dtypes, out_dtype) -> str``; None: the op's ``scalar``.
        kinds: the operand dtype kinds (numpy letters) for which the code computes numpy's
            result exactly; operands of other kinds leave the equation unfused there.
        alone: an equation of this op deserves a kernel even when nothing fuses with it
            (a vectorised polynomial beats numpy's loop).
    """

    expr: str | Callable[..., str] | None = None
    kinds: str = "biuf"
    alone: bool = False


@dataclasses.dataclass(eq=False)
class Op:
    """Everything about one primitive, in one declaration.

    Rules are attached once, by the declaration or by the layer that owns them (autodiff and
    batching attach rules to the sub-graph ops declared below them), as plain attributes:
    ``op.vjp = rule``. Passes and backends read every other fact from the fields below; no
    table elsewhere names ops.

    Attributes:
        name: unique primitive name; the Python object is conventionally ``<name>_p``.
        abstract_eval: ``(*avals, **params) -> AVal | tuple[AVal, ...]``; raises ShapeError
            or TypeError with a message naming the problem.
        impl: the numpy implementation ``(*arrays, **params) -> array | tuple``; the living
            definition every backend is tested against.
        multiple_results: whether the op returns a tuple.
        vjp: reverse rule ``(cts, inputs, outputs, **params) -> tuple[ct | None, ...]``
            written with op-level functions (so it is differentiable itself). ``cts`` is a
            tuple with one cotangent per output (None where the cotangent is zero).
        jvp: forward rule ``(primals, tangents, outputs, **params) -> tangents_out`` (tangent
            None means symbolic zero).
        vjp_forward: ``(operands, **params) -> (results, saved)``, optional: the results
            computed together with what ``vjp`` will read (a loop's residual stacks). An
            eager tape calls it instead of ``impl`` for an op it tapes at top level, with
            ``tracing.cotangent_wanted`` answering for the operands, and hands ``saved``
            back to the ``vjp`` rule (``tracing.saved_forward()``), so the rule need not run
            the forward pass again. The rule must also work without it (None).
        batch: batching rule ``(args, dims, **params) -> (outs, out_dims)``; None: the rule of
            ``batch_family``, which ``ops.batch_rules.rule_for`` builds on first use and keeps
            here (the transforms ask ``rule_for(op)``, never read this field directly).
        batch_family: ``"elementwise"``, ``"axes"`` (the params ``batch_axes`` names axes of
            the single operand), ``"leading"`` (any leading batch axes are accepted).
        batch_axes: the param that holds axes, for the ``"axes"`` family.
        elementwise, reduction, linear: structural flags used by passes and backends.
        scalar: the op's scalar code for generated kernels: a template over ``{0}, {1}, ...``
            valid on every target, or a Python function of scalars that numba compiles.
        code: target name (``"cpu"``, ``"cuda"``) -> ``ScalarCode`` (that target's own code,
            dtype kinds and preference, overriding ``scalar``) or a string (why that target
            never fuses the op).
        reduce_kind: the kernel reduction this op is (``"sum"``, ``"prod"``, ``"max"``,
            ``"min"``, ``"and"``, ``"or"``, ``"logsumexp"``; ``"softmax"``, whose result keeps
            the operand's shape), or None.
        fusion: ``"view"`` (a re-indexing of its operand that kernels fold into their index
            maps: ``view_map(eqn)`` gives the map), ``"shifted"`` (a guarded shifted read of
            its first operand, like ``pad``), or None.
        expand: ``(*operands, **params) -> result`` written with op-level functions: what a
            target whose kernels cannot hold an equation of this op runs instead
            (``backends.lowering.plan.expand_unfused``; softmax becomes logsumexp and an
            exp where there is no softmax kernel). None: the op's impl runs.
        view_map: for ``fusion="view"``: ``eqn -> tuple | None``, the output axis each operand
            axis is read from (None: a unit axis read at 0); None: not a pure re-indexing.
        reindex: the result is a re-indexing of the operand (no arithmetic): slice, reshape...
        strided_view: a view a flat buffer cannot hold (broadcast, transpose): a value of its
            own is a copy.
        cheap: cheap enough to recompute in a later kernel rather than store.
        fresh: the impl always returns new arrays, never a view of an input (default: what
            ``elementwise`` says).
        c_result: the impl's results are C-contiguous and writeable whenever its inputs are:
            a bool or ``eqn -> bool`` (default: ``fresh`` for elementwise ops).
        singular: ``(operand index, a value where the op is smooth)`` for ops singular
            somewhere (log at 0): the where lint looks for them.
        call_param: the param holding a sub-graph the op evaluates unchanged on its operands
            (``checkpoint``, the custom-rule calls): its rules differ from the sub-graph's,
            its value does not, so once the transforms are done a backend may inline it.
        differentiable: False for ops with no derivative (argmax, ...): differentiating
            through one is a MissingRuleError. Piecewise-constant ops (floor, comparisons)
            are differentiable with a zero rule (``zero_grad=True``).
        zero_grad: the derivative is zero everywhere it exists (floor, sign, comparisons).
        effect: running the impl does something besides computing its result (``debug_print``
            prints): passes never drop, merge or fold such an equation, and every backend
            runs it where the graph has it, even though nothing reads its result.
        module: the module that declared the op (a document naming an unknown op says to
            import it).
    """

    name: str
    abstract_eval: Callable[..., Any]
    impl: Callable[..., Any]
    multiple_results: bool = False
    vjp: Callable[..., Any] | None = None
    jvp: Callable[..., Any] | None = None
    vjp_forward: Callable[..., Any] | None = None
    batch: Callable[..., Any] | None = None
    batch_family: str | None = None
    batch_axes: str | None = None
    elementwise: bool = False
    reduction: bool = False
    linear: bool = False
    scalar: str | Callable[..., Any] | None = None
    code: dict = dataclasses.field(default_factory=dict)
    reduce_kind: str | None = None
    fusion: str | None = None
    expand: Callable[..., Any] | None = None
    view_map: Callable[..., Any] | None = None
    reindex: bool = False
    strided_view: bool = False
    cheap: bool = False
    fresh: bool | None = None
    c_result: bool | Callable[..., bool] | None = None
    singular: tuple[int, float] | None = None
    call_param: str | None = None
    differentiable: bool = True
    zero_grad: bool = False
    effect: bool = False
    module: str = ""

    def __post_init__(self):
        if self.name in registry:
            raise ValueError(f"op {self.name!r} is declared twice (first by "
                             f"{registry[self.name].module or 'functrace'})")
        if self.fresh is None:
            self.fresh = self.elementwise
        if self.c_result is None:
            self.c_result = self.elementwise and self.fresh
        registry[self.name] = self

    def __repr__(self):
        return f"<op {self.name}>"

    def __reduce__(self):
        return (get_op, (self.name,))


def get_op(name: str) -> Op:
    try:
        return registry[name]
    except KeyError:
        raise FunctraceError(f"unknown op {name!r} (is the module that declares it "
                             "imported?)") from None


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------

def verify(g: Graph) -> None:
    """Re-check every invariant of a graph; raise FunctraceError naming the first violation.

    Checks single assignment, that every read is defined earlier, and that each equation's
    output types equal its op's abstract_eval on the input types (recursively for sub-graphs
    held in params).

    >>> from functrace.core import Graph, Var, AVal
    >>> x = Var(AVal((), "float64")); verify(Graph([x], [], [x]))
    """
    defined: set[Var] = set()
    for v in g.inputs:
        if not isinstance(v, Var):
            raise FunctraceError(f"graph input {v!r} is not a Var")
        if v in defined:
            raise FunctraceError(f"graph input {v!r} appears twice")
        defined.add(v)
    for i, e in enumerate(g.eqns):
        for a in e.inputs:
            if isinstance(a, Var) and a not in defined:
                raise FunctraceError(f"eqn {i} ({e.op.name}) reads {a!r} before it is defined")
            if not isinstance(a, Var | Lit):
                raise FunctraceError(f"eqn {i} ({e.op.name}) has a non-atom input {a!r}")
        try:
            out = e.op.abstract_eval(*(a.aval for a in e.inputs), **e.params)
        except Exception as exc:
            raise FunctraceError(f"eqn {i} ({e.op.name}) fails its type rule: {exc}") from exc
        outs = tuple(out) if e.op.multiple_results else (out,)
        got = tuple(o.aval for o in e.outputs)
        if outs != got:
            raise FunctraceError(f"eqn {i} ({e.op.name}) declares outputs {got} but its type "
                                 f"rule gives {outs}")
        for o in e.outputs:
            if o in defined:
                raise FunctraceError(f"eqn {i} ({e.op.name}) redefines {o!r}")
            defined.add(o)
        for p in e.params.values():
            if isinstance(p, Graph):
                verify(p)
    for a in g.outputs:
        if isinstance(a, Var) and a not in defined:
            raise FunctraceError(f"graph output {a!r} is not defined")
