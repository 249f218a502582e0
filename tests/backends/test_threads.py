"""Multi-core CPU kernels (``ft.jit(threads=...)``, ``backends/cpu/threads.py``): results on
one thread (the serial kernels), 2 and 4 threads equal bit for bit (forward and gradient,
sums, means, max, dot-like reductions, fused chains), and equal the reference interpreter
within rounding; the cost model keeps small kernels serial; concurrent calls from Python
threads; a process forked after a parallel kernel ran survives; the option's validation and
the ``FUNCTRACE_NUM_THREADS`` cap.

Four threads on a 2-core machine: numba allows up to ``NUMBA_NUM_THREADS`` threads, fixed
when numba starts, so the 1/2/4 comparison runs in a subprocess started with
``NUMBA_NUM_THREADS=4``. ``FUNCTRACE_PARALLEL_MIN_WORK=0`` makes every kernel that can be
split parallel, so the small inputs here exercise the parallel kernels, and
``FUNCTRACE_PARALLEL_AFTER=0`` compiles them with the rest (by default they are compiled on
the second compiled call: ``test_parallel_variant_compiled_on_second_call``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.backends import reference
from functrace.backends.cpu import render
from functrace.backends.cpu import threads as cpu_threads

pytest.importorskip("numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# sizes: reductions over the outermost axis need >= 2 blocks of BLOCK_MIN (32768) elements
FUNCS = {
    "sum_all": lambda x: fnp.sum(fnp.sin(x) * x),
    "sum_axis0": lambda x: fnp.sum(x * 2.0 + 1.0, axis=0),
    "mean_last": lambda x: fnp.mean(fnp.exp(fnp.tanh(x)) * x, axis=-1),
    "max_axis0": lambda x: fnp.max(x * 3.0 - 1.0, axis=0),
    "dot_like": lambda x: fnp.sum(x * fnp.cos(x)),
    "chain": lambda x: fnp.tanh(x) * fnp.exp(-x * x) + 1.0,
    "var": lambda x: fnp.var(x * 1.5, axis=0),
}


def _inputs():
    rng = np.random.default_rng(7)
    # a wide range of magnitudes: any change in the order of additions changes the bits
    m = rng.normal(size=(700, 150)) * np.exp(rng.uniform(-20, 20, size=(700, 150)))
    v = rng.normal(size=200_003) * np.exp(rng.uniform(-20, 20, size=200_003))
    return {"matrix": m, "vector": v}


def _fwd_and_grad(f, n):
    jf = ft.jit(f, eager=True, threads=n)
    jg = ft.jit(ft.grad(lambda a: fnp.sum(f(a) * 0.5)), eager=True, threads=n)
    return jf, jg


def _executable(jitted, x):
    """The executable ``jitted`` runs at ``x`` (the executor caches executables by graph and
    options, so this is the one jit made)."""
    from functrace.backends.cpu import executor
    return executor.compile(jitted.lower(x).graph, parallel=jitted.threads,
                            eager=jitted.eager)


def _kernel_threads(jitted, x) -> list[int]:
    """The thread count of each kernel of ``jitted`` at ``x`` (the executable jit made: the
    executor's cache is keyed by the graph and the resolved option)."""
    from functrace.backends.cpu import executor
    prog = executor.lower(jitted.lower(x).graph, parallel=jitted.threads)
    return [ks.threads for ks in prog.kernels.values()]


_SUBPROCESS = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import numba
from test_threads import FUNCS, _inputs, _fwd_and_grad, _kernel_threads
assert numba.config.NUMBA_NUM_THREADS == 4, numba.config.NUMBA_NUM_THREADS
report = {}
for name, f in FUNCS.items():
    for kind, x in _inputs().items():
        outs, used = {}, {}
        for n in (False, 2, 4):   # 1 resolves to the serial kernels (test_threads_option...)
            jf, jg = _fwd_and_grad(f, n)
            outs[n] = [np.asarray(jf(x)), np.asarray(jg(x))]
            used[str(n)] = max(_kernel_threads(jf, x) + _kernel_threads(jg, x))
        same = all(np.array_equal(a, b, equal_nan=True) for n in (2, 4)
                   for a, b in zip(outs[n], outs[False]))
        report[f"{name}/{kind}"] = {"same": same, "threads": used,
                                   "sums": [float(np.sum(o)) for o in outs[4]]}
print(json.dumps(report))
"""


@pytest.fixture(scope="session")   # a module-scoped one re-ran when the worker came back
def four_threads_report():          # to this module after another one (~95 s each time)
    env = dict(os.environ, NUMBA_NUM_THREADS="4", FUNCTRACE_PARALLEL_MIN_WORK="0",
               FUNCTRACE_PARALLEL_AFTER="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("FUNCTRACE_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _SUBPROCESS, os.path.dirname(__file__)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-4000:]
    import json
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.xdist_group("threads_subprocess")   # one worker runs the subprocess, once
@pytest.mark.parametrize("kind", ["matrix", "vector"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_same_bits_at_1_2_4_threads(four_threads_report, name, kind):
    r = four_threads_report[f"{name}/{kind}"]
    assert r["same"], f"{name} on a {kind}: results differ between thread counts"
    # the comparison means something only if parallel kernels ran
    used = r["threads"]
    assert used["2"] == 2 and used["4"] >= 3, used
    assert used["False"] == 1, used


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_parallel_matches_interpreter(monkeypatch, name):
    """The parallel kernels against the reference interpreter (within rounding), forward and
    gradient, and bit for bit against the serial kernels in this process (2 threads)."""
    monkeypatch.setenv("FUNCTRACE_PARALLEL_MIN_WORK", "0")
    monkeypatch.setenv("FUNCTRACE_PARALLEL_AFTER", "0")
    f = FUNCS[name]
    for x in _inputs().values():
        x = np.tanh(x * 1e-3) * 3.0           # moderate values: a tolerance means something
        par = _fwd_and_grad(f, 2)
        ser = _fwd_and_grad(f, False)
        assert max(_kernel_threads(par[0], x) + _kernel_threads(par[1], x)) >= 2
        for jp, js in zip(par, ser, strict=True):
            got, serial = np.asarray(jp(x)), np.asarray(js(x))
            want = reference.run(jp.lower(x).graph, [x])[0]
            np.testing.assert_array_equal(got, serial)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_block_count_depends_on_shapes_only():
    """The number of blocks a reduction over the outermost axis runs in is a function of the
    extents: the same for every thread count, one block for small reductions (then the
    kernel is the unblocked loop)."""
    from functrace.backends.lowering.spec import Reduction
    red = Reduction("sum", "t0", np.dtype("float64"), np.dtype("float64"), (0,))
    assert render.reduction_blocks((1000,), red) == 1
    assert render.reduction_blocks((10 * render.BLOCK_MIN,), red) == 10
    assert render.reduction_blocks((10 ** 9,), red) == render.MAX_BLOCKS
    red2 = Reduction("sum", "t0", np.dtype("float64"), np.dtype("float64"), (0,))
    # slots (blocks x outputs) stay under a quarter of the elements
    assert render.reduction_blocks((64, 10 ** 6), red2) <= 64 // 4


@pytest.mark.parametrize("shape, axis", [((16, 16), 0), ((300, 7), 0), ((40, 3, 5), (0, 2)),
                                         ((5000,), 0)])
def test_static_one_block_reduction_renders_without_blocks(shape, axis):
    """A kernel inlined into a compiled loop knows its extents: a reduction they give one
    block is rendered without the blocks' scratch array, and must give the same bits as the
    kernel that computes the block count at run time."""
    from functrace.backends.cpu import executor, target
    x = np.random.default_rng(0).normal(size=shape)
    jitted = ft.jit(lambda x: fnp.sum(x * 2.0 + 1.0, axis=axis), threads=False)
    (ks,) = executor.lower(jitted.lower(x).graph, parallel=False).kernels.values()
    extents = x.shape if len(shape) == ks.spec.ndim else None
    assert extents is not None and render.reduction_blocks(extents, ks.spec.reduction) == 1
    fns = []
    for ext in (None, extents):
        text = render.render_cpu(ks.spec, "kernel", "@numba.njit", extents=ext)
        assert ("np.empty" in text) == (ext is None)
        ns = {}
        exec(target.module_imports(text) + text, ns)
        fns.append(ns["kernel"])
    keep = [n for d, n in enumerate(shape) if d not in ks.spec.reduction.axes]
    outs = []
    for fn in fns:
        r = np.full(keep or [1], np.nan)
        fn(*shape, x, r)
        outs.append(r)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0].reshape(np.shape(jitted(x))), jitted(x), rtol=0)


def test_blocked_sum_is_accurate_and_order_sensitive_data():
    """The blocked sum of the wide-range vector against math.fsum, and a check that the data
    would expose a changed order (summing the blocks in reverse gives other bits)."""
    import math
    v = _inputs()["vector"]
    got = float(ft.jit(lambda x: fnp.sum(x * 1.0), eager=True, threads=False)(v))
    exact = math.fsum(v)
    assert abs(got - exact) <= 1e-15 * np.sum(np.abs(v))
    nb = render.MAX_BLOCKS
    parts = [math.fsum(p) for p in np.array_split(v, nb)]
    fwd = rev = 0.0
    for p in parts:
        fwd += p
    for p in reversed(parts):
        rev += p
    assert fwd != rev


def test_cost_model_keeps_small_kernels_serial(monkeypatch):
    monkeypatch.delenv("FUNCTRACE_PARALLEL_MIN_WORK", raising=False)
    f = ft.jit(lambda x: fnp.exp(x) * 2.0 + 1.0, threads=4)
    assert _kernel_threads(f, np.ones(1000)) == [1]
    assert "prange" not in f.lower(np.ones(1000)).source
    big = np.ones(4_000_000)
    n = _kernel_threads(f, big)[0]
    assert n == min(4, cpu_threads.available_cores()) or n >= 2
    assert "numba.prange" in f.lower(big).source


def test_threads_option_and_env_cap(monkeypatch):
    assert cpu_threads.resolve(False).count == 1
    assert cpu_threads.resolve(1).count == 1
    assert cpu_threads.resolve(3).count == 3
    assert cpu_threads.resolve("auto").count == cpu_threads.available_cores()
    monkeypatch.setenv("FUNCTRACE_NUM_THREADS", "2")
    assert cpu_threads.resolve(8).count == 2
    monkeypatch.setenv("FUNCTRACE_NUM_THREADS", "1")
    f = ft.jit(lambda x: fnp.exp(x) * 2.0, threads=8)
    assert _kernel_threads(f, np.ones(4_000_000)) == [1]
    for bad in (-1, "all", 2.5):
        with pytest.raises(ValueError, match="threads"):
            ft.jit(lambda x: x, threads=bad)
    monkeypatch.setenv("FUNCTRACE_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="FUNCTRACE_NUM_THREADS"):
        cpu_threads.resolve(2)


def test_concurrent_calls_from_python_threads(monkeypatch):
    """Python threads calling one jitted function with parallel kernels at once: every
    result equals the serial one (parallel launches are serialised by a lock; numba's
    workqueue layer aborts the process on concurrent launches otherwise)."""
    monkeypatch.setenv("FUNCTRACE_PARALLEL_MIN_WORK", "0")
    monkeypatch.setenv("FUNCTRACE_PARALLEL_AFTER", "0")
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(800, 300)) for _ in range(6)]

    def f(x):
        return fnp.sum(fnp.tanh(x) * x, axis=0) + fnp.mean(fnp.exp(x * 0.1))
    jp = ft.jit(f, eager=True, threads=2)
    js = ft.jit(f, eager=True, threads=False)
    assert max(_kernel_threads(jp, xs[0])) >= 2
    want = [np.asarray(js(x)) for x in xs]
    got: dict[int, list] = {}
    errors = []

    def run(i):
        try:
            got[i] = [np.asarray(jp(xs[(i + k) % len(xs)])) for k in range(12)]
        except Exception as exc:   # pragma: no cover - reported below
            errors.append(exc)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for i, outs in got.items():
        for k, o in enumerate(outs):
            np.testing.assert_array_equal(o, want[(i + k) % len(xs)])


_FORK = """
import os, sys
import numpy as np
import functrace as ft, functrace.numpy as fnp
f = ft.jit(lambda x: fnp.exp(x) * 2.0 + 1.0, eager=True, threads=2)
x = np.ones(100_000)
f(x)
from functrace.backends.cpu import executor
prog = executor.lower(f.lower(x).graph, parallel=2)
assert max(ks.threads for ks in prog.kernels.values()) == 2
pid = os.fork()
if pid == 0:
    os._exit(0 if float(f(x)[0]) == float(np.exp(1.0) * 2 + 1) else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_after_parallel_kernel():
    """numba's default layer on Linux (GNU OpenMP) kills a process forked after a parallel
    region; functrace asks for a fork-safe layer unless the user chose one."""
    env = dict(os.environ, FUNCTRACE_PARALLEL_MIN_WORK="0", FUNCTRACE_PARALLEL_AFTER="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_THREADING_LAYER", None)
    env.pop("FUNCTRACE_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _FORK], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "child 0" in out.stdout, out.stdout + out.stderr[-3000:]


def test_parallel_variant_compiled_on_second_call(monkeypatch, tmp_path):
    """Time to first result does not grow: the first compiled call runs serial kernels, the
    second compiles the parallel variants of the kernels that warrant them and runs them;
    both calls give the same bits. (An empty kernel cache: a parallel variant numba has on
    disk already is loaded with the rest.)"""
    from functrace.backends.cpu import executor
    monkeypatch.setenv("FUNCTRACE_CACHE_DIR", str(tmp_path))
    executor.clear_memory_caches()
    monkeypatch.setenv("FUNCTRACE_PARALLEL_MIN_WORK", "0")
    monkeypatch.delenv("FUNCTRACE_PARALLEL_AFTER", raising=False)
    x = np.random.default_rng(5).normal(size=(900, 300))
    f = ft.jit(lambda x: fnp.sum(fnp.sin(x) * x, axis=0), eager=True, threads=2)
    first = np.asarray(f(x))
    ex = _executable(f, x)
    assert ex.compiled and ex.parallel_kernels == 0
    second = np.asarray(f(x))
    assert ex.parallel_kernels >= 1
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(np.asarray(f(x)), first)


def test_docstring_examples():
    import doctest
    import importlib
    for mod in (importlib.import_module("functrace.jit"), cpu_threads):
        assert doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


_LAYER = """
import json, sys
import numpy as np, numba
import functrace as ft, functrace.numpy as fnp
x = np.random.default_rng(0).normal(size=(4096, 64))
f = lambda x: fnp.sum(fnp.exp(-x * x) * x, axis=0)
par, ser = ft.jit(f, eager=True, threads=2), ft.jit(f, eager=True, threads=False)
a, b = par(x), ser(x)
print(json.dumps([numba.threading_layer(), a.tobytes() == b.tobytes()]))
"""


@pytest.mark.parametrize("layer", [None, "workqueue"])
def test_threading_layer_tbb_when_installed_same_bits_either_way(layer):
    """With pip's ``tbb`` in this environment, the first parallel launch runs on numba's TBB
    layer (``threads.preload_tbb``: 1.7 us a launch against 160-180 us for the workqueue
    here); without it, or when the user asks for another layer, on that one. The bits equal
    the serial kernel's either way."""
    import json
    env = dict(os.environ, FUNCTRACE_PARALLEL_MIN_WORK="0", FUNCTRACE_PARALLEL_AFTER="0",
               NUMBA_NUM_THREADS="2",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_THREADING_LAYER", None)
    env.pop("FUNCTRACE_NUM_THREADS", None)
    if layer is not None:
        env["NUMBA_THREADING_LAYER"] = layer
    out = subprocess.run([sys.executable, "-c", _LAYER], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    used, same = json.loads(out.stdout.strip().splitlines()[-1])
    has_tbb = os.path.exists(os.path.join(sys.prefix, "lib", "libtbb.so.12")) or \
        os.path.exists(os.path.join(sys.base_prefix, "lib", "libtbb.so.12"))
    assert used == (layer or ("tbb" if has_tbb else "workqueue"))
    assert same
