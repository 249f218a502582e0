"""Data-parallel gradients and maps on a Dask cluster: ``value_and_grad`` and ``map``.

Owns the driver side (split the batch into shards, trace the function once per shard shape,
ship its graph as Symbol JSON, combine the shards' results by a tree reduction on the
cluster) and the worker side (decode the JSON, compile it with ``ft.jit``, keep the compiled
function in a per-process cache keyed by the SHA-256 of the JSON text). The top layer, like
``optim``: it imports the API and nothing imports it. ``import functrace`` does not load it,
and it never imports dask itself: the caller hands in a ``dask.distributed.Client`` and only
its methods are used (``submit``, ``run``, ``nthreads``, ``cancel``).

Invariants:
* No user code crosses the wire. A task's arguments are the JSON text of a graph (the
  value-and-gradient graph, already differentiated on the driver), flat lists of numpy
  arrays and Python numbers; the task functions are this module's, found by name on the
  worker. So a worker needs functrace (the same version: checked), never the user's modules.
* A step's result is the root of one reduction tree over every shard: it either holds every
  shard's contribution or the step raises. Tasks are pure, so Dask may re-run one whose
  worker died; nothing here keeps partial sums.
* Nothing is cached by the function object: the function is traced (abstractly, at each
  shard shape) on every call, and a graph that differs from the previous call's for the same
  argument types is refused with the equation that changed (a value closed over or drawn at
  random would otherwise be frozen into the workers' compiled graph, or recompiled each step).
"""

from __future__ import annotations

import hashlib
import math
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import caches, tree_util
from .api import trace
from .api import value_and_grad as _ft_value_and_grad
from .arguments import argnums_tuple, check_argnums, check_callable, check_leaf_arg
from .core import AVal, Graph, Lit
from .errors import FunctraceTypeError, FunctraceValueError, GraphFormatError, where
from .jit import jit
from .symbol import Symbol
from .tracing import source_line

__all__ = ["value_and_grad", "map", "cache_info", "shard_bounds"]

_REDUCE = ("mean", "sum")


# --------------------------------------------------------------------------------------------
# driver side: shipping a traced graph
# --------------------------------------------------------------------------------------------

