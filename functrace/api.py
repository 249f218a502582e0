"""The public transforms: trace, grad, value_and_grad, vjp, jacrev, hessian, ...

Owns the pytree boundary of the reverse-mode transforms (nothing below the API layer sees a
pytree), custom rules (custom_vjp, custom_jvp, checkpoint) and stop_gradient. Argument checks
live in ``arguments``, running the user's function under a trace in ``running`` (both shared
with ``forward`` and ``jit``). Nothing here caches: only ``ft.jit`` does (``jit``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import caches, tree_util
from . import ops as _ops
from .arguments import (
    argnums_tuple,
    aval_of,
    check_argnums,
    check_callable,
    check_leaf_arg,
    check_out_leaf,
    check_scalar_out,
    check_wrt_dtypes,
    describe_out,
    flatten_fun,
    wrt_leaf_indices,
)
from .core import AVal
from .custom_rules import default_name, register_custom_rule
from .errors import (
    FunctraceTypeError,
    FunctraceValueError,
    ShapeError,
    where,
)
from .running import own, run_graph, taped, traced_transform, unwrap_tree
from .symbol import Symbol
from .tape import TapeTracer, unwrap
from .tracing import Tracer, current_trace, trace_to_graph

__all__ = ["trace", "make_graph", "flatten_fun"]


def make_graph(fun: Callable, args: Sequence[Any], kwargs: dict | None = None):
    """Trace ``fun(*args, **kwargs)``; returns (Traced, in_tree, out_tree)."""
    leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs or {}))
    leaves = [check_leaf_arg(x, i) for i, x in enumerate(leaves)]
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
    check_callable(fun, "trace")

    @functools.wraps(fun)
    def traced(*args, **kwargs) -> Symbol:
        tr, in_tree, out_tree = make_graph(fun, args, kwargs)
        if tr.captured:
            raise FunctraceValueError(
                "ft.trace(f) was called on values of an enclosing transform; trace the outer "
                f"function instead (a Symbol must be closed) ({where()})")
        return Symbol(tr.graph, in_tree, out_tree, tr.guards)
    return traced


def eval_shape(fun: Callable, *args, **kwargs):
    """The shapes and dtypes ``fun(*args, **kwargs)`` would return, computed without any
    arithmetic: ``fun`` is traced on abstract values (as ``jax.eval_shape``).

    Arguments may be arrays, numbers, ``ft.ShapeDtype(shape, dtype)`` or anything with
    ``.shape`` and ``.dtype``, in pytrees; the result has ``fun``'s output structure with an
    ``ft.ShapeDtype`` (``.shape``, ``.dtype``) per array. Python control flow on values is
    a ConcretizationError, as under ``ft.jit`` with abstract inputs.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> ft.eval_shape(lambda x, w: fnp.tanh(x @ w), ft.ShapeDtype((8, 3), np.float32),
        ...               np.ones((3, 5), np.float32))
        f32[8,5]
    """
    check_callable(fun, "eval_shape")
    leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs))

    def abstract(i, x):
        if isinstance(x, AVal):
            return x
        if isinstance(x, Tracer):
            return x.aval
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return AVal(tuple(x.shape), np.dtype(x.dtype))
        return aval_of(check_leaf_arg(x, i))
    flat, box = flatten_fun(fun, in_tree)
    tr = trace_to_graph(flat, [abstract(i, x) for i, x in enumerate(leaves)])
    return tree_util.tree_unflatten(box[0], [o.aval for o in tr.graph.outputs])


# --------------------------------------------------------------------------------------------
# The transforms: un-jitted transforms re-run the user's Python on every call (running.py)
# --------------------------------------------------------------------------------------------

def clear_caches() -> None:
    """Free every cache functrace keeps: traced and compiled ``ft.jit`` signatures, the
    interpreter's plans, kernels held in memory (kernels on disk stay). Un-jitted transforms
    cache nothing: they re-run the function on every call.

    Example:
        >>> import functrace as ft
        >>> ft.clear_caches()
    """
    caches.clear_all()


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """Return ``f(*args) -> (value, gradient)`` of a scalar-valued ``fun``.

    Args:
        fun: function of arrays (or pytrees of arrays) returning a float scalar, or
            ``(scalar, aux)`` when ``has_aux``. An output of one element with shape (1,),
            (1, 1), ... counts as a scalar (as in autograd): the gradient is that element's,
            and the value keeps its shape.
        argnums: which positional argument(s) to differentiate; a tuple gives a tuple of
            gradients.
        has_aux: ``fun`` returns ``(value, aux)``; the result is ``((value, aux), grad)``.
        holomorphic: allow complex outputs (``fun`` must be holomorphic).

    Gradients have the dtype and pytree structure of the differentiated arguments. ``fun``
    runs on every call (nothing is cached: random draws and globals behave as written, as
    with autograd and ``jax.grad``); its operations are taped as they run and the tape is run
    backwards. Use ``ft.jit(ft.value_and_grad(f))`` to compile it once per signature.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> v, g = ft.value_and_grad(lambda x: fnp.sum(x ** 2))(np.array([1.0, 2.0]))
        >>> float(v), g
        (5.0, array([2., 4.]))
    """
    return _value_and_grad(fun, argnums, has_aux, holomorphic, "value_and_grad")


def _scalar_output(out, fname, has_aux, holomorphic):
    """The differentiated output of ``fun``'s result (and the aux part), checked."""
    if has_aux:
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise FunctraceTypeError(
                f"{fname}(has_aux=True) requires the function to return a pair (value, aux); "
                f"it returned {describe_out(out)} ({where()})")
        main, aux = out
    else:
        main, aux = out, None
    leaves, tree = tree_util.tree_flatten(main)
    if len(leaves) != 1 or tree_util.tree_structure(leaves[0]) != tree:
        hint = (" To return extra values alongside the value, use has_aux=True and return "
                "(value, aux)." if isinstance(main, tuple | list) and not has_aux else "")
        raise FunctraceTypeError(f"{fname} requires a scalar output; the function returned "
                                 f"{describe_out(main)}.{hint} ({where()})")
    y = check_out_leaf(leaves[0], 0)
    check_scalar_out(aval_of(y), fname, holomorphic)
    return y, aux


