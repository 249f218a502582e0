"""The numba CPU executor: tiers, kernel loading, the disk cache, executables.

Owns ``compile(graph, ...) -> Executable`` (cached per graph and options), ``lower`` (the plan
and every generated source, without compiling), kernel loading and the on-disk kernel cache.
Imports core and the sibling backends; never the API layer. **Importing this file does not
import numba**: numba (~0.3 s) is imported the first time a kernel is actually loaded.

Pipeline for one graph (see docs/executor.md), split over three files:

1. ``cpu_driver.Program``: constants folded, ``passes.fusion.plan_fusion`` splits the graph
   into kernel groups and single-op steps, ``codegen.build_spec`` and
   ``cpu_target.kernel_module_source`` give each group the source of one ``@numba.njit``
   function (its key is the hash of that source, so two graphs that share a group share its
   kernel, in memory and on disk), ``passes.memory.plan_buffers`` assigns kernel outputs that
   do not escape to slots of a buffer pool reused from call to call, and a straight-line
   Python driver is generated for the whole graph.
2. ``cpu_target``: the expression table (vecmath polynomials for transcendentals, numpy's
   exact semantics elsewhere) and what may fuse.
3. here: loading/compiling the kernels, the interpreter tier, calling the driver with a pool.

Tiers: an ``Executable`` runs the reference interpreter until it is *hot* (``hot_after``
calls, default 2, env ``FUNCTRACE_HOT``), then compiles; it compiles at once when asked
(``eager``) or when all its kernels are already in the disk cache (at call ``cached_after``,
default the first). A kernel that numba cannot
compile is logged and its group runs on numpy instead.

Disk cache (``modfiles``): each kernel is a module ``ftk_<key>.py`` (key: a hash of its
source) in a directory only this user can write (``$FUNCTRACE_CACHE_DIR``, else
``$XDG_CACHE_HOME/functrace/kernels`` or ``~/.cache/functrace/kernels``, created 0700). The
file is compared with the source in hand and rewritten atomically if it differs; the module
is executed from that source, never imported from the file, and ``cache=True`` lets numba
keep the machine code in the module's ``__pycache__`` next to it. The source embeds a hash of
``vecmath.py`` and ``cpu_scalar.py`` so editing them invalidates dependent kernels.

In memory (``functrace.caches``; docs/executor.md, "Caches and memory"): kernels and loops
are bounded LRUs keyed by content hash (an evicted module is also dropped from
``sys.modules``; executables that use it keep their reference). Executables are shared
between equal graphs while someone (a jitted function's signature cache) holds them: the
cache holds them weakly, so it never keeps a graph or its buffer pools alive by itself.
"""

from __future__ import annotations

import builtins
import functools
import logging
import sys
import time

import numpy as np

from ... import caches
from ...core import Graph
from .. import gc_pause, reference
from ..lowering.executable import ExecutableBase, debug_level
from ..lowering.subgraphs import SubgraphHost
from ..malloc_tuning import tune_once
from ..modfiles import cache_dir
from . import loop
from .driver import KernelStep, Program
from .kernels import clear_kernels, is_cached_on_disk, load_kernel, load_loop
from .target import fusible, prefer_kernel, unfused_reason
from .threads import SERIAL, Threads, launcher, parallel_after, resolve

__all__ = ["compile", "lower", "Executable", "Program", "fusible", "unfused_reason",
           "prefer_kernel", "cache_dir", "clear_memory_caches", "load_kernel", "load_loop",
           "is_cached_on_disk"]

log = logging.getLogger("functrace")


def clear_memory_caches() -> None:
    """Forget compiled executables and in-memory kernels (disk cache untouched;
    ``functrace.caches.clear_all`` does this and more)."""
    _executables.clear()
    clear_kernels()


# --------------------------------------------------------------------------------------------
# executables
# --------------------------------------------------------------------------------------------

