"""The scientific surface against scipy/numpy and jax.jit: norm.logpdf, gammaln, rfft.

Run (one interpreter runs every row, so all backends of a row are timed interleaved in the
same process and see the same machine state; JAX is an optional peer, so run the script with
an interpreter that has jax, e.g. a venv made with ``--system-site-packages`` that adds jax to
the interpreter functrace runs in; without jax its rows are skipped with a notice):

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_scientific.py \\
        [--quick] [--only norm,gammaln,rfft,fresh] [--dtypes float64,float32] [--n 1000000] \\
        [--json benchmarks/results/bench_scientific.json]

Workloads, 1e6 elements each, float64 and float32 (every value a scalar loss):
  norm      functrace.scipy.stats.norm.logpdf(x, loc, scale).sum(), x ~ N(0, 1);
            value, and value + grad w.r.t. x, loc and scale
  gammaln   functrace.scipy.special.gammaln(x).sum(), x ~ U(0.1, 20) (every branch of the
            kernel: reflection-free small x, the Taylor series about 2, the recurrence,
            Stirling); value, and value + grad (digamma)
  rfft      sum(abs(functrace.numpy.fft.rfft(x))**2), x ~ N(0, 1); value, and value + grad
  fresh     fresh process -> first jitted value + grad (float64), three conditions: functrace
            with warm disk caches, functrace with empty caches (an empty FUNCTRACE_CACHE_DIR
            and an empty NUMBA_CACHE_DIR: a first-time install), and jax.jit

Backends of each row: scipy/numpy eager (the value; and the hand-written analytic gradient,
``-(x - loc)/scale**2``, ``scipy.special.digamma``, ``2 n irfft(...)``, for value + grad),
functrace eager (un-jitted, ``ft.value_and_grad``), ``ft.jit`` and ``jax.jit`` (x64 enabled,
single-threaded XLA). The ratio is to the scipy/numpy row of the same run. Cold compile: the
first call of ``ft.jit`` with an empty kernel cache (numba itself already initialised, and
the special-function helpers' own numba cache as it is) and the first call of ``jax.jit``
(jax already initialised). Every timed result is checked against the float64 reference before
it is timed. The table and a JSON file (default benchmarks/results/bench_scientific.json) give
medians; compare only ratios from one run (the machine is shared and noisy).
"""

from __future__ import annotations

import os
import sys

# before numpy, numba or jax start: one thread everywhere (benchmarks/_thread_env), only when
# run as the benchmark
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    import _thread_env  # noqa: F401

# isort: split
import argparse
import json
import math
import platform
import statistics
import subprocess
import tempfile
import time

import numpy as np
import scipy
import scipy.special
import scipy.stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _timing import check_close, jit_cold
from _timing import interleaved as _interleaved

import functrace as ft
import functrace.numpy as fnp
import functrace.scipy.special as fsp
import functrace.scipy.stats as fst

try:
    import jax
    import jax.numpy as jnp
    import jax.scipy.special as jsp
    import jax.scipy.stats as jst
    jax.config.update("jax_enable_x64", True)
except ImportError:   # optional peer
    jax = None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
QUICK = False
ROWS: list[dict] = []
LOG_2PI = math.log(2.0 * math.pi)


def interleaved(fns):
    return _interleaved(fns, 3 if QUICK else 7, 0.05)


def tol(dtype):
    """Relative tolerance (to max(1, |reference|)) of a result against the float64
    reference: float32 sums of 1e6 terms round at about 1e-4 of their magnitude."""
    return 1e-10 if dtype == np.float64 else 2e-4


def jax_block(out):
    return jax.block_until_ready(out)


def jax_cold(fn, *args):
    """jax.jit(fn) and its first call (trace + XLA compile): (jitted, result, seconds)."""
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    out = jax_block(jitted(*args))
    return jitted, out, time.perf_counter() - t0


