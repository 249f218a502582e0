"""numba's CPU code generator, set up for functrace's kernels before numba first uses it.

numba makes one LLVM target machine per process, when the first ``@numba.njit`` function is
defined, from the host CPU's name and feature string (``numba.config.CPU_NAME`` and
``CPU_FEATURES``, or ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``). On Intel CPUs with
AVX-512 (Skylake-X and later), LLVM's tuning for the CPU includes ``prefer-256-bit``: the
loop vectoriser then never uses the 512-bit registers. The branch-free math of ``vecmath``
is written for wide vectors, and measured on a Sapphire Rapids-class Xeon (numba 0.68):

- ``vexp`` over 1e6 float64: 1.46 ms with 256-bit vectors, 1.05 ms with 512 (numpy 0.81);
- a column sum of ``exp(-x*x) * x`` over 2000x2000: 21.9 ms against 8.0 ms (LLVM's cost
  model did not vectorise the 256-bit loop at all);
- the benchmark's chain gradient 0.233 -> 0.185 of hand numpy, logsumexp 0.90 -> 0.72.

``configure()`` appends ``-prefer-256-bit`` to the host's features, so numba's target machine
prefers the full width, unless:

- the host has no AVX-512 (nothing to change: AMD Zen 4/5 have no such preference);
- you set ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` (your choice is kept);
- ``FUNCTRACE_WIDE_VECTORS=0``;
- numba's code generator already exists (an ``@njit`` function was defined in this process
  before functrace loaded its first kernel): it is made once, so LLVM's choice stays.

The setting is numba's and process-wide: ``@njit`` functions of your own get it too. It
changes speed, not values: without ``fastmath`` LLVM may not reorder floating-point
operations, so a wider vector computes each element with the same operations (tested: the
same bits with and without it). numba keys its on-disk cache by the feature string, so code
compiled under one setting is not loaded under the other; it is compiled again.

Imports numba (and llvmlite) only when ``configure()`` runs.
"""

from __future__ import annotations

import os
import threading

__all__ = ["configure", "exp_variant"]

_lock = threading.Lock()
_state: str | None = None        # what configure() decided, once it has run
_exp: str | None = None          # exp_variant()'s answer, once asked


def configure() -> str:
    """Set numba's CPU features for functrace's kernels (module doc), once per process; the
    first call imports numba. Returns what was decided: ``"wide"`` (512-bit vectors
    preferred), or why not: ``"no-avx512"``, ``"user"`` (NUMBA_CPU_NAME / _FEATURES set),
    ``"off"`` (FUNCTRACE_WIDE_VECTORS=0), ``"late"`` (numba's code generator existed)."""
    global _state
    if _state is not None:
        return _state
    with _lock:
        if _state is None:
            _state = _decide()
    return _state


def _decide() -> str:
    from numba.core import config
    from numba.core.registry import cpu_target
    if os.environ.get("FUNCTRACE_WIDE_VECTORS", "1") == "0":
        return "off"
    if (os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES")
            or config.CPU_NAME is not None or config.CPU_FEATURES is not None):
        return "user"
    if "_toplevel_target_context" in vars(cpu_target):
        return "late"             # the target machine is made: too late to change it
    from numba.core.codegen import get_host_cpu_features
    features = get_host_cpu_features()
    if "+avx512f" not in features.split(","):
        return "no-avx512"
    config.CPU_FEATURES = features + ",-prefer-256-bit"
    return "wide"


def exp_variant() -> str:
    """Which float64 ``exp`` ``vecmath.vexp`` is in this process: ``"table"`` or ``"poly"``.

    ``"poly"`` (``vecmath._exp64``): range reduction by ln 2 and a degree-11 polynomial, no
    memory access, <= 0.67 ulp. ``"table"`` (``vecmath._exp64_table``): reduction by ln 2 / 128,
    a 128-entry table of 2**(j/128) read by one vector gather, a degree-5 polynomial, <= 0.51
    ulp. Which is faster depends on the CPU's gathers (tools/exp_table_experiment.py): on a
    Sapphire Rapids-class Xeon the table runs 1.35x faster, on AMD Zen 5 0.95x, and on Intel
    CPUs whose microcode mitigates Gather Data Sampling (Skylake to Ice Lake) gathers are
    several times slower. So ``"table"`` is chosen on Intel CPUs with AVX-512 that Linux reports
    as not affected by GDS, ``"poly"`` everywhere else; ``FUNCTRACE_EXP=table`` or ``poly``
    decides instead. Both give numpy's special values and overflow threshold; their results
    differ in the last bit for about 2% of arguments, so the same program can round differently
    on two machines (as numpy's own SIMD exp does). Read once per process."""
    global _exp
    if _exp is None:
        choice = os.environ.get("FUNCTRACE_EXP", "").strip().lower()
        if choice not in ("", "table", "poly"):
            import warnings
            warnings.warn(f"FUNCTRACE_EXP={choice!r} is neither 'table' nor 'poly'; using "
                          "the default for this CPU", RuntimeWarning, stacklevel=2)
        _exp = choice if choice in ("table", "poly") else _default_exp()
    return _exp


def _default_exp() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            head = f.read(1 << 14)
        with open("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling") as f:
            gds = f.read().strip().lower()
    except OSError:
        return "poly"
    flags = next((ln for ln in head.splitlines() if ln.startswith("flags")), "").split()
    if "GenuineIntel" in head and "avx512f" in flags and gds == "not affected":
        return "table"
    return "poly"