class Executable(ExecutableBase):
    """A graph bound to the CPU backend: interpreter tier first, compiled when hot.

    Call with the graph's flat input arrays; returns the list of outputs.
    """

    def __init__(self, graph: Graph, *, parallel: Threads | bool | int | str = SERIAL,
                 donate: tuple = (), eager: bool = False, hot_after: int | None = None,
                 cached_after: int | None = None):
        tune_once()
        super().__init__(graph, donate=donate, eager=eager, hot_after=hot_after,
                         cached_after=cached_after)
        parallel = resolve(parallel)   # threads.Threads: jit's ``threads=`` resolved
        self.parallel = parallel
        self._driver = None
        self._ns: dict | None = None      # the driver's globals (kernels swapped in there)
        # compiled calls left before the parallel kernel variants are compiled and swapped
        # in (None: nothing to swap)
        self._serial_runs_left: int | None = None
        self.parallel_kernels = 0         # kernels running their parallel variant
        # the sub-graphs of its control-flow steps (a loop body that is not one compiled
        # loop, a branch, a while condition) run as compiled code of their own (made by a
        # partial, not a closure over self: no reference cycle keeps the buffers alive)
        self._host = SubgraphHost(graph, functools.partial(compile, parallel=parallel,
                                                           eager=True))

    # -- lowering and compiling ------------------------------------------------------------
    def lower(self) -> Program:
        if self._program is None:
            self._program = Program(self.graph, self.parallel, self.donate)
        return self._program

    @property
    def compiled(self) -> bool:
        return self._driver is not None

    def compile(self) -> Executable:
        """Load (or compile) every kernel and build the driver; idempotent."""
        if self._driver is not None:
            return self
        with self._lock, gc_pause.paused():
            if self._driver is not None:
                return self
            t0 = time.perf_counter()
            prog = self.lower()
            dbg = debug_level()
            if dbg >= 1:
                print(f"functrace: compiling graph for the CPU\n{self.graph}", file=sys.stderr)
            # parallel variants are compiled after ``parallel_after()`` compiled calls (a
            # function called once never pays their compile time), at once when that is 0
            # or when numba has them all on disk
            after = parallel_after()
            for attempt in range(5):
                failed = []
                now = after == 0 or prog.parallel_cached()
                for ks in prog.kernels.values():
                    if now and ks.par_key is not None and self._load_parallel(prog, ks):
                        continue
                    try:
                        fn = load_kernel(ks.key, ks.source)
                        _warm_up(fn, ks)
                    except Exception as exc:   # numba typing errors etc.: numpy runs the group
                        log.warning("functrace: kernel for group %d (%s) failed to compile, "
                                    "running it with numpy: %s", ks.group.id,
                                    " ".join(prog.graph.eqns[i].op.name
                                             for i in ks.group.eqns), str(exc)[:500])
                        failed.extend(ks.group.eqns)
                        self.compile_failures.append(str(exc))
                        continue
                    prog.namespace[prog.kernel_names[ks.key]] = fn
                roll = prog.roll
                for ls in prog.loops:
                    try:
                        fn = load_loop(ls.key, ls.source)
                        loop.warm_up(fn, ls)
                    except Exception as exc:   # the loops stay unrolled
                        log.warning("functrace: compiled loop %s failed, running the graph "
                                    "unrolled: %s", ls.key, str(exc)[:500])
                        self.compile_failures.append(str(exc))
                        roll = False
                        break
                    prog.namespace[ls.name] = loop.make_runner(fn, ls)
                if not failed and roll == prog.roll:
                    break
                # re-plan without the failed equations (the last resort fuses nothing)
                no_fuse = prog.no_fuse | frozenset(failed)
                if attempt == 3:
                    no_fuse = frozenset(range(len(prog.graph.eqns)))
                if roll != prog.roll:     # equation indices change with the rolling
                    no_fuse = frozenset()
                prog = self._program = Program(self.graph, self.parallel, self.donate,
                                               no_fuse, roll=roll)
            if dbg >= 2:
                print(prog.source, file=sys.stderr)
            ns = self._ns = dict(prog.namespace)
            pending = [ks for ks in prog.kernels.values()
                       if ks.par_key is not None and not getattr(
                           ns[prog.kernel_names[ks.key]], "threads", 0)]
            self._serial_runs_left = max(after, 1) if pending else None
            exec(compile_source(prog.driver_source), ns)
            self._driver = ns["driver"]
            self.compile_seconds = time.perf_counter() - t0
            log.info("functrace: compiled %d kernels, %d steps in %.3f s", len(prog.kernels),
                     len(prog.plan.steps), self.compile_seconds)
        return self

    def _load_parallel(self, prog: Program, ks: KernelStep) -> bool:
        """Load a kernel's parallel variant into ``prog``'s namespace (and the driver's, once
        there is one); False, logged, when numba cannot compile it (the serial one stays)."""
        try:
            fn = launcher(load_kernel(ks.par_key, ks.par_source), ks.threads)
            _warm_up(fn, ks)
        except Exception as exc:
            log.warning("functrace: the parallel variant of the kernel for group %d failed "
                        "to compile, it stays serial: %s", ks.group.id, str(exc)[:500])
            self.compile_failures.append(str(exc))
            return False
        name = prog.kernel_names[ks.key]
        prog.namespace[name] = fn
        if self._ns is not None:
            self._ns[name] = fn
        self.parallel_kernels += 1
        return True

    def upgrade(self) -> Executable:
        """Compile the parallel variants of the kernels the cost model gives several
        threads and run them from the next call (results are the same bits); idempotent.
        Called by itself after ``FUNCTRACE_PARALLEL_AFTER`` compiled calls."""
        self.compile()
        with self._lock, gc_pause.paused():
            if self._serial_runs_left is None:
                return self
            prog = self._program
            t0 = time.perf_counter()
            for ks in prog.kernels.values():
                if ks.par_key is not None and not getattr(
                        self._ns[prog.kernel_names[ks.key]], "threads", 0):
                    self._load_parallel(prog, ks)
            self._serial_runs_left = None
            log.info("functrace: %d parallel kernels compiled in %.3f s",
                     self.parallel_kernels, time.perf_counter() - t0)
        return self

    def _new_pool(self):
        prog = self._program
        storage = [np.empty(max(n, 1), np.uint8) for n in prog.buffers.sizes]
        views = []
        for slot, shape, dt in prog.pool_views:
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            views.append(storage[slot][:n].view(dt).reshape(shape))
        return views

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, *args):
        driver = self._driver
        if driver is None:
            self.calls += 1
            if self.eager or self.calls >= self.hot_after or (
                    self.calls == self.cached_after and self.lower().all_cached()):
                self.compile()
                driver = self._driver
            else:
                return reference.run(self.graph, args)
        if self._serial_runs_left is not None:
            if self._serial_runs_left <= 0:
                self.upgrade()
            else:
                self._serial_runs_left -= 1
        args = [a if type(a) is np.ndarray else np.asarray(a) for a in args]
        pools = self._pools
        try:
            pool = pools.pop()
        except IndexError:
            pool = self._new_pool()
        token = self._host.enter()
        try:
            return driver(pool, *args)
        finally:
            pools.append(pool)
            self._host.leave(token)

    def release_buffers(self) -> None:
        """Free the pooled intermediate buffers (they are re-made by the next call)."""
        self._pools.clear()


