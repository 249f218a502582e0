"""GPU check of the CUDA backend: correctness on the OpCase table, then timings.

Run on a machine with an NVIDIA GPU (docs/gpu.md):

    python benchmarks/gpu_check.py [--quick] [--table-budget S] [--workers N] [--no-table]

It installs nothing: it needs numpy, numba + numba-cuda, cupy (cupy-cuda13x or -12x), scipy
(for the OpCase table's references), and optionally jax[cuda] (the jax.jit column) and
opt_einsum (einsum rows; a pure-Python wheel found in ./wheels or ./shared/wheels is put on
sys.path, nothing is installed). Without a usable GPU it prints why and exits with status 2.

1. **Table** (bounded by ``--table-budget``, default 150 s): every row of tests/support/op_cases.py
   (values, every dtype) and its weighted-sum gradient (float64) under
   ``ft.jit(..., backend="cuda")`` against the reference interpreter on the CPU. Rows are
   split in chunks run by a pool of worker processes (kernel compilation is per process and
   serial; the chunks compile in parallel). Tolerances as tests/backends/test_jit.py: rtol 1e-12
   (float64), 1e-5 (float32 math), atol scaled by the largest reference value. Then (45 s at
   most, informational) each row's function called eagerly on cupy arrays: ``fnp`` outside
   transforms must compute on the GPU with numpy's semantics and return cupy arrays (18 rows
   mix numpy arrays in through Python operators or cupy methods, which cupy itself refuses;
   tests/backends/test_device_arrays.py lists them).
2. **libdevice accuracy**: max ulp error of the fused float32/float64 exp, log, sin, tanh,
   log1p, expm1 kernels against numpy in float64 (the CPU's vector-math library cannot run
   here: it is built on numba CPU intrinsics; libdevice is what the GPU kernels call).
3. **Timings** (medians over interleaved rounds, device synchronised after every call):
   * chain: grad of sum(tanh(sin(x)*x + exp(-x**2))*0.5) at 1e8 float32: functrace vs a
     hand-written cupy-eager gradient vs jax.jit, and the fraction of copy bandwidth
     (``t_copy / t_functrace``; the gradient moves the same 8 bytes per element as a copy).
     Targets: >= 0.70 of copy bandwidth, <= 1.0x jax.jit.
   * mlp: value and gradient of a tanh MLP softmax cross-entropy loss, batch 4096,
     784->2048->10, float32. Target: <= 1.1x jax.jit.
   * launch: host time per call of a compiled step with ~10 fused groups on 1,024 elements
     (``x = exp(x - max(x))`` ten times). Target: <= 150 us.
   The script prints each number with its target; it exits 1 only on a correctness failure.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import multiprocessing
import os
import statistics
import sys
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(1, os.path.join(ROOT, "tests"))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # jax shares the GPU
for _whl in sorted(glob.glob(os.path.join(ROOT, "wheels", "*.whl")) +
                   glob.glob(os.path.join(ROOT, "shared", "wheels", "*.whl"))):
    if "opt_einsum" in os.path.basename(_whl):
        sys.path.append(_whl)                # pure-Python wheels import from the zip

import numpy as np  # noqa: E402

# --------------------------------------------------------------------------------------------
# the GPU
# --------------------------------------------------------------------------------------------

def gpu_or_exit():
    """cupy, or exit 2 saying why the GPU backend cannot run here."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        print("gpu_check: NUMBA_ENABLE_CUDASIM is set: this script needs a real GPU "
              "(the simulator tests are tests/backends/test_cuda_sim.py)")
        sys.exit(2)
    from functrace.backends.cuda import executor as numba_cuda
    why = numba_cuda.unavailable_reason()
    if why is not None:
        print(f"gpu_check: cannot run: {why}")
        sys.exit(2)
    import cupy
    return cupy


def device_name(cp) -> str:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    drv = cp.cuda.runtime.driverGetVersion()
    return (f"{name}, {props['multiProcessorCount']} SMs, driver CUDA {drv // 1000}."
            f"{drv % 1000 // 10}, cupy {cp.__version__}")


# --------------------------------------------------------------------------------------------
# 1. the OpCase table (worker processes)
# --------------------------------------------------------------------------------------------

def _fn(c):
    from op_cases import bound_fn
    return bound_fn(c)


