"""Eager transforms: the tapes behind un-jitted ``grad``, ``vjp``, ``jvp`` and ``vmap``.

Owns ``TapeTrace``/``TapeTracer`` (reverse mode: each op runs at once and is kept on a tape
when an operand is being differentiated; the pullback walks the tape backwards running the
ops' vjp rules), ``JVPTrace``/``JVPTracer`` (forward mode: each op runs at once with its
tangent) and ``BatchTrace``/``BatchTracer`` (vmap: each op runs at once as one batched op,
by its batch rule). Transform layer: imports core, tracing, ops and autodiff's helpers;
never the API layer, functrace.numpy or a backend.

Why a tape and not a cached graph: an un-jitted transform re-runs the user's Python on every
call, as autograd and ``jax.grad`` do, so random draws, globals and side effects behave as
written (a cached graph would freeze them). The tape is how that stays fast.

How it composes (autograd's boxes, in functrace's trace vocabulary):
* A tape trace has a *parent*: the trace that was current when the transform started
  (``None`` at top level, another tape, or a graph trace under ``ft.jit``/``ft.trace``). A
  tracer's ``_primal`` is its value in the parent's terms: a numpy array, or a tracer of the
  parent. Each op is computed by binding it in the parent, so a tape under ``ft.jit``
  records into the jit's graph, and ``grad(grad(f))`` is a tape over a tape.
* Ops whose operands are not this tape's tracers are not taped: they are the parent's
  business (constants, or values an outer transform differentiates), so perturbations of
  nested transforms are never confused.
* Only float and complex results are tracked; integer and boolean results (comparisons,
  argmax) and the results of ``zero_grad`` ops are returned as plain parent values, so
  Python control flow on them just works and costs nothing.
* The backward pass runs the same vjp rules ``autodiff.vjp_graph`` runs, under the trace that
  is current when the pullback is called: at top level they compute with numpy, inside an
  enclosing transform they are recorded by it (higher order, ``jit(grad(f))``).
* Converting a tracked value to a Python number or a numpy array is a
  ``TracerConversionError``: it would drop the derivative. ``bool()`` is allowed (the
  decision's derivative is zero), and is delegated to the parent (a guard in a graph trace).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence

import numpy as np

from . import debug_nans, ops
from .autodiff import fit_to, no_jvp_error, rule_dependency, zeros_like
from .config import config
from .core import AVal, Params, SourceInfo, Var
from .errors import PKG_DIR, FunctraceWarning, MissingRuleError, TracerLeakError
from .ops.batch_rules import rule_for
from .tracing import (
    COTANGENTS_WANTED,
    CURRENT_TRACE,
    SAVED_FORWARD,
    SOURCE_OVERRIDE,
    Trace,
    Tracer,
    apply_op,
    bind,
    conversion_error,
    current_trace,
    rule_source,
    source_line,
    user_source,
)

__all__ = ["TapeTrace", "TapeTracer", "JVPTrace", "JVPTracer", "BatchTrace", "BatchTracer",
           "unwrap", "zeros_of"]


def _bind_in(parent, op, vals, params):
    """Bind ``op`` with the parent trace current (None: run its numpy impl). Only the impls
    of sub-graph ops (all multiple-result ops) evaluate further ops: the others run with no
    trace change."""
    if parent is None and not op.multiple_results:
        return apply_op(op, vals, params)
    token = CURRENT_TRACE.set(parent)
    try:
        return bind(op, *vals, **params)
    finally:
        CURRENT_TRACE.reset(token)


def _as_value(r):
    """Impl results that are Python scalars become 0-d arrays (tracers need a dtype)."""
    return r if hasattr(r, "dtype") else np.asarray(r)


class _EagerTracer(Tracer):
    """Shared by the two eager tracers: an array-like whose value is ``_primal`` (a parent
    value). Shape and dtype come from the value; a graph Var is made only if a graph trace
    captures the tracer."""

    __slots__ = ("_primal", "_v")

    @property
    def _var(self):
        v = self._v
        if v is None:
            v = self._v = Var(self.aval)
        return v

    @property
    def aval(self) -> AVal:
        p = self._primal
        return p.aval if isinstance(p, Tracer) else AVal(p.shape, p.dtype)

    @property
    def shape(self):
        return self._primal.shape

    @property
    def dtype(self):
        return self._primal.dtype

    @property
    def ndim(self):
        return len(self._primal.shape)

    @property
    def size(self):
        return int(np.prod(self._primal.shape, dtype=np.int64))

    def _differentiated(self) -> bool:
        return True

    def _live(self):
        if not self._trace.active:
            raise TracerLeakError("a tracer was used after its transform finished; return "
                                  "traced values from the function instead of storing them")

    @property
    def value(self):
        """The concrete numpy value, for a nested transform that captured this tracer."""
        self._live()
        p = self._primal
        return p.value if isinstance(p, Tracer) else p

    def _concrete(self, why: str, truth: bool = False, convert: bool = True):
        self._live()
        if truth:
            return self._primal
        raise conversion_error(why, self.shape, self.dtype)

    def __bool__(self):
        self._live()
        return bool(self._primal)

    def __repr__(self):
        return f"{type(self).__name__}<{self.aval!r}>"


def _operands(trace, cls, args, attr: str):
    """The parent values of ``args`` (``trace``'s own tracers, of class ``cls``, replaced by
    their primal; an autograd NDArray, a constant here, by its value), and per operand the
    own tracer's ``attr`` (None for the others), or None when no operand is the trace's own.
    (TapeTrace.record inlines the same loop: it is the hottest path of un-jitted grad.)"""
    tags = None
    vals = args
    for i, a in enumerate(args):
        if type(a) is cls and a._trace is trace:
            if tags is None:
                tags = [None] * len(args)
                vals = list(args)
            tags[i] = getattr(a, attr)
            vals[i] = a._primal
        elif isinstance(a, Tracer) and a._trace.eager and not isinstance(a, _EagerTracer):
            vals = list(vals) if vals is args else vals
            vals[i] = a.value
    return vals, tags


def unwrap(x, trace):
    """``x``'s value in ``trace``'s parent: a tracer of ``trace`` gives its primal."""
    return x._primal if isinstance(x, _EagerTracer) and x._trace is trace else x


def zeros_of(like):
    """A zero cotangent/tangent shaped like ``like``: an equation for a traced value, else a
    fresh (writable) numpy array."""
    if isinstance(like, Tracer):
        return zeros_like(like.aval)
    return ops.namespace_of(like).zeros(like.shape, like.dtype)


def _fit(ct, like, op_name: str):
    """Make a rule's result match its primal ``like`` (``autodiff.fit_to``)."""
    return fit_to(ct, like.shape, like.dtype, op_name)