def compile_source(text: str):
    return builtins.compile(text, "<functrace driver>", "exec")


def _warm_up(fn, ks: KernelStep) -> None:
    """Compile the C-contiguous specialisation now (extents 1, one-element arrays)."""
    spec = ks.spec
    args = [1] * spec.ndim
    for op in spec.operands:
        args.append(np.ones((1,) * max(len(op.axes), 1), op.dtype))
    for _, dt in spec.outputs:
        args.append(np.zeros((1,) * max(spec.ndim, 1), dt))
    if spec.reduction is not None and spec.reduction.stored:
        keep = len(spec.reduction.out_axes(spec.ndim))
        args.append(np.zeros((1,) * max(keep, 1), spec.reduction.dtype))
    fn(*args)


# (graph, options) -> Executable, held weakly: equal graphs share one executable while a
# holder (a jit signature cache entry) keeps it; when the last holder drops it, the entry,
# its graph and its buffer pools go. (Held strongly, with the executable referring to its
# graph, every graph ever jitted stayed alive until 512 of them had piled up.)
_executables = caches.LRU("numba_cpu.executables", scale=4, weak_values=True)


def compile(graph: Graph, *, parallel: Threads | bool | int | str = SERIAL,
            donate: tuple = (), eager: bool = False, hot_after: int | None = None,
            cached_after: int | None = None) -> Executable:
    """The cached Executable of ``graph`` (equal graphs share one while it is held).

    ``parallel``: ``ft.jit``'s ``threads=`` (``"auto"``, a count, False) or a resolved
    ``threads.Threads``; kernels whose work pays for it run on that many threads."""
    parallel = resolve(parallel)
    key = (graph, parallel, tuple(donate), eager, hot_after, cached_after)
    ex = _executables.get(key)
    if ex is None:
        ex = Executable(graph, parallel=parallel, donate=donate, eager=eager,
                        hot_after=hot_after, cached_after=cached_after)
        _executables[key] = ex
    return ex


def lower(graph: Graph, *, parallel: Threads | bool | int | str = SERIAL,
          donate: tuple = ()) -> Program:
    """The lowered program of ``graph``: plan and sources, nothing compiled."""
    return compile(graph, parallel=parallel, donate=donate).lower()
