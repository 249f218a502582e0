"""The public transforms: trace, grad, value_and_grad, vjp, jacrev, hessian, ...

Owns the pytree boundary (nothing below this file sees a pytree), argument checking with
user-facing errors, and the per-signature caches of traced and transformed graphs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import caches, tree_util
from .core import AVal, Graph, on_device
from .errors import FunctraceError
from .symbol import Symbol
from .tracing import Tracer, trace_to_graph

__all__ = ["trace", "make_graph", "flatten_fun"]


def _check_leaf_arg(x, i):
    if isinstance(x, Tracer | AVal | np.ndarray | np.generic | bool | int | float | complex) or (
            on_device(x)):
        if not isinstance(x, Tracer | AVal | bool | int | float | complex) and (
                np.dtype(x.dtype).kind not in "biufc"):
            raise TypeError(f"argument leaf {i}: arrays of dtype {x.dtype} cannot be traced "
                            "(use bool, integer, float or complex data)")
        return x
    if hasattr(x, "__array__"):
        a = np.asarray(x)
        if a.dtype.kind in "biufc":
            return a
    raise TypeError(f"argument leaf {i} is a {type(x).__name__} ({x!r:.50}), not an array; "
                    "pass arrays or numbers (non-array arguments can be closed over, or marked "
                    "static with jit's static_argnums)")


def _check_out_leaf(x, i):
    if isinstance(x, Tracer | np.ndarray | np.generic | bool | int | float | complex):
        if isinstance(x, np.ndarray | np.generic) and x.dtype.kind not in "biufc":
            raise TypeError(f"output leaf {i} has dtype {x.dtype}, which is not an array type")
        return x
    raise TypeError(f"the traced function returned a {type(x).__name__} ({x!r:.50}) as output "
                    f"leaf {i}; functions must return arrays (or pytrees of arrays)")


def flatten_fun(fun: Callable, in_tree) -> tuple[Callable, list]:
    """Wrap ``fun(*args, **kwargs)`` as a flat function; the output treedef lands in the box."""
    box: list = []

    def flat(*leaves):
        args, kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
        out = fun(*args, **kwargs)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return [_check_out_leaf(o, i) for i, o in enumerate(out_leaves)]
    return flat, box


def make_graph(fun: Callable, args: Sequence[Any], kwargs: dict | None = None):
    """Trace ``fun(*args, **kwargs)``; returns (Traced, in_tree, out_tree)."""
    leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs or {}))
    leaves = [_check_leaf_arg(x, i) for i, x in enumerate(leaves)]
    flat, box = flatten_fun(fun, in_tree)
    tr = trace_to_graph(flat, leaves)
    return tr, in_tree, box[0]


def trace(fun: Callable) -> Callable[..., Symbol]:
    """Trace ``fun`` into an immutable graph: ``ft.trace(f)(*example_args) -> Symbol``.

    Example arguments may be arrays, numbers, ``ft.ShapeDtype(shape, dtype)`` (abstract:
    Python control flow on their values is then an error), or pytrees of these.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> sym = ft.trace(lambda x: fnp.sum(x ** 2))(np.ones(3))
        >>> [e.op.name for e in sym.nodes]
        ['integer_pow', 'reduce_sum']
        >>> float(sym(np.array([1.0, 2.0, 3.0])))
        14.0
    """
    @functools.wraps(fun)
    def traced(*args, **kwargs) -> Symbol:
        tr, in_tree, out_tree = make_graph(fun, args, kwargs)
        if tr.captured:
            raise FunctraceError(
                "ft.trace(f) was called on values of an enclosing transform; trace the outer "
                "function instead (a Symbol must be closed)")
        return Symbol(tr.graph, in_tree, out_tree)
    return traced


# --------------------------------------------------------------------------------------------
# Reverse mode
# --------------------------------------------------------------------------------------------

import weakref  # noqa: E402

from . import ops as _ops  # noqa: E402
from .autodiff import vjp_graph  # noqa: E402
from .backends import numpy_ref  # noqa: E402
from .passes.simplify import optimize  # noqa: E402
from .tracing import _current, eval_graph  # noqa: E402

# fun -> {signature key: _Entry}; weak on fun so a dropped function frees its graphs
_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def clear_caches() -> None:
    """Forget every cached traced/differentiated graph (see docs/autodiff.md, caching) and
    every in-memory functrace cache (docs/executor.md, "Caches and memory")."""
    _cache.clear()
    caches.clear_all()


class _Entry:
    __slots__ = ("graph", "out_tree", "consts", "fingerprint", "extra")

    def __init__(self, graph, out_tree, consts, fingerprint, extra=None):
        self.graph, self.out_tree, self.consts = graph, out_tree, consts
        self.fingerprint, self.extra = fingerprint, extra


def _fingerprint(fun, depth: int = 0) -> tuple:
    """Identity of what ``fun`` reads from its closure and globals: a rebinding invalidates
    a cached graph. (Arrays mutated in place are caught by comparing the literals.) Functions
    in the closure are followed a few levels down, so ``jit(grad(f))`` notices a name that
    ``f`` closes over being rebound. (On every jitted call: kept to plain lookups.)"""
    f = getattr(fun, "__func__", fun)
    code = getattr(f, "__code__", None)
    if code is None:
        return ()
    g = f.__globals__
    # functrace's own wrappers (grad's, jit's) read only functrace's globals: not the user's
    out = [] if g.get("__name__", "").startswith("functrace.") else [
        id(g.get(n)) for n in code.co_names]
    for c in f.__closure__ or ():
        try:
            v = c.cell_contents
        except ValueError:       # an empty cell (a closure variable not assigned yet)
            out.append(None)
            continue
        out.append(id(v))
        if depth < 3 and type(v) is _FunctionType and v is not f:
            out.append(_fingerprint(v, depth + 1))
    return tuple(out)


_FunctionType = type(_fingerprint)


def _abstract_key(leaves):
    """Shape/dtype signature of the leaves (cheap: no AVal objects for numpy arrays)."""
    key = []
    for x in leaves:
        t = type(x)
        if t is np.ndarray:
            key.append((x.shape, x.dtype.str))
        elif t is float or t is int or t is complex or t is bool:
            key.append(t)
        elif isinstance(x, Tracer):
            key.append(x.aval)
        elif isinstance(x, AVal):
            key.append(x)
        else:
            key.append(AVal.of(x))
    return tuple(key)


_SMALL_CONST = 1 << 16   # bytes: smaller captured arrays are compared by their bytes


def _snapshot(orig, val: np.ndarray) -> tuple:
    """What a cache entry remembers of an array the trace captured as a constant. A device
    (GPU) array is remembered by identity only: comparing its contents would synchronise
    with the device on every call (rebinding the name is still noticed, see _fingerprint)."""
    if on_device(orig):
        return (orig, None, None, None)
    return (orig, val.shape, val.dtype,
            val.tobytes() if val.nbytes <= _SMALL_CONST else val)


def _unchanged(snap) -> bool:
    """Whether a captured array still holds the value the cached graph baked in (bytes
    compare: NaN equals NaN, so a constant holding NaN does not force a re-trace)."""
    orig, shape, dtype, saved = snap
    if shape is None:
        return True
    a = orig if type(orig) is np.ndarray else np.asarray(orig)
    if a.shape != shape or a.dtype != dtype:
        return False
    if type(saved) is bytes:
        return a.tobytes() == saved
    return np.array_equal(a, saved, equal_nan=a.dtype.kind in "fc")


def _cached_transform(kind: tuple, fun: Callable, args, kwargs, build, examples=None,
                      flat=None):
    """Trace ``fun`` at ``args`` and transform it with ``build(traced, in_tree, out_tree)``,
    reusing the result for the same abstract signature when no value decided control flow.

    ``examples(leaves)`` may replace the leaves used for tracing (vmap traces one example);
    ``flat`` is ``(leaves, in_tree)`` of ``(args, kwargs)`` when the caller already has it.
    Returns (graph, out_tree, extra, leaves, captured)."""
    leaves, in_tree = flat if flat is not None else tree_util.tree_flatten(
        (tuple(args), kwargs or {}))
    leaves = [_check_leaf_arg(x, i) for i, x in enumerate(leaves)]
    key = (kind, in_tree, _abstract_key(leaves))
    try:
        per_fun = _cache.get(fun)
    except TypeError:
        per_fun = None
    entry = per_fun.get(key) if per_fun is not None else None
    if entry is not None and entry.fingerprint == _fingerprint(fun) and all(
            _unchanged(snap) for snap in entry.consts):
        return entry.graph, entry.out_tree, entry.extra, leaves, []
    flat, box = flatten_fun(fun, in_tree)
    tr = trace_to_graph(flat, examples(leaves) if examples is not None else leaves)
    out_tree = box[0]
    graph, extra = build(tr, in_tree, out_tree)
    if not tr.concretized and not tr.captured:
        try:
            per_fun = _cache.setdefault(fun, {})
        except TypeError:
            per_fun = None
        if per_fun is not None:
            per_fun[key] = _Entry(graph, out_tree, [_snapshot(o, v) for o, v in tr.consts],
                                  _fingerprint(fun), extra)
    return graph, out_tree, extra, leaves, tr.captured


def _run(graph, args):
    """Evaluate a transformed graph: re-bind into an enclosing trace, or interpret."""
    if _current.get() is not None or any(isinstance(a, Tracer) for a in args):
        return eval_graph(graph, list(args))
    return numpy_ref.run(graph, args)


def _argnums_tuple(argnums, nargs):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"argnums={argnums!r} is out of range for {nargs} positional "
                             "argument(s)")
    return tuple(a % nargs for a in nums), single


def _wrt_leaf_indices(args, kwargs, nums):
    """Flat leaf indices (in the (args, kwargs) flattening) of the positional args ``nums``."""
    counts = [len(tree_util.tree_leaves(a)) for a in args]
    starts = np.cumsum([0] + counts)
    idx = []
    for n in nums:
        idx.extend(range(starts[n], starts[n] + counts[n]))
    return idx


def _check_wrt_dtypes(leaves, wrt, fname, holomorphic):
    for i in wrt:
        x = leaves[i]
        dt = np.dtype(x.dtype) if isinstance(x, Tracer | AVal) or on_device(x) else (
            np.asarray(x).dtype)
        if dt.kind not in "fc":
            raise TypeError(
                f"{fname} requires float (or complex) inputs to differentiate, but input leaf "
                f"{i} has dtype {dt}. Fix: pass it as a float array, e.g. x.astype(float), or "
                "leave it out of argnums.")
        if dt.kind == "c" and not holomorphic:
            pass   # a real-valued function of complex inputs is fine (JAX convention)


def _check_scalar_out(aval, fname, holomorphic):
    if aval.shape != ():
        raise TypeError(f"{fname} requires a scalar output, got shape {aval.shape}. Fix: "
                        "reduce it (e.g. fnp.sum(...)), or use ft.vjp / ft.jacrev for "
                        "non-scalar outputs.")
    if aval.dtype.kind == "c" and not holomorphic:
        raise TypeError(f"{fname} of a complex output needs holomorphic=True (or take the "
                        "real part / abs of the output first).")
    if aval.dtype.kind not in "fc":
        raise TypeError(f"{fname} requires a float output, got dtype {aval.dtype}. Fix: "
                        "compute the output in floating point.")


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """Return ``f(*args) -> (value, gradient)`` of a scalar-valued ``fun``.

    Args:
        fun: function of arrays (or pytrees of arrays) returning a float scalar, or
            ``(scalar, aux)`` when ``has_aux``.
        argnums: which positional argument(s) to differentiate; a tuple gives a tuple of
            gradients.
        has_aux: ``fun`` returns ``(value, aux)``; the result is ``((value, aux), grad)``.
        holomorphic: allow complex outputs (``fun`` must be holomorphic).

    Gradients have the dtype and pytree structure of the differentiated arguments. The traced
    and differentiated graph is cached per abstract signature (shapes, dtypes, structure); it
    is re-traced when that changes, when a value decided Python control flow, or when the
    arrays or names ``fun`` closes over change.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> v, g = ft.value_and_grad(lambda x: fnp.sum(x ** 2))(np.array([1.0, 2.0]))
        >>> float(v), g
        (5.0, array([2., 4.]))
    """
    return _value_and_grad(fun, argnums, has_aux, holomorphic, "value_and_grad", True)


def _value_and_grad(fun, argnums, has_aux, holomorphic, fname, want_value):
    def vg(*args, **kwargs):
        nums, single = _argnums_tuple(argnums, len(args))
        wrt = _wrt_leaf_indices(args, kwargs, nums)

        def build(tr, in_tree, out_tree):
            g = tr.graph
            if has_aux and not _is_pair(out_tree):
                raise TypeError("has_aux=True requires fun to return a pair (value, aux)")
            if not g.outputs:
                raise TypeError(f"{fname}: the function returned no array")
            _check_scalar_out(g.outputs[0].aval, fname, holomorphic)
            _warn_unsafe_where(g)
            seeds = [np.ones((), g.outputs[0].aval.dtype)] + [None] * (len(g.outputs) - 1)
            full = vjp_graph(g, wrt, seeds)
            if not want_value:   # keep aux outputs, drop the value: DCE may drop the forward
                n_aux = len(g.outputs) - 1
                keep = list(full.outputs[1:1 + n_aux]) + list(full.outputs[len(g.outputs):])
                full = Graph(full.inputs, full.eqns, keep)
            return optimize(full), None

        _check_wrt_dtypes(tree_util.tree_leaves((args, kwargs)), wrt, fname, holomorphic)
        graph, out_tree, _, leaves, captured = _cached_transform(
            (fname, tuple(wrt), has_aux), fun, args, kwargs, build)
        outs = _run(graph, list(leaves) + list(captured))
        n_out = out_tree.num_leaves
        if not want_value:   # the graph does not compute the value: outputs are aux, grads
            outs = [None] + list(outs)
        value = tree_util.tree_unflatten(out_tree, outs[:n_out])
        grads = outs[n_out:]
        per_arg = []
        off = 0
        for n in nums:
            k = len(tree_util.tree_leaves(args[n]))
            per_arg.append(tree_util.tree_unflatten(tree_util.tree_structure(args[n]),
                                                    grads[off:off + k]))
            off += k
        g = per_arg[0] if single else tuple(per_arg)
        return value, g

    vg.__name__ = f"{fname}({getattr(fun, '__name__', 'f')})"
    vg.__doc__ = fun.__doc__
    return vg


def _warn_unsafe_where(g):
    """Warn (once per traced graph) about selects whose untaken branch is singular."""
    import warnings

    from .errors import FunctraceWarning
    from .passes.simplify import cse
    from .passes.where_check import SINGULAR, find_unsafe_where
    from .tracing import source_line
    for sel, s, _ in find_unsafe_where(cse(g)):   # CSE: a repeated condition is one Var
        warnings.warn(
            f"where(...) at {source_line(sel.source)} selects between branches, one of which "
            f"computes {s.op.name} (at {source_line(s.source)}), which is singular where that "
            f"branch is not taken: its gradient can be NaN there. Guard the input (the "
            f"'double where': x_safe = fnp.where(cond, x, {SINGULAR[s.op.name][1]})), or "
            "wrap the function in ft.safe_where(f).", FunctraceWarning, stacklevel=4)


def safe_where(fun: Callable) -> Callable:
    """Rewrite ``fun``'s singular-branch selects to the double-where form (opt-in).

    ``where(c, log(x), 0)`` gets a NaN gradient where ``c`` is false and ``x <= 0``; under
    ``safe_where`` the ``log`` reads ``where(c, x, 1)`` instead, which changes nothing where
    the branch is taken and makes the untaken branch smooth.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> f = lambda x: fnp.sum(fnp.where(x > 0, fnp.log(x), 0.0))
        >>> ft.grad(ft.safe_where(f))(np.array([0.0, 2.0]))
        array([0. , 0.5])
    """
    from .passes.simplify import cse
    from .passes.where_check import make_where_safe

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        def build(tr, in_tree, out_tree):
            return make_where_safe(cse(tr.graph)), None
        graph, out_tree, _, leaves, captured = _cached_transform(
            ("safe_where",), fun, args, kwargs, build)
        return tree_util.tree_unflatten(out_tree, _run(graph, list(leaves) + list(captured)))
    return wrapped


def _is_pair(tree):
    try:
        ex = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    except Exception:
        return False
    return isinstance(ex, tuple | list) and len(ex) == 2


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable:
    """Return the gradient function of a scalar-valued ``fun`` (reverse mode).

    Composes with every transform: ``grad(grad(f))``, ``jit(grad(f))``, ``vmap(grad(f))``.
    With ``has_aux`` the result is ``(grad, aux)``. See ``value_and_grad`` for the arguments.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.grad(lambda x: fnp.sum(fnp.sin(x)))(np.zeros(2))
        array([1., 1.])
        >>> float(ft.grad(ft.grad(lambda x: x ** 3))(2.0))
        12.0
    """
    vg = _value_and_grad(fun, argnums, has_aux, holomorphic, "grad", False)

    def g(*args, **kwargs):
        value, gr = vg(*args, **kwargs)
        return (gr, value[1]) if has_aux else gr

    g.__name__ = f"grad({getattr(fun, '__name__', 'f')})"
    g.__doc__ = fun.__doc__
    return g


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``out, vjp_fn = ft.vjp(f, *primals)``; ``vjp_fn(ct)`` returns one cotangent per primal.

    The forward values the backward pass needs are computed once and kept by ``vjp_fn``; the
    rest are freed.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> out, pullback = ft.vjp(lambda x, y: x * y, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
        >>> pullback(np.ones(2))
        (array([3., 4.]), array([1., 2.]))
    """
    nums = tuple(range(len(primals)))
    wrt = _wrt_leaf_indices(primals, {}, nums)
    _check_wrt_dtypes(tree_util.tree_leaves(primals), wrt, "vjp", True)

    def build(tr, in_tree, out_tree):
        g = tr.graph
        n_main = g.outputs
        if has_aux:
            ex = tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
            n_main = len(tree_util.tree_leaves(ex[0]))
        else:
            n_main = len(g.outputs)
        seeds = ["input"] * n_main + [None] * (len(g.outputs) - n_main)
        full = optimize(vjp_graph(g, wrt, seeds))
        fwd, bwd = _split(full, len(g.inputs), len(g.outputs))
        return (fwd, bwd), n_main

    (fwd, bwd), out_tree, n_main, leaves, captured = _cached_transform(
        ("vjp_split", has_aux), fun, primals, {}, build)
    ins = list(leaves) + list(captured)
    fwd_outs = _run(fwd, ins)
    n_out = out_tree.num_leaves
    outs, residuals = fwd_outs[:n_out], fwd_outs[n_out:]
    value = tree_util.tree_unflatten(out_tree, outs)
    if has_aux:
        main_val, aux = value
    else:
        main_val = value
    main_tree = tree_util.tree_structure(main_val)
    out_avals = [_aval_any(o) for o in outs[:n_main]]

    def vjp_fn(ct):
        ct_leaves, tree = tree_util.tree_flatten(ct)
        if tree != main_tree:
            raise TypeError(f"vjp_fn expects a cotangent with the output's structure "
                            f"{main_tree}, got {tree}")
        cts = []
        for c, av in zip(ct_leaves, out_avals):
            c = c if isinstance(c, Tracer) else _ops._base.as_array(c, dtype=av.dtype)
            if _aval_any(c).shape != av.shape:
                raise ValueError(f"cotangent shape {_aval_any(c).shape} differs from the "
                                 f"output's {av.shape}")
            cts.append(c)
        gr = _run(bwd, list(residuals) + cts)
        res, off = [], 0
        for p in primals:
            k = len(tree_util.tree_leaves(p))
            res.append(tree_util.tree_unflatten(tree_util.tree_structure(p), gr[off:off + k]))
            off += k
        return tuple(res)

    return (value if not has_aux else main_val), vjp_fn if not has_aux else (vjp_fn, aux)


