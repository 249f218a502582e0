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
   traced with *abstract* leaves (``ft.ShapeDtype``) and the graph is simplified
   (``passes.simplify.optimize``).
3. Python control flow on a traced value (``if fnp.sum(x) > 0:``) makes the abstract trace
   raise ``ConcretizationError``. The call's arguments are concrete, so the signature gets
   *variants* instead (``signature.Variants``): the function is traced again on these
   values, each decision recorded as a guard (``tracing.Guard``) whose value is an extra
   output of the compiled graph. A call runs the variants, most recently used first, until
   one's guards hold; if none does, it traces one more for the path these values take, up to
   ``max_variants``, then raises ``GuardError`` naming the decision's line. A function
   without such decisions never pays for any of this. Variants never donate buffers (a
   variant whose guards fail leaves the arguments to the next).
4. The graph runs on the chosen backend: ``"cpu"`` (numba kernels; the first call of a new
   graph runs on the reference interpreter, kernels compile when the graph is hot, see
   docs/executor.md) or ``"numpy"`` (the reference interpreter).

docs/jit_control_flow.md explains guards and variants for users. Inside another transform
(``ft.grad(ft.jit(f))``) a jitted function is transparent: it is
traced through like ordinary code, so transforms compose.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import tree_util
from .arguments import check_callable, check_leaf_arg, flatten_fun
from .backends.registry import lookup_target
from .config import DISABLE_JIT, config
from .core import AVal, Graph, on_device, to_host
from .errors import (
    ConcretizationError,
    FunctraceTypeError,
    FunctraceValueError,
    GuardError,
    where,
)
from .passes.simplify import optimize
from .signature import SignatureCache, Unsupported, Variants, fast_signature, static_key
from .tracing import Guard, Tracer, current_trace, source_line, trace_to_graph

__all__ = ["jit", "Jitted", "Lowered"]

log = logging.getLogger("functrace")


def jit(fun: Callable | None = None, *, backend: str = "cpu",
        static_argnums: int | Sequence[int] = (), donate_argnums: int | Sequence[int] = (),
        eager: bool = False, threads: bool | int | str = "auto", max_variants: int = 8) -> Jitted:
    """Compile ``fun`` for its abstract signature; re-trace only when the signature changes.

    ``fun`` must be pure, as with ``jax.jit``: it is traced once per signature and the
    compiled graph is reused, so what Python did while tracing is frozen. A random draw
    (``np.random.randn``), a global that a helper function reads, or a side effect happens
    once, at trace time. (jit re-traces when a closure cell or global the function reads
    directly is rebound, or when a numpy array it captured is changed in place.) The
    un-jitted transforms (``ft.grad``, ``ft.vmap``, ...) run the function on every call and
    have no such restriction.

    Python control flow on traced values (``if fnp.sum(x) > 0:``, ``while err > tol:``)
    works, beyond what ``jax.jit`` allows: each path the function takes is compiled as its
    own *variant*, valid while the decisions it recorded (its guards) come out the same.
    The guards' values are extra outputs of the variant's compiled graph, so checking them
    costs a comparison per decision; a call whose values take another path tries the other
    variants, then compiles a new one, up to ``max_variants`` per signature, after which it
    raises ``GuardError`` naming the decision's line. A decision that depends on values in a
    way that keeps changing (a loop's trip count, ``float(x)``) is better written with
    ``ft.cond``, ``ft.while_loop`` / ``ft.fori_loop`` or ``fnp.where``, which compile once
    for every path; and with abstract arguments (``ft.ShapeDtype``, ``lower``) such control
    flow is a ``ConcretizationError`` that says so (docs/jit_control_flow.md).

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
        threads: how many threads a CPU kernel may run on. ``"auto"`` (the default): every
            core this process may use, for the kernels big enough to gain from it (a cost
            model: elements x per-element cost against a parallel launch; small kernels stay
            on one thread); an int: at most that many threads; ``False``: one.
            ``FUNCTRACE_NUM_THREADS`` caps it. The parallel kernels are compiled on the
            second compiled call, so the first result costs no more than with ``False``.
            Results do not depend on the thread count, bit for bit (reductions add in blocks
            fixed by the shapes): docs/executor.md, "Threads". Matrix products run in BLAS,
            whose threads ``OPENBLAS_NUM_THREADS`` (or threadpoolctl) sets.
        max_variants: how many paths through value-dependent Python control flow are
            compiled per signature before a call that takes a new one raises ``GuardError``
            (``0``: such control flow is a ``ConcretizationError``, as in JAX).

    Returns:
        A callable with ``lower(*args)`` (the lowered graph and generated ``.source``),
        ``variants(*args)`` (the graphs compiled for that signature: one per path) and
        ``clear_cache()``. Usable as a decorator, with or without arguments.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> f = ft.jit(lambda x: fnp.sum(fnp.tanh(x) ** 2), backend="numpy")
        >>> float(f(np.zeros(3)))
        0.0

        Python control flow on values compiles one variant per path taken:

        >>> @ft.jit(backend="numpy")
        ... def relu_or_square(x):
        ...     if fnp.sum(x) > 0:
        ...         return fnp.maximum(x, 0.0)
        ...     return x * x
        >>> relu_or_square(np.array([2.0, -1.0])), relu_or_square(np.array([-2.0, 1.0]))
        (array([2., 0.]), array([4., 1.]))
        >>> len(relu_or_square.variants(np.zeros(2)))
        2

        Threads: the same bits on one thread or several (big kernels only run in parallel):

        >>> g = lambda x: fnp.sum(fnp.sin(x) * x)
        >>> x = np.linspace(-3, 3, 10**6)
        >>> bool(ft.jit(g, eager=True, threads=False)(x) == ft.jit(g, eager=True)(x))
        True
    """
    if fun is None:
        return functools.partial(jit, backend=backend, static_argnums=static_argnums,
                                 donate_argnums=donate_argnums, eager=eager, threads=threads,
                                 max_variants=max_variants)
    check_callable(fun, "jit")
    return Jitted(fun, backend, static_argnums, donate_argnums, eager, threads, max_variants)


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
    """One compiled graph. A guarded one (a variant: one Python path of the function) has the
    values its guards read as extra, trailing outputs of ``graph``; ``failed_guard`` checks
    them after a run."""

    __slots__ = ("graph", "out_tree", "consts", "run", "donate", "build", "guards", "n_out")

    def __init__(self, graph, out_tree, consts, run, donate, guards=()):
        self.graph, self.out_tree, self.consts = graph, out_tree, consts
        self.run, self.donate = run, donate
        self.guards: tuple[Guard, ...] = tuple(guards)
        self.n_out = n = len(graph.outputs) - len(self.guards)
        build = _builder(out_tree)
        self.build = build if not self.guards else (lambda o: build(o[:n]))

    def failed_guard(self, outs) -> Guard | None:
        """The first guard that this run's outputs contradict (None: the run took the path
        this variant was traced on, so its outputs answer the call)."""
        for g, v in zip(self.guards, outs[self.n_out:]):
            if not g.holds(to_host(v) if on_device(v) else v):
                return g
        return None