def flat(out):
    """(value, grads) or value -> a flat list of arrays."""
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], tuple):
        return [out[0], *out[1]]
    if isinstance(out, tuple):
        return list(out)
    return [out]


def run_row(workload, dtype, kind, ref, base, peers, ft_fn, jax_fn, args, jargs):
    """Check and time one row: ``peers`` are eager callables of no arguments (the first one,
    ``base``, is the ratio's denominator), ``ft_fn``/``jax_fn`` the functions to jit, ``ref``
    the float64 reference (a list of arrays)."""
    rtol = tol(dtype)
    fns = {}
    for name, fn in peers.items():
        check_close(f"{workload} {kind} {name}", flat(fn()), ref, rtol)
        fns[name] = fn
    eager = ft_fn
    check_close(f"{workload} {kind} functrace eager", flat(eager(*args)), ref, rtol)
    fns["functrace eager"] = lambda: eager(*args)
    jitted, out, ft_cold = jit_cold(ft_fn, *args)
    check_close(f"{workload} {kind} functrace jit", flat(out), ref, rtol)
    check_close(f"{workload} {kind} functrace jit (warm)", flat(jitted(*args)), ref, rtol)
    fns["functrace jit"] = lambda: jitted(*args)
    colds = {"functrace jit": ft_cold}
    if jax is not None:
        jj, jout, jcold = jax_cold(jax_fn, *jargs)
        check_close(f"{workload} {kind} jax.jit", flat(jout), ref, rtol)
        fns["jax.jit"] = lambda: jax_block(jj(*jargs))
        colds["jax.jit"] = jcold
    med = interleaved(fns)
    for name, t in med.items():
        ROWS.append({"workload": workload, "dtype": np.dtype(dtype).name, "kind": kind,
                     "backend": name, "median_s": t, "ratio": t / med[base],
                     "cold_s": colds.get(name)})
    print(f"[{workload} {np.dtype(dtype).name} {kind}: "
          + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in med.items()) + "]", flush=True)


# --------------------------------------------------------------------------------------------
# norm.logpdf
# --------------------------------------------------------------------------------------------

def norm_value_hand(x, loc, scale):
    z = (x - loc) / scale
    return np.sum(-0.5 * z * z) - x.size * (np.log(scale) + x.dtype.type(0.5 * LOG_2PI))


def norm_vg_hand(x, loc, scale):
    z = (x - loc) / scale
    v = np.sum(-0.5 * z * z) - x.size * (np.log(scale) + x.dtype.type(0.5 * LOG_2PI))
    gx = -z / scale
    return v, (gx, -np.sum(gx), np.sum(z * z - 1) / scale)


def ft_norm(x, loc, scale):
    return fnp.sum(fst.norm.logpdf(x, loc, scale))


def jax_norm(x, loc, scale):
    return jnp.sum(jst.norm.logpdf(x, loc, scale))


def bench_norm(n, dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=n).astype(dtype)
    loc, scale = np.asarray(0.3, dtype), np.asarray(1.7, dtype)
    args = (x, loc, scale)
    x64, l64, s64 = (np.asarray(a, np.float64) for a in args)
    ref_v = [norm_value_hand(x64, l64, s64)]
    v, g = norm_vg_hand(x64, l64, s64)
    ref_vg = [v, *g]
    jargs = tuple(jnp.asarray(a) for a in args) if jax is not None else ()
    run_row("norm.logpdf", dtype, "value", ref_v, "scipy",
            {"scipy": lambda: scipy.stats.norm.logpdf(x, loc, scale).sum(),
             "numpy (hand)": lambda: norm_value_hand(x, loc, scale)},
            ft_norm, jax_norm, args, jargs)
    run_row("norm.logpdf", dtype, "value+grad", ref_vg, "numpy (hand)",
            {"numpy (hand)": lambda: norm_vg_hand(x, loc, scale)},
            ft.value_and_grad(ft_norm, argnums=(0, 1, 2)),
            jax.value_and_grad(jax_norm, argnums=(0, 1, 2)) if jax is not None else None,
            args, jargs)