def _aval_any(x):
    return x.aval if isinstance(x, Tracer) else AVal.of(x)


def _split(g, n_primal_in: int, n_out: int):
    """Split a joint vjp graph into forward (primals -> outputs + residuals) and backward
    (residuals + cotangents -> gradients) graphs by dependence on the cotangent inputs."""
    from .core import Graph, Var
    ct_inputs = set(g.inputs[n_primal_in:])
    bwd_vars = set(ct_inputs)
    fwd_eqns, bwd_eqns = [], []
    for e in g.eqns:
        if any(isinstance(a, Var) and a in bwd_vars for a in e.inputs):
            bwd_eqns.append(e)
            bwd_vars.update(e.outputs)
        else:
            fwd_eqns.append(e)
    grads = g.outputs[n_out:]
    # residuals: forward vars (or primal inputs) read by the backward graph or returned as grads
    residuals = []
    seen = set()
    for a in [a for e in bwd_eqns for a in e.inputs] + list(grads):
        if isinstance(a, Var) and a not in bwd_vars and a not in seen:
            seen.add(a)
            residuals.append(a)
    fwd = dce(Graph(g.inputs[:n_primal_in], fwd_eqns, list(g.outputs[:n_out]) + residuals))
    bwd = Graph(residuals + list(g.inputs[n_primal_in:]), bwd_eqns, grads)
    return fwd, bwd