def table_rows(grad: bool):
    from op_cases import backend_rows
    try:
        import opt_einsum  # noqa: F401
        einsum = True
    except ImportError:   # einsum rows need opt_einsum (carry its wheel: docs/gpu.md)
        einsum = False
    return backend_rows(grad, skip=lambda c: not einsum and "einsum" in c.name)


def _grad_item(c, dt):
    from op_cases import weighted_grad
    g, fargs, low = weighted_grad(c, dt)
    return f"grad {c.name}[{dt}]", g, fargs, low


def _compare(got, want, what, low):
    from functrace import tree_util
    gl, wl = tree_util.tree_leaves(got), tree_util.tree_leaves(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} outputs != {len(wl)}"
    for g, w in zip(gl, wl):
        g = g.get() if hasattr(g, "get") and hasattr(g, "__cuda_array_interface__") else g
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"{what}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        if w.dtype.kind in "fc":
            rtol = 1e-5 if (low or w.dtype == np.float32) else 1e-12
            scale = np.nanmax(np.abs(w), initial=1.0)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def table_chunk(kind: str, start: int, stop: int) -> dict:
    """Run rows [start, stop) of the value or gradient table on the GPU (in a worker)."""
    import functrace as ft
    t0 = time.perf_counter()
    rows = table_rows(kind == "grad")[start:stop]
    if kind == "grad":
        items = [_grad_item(c, dt) for c, dt in rows]
    else:
        items = [(f"{c.name}[{dt}]", _fn(c), c.make_args(dt), False) for c, dt in rows]
    fns, argss, wants, names, lows = [], [], [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn, args, low in items:
            try:
                ft.jit(fn).lower(*args)
            except ft.ConcretizationError:
                continue
            fns.append(fn)
            argss.append(args)
            names.append(name)
            lows.append(low)
            wants.append(fn(*args) if kind == "grad" else ft.trace(fn)(*args)(*args))

    def all_rows(*a):
        return [fn(*x) for fn, x in zip(fns, a)]

    jf = ft.jit(all_rows, backend="cuda", eager=True)
    failures = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jf(*argss)
            again = jf(*argss)    # the second call launches through the driver directly
    except Exception as e:   # report, do not die: the other chunks still count
        return {"kind": kind, "rows": len(names), "kernels": 0, "seconds": 0.0,
                "failures": [f"chunk {kind}[{start}:{stop}] raised {type(e).__name__}: {e}"],
                "compile_failures": []}
    ex = next(iter(jf._cache.values())).run
    for name, g, g2, w, low in zip(names, got, again, wants, lows):
        try:
            _compare(g, w, name, low)
            _compare(g2, w, name + " (second call)", low)
        except AssertionError as e:
            failures.append(f"{name}: {str(e).strip()[:400]}")
    return {"kind": kind, "rows": len(names), "kernels": len(ex.lower().kernels),
            "seconds": time.perf_counter() - t0, "compile_seconds": ex.compile_seconds,
            "failures": failures, "compile_failures": ex.compile_failures[:5]}


def run_table(budget: float, workers: int, chunk: int) -> bool:
    tasks = []
    for kind in ("values", "grad"):
        n = len(table_rows(kind == "grad"))
        tasks += [(kind, i, min(i + chunk, n)) for i in range(0, n, chunk)]
    print(f"\n== OpCase table under backend='cuda': {len(tasks)} chunks of <= {chunk} rows, "
          f"{workers} worker processes, budget {budget:.0f} s")
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")       # CUDA does not survive fork
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    futs = {pool.submit(table_chunk, *t): t for t in tasks}
    done, results = set(), []
    try:
        for f in cf.as_completed(futs, timeout=budget):
            done.add(f)
            try:
                results.append(f.result())
            except Exception as e:   # a worker died
                k, a, b = futs[f]
                results.append({"kind": k, "rows": 0, "kernels": 0, "seconds": 0,
                                "failures": [f"chunk {k}[{a}:{b}] died: {e!r}"],
                                "compile_failures": []})
    except cf.TimeoutError:
        pass
    missed = [futs[f] for f in futs if f not in done]
    for p in list(getattr(pool, "_processes", {}).values()):   # stop stragglers: timings next
        p.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    ok = True
    for kind in ("values", "grad"):
        rs = [r for r in results if r["kind"] == kind]
        rows = sum(r["rows"] for r in rs)
        fails = [f for r in rs for f in r["failures"]]
        cfail = [f for r in rs for f in r["compile_failures"]]
        print(f"  {kind:6s}: {rows} rows checked, {sum(r['kernels'] for r in rs)} kernels, "
              f"{len(fails)} failures, {len(cfail)} kernels fell back to single ops")
        for f in fails[:25]:
            print(f"    FAIL {f}")
        for f in cfail[:5]:
            print(f"    kernel compile failure: {f[:300]}")
        ok = ok and not fails
    if missed:
        print(f"  not run within the budget: {len(missed)} chunks "
              f"({', '.join(f'{k}[{a}:{b}]' for k, a, b in missed[:8])}"
              f"{' ...' if len(missed) > 8 else ''}); raise --table-budget")
    comp = [r.get("compile_seconds", 0.0) for r in results]
    print(f"  wall {time.perf_counter() - t0:.1f} s; compile per chunk: median "
          f"{statistics.median(comp) if comp else 0:.1f} s")
    return ok


def check_eager(cp, budget: float) -> None:
    """fnp on cupy arrays outside transforms (traced, run with cupy), row by row."""
    from functrace import tree_util
    print(f"\n== fnp on cupy arrays outside transforms (OpCase rows, first dtype; "
          f"budget {budget:.0f} s)")
    t_end = time.perf_counter() + budget
    n = ok = 0
    raised, wrong = [], []
    for c, dt in table_rows(False):
        if dt != c.dtypes[0]:
            continue
        if time.perf_counter() > t_end:
            break
        n += 1
        args = c.make_args(dt)
        fn = _fn(c)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = fn(*args)
                got = fn(*[cp.asarray(a) for a in args])
        except Exception as e:
            raised.append(f"{c.name}[{dt}]: {type(e).__name__}: {str(e)[:120]}")
            continue
        try:
            leaves = tree_util.tree_leaves(got)
            if not all(isinstance(x, cp.ndarray | int | float | bool) for x in leaves):
                raise AssertionError(f"returned {[type(x).__name__ for x in leaves]}")
            _compare(got, want, f"{c.name}[{dt}]", True)
            ok += 1
        except AssertionError as e:
            wrong.append(f"{c.name}[{dt}]: {str(e).strip()[:200]}")
    print(f"  {n} rows: {ok} computed with cupy and match numpy, {len(raised)} raised, "
          f"{len(wrong)} differ or left the device")
    for f in (raised + wrong)[:15]:
        print(f"    {f}")


# --------------------------------------------------------------------------------------------
# 2. libdevice accuracy
# --------------------------------------------------------------------------------------------

def check_math(cp) -> None:
    import functrace as ft
    import functrace.numpy as fnp
    print("\n== libdevice accuracy (fused kernels vs numpy in float64; max error in ulp)")
    domains = {"exp": (-80, 80), "log": (1e-30, 1e30), "sin": (-1e4, 1e4), "tanh": (-20, 20),
               "log1p": (-0.99, 1e3), "expm1": (-40, 80)}
    rng = np.random.default_rng(0)
    for name, (lo, hi) in domains.items():
        cols = []
        for dt in ("float32", "float64"):
            x = rng.uniform(lo, hi, 1_000_000)
            if name == "log":
                x = np.exp(rng.uniform(np.log(lo), np.log(hi), x.size))
            x = x.astype(dt)
            f = ft.jit(getattr(fnp, name), backend="cuda", eager=True)
            got = cp.asnumpy(f(cp.asarray(x))).astype(np.float64)
            ref = getattr(np, name)(x.astype(np.float64))
            if dt == "float64":
                ref = getattr(np, name)(x.astype(np.longdouble)).astype(np.float64)
            ulp = np.spacing(np.abs(ref).astype(dt)).astype(np.float64)
            fin = np.isfinite(ref) & (ulp > 0)
            err = np.max(np.abs(got[fin] - ref[fin]) / ulp[fin]) if fin.any() else 0.0
            cols.append(f"{dt} {err:5.2f}")
        print(f"  {name:6s} " + "   ".join(cols))


# --------------------------------------------------------------------------------------------
# 3. timings
# --------------------------------------------------------------------------------------------

def bench(cp, fns: dict, min_rounds: int, min_seconds: float) -> dict:
    """Median seconds per call of each function, rounds interleaved, device synchronised."""
    times = {k: [] for k in fns}
    dev = cp.cuda.Device()
    t_end = time.perf_counter() + min_seconds
    r = 0
    while r < min_rounds or time.perf_counter() < t_end:
        for k, f in fns.items():
            dev.synchronize()
            t = time.perf_counter()
            out = f()
            if hasattr(out, "block_until_ready"):
                out.block_until_ready()
            elif isinstance(out, tuple | list):
                for o in out:
                    if hasattr(o, "block_until_ready"):
                        o.block_until_ready()
            dev.synchronize()
            times[k].append(time.perf_counter() - t)
        r += 1
        if r > 200:
            break
    return {k: statistics.median(v) for k, v in times.items()}


def _graph_variant(cp, make, args, want):
    """The jitted function from ``make()`` with FUNCTRACE_CUDA_GRAPHS=1, once it has captured
    and matches ``want``; None (saying why) otherwise."""
    from functrace import tree_util
    os.environ["FUNCTRACE_CUDA_GRAPHS"] = "1"
    try:
        fg = make()
        for _ in range(3):
            got = fg(*args)
        if next(iter(fg._cache.values())).run._replay is None:
            print("  CUDA graph: not captured (see the warning above)")
            return None
        for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want), strict=True):
            if not bool(cp.allclose(a, b, rtol=1e-5, atol=1e-7)):
                print("  CUDA graph: result differs from the steps run one by one")
                return None
        return fg
    except Exception as exc:
        print(f"  CUDA graph: failed: {type(exc).__name__}: {str(exc)[:200]}")
        return None
    finally:
        os.environ.pop("FUNCTRACE_CUDA_GRAPHS", None)


