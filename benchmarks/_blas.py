"""Which kernels the OpenBLAS libraries loaded in this process run (benchmark reports only).

OpenBLAS built with ``DYNAMIC_ARCH`` (numpy's and scipy's wheels) picks its kernels by CPU
model when it loads, unless ``OPENBLAS_CORETYPE`` names them. This sandbox sets
``OPENBLAS_CORETYPE=Haswell`` (AVX2 kernels) on an AMD Zen 5 with AVX-512, where OpenBLAS
0.3.31 would pick its SkylakeX (AVX-512) kernels: a 256x784 @ 784x512 product runs 1.8x
(float32) and 1.5x (float64) faster with them (2026-12-02). XLA brings its own GEMM and
ignores the variable, so a benchmark of matrix-product workloads against jax.jit says which
kernels numpy's BLAS ran. The variable is read when numpy loads its BLAS.
"""

from __future__ import annotations

import ctypes
import os


def _loaded_openblas() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if ".so" in p)


def openblas_cores() -> dict[str, str]:
    """{library file name: the core name it chose} for each OpenBLAS loaded (Linux only)."""
    out = {}
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                    "openblas_get_corename64_", "openblas_get_corename"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                out[os.path.basename(path)] = fn().decode()
                break
    return out


def cpu_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln for ln in f if ln.startswith("flags")), "")
    except OSError:
        return False
    return all(f" {x}" in flags for x in ("avx512f", "avx512bw", "avx512dq", "avx512vl"))


def describe() -> str:
    """One line for a benchmark's header: numpy's BLAS kernels, and a hint when they are
    AVX2 kernels on a CPU with AVX-512."""
    import numpy  # noqa: F401  (loads numpy's OpenBLAS)
    cores = openblas_cores()
    if not cores:
        return "BLAS: no OpenBLAS found in this process"
    names = sorted(set(cores.values()))
    line = f"OpenBLAS kernels: {', '.join(names)}"
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:
        line += f" (chosen by OPENBLAS_CORETYPE={forced})"
    if cpu_has_avx512() and any(n.lower() in ("haswell", "zen", "sandybridge") for n in names):
        line += "; the CPU has AVX-512, which these kernels do not use"
    return line