def _record_source(parent) -> SourceInfo | None:
    """Source lines are kept when the tape records into a graph (they label its equations)
    or when a rule is running (so its equations carry the rule's mark)."""
    src = SOURCE_OVERRIDE.get()
    if src is not None:
        return src
    return user_source() if parent is not None else None


# --------------------------------------------------------------------------------------------
# Reverse mode
# --------------------------------------------------------------------------------------------

class _Node:
    """One taped op: the rule's inputs (parent values), which operands are tracked, and the
    cotangents gathered for its outputs during a backward pass."""

    __slots__ = ("op", "params", "refs", "ins", "outs", "source", "cts", "saved")

    def __init__(self, op, params, refs, ins, outs, source, saved=None):
        self.op, self.params, self.refs, self.ins, self.outs = op, params, refs, ins, outs
        self.source = source
        self.cts = None
        self.saved = saved      # what the op's vjp_forward kept for its rule, or None


class TapeTracer(_EagerTracer):
    """A value being differentiated in reverse mode: its primal and the taped op (``_node``,
    output ``_index``) that made it, or the input position for inputs (``_node`` None)."""

    __slots__ = ("_node", "_index")

    def __init__(self, trace, primal, node, index):
        self._trace = trace
        self._primal = primal
        self._node = node
        self._index = index
        self._v = None