from .passes.simplify import dce  # noqa: E402


def stop_gradient(x):
    """The identity, with a zero derivative: gradients do not flow into ``x``.

    Example:
        >>> import functrace as ft
        >>> float(ft.grad(lambda x: x * ft.stop_gradient(x))(3.0))
        3.0
    """
    return tree_util.tree_map(lambda v: _ops.stop_gradient(v) if isinstance(v, Tracer)
                              else v, x)


# --------------------------------------------------------------------------------------------
# custom_vjp and checkpoint
# --------------------------------------------------------------------------------------------

class custom_vjp:
    """A function with a user-defined reverse-mode rule (JAX style).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> @ft.custom_vjp
        ... def clip_grad(x):
        ...     return x
        >>> clip_grad.defvjp(lambda x: (x, None), lambda res, g: (fnp.clip(g, -1.0, 1.0),))
        >>> ft.grad(lambda x: fnp.sum(clip_grad(x) * 5.0))(np.ones(2))
        array([1., 1.])

    ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, ct) -> tuple`` (one cotangent per
    argument, None for zero). Outside a transform the function simply runs. The backward
    function is written with functrace.numpy, so it can be differentiated again.
    """

    def __init__(self, fun: Callable):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        if self.fwd is None:
            raise TypeError(f"custom_vjp function {self.fun.__name__} has no rule: call "
                            ".defvjp(fwd, bwd) first")
        if _current.get() is None:
            return self.fun(*args)
        from .autodiff import trace_custom_vjp
        return trace_custom_vjp(self.fun, self.fwd, self.bwd, args)


