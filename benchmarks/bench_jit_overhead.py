"""Per-call time of small jitted functions, for before/after comparisons of the dispatch path.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_jit_overhead.py [CHECKOUT]

Times ``ft.jit(ft.hessian(rosenbrock))`` (n=200) and ``ft.jit(lambda a: a * 2.0 + 1.0)`` on 10
elements, where the call path (signature cache, argument checks, driver) is most of the cost.
CHECKOUT (default: this repository) is the functrace source tree to import, so two versions
can be run alternately; compare them run by run, never across machines. Prints microseconds
per call: the median of 7 batches.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else
                os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import functrace as ft
import functrace.numpy as fnp


def per_call(f, a, n):
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            f(a)
        times.append((time.perf_counter() - t0) / n * 1e6)
    return sorted(times)[3]


def main():
    rosen = lambda x: fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)  # noqa: E731
    x = np.random.default_rng(0).uniform(-1, 1, 200)
    h = ft.jit(ft.hessian(rosen))
    h(x)
    small = ft.jit(lambda a: a * 2.0 + 1.0)
    v = np.ones(10)
    small(v)
    print(f"{ft.__file__}\nhessian n=200: {per_call(h, x, 1000):.1f} us/call   "
          f"a*2+1 on 10 elems: {per_call(small, v, 3000):.2f} us/call")


if __name__ == "__main__":
    main()
