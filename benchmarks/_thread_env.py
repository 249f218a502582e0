"""Imported first by bench_cpu.py, before numpy, numba or jax start their thread pools: sets
the environment for this process's thread count (``--_worker N`` of a ``--threads`` run,
else one thread everywhere). ``WORKER_THREADS`` is that count."""

from __future__ import annotations

import os
import sys


def _thread_env(argv) -> int:
    """The thread count of this process (``--_worker N`` of a ``--threads`` run, else 1), set
    in the environment before numpy, numba or jax start their pools: XLA's flags (one
    thread: no multi-threaded Eigen and one intra-op thread; N: multi-threaded Eigen and N
    intra-op threads), BLAS, and fewer cores than the machine has by CPU affinity (XLA's
    pool is as large as the cores it may run on)."""
    n = 1
    if "--_worker" in argv:
        n = int(argv[argv.index("--_worker") + 1])
        if n < len(os.sched_getaffinity(0)):
            os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(n)
        os.environ["XLA_FLAGS"] = (
            "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if n == 1
            else f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={n}")
        os.environ["FUNCTRACE_NUM_THREADS"] = str(n)
    # the single-thread table: functrace's kernels on one thread too, like every peer
    os.environ.setdefault("FUNCTRACE_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                          "intra_op_parallelism_threads=1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return n




WORKER_THREADS = _thread_env(sys.argv)
