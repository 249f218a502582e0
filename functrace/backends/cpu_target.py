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

import numpy as np

from . import scalar_fn
from .codegen import fusible_pad, render_cpu, spec_key, target_code
from .codegen import supports as codegen_supports

__all__ = ["fusible", "unfused_reason", "supports", "prefer_kernel", "kernel_module_source",
           "CODEGEN_VERSION", "TARGET"]

TARGET = "cpu"
_KINDS = "biuf"


def _dtype_ok(dt: np.dtype) -> bool:
    return dt.kind in _KINDS and not (dt.kind == "f" and dt.itemsize < 4)


def supports(op) -> bool | str:
    """Whether CPU kernels can hold ``op`` (dtypes aside): True, or why not."""
    return codegen_supports(op, TARGET)


def unfused_reason(e) -> str | None:
    """Why the CPU target cannot put equation ``e`` in a kernel (None: it can)."""
    op = e.op
    if not all(_dtype_ok(a.aval.dtype) for a in e.inputs) or \
            not all(_dtype_ok(o.aval.dtype) for o in e.outputs):
        return "a dtype CPU kernels do not compute (complex, float16)"
    if op.elementwise:
        code = target_code(op, TARGET)
        if isinstance(code, str):
            return code
        if not {a.aval.dtype.kind for a in e.inputs} <= set(code.kinds):
            return f"{op.name}'s CPU code is exact for dtype kinds {code.kinds!r} only"
        return scalar_fn.why_not(op, TARGET, [a.aval.dtype for a in e.inputs])
    if op.fusion == "shifted":      # a guarded shifted read (codegen.fusible_pad)
        return None if fusible_pad(e, _dtype_ok) else "not a plain constant pad"
    kind = op.reduce_kind
    if kind is None:
        return supports(op) if op.fusion != "view" else "views fold into their readers"
    x = e.inputs[0].aval
    axes = tuple(e.params["axes"])
    if not axes:
        return "a reduction over no axes"
    if kind in ("sum", "prod") and x.dtype.kind == "b":
        return "a bool sum or product"
    if kind == "logsumexp" and not (x.dtype.kind == "f"
                                    and axes == tuple(range(x.ndim - len(axes), x.ndim))):
        return "logsumexp over leading axes or of non-float data"
    return None


def fusible(e) -> bool:
    """Whether the CPU target can put equation ``e`` in a kernel."""
    return unfused_reason(e) is None


def prefer_kernel(e) -> bool:
    """A group of this single equation still deserves a kernel (numpy is slower there: the
    vecmath polynomials, logsumexp's two passes)."""
    op = e.op
    if op.elementwise:
        code = op.code.get(TARGET)
        return code is not None and not isinstance(code, str) and code.alone
    return op.reduce_kind == "logsumexp"


# --------------------------------------------------------------------------------------------
# kernel module text
# --------------------------------------------------------------------------------------------

CODEGEN_VERSION = "6"
#: no ``fastmath``: each of its flags changes results against numpy (tests/test_ieee.py).
#: ``contract`` fuses a*b+c into an FMA (``1e308*2.0 - inf`` gave -inf, numpy NaN), ``nsz``
#: rewrites -(a-b) to b-a (+0.0 where numpy gives -0.0), ``arcp`` turns x/3 and x/s into
#: x*(1/3), x*(1/s) (one ulp off in a third of the results). ``error_model="numpy"`` is what
#: lets the loops vectorise (no division check); vecmath's polynomials use explicit FMAs.
_JIT_FLAGS = 'cache=True, error_model="numpy", boundscheck=False, nogil=True'


_vm_hash: str | None = None


def _vecmath_hash() -> str:
    """Hash of the helper modules kernels call (numba's cache does not track them)."""
    global _vm_hash
    if _vm_hash is None:
        h = hashlib.sha256()
        for name in ("vecmath.py", "cpu_scalar.py"):
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
            with open(path, "rb") as f:
                h.update(f.read())
        _vm_hash = h.hexdigest()[:16]
    return _vm_hash


def kernel_module_source(spec, parallel: bool = False) -> tuple[str, str]:
    """(key, full module source) of the kernel for ``spec``."""
    flags = _JIT_FLAGS + (", parallel=True" if parallel else "")
    body = render_cpu(spec, "kernel", f"@numba.njit({flags})", parallel=parallel)
    head = (f"# functrace kernel (numba CPU), codegen v{CODEGEN_VERSION}, "
            f"vecmath {_vecmath_hash()}\n")
    text = head + ("import numpy as np\nimport numba\n"
                   "from functrace.backends import vecmath as vm\n"
                   "from functrace.backends import cpu_scalar as cs\n\n\n") + body
    key = spec_key(text)
    return key, text.replace("# functrace kernel", f"# functrace kernel {key}", 1)