def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` rows of each shard when ``n`` rows are split into ``shards``
    parts (at most ``n``): sizes differ by at most one, larger shards first, as
    ``numpy.array_split``.

    Example:
        >>> from functrace import distributed
        >>> distributed.shard_bounds(10, 4)
        [(0, 3), (3, 6), (6, 8), (8, 10)]
    """
    k = max(1, min(int(shards), int(n)))
    base, extra = divmod(int(n), k)
    out, lo = [], 0
    for i in range(k):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def _abstract(leaf) -> AVal:
    a = np.asarray(leaf)
    return AVal(a.shape, a.dtype)


def _first_difference(old: Graph, new: Graph) -> str:
    """Where ``new`` first differs from ``old`` (for the changed-graph error)."""
    for i, (a, b) in enumerate(zip(old.eqns, new.eqns)):
        lits_a = [x for x in a.inputs if isinstance(x, Lit)]
        lits_b = [x for x in b.inputs if isinstance(x, Lit)]
        if a.op is not b.op or a.params != b.params or lits_a != lits_b:
            what = ""
            if a.op is b.op and lits_a != lits_b and len(lits_a) == len(lits_b):
                x, y = next((x, y) for x, y in zip(lits_a, lits_b) if x != y)
                what = f": a constant {x.val!r:.40} became {y.val!r:.40}"
            return f"equation {i} ({b.op.name}) at {source_line(b.source)}{what}"
    return (f"the graphs have {len(old.eqns)} and {len(new.eqns)} equations"
            if len(old.eqns) != len(new.eqns) else "their outputs differ")


def _to_json(sym: Symbol, fname: str) -> str:
    try:
        return sym.to_json()
    except (TypeError, GraphFormatError) as exc:
        raise FunctraceTypeError(
            f"functrace.distributed.{fname}: the function's graph cannot be shipped to the "
            f"workers as JSON (workers receive graphs, never Python code): {exc} ({where()})"
        ) from exc


class _Shipper:
    """Per distributed function: trace at an argument signature, keep the JSON text.

    ``graphs[sig]`` is the forward graph of the last call at ``sig`` (to refuse a graph
    that changes between calls); ``texts`` maps a forward graph to what is shipped."""

    def __init__(self, fun: Callable, fname: str):
        self.fun = fun
        self.fname = fname
        self.graphs = caches.LRU("distributed.signatures", scale=0.125)
        self.texts = caches.LRU("distributed.graph_json", scale=0.125)
        self.lock = threading.Lock()

    def ship(self, in_tree, avals: tuple, make: Callable[[Symbol], Symbol]):
        """``(json_text, out_tree)`` of ``make(forward Symbol)`` at these argument types."""
        args, kwargs = tree_util.tree_unflatten(in_tree, list(avals))
        fwd = trace(self.fun)(*args, **kwargs)
        sig = (in_tree, avals)
        with self.lock:
            old = self.graphs.get(sig)
            if old is not None and old != fwd.graph:
                raise FunctraceValueError(
                    f"functrace.distributed.{self.fname}: the function's graph changed since "
                    f"the last call with these argument types, at "
                    f"{_first_difference(old, fwd.graph)}. The function depends on Python "
                    "state other than its arguments (a closed-over number or array that "
                    "changes, a global, a numpy random draw); the workers run one compiled "
                    "graph per argument signature and would recompile every step. Fix: pass "
                    "that value as an argument (an array in a non-batch argument is sent to "
                    "every shard; draw random numbers with functrace.random from a key "
                    "argument), or make a new distributed function to accept the new graph "
                    f"({where()})")
            self.graphs[sig] = fwd.graph
            key = (fwd.graph, fwd.in_tree, fwd.out_tree)
            hit = self.texts.get(key)
        if hit is not None:
            return hit
        shipped = make(fwd)
        flat = Symbol(shipped.graph)          # flat leaves in, flat leaves out: no pytrees
        hit = (_to_json(flat, self.fname), shipped.out_tree)
        with self.lock:
            self.texts[key] = hit
        return hit


def _check_client(client, fname: str) -> None:
    if not (hasattr(client, "submit") and hasattr(client, "nthreads")):
        raise FunctraceTypeError(
            f"functrace.distributed.{fname}: client must be a dask.distributed.Client, got "
            f"{type(client).__name__}. Fix: from dask.distributed import Client; "
            f"client = Client('tcp://scheduler:8786') (or Client() for a local cluster) "
            f"({where()})")


def _total_threads(client, fname: str) -> int:
    n = sum(client.nthreads().values())
    if n == 0:
        raise FunctraceValueError(f"functrace.distributed.{fname}: the Dask cluster has no "
                                  f"workers (client.nthreads() is empty) ({where()})")
    return n


def _positions(nums, nargs: int, what: str, fname: str) -> tuple[int, ...]:
    single = isinstance(nums, int | np.integer) and not isinstance(nums, bool)
    seq = (nums,) if single else tuple(nums) if isinstance(nums, tuple | list) else None
    if not seq or not all(isinstance(i, int | np.integer) and not isinstance(i, bool)
                          for i in seq):
        raise FunctraceTypeError(f"functrace.distributed.{fname}: {what} must be an int or a "
                                 f"non-empty tuple of ints, got {nums!r:.60} ({where()})")
    for i in seq:
        if not -nargs <= i < nargs:
            raise FunctraceValueError(f"functrace.distributed.{fname}: {what}={nums!r} is out "
                                      f"of range for {nargs} positional argument(s) "
                                      f"({where()})")
    return tuple(sorted({int(i) % nargs for i in seq}))


def _reduce_tree(client, futures: list, combine, key: str) -> tuple[Any, list]:
    """Pairwise sums on the cluster, ceil(log2(len)) rounds: (the root, every future)."""
    level, depth, every = list(futures), 0, list(futures)
    while len(level) > 1:
        nxt = [client.submit(combine, level[i], level[i + 1], pure=False,
                             key=f"{key}-sum{depth}-{i // 2}")
               for i in range(0, len(level) - 1, 2)]
        every += nxt
        if len(level) % 2:
            nxt.append(level[-1])
        level, depth = nxt, depth + 1
    return level[0], every


def _gather(client, root, futures: list):
    """The root's value; on any failure every future of the step is cancelled first."""
    try:
        return root.result()
    except BaseException:
        client.cancel(futures)
        raise


# --------------------------------------------------------------------------------------------
# value_and_grad
# --------------------------------------------------------------------------------------------

def value_and_grad(fun: Callable, client, *, argnums: int | Sequence[int] = 0,
                   batch_argnums: int | Sequence[int], reduce: str = "mean",
                   has_aux: bool = False, shards: int | None = None,
                   backend: str = "cpu") -> Callable:
    """Data-parallel ``ft.value_and_grad(fun, argnums, has_aux)`` on a Dask cluster.

    Each call splits the ``batch_argnums`` arguments along axis 0 into shards (by default one
    per worker thread; sizes differ by at most one, see ``shard_bounds``), runs the compiled
    value-and-gradient graph of ``fun`` on each shard on the workers, and combines the
    shards' values and gradients by a tree reduction on the cluster. What the workers receive
    is ``fun``'s graph as Symbol JSON (traced and differentiated here, on abstract shard
    shapes), never Python code; each worker compiles it with ``ft.jit`` once and keeps it,
    keyed by the graph, for the later steps.

    Args:
        fun: the loss, as for ``ft.value_and_grad``: a pure function of arrays (pytrees of
            arrays) returning a float scalar, or ``(scalar, aux)`` with ``has_aux``. It is
            traced on abstract values, so Python control flow on values is an error (use
            ``ft.cond`` / ``fnp.where``), as under ``ft.jit``.
        client: a ``dask.distributed.Client``.
        argnums: the positional argument(s) to differentiate (an int or a tuple of ints, as
            ``ft.value_and_grad``); they are sent whole to every shard.
        batch_argnums: the positional argument(s) holding the batch (keyword-only, no
            default): every array leaf of them is split along axis 0, and all must have the
            same length there. They cannot be differentiated (their gradient would be
            per-shard, not summed). The other arguments go whole to every shard.
        reduce: how ``fun`` treats the batch. ``"mean"``: ``fun`` averages over the rows of
            its batch, so shard results are weighted by their share of the rows (exact for
            unequal shards); terms that do not depend on the batch, such as a weight penalty,
            are counted once, as in one process. ``"sum"``: ``fun`` sums over rows, and the
            shard results are added (a batch-independent term is then counted once per
            shard: add it outside).
        has_aux: ``fun`` returns ``(value, aux)``; the result is ``((value, auxes), grad)``
            with ``auxes`` a list of each shard's aux, in batch order (functrace cannot
            know how to combine them; ``shard_bounds`` gives the rows of each).
        shards: the number of shards (default: the cluster's total worker threads, read at
            each call; at most the batch length).
        backend: the ``ft.jit`` backend the workers compile for (``"cpu"``, ``"numpy"``).

    Returns:
        ``step(*args, **kwargs) -> (value, grad)``, equal to
        ``ft.value_and_grad(fun, argnums, has_aux)(*args, **kwargs)`` on the whole batch up
        to rounding, with numpy arrays in the arguments' pytree structure. A step either
        returns the combination of every shard or raises: a worker lost mid-step has its
        tasks re-run elsewhere by Dask (they are pure), up to Dask's
        ``distributed.scheduler.allowed-failures``, after which Dask's ``KilledWorker`` is
        raised. A keyword argument is sent whole to every shard.

    Raises:
        FunctraceTypeError: a graph that cannot be written as JSON (an ``ft.custom_vjp``
            without a registered name; the message names the fix), a client that is not a
            Dask client.
        FunctraceValueError: batch arguments of unequal length, ``argnums`` overlapping
            ``batch_argnums``, or a graph that changed since the previous call with the same
            argument types (the function depends on state other than its arguments).

    Example:
        >>> import numpy as np, functrace.numpy as fnp
        >>> from dask.distributed import Client, LocalCluster
        >>> from functrace import distributed
        >>> def loss(w, x, y):
        ...     return fnp.mean((x @ w - y) ** 2)
        >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))  # doctest: +SKIP
        >>> step = distributed.value_and_grad(loss, client, batch_argnums=(1, 2))
        >>> x, y = np.ones((10, 3)), np.ones(10)
        >>> value, grad = step(np.zeros(3), x, y)
        >>> float(value), grad
        (1.0, array([-2., -2., -2.]))
    """
    fname = "value_and_grad"
    check_callable(fun, "distributed.value_and_grad")
    check_argnums(argnums, "distributed.value_and_grad")
    _check_client(client, fname)
    if reduce not in _REDUCE:
        raise FunctraceValueError(f"functrace.distributed.value_and_grad: reduce must be one "
                                  f"of {_REDUCE}, got {reduce!r} ({where()})")
    if shards is not None and not (isinstance(shards, int) and shards >= 1):
        raise FunctraceValueError(f"functrace.distributed.value_and_grad: shards must be a "
                                  f"positive int or None, got {shards!r} ({where()})")
    shipper = _Shipper(fun, fname)

    def step(*args, **kwargs):
        nums, single = argnums_tuple(argnums, len(args), "distributed.value_and_grad")
        bnums = _positions(batch_argnums, len(args), "batch_argnums", fname)
        both = sorted(set(nums) & set(bnums))
        if both:
            raise FunctraceValueError(
                f"functrace.distributed.value_and_grad: argument {both[0]} is in both argnums "
                f"and batch_argnums; the gradient of a batch argument is per row, not a sum "
                f"over shards. Fix: differentiate it with ft.value_and_grad in one process, "
                f"or remove it from argnums ({where()})")
        leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs))
        leaves = [np.asarray(check_leaf_arg(x, i)) for i, x in enumerate(leaves)]
        starts = np.cumsum([0] + [len(tree_util.tree_leaves(a)) for a in args])
        batch = [i for b in bnums for i in range(starts[b], starts[b + 1])]
        n = _batch_length(leaves, batch, bnums, args)
        k = shards if shards is not None else _total_threads(client, fname)
        bounds = shard_bounds(n, k)

        def make(fwd: Symbol) -> Symbol:
            vg = _ft_value_and_grad(fwd, argnums=nums if not single else nums[0],
                                    has_aux=has_aux)
            a, kw = tree_util.tree_unflatten(in_tree, [v.aval for v in fwd.inputs])
            return trace(vg)(*a, **kw)

        texts, out_tree = {}, None
        for size in sorted({hi - lo for lo, hi in bounds}):
            avals = tuple(AVal((size,) + x.shape[1:], x.dtype) if i in batch else _abstract(x)
                          for i, x in enumerate(leaves))
            texts[size], out_tree = shipper.ship(in_tree, avals, make)
        n_value = 1 + _count_aux(out_tree, has_aux)
        key = f"functrace-vg-{uuid.uuid4().hex[:12]}"
        futures = []
        for j, (lo, hi) in enumerate(bounds):
            shard = [x[lo:hi] if i in batch else x for i, x in enumerate(leaves)]
            weight = (hi - lo) / n if reduce == "mean" else 1.0
            futures.append(client.submit(_vg_shard_task, texts[hi - lo], _version(), backend,
                                         shard, weight, n_value, has_aux, pure=False,
                                         key=f"{key}-shard{j}"))
        root, every = _reduce_tree(client, futures, _vg_combine, key)
        value, auxes, grads = _gather(client, root, every)
        if not has_aux:
            return tree_util.tree_unflatten(out_tree, [value, *grads])
        (_, aux_idx), g_idx = tree_util.tree_unflatten(out_tree,
                                                       list(range(out_tree.num_leaves)))
        aux_tree = tree_util.tree_structure(aux_idx)
        g = tree_util.tree_unflatten(tree_util.tree_structure(g_idx), list(grads))
        return (value, [tree_util.tree_unflatten(aux_tree, a) for a in auxes]), g

    step.__name__ = f"distributed.value_and_grad({getattr(fun, '__name__', 'f')})"
    step.__doc__ = fun.__doc__
    return step


def _batch_length(leaves, batch, bnums, args) -> int:
    if not batch:
        raise FunctraceValueError(f"functrace.distributed.value_and_grad: the batch "
                                  f"argument(s) {bnums} hold no arrays ({where()})")
    lengths = {}
    for i in batch:
        if leaves[i].ndim == 0:
            raise FunctraceValueError(
                f"functrace.distributed.value_and_grad: a leaf of the batch argument(s) "
                f"{bnums} is a scalar; every batch leaf is split along axis 0 ({where()})")
        lengths.setdefault(leaves[i].shape[0], leaves[i].shape)
    if len(lengths) > 1:
        shown = ", ".join(f"{s}" for s in lengths.values())
        raise FunctraceValueError(
            f"functrace.distributed.value_and_grad: the batch leaves have different lengths "
            f"along axis 0 (shapes {shown}); every leaf of batch_argnums={bnums} is split "
            f"along axis 0 ({where()})")
    (n,) = lengths
    if n == 0:
        raise FunctraceValueError(f"functrace.distributed.value_and_grad: the batch is empty "
                                  f"(0 rows) ({where()})")
    return n


def _count_aux(out_tree, has_aux: bool) -> int:
    if not has_aux:
        return 0
    (_, aux), _ = tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    return len(tree_util.tree_leaves(aux))


def _version() -> str:
    import functrace  # the package root, complete once any of its modules runs
    return functrace.__version__


# --------------------------------------------------------------------------------------------
# map
# --------------------------------------------------------------------------------------------

def map(f: Callable, client, xs: Sequence, *more: Sequence, chunksize: int | None = None,
        backend: str = "cpu") -> list:
    """``[f(x) for x in xs]`` (``[f(x, y) ...]`` for ``map(f, client, xs, ys)``) on a Dask
    cluster, results in order.

    ``f`` is traced here once per distinct argument signature (shapes, dtypes, pytree
    structure) and shipped to the workers as Symbol JSON, which compile it with ``ft.jit``
    and keep it for the later items and calls; an ``ft.jit`` function works as it is. Items
    are sent in chunks of ``chunksize`` (default: about four chunks per worker thread), one
    task each, so that Dask's per-task cost is paid per chunk, not per item.

    Args:
        f: a pure function of arrays (pytrees of arrays), traced on abstract values.
        client: a ``dask.distributed.Client``.
        xs, *more: sequences of equal length; item ``i`` calls ``f(xs[i], more[0][i], ...)``.
        chunksize: items per task.
        backend: the ``ft.jit`` backend of the workers.

    Returns:
        A list of ``f``'s results (numpy arrays in ``f``'s output structure). A worker lost
        mid-map has its tasks re-run by Dask (they are pure); the call returns every
        result or raises.

    Example:
        >>> import numpy as np, functrace.numpy as fnp
        >>> from functrace import distributed
        >>> distributed.map(lambda x: fnp.sum(x ** 2), client, [np.ones(3), np.ones(5)])
        [array(3.), array(5.)]
    """
    fname = "map"
    check_callable(f, "distributed.map")
    _check_client(client, fname)
    columns = [list(xs)] + [list(m) for m in more]
    if len({len(c) for c in columns}) > 1:
        raise FunctraceValueError(f"functrace.distributed.map: the sequences have different "
                                  f"lengths {[len(c) for c in columns]} ({where()})")
    items = list(zip(*columns))
    if not items:
        return []
    if chunksize is not None and not (isinstance(chunksize, int) and chunksize >= 1):
        raise FunctraceValueError(f"functrace.distributed.map: chunksize must be a positive "
                                  f"int or None, got {chunksize!r} ({where()})")
    if chunksize is None:
        chunksize = max(1, math.ceil(len(items) / (4 * _total_threads(client, fname))))
    shipper = _Shipper(f, fname)
    texts: list[str] = []
    index: dict[str, int] = {}
    work, out_trees = [], []
    shipped: dict = {}                 # one trace per distinct signature in this call
    for item in items:
        leaves, in_tree = tree_util.tree_flatten((tuple(item), {}))
        leaves = [np.asarray(check_leaf_arg(x, i)) for i, x in enumerate(leaves)]
        sig = (in_tree, tuple(_abstract(x) for x in leaves))
        if sig not in shipped:
            shipped[sig] = shipper.ship(*sig, lambda fwd: fwd)
        text, out_tree = shipped[sig]
        j = index.setdefault(text, len(texts))
        if j == len(texts):
            texts.append(text)
        work.append((j, leaves))
        out_trees.append(out_tree)
    key = f"functrace-map-{uuid.uuid4().hex[:12]}"
    futures = []
    for c in range(0, len(work), chunksize):
        chunk = work[c:c + chunksize]
        used = sorted({j for j, _ in chunk})
        futures.append(client.submit(_map_chunk_task, {j: texts[j] for j in used}, _version(),
                                     backend, chunk, pure=False, key=f"{key}-{c // chunksize}"))
    try:
        results = client.gather(futures)
    except BaseException:
        client.cancel(futures)
        raise
    flat = [r for chunk in results for r in chunk]
    return [tree_util.tree_unflatten(t, list(r)) for t, r in zip(out_trees, flat)]


# --------------------------------------------------------------------------------------------
# worker side (these functions run in the Dask workers)
# --------------------------------------------------------------------------------------------

_WORKER_CACHE = caches.LRU("distributed.worker_kernels", scale=0.125)
_STATS = {"hits": 0, "misses": 0}
_STATS_LOCK = threading.Lock()


def _compiled(text: str, version: str, backend: str):
    """The jitted Symbol of ``text``, from this process's cache (keyed by its SHA-256)."""
    if version != _version():
        raise FunctraceValueError(
            f"functrace.distributed: the driver runs functrace {version} and this worker "
            f"{_version()}; install the same version on every worker "
            f"(pip install 'functrace[dist]=={version}')")
    key = (hashlib.sha256(text.encode()).hexdigest(), backend)
    fn = _WORKER_CACHE.get(key)
    with _STATS_LOCK:
        _STATS["hits" if fn is not None else "misses"] += 1
    if fn is None:
        try:
            sym = Symbol.from_json(text)
        except GraphFormatError as exc:
            raise GraphFormatError(
                f"{exc}. On a Dask worker: an op or custom rule defined outside functrace "
                "must be imported in every worker process before the graph arrives, e.g. "
                "client.run(importlib.import_module, 'mypackage') and "
                "client.register_plugin for workers that join later") from exc
        fn = jit(sym, backend=backend)
        _WORKER_CACHE[key] = fn      # two threads may both compile it: either result is right
    return fn


def _run(fn, leaves) -> list:
    outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [np.asarray(o) for o in outs]


def _vg_shard_task(text: str, version: str, backend: str, leaves: list, weight: float,
                   n_value: int, has_aux: bool):
    """One shard's ``(weight * value, [aux leaves], weight * grads)``."""
    outs = _run(_compiled(text, version, backend), leaves)
    value, aux, grads = outs[0], outs[1:n_value], outs[n_value:]
    value = value * np.asarray(weight, value.real.dtype)
    grads = [g * np.asarray(weight, g.real.dtype) for g in grads]
    return value, [aux] if has_aux else [], grads


def _vg_combine(a, b):
    """The sum of two partial results (aux lists are concatenated, in batch order)."""
    return a[0] + b[0], a[1] + b[1], [x + y for x, y in zip(a[2], b[2])]


def _map_chunk_task(texts: dict, version: str, backend: str, chunk: list) -> list:
    fns = {j: _compiled(t, version, backend) for j, t in texts.items()}
    return [_run(fns[j], leaves) for j, leaves in chunk]


def _worker_cache_info() -> dict:
    with _STATS_LOCK:
        return {"graphs": len(_WORKER_CACHE.keys()), **_STATS}


def cache_info(client) -> dict:
    """Each worker's compiled-graph cache: ``{address: {"graphs", "hits", "misses"}}``.

    ``graphs`` is how many compiled graphs the worker holds, ``misses`` how many times it had
    to decode and compile one, ``hits`` how many tasks reused one (per worker process,
    since it started).

    Example:
        >>> from functrace import distributed
        >>> info = distributed.cache_info(client)   # {'tcp://127.0.0.1:40215': {...}, ...}
        >>> sorted(next(iter(info.values())))
        ['graphs', 'hits', 'misses']
    """
    _check_client(client, "cache_info")
    return client.run(_worker_cache_info)