def _env_variant(cp, env: dict, make, args, want, what: str):
    """The jitted function from ``make()`` compiled with the environment ``env`` (read when
    it compiles), once it matches ``want``; None (saying why) otherwise."""
    from functrace import tree_util
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        fv = make()
        got = fv(*args)
        for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want), strict=True):
            if not bool(cp.allclose(a, b, rtol=1e-4, atol=1e-6)):
                print(f"  {what}: result differs")
                return None
        return fv
    except Exception as exc:
        print(f"  {what}: failed: {type(exc).__name__}: {str(exc)[:200]}")
        return None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _print_lt_plans() -> None:
    from functrace.backends.cuda.cublaslt import Lt
    plans = Lt.get().plans
    if not plans:
        print("  no cuBLASLt plan was made (see the warning above): the variant is cupy's")
    for sh, p in plans.items():
        print(f"  plan {sh.m}x{sh.k} @ {sh.k}x{sh.n} (x_t={sh.x_t}, y_t={sh.y_t}): "
              f"{p.candidates} candidates, "
              f"{'cupy matmul kept' if p.algo is None else 'cuBLASLt algorithm'} "
              f"{p.seconds * 1e6:.0f} us")


def _guarded(fn) -> None:
    """Run an optional measurement; a failure is printed, not fatal to the run."""
    try:
        fn()
    except Exception as exc:
        print(f"  failed: {type(exc).__name__}: {str(exc)[:300]}")


