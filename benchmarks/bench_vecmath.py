"""Benchmark functrace.backends.cpu.vecmath against numpy ufuncs and libm-in-numba.

For each function and dtype (float64, float32), times over 1e6 elements:
  * ``vm``    -- ``out[i] = vm.v<fn>(x[i])`` in an njit loop (JIT_OPTIONS),
  * ``numpy`` -- the numpy ufunc (scipy.special for erf/expit when available,
                 else a numpy expression for sigmoid; erf is skipped without
                 scipy),
  * ``libm``  -- ``out[i] = math.<fn>(x[i])`` in the same kind of njit loop.
Repeats are interleaved (vm, numpy, libm, vm, ...) and medians reported, with
ratios numpy/vm and libm/vm (>1 means vecmath is faster), and whether the
vecmath loop's assembly contains packed zmm FMAs (``vec`` column).

Run single-threaded:
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_vecmath.py
"""
import importlib.util
import math
import os
import re
import sys
import time

import numba
import numpy as np

try:
    from functrace.backends.cpu import vecmath as vm
except ImportError:  # run from a checkout without the package __init__ files
    _p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "functrace", "backends", "vecmath.py")
    _spec = importlib.util.spec_from_file_location("vecmath", _p)
    vm = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(vm)

try:
    import scipy.special as sps
except ImportError:  # pragma: no cover
    sps = None

N = 1_000_000
REPEATS = int(os.environ.get("BENCH_REPEATS", "15"))


def _libm_sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


_libm_sigmoid = numba.njit(inline="always")(_libm_sigmoid)

CASES = [
    # name, domain, libm scalar, numpy callable
    ("exp", (-700, 700), math.exp, np.exp),
    ("expm1", (-5, 5), math.expm1, np.expm1),
    ("exp2", (-1000, 1000), lambda x: 2.0 ** x, np.exp2),
    ("log", (1e-3, 1e6), math.log, np.log),
    ("log1p", (-0.9, 1e3), math.log1p, np.log1p),
    ("log2", (1e-3, 1e6), math.log2, np.log2),
    ("log10", (1e-3, 1e6), math.log10, np.log10),
    ("sin", (-1e4, 1e4), math.sin, np.sin),
    ("cos", (-1e4, 1e4), math.cos, np.cos),
    ("tan", (-1e4, 1e4), math.tan, np.tan),
    ("tanh", (-30, 30), math.tanh, np.tanh),
    ("sigmoid", (-40, 40), _libm_sigmoid,
     sps.expit if sps is not None else (lambda x: 1 / (1 + np.exp(-x)))),
    ("erf", (-6, 6), math.erf, sps.erf if sps is not None else None),
]

F32_DOMAINS = {"exp": (-87, 88), "expm1": (-87, 88), "exp2": (-126, 127)}


def make_loop(fn):
    @numba.njit(**vm.JIT_OPTIONS)
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
    return loop


def make_libm_loop(fn, dtype):
    if isinstance(fn, numba.core.registry.CPUDispatcher) or not hasattr(
            fn, "__code__"):
        f = fn          # njit function or math builtin
    else:
        f = numba.njit(inline="always")(fn)
    cast = np.float32 if dtype == np.float32 else np.float64

    @numba.njit(**vm.JIT_OPTIONS)
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = cast(f(x[i]))
    return loop


def vectorised(loop):
    asm = loop.inspect_asm(loop.signatures[0])
    return bool(re.search(r"vfmadd\w*p[sd]\s+.*zmm", asm))


def median_times(funcs, repeats):
    times = [[] for _ in funcs]
    for _ in range(repeats):
        for j, f in enumerate(funcs):
            t0 = time.perf_counter()
            f()
            times[j].append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in times]


def main():
    rng = np.random.default_rng(0)
    print(f"numba {numba.__version__}, numpy {np.__version__}, n={N}, "
          f"repeats={REPEATS} (medians, ms; ratio > 1: vecmath faster)")
    hdr = (f"{'fn':8s} {'dtype':7s} {'vm':>7s} {'numpy':>7s} {'libm':>7s} "
           f"{'np/vm':>6s} {'libm/vm':>7s} {'vec':>4s}")
    print(hdr)
    print("-" * len(hdr))
    for dtype in (np.float64, np.float32):
        for name, (lo, hi), libm, npf in CASES:
            if dtype == np.float32:   # keep results finite and normal
                lo, hi = F32_DOMAINS.get(name, (lo, hi))
            if lo > 0:
                x = np.exp(rng.uniform(np.log(lo), np.log(hi), N))
            else:
                x = rng.uniform(lo, hi, N)
            x = x.astype(dtype)
            out = np.empty_like(x)
            # the code generator's choice: the native float32 variant where there is one
            table = vm.VECMATH_F32 if dtype == np.float32 and name in getattr(
                vm, "VECMATH_F32", {}) else vm.VECMATH
            vloop = make_loop(table[name])
            lloop = make_libm_loop(libm, dtype)
            vloop(x, out)
            lloop(x, out)
            funcs = [lambda: vloop(x, out), lambda: lloop(x, out)]
            if isinstance(npf, np.ufunc):   # same output buffer as vm
                with np.errstate(all="ignore"):
                    npf(x, out=out)
                funcs.append(lambda: npf(x, out=out))
            elif npf is not None:
                funcs.append(lambda: npf(x))
            with np.errstate(all="ignore"):
                t = median_times(funcs, REPEATS)
            tv, tl = t[0], t[1]
            tn = t[2] if npf is not None else float("nan")
            print(f"{name:8s} {np.dtype(dtype).name:7s} {tv*1e3:7.3f} "
                  f"{tn*1e3:7.3f} {tl*1e3:7.3f} {tn/tv:6.2f} {tl/tv:7.2f} "
                  f"{'yes' if vectorised(vloop) else 'NO':>4s}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