class TapeTrace(Trace):
    """Reverse mode, eagerly: computes every op at once and tapes the ones that read a value
    being differentiated. ``pullback`` runs the tape backwards."""

    def __init__(self, parent: Trace | None):
        super().__init__(parent)
        self.nodes: list[_Node] = []
        self.leaves: list[TapeTracer] = []
        self._leaf_cts: list = []

    def __repr__(self):
        return f"<TapeTrace {self.id} level {self.level}>"

    def leaf(self, value) -> TapeTracer:
        """A new input being differentiated, holding ``value`` (a parent value)."""
        t = TapeTracer(self, _as_value(value), None, len(self.leaves))
        self.leaves.append(t)
        return t

    def record(self, op, args, params):
        refs = None
        vals = args
        i = 0
        for a in args:
            if type(a) is TapeTracer and a._trace is self:
                if refs is None:
                    refs = [None] * len(args)
                    vals = list(args)
                refs[i] = (a._node, a._index)    # not the tracer: it holds its value
                vals[i] = a._primal
            elif isinstance(a, Tracer) and a._trace.eager and not isinstance(a, _EagerTracer):
                vals = list(vals) if vals is args else vals
                vals[i] = a.value     # an autograd.NDArray read here is a constant
            i += 1
        parent = self.parent
        saved = None
        if parent is None and refs is not None and op.vjp_forward is not None \
                and not op.zero_grad:
            # computed with what the rule will read (a loop's residual stacks): the backward
            # pass does not run the forward pass again
            out, saved = _forward_with_saved(op, vals, refs, params)
        elif parent is None and not op.multiple_results:
            out = apply_op(op, vals, params)
        else:
            out = _bind_in(parent, op, vals, params)
        if refs is None or op.zero_grad:
            return out
        src = SOURCE_OVERRIDE.get()
        if src is None and (parent is not None or op.vjp is None or not op.differentiable
                            or config.debug_nans):
            # recorded into a graph (its equations name the user's line), an op whose
            # backward will fail, or NaN debugging: an error names the line
            src = user_source()
        if op.multiple_results:
            outs = tuple(_as_value(o) for o in out)
            node = _Node(op, params, tuple(refs), tuple(vals), outs, src, saved)
            self.nodes.append(node)
            if parent is None and any(getattr(v, "nbytes", 0) >= _PRUNE_BYTES
                                      for v in node.ins + outs):
                _keep_only_what_the_rule_reads(node)
            return tuple(TapeTracer(self, o, node, k) if o.dtype.kind in "fc" else o
                         for k, o in enumerate(outs))
        if not hasattr(out, "dtype"):
            out = np.asarray(out)
        node = _Node(op, params, tuple(refs), tuple(vals), (out,), src, saved)
        self.nodes.append(node)
        if op.name == "select":
            _lint_select(node, src)
        if parent is None and (getattr(out, "nbytes", 0) >= _PRUNE_BYTES
                               or getattr(vals[0], "nbytes", 0) >= _PRUNE_BYTES):
            _keep_only_what_the_rule_reads(node)
        return TapeTracer(self, out, node, 0) if out.dtype.kind in "fc" else out

    # -- the backward pass -------------------------------------------------------------------
    def pullback(self, seeds: Sequence[tuple], wanted: Sequence[TapeTracer]) -> list:
        """Cotangents of the leaves ``wanted`` given ``seeds``: (output tracer, cotangent)
        pairs. Rules run under the trace current now; the tape can be pulled back again."""
        nodes = self.nodes
        recorded = current_trace() is not None
        self._leaf_cts = [None] * len(self.leaves)
        for node in nodes:
            node.cts = None
        for t, ct in seeds:
            if isinstance(t, TapeTracer) and t._trace is self and ct is not None:
                self._accumulate((t._node, t._index), ct)
        wtok0 = COTANGENTS_WANTED.set(None)
        try:
            self._backward(nodes, recorded)
        finally:
            COTANGENTS_WANTED.reset(wtok0)
        out = []
        for t in wanted:
            ct = self._leaf_cts[t._index]
            out.append(zeros_of(t._primal) if ct is None else ct)
        self._leaf_cts = []
        return out

    def _backward(self, nodes, recorded):
        for node in reversed(nodes):
            cts = node.cts
            if cts is None:
                continue
            node.cts = None
            op = node.op
            rule = op.vjp
            if rule is None or not op.differentiable:
                raise MissingRuleError(
                    f"cannot differentiate through {op.name}: it "
                    + ("is not differentiable (its output is discrete)"
                       if not op.differentiable else "has no vjp rule")
                    + f"; called at {source_line(node.source)}. Wrap its input in "
                    "ft.stop_gradient(...) if no gradient should flow through it.")
            refs = node.refs
            # cotangent_wanted(i) is refs[i] is not None; a one-operand node's operand is
            # wanted (the node exists because of it), and the pass runs with None set
            wtok = COTANGENTS_WANTED.set(refs) if len(refs) > 1 else None
            # recorded by an enclosing trace: its equations get the rule's mark and line
            stok = (SOURCE_OVERRIDE.set(rule_source(node.source, op.name)) if recorded
                    else None)
            # computed now, with NaN debugging on: a NaN names the rule that made it
            ntok = (debug_nans.RULE.set((op.name, node.source))
                    if config.debug_nans and not recorded else None)
            svtok = SAVED_FORWARD.set(node.saved) if node.saved is not None else None
            try:
                in_cts = rule(tuple(cts), node.ins, node.outs, **node.params)
            finally:
                if svtok is not None:
                    SAVED_FORWARD.reset(svtok)
                if ntok is not None:
                    debug_nans.RULE.reset(ntok)
                if stok is not None:
                    SOURCE_OVERRIDE.reset(stok)
                if wtok is not None:
                    COTANGENTS_WANTED.reset(wtok)
            for r, ct in zip(refs, in_cts):
                if r is not None and ct is not None:
                    self._accumulate(r, ct)

    def _accumulate(self, ref, ct):
        """Add ``ct`` to the cotangent of ``ref``: (producing node, output index), or
        (None, leaf index)."""
        node, k = ref
        p = self.leaves[k]._primal if node is None else node.outs[k]
        if ct.shape != p.shape or ct.dtype != p.dtype:
            ct = _fit(ct, p, node.op.name if node is not None else "an input")
        cts = self._leaf_cts if node is None else node.cts
        if cts is None:
            if len(node.outs) == 1:
                node.cts = [ct]
                return
            cts = node.cts = [None] * len(node.outs)
        prev = cts[k]
        cts[k] = ct if prev is None else ops.add(prev, ct)


