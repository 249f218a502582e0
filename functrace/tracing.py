"""Deferred-compute tracing: Trace, Tracer, bind, trace_to_graph, eval_graph.

Owns the one choke point every op goes through (``bind``), the recording trace, and the
array-like ``Tracer``. Imports only ``core`` and ``errors``: the array methods of a Tracer
(operators, indexing, ``.at``) are installed by ``functrace.numpy`` at import time, the way an
upper layer plugs into a lower one without the lower importing it.

How it works (MXNet's deferred compute, re-thought):
* ``bind(op, *args, **params)`` with no active trace runs ``op.impl`` eagerly on arrays.
* Inside ``trace_to_graph`` a ``Trace`` is the current trace (a ContextVar, so it is
  thread- and task-local). ``bind`` records an ``Eqn`` and returns Tracers.
* A Tracer of an *outer* trace met by an inner one becomes an extra input of the inner graph
  (closure conversion). Each trace owns its perturbations, so nested transforms cannot
  confuse them.
* When the example inputs are concrete, a Tracer computes its value on demand by evaluating
  the recorded equations it depends on (MXNet's ``DCInfo::Compute``); Python control flow on
  values works and marks the trace ``concretized`` (its graph is then specialised to those
  values and must not be cached). With abstract inputs (``ShapeDtype``) asking for a value is a
  ConcretizationError naming the user's line.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import linecache
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import debug_nans
from .config import config
from .core import AVal, Eqn, Graph, Lit, Op, Params, SourceInfo, Var, on_device, to_host
from .errors import (
    PKG_DIR,
    AxisError,
    ConcretizationError,
    FunctraceError,
    FunctraceTypeError,
    FunctraceValueError,
    MissingRuleError,
    ShapeError,
    TracerConversionError,
    TracerLeakError,
)

__all__ = ["Trace", "Tracer", "Guard", "bind", "trace_to_graph", "eval_graph", "current_trace",
           "using_trace", "CURRENT_TRACE", "SOURCE_OVERRIDE", "COTANGENTS_WANTED", "user_source",
           "SAVED_FORWARD", "saved_forward",
           "cotangent_wanted", "is_tracer", "ShapeDtype", "rule_source", "conversion_error",
           "op_error", "user_error", "USER_ERRORS", "abstract_value_error", "source_line",
           "fresh_constant"]

ShapeDtype = AVal   # public name for an abstract example argument: ft.ShapeDtype((3,), "f4")

# The trace context: four ContextVars (thread- and task-local), public so that the transforms,
# the tapes, functrace.numpy and the autograd facade share them without reaching into this
# module's privates. Read the active trace with ``current_trace()`` (None outside transforms);
# run code under a trace with ``with using_trace(t):``, or, on hot paths, with
# ``token = CURRENT_TRACE.set(t)`` ... ``CURRENT_TRACE.reset(token)`` in a ``finally``.
CURRENT_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "functrace_trace", default=None)
# the bound method, not a wrapper: functrace.numpy asks it on every eager call
current_trace: Callable[[], Trace | None] = CURRENT_TRACE.get
# While a transform re-binds an existing graph, recorded equations keep the original line.
SOURCE_OVERRIDE: contextvars.ContextVar[SourceInfo | None] = contextvars.ContextVar(
    "functrace_source", default=None)

# While a vjp rule runs: which of its inputs need a cotangent (the others are literals or do
# not depend on what is differentiated). Rules may skip work for the rest.
COTANGENTS_WANTED: contextvars.ContextVar[tuple[bool, ...] | None] = contextvars.ContextVar(
    "functrace_wanted", default=None)


# While a vjp rule runs on an eager tape: what the op's ``vjp_forward`` saved when the tape
# computed its results (None otherwise).
SAVED_FORWARD: contextvars.ContextVar[Any] = contextvars.ContextVar("functrace_saved",
                                                                   default=None)


def saved_forward():
    """Inside a vjp rule: what the op's ``vjp_forward`` saved for this equation when an eager
    tape computed it, or None (a graph transform, or an op without one)."""
    return SAVED_FORWARD.get()


def cotangent_wanted(i: int) -> bool:
    """Inside a vjp rule: whether input ``i`` needs a cotangent (True outside rules). The
    context holds one entry per input: a bool, or (the tape's form) the tracked operand or
    None."""
    w = COTANGENTS_WANTED.get()
    if w is None:
        return True
    v = w[i]
    return v is not None and v is not False


_trace_ids = itertools.count()
# 0-d literals are immutable values: share one Lit per (dtype, bytes) to make tracing cheap
_scalar_lits: dict[tuple, Lit] = {}


@contextlib.contextmanager
def using_trace(trace: Trace | None) -> Iterator[Trace | None]:
    """Make ``trace`` the current trace (None: plain eager numpy) for the ``with`` body."""
    token = CURRENT_TRACE.set(trace)
    try:
        yield trace
    finally:
        CURRENT_TRACE.reset(token)


_NUMPY_DIR = os.path.dirname(np.__file__)


def user_source() -> SourceInfo | None:
    """The user's source line of the op being recorded now: the override while a graph is
    re-bound, else the first frame outside functrace and numpy (two frames up from here)."""
    src = SOURCE_OVERRIDE.get()
    if src is not None:
        return src
    f = sys._getframe(2)
    # the user's frame: outside functrace, and outside numpy (np.r_[x, x] converts inside)
    while f is not None and f.f_code.co_filename.startswith((PKG_DIR, _NUMPY_DIR)):
        f = f.f_back
    if f is None:
        return None
    return SourceInfo(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)


def rule_source(src: SourceInfo | None, op_name: str) -> SourceInfo:
    """The source to record for equations that ``op_name``'s derivative rule emits: the
    forward equation's place, marked as a rule's (lints skip those: the user did not write
    them)."""
    if src is None:
        return SourceInfo("<unknown>", 0, "", "", op_name)
    return src.in_rule(op_name)


def conversion_error(what: str, shape=(), dtype=None) -> TracerConversionError:
    """The error for converting a value that is being differentiated to a Python number or a
    numpy array, naming the user's line and the fixes."""
    desc = f" (shape {tuple(shape)}, {dtype})" if dtype is not None else ""
    return TracerConversionError(
        f"{what} was called on a traced value{desc} that depends on an input being "
        f"differentiated, at {source_line(user_source())}. The conversion would drop its "
        "derivative silently (the result would be a constant). Fix: keep the computation in "
        "functrace.numpy (fnp.*) functions, which are differentiated; or, if no gradient "
        "should flow through it, convert ft.stop_gradient(x) instead.")


def abstract_value_error(why: str) -> ConcretizationError:
    """The error for a Python decision (``why``: "bool()", "float()", ...) on a value that
    is not known because the trace's inputs are abstract (``ft.ShapeDtype``, ``.lower()``,
    ``ft.eval_shape``), naming the user's line and the constructs that record both paths."""
    return ConcretizationError(
        f"{why} of a traced value was needed at {source_line(user_source())}, but this "
        "function is traced with abstract inputs (shape and dtype only), so Python control "
        "flow cannot read it. Fix: write the decision so that one graph covers every path: "
        "ft.cond(pred, true_fn, false_fn, *operands) for an if, "
        "ft.while_loop(cond_fn, body_fn, init) or ft.fori_loop(lower, upper, body_fn, init) "
        "for a loop, fnp.where(...) to select elementwise; or mark the argument static "
        "(static_argnums=...) if its value selects a code path. (ft.jit called with concrete "
        "arrays instead compiles one guarded variant per path taken: docs/jit_control_flow.md.)")


def source_line(src: SourceInfo | None) -> str:
    """'file:line: code' for error messages."""
    if src is None:
        return "<unknown location>"
    code = linecache.getline(src.filename, src.lineno).strip()
    return f"{src.filename}:{src.lineno}" + (f": {code}" if code else "")


def op_error(op: Op, e: Exception, avals, src: SourceInfo | None) -> FunctraceError:
    """The error for an op's type rule refusing its operands: functrace's class for it (a
    plain TypeError becomes a FunctraceTypeError, a ValueError a ShapeError), naming the op,
    the operand types and the user's line."""
    cls = (type(e) if isinstance(e, FunctraceError) else
           FunctraceTypeError if isinstance(e, TypeError) else ShapeError)
    err = cls(f"{op.name}: {e} (operands {', '.join(map(repr, avals))}) at "
              f"{source_line(src)}")
    err._ft_located = True
    return err


# What a functrace.numpy function (or a Tracer operator) may raise for bad input while tracing:
# numpy's builtin types, re-raised by ``user_error`` as functrace's
USER_ERRORS = (ValueError, TypeError, IndexError, NotImplementedError)
_RETYPED = frozenset({ShapeError, AxisError, FunctraceTypeError, FunctraceValueError})


def _has_tracer(xs) -> bool:
    for x in xs:
        if isinstance(x, Tracer) or (type(x) in (list, tuple) and _has_tracer(x)):
            return True
    return False


def user_error(e: Exception, name: str, args=(), kwargs=None) -> Exception:
    """The error to raise for ``e``, raised by the ``functrace.numpy`` function (or Tracer
    operator) ``name`` called on ``args``: while tracing, functrace's class that is also the
    builtin ``e`` is (an axis or index error: AxisError; another ValueError: ShapeError; a
    TypeError: FunctraceTypeError; NotImplementedError: MissingRuleError; numpy's
    LinAlgError stays one), its message prefixed with ``name`` and followed by the user's
    line. Outside transforms (plain numpy arrays) and for errors that already name the line,
    ``e`` itself. Callers: ``err = user_error(e, ...); if err is e: raise; raise err from None``.
    """
    if getattr(e, "_ft_located", False):
        return e
    if current_trace() is None and not _has_tracer(args) and not (
            kwargs and _has_tracer(kwargs.values())):
        return e                      # numpy's own call: numpy's own error
    if isinstance(e, FunctraceError):
        if type(e) not in _RETYPED:
            return e                  # Concretization, conversion, leak...: their own words
        cls = type(e)
    elif isinstance(e, np.linalg.LinAlgError):
        cls = type(e)
    elif isinstance(e, IndexError):
        cls = AxisError
    elif isinstance(e, ValueError):
        cls = ShapeError
    elif isinstance(e, TypeError):
        cls = FunctraceTypeError
    elif isinstance(e, NotImplementedError):
        cls = MissingRuleError
    else:
        return e
    msg = str(e)
    short = re.findall(r"\w+", name)[-1]     # "fnp.linalg.solve", "x @ y (fnp.matmul)"
    if msg.startswith(short + ": "):
        msg = msg[len(short) + 2:]
    err = cls(f"{name}: {msg}; at {source_line(user_source())}")
    err._ft_located = True
    return err.with_traceback(e.__traceback__)


class Guard:
    """A value-dependent Python decision taken while tracing on concrete inputs.

    ``atom`` is the graph variable the decision read; ``kind`` is ``"truth"`` (``bool()``:
    ``expected`` is the truth value) or ``"value"`` (``float()``, ``int()``, ``np.asarray``,
    an index, a value read by a nested transform: ``expected`` is the exact value). A Symbol
    re-checks its guards when called and raises GuardError when one comes out differently.
    """

    __slots__ = ("atom", "kind", "expected", "source", "why")

    def __init__(self, atom, kind: str, expected, source: SourceInfo | None, why: str):
        self.atom, self.kind, self.expected, self.source, self.why = (
            atom, kind, expected, source, why)

    def holds(self, value) -> bool:
        """Whether ``value`` (of ``atom``, from a new call) takes the recorded path."""
        if self.kind == "truth":
            return bool(value) == self.expected
        v = np.asarray(value)
        e = self.expected
        return (v.shape == e.shape and v.dtype == e.dtype and
                np.array_equal(v, e, equal_nan=v.dtype.kind in "fc"))

    def describe(self) -> str:
        if self.kind == "truth":
            return f"{self.why} was {self.expected}"
        e = self.expected
        shown = repr(e.item()) if e.ndim == 0 else f"an array of shape {e.shape}"
        return f"{self.why} read the value {shown}"

    def __eq__(self, other):
        return (isinstance(other, Guard) and self.kind == other.kind
                and self.atom == other.atom and self.why == other.why
                and (self.expected == other.expected if self.kind == "truth" else
                     Lit(self.expected) == Lit(other.expected)))

    __hash__ = None

    def __repr__(self):
        return f"Guard({self.describe()} at {self.source})"


class Trace:
    """Records equations while a Python function runs on Tracers."""

    # An *eager* trace (functrace.autograd's recorder) computes every op as it is bound and
    # its Tracers (autograd.NDArray) always hold a value. Hook for the layer above: bind sends
    # ops on them to their trace when no transform is active, and other traces read them as
    # constants (see to_atom and bind). Plain traces are never eager.
    eager = False

    def __init__(self, parent: Trace | None):
        self.parent = parent
        self.id = next(_trace_ids)
        self.level = 0 if parent is None else parent.level + 1
        self.inputs: list[Var] = []
        self.n_explicit = 0
        self.sources: dict[Var, Any] = {}        # input Var -> ndarray | outer Tracer | None
        self.captured: dict[int, tuple[Tracer, Var]] = {}   # id(outer tracer) -> (tracer, var)
        self.eqns: list[Eqn] = []
        self.producer: dict[Var, Eqn] = {}
        self.values: dict[Var, Any] = {}
        self.consts: list[tuple[np.ndarray, np.ndarray]] = []   # (user array, its Lit copy)
        self._const_ids: set[int] = set()   # each array in consts once (checked per cached call)
        self.active = True
        self.concretized = False
        self.guards: list[Guard] = []
        # Vars that depend on an input being differentiated (by the transform that opened
        # this trace, or by an enclosing one): converting them to numbers is an error
        self.diff: set[Var] = set()

    def __repr__(self):
        return f"<Trace {self.id} level {self.level}>"

    # -- inputs ------------------------------------------------------------------------------
    def new_input(self, aval: AVal, source: Any = None, diff: bool = False) -> Tracer:
        v = Var(aval)
        self.inputs.append(v)
        self.sources[v] = source
        if (diff or (isinstance(source, Tracer) and source._differentiated())) and (
                aval.dtype.kind in "fc"):
            self.diff.add(v)
        return Tracer(self, v)

    def is_ancestor(self, other: Trace) -> bool:
        t = self.parent
        while t is not None:
            if t is other:
                return True
            t = t.parent
        return False

    def to_atom(self, x: Any) -> Var | Lit:
        """Turn an argument of bind into an atom of this trace's graph."""
        if isinstance(x, Tracer):
            t = x._trace
            if t is self:
                return x._var
            if t.active and self.is_ancestor(t):
                hit = self.captured.get(id(x))
                if hit is not None:
                    return hit[1]
                tr = self.new_input(x.aval, source=x)
                self.captured[id(x)] = (x, tr._var)
                return tr._var
            if t.eager:   # an autograd.NDArray read by a transform: a constant, like an array
                lit = Lit(x.value)
                if lit.aval.shape:
                    self._add_const(x, lit.val)   # caches compare its current value
                return lit
            when = " after its transform finished" if not t.active else ""
            raise TracerLeakError(
                f"a tracer from {t} was used in {self}{when}, at "
                f"{source_line(user_source())}. A traced value escaped its function "
                "(stored in a global or a closure?): return it instead.")
        if isinstance(x, Lit):
            return x
        if type(x) is np.ndarray and x.ndim == 0:
            key = (x.dtype.str, x.tobytes())
            lit = _scalar_lits.get(key)
            if lit is None:
                lit = _scalar_lits[key] = Lit(x)
                if len(_scalar_lits) > 4096:
                    _scalar_lits.clear()
            return lit
        arr = _as_array(x)
        lit = Lit(arr)
        if (arr is x or on_device(x)) and arr.ndim and _host_copies.get(id(arr)) is not arr:
            self._add_const(x, lit.val)   # lets caches notice in-place updates
        return lit

    def _add_const(self, x, val) -> None:
        """Record array ``x``, baked in as literal value ``val``, once per trace (the list keeps
        ``x`` alive, so its id stays unique)."""
        if id(x) not in self._const_ids:
            self._const_ids.add(id(x))
            self.consts.append((x, val))

    # -- recording ---------------------------------------------------------------------------
    def record(self, op: Op, args: Sequence[Any], params: dict) -> Any:
        atoms = [self.to_atom(a) for a in args]
        avals = [a.aval for a in atoms]
        src = user_source()
        try:
            out = op.abstract_eval(*avals, **params)
        except (TypeError, ValueError) as e:
            raise op_error(op, e, avals, src) from None
        outs = out if op.multiple_results else (out,)
        out_vars = [Var(a) for a in outs]
        eqn = Eqn(op, atoms, Params(params), out_vars, src)
        self.eqns.append(eqn)
        for v in out_vars:
            self.producer[v] = eqn
        diff = self.diff
        if diff and not op.zero_grad and any(a in diff for a in atoms if type(a) is Var):
            diff.update(v for v in out_vars if v.aval.dtype.kind in "fc")
        tracers = [Tracer(self, v) for v in out_vars]
        return tuple(tracers) if op.multiple_results else tracers[0]

    # -- concrete values on demand -----------------------------------------------------------
    def read_value(self, var: Var, why: str, truth: bool = False, convert: bool = True):
        """The concrete value of ``var`` for a Python decision, recorded as a guard.

        ``truth``: only its truth value is used (``bool()``): allowed even when ``var`` is
        being differentiated (the decision's derivative is zero). Otherwise the value itself
        is used: with ``convert``, that is an error when ``var`` is being differentiated
        (the derivative would be dropped); without (a value a nested transform reads), it is
        allowed, as the nested trace checks its own conversions."""
        if convert and not truth and var in self.diff:
            raise conversion_error(why, var.aval.shape, var.aval.dtype)
        val = self.concrete(var, why)
        if truth:
            expected = bool(val)    # numpy raises here for arrays of several elements
        for g in self.guards:
            if g.atom is var and g.kind == ("truth" if truth else "value"):
                return val
        src = user_source()
        if truth:
            self.guards.append(Guard(var, "truth", expected, src, why))
        else:
            self.guards.append(Guard(var, "value", np.array(val, copy=True), src, why))
        return val

    def concrete(self, var: Var, why: str = "a concrete value") -> np.ndarray:
        if var in self.values:
            return self.values[var]
        self.concretized = True
        stack = [var]
        while stack:
            v = stack[-1]
            if v in self.values:
                stack.pop()
                continue
            if v in self.sources:
                src = self.sources[v]
                if src is None:
                    raise abstract_value_error(why)
                val = src.value if isinstance(src, Tracer) else src
                # values decide Python control flow on the host: a device input is copied
                self.values[v] = to_host(val) if on_device(val) else val
                stack.pop()
                continue
            eqn = self.producer.get(v)
            if eqn is None:
                raise FunctraceError(f"{v!r} is not defined in {self}")
            missing = [a for a in eqn.inputs if isinstance(a, Var) and a not in self.values]
            if missing:
                stack.extend(missing)
                continue
            args = [a.val if isinstance(a, Lit) else self.values[a] for a in eqn.inputs]
            res = eqn.op.impl(*args, **eqn.params)
            res = res if eqn.op.multiple_results else (res,)
            for o, r in zip(eqn.outputs, res):
                self.values[o] = np.asarray(r)
            stack.pop()
        return self.values[var]


# arrays functrace made itself while tracing and nobody else holds: host copies of GPU arrays
# (functrace.numpy's asarray_any) and ``fresh_constant``s (jacfwd's basis). Comparing them with
# their literals on every cached call would only cost time (a 200x200 basis: ~0.1 ms a check)
_host_copies: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def fresh_constant(a: np.ndarray) -> np.ndarray:
    """Mark ``a``, an array functrace made for a trace and hands to no one else (jacfwd's and
    jacrev's basis), as a constant caches need not re-check: its value is a function of what
    the cache key already holds (shapes and dtypes), and no user code can update it in place.
    Returns ``a``.

    Example:
        >>> import numpy as np
        >>> from functrace.tracing import fresh_constant
        >>> basis = fresh_constant(np.eye(3))
    """
    _host_copies[id(a)] = a
    return a


def host_copy(x) -> np.ndarray:
    """The host copy of a device array met while tracing: a constant of the graph. Caches
    do not re-check it (an in-place update of a closed-over GPU array is not noticed; a
    rebound name is, by the cache's fingerprint of the function)."""
    h = to_host(x)
    _host_copies[id(h)] = h
    return h


def _as_array(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if on_device(x):   # a closed-over GPU array becomes a literal: graphs hold host values
        return to_host(x)
    if isinstance(x, bool | int | float | complex | np.generic):
        return np.asarray(x)
    if hasattr(x, "__array__") and not isinstance(x, Tracer):
        return np.asarray(x)
    raise FunctraceTypeError(f"functrace ops take arrays, numbers or tracers; got "
                             f"{type(x).__name__} {x!r:.60}")


class Tracer:
    """An array-like stand-in for a value being traced.

    Has ``shape``, ``dtype``, ``ndim``, ``size``; operators, indexing and methods are installed
    by ``functrace.numpy``. ``bool()``, ``float()``, ``int()`` and ``np.asarray()`` compute the
    concrete value when the trace's inputs are concrete.
    """

    __slots__ = ("_trace", "_var", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, var: Var):
        self._trace = trace
        self._var = var

    @property
    def aval(self) -> AVal:
        return self._var.aval

    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._var.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self._var.aval.shape)

    @property
    def size(self) -> int:
        return self._var.aval.size

    def __len__(self):
        if not self.shape:
            raise FunctraceTypeError(f"len() of a 0-d traced array, at "
                                     f"{source_line(user_source())}")
        return self.shape[0]

    @property
    def value(self) -> np.ndarray:
        """The concrete value (computed on demand; ConcretizationError if abstract), for a
        nested transform that captured this tracer. The trace keeps it as a guard."""
        return self._concrete("a value read by a nested transform", convert=False)

    def _differentiated(self) -> bool:
        """Whether this value depends on an input that is being differentiated."""
        return self._var in self._trace.diff

    def __array__(self, dtype=None, copy=None):
        try:
            v = self._concrete("np.asarray() (or a numpy function calling it)")
        except ConcretizationError as exc:
            if self.dtype.kind in "iu" and self.ndim == 0:   # numpy_array[i], most often
                raise ConcretizationError(
                    f"{exc} If this is a numpy array indexed by a traced integer (a loop "
                    "counter: numpy converts the index, it cannot record it), use "
                    "fnp.take(X, i, axis=0) or pass X in as an operand.") from None
            raise
        return v.astype(dtype) if dtype is not None else v

    def __bool__(self):
        return bool(self._concrete("bool()", truth=True))

    def __float__(self):
        return float(self._concrete("float()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise FunctraceTypeError(f"only integer arrays can be used as an index, not "
                                     f"{self.dtype}; at {source_line(user_source())}")
        try:
            return int(self._concrete("an index"))
        except ConcretizationError:
            raise ConcretizationError(
                "a traced integer was used where Python needs a plain int, at "
                f"{source_line(user_source())}, but this function is traced with abstract "
                "inputs (shape and dtype only). Often: indexing a numpy array with it, which "
                "numpy cannot record: index a traced array instead, or use "
                "fnp.take(X, i, axis=0) / fnp.at(X)[i].get(). For a loop bound "
                "(range(n)): ft.fori_loop(lower, upper, body_fn, init), or mark the argument "
                "static (static_argnums=...).") from None

    def item(self):
        return self._concrete(".item()").item()

    def tolist(self):
        return self._concrete(".tolist()").tolist()

    def _concrete(self, why: str, truth: bool = False, convert: bool = True):
        t = self._trace
        if not t.active:
            raise TracerLeakError("a tracer was used after its transform finished, at "
                                  f"{source_line(user_source())}; return traced values "
                                  "from the function instead of storing them")
        return t.read_value(self._var, why, truth=truth, convert=convert)

    def __setitem__(self, idx, val):
        raise FunctraceTypeError(
            "traced arrays are immutable: `x[idx] = v` cannot be recorded. Use the functional "
            "form `x = x.at[idx].set(v)` (or .add / .multiply) instead"
            f" (at {source_line(user_source())})")

    def __iadd__(self, other):
        return self.__add__(other)   # rebinding, not mutation: fine for immutable arrays

    def __hash__(self):
        raise FunctraceTypeError("traced arrays are not hashable (use id(x) as a key, or a "
                                 f"tuple of shapes); at {source_line(user_source())}")

    def __repr__(self):
        return f"Tracer<{self.aval!r}>"

    def __iter__(self):
        if not self.shape:
            raise FunctraceTypeError(f"iteration over a 0-d traced array, at "
                                     f"{source_line(user_source())}")
        return (self[i] for i in range(self.shape[0]))


def is_tracer(x: Any) -> bool:
    return isinstance(x, Tracer)


# --------------------------------------------------------------------------------------------
# bind: the one choke point
# --------------------------------------------------------------------------------------------

def bind(op: Op, *args: Any, **params: Any) -> Any:
    """Apply ``op``: record it in the current trace, or run its numpy impl eagerly."""
    trace = current_trace()
    if trace is None:
        return apply_op(op, args, params)
    return trace.record(op, args, params)


# (op, operand shapes and dtypes, params) -> result dtypes, for operand types that passed the
# op's type rule: eager calls (the tapes, rules run at top level) skip re-checking them
_checked: dict = {}
_PLAIN = frozenset({np.ndarray, np.float64, np.float32, np.float16, np.int64, np.int32,
                    np.bool_, np.complex128, np.complex64})


def apply_op(op: Op, args: Sequence[Any], params: dict) -> Any:
    """Run ``op``'s numpy impl with no trace involved, after the checks tracing does (cached
    per operand types). The result has the dtype the type rule gives, as a traced graph's
    would."""
    n = len(args)
    key: Any = None
    if n == 2:
        a, b = args
        if type(a) in _PLAIN and type(b) in _PLAIN:
            key = (op, a.shape, a.dtype, b.shape, b.dtype)
    elif n == 1:
        a = args[0]
        if type(a) in _PLAIN:
            key = (op, a.shape, a.dtype)
    else:
        key = (op,)
        for a in args:
            if type(a) not in _PLAIN:
                key = None
                break
            key += (a.shape, a.dtype)
    if key is not None:
        if params:
            key += tuple(params.items())
        try:
            want = _checked.get(key)
        except TypeError:     # an unhashable param: check every time
            key = want = None
        if want is not None:
            out = op.impl(*args, **params)
            if op.multiple_results:
                out = tuple(o if o.dtype == w else o.astype(w) for o, w in zip(out, want))
            elif out.dtype != want:
                out = out.astype(want)
            if config.debug_nans:
                debug_nans.check(op.name, args, out, user_source())
            return out
    on_gpu = False
    for a in args:
        if isinstance(a, Tracer):
            if a._trace.eager:   # an autograd.NDArray: its recorder computes (and records)
                return a._trace.record(op, args, params)
            raise TracerLeakError(
                f"{op.name} got a tracer outside of any transform, at "
                f"{source_line(user_source())}: a traced value escaped its function "
                "(stored in a global or closure?); return it from the function instead")
        on_gpu = on_gpu or on_device(a)
    arrays = [a.val if isinstance(a, Lit) else a for a in args]
    avals = [AVal.of(a) for a in arrays]
    try:
        res = op.abstract_eval(*avals, **params)   # the same checks as when tracing
    except (TypeError, ValueError) as e:
        raise op_error(op, e, avals, user_source()) from None
    if key is not None:
        if len(_checked) > 8192:
            _checked.clear()
        _checked[key] = (tuple(a.dtype for a in res) if op.multiple_results
                         else res.dtype)
    if on_gpu and device_apply is not None:
        out = device_apply(op, arrays, params)
    else:
        out = op.impl(*arrays, **params)
    if config.debug_nans:
        debug_nans.check(op.name, arrays, out, user_source())
    return out


# Set by the reference interpreter (backends.reference) when it is imported: runs an impl on
# operands some of which are GPU arrays (host operands copied to the device, an impl the
# array module cannot run done on the host). A hook, so that this layer imports no backend.
device_apply: Callable | None = None


# --------------------------------------------------------------------------------------------
# Graph <-> Python function
# --------------------------------------------------------------------------------------------

class Traced:
    """The result of tracing: the graph, its captured outer tracers, and flags."""

    __slots__ = ("graph", "captured", "concretized", "consts", "guards")

    def __init__(self, graph: Graph, captured: list[Tracer], concretized: bool, consts,
                 guards=()):
        self.graph = graph
        self.captured = captured          # outer-trace tracers feeding the extra inputs
        self.concretized = concretized
        self.consts = consts              # (user array, literal copy) pairs
        self.guards = list(guards)        # value-dependent decisions (Guard), in order


def trace_to_graph(fn: Callable[..., Sequence[Any]], in_args: Sequence[Any],
                   diff: Sequence[int] = ()) -> Traced:
    """Trace ``fn(*tracers) -> flat sequence of outputs`` into a Graph.

    ``in_args`` are example arguments: concrete arrays/scalars, ``ShapeDtype``/``AVal`` for
    abstract ones, or Tracers of an outer trace (their values are computed on demand).
    The graph's inputs are the explicit inputs followed by captured outer tracers. ``diff``
    lists the inputs the caller will differentiate: converting a value that depends on them
    to a number is a TracerConversionError (so is one that depends on a captured value an
    enclosing transform differentiates). Every value-dependent decision is a ``Guard``.
    """
    parent = current_trace()
    trace = Trace(parent)
    tracers = []
    diff = set(diff)
    for i, a in enumerate(in_args):
        d = i in diff
        if isinstance(a, AVal):
            tracers.append(trace.new_input(a, None, d))
        elif isinstance(a, Tracer):
            tracers.append(trace.new_input(a.aval, a, d))
        elif on_device(a):   # stays on the device; copied only if a value is needed
            tracers.append(trace.new_input(AVal.of(a), a, d))
        else:
            arr = _as_array(a)
            tracers.append(trace.new_input(AVal(arr.shape, arr.dtype), arr, d))
    trace.n_explicit = len(tracers)
    token = CURRENT_TRACE.set(trace)
    try:
        outs = fn(*tracers)
        out_atoms = [trace.to_atom(o) for o in outs]
    finally:
        CURRENT_TRACE.reset(token)
        trace.active = False
    graph = Graph(trace.inputs, trace.eqns, out_atoms)
    captured = [trace.sources[v] for v in trace.inputs[trace.n_explicit:]]
    concretized = trace.concretized
    if concretized and parent is not None:
        # a value decided control flow: any outer graph is value-specialised too
        t = parent
        while t is not None:
            t.concretized = True
            t = t.parent
    return Traced(graph, captured, concretized, trace.consts, trace.guards)


def eval_graph(graph: Graph, args: Sequence[Any]) -> list[Any]:
    """Evaluate ``graph`` by re-binding every equation through the current trace.

    With no trace active this runs each op's numpy impl; inside a trace it records the
    equations again (keeping their source lines), which is what lets transforms compose.
    """
    if len(args) != len(graph.inputs):
        raise FunctraceTypeError(f"graph takes {len(graph.inputs)} inputs, got {len(args)}")
    env: dict[Var, Any] = dict(zip(graph.inputs, args))

    def read(a):
        return a.val if isinstance(a, Lit) else env[a]

    for e in graph.eqns:
        token = SOURCE_OVERRIDE.set(e.source) if e.source is not None else None
        try:
            out = bind(e.op, *[read(a) for a in e.inputs], **e.params)
        finally:
            if token is not None:
                SOURCE_OVERRIDE.reset(token)
        if e.op.multiple_results:
            env.update(zip(e.outputs, out))
        else:
            env[e.outputs[0]] = out
    return [read(a) for a in graph.outputs]
