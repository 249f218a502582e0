"""How many threads the CPU target's kernels run on: the ``threads=`` option of ``ft.jit``
resolved to a count, the cost model that gives a kernel one thread or several, and the
launcher that runs a parallel kernel.

Owns ``Threads`` (the resolved option: a count and the work a kernel needs before it runs in
parallel; hashable, part of the executable cache key), ``resolve``, ``kernel_threads`` (the
cost model) and ``launcher``. Text and arithmetic only until a parallel kernel is launched:
importing this file imports no numba. Imports ``lowering.spec`` and ``render`` (the block
count of a reduction).

Compile time: a parallel kernel is a second module (``parallel=True`` compiles cost ~1.5-2.5x
a serial one), compiled only for kernels the cost model gives several threads, and only when
the executable runs a second time (``parallel_after``): the first result costs what it costs
with threads off, and a function run once never pays for them.

Results never depend on the thread count: elementwise kernels and reductions that keep the
outermost axis write disjoint outputs per thread, and a reduction over the outermost axis
runs in a number of blocks fixed by the extents alone, serial or parallel (``render``).

Threading layer: numba's default on Linux is GNU OpenMP when present, which kills any
process forked after a parallel region ran ("fork() called from a process already using GNU
OpenMP"). Unless the user chose a layer (``NUMBA_THREADING_LAYER`` or
``numba.config.THREADING_LAYER``), the first parallel launch asks numba for a fork-safe one
(``"forksafe"``: TBB if installed, else numba's own workqueue; ``preload_tbb`` makes pip's
TBB loadable). The workqueue is not safe for
parallel regions launched from two Python threads at once, so every parallel kernel launch
holds ``_launch_lock``: concurrent calls of jitted functions still run, their parallel
kernels one at a time.
"""

from __future__ import annotations

import dataclasses
import os
import threading

from ..lowering.spec import KernelSpec
from .render import reduction_blocks

__all__ = ["Threads", "SERIAL", "resolve", "available_cores", "kernel_work", "kernel_threads",
           "launcher", "MIN_WORK", "choose_layer", "preload_tbb", "parallel_after"]

#: A kernel runs in parallel when its work (elements x estimated cost per element, see
#: ``kernel_work``; a unit is roughly 0.1-0.3 ns of one core) is at least this much, and each
#: thread gets at least half of it: ~0.2-0.5 ms of serial work, against a parallel launch
#: measured at ~10 us (GNU OpenMP) to ~100-200 us (numba's workqueue) on this shared 2-core
#: machine (the "parallel launch" row of ``benchmarks/bench_cpu.py --threads 2``).
#: ``FUNCTRACE_PARALLEL_MIN_WORK`` overrides it; 0 makes every kernel that can be split run
#: in parallel (tests do).
MIN_WORK = 1 << 21


@dataclasses.dataclass(frozen=True)
class Threads:
    """The resolved ``threads=`` option: ``count`` threads at most, for kernels whose work is
    at least ``min_work`` (``count == 1``: every kernel is serial)."""

    count: int = 1
    min_work: int = MIN_WORK

    @property
    def parallel(self) -> bool:
        return self.count > 1


SERIAL = Threads(1)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at most ``NUMBA_NUM_THREADS``
    when that is set."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    env = os.environ.get("NUMBA_NUM_THREADS")
    if env and env.strip().isdigit() and int(env) > 0:
        n = min(n, int(env))
    return max(1, n)


def _env_int(name: str) -> int | None:
    v = os.environ.get(name, "").strip()
    if not v:
        return None
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{name}={v!r}: expected a whole number") from None
    if n < 0:
        raise ValueError(f"{name}={v!r}: expected a whole number >= 0")
    return n


def resolve(threads) -> Threads:
    """``ft.jit``'s ``threads=`` as a ``Threads``.

    ``"auto"`` (or ``True``): every core this process may use; an int: that many threads;
    ``False``, ``None``, ``0`` or ``1``: one. ``FUNCTRACE_NUM_THREADS`` caps the count
    (``FUNCTRACE_NUM_THREADS=1`` turns threads off everywhere). An already resolved
    ``Threads`` is returned as it is.

    Example:
        >>> resolve(False).count, resolve(3).count >= 1
        (1, True)
    """
    if isinstance(threads, Threads):
        return threads
    if threads is None or threads is False:
        n = 1
    elif threads is True or threads == "auto":
        n = available_cores()
    elif isinstance(threads, int) and threads >= 0:
        n = max(1, threads)
    else:
        raise ValueError(f"threads={threads!r}: expected 'auto', a number of threads (an int "
                         f">= 1) or False")
    cap = _env_int("FUNCTRACE_NUM_THREADS")
    if cap:
        n = min(n, cap)
    mw = _env_int("FUNCTRACE_PARALLEL_MIN_WORK")
    return Threads(n, MIN_WORK if mw is None else mw)


