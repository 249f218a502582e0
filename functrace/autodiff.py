"""Reverse mode as a graph transform: ``vjp_graph(graph, wrt) -> graph``.

Owns the backward pass (and, later, ``jvp_graph``). Imports core, tracing, ops and passes;
never the API layer, numpy/ or a backend.

How the backward pass works:
* A new trace is opened whose equation list *starts as the forward graph's equations* (the
  graph is immutable, so its Vars and Eqns are reused as they are: no re-tracing).
* Activity analysis marks the variables that depend on a ``wrt`` input through
  differentiable (float or complex) values; only active equations get a rule call.
* The equations are walked in reverse. Each op's vjp rule is ordinary functrace code written
  with op-level functions, so calling it *records* the gradient equations into the same trace:
  the result is a graph made of ops that have rules themselves, and grad(grad(f)) needs nothing
  special. Rules run with the forward equation's source line, so gradient equations point to
  the user's code.
* Cotangents are summed where a value fans out; a missing cotangent is a symbolic zero
  (``None``) that costs nothing; zeros are materialised only for a requested gradient nobody
  reached. A cotangent of a 0-d operand of an elementwise op is summed to 0-d here, the one
  place that un-broadcasts.
* The rules reference only the forward values they need, and the interpreters free each value
  after its last use, so only those values stay alive (MXNet's DeclareBackwardDependency, found
  here by tracing the rule once: ``rule_dependency``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import caches, ops
from .core import AVal, Eqn, Graph, Lit, Var
from .errors import FunctraceTypeError, MissingRuleError, ShapeError, where
from .tracing import COTANGENTS_WANTED as _wanted
from .tracing import CURRENT_TRACE as _current
from .tracing import SOURCE_OVERRIDE as _source_override
from .tracing import Trace, Tracer, source_line, user_source

__all__ = ["vjp_graph", "jvp_graph", "active_vars", "zeros_like", "rule_dependency", "fit_to",
           "CustomVjpRule", "CustomJvpRule", "no_jvp_error", "forward_mode_blocker",
           "bind_nondiff"]


def _differentiable(aval: AVal) -> bool:
    return aval.dtype.kind in "fc"


def active_vars(g: Graph, wrt: Sequence[int]) -> set[Var]:
    """Variables that depend on the inputs ``wrt`` through differentiable values."""
    active = {g.inputs[i] for i in wrt if _differentiable(g.inputs[i].aval)}
    for e in g.eqns:
        if e.op.zero_grad:
            continue
        if any(isinstance(a, Var) and a in active for a in e.inputs):
            for o in e.outputs:
                if _differentiable(o.aval):
                    active.add(o)
    return active


def zeros_like(aval: AVal):
    z = np.zeros((), aval.dtype)
    return ops.broadcast_in_dim(z, aval.shape, ()) if aval.shape else z


def _value_aval(x) -> AVal:
    if isinstance(x, Tracer):
        return x.aval
    return AVal.of(np.asarray(x))


def fit_to(ct, shape: tuple, dtype: np.dtype, op_name: str):
    """Make a rule's cotangent (or tangent) ``ct`` match its primal's ``shape`` and
    ``dtype``: sum a broadcast 0-d operand's cotangent, broadcast a 0-d operand's tangent,
    keep the primal dtype (a real cotangent for a complex primal is cast). The graph
    transforms and the eager tapes both use it: the one place that un-broadcasts."""
    cs = ct.shape if hasattr(ct, "shape") else np.shape(ct)
    if cs != shape:
        if shape == ():
            ct = ops.reduce_sum(ct, tuple(range(len(cs))))
        elif cs == ():
            # forward mode: only the 0-d operand of a broadcasting elementwise op has a
            # tangent (add(x, mean(w)) with x constant): the output's tangent is broadcast
            ct = ops.broadcast_in_dim(ct, tuple(shape), ())
        else:
            raise ShapeError(f"the rule of {op_name} returned a value of shape {cs} for an "
                             f"operand of shape {shape} ({where()})")
    cdt = ct.dtype if hasattr(ct, "dtype") else np.asarray(ct).dtype
    if cdt != dtype:
        if dtype.kind == "f" and cdt.kind == "c":
            ct = ops.real(ct)
        ct = ops.convert_element_type(ct, dtype)
    return ct


def _fit(ct, aval: AVal, eqn: Eqn):
    return fit_to(ct, aval.shape, aval.dtype, eqn.op.name if eqn else "a custom function")


def _extending_trace(g: Graph, values: Sequence | None = None):
    """A trace whose equations start as ``g``'s (reused as they are: graphs are immutable),
    and a function giving the value of an atom of ``g`` in it. ``values`` (one per input of
    ``g``: an array, a tracer of an enclosing trace, or None) let rules read concrete values
    on demand, as a trace of concrete inputs does."""
    trace = Trace(_current.get())
    trace.inputs = list(g.inputs)
    trace.n_explicit = len(g.inputs)
    for k, v in enumerate(g.inputs):
        x = values[k] if values is not None else None
        trace.sources[v] = (x if x is None or isinstance(x, Tracer | np.ndarray)
                            else np.asarray(x))
    trace.eqns = list(g.eqns)
    for e in g.eqns:
        for o in e.outputs:
            trace.producer[o] = e

    def val(a):
        return a.val if isinstance(a, Lit) else Tracer(trace, a)
    return trace, val


def vjp_graph(g: Graph, wrt: Sequence[int], seeds: Sequence,
              values: Sequence | None = None) -> Graph:
    """The joint forward+backward graph of ``g``.

    Args:
        g: a graph.
        wrt: indices of the inputs to differentiate with respect to.
        seeds: one entry per output of ``g``: ``"input"`` (the cotangent becomes a new graph
            input, appended after ``g``'s inputs in output order), a numpy array (a constant
            cotangent, e.g. ``1.0`` for ``grad``), or ``None`` (zero: aux or integer outputs).
        values: the values of ``g``'s inputs where the caller has them (arrays, or tracers of
            the current trace): rules that run Python control flow on values (a custom_vjp's
            ``fwd`` with a ``while``) may then read them. The result is then specialised to
            those values (decisions read through a tracer are guards of its trace): use it
            for these values only.

    Returns:
        A graph with inputs ``g.inputs + cotangent inputs`` and outputs
        ``g.outputs + one gradient per wrt input`` (gradients have the primal's dtype).
    """
    trace, val = _extending_trace(g, values)

    active = active_vars(g, wrt)
    ct_env: dict[Var, object] = {}

    def accumulate(v, ct):
        prev = ct_env.get(v)
        ct_env[v] = ct if prev is None else ops.add(prev, ct)

    token = _current.set(trace)
    try:
        for out, seed in zip(g.outputs, seeds):
            if seed is None or not isinstance(out, Var) or out not in active:
                if isinstance(seed, str):
                    trace.new_input(out.aval)   # keep the calling convention
                continue
            if isinstance(seed, str):
                accumulate(out, trace.new_input(out.aval))
            else:
                accumulate(out, np.asarray(seed, out.aval.dtype))
        for e in reversed(g.eqns):
            if not any(o in ct_env for o in e.outputs):
                continue
            cts = tuple(ct_env.pop(o, None) for o in e.outputs)
            if not any(isinstance(a, Var) and a in active for a in e.inputs):
                continue
            if e.op.zero_grad:
                continue
            rule = e.op.vjp
            if rule is None or not e.op.differentiable:
                raise MissingRuleError(
                    f"cannot differentiate through {e.op.name}: it "
                    + ("is not differentiable (its output is discrete)"
                       if not e.op.differentiable else "has no vjp rule")
                    + f"; recorded at {source_line(e.source)}. Wrap its input in "
                    "ft.stop_gradient(...) if no gradient should flow through it.")
            stok = _source_override.set(e.source)
            wtok = _wanted.set(tuple(isinstance(a, Var) and a in active for a in e.inputs))
            try:
                in_cts = rule(cts, tuple(val(a) for a in e.inputs),
                              tuple(val(o) for o in e.outputs), **e.params)
            finally:
                _wanted.reset(wtok)
                _source_override.reset(stok)
            for a, ct in zip(e.inputs, in_cts):
                if ct is None or not isinstance(a, Var) or a not in active:
                    continue
                accumulate(a, _fit(ct, a.aval, e))
        grads = []
        for i in wrt:
            v = g.inputs[i]
            ct = ct_env.get(v)
            grads.append(ct if ct is not None else zeros_like(v.aval))
        out_atoms = list(g.outputs) + [trace.to_atom(x) for x in grads]
    finally:
        _current.reset(token)
        trace.active = False
    return Graph(trace.inputs, trace.eqns, out_atoms)


def no_jvp_error(op, params, place: str) -> MissingRuleError:
    """The error for pushing a tangent through ``op``, which has no jvp rule (or is not
    differentiable); ``place`` says where it was called. ``err.missing_jvp`` is True when
    reverse mode would work (ft.jacobian and ft.hessian use it to pick reverse mode)."""
    if op.name == "custom_vjp_call":
        name = params["rule"].name
        err = MissingRuleError(
            f"forward mode (jvp, jacfwd, hessian's outer pass) cannot go through the "
            f"custom_vjp function {name}: a custom_vjp defines only a reverse-mode rule, as in "
            f"JAX ({place}). Fix: use reverse mode (ft.grad, ft.vjp, ft.jacrev, or "
            f"ft.jacobian / ft.hessian, which pick it themselves), or define {name} with "
            "ft.custom_jvp, whose rule serves both modes.")
    else:
        err = MissingRuleError(
            f"cannot push a tangent through {op.name}: it "
            + ("is not differentiable" if not op.differentiable else "has no jvp rule")
            + f"; {place}. Wrap its input in ft.stop_gradient(...) if no derivative should "
            "flow through it.")
    err.missing_jvp = op.differentiable and op.vjp is not None
    return err


def forward_mode_blocker(g: Graph):
    """The first equation of ``g`` (sub-graphs of control-flow ops included) that forward
    mode cannot differentiate but reverse mode can (a ``custom_vjp`` call), or None."""
    for e in g.eqns:
        op = e.op
        if op.jvp is None and op.vjp is not None and op.differentiable and not op.zero_grad:
            return e
        for p in e.params.values():
            for sub in (p if isinstance(p, tuple) else (p,)):
                if isinstance(sub, Graph):
                    hit = forward_mode_blocker(sub)
                    if hit is not None:
                        return hit
    return None


def jvp_graph(g: Graph, wrt: Sequence[int], values: Sequence | None = None) -> Graph:
    """The forward-mode graph of ``g``: tangents pushed through every active equation.

    Args:
        g: a graph.
        wrt: indices of the inputs that get a tangent input.
        values: the values of ``g``'s inputs where known (as for ``vjp_graph``).

    Returns:
        A graph with inputs ``g.inputs + one tangent per wrt input`` (the primal's type) and
        outputs ``g.outputs + one tangent per output`` (zeros where no tangent reaches an
        output; integer outputs get a zero tangent of their own type).

    The forward equations are reused as they are; tangent equations are appended after them,
    recorded by each op's jvp rule (written with op-level functions, so a jvp graph can be
    differentiated again in either mode). A tangent that is ``None`` is a symbolic zero.
    """
    trace, val = _extending_trace(g, values)

    tan: dict[Var, object] = {}
    token = _current.set(trace)
    try:
        for i in wrt:
            v = g.inputs[i]
            t = trace.new_input(v.aval)
            if _differentiable(v.aval):
                tan[v] = t
        for e in g.eqns:
            tins = [tan.get(a) if isinstance(a, Var) else None for a in e.inputs]
            if all(t is None for t in tins) or e.op.zero_grad:
                continue
            if not all(_differentiable(o.aval) for o in e.outputs) and not \
                    e.op.multiple_results:
                continue
            rule = e.op.jvp
            if rule is None or not e.op.differentiable:
                raise no_jvp_error(e.op, e.params, f"recorded at {source_line(e.source)}")
            stok = _source_override.set(e.source)
            try:
                touts = rule(tuple(val(a) for a in e.inputs), tuple(tins),
                             tuple(val(o) for o in e.outputs), **e.params)
            finally:
                _source_override.reset(stok)
            for o, t in zip(e.outputs, touts):
                if t is not None and _differentiable(o.aval):
                    tan[o] = _fit(t, o.aval, e)
        outs = []
        for a in g.outputs:
            t = tan.get(a) if isinstance(a, Var) else None
            outs.append(t if t is not None else zeros_like(a.aval))
        out_atoms = list(g.outputs) + [trace.to_atom(x) for x in outs]
    finally:
        _current.reset(token)
        trace.active = False
    return Graph(trace.inputs, trace.eqns, out_atoms)


# --------------------------------------------------------------------------------------------
# Which forward values a vjp rule reads (MXNet's DeclareBackwardDependency, found by tracing)
# --------------------------------------------------------------------------------------------

# (op, params, operand types or literals, output types, active) -> (save_in, save_out): small
# values, but keys may hold literal arrays, so bounded like every cache (functrace.caches)
_dep_cache = caches.LRU("autodiff.rule_dependency", scale=16)


def rule_dependency(op, params, in_key: tuple, out_avals: tuple, active: tuple):
    """Which inputs and outputs of an equation its vjp rule reads: ``(save_in, save_out)``.

    ``in_key`` holds the input AVal (a Var operand) or the Lit itself; ``active`` says which
    inputs carry a gradient. The rule is traced on abstract values (as vjp_graph would run it)
    and what the pruned gradient graph reads is what must be kept. Cached per signature. Any
    failure keeps everything, which is always correct.
    """
    n_in, n_out = len(in_key), len(out_avals)
    if op.zero_grad or not any(active):
        return (False,) * n_in, (False,) * n_out
    if op.vjp is None or not op.differentiable:   # backward will say so, naming the op
        return (False,) * n_in, (False,) * n_out
    key = (op.name, params, in_key, out_avals, active)
    try:
        hit = _dep_cache.get(key)
    except TypeError:   # an unhashable param: analyse without caching
        key, hit = None, None
    if hit is not None:
        return hit
    trace = Trace(None)
    ins = [trace.new_input(k) if isinstance(k, AVal) else k.val for k in in_key]
    outs = [trace.new_input(a) for a in out_avals]
    cts = tuple(trace.new_input(a) if a.dtype.kind in "fc" else None for a in out_avals)
    token = _current.set(trace)
    try:
        got = op.vjp(cts, tuple(ins), tuple(outs), **params)
        res = [trace.to_atom(c) for c, act in zip(got, active, strict=True)
               if act and c is not None]
    except Exception:   # a rule that needs values (or fails): keep everything
        res = None
    finally:
        _current.reset(token)
        trace.active = False
    if res is None:
        result = ((True,) * n_in, (True,) * n_out)
    else:
        from .passes.simplify import dce
        g = dce(Graph(trace.inputs, trace.eqns, res))
        used = {a for e in g.eqns for a in e.inputs if isinstance(a, Var)}
        used.update(a for a in g.outputs if isinstance(a, Var))
        result = (tuple(isinstance(t, Tracer) and t._var in used for t in ins),
                  tuple(t._var in used for t in outs))
    if key is not None:
        _dep_cache[key] = result
    return result


# --------------------------------------------------------------------------------------------
# Rules of the ops whose rules are transforms of sub-graphs (checkpoint, custom_vjp_call,
# custom_jvp_call: declared in ops/control.py, below this layer; their rules are attached here)
# --------------------------------------------------------------------------------------------

from .ops.control import checkpoint_p, custom_jvp_call_p, custom_vjp_call_p  # noqa: E402
from .tracing import bind, eval_graph, trace_to_graph  # noqa: E402


def _float_inputs(g: Graph) -> list[int]:
    return [i for i, v in enumerate(g.inputs) if _differentiable(v.aval)]


def _checkpoint_vjp(cts, ins, outs, *, graph, prevent_cse=True):
    wrt = _float_inputs(graph)
    seeds = ["input" if ct is not None else None for ct in cts]
    # the values let a custom rule inside run Python control flow on them; the backward
    # graph is bound right here, for these values only
    joint = vjp_graph(graph, wrt, seeds, values=ins)
    from .passes.simplify import dce
    n_out = len(graph.outputs)
    bwd = dce(Graph(joint.inputs, joint.eqns, joint.outputs[n_out:]))
    ct_args = [ct for ct in cts if ct is not None]
    # the backward pass is itself a checkpoint: its forward recomputation stays inside it,
    # hidden from CSE with the original forward equations
    grads = bind(checkpoint_p, *ins, *ct_args, graph=bwd, prevent_cse=prevent_cse)
    res = [None] * len(ins)
    for i, gval in zip(wrt, grads):
        res[i] = gval
    return tuple(res)


def _checkpoint_jvp(primals, tangents, outs, *, graph, prevent_cse=True):
    # the tangent map of the sub-graph, itself a checkpoint: it recomputes what it needs
    # from the primals instead of keeping the forward pass's intermediates
    wrt = [i for i, t in enumerate(tangents)
           if t is not None and _differentiable(graph.inputs[i].aval)]
    joint = jvp_graph(graph, wrt, values=primals)
    from .passes.simplify import dce
    tangent_graph = dce(Graph(joint.inputs, joint.eqns, joint.outputs[len(graph.outputs):]))
    return tuple(bind(checkpoint_p, *primals, *[tangents[i] for i in wrt],
                      graph=tangent_graph, prevent_cse=prevent_cse))


checkpoint_p.vjp = _checkpoint_vjp
checkpoint_p.jvp = _checkpoint_jvp


class _RuleKey:
    """Equality and hashing of the custom rule params: by what the rule runs (the user's
    custom function object and rule functions, the trees, the nondiff values), so that a
    graph read back from JSON (whose rule is rebuilt from the registry) equals the graph
    written. A rule without that description (a placeholder, an unhashable nondiff value)
    is equal only to itself."""

    __slots__ = ()

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not type(self):
            return False
        k = self._key()
        return k is not None and k == other._key()

    def __hash__(self):
        k = self._key()
        return id(self) if k is None else hash(k)

    def _key(self):
        if self.batched is not None:
            inner, size = self.batched
            k = inner._key()
            return None if k is None else ("batched", k, size)
        o = self.origin
        if o is None or o[0] is None:
            return None
        try:
            hash(o[-2])
        except TypeError:
            return None
        return (tuple(id(x) for x in o[:-2]), o[-2], o[-1], self.in_tree, self.out_tree)


class CustomVjpRule(_RuleKey):
    """A user's custom_vjp (fwd, bwd) pair (a graph param).

    ``fwd`` is traced lazily, only when the call is differentiated, so that ``fwd`` may call
    the custom function itself (as in JAX's examples) without recursing. ``fwd`` and ``bwd``
    take the differentiated arguments only (nondiff arguments are bound into them).
    ``origin`` is ``(custom_vjp object, its fwd, its bwd, nondiff, n_args)`` (``nondiff``:
    ``((position, value), ...)``) and ``batched`` is ``(rule, axis size)`` for a rule made by
    vmap: what graph JSON stores (``custom_rules``)."""

    __slots__ = ("fwd", "bwd", "in_tree", "out_tree", "name", "origin", "batched")

    def __init__(self, fwd, bwd, in_tree, out_tree, name, origin=None, batched=None):
        self.fwd, self.bwd, self.in_tree, self.out_tree = fwd, bwd, in_tree, out_tree
        self.name = name
        self.origin, self.batched = origin, batched

    def __repr__(self):
        return f"<custom_vjp rule of {self.name}>"


def _defined_at(fn) -> str:
    """'(defined at file:line) ' for a user's rule function, for error messages."""
    fn = getattr(fn, "__wrapped__", fn)      # a rule with its nondiff arguments bound
    code = getattr(fn, "__code__", None)
    return f"(defined at {code.co_filename}:{code.co_firstlineno}) " if code else ""


def _describe(x) -> str:
    if isinstance(x, tuple | list):
        return f"a {type(x).__name__} of {len(x)}"
    return f"a {type(x).__name__}"


def _custom_vjp_rule(cts, ins, outs, *, fun_graph, rule):
    from . import tree_util
    args = tree_util.tree_unflatten(rule.in_tree, list(ins))
    res = rule.fwd(*args)
    if not isinstance(res, tuple) or len(res) != 2:
        raise FunctraceTypeError(
            f"the custom_vjp fwd function of {rule.name} {_defined_at(rule.fwd)}must return "
            f"(output, residuals); it returned {_describe(res)} ({where()})")
    residuals = res[1]
    ct_leaves = [ct if ct is not None else zeros_like(o.aval)
                 for ct, o in zip(cts, fun_graph.outputs)]
    ct_tree = tree_util.tree_unflatten(rule.out_tree, ct_leaves)
    got = rule.bwd(residuals, ct_tree)
    n_args = len(args)
    bwd = f"the custom_vjp bwd function of {rule.name} {_defined_at(rule.bwd)}"
    if not isinstance(got, tuple | list) or len(got) != n_args:
        raise FunctraceTypeError(
            f"{bwd}must return a tuple with one cotangent per argument ({n_args}), got "
            f"{_describe(got)}. Fix: return (g,) for one argument ({where()})")
    flat = []
    for k, (r, a) in enumerate(zip(got, args)):
        a_leaves = tree_util.tree_leaves(a)
        n = len(a_leaves)
        leaves = tree_util.tree_leaves(r) if r is not None else [None] * n
        if len(leaves) != n:
            raise FunctraceTypeError(f"{bwd}returned {len(leaves)} cotangent leaves for "
                                     f"argument {k}, which has {n} ({where()})")
        for c, p in zip(leaves, a_leaves):
            if c is None:
                continue
            cav = _ct_aval(c, f"{bwd}returned a cotangent for argument {k} of type "
                              f"{type(c).__name__}")
            pav = _value_aval(p)
            if cav.shape != pav.shape and pav.shape != () and cav.shape != ():
                raise ShapeError(f"{bwd}returned a cotangent of shape {cav.shape} for "
                                 f"argument {k}, of shape {pav.shape} ({where()})")
        flat.extend(leaves)
    return tuple(flat)


def _ct_aval(c, what: str) -> AVal:
    """The type of a cotangent a user's rule returned; FunctraceTypeError if not an array."""
    if isinstance(c, Tracer):
        return c.aval
    a = np.asarray(c) if not hasattr(c, "dtype") else c
    if np.dtype(a.dtype).kind not in "biufc":
        raise FunctraceTypeError(f"{what} with dtype {a.dtype}: cotangents are float (or "
                                 f"complex) arrays ({where()})")
    return AVal(tuple(a.shape), np.dtype(a.dtype))


custom_vjp_call_p.vjp = _custom_vjp_rule


def _trace_custom(fun, args, kind):
    """Trace a custom-rule function on flat leaves: (leaves, in_tree, graph, out_tree)."""
    from . import tree_util
    leaves, in_tree = tree_util.tree_flatten(tuple(args))
    box = {}

    def flat_fun(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, list(xs)))
        ol, box["out"] = tree_util.tree_flatten(out)
        return ol

    tr = trace_to_graph(flat_fun, leaves)
    if tr.captured:
        raise TypeError(f"{kind} function {getattr(fun, '__name__', '?')} closes over a "
                        "value of an enclosing transform; pass it as an argument instead")
    return leaves, in_tree, tr.graph, box["out"]


def _split_nondiff(args, nums, kind: str, name: str):
    """(the differentiated arguments, nondiff: ``((position, value), ...)``) for a custom
    rule with ``nondiff_argnums`` ``nums``."""
    from . import tree_util
    n = len(args)
    if nums and nums[-1] >= n:
        raise FunctraceTypeError(
            f"{kind} function {name} has nondiff_argnums {nums}, but was called with {n} "
            f"argument{'s' if n != 1 else ''} ({where()})")
    for i in nums:
        if any(isinstance(x, Tracer) for x in tree_util.tree_leaves(args[i])):
            raise FunctraceTypeError(
                f"{kind} function {name}: argument {i} is in nondiff_argnums but holds a value "
                f"of an enclosing transform (a traced array), at {source_line(user_source())}. "
                "nondiff arguments are fixed Python values (functions, shapes, flags), as in "
                "JAX. Fix: pass it as an ordinary argument (its cotangent may be None), or "
                "close over a concrete value.")
    return ([a for i, a in enumerate(args) if i not in nums],
            tuple((i, args[i]) for i in nums))


def _merger(nondiff, n: int):
    """diff args -> all ``n`` args, with the nondiff values at their positions."""
    static = dict(nondiff)

    def merge(diff):
        it = iter(diff)
        return tuple(static[i] if i in static else next(it) for i in range(n))
    return merge


def _bound(fn, wrapper):
    """``wrapper`` standing for the user's ``fn`` (named after it, for error messages)."""
    wrapper.__wrapped__ = fn
    wrapper.__name__ = getattr(fn, "__name__", "rule")
    return wrapper


def bind_nondiff(nondiff, n: int, fun=None, fwd=None, bwd=None, jvp=None):
    """The user's functions with the nondiff values bound (JAX's conventions: ``fun`` and
    ``fwd`` take them at their positions, ``bwd`` and a jvp rule as leading arguments);
    None for those not given. Without nondiff arguments, the functions themselves."""
    if not nondiff:
        return fun, fwd, bwd, jvp
    merge, vals = _merger(nondiff, n), [v for _, v in nondiff]
    return (fun and _bound(fun, lambda *a: fun(*merge(a))),
            fwd and _bound(fwd, lambda *a: fwd(*merge(a))),
            bwd and _bound(bwd, lambda res, ct: bwd(*vals, res, ct)),
            jvp and _bound(jvp, lambda ps, ts: jvp(*vals, ps, ts)))


def trace_custom_vjp(fun, fwd, bwd, args, nondiff_argnums=(), custom=None):
    """Bind ``custom_vjp_call`` for ``args``; returns the outputs with fun's structure.
    Arguments in ``nondiff_argnums`` are bound into ``fun``, ``fwd`` and ``bwd`` (as their
    leading arguments, for ``bwd``): the call's operands are the other arguments. ``custom``
    is the user's ``ft.custom_vjp`` object (what graph JSON names)."""
    from . import tree_util
    name = getattr(fun, "__name__", "f")
    n, nondiff = len(args), ()
    if nondiff_argnums:
        args, nondiff = _split_nondiff(args, nondiff_argnums, "custom_vjp", name)
    fun_b, fwd_b, bwd_b, _ = bind_nondiff(nondiff, n, fun=fun, fwd=fwd, bwd=bwd)
    leaves, in_tree, graph, out_tree = _trace_custom(fun_b, args, "custom_vjp")
    rule = CustomVjpRule(fwd_b, bwd_b, in_tree, out_tree, name,
                         origin=(custom, fwd, bwd, nondiff, n))
    outs = bind(custom_vjp_call_p, *leaves, fun_graph=graph, rule=rule)
    return tree_util.tree_unflatten(out_tree, list(outs))


# --------------------------------------------------------------------------------------------
# custom_jvp: a user jvp rule; reverse mode transposes it by differentiating the (linear)
# tangent map t -> rule(x, t) with the ordinary vjp machinery
# --------------------------------------------------------------------------------------------

class CustomJvpRule(_RuleKey):
    """A user's custom_jvp rule (a graph param); ``origin`` is ``(custom_jvp object, its
    rule, nondiff, n_args)`` and ``batched`` as for ``CustomVjpRule``."""

    __slots__ = ("jvp", "in_tree", "out_tree", "name", "origin", "batched")

    def __init__(self, jvp, in_tree, out_tree, name, origin=None, batched=None):
        self.jvp, self.in_tree, self.out_tree, self.name = jvp, in_tree, out_tree, name
        self.origin, self.batched = origin, batched

    def __repr__(self):
        return f"<custom_jvp rule of {self.name}>"


def _tangent_outputs(rule, fun_graph, primals, tangents):
    from . import tree_util
    ps = tree_util.tree_unflatten(rule.in_tree, list(primals))
    ts = tree_util.tree_unflatten(rule.in_tree, [
        t if t is not None else zeros_like(v.aval) for t, v in zip(tangents, fun_graph.inputs)])
    res = rule.jvp(tuple(ps), tuple(ts))
    what = f"the custom_jvp rule of {rule.name} {_defined_at(rule.jvp)}"
    if not isinstance(res, tuple) or len(res) != 2:
        raise FunctraceTypeError(f"{what}must return (primal_out, tangent_out); it returned "
                                 f"{_describe(res)} ({where()})")
    t_leaves, t_tree = tree_util.tree_flatten(res[1])
    if t_tree != rule.out_tree:
        raise FunctraceTypeError(f"{what}returned a tangent with structure {t_tree}; the "
                                 f"function's output is {rule.out_tree} ({where()})")
    for t, o in zip(t_leaves, fun_graph.outputs):
        if t is not None:
            tav = _ct_aval(t, f"{what}returned a tangent of type {type(t).__name__}")
            if tav.shape != o.aval.shape and tav.shape != ():
                raise ShapeError(f"{what}returned a tangent of shape {tav.shape} for an "
                                 f"output of shape {o.aval.shape} ({where()})")
    return [_fit(t, o.aval, None) if t is not None else None
            for t, o in zip(t_leaves, fun_graph.outputs)]


def _custom_jvp_jvp(primals, tangents, outs, *, fun_graph, rule):
    return tuple(_tangent_outputs(rule, fun_graph, primals, tangents))


def _custom_jvp_vjp(cts, ins, outs, *, fun_graph, rule):
    wrt = [i for i, v in enumerate(fun_graph.inputs) if _differentiable(v.aval)]

    def tangent_map(*ts):
        full = [None] * len(ins)
        for i, t in zip(wrt, ts):
            full[i] = t
        return [t if t is not None else zeros_like(o.aval) for t, o in
                zip(_tangent_outputs(rule, fun_graph, ins, full), fun_graph.outputs)]

    zeros = [AVal(fun_graph.inputs[i].aval.shape, fun_graph.inputs[i].aval.dtype) for i in wrt]
    tr = trace_to_graph(tangent_map, zeros)       # linear in ts; ins are captured
    seeds = ["input" if ct is not None else None for ct in cts]
    joint = vjp_graph(tr.graph, list(range(len(wrt))), seeds)
    n_out = len(tr.graph.outputs)
    from .passes.simplify import dce
    bwd = dce(Graph(joint.inputs, joint.eqns, joint.outputs[n_out:]))
    args = [zeros_like(a) for a in zeros] + list(tr.captured) + [ct for ct in cts
                                                                 if ct is not None]
    grads = eval_graph(bwd, args)
    res = [None] * len(ins)
    for i, gval in zip(wrt, grads):
        res[i] = gval
    return tuple(res)


custom_jvp_call_p.jvp = _custom_jvp_jvp
custom_jvp_call_p.vjp = _custom_jvp_vjp


def trace_custom_jvp(fun, jvp_rule, args, nondiff_argnums=(), custom=None):
    """Bind ``custom_jvp_call`` for ``args``; returns the outputs with fun's structure.
    Arguments in ``nondiff_argnums`` are bound into ``fun`` and the rule (as its leading
    arguments): the call's operands, primals and tangents are the other arguments.
    ``custom`` is the user's ``ft.custom_jvp`` object (what graph JSON names)."""
    from . import tree_util
    name = getattr(fun, "__name__", "f")
    n, nondiff = len(args), ()
    if nondiff_argnums:
        args, nondiff = _split_nondiff(args, nondiff_argnums, "custom_jvp", name)
    fun_b, _, _, jvp_b = bind_nondiff(nondiff, n, fun=fun, jvp=jvp_rule)
    leaves, in_tree, graph, out_tree = _trace_custom(fun_b, args, "custom_jvp")
    rule = CustomJvpRule(jvp_b, in_tree, out_tree, name, origin=(custom, jvp_rule, nondiff, n))
    outs = bind(custom_jvp_call_p, *leaves, fun_graph=graph, rule=rule)
    return tree_util.tree_unflatten(out_tree, list(outs))