# --------------------------------------------------------------------------------------------
# gammaln
# --------------------------------------------------------------------------------------------

def ft_gammaln(x):
    return fnp.sum(fsp.gammaln(x))


def jax_gammaln(x):
    return jnp.sum(jsp.gammaln(x))


def bench_gammaln(n, dtype):
    x = np.random.default_rng(1).uniform(0.1, 20.0, n).astype(dtype)
    x64 = x.astype(np.float64)
    ref_v = [scipy.special.gammaln(x64).sum()]
    ref_vg = [ref_v[0], scipy.special.digamma(x64)]
    jargs = (jnp.asarray(x),) if jax is not None else ()
    run_row("gammaln", dtype, "value", ref_v, "scipy",
            {"scipy": lambda: scipy.special.gammaln(x).sum()},
            ft_gammaln, jax_gammaln, (x,), jargs)
    run_row("gammaln", dtype, "value+grad", ref_vg, "scipy (hand)",
            {"scipy (hand)": lambda: (scipy.special.gammaln(x).sum(),
                                      scipy.special.digamma(x))},
            ft.value_and_grad(ft_gammaln),
            jax.value_and_grad(jax_gammaln) if jax is not None else None, (x,), jargs)


# --------------------------------------------------------------------------------------------
# rfft
# --------------------------------------------------------------------------------------------

def rfft_value_np(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 2)


def rfft_vg_hand(x):
    """sum |X_k|**2 over the rfft bins, and its gradient 2 n irfft(Y), where Y is X with the
    bins that stand for two conjugate bins of the full spectrum halved."""
    n = x.shape[0]
    X = np.fft.rfft(x)
    v = np.sum(X.real * X.real + X.imag * X.imag)
    X[1:(n + 1) // 2] *= 0.5
    return v, 2 * n * np.fft.irfft(X, n)


def ft_rfft(x):
    return fnp.sum(fnp.abs(fnp.fft.rfft(x)) ** 2)


def jax_rfft(x):
    return jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)


def bench_rfft(n, dtype):
    x = np.random.default_rng(2).normal(size=n).astype(dtype)
    x64 = x.astype(np.float64)
    ref_v = [rfft_value_np(x64)]
    ref_vg = list(rfft_vg_hand(x64))
    jargs = (jnp.asarray(x),) if jax is not None else ()
    run_row("rfft power", dtype, "value", ref_v, "numpy",
            {"numpy": lambda: rfft_value_np(x)}, ft_rfft, jax_rfft, (x,), jargs)
    run_row("rfft power", dtype, "value+grad", ref_vg, "numpy (hand)",
            {"numpy (hand)": lambda: rfft_vg_hand(x)}, ft.value_and_grad(ft_rfft),
            jax.value_and_grad(jax_rfft) if jax is not None else None, (x,), jargs)


# --------------------------------------------------------------------------------------------
# fresh process -> first jitted value + grad
# --------------------------------------------------------------------------------------------