class Jitted:
    """A jit-compiled function (see ``ft.jit``).

    Made directly (not through ``ft.jit``), it also takes the CPU executor's tier options:
    ``hot_after`` (interpreter calls of a graph before its kernels compile; default
    ``FUNCTRACE_HOT``, 2) and ``cached_after`` (the call that compiles a graph whose kernels
    are all in the disk cache; default 1). ``functrace.random`` uses them for its eager
    draws, which are many small graphs called once or often.
    """

    def __init__(self, fun, backend, static_argnums, donate_argnums, eager, threads,
                 max_variants=8, *, hot_after: int | None = None,
                 cached_after: int | None = None):
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
        if not isinstance(max_variants, int | np.integer) or isinstance(
                max_variants, bool | np.bool_) or max_variants < 0:
            raise FunctraceValueError(
                f"ft.jit: max_variants must be an int >= 0 (compiled paths per signature; 0 "
                f"makes Python control flow on traced values an error), got "
                f"{max_variants!r:.40} ({where()})")
        self.max_variants = int(max_variants)
        self.eager = eager
        if not (threads is None or isinstance(threads, bool) or threads == "auto" or (
                isinstance(threads, int | np.integer) and threads >= 0)):
            raise FunctraceValueError(
                f"ft.jit: threads must be 'auto', a number of threads (an int >= 1) or False, "
                f"got {threads!r:.40} ({where()})")
        self.threads = int(threads) if isinstance(threads, np.integer) else threads
        self._tiers = {k: v for k, v in (("hot_after", hot_after),
                                         ("cached_after", cached_after)) if v is not None}
        # signature key -> _Entry (or the Variants of a function that branches on values),
        # checked against the function's fingerprint and the arrays
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

    def _key(self, args, kwargs):
        """(signature key, leaves, in_tree, static values, static positions) of a call."""
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
        return (in_tree, tuple(sig), skey), leaves, in_tree, svals, static

    def _entry(self, args, kwargs):
        """The cached ``_Entry`` (or ``Variants``) for this call's signature, traced on a
        miss, and the call's leaves."""
        key, leaves, in_tree, svals, static = self._key(args, kwargs)
        entry = self._cache.get(key, self.fun)
        if entry is not None:
            return entry, leaves
        try:
            entry = self._trace(in_tree, leaves, svals, static, args, kwargs)
        except ConcretizationError:
            # Python control flow on a traced value. With concrete arguments, compile one
            # variant per path taken, each checked by its guards (``_call_variants``)
            if self.max_variants == 0 or any(isinstance(x, AVal) for x in leaves):
                raise
            entry = Variants()
            log.debug("jit(%s): value-dependent Python control flow; compiling guarded "
                      "variants", getattr(self.fun, "__name__", "f"))
        self._cache.put(key, entry, self.fun, entry.consts)
        return entry, leaves

    def _trace(self, in_tree, leaves, svals, static, args, kwargs, concrete=False):
        """Trace and compile one graph. Abstract leaves (the default) give the graph of every
        call of this signature; ``concrete`` traces on the values of ``leaves``, recording each
        value-dependent decision as a guard whose value becomes an extra output."""
        n_args = len(args)
        sdict = dict(svals)

        def call(*dyn, **kw):
            full, it = [], iter(dyn)
            for i in range(n_args):
                full.append(sdict[i] if i in static else next(it))
            return self.fun(*full, **kw)

        flat, box = flatten_fun(call, in_tree)
        if concrete:
            tr = trace_to_graph(flat, leaves)
            guards = tr.guards
        else:
            avals = [AVal(np.shape(x), x.dtype) if not isinstance(x, AVal) else x
                     for x in leaves]
            tr = trace_to_graph(flat, avals)
            guards = ()    # decisions on constants only (they hold while the constants do)
        graph = tr.graph
        if guards:
            graph = Graph(graph.inputs, graph.eqns,
                          tuple(graph.outputs) + tuple(g.atom for g in guards))
        graph = optimize(graph)
        # a variant may run and then turn out not to answer the call (a guard failed), and
        # the next one runs on the same buffers: so variants never donate them
        donate = () if guards else self._donated_leaves(args, static, kwargs)
        run = self._backend_runner(graph, donate)
        return _Entry(graph, box[0], tr.consts, run, donate, guards)

    def _backend_runner(self, graph: Graph, donate=()):
        return self._compile(graph, donate=donate, eager=self.eager, threads=self.threads,
                             **self._tiers)

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if current_trace() is not None or DISABLE_JIT.get():
            return self.fun(*args, **kwargs)     # under a transform: trace straight through
        if config.debug_nans:
            return self._checked_call(args, kwargs)
        key = None
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
                    if type(entry) is _Entry:
                        return entry.build(entry.run(*leaves))
                    return self._call_variants(entry, leaves, args, kwargs)
        if any(isinstance(x, Tracer) for x in tree_util.tree_leaves((args, kwargs))):
            return self.fun(*args, **kwargs)     # tracers of a finished trace: let it raise
        entry, leaves = self._entry(args, kwargs)
        if not self.static_argnums and key is not None:
            self._cache.put(key, entry, self.fun, entry.consts)
        if type(entry) is not _Entry:
            return self._call_variants(entry, leaves, args, kwargs)
        outs = entry.run(*leaves)
        return entry.build(outs)

    def _checked_call(self, args, kwargs):
        """``ft.config.debug_nans``: trace this call on its concrete values and run the graph
        (not optimised, so every op the function wrote runs) on the reference interpreter,
        which checks each op's result for a new NaN. Nothing is compiled or cached."""
        from .backends import reference
        dyn, svals, static, _ = self._split(args)
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        sdict, n_args = dict(svals), len(args)

        def call(*d, **kw):
            it = iter(d)
            return self.fun(*[sdict[i] if i in static else next(it) for i in range(n_args)],
                            **kw)

        flat, box = flatten_fun(call, in_tree)
        tr = trace_to_graph(flat, [x if on_device(x) else np.asarray(x) for x in leaves])
        outs = reference.run(tr.graph, list(leaves) + list(tr.captured))
        return tree_util.tree_unflatten(box[0], outs)

    def _call_variants(self, variants: Variants, leaves, args, kwargs):
        """Run the variants of this signature, most recently used first, until one's guards
        hold; if none does, trace a new one on these values (up to ``max_variants``)."""
        failed, error = [], None
        for entry in variants.candidates():
            try:
                outs = entry.run(*leaves)
            except Exception as e:
                # another path's graph may fail on these values (a Cholesky factor of a
                # matrix that path never sees): only the variant whose guards hold answers
                error = error or e
                continue
            g = entry.failed_guard(outs)
            if g is None:
                variants.use(entry)
                return entry.build(outs)
            failed.append(g)
        if len(variants) >= self.max_variants:
            raise self._too_many_variants(failed) from error
        dyn, svals, static, _ = self._split(args)
        in_tree = tree_util.tree_structure((dyn, kwargs))
        entry = self._trace(in_tree, leaves, svals, static, args, kwargs, concrete=True)
        outs = entry.run(*leaves)
        g = entry.failed_guard(outs)
        if g is None:
            variants.use(entry, entry.consts)
            log.debug("jit(%s): compiled variant %d (%d guards)",
                      getattr(self.fun, "__name__", "f"), len(variants), len(entry.guards))
        else:
            # The compiled graph computed a decision's value differently from the reference
            # interpreter that decided it while tracing (a sum rounded the other way, right
            # at the threshold). The outputs follow the traced path, as the un-jitted
            # function would; the variant is not kept, as it would never answer this call.
            log.debug("jit(%s): the compiled value of a guard disagrees with its traced "
                      "value (%s at %s); variant not kept", getattr(self.fun, "__name__", "f"),
                      g.why, source_line(g.source))
        return entry.build(outs)

    def _too_many_variants(self, failed: list[Guard]) -> GuardError:
        name = getattr(self.fun, "__name__", "f")
        seen, lines = set(), []
        for g in failed:
            k = (g.source, g.why)
            if k not in seen:
                seen.add(k)
                lines.append(f"{g.why} at {source_line(g.source)} (a compiled variant has "
                             f"{g.describe()})")
        decided = "; ".join(lines) if lines else "a value-dependent decision"
        return GuardError(
            f"ft.jit({name}): these arguments take a new Python path, and this signature "
            f"already has max_variants={self.max_variants} compiled variants (one per path "
            f"taken by a value-dependent decision). The decision that differs: {decided}. "
            "Fix: write it so that one compiled graph covers every path: "
            "ft.cond(pred, true_fn, false_fn, *operands) for an if, "
            "ft.while_loop(cond_fn, body_fn, init) or ft.fori_loop(lower, upper, body_fn, "
            "init) for a loop whose trip count depends on values, fnp.where(...) to select "
            "elementwise; or mark an argument that selects a code path static "
            "(static_argnums=...); or allow more variants (ft.jit(f, max_variants=n)). "
            f"Called {where()}")

    def variants(self, *args, **kwargs) -> list[Lowered]:
        """The graphs compiled for the signature of these arguments (arrays, or
        ``ft.ShapeDtype``), without tracing or running: one for a function without
        value-dependent Python control flow, one per path taken (most recently used first,
        each with its ``.guards``) for one that branches on values; empty before the first
        call.

        Example:
            >>> import numpy as np, functrace as ft, functrace.numpy as fnp
            >>> @ft.jit(backend="numpy")
            ... def f(x):
            ...     return x if fnp.sum(x) > 0 else -x
            >>> _ = f(np.ones(2)), f(-np.ones(2)), f(np.ones(2))
            >>> len(f.variants(np.ones(2)))
            2
        """
        key = self._key(args, kwargs)[0]
        entry = self._cache.get(key, self.fun)
        if entry is None:
            return []
        entries = [entry] if type(entry) is _Entry else entry.candidates()
        return [Lowered(self, e) for e in entries]

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace for these arguments (arrays or ``ft.ShapeDtype``) without running.

        Returns a ``Lowered`` with ``.graph``, ``.source`` (generated kernels and driver) and
        ``.compile()``. The trace is abstract (shapes and dtypes only) even for arrays: the
        one graph of the signature, so Python control flow on a traced value is a
        ``ConcretizationError`` naming the line (the guarded variants that calls with
        concrete arrays compile are listed by ``variants``).
        """
        dyn, svals, static, _ = self._split(args)
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        leaves = [x if isinstance(x, AVal) else AVal(x.shape, x.dtype) if on_device(x)
                  else np.asarray(check_leaf_arg(x, i)) for i, x in enumerate(leaves)]
        entry = self._trace(in_tree, leaves, svals, static, args, kwargs)
        return Lowered(self, entry)


class Lowered:
    """A traced and lowered jit signature (or one guarded variant of it).

    Attributes:
        graph: the optimized ``Graph`` that runs. A variant's graph has one extra, trailing
            output per guard: the value its decision read.
        guards: the value-dependent decisions a variant holds for (``tracing.Guard``, in
            the order the function took them); empty for the graph of a whole signature.
        source: the generated kernel sources and driver (CPU backend), or the printed graph.
    """

    def __init__(self, jitted: Jitted, entry: _Entry):
        self._jitted = jitted
        self._entry = entry
        self.graph = entry.graph
        self.guards = entry.guards

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
        entry = self._entry
        outs = entry.run(*[x if on_device(x) else np.asarray(x) for x in leaves])
        g = entry.failed_guard(outs)
        if g is not None:
            raise GuardError(
                f"these arguments take another Python path than the one this compiled "
                f"variant holds: when traced, {g.describe()} at {source_line(g.source)}. "
                "Call the jitted function itself (it compiles a variant per path), or write "
                "the decision with ft.cond / ft.while_loop / fnp.where so that one graph "
                f"covers every path ({where()})")
        return tree_util.tree_unflatten(entry.out_tree, list(outs[:entry.n_out]))