_PRUNE_BYTES = 1 << 16


def _forward_with_saved(op, vals, refs, params):
    """``op.vjp_forward`` run eagerly (no trace current), the tracked operands being the
    ones that want cotangents: (results, saved)."""
    token = CURRENT_TRACE.set(None)
    wtok = COTANGENTS_WANTED.set(tuple(refs))
    try:
        return op.vjp_forward(vals, **params)
    finally:
        COTANGENTS_WANTED.reset(wtok)
        CURRENT_TRACE.reset(token)


def _keep_only_what_the_rule_reads(node: _Node) -> None:
    """Drop the operand and result values of a node holding large arrays (its result or
    first operand is 64 KiB or more) that the op's vjp rule does not read
    (``autodiff.rule_dependency``, cached per signature), keeping their shape and dtype: a
    chain of linear steps then keeps no intermediates alive. Small values are kept: the
    analysis would cost more than they weigh."""
    try:
        in_key = tuple(AVal(v.shape, v.dtype) for v in node.ins)
        out_avals = tuple(AVal(v.shape, v.dtype) for v in node.outs)
        save_in, save_out = rule_dependency(node.op, Params(node.params), in_key, out_avals,
                                            tuple(r is not None for r in node.refs))
    except Exception:      # an operand numpy cannot describe: keep everything
        return
    node.ins = tuple(v if keep else a for v, a, keep in zip(node.ins, in_key, save_in))
    node.outs = tuple(v if keep else a for v, a, keep in zip(node.outs, out_avals, save_out))


# --------------------------------------------------------------------------------------------
# The where lint, on the tape: a select the user wrote whose untaken branch is singular
# --------------------------------------------------------------------------------------------

_warned: dict = {}