_FRESH_FT = {
    "norm.logpdf": "import functrace.scipy.stats as fst\n"
    "f = lambda x, l, s: fnp.sum(fst.norm.logpdf(x, l, s))\n"
    "out = ft.jit(ft.value_and_grad(f, argnums=(0, 1, 2)), eager=True)(x, 0.3, 1.7)\n",
    "gammaln": "import functrace.scipy.special as fsp\n"
    "x = np.abs(x) + 0.1\n"
    "out = ft.jit(ft.value_and_grad(lambda x: fnp.sum(fsp.gammaln(x))), eager=True)(x)\n",
    "rfft power": "f = lambda x: fnp.sum(fnp.abs(fnp.fft.rfft(x)) ** 2)\n"
    "out = ft.jit(ft.value_and_grad(f), eager=True)(x)\n",
}
_FRESH_JAX = {
    "norm.logpdf": "import jax.scipy.stats as jst\n"
    "f = lambda x, l, s: jnp.sum(jst.norm.logpdf(x, l, s))\n"
    "out = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2)))(x, 0.3, 1.7)\n"
    "jax.block_until_ready(out)\n",
    "gammaln": "import jax.scipy.special as jsp\n"
    "x = np.abs(x) + 0.1\n"
    "out = jax.jit(jax.value_and_grad(lambda x: jnp.sum(jsp.gammaln(x))))(x)\n"
    "jax.block_until_ready(out)\n",
    "rfft power": "f = lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)\n"
    "out = jax.jit(jax.value_and_grad(f))(x)\n"
    "jax.block_until_ready(out)\n",
}
_HEAD_FT = ("import numpy as np, functrace as ft, functrace.numpy as fnp\n"
            "x = np.random.default_rng(0).normal(size=10000)\n")
_HEAD_JAX = ("import numpy as np, jax, jax.numpy as jnp\n"
             "jax.config.update('jax_enable_x64', True)\n"
             "x = np.random.default_rng(0).normal(size=10000)\n")


def _run_fresh(code, env):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - t0


