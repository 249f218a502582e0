"""``ft.jit``: trace once per abstract signature, run the graph on a compiled backend.

Owns the user-facing jit wrapper (pytrees, static and donated arguments, the per-signature
cache, ``lower``). API layer: imports arguments, signature, tree_util, tracing, passes and
backends. Importing it does not import numba: the CPU backend imports numba the first time it
compiles a kernel.

How a call works:

1. The arguments are split into static ones (``static_argnums``: hashable Python values that
   become part of the cache key and are passed to the function as they are) and dynamic ones
   (pytrees of arrays, flattened to leaves).
2. The cache key is (pytree structure, each leaf's shape and dtype, the static values by
   type and exact value); the cache is a per-function ``signature.SignatureCache``
   ("jit.signatures" in ``functrace.caches``: 2 x the cache size in keys, since a signature
   is stored under its fast-path key and its full key, so 256 signatures by default;
   ``ft.clear_caches()`` empties it). A hit counts only while the function's fingerprint
   (the globals and closure values it reads) and the arrays it baked in as constants are
   unchanged (see ``signature``); otherwise, and on a miss, the function is
   traced with *abstract* leaves (``ft.ShapeDtype``), so Python control flow on a traced
   value raises ``ConcretizationError`` naming the user's line, and the graph is simplified
   (``passes.simplify.optimize``).
3. The graph runs on the chosen backend: ``"cpu"`` (numba kernels; the first call of a new
   graph runs on the reference interpreter, kernels compile when the graph is hot, see
   docs/executor.md) or ``"numpy"`` (the reference interpreter).

Inside another transform (``ft.grad(ft.jit(f))``) a jitted function is transparent: it is
traced through like ordinary code, so transforms compose.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import tree_util
from .arguments import check_callable, check_leaf_arg, flatten_fun
from .backends.registry import lookup_target
from .core import AVal, Graph, on_device
from .errors import FunctraceTypeError, FunctraceValueError, where
from .passes.simplify import optimize
from .signature import SignatureCache, Unsupported, fast_signature, static_key
from .tracing import Tracer, current_trace, trace_to_graph

__all__ = ["jit", "Jitted", "Lowered"]



def jit(fun: Callable | None = None, *, backend: str = "cpu",
        static_argnums: int | Sequence[int] = (), donate_argnums: int | Sequence[int] = (),
        eager: bool = False, threads: bool = False) -> Jitted:
    """Compile ``fun`` for its abstract signature; re-trace only when the signature changes.

    ``fun`` must be pure, as with ``jax.jit``: it is traced once per signature and the
    compiled graph is reused, so what Python did while tracing is frozen. A random draw
    (``np.random.randn``), a global that a helper function reads, or a side effect happens
    once, at trace time. (jit re-traces when a closure cell or global the function reads
    directly is rebound, or when a numpy array it captured is changed in place.) The
    un-jitted transforms (``ft.grad``, ``ft.vmap``, ...) run the function on every call and
    have no such restriction. Python control flow on traced values is an error here: use
    ``fnp.where``, or ``static_argnums`` for values that select a code path.

    Args:
        fun: a function of arrays (pytrees of arrays) written with ``functrace.numpy``.
        backend: ``"cpu"`` (numba-compiled fused kernels), ``"numpy"`` (the reference
            interpreter) or ``"cuda"`` (numba.cuda kernels on cupy arrays; inputs are copied
            to the GPU, outputs stay there: docs/gpu.md).
        static_argnums: positional arguments that are Python values, not arrays (hashable;
            each distinct value is its own cache entry, like JAX).
        donate_argnums: positional arguments whose buffers the outputs may reuse (the caller
            promises not to use them after the call).
        eager: compile kernels on the first call instead of when the graph is hot.
        threads: compile kernels with ``parallel=True`` (outer loop over threads). Off by
            default: on small machines thread pools cost more than they give.

    Returns:
        A callable with ``lower(*args)`` (the lowered graph and generated ``.source``) and
        ``clear_cache()``. Usable as a decorator, with or without arguments.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> f = ft.jit(lambda x: fnp.sum(fnp.tanh(x) ** 2), backend="numpy")
        >>> float(f(np.zeros(3)))
        0.0
    """
    if fun is None:
        return functools.partial(jit, backend=backend, static_argnums=static_argnums,
                                 donate_argnums=donate_argnums, eager=eager, threads=threads)
    check_callable(fun, "jit")
    return Jitted(fun, backend, static_argnums, donate_argnums, eager, threads)


def _nums(x, what: str) -> tuple[int, ...]:
    def is_int(i):
        return isinstance(i, int | np.integer) and not isinstance(i, bool | np.bool_)
    if is_int(x):
        return (int(x),)
    if isinstance(x, tuple | list) and all(is_int(i) for i in x):
        return tuple(int(i) for i in x)
    raise FunctraceTypeError(
        f"ft.jit: {what} must be an int or a tuple of ints (argument positions), got "
        f"{type(x).__name__} {x!r:.40} ({where()})")


def _builder(out_tree):
    """A fast ``leaves -> output`` function for plain containers, else tree_unflatten."""
    n = out_tree.num_leaves
    try:
        example = tree_util.tree_unflatten(out_tree, list(range(n)))
    except Exception:
        example = None

    def expr(x):
        t = type(x)
        if t is int:
            return f"o[{x}]"
        if t is tuple:
            return "(" + "".join(expr(c) + ", " for c in x) + ")"
        if t is list:
            return "[" + ", ".join(expr(c) for c in x) + "]"
        if t is dict and all(type(k) is str for k in x):
            return "{" + ", ".join(f"{k!r}: {expr(v)}" for k, v in x.items()) + "}"
        if x is None:
            return "None"
        raise Unsupported

    try:
        return eval(f"lambda o: {expr(example)}")
    except Unsupported:
        return lambda o: tree_util.tree_unflatten(out_tree, list(o))


class _Entry:
    __slots__ = ("graph", "out_tree", "consts", "run", "donate", "build")

    def __init__(self, graph, out_tree, consts, run, donate):
        self.graph, self.out_tree, self.consts = graph, out_tree, consts
        self.run, self.donate = run, donate
        self.build = _builder(out_tree)


class Jitted:
    """A jit-compiled function (see ``ft.jit``)."""

    def __init__(self, fun, backend, static_argnums, donate_argnums, eager, threads):
        self._compile = lookup_target(backend, where())
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.backend = backend
        self.static_argnums = _nums(static_argnums, "static_argnums")
        self.donate_argnums = _nums(donate_argnums, "donate_argnums")
        if set(self.static_argnums) & set(self.donate_argnums):
            both = sorted(set(self.static_argnums) & set(self.donate_argnums))
            raise FunctraceValueError(
                f"ft.jit: argument(s) {both} are both static and donated; a static argument "
                "is a Python value baked into the compiled code, not a buffer to reuse. "
                f"Fix: leave them out of donate_argnums ({where()})")
        self.eager = eager
        self.threads = threads
        # signature key -> _Entry, checked against the function's fingerprint and the arrays
        # it baked in; least recently used signatures are forgotten first
        self._cache = SignatureCache("jit.signatures", scale=2)

    def __repr__(self):
        return f"<jit({getattr(self.fun, '__name__', 'f')}) backend={self.backend}>"

    def clear_cache(self) -> None:
        """Forget every traced signature (kernels stay in the backend's caches)."""
        self._cache.clear()

    # -- argument handling -------------------------------------------------------------------
    def _split(self, args):
        n = len(args)
        static = set()
        for i in self.static_argnums:
            if not -n <= i < n:
                raise FunctraceValueError(
                    f"ft.jit: static_argnums={self.static_argnums} is out of range for {n} "
                    f"positional argument(s) ({where()})")
            static.add(i % n)
        for i in self.donate_argnums:
            if not -n <= i < n:
                raise FunctraceValueError(
                    f"ft.jit: donate_argnums={self.donate_argnums} is out of range for {n} "
                    f"positional argument(s) ({where()})")
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        svals = tuple((i, args[i]) for i in sorted(static))
        try:
            skey = tuple((i, static_key(v)) for i, v in svals)
        except TypeError:
            kinds = [type(v).__name__ for _, v in svals]
            raise FunctraceTypeError(
                f"ft.jit: static arguments must be hashable (got {kinds}); pass arrays as "
                "ordinary (traced) arguments instead, and lists as tuples "
                f"({where()})") from None
        return dyn, svals, static, skey

    def _donated_leaves(self, args, static, kwargs):
        if not self.donate_argnums:
            return ()
        n = len(args)
        nums = {i % n for i in self.donate_argnums if -n <= i < n}
        idx, off = [], 0
        for i, a in enumerate(args):
            if i in static:
                continue
            k = len(tree_util.tree_leaves(a))
            if i in nums:
                idx.extend(range(off, off + k))
            off += k
        return tuple(idx)

    def _entry(self, args, kwargs):
        dyn, svals, static, skey = self._split(args)
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        sig = []
        for i, x in enumerate(leaves):
            if type(x) is np.ndarray and x.dtype.kind in "biufc":
                sig.append((x.shape, x.dtype))
            elif on_device(x):    # CUDA backend: device arrays stay where they are
                if self.backend == "cpu":
                    raise FunctraceTypeError(
                        f"argument leaf {i} is a GPU array ({type(x).__name__}), and this "
                        "function is jitted for the CPU. Use ft.jit(f, backend='cuda') to "
                        "compute on the GPU, or ft.device_get(x) to copy it to the host.")
                sig.append((tuple(x.shape), np.dtype(x.dtype)))
            else:
                x = leaves[i] = check_leaf_arg(x, i)
                a = np.asarray(x) if not isinstance(x, AVal) else None
                sig.append((x.shape, x.dtype) if a is None else (a.shape, a.dtype))
                if a is not None:
                    leaves[i] = a
        key = (in_tree, tuple(sig), skey)
        entry = self._cache.get(key, self.fun)
        if entry is not None:
            return entry, leaves
        entry = self._trace(in_tree, leaves, svals, static, args, kwargs)
        self._cache.put(key, entry, self.fun, entry.consts)
        return entry, leaves

    def _trace(self, in_tree, leaves, svals, static, args, kwargs):
        n_args = len(args)
        sdict = dict(svals)

        def call(*dyn, **kw):
            full, it = [], iter(dyn)
            for i in range(n_args):
                full.append(sdict[i] if i in static else next(it))
            return self.fun(*full, **kw)

        flat, box = flatten_fun(call, in_tree)
        avals = [AVal(np.shape(x), x.dtype) if not isinstance(x, AVal) else x for x in leaves]
        tr = trace_to_graph(flat, avals)
        graph = optimize(tr.graph)
        donate = self._donated_leaves(args, static, kwargs)
        run = self._backend_runner(graph, donate)
        return _Entry(graph, box[0], tr.consts, run, donate)

    def _backend_runner(self, graph: Graph, donate=()):
        return self._compile(graph, donate=donate, eager=self.eager, threads=self.threads)

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if current_trace() is not None:
            return self.fun(*args, **kwargs)     # under a transform: trace straight through
        if not self.static_argnums:
            # fast path: plain containers of arrays, keyed by a signature built in one pass
            leaves: list = []
            try:
                key = ("fast", fast_signature(args, leaves), fast_signature(kwargs, leaves))
            except Unsupported:
                key = None
            if key is not None:
                entry = self._cache.get(key, self.fun)
                if entry is not None:
                    return entry.build(entry.run(*leaves))
        if any(isinstance(x, Tracer) for x in tree_util.tree_leaves((args, kwargs))):
            return self.fun(*args, **kwargs)     # tracers of a finished trace: let it raise
        entry, leaves = self._entry(args, kwargs)
        if not self.static_argnums and key is not None:
            self._cache.put(key, entry, self.fun, entry.consts)
        outs = entry.run(*leaves)
        return entry.build(outs)

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace for these arguments (arrays or ``ft.ShapeDtype``) without running.

        Returns a ``Lowered`` with ``.graph``, ``.source`` (generated kernels and driver) and
        ``.compile()``.
        """
        dyn, svals, static, _ = self._split(args)
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        leaves = [x if isinstance(x, AVal) else AVal(x.shape, x.dtype) if on_device(x)
                  else np.asarray(check_leaf_arg(x, i)) for i, x in enumerate(leaves)]
        entry = self._trace(in_tree, leaves, svals, static, args, kwargs)
        return Lowered(self, entry)


class Lowered:
    """A traced and lowered jit signature.

    Attributes:
        graph: the optimized ``Graph`` that runs.
        source: the generated kernel sources and driver (CPU backend), or the printed graph.
    """

    def __init__(self, jitted: Jitted, entry: _Entry):
        self._jitted = jitted
        self._entry = entry
        self.graph = entry.graph

    @property
    def source(self) -> str:
        run = self._entry.run
        if hasattr(run, "lower"):
            return run.lower().source
        return str(self.graph)

    def compile(self) -> Compiled:
        """Compile every kernel now (no interpreter tier) and return the runnable."""
        run = self._entry.run
        if hasattr(run, "compile"):
            run.compile()
        return Compiled(self._jitted, self._entry)

    def __repr__(self):
        return f"<Lowered {self.graph!r}>"


class Compiled:
    """A compiled signature: call it like the jitted function, with arguments of the lowered
    types (static arguments are ignored: their values were fixed by ``lower``)."""

    def __init__(self, jitted: Jitted, entry: _Entry):
        self._jitted = jitted
        self._entry = entry
        self.graph = entry.graph

    def __call__(self, *args, **kwargs) -> Any:
        dyn = self._jitted._split(args)[0]
        leaves = tree_util.tree_leaves((dyn, kwargs))
        outs = self._entry.run(*[x if on_device(x) else np.asarray(x) for x in leaves])
        return tree_util.tree_unflatten(self._entry.out_tree, list(outs))