class custom_jvp:
    """A function with a user-defined forward-mode rule (JAX style); reverse mode uses the
    same rule, transposed automatically.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> @ft.custom_jvp
        ... def log1pexp(x):
        ...     return fnp.log1p(fnp.exp(x))
        >>> @log1pexp.defjvp
        ... def _(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return log1pexp(x), t * (1.0 - 1.0 / (1.0 + fnp.exp(x)))
        >>> float(ft.grad(log1pexp)(100.0))
        1.0

    ``rule(primals, tangents) -> (primal_out, tangent_out)`` with ``primals`` and
    ``tangents`` tuples of the arguments; the tangent output must be linear in the tangents.
    """

    def __init__(self, fun: Callable):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.rule = None

    def defjvp(self, rule: Callable) -> Callable:
        self.rule = rule
        return rule

    def __call__(self, *args):
        if self.rule is None:
            raise TypeError(f"custom_jvp function {self.fun.__name__} has no rule: decorate "
                            "one with @f.defjvp first")
        if _current.get() is None:
            return self.fun(*args)
        from .autodiff import trace_custom_jvp
        return trace_custom_jvp(self.fun, self.rule, args)


def checkpoint(fun: Callable, prevent_cse: bool = True) -> Callable:
    """Rematerialisation: under differentiation, ``fun``'s intermediates are recomputed in the
    backward pass instead of being kept alive from the forward pass.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> f = ft.checkpoint(lambda x: fnp.sin(fnp.sin(x)))
        >>> float(ft.grad(lambda x: fnp.sum(f(x)))(np.zeros(1)))
        1.0
    """
    @functools.wraps(fun)
    def wrapped(*args):
        if _current.get() is None:
            return fun(*args)
        leaves, in_tree = tree_util.tree_flatten(tuple(args))
        flat, box = flatten_fun(lambda *a: fun(*a), tree_util.tree_structure(
            (tuple(args), {})))
        tr = trace_to_graph(lambda *xs: flat(*xs), leaves)
        from .autodiff import checkpoint_p
        outs = _ops_bind(checkpoint_p, *leaves, *tr.captured, graph=tr.graph,
                         prevent_cse=prevent_cse)
        return tree_util.tree_unflatten(box[0], list(outs))
    return wrapped


remat = checkpoint


def _ops_bind(op, *args, **params):
    from .tracing import bind
    return bind(op, *args, **params)