def _target(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def load_jax():
    try:
        import jax
        import jax.numpy as jnp
        if not any(d.platform == "gpu" for d in jax.devices()):
            print("  (jax has no GPU device: jax.jit column skipped)")
            return None, None
        return jax, jnp
    except Exception as e:   # not installed, or no CUDA plugin
        print(f"  (jax unavailable: {type(e).__name__}: {str(e)[:100]}; jax.jit column skipped)")
        return None, None


def time_chain(cp, jax, jnp, n: int, rounds: int, seconds: float) -> None:
    import functrace as ft
    import functrace.numpy as fnp
    print(f"\n== chain: grad of sum(tanh(sin(x)*x + exp(-x**2))*0.5), {n:.0e} float32")

    def chain(x):
        return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)

    def cupy_grad(x):
        s = cp.sin(x)
        e = cp.exp(-x * x)
        t = cp.tanh(s * x + e)
        return (0.5 * (1 - t * t)) * (cp.cos(x) * x + s - 2 * x * e)

    xh = np.random.default_rng(0).uniform(-3, 3, n).astype(np.float32)
    x = cp.asarray(xh)
    y = cp.empty_like(x)
    f = ft.jit(ft.grad(chain), backend="cuda", eager=True)
    t0 = time.perf_counter()
    g = f(x)
    cp.cuda.Device().synchronize()
    print(f"  functrace compile + first call: {time.perf_counter() - t0:.2f} s; kernels: "
          f"{len(next(iter(f._cache.values())).run.lower().kernels)}")
    ref = cupy_grad(x)
    err = float(cp.max(cp.abs(g - ref)))
    print(f"  max |functrace - cupy hand gradient| = {err:.2e}")
    fns = {"functrace": lambda: f(x), "cupy eager (hand grad)": lambda: cupy_grad(x),
           "copy": lambda: cp.copyto(y, x)}
    if jax is not None:
        def jchain(x):
            return jnp.sum(jnp.tanh(jnp.sin(x) * x + jnp.exp(-x ** 2)) * 0.5)
        jf = jax.jit(jax.grad(jchain))
        xj = jax.device_put(xh)
        jf(xj).block_until_ready()
        fns["jax.jit"] = lambda: jf(xj)
    med = bench(cp, fns, rounds, seconds)
    for k, v in med.items():
        print(f"  {k:24s} {v * 1e3:9.3f} ms")
    frac = med["copy"] / med["functrace"]
    print(f"  functrace at {frac:.2f} of copy bandwidth ({8 * n / med['copy'] / 1e9:.0f} GB/s "
          f"copy): {_target(frac >= 0.70)} (>= 0.70)")
    print(f"  functrace / cupy eager = {med['functrace'] / med['cupy eager (hand grad)']:.2f}")
    if "jax.jit" in med:
        r = med["functrace"] / med["jax.jit"]
        print(f"  functrace / jax.jit = {r:.2f}: {_target(r <= 1.0)} (<= 1.0)")