def bench_fresh():
    """Seconds from a fresh interpreter to the first jitted value + grad (float64, 1e4
    elements: the compile, not the run, is measured)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    reps = 1 if QUICK else 3
    for wl in _FRESH_FT:
        times: dict = {"functrace jit (warm disk cache)": [], "functrace jit (empty caches)": [],
                       "jax.jit": []}
        with tempfile.TemporaryDirectory() as warm:
            env_w = dict(env, FUNCTRACE_CACHE_DIR=warm)
            _run_fresh(_HEAD_FT + _FRESH_FT[wl], env_w)      # fills the kernel cache
            for _ in range(reps):
                times["functrace jit (warm disk cache)"].append(
                    _run_fresh(_HEAD_FT + _FRESH_FT[wl], env_w))
                with tempfile.TemporaryDirectory() as k, tempfile.TemporaryDirectory() as nb:
                    times["functrace jit (empty caches)"].append(_run_fresh(
                        _HEAD_FT + _FRESH_FT[wl],
                        dict(env, FUNCTRACE_CACHE_DIR=k, NUMBA_CACHE_DIR=nb)))
                if jax is not None:
                    times["jax.jit"].append(_run_fresh(_HEAD_JAX + _FRESH_JAX[wl], env))
        med = {k: statistics.median(v) for k, v in times.items() if v}
        base = med["jax.jit"] if "jax.jit" in med else None
        for k, t in med.items():
            ROWS.append({"workload": wl, "dtype": "float64", "kind": "fresh process",
                         "backend": k, "median_s": t, "ratio": t / base if base else None,
                         "cold_s": None})
        print(f"[fresh {wl}: " + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()) + "]",
              flush=True)


# --------------------------------------------------------------------------------------------

def warm_up():
    """Initialise numba's compiler (one real compile) and XLA before any cold measurement,
    so the cold columns are the cost of each function, not of the first compile in a
    process."""
    jit_cold(lambda x: fnp.sum(fnp.exp(x)), np.ones(3))
    if jax is not None:
        jax_cold(lambda x: jnp.sum(jnp.exp(x)), jnp.ones(3))


def print_table():
    print()
    print(f"{'workload':<14} {'dtype':<8} {'kind':<14} {'backend':<32} {'median':>11} "
          f"{'ratio':>7} {'cold':>8}")
    last = None
    for r in ROWS:
        key = (r["workload"], r["dtype"], r["kind"])
        if key != last:
            print("-" * 100)
            last = key
        t = r["median_s"]
        val = f"{t:9.2f} s" if r["kind"] == "fresh process" else f"{t * 1e3:8.2f} ms"
        ratio = "" if r["ratio"] is None else f"{r['ratio']:7.3f}"
        cold = "" if r["cold_s"] is None else f"{r['cold_s']:7.2f}s"
        print(f"{r['workload']:<14} {r['dtype']:<8} {r['kind']:<14} {r['backend']:<32} "
              f"{val:>11} {ratio:>7} {cold:>8}")
    summary = summarise()
    if summary:
        print()
        print("ft.jit against its peers (ratios of medians from this run; cold: first call)")
        print(f"{'workload':<14} {'dtype':<8} {'kind':<12} {'ft.jit/scipy':>13} "
              f"{'ft.jit/jax.jit':>15} {'ft cold':>8} {'jax cold':>9}")
        for s in summary:
            jr = "" if s["ft_over_jax"] is None else f"{s['ft_over_jax']:.3f}"
            jc = "" if s["jax_cold_s"] is None else f"{s['jax_cold_s']:.2f}s"
            print(f"{s['workload']:<14} {s['dtype']:<8} {s['kind']:<12} "
                  f"{s['ft_over_base']:13.3f} {jr:>15} {s['ft_cold_s']:7.2f}s {jc:>9}")


def summarise():
    out = []
    groups: dict = {}
    for r in ROWS:
        if r["kind"] != "fresh process":
            groups.setdefault((r["workload"], r["dtype"], r["kind"]), {})[r["backend"]] = r
    for (wl, dt, kind), g in groups.items():
        ftj = g["functrace jit"]
        jx = g.get("jax.jit")
        out.append({"workload": wl, "dtype": dt, "kind": kind,
                    "ft_over_base": ftj["ratio"],
                    "ft_over_jax": ftj["median_s"] / jx["median_s"] if jx else None,
                    "ft_cold_s": ftj["cold_s"], "jax_cold_s": jx["cold_s"] if jx else None})
    return out


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    global QUICK
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--only", default="", help="comma-separated workloads "
                   "(norm, gammaln, rfft, fresh)")
    p.add_argument("--dtypes", default="float64,float32", help="comma-separated dtypes")
    p.add_argument("--n", type=int, default=10**6, help="elements per array")
    p.add_argument("--json", default=os.path.join(HERE, "results", "bench_scientific.json"),
                   help="where to write the rows ('' for nowhere)")
    a = p.parse_args()
    QUICK = a.quick
    print(f"python {platform.python_version()}; numpy {np.__version__}; scipy "
          f"{scipy.__version__}; jax {getattr(jax, '__version__', '-')}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}", flush=True)
    if jax is None:
        print("[jax is not importable here: its rows are skipped (run the script with an "
              "interpreter that has jax)]", flush=True)
    dtypes = [np.dtype(d).type for d in a.dtypes.split(",") if d]
    runs = [(f"{name} {np.dtype(dt).name}", lambda fn=fn, dt=dt: fn(a.n, dt))
            for name, fn in (("norm", bench_norm), ("gammaln", bench_gammaln),
                             ("rfft", bench_rfft)) for dt in dtypes]
    runs.append(("fresh", bench_fresh))
    only = [s for s in a.only.split(",") if s]
    warm_up()
    failed = []
    for label, fn in runs:
        if only and label.split()[0] not in only:
            continue
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as exc:
            print(f"[{label} FAILED: {type(exc).__name__}: {exc}]", flush=True)
            failed.append(label)
            continue
        print(f"[{label} done in {time.perf_counter() - t0:.1f}s]", flush=True)
    print_table()
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                       "commit": git_commit(), "date": time.strftime("%Y-%m-%d"),
                       "n": a.n, "quick": QUICK,
                       "versions": {"python": platform.python_version(),
                                    "numpy": np.__version__, "scipy": scipy.__version__,
                                    "jax": getattr(jax, "__version__", None)},
                       "threads": {k: os.environ.get(k) for k in
                                   ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")},
                       "rows": ROWS, "summary": summarise(), "failed": failed}, f, indent=1)
        print(f"wrote {a.json}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