_WHERE_FILE = os.path.join(PKG_DIR, "numpy", "_ufuncs.py")


def _written_by_user() -> bool:
    """Whether the select being recorded is a ``fnp.where`` (or ``np.where``) called from the
    user's own code, not from inside functrace (a library function, a derivative rule)."""
    f = sys._getframe(2)
    outer = None
    while f is not None and f.f_code.co_filename.startswith(PKG_DIR):
        code = f.f_code
        if code.co_name not in ("wrapper", "_array_function"):   # dispatch shims
            outer = code
        f = f.f_back
    return outer is not None and outer.co_name == "where" and outer.co_filename == _WHERE_FILE


def _lint_select(node: _Node, src) -> None:
    from .passes.where_check import SINGULAR
    if (isinstance(src, SourceInfo) and src.rule) or not _written_by_user():
        return   # emitted by a gradient rule or a library function: not the user's where
    if node.outs[0].dtype.kind not in "fc":
        return
    cond = node.ins[0]
    for branch in (1, 2):
        r = node.refs[branch]
        if r is None:
            continue
        for s in _singular_nodes(r[0]):
            idx, safe = SINGULAR[s.op.name]
            if _guarded_by(s.refs[idx], s.ins[idx], cond):
                continue
            _warn_where(src if src is not None else user_source(), s, safe)
            return


def _singular_nodes(start: _Node | None, depth: int = 4) -> list[_Node]:
    from .passes.where_check import SINGULAR
    found, stack, seen = [], [(start, 0)], set()
    while stack:
        node, d = stack.pop()
        if node is None or id(node) in seen or d > depth or not node.op.elementwise:
            continue
        seen.add(id(node))
        if node.op.name in SINGULAR:
            found.append(node)
        if node.op.name == "select":
            continue    # a nested select is its own guard
        stack.extend((r[0], d + 1) for r in node.refs if r is not None)
    return found


def _guarded_by(ref, val, cond) -> bool:
    node = ref[0] if ref is not None else None
    if node is None or node.op.name != "select":
        return False
    c = node.ins[0]
    if c is cond:
        return True
    try:
        return np.shape(c) == np.shape(cond) and bool(np.array_equal(c, cond))
    except Exception:
        return False