def time_mlp(cp, jax, jnp, batch: int, rounds: int, seconds: float) -> None:
    import functrace as ft
    import functrace.numpy as fnp
    print(f"\n== mlp: value and grad, batch {batch}, 784->2048->10, float32")
    rng = np.random.default_rng(1)
    host = [rng.standard_normal((784, 2048)).astype(np.float32) * 0.03,
            np.zeros(2048, np.float32), rng.standard_normal((2048, 10)).astype(np.float32) * 0.03,
            rng.standard_normal((batch, 784)).astype(np.float32),
            rng.integers(0, 10, batch).astype(np.int64)]
    dev = [cp.asarray(a) for a in host]

    def loss(w1, b1, w2, x, labels):
        h = fnp.tanh(x @ w1 + b1)
        logits = h @ w2
        return fnp.mean(fnp.logsumexp(logits, axis=1)
                        - fnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0])

    def cupy_vg(w1, b1, w2, x, labels):
        h = cp.tanh(x @ w1 + b1)
        logits = h @ w2
        m = logits.max(1, keepdims=True)
        e = cp.exp(logits - m)
        s = e.sum(1, keepdims=True)
        rows = cp.arange(x.shape[0])
        val = cp.mean(cp.log(s[:, 0]) + m[:, 0] - logits[rows, labels])
        d = e / s
        d[rows, labels] -= 1
        d /= x.shape[0]
        dw2 = h.T @ d
        da = (d @ w2.T) * (1 - h * h)
        return val, (x.T @ da, da.sum(0), dw2)

    f = ft.jit(ft.value_and_grad(loss, argnums=(0, 1, 2)), backend="cuda", eager=True)
    t0 = time.perf_counter()
    v, gs = f(*dev)
    cp.cuda.Device().synchronize()
    prog = next(iter(f._cache.values())).run.lower()
    print(f"  functrace compile + first call: {time.perf_counter() - t0:.2f} s; "
          f"{len(prog.kernels)} kernels, {len(prog.plan.steps)} steps")
    step_times(cp, next(iter(f._cache.values())).run, prog, lambda: f(*dev))
    rv, rgs = cupy_vg(*dev)
    errs = [float(cp.max(cp.abs(a - b)) / (cp.max(cp.abs(b)) + 1e-30)) for a, b in zip(gs, rgs)]
    print(f"  value {float(v):.6f} vs hand {float(rv):.6f}; max rel grad diff "
          f"{max(errs):.1e}")
    fns = {"functrace": lambda: f(*dev), "cupy eager (hand grad)": lambda: cupy_vg(*dev)}
    # the three skinny products (10 columns) run as generated kernels by default; with
    # FUNCTRACE_CUDA_SKINNY=0 they go to cuBLAS, as before. Opt-in: the large products
    # through cuBLASLt, its fastest algorithm per shape (FUNCTRACE_CUDA_GEMM=lt). docs/gpu.md
    for env, key, title, extra in (
            ({"FUNCTRACE_CUDA_SKINNY": "0"}, "functrace, products on cuBLAS",
             "FUNCTRACE_CUDA_SKINNY=0 (every product on cuBLAS)", None),
            ({"FUNCTRACE_CUDA_GEMM": "lt"}, "functrace, cuBLASLt",
             "FUNCTRACE_CUDA_GEMM=lt (large products on cuBLASLt, tuned)", _print_lt_plans)):
        fv = _env_variant(cp, env, lambda: ft.jit(ft.value_and_grad(loss, argnums=(0, 1, 2)),
                                                  backend="cuda", eager=True),
                          dev, (v, gs), key)
        if fv is None:
            continue
        ex_v = next(iter(fv._cache.values())).run
        print(f"  with {title}:")
        if extra is not None:
            _guarded(extra)
        _guarded(lambda ex_v=ex_v, fv=fv: step_times(cp, ex_v, ex_v.lower(), lambda: fv(*dev)))
        fns[key] = (lambda fv: lambda: fv(*dev))(fv)
    fg = _graph_variant(cp, lambda: ft.jit(ft.value_and_grad(loss, argnums=(0, 1, 2)),
                                           backend="cuda", eager=True), dev, (v, gs))
    if fg is not None:
        fns["functrace, CUDA graph"] = lambda: fg(*dev)
    if jax is not None:
        def jloss(w1, b1, w2, x, labels):
            h = jnp.tanh(x @ w1 + b1)
            logits = h @ w2
            lse = jax.nn.logsumexp(logits, axis=1)
            return jnp.mean(lse - jnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0])
        jf = jax.jit(jax.value_and_grad(jloss, argnums=(0, 1, 2)))
        jd = [jax.device_put(a) for a in host]
        jax.block_until_ready(jf(*jd))
        fns["jax.jit"] = lambda: jax.block_until_ready(jf(*jd))
        # jax's default float32 matmul precision on a GPU is TF32 (10-bit mantissa inputs);
        # numpy, cupy and functrace multiply in full float32. Same precision, for the ratio:
        with jax.default_matmul_precision("highest"):
            jh = jax.jit(jax.value_and_grad(jloss, argnums=(0, 1, 2)))
            jax.block_until_ready(jh(*jd))
        fns["jax.jit fp32 matmuls"] = lambda: jax.block_until_ready(jh(*jd))
    med = bench(cp, fns, rounds, seconds)
    for k, val in med.items():
        print(f"  {k:24s} {val * 1e3:9.3f} ms")
    print(f"  functrace / cupy eager = {med['functrace'] / med['cupy eager (hand grad)']:.2f}")
    if "jax.jit" in med:
        r = med["functrace"] / med["jax.jit"]
        print(f"  functrace / jax.jit = {r:.2f}: {_target(r <= 1.1)} (<= 1.1)")
        if "functrace, products on cuBLAS" in med:
            r = med["functrace, products on cuBLAS"] / med["jax.jit"]
            print(f"  functrace with every product on cuBLAS / jax.jit = {r:.2f}")
        if "functrace, cuBLASLt" in med:
            r = med["functrace, cuBLASLt"] / med["jax.jit"]
            print(f"  functrace with cuBLASLt products / jax.jit = {r:.2f}: "
                  f"{_target(r <= 1.1)} (<= 1.1)")
        if "functrace, CUDA graph" in med:
            r = med["functrace, CUDA graph"] / med["jax.jit"]
            print(f"  functrace with a CUDA graph / jax.jit = {r:.2f}: {_target(r <= 1.1)}")
        r = med["functrace"] / med["jax.jit fp32 matmuls"]
        print(f"  functrace / jax.jit with float32 matmuls (precision='highest') = {r:.2f}")
    # the two large products alone (13 GFLOP each): cuBLAS through cupy against XLA
    x, w1 = dev[3], dev[0]
    da = cp.asarray(rng.standard_normal((batch, 2048)).astype(np.float32))
    gemms = {"cupy x @ w1": lambda: x @ w1, "cupy x.T @ da": lambda: x.T @ da}
    if jax is not None:
        with jax.default_matmul_precision("highest"):
            jm = jax.jit(lambda a, b: a @ b)
            jt = jax.jit(lambda a, b: a.T @ b)
            xj, wj, dj = jax.device_put(host[3]), jax.device_put(host[0]), jax.device_put(
                cp.asnumpy(da))
            jm(xj, wj).block_until_ready()
            jt(xj, dj).block_until_ready()
        gemms["jax x @ w1 (highest)"] = lambda: jm(xj, wj)
        gemms["jax x.T @ da (highest)"] = lambda: jt(xj, dj)
    try:           # the same products through tuned cuBLASLt plans (cublaslt.Lt)
        from functrace.backends.cuda.cublaslt import GemmShape, Lt
        lt, st = Lt.get(), cp.cuda.Stream(non_blocking=False)
        for name, sh, a, b in (
                ("lt x @ w1", GemmShape(batch, 2048, 784, False, False, "float32"), x, w1),
                ("lt x.T @ da", GemmShape(784, 2048, batch, True, False, "float32"), x, da)):
            plan = lt.plan(sh, st)
            print(f"  cuBLASLt {name[3:]}: {plan.candidates} candidates timed; "
                  f"{'cupy matmul kept' if plan.algo is None else 'an Lt algorithm chosen'}")
            if plan.algo is not None:
                o = cp.empty((sh.m, sh.n), np.float32)
                run = (lambda p, a, b, o: lambda: lt.run(p, a, b, o, st.ptr))(plan, a, b, o)
                run()
                ref = (a.T if sh.x_t else a) @ b
                st.synchronize()
                err = float(cp.max(cp.abs(o - ref)) / cp.max(cp.abs(ref)))
                print(f"  cuBLASLt {name[3:]}: max relative difference to cupy {err:.1e}")
                gemms[name] = run
    except Exception as exc:
        print(f"  cuBLASLt unavailable: {type(exc).__name__}: {str(exc)[:200]}")
    gmed = bench(cp, gemms, rounds, seconds)
    flop = 2 * batch * 784 * 2048
    print("  " + "; ".join(f"{k} {v * 1e3:.3f} ms ({flop / v / 1e12:.0f} TFLOP/s)"
                           for k, v in gmed.items()))