def parallel_after() -> int:
    """Compiled calls of an executable that run its serial kernels before the parallel
    variants are compiled and swapped in (``FUNCTRACE_PARALLEL_AFTER``, default 1: the
    second compiled call compiles them, so a function called once never pays for them;
    0: compile them with the rest)."""
    n = _env_int("FUNCTRACE_PARALLEL_AFTER")
    return 1 if n is None else n


def _element_cost(spec: KernelSpec) -> int:
    """Estimated cost of one loop iteration: a unit per operand read and body line, more for
    the calls into vecmath (transcendentals, special functions)."""
    cost = len(spec.operands) + len(spec.body)
    for _name, expr, _dt, _d in spec.body:
        cost += 4 * (expr.count("vm.") + expr.count("vs.") + expr.count("vi."))
    if spec.reduction is not None:
        cost += 2
    return max(cost, 1)


def kernel_work(spec: KernelSpec, extents) -> int:
    """The estimated work of one call of a kernel (elements x cost per element)."""
    n = 1
    for e in extents:
        n *= int(e)
    return n * _element_cost(spec)


def kernel_threads(spec: KernelSpec, extents, threads: Threads) -> int:
    """How many threads a kernel of these (static) loop extents runs on: 1 (the serial
    kernel) when threads are off, its work is under ``threads.min_work``, or its outermost
    axis cannot be split (a single row, a reduction too small for two blocks, a
    logsumexp over it)."""
    if threads.count <= 1 or not extents:
        return 1
    n0 = int(extents[0])
    red = spec.reduction
    if red is not None and 0 in red.axes:
        split = reduction_blocks(extents, red)
    else:
        split = n0
    if split < 2:
        return 1
    work = kernel_work(spec, extents)
    if work < threads.min_work:
        return 1
    per = max(threads.min_work // 2, 1)
    return max(2, min(threads.count, split, work // per))


# --------------------------------------------------------------------------------------------
# launching (imports numba)
# --------------------------------------------------------------------------------------------

_launch_lock = threading.Lock()
_layer_chosen = False


def choose_layer() -> None:
    """Ask numba for a fork-safe threading layer unless the user chose one (module doc)."""
    global _layer_chosen
    if _layer_chosen:
        return
    import numba
    with _launch_lock:
        if not _layer_chosen:
            if (not os.environ.get("NUMBA_THREADING_LAYER")
                    and str(numba.config.THREADING_LAYER).lower() == "default"):
                numba.config.THREADING_LAYER = "forksafe"
            if str(numba.config.THREADING_LAYER).lower() in ("forksafe", "tbb", "safe"):
                preload_tbb()
            _layer_chosen = True


def preload_tbb() -> bool:
    """Load pip's TBB (``pip install tbb``, or ``functrace[threads]``) so that numba can use it.

    numba's TBB layer is an extension linked against ``libtbb.so.12`` with no search path of
    its own, and pip puts that library in ``<sys.prefix>/lib``, where the dynamic linker does
    not look: without ``LD_LIBRARY_PATH`` numba then falls back to its workqueue layer, whose
    launch cost 160-180 us per parallel kernel here, against 1.7 us with TBB (and 2 us with
    GNU OpenMP, which is not fork-safe). Loading the library by path first lets numba find it
    by name. Linux only; True if it is loaded (by this call or earlier)."""
    import sys
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        path = os.path.join(prefix, "lib", "libtbb.so.12")
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                continue
    return False


def launcher(fn, n: int):
    """``fn`` (a ``parallel=True`` numba kernel) as a callable that runs it on ``n`` threads
    (at most numba's pool), one parallel launch at a time in this process."""
    import numba
    choose_layer()
    n = max(1, min(n, numba.config.NUMBA_NUM_THREADS))
    get, set_ = numba.get_num_threads, numba.set_num_threads
    lock = _launch_lock

    def run(*args):
        with lock:
            prev = get()
            set_(n)
            try:
                return fn(*args)
            finally:
                set_(prev)
    run.threads = n
    run.kernel = fn
    return run