def _warn_where(src, s: _Node, safe) -> None:
    key = (getattr(src, "filename", None), getattr(src, "lineno", None), s.op.name)
    if key in _warned:
        return
    _warned[key] = True
    msg = (f"where(...) at {source_line(src)} selects between branches, one of which "
           f"computes {s.op.name} (at {source_line(s.source or src)}), which is singular "
           "where that branch is not taken: its gradient can be NaN there. Guard the input "
           f"(the 'double where': x_safe = fnp.where(cond, x, {safe})), or wrap the function "
           "in ft.safe_where(f).")
    if src is not None and src.lineno:
        warnings.warn_explicit(msg, FunctraceWarning, src.filename, src.lineno,
                               registry=_warned.setdefault("registry", {}))
    else:
        warnings.warn(msg, FunctraceWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------
# Forward mode
# --------------------------------------------------------------------------------------------

class JVPTracer(_EagerTracer):
    """A value with a tangent: ``_primal`` and ``_tangent`` are parent values."""

    __slots__ = ("_tangent",)

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self._primal = primal
        self._tangent = tangent
        self._v = None


class JVPTrace(Trace):
    """Forward mode, eagerly: every op that reads a value with a tangent runs its jvp rule at
    once, in the parent."""

    def __repr__(self):
        return f"<JVPTrace {self.id} level {self.level}>"

    def input(self, primal, tangent) -> JVPTracer:
        """A new input with its tangent (parent values of the same shape and dtype)."""
        return JVPTracer(self, _as_value(primal), tangent)

    def record(self, op, args, params):
        vals, tans = _operands(self, JVPTracer, args, "_tangent")
        parent = self.parent
        out = _bind_in(parent, op, vals, params)
        if tans is None or op.zero_grad:
            return out
        outs = tuple(_as_value(o) for o in out) if op.multiple_results else (_as_value(out),)
        if not op.multiple_results and outs[0].dtype.kind not in "fc":
            return out
        rule = op.jvp
        if rule is None or not op.differentiable:
            raise no_jvp_error(op, params, f"called at {source_line(user_source())}")
        token = CURRENT_TRACE.set(parent)
        stok = (SOURCE_OVERRIDE.set(rule_source(_record_source(parent), op.name))
                if parent is not None else None)
        try:
            touts = rule(tuple(vals), tuple(tans), outs, **params)
        finally:
            if stok is not None:
                SOURCE_OVERRIDE.reset(stok)
            CURRENT_TRACE.reset(token)
        res = []
        token = CURRENT_TRACE.set(parent)
        try:
            for o, t in zip(outs, touts):
                if t is None or o.dtype.kind not in "fc":
                    res.append(o)
                else:
                    if not hasattr(t, "shape"):   # a rule returned a Python number
                        t = np.asarray(t, o.dtype)
                    if t.shape != o.shape or t.dtype != o.dtype:
                        t = _fit(t, o, op.name)
                    res.append(JVPTracer(self, o, t))
        finally:
            CURRENT_TRACE.reset(token)
        return tuple(res) if op.multiple_results else res[0]


# --------------------------------------------------------------------------------------------
# Batching
# --------------------------------------------------------------------------------------------

class BatchTracer(_EagerTracer):
    """One example of a batch: ``_primal`` is the whole batch (a parent value) and
    ``_bdim`` the axis that carries it. Shape and dtype are those of one example."""

    __slots__ = ("_bdim",)

    def __init__(self, trace, primal, bdim):
        self._trace = trace
        self._primal = primal
        self._bdim = bdim
        self._v = None

    @property
    def shape(self):
        s = self._primal.shape
        d = self._bdim
        return tuple(s[:d]) + tuple(s[d + 1:])

    @property
    def aval(self) -> AVal:
        return AVal(self.shape, self._primal.dtype)

    @property
    def ndim(self):
        return len(self._primal.shape) - 1

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def _differentiated(self) -> bool:
        p = self._primal
        return isinstance(p, Tracer) and p._differentiated()

    def _abstract(self, why: str):
        from .errors import ConcretizationError
        return ConcretizationError(
            f"{why} of a value that ft.vmap batches was needed, at "
            f"{source_line(user_source())}: each example may take another path, so Python "
            "control flow cannot decide it. Use fnp.where(...) to select per example, or "
            "ft.cond / ft.switch (which batch), or leave the argument out of in_axes.")

    @property
    def value(self):
        self._live()
        raise self._abstract("the concrete value")

    def _concrete(self, why: str, truth: bool = False, convert: bool = True):
        self._live()
        raise self._abstract(why)

    def __bool__(self):
        self._live()
        raise self._abstract("bool()")


class BatchTrace(Trace):
    """Batching, eagerly: every op that reads a batched value runs its batch rule at once,
    in the parent (one batched op per op, never a loop over examples)."""

    def __init__(self, parent: Trace | None, size: int):
        super().__init__(parent)
        self.axis_size = size

    def __repr__(self):
        return f"<BatchTrace {self.id} level {self.level} size {self.axis_size}>"

    def input(self, batch, bdim: int) -> BatchTracer:
        """A new batched input: ``batch`` (a parent value) carries the batch on ``bdim``."""
        return BatchTracer(self, _as_value(batch), bdim)

    def record(self, op, args, params):
        vals, dims = _operands(self, BatchTracer, args, "_bdim")
        parent = self.parent
        if dims is None:
            return _bind_in(parent, op, vals, params)
        rule = rule_for(op)
        if rule is None:
            raise MissingRuleError(
                f"vmap: {op.name} has no batching rule (called at "
                f"{source_line(user_source())}); functrace never falls back to a "
                "per-example loop")
        token = CURRENT_TRACE.set(parent)
        try:
            outs, odims = rule(list(vals), list(dims), **params)
        finally:
            CURRENT_TRACE.reset(token)
        res = [o if d is None else BatchTracer(self, _as_value(o), d)
               for o, d in zip(outs, odims)]
        return tuple(res) if op.multiple_results else res[0]