def step_times(cp, ex, prog, call, reps: int = 20) -> None:
    """Each step of a compiled call alone (synchronised before and after: launch and GPU
    time together), median over ``reps`` calls, named by the fusion plan."""
    from functrace.passes.fusion import Group
    g = prog.graph
    names = [f"[{' '.join(g.eqns[i].op.name for i in s.eqns)}]" if isinstance(s, Group)
             else g.eqns[s.eqn].op.name for s in prog.plan.steps]
    steps, *rest = ex._steps
    stream = ex._stream[0]
    acc = [[] for _ in steps]

    def timed(k, st):
        def run(ctx):
            stream.synchronize()
            t = time.perf_counter()
            st(ctx)
            stream.synchronize()
            acc[k].append(time.perf_counter() - t)
        return run

    ex._steps = ([timed(k, st) for k, st in enumerate(steps)], *rest)
    try:
        for _ in range(reps):
            call()
    finally:
        ex._steps = (steps, *rest)
    med = [statistics.median(a) * 1e6 for a in acc]
    print(f"  steps alone (us, synchronised; sum {sum(med):.0f}): " + "  ".join(
        f"{n} {m:.0f}" for n, m in zip(names, med)))


def time_launch(cp, jax, jnp, calls: int) -> None:
    import functrace as ft
    import functrace.numpy as fnp
    from functrace.passes.fusion import Group
    print("\n== launch overhead: x = exp(x - max(x)) ten times, 1024 float32")

    def ten(x):
        for _ in range(10):
            x = fnp.exp(x - fnp.max(x))
        return x

    x = cp.asarray(np.random.default_rng(2).standard_normal(1024).astype(np.float32))
    f = ft.jit(ten, backend="cuda", eager=True)
    f(x)
    prog = next(iter(f._cache.values())).run.lower()
    n_k = len(prog.kernels)
    n_op = sum(not isinstance(s, Group) for s in prog.plan.steps)
    dev = cp.cuda.Device()

    def host_time(fn):
        fn()
        dev.synchronize()
        best = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            best.append((time.perf_counter() - t) / calls)
            dev.synchronize()
        return min(best)

    def latency(fn):
        ts = []
        for _ in range(calls // 4):
            dev.synchronize()
            t = time.perf_counter()
            out = fn()
            if hasattr(out, "block_until_ready"):
                out.block_until_ready()
            dev.synchronize()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    h = host_time(lambda: f(x))
    print(f"  functrace: {n_k} kernel launches + {n_op} other steps per call")
    print(f"  functrace host time per call {h * 1e6:8.1f} us ({h / max(n_k, 1) * 1e6:.1f} us "
          f"per kernel); {_target(h <= 150e-6)} (<= 150 us)")
    print(f"  functrace latency (synchronised) {latency(lambda: f(x)) * 1e6:8.1f} us")
    # the same step replayed as a CUDA graph (opt-in: FUNCTRACE_CUDA_GRAPHS=1, docs/gpu.md)
    fg = _graph_variant(cp, lambda: ft.jit(ten, backend="cuda", eager=True), (x,), f(x))
    if fg is not None:
        hg = host_time(lambda: fg(x))
        print(f"  functrace with a CUDA graph: host time per call {hg * 1e6:8.1f} us; "
              f"{_target(hg <= 150e-6)} (<= 150 us)")
        print(f"  functrace with a CUDA graph: latency {latency(lambda: fg(x)) * 1e6:8.1f} us")
    if os.environ.get("FT_PROFILE_DIR"):     # where the host time goes, for the curious
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.runcall(lambda: [f(x) for _ in range(calls)])
        dev.synchronize()
        path = os.path.join(os.environ["FT_PROFILE_DIR"], "launch_profile.txt")
        with open(path, "w") as fh:
            pstats.Stats(prof, stream=fh).sort_stats("tottime").print_stats(40)
        print(f"  profile of {calls} calls written to {path}")
    if jax is not None:
        def jten(x):
            for _ in range(10):
                x = jnp.exp(x - jnp.max(x))
            return x
        jf = jax.jit(jten)
        xj = jax.device_put(cp.asnumpy(x))
        jf(xj).block_until_ready()
        print(f"  jax.jit host time per call   {host_time(lambda: jf(xj)) * 1e6:8.1f} us; "
              f"latency {latency(lambda: jf(xj)) * 1e6:.1f} us")


# --------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller budgets (about 2 minutes)")
    ap.add_argument("--no-table", action="store_true", help="skip the OpCase table")
    ap.add_argument("--table-budget", type=float, default=None,
                    help="seconds for the table (default 150, --quick 60)")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes for the table (default: min(8, CPUs))")
    ap.add_argument("--chunk", type=int, default=120, help="table rows per jit")
    args = ap.parse_args()
    t_start = time.perf_counter()
    cp = gpu_or_exit()
    print(f"gpu_check on {device_name(cp)}")
    try:
        import numba
        print(f"numba {numba.__version__}; numba-cuda: "
              f"{getattr(sys.modules.get('numba_cuda'), '__version__', 'built-in numba.cuda')}")
    except Exception:
        pass
    ok = True
    if not args.no_table:
        try:
            import scipy  # noqa: F401  (op_cases' references)
            budget = args.table_budget or (60.0 if args.quick else 150.0)
            workers = args.workers or max(1, min(8, (os.cpu_count() or 2) - 1))
            ok = run_table(budget, workers, args.chunk)
        except ImportError as e:
            print(f"\n== OpCase table skipped: {e} (op_cases needs scipy)")
    jax, jnp = load_jax()
    rounds, seconds = (5, 1.0) if args.quick else (15, 3.0)
    sections = [(check_eager, (cp, 20.0 if args.quick else 45.0)), (check_math, (cp,)),
                (time_chain, (cp, jax, jnp, 10 ** 8, rounds, seconds)),
                (time_mlp, (cp, jax, jnp, 4096, rounds, seconds)),
                (time_launch, (cp, jax, jnp, 200 if args.quick else 1000))]
    for section, section_args in sections:   # report a broken section, run the others
        try:
            section(*section_args)
        except Exception:
            ok = False
            print(f"\n== {section.__name__} RAISED:")
            traceback.print_exc(file=sys.stdout)
    print(f"\ngpu_check finished in {time.perf_counter() - t_start:.0f} s; correctness "
          f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