def _value_and_grad(fun, argnums, has_aux, holomorphic, fname):
    check_callable(fun, fname)
    check_argnums(argnums, fname)

    def vg(*args, **kwargs):
        nums, single = argnums_tuple(argnums, len(args), fname)
        leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs))
        leaves = [check_leaf_arg(x, i) for i, x in enumerate(leaves)]
        wrt = wrt_leaf_indices(args, kwargs, nums)
        check_wrt_dtypes(leaves, wrt, fname, holomorphic)
        trace, ins, out = taped(fun, in_tree, leaves, wrt)
        y, aux = _scalar_output(out, fname, has_aux, holomorphic)
        wanted = [ins[i] for i in wrt]
        if isinstance(y, TapeTracer) and y._trace is trace:
            grads = trace.pullback([(y, np.ones(y.shape, y.dtype))], wanted)
        else:      # the value does not depend on the differentiated arguments
            grads = [_zeros_of(t._primal) for t in wanted]
        top = trace.parent is None
        grads = [own(g) if top else g for g in grads]
        per_arg, off = [], 0
        for n in nums:
            k = len(tree_util.tree_leaves(args[n]))
            per_arg.append(tree_util.tree_unflatten(tree_util.tree_structure(args[n]),
                                                    grads[off:off + k]))
            off += k
        g = per_arg[0] if single else tuple(per_arg)
        value = unwrap(y, trace)
        value = own(value) if top else value
        if has_aux:
            return (value, unwrap_tree(aux, trace)), g
        return value, g

    vg.__name__ = f"{fname}({getattr(fun, '__name__', 'f')})"
    vg.__doc__ = fun.__doc__
    return vg


