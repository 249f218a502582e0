"""The CPU target's fusion rules and the kernel module text.

Owns ``fusible``/``unfused_reason`` and ``prefer_kernel`` (what the fusion pass may put in a
CPU kernel, fused ``pad``s included; the code of each op is on its declaration,
``op.code["cpu"]`` or ``op.scalar``, templates in ``ops.scalar_code``: numpy's exact semantics,
transcendental math with ``vecmath`` polynomials), and ``kernel_module_source`` (the full,
content-hashed text of a kernel module). Text only: never imports numba (a user's scalar
function is compiled once by ``scalar_fn.probe`` when first planned). Imports core and ops
(via codegen) only.
"""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np

from ..lowering.plan import Target
from ..lowering.spec import spec_key
from .render import render_cpu

__all__ = ["CpuTarget", "CPU", "fusible", "unfused_reason", "supports", "prefer_kernel",
           "kernel_module_source", "CODEGEN_VERSION", "JIT_FLAGS", "TARGET", "vecmath_hash"]

TARGET = "cpu"
_KINDS = "biuf"


class CpuTarget(Target):
    """The numba CPU target's answers to the shared lowering (``lowering.plan.Target``)."""

    name, label = TARGET, "CPU"

    def dtype_ok(self, dt: np.dtype) -> bool:
        return dt.kind in _KINDS and not (dt.kind == "f" and dt.itemsize < 4)

    def reduction_reason(self, e, kind: str, axes: tuple) -> str | None:
        x = e.inputs[0].aval
        if kind in ("logsumexp", "softmax") and not (
                x.dtype.kind == "f" and axes == tuple(range(x.ndim - len(axes), x.ndim))):
            return f"{kind} over leading axes or of non-float data"
        return None

    def prefer_kernel(self, e) -> bool:
        """A group of this single equation still deserves a kernel (numpy is slower there:
        the vecmath polynomials, logsumexp's and softmax's passes)."""
        op = e.op
        if op.elementwise:
            code = op.code.get(TARGET)
            return code is not None and not isinstance(code, str) and code.alone
        return op.reduce_kind in ("logsumexp", "softmax")


CPU = CpuTarget()
supports = CPU.supports
unfused_reason = CPU.unfused_reason
fusible = CPU.fusible
prefer_kernel = CPU.prefer_kernel


# --------------------------------------------------------------------------------------------
# kernel module text
# --------------------------------------------------------------------------------------------

CODEGEN_VERSION = "6"
#: no ``fastmath``: each of its flags changes results against numpy (tests/backends/test_ieee.py).
#: ``contract`` fuses a*b+c into an FMA (``1e308*2.0 - inf`` gave -inf, numpy NaN), ``nsz``
#: rewrites -(a-b) to b-a (+0.0 where numpy gives -0.0), ``arcp`` turns x/3 and x/s into
#: x*(1/3), x*(1/s) (one ulp off in a third of the results). ``error_model="numpy"`` is what
#: lets the loops vectorise (no division check); vecmath's polynomials use explicit FMAs.
JIT_FLAGS = 'cache=True, error_model="numpy", boundscheck=False, nogil=True'


_vm_hash: str | None = None


def vecmath_hash() -> str:
    """Hash of the helper modules kernels call (numba's cache does not track them)."""
    global _vm_hash
    if _vm_hash is None:
        h = hashlib.sha256()
        from .numba_target import exp_variant
        h.update(exp_variant().encode())   # vecmath.vexp is chosen per process
        for name in ("vecmath.py", "vecmath_exp_table.py", "vecmath_f32.py", "vecmath_llvm.py",
                     "scalar.py",
                     "vecmath_special.py", "vecmath_special_tables.py", "vecmath_incgamma.py",
                     "vecmath_incbeta.py", "vecmath_incomplete.py", "vecmath_calls.py",
                     "views.py"):
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
            with open(path, "rb") as f:
                h.update(f.read())
        _vm_hash = h.hexdigest()[:16]
    return _vm_hash


#: the helper modules generated code calls, by the alias it calls them with
HELPER_MODULES = (("vm", "vecmath"), ("vs", "vecmath_special"), ("vi", "vecmath_incomplete"),
                  ("cs", "scalar"), ("vc", "vecmath_calls"), ("av", "views"))


def module_imports(body: str) -> str:
    """The import lines of a generated module whose code is ``body``: numpy, numba and the
    helper modules ``body`` names (each costs 5-50 ms to import, the special-function ones
    the most; a kernel that calls none of them imports none)."""
    lines = ["import numpy as np", "import numba"]
    for alias, mod in HELPER_MODULES:
        if re.search(rf"\b{alias}\.", body):
            lines.append(f"from functrace.backends.cpu import {mod} as {alias}")
    return "\n".join(lines) + "\n\n\n"


def kernel_module_source(spec, parallel: bool = False) -> tuple[str, str]:
    """(key, full module source) of the kernel for ``spec``."""
    flags = JIT_FLAGS + (", parallel=True" if parallel else "")
    body = render_cpu(spec, "kernel", f"@numba.njit({flags})", parallel=parallel)
    head = (f"# functrace kernel (numba CPU), codegen v{CODEGEN_VERSION}, "
            f"vecmath {vecmath_hash()}\n")
    text = head + module_imports(body) + body
    key = spec_key(text)
    return key, text.replace("# functrace kernel", f"# functrace kernel {key}", 1)
