"""Host time of a compiled CUDA step, measured without a GPU.

A step's host time is the executor's Python work per call (walking the steps, placing outputs
in the pool, packing each kernel's parameter buffer) plus cuLaunchKernel per kernel. This
script measures the first part: it runs the executor over numpy-backed stand-ins for cupy
arrays (exposing what the executor reads of a cupy array: data pointer, shape, strides,
contiguity flags) with the driver call replaced by a no-op, on gpu_check.py's launch
workload (``x = exp(x - max(x))`` ten times, 1,024 float32: ten kernels), launching kernel
by kernel and replaying a CUDA graph (the copy-in, graph launch and copy-out driver calls
no-ops too). For scale it times the reference interpreter running the same graph on numpy
arrays in the same run.

The stand-ins' own Python costs (their ``reshape``, ``empty``) replace cupy's, so the absolute
numbers are not a GPU machine's; the GPU number is benchmarks/gpu_check.py's "host time per
call" (209 us on the H200 run of 2026-11-30, before this script existed).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_cuda_host.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import median_time


class _Ptr:
    __slots__ = ("ptr",)

    def __init__(self, p):
        self.ptr = p


class StandIn:
    """A numpy array dressed as the executor sees a cupy array."""

    __slots__ = ("a", "data", "shape", "dtype", "size", "strides", "_c_contiguous",
                 "_f_contiguous", "ndim", "nbytes", "flags")
    __cuda_array_interface__ = property(lambda self: {})

    def __init__(self, a):
        self.a, self.data = a, _Ptr(a.ctypes.data)
        self.shape, self.dtype, self.size, self.strides = a.shape, a.dtype, a.size, a.strides
        self.ndim, self.nbytes, self.flags = a.ndim, a.nbytes, a.flags
        self._c_contiguous, self._f_contiguous = a.flags.c_contiguous, a.flags.f_contiguous

    def reshape(self, *s):
        return StandIn(self.a.reshape(*s))

    def view(self, dt):
        return StandIn(self.a.view(dt))

    def copy(self):
        return StandIn(self.a.copy())

    def __getitem__(self, k):
        return StandIn(self.a[k])


def _noop(*args):
    pass


def stand_in_arrays():
    from numba import typeof, types

    from functrace.backends.cuda import device as cuda_device

    class Launch(cuda_device._Launch):
        __slots__ = ()

        def _through_numba(self, args):   # the first call: the parameter buffer, no numba
            sig = tuple(typeof(a.a) if isinstance(a, StandIn) else types.int64 for a in args)
            self.fast = cuda_device._Packed(sig, args, 0, _noop)

    class Arrays(cuda_device.HostArrays):
        name, simulated, passes_arrays = "stand-in", False, True

        def is_device(self, x):
            return isinstance(x, StandIn)

        def to_device(self, x):
            return StandIn(np.array(x))

        def empty(self, shape, dtype):
            return StandIn(np.empty(shape, dtype))

        def zeros(self, shape, dtype):
            return StandIn(np.zeros(shape, dtype))

        def own(self, x):
            return x if isinstance(x, StandIn) else StandIn(np.asarray(x))

        def kernel_arg(self, x):
            return x

        def launcher(self, kernel, grid, block, stream):
            return Launch(self, kernel, grid, block, stream)

        def run_impl(self, op, args, params):
            r = op.impl(*[a.a if isinstance(a, StandIn) else a for a in args], **params)
            return (tuple(StandIn(np.asarray(x)) for x in r) if op.multiple_results
                    else StandIn(np.asarray(r)))

        def sm_count(self):
            return 132

        def copy(self, x):
            return x.copy()

        # CUDA graphs: the capture runs the steps once (the launches are no-ops anyway); a
        # replay is the driver calls only, each a no-op here, and a new array per output
        def capture(self, stream, run):
            return None, None, run()

        def copy_into(self, dst, src, stream):
            _noop(dst.data.ptr, src.data.ptr, src.nbytes, stream)

        def launch_graph(self, graph, stream):
            _noop(graph, stream)

        def copy_out(self, x, stream):
            y = StandIn(np.empty(x.shape, x.dtype))
            _noop(y.data.ptr, x.data.ptr, x.nbytes, stream)
            return y
    return Arrays()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true")
    opts = ap.parse_args()
    import functrace as ft
    import functrace.numpy as fnp
    from functrace.backends import reference as numpy_ref
    from functrace.backends.cuda import executor as numba_cuda
    from functrace.passes.simplify import optimize

    def step(x):
        for _ in range(10):
            x = fnp.exp(x - fnp.max(x))
        return x

    x = np.random.default_rng(0).random(1024).astype(np.float32)
    g = optimize(ft.trace(step)(x).graph)
    def executable(graphs):
        ex = numba_cuda.Executable(g, arrays=stand_in_arrays(), graphs=graphs,
                                   config=numba_cuda.LaunchConfig(sm_count=132))
        ex._stream = (None, None, 0)
        ex._steps = ex._build_steps(ex.lower())   # no compile: nothing runs on a device
        return ex

    ex, exg = executable(False), executable(True)
    prog = ex.lower()
    n_k = sum(1 for s in prog.plan.steps if not hasattr(s, "eqn"))
    d = StandIn(x)
    for _ in range(3):
        exg(d)
    assert exg._replay is not None
    t_ex = median_time(lambda: ex(d), repeat=9)
    t_g = median_time(lambda: exg(d), repeat=9)
    t_ref = median_time(lambda: numpy_ref.run(g, [x]), repeat=9)
    print(f"{n_k} kernels, {len(prog.plan.steps)} steps")
    print(f"executor host time per call, driver call a no-op: {t_ex * 1e6:7.1f} us "
          f"({t_ex / n_k * 1e6:.1f} us per kernel)")
    print(f"  replaying a CUDA graph (FUNCTRACE_CUDA_GRAPHS=1): {t_g * 1e6:7.1f} us")
    print(f"reference interpreter, same graph on numpy:      {t_ref * 1e6:7.1f} us")
    print(f"ratios to the interpreter: steps {t_ex / t_ref:.2f}, graph {t_g / t_ref:.2f}")
    if opts.profile:
        prof = cProfile.Profile()
        prof.runcall(lambda: [ex(d) for _ in range(2000)])
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