def _zeros_of(like):
    from .tape import zeros_of
    return zeros_of(like)


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
        graph, out_tree, _, leaves, captured = traced_transform(fun, args, kwargs, build)
        return tree_util.tree_unflatten(out_tree, run_graph(graph, list(leaves) + list(captured)))
    return wrapped


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
    vg = _value_and_grad(fun, argnums, has_aux, holomorphic, "grad")

    def g(*args, **kwargs):
        value, gr = vg(*args, **kwargs)
        return (gr, value[1]) if has_aux else gr

    g.__name__ = f"grad({getattr(fun, '__name__', 'f')})"
    g.__doc__ = fun.__doc__
    return g


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``out, vjp_fn = ft.vjp(f, *primals)``; ``vjp_fn(ct)`` returns one cotangent per primal.

    ``f`` runs once, taped; ``vjp_fn`` runs the tape backwards and may be called many
    times (and inside other transforms). With ``has_aux=True``, ``f`` returns
    ``(out, aux)`` and the result is ``(out, vjp_fn, aux)``, as in JAX.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> out, pullback = ft.vjp(lambda x, y: x * y, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
        >>> pullback(np.ones(2))
        (array([3., 4.]), array([1., 2.]))
    """
    check_callable(fun, "vjp")
    leaves, in_tree = tree_util.tree_flatten((tuple(primals), {}))
    leaves = [check_leaf_arg(x, i) for i, x in enumerate(leaves)]
    check_wrt_dtypes(leaves, range(len(leaves)), "vjp", False)   # any float or complex
    trace, ins, out = taped(fun, in_tree, leaves, range(len(leaves)))
    if has_aux:
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise FunctraceTypeError(
                "vjp(has_aux=True) requires the function to return a pair (out, aux); it "
                f"returned {describe_out(out)} ({where()})")
        main, aux = out
    else:
        main, aux = out, None
    out_leaves, main_tree = tree_util.tree_flatten(main)
    out_leaves = [check_out_leaf(o, i) for i, o in enumerate(out_leaves)]
    out_avals = [aval_of(o) for o in out_leaves]
    top = trace.parent is None
    value = tree_util.tree_unflatten(main_tree, [
        own(unwrap(o, trace)) if top else unwrap(o, trace) for o in out_leaves])

    def vjp_fn(*args):
        if len(args) != 1:
            raise FunctraceTypeError(
                f"vjp_fn takes one cotangent (a pytree shaped like the function's output), "
                f"got {len(args)} arguments. Fix: pass them as one tuple, vjp_fn((ct1, ct2)), "
                f"when the function returns a tuple ({where()})")
        ct_leaves, tree = tree_util.tree_flatten(args[0])
        if tree != main_tree:
            raise FunctraceTypeError(
                f"vjp_fn expects a cotangent with the output's structure {main_tree}, got "
                f"{tree} ({where()})")
        cts = []
        for k, (c, av) in enumerate(zip(ct_leaves, out_avals)):
            if not isinstance(c, Tracer):
                c = check_leaf_arg(c, k, "vjp_fn: cotangent")
            cav = aval_of(c)
            if cav.shape != av.shape:
                raise ShapeError(f"vjp_fn: cotangent {k} has shape {cav.shape}; the output "
                                 f"has shape {av.shape} ({where()})")
            if cav.dtype.kind == "c" and av.dtype.kind != "c":
                raise FunctraceTypeError(
                    f"vjp_fn: cotangent {k} has dtype {cav.dtype}, but the output is real "
                    f"({av.dtype}): its imaginary part would be dropped. Fix: pass a real "
                    f"cotangent (or make the output complex) ({where()})")
            if not isinstance(c, Tracer):
                c = _ops.as_array(c, dtype=av.dtype)
            cts.append(c)
        gr = trace.pullback(list(zip(out_leaves, cts)), ins)
        if current_trace() is None:
            gr = [own(x) for x in gr]
        res, off = [], 0
        for p in primals:
            k = len(tree_util.tree_leaves(p))
            res.append(tree_util.tree_unflatten(tree_util.tree_structure(p), gr[off:off + k]))
            off += k
        return tuple(res)

    if has_aux:
        return value, vjp_fn, unwrap_tree(aux, trace)
    return value, vjp_fn


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

    ``nondiff_argnums`` (JAX's semantics): those arguments are not differentiated and may be
    any Python values (a function, a shape, a flag); ``fwd`` takes all the arguments as the
    function does, and ``bwd(*nondiff_args, residuals, ct)`` receives them first and returns
    cotangents for the other arguments only. They must not be values of an enclosing
    transform (a traced array): pass such a value as an ordinary argument (with a None
    cotangent) instead.

    ``name``: how graph JSON names the rule (``Symbol.to_json``; ``Symbol.from_json`` finds
    it in the process's registry, never by importing). The default is ``"module:qualname"``
    of a module-level function; others (a lambda, a function defined in a function) need a
    name here or ``ft.register_custom_rule(name, f)`` before ``to_json``.

    ``fwd`` (and the function) may use Python control flow on the values of the arguments
    (``while x > 1: x = x / 2``) wherever those values are known: under ``ft.grad``,
    ``ft.vjp``, ``ft.checkpoint``, ``ft.linearize``, ``functrace.autograd`` and ``ft.jit``
    called with concrete arrays. Inside ``ft.cond``/``ft.scan``/loop bodies, ``ft.vmap``,
    or with abstract inputs, it is a ``ConcretizationError``, as for any function.
    """

    kind = "custom_vjp"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 name: str | None = None):
        check_callable(fun, "custom_vjp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _check_nondiff(nondiff_argnums, "custom_vjp")
        self.fwd = None
        self.bwd = None
        _register(self, name)

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Set the rule: ``fwd(*args) -> (output, residuals)``, ``bwd(residuals, cotangent) ->
        one cotangent per argument`` (``bwd(*nondiff_args, residuals, cotangent)`` with
        ``nondiff_argnums``)."""
        name = getattr(self.fun, "__name__", "f")
        nd = len(self.nondiff_argnums)
        _check_rule(fwd, None, f"custom_vjp {name}: fwd", "fwd(*args) -> (output, residuals)")
        form = ("bwd(residuals, cotangent) -> a tuple with one cotangent per argument" if not nd
                else f"bwd({'nondiff, ' * nd}residuals, cotangent) -> a tuple with one "
                "cotangent per argument not in nondiff_argnums")
        _check_rule(bwd, 2 + nd, f"custom_vjp {name}: bwd", form)
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        if self.fwd is None:
            raise FunctraceTypeError(
                f"custom_vjp function {self.fun.__name__} has no rule: call .defvjp(fwd, bwd) "
                f"first ({where()})")
        if current_trace() is None:
            return self.fun(*args)
        from .autodiff import trace_custom_vjp
        return trace_custom_vjp(self.fun, self.fwd, self.bwd, args, self.nondiff_argnums,
                                self)


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
    With ``nondiff_argnums`` (JAX's semantics) the rule is
    ``rule(*nondiff_args, primals, tangents)``, ``primals`` and ``tangents`` holding the other
    arguments only (see ``custom_vjp`` for what nondiff arguments may be, for ``name`` and
    for Python control flow on values).
    """

    kind = "custom_jvp"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 name: str | None = None):
        check_callable(fun, "custom_jvp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _check_nondiff(nondiff_argnums, "custom_jvp")
        self.rule = None
        _register(self, name)

    def defjvp(self, rule: Callable) -> Callable:
        """Set the rule (usable as a decorator): ``rule(primals, tangents) -> (primal_out,
        tangent_out)`` (``rule(*nondiff_args, primals, tangents)`` with
        ``nondiff_argnums``)."""
        nd = len(self.nondiff_argnums)
        _check_rule(rule, 2 + nd, f"custom_jvp {getattr(self.fun, '__name__', 'f')}: the rule",
                    f"rule({'nondiff, ' * nd}primals, tangents) -> (primal_out, tangent_out)")
        self.rule = rule
        return rule

    def __call__(self, *args):
        if self.rule is None:
            raise FunctraceTypeError(
                f"custom_jvp function {self.fun.__name__} has no rule: decorate one with "
                f"@f.defjvp first ({where()})")
        if current_trace() is None:
            return self.fun(*args)
        from .autodiff import trace_custom_jvp
        return trace_custom_jvp(self.fun, self.rule, args, self.nondiff_argnums, self)


def _register(custom, name) -> None:
    """Register a new custom function under ``name``, or by default under its function's
    ``"module:qualname"`` when that is unique (``custom_rules``): graph JSON names it so."""
    custom.registered_name = None
    name = name if name is not None else default_name(custom.fun)
    if name is not None:
        register_custom_rule(name, custom)


def _check_nondiff(nums, kind: str) -> tuple[int, ...]:
    """``nondiff_argnums`` as a sorted tuple of distinct non-negative ints, or a TypeError."""
    if isinstance(nums, int | np.integer):
        nums = (nums,)
    try:
        out = tuple(sorted({int(i) for i in nums}))
        ok = len(out) == len(tuple(nums)) and all(
            isinstance(i, int | np.integer) and i >= 0 for i in nums)
    except TypeError:
        ok = False
    if not ok:
        raise FunctraceTypeError(f"{kind}: nondiff_argnums must be distinct non-negative "
                                 f"argument positions, got {nums!r} ({where()})")
    return out


def _check_rule(rule, nargs, what: str, form: str) -> None:
    """Refuse a custom rule that is not callable, or cannot take ``nargs`` positional
    arguments, when it is defined (not deep inside a later backward pass)."""
    if not callable(rule):
        raise FunctraceTypeError(f"{what} must be a function {form}; got "
                                 f"{type(rule).__name__} ({where()})")
    if nargs is None:
        return
    import inspect
    try:
        sig = inspect.signature(rule)
    except (TypeError, ValueError):      # a builtin without a signature: trust it
        return
    try:
        sig.bind(*([None] * nargs))
    except TypeError:
        code = getattr(rule, "__code__", None)
        defined = (f", defined at {code.co_filename}:{code.co_firstlineno}," if code else "")
        raise FunctraceTypeError(
            f"{what} must take {nargs} positional arguments: {form}; its signature is "
            f"{sig}{defined} ({where()})") from None


def checkpoint(fun: Callable, prevent_cse: bool = True) -> Callable:
    """Rematerialisation: under differentiation, ``fun``'s intermediates are recomputed in the
    backward pass instead of being kept alive from the forward pass.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> f = ft.checkpoint(lambda x: fnp.sin(fnp.sin(x)))
        >>> float(ft.grad(lambda x: fnp.sum(f(x)))(np.zeros(1)))
        1.0
    """
    check_callable(fun, "checkpoint")

    @functools.wraps(fun)
    def wrapped(*args):
        if current_trace() is None:
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
