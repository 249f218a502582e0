"""What the parts of ``functrace.numpy.linalg`` share: numpy.linalg's result types and error,
its promotion rule (``common_dtype``, ``prep``: bool and integers compute in float64, float16
and longdouble are rejected) and argument checks (``assert_stacked_2d``,
``assert_stacked_square``, ``uplo``), and small traced helpers (``hermitian_from``: the matrix
LAPACK sees when it reads one triangle; ``keepdims_reshape``). Imports ``ops`` and
``numpy._core`` only; the parts, ``_linalg_norms`` and ``_linalg_solvers``, import it.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import ops
from ..ops import linalg as _lops
from ..tracing import current_trace
from ._core import asarray_any, cast

__all__ = ["EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult", "NO_VALUE",
           "traced", "common_dtype", "prep", "assert_stacked_2d", "assert_stacked_square",
           "hermitian_from", "uplo", "keepdims_reshape"]

LinAlgError = np.linalg.LinAlgError


def _result_type(name, fields):
    try:
        from numpy.linalg import _linalg
        return getattr(_linalg, name)
    except (ImportError, AttributeError):   # pragma: no cover - older numpy layouts
        return namedtuple(name, fields)


SlogdetResult = _result_type("SlogdetResult", ["sign", "logabsdet"])
EighResult = _result_type("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = _result_type("SVDResult", ["U", "S", "Vh"])
QRResult = _result_type("QRResult", ["Q", "R"])

NO_VALUE = getattr(np, "NO_VALUE", None)

# --------------------------------------------------------------------------------------------
# promotion and checks (numpy.linalg's _commonType and _assert_* rules)
# --------------------------------------------------------------------------------------------


def traced() -> bool:
    return current_trace() is not None


def common_dtype(*xs) -> np.dtype:
    """The computation dtype numpy.linalg uses: float32/float64/complex64/complex128."""
    double = False
    cplx = False
    for x in xs:
        dt = x.dtype
        if dt.kind in "fc":
            if dt.kind == "c":
                cplx = True
            real = np.empty(0, dt).real.dtype
            if real == np.float64:
                double = True
            elif real != np.float32:
                raise TypeError(f"array type {dt} is unsupported in linalg")
        else:
            double = True
    if cplx:
        return np.dtype(np.complex128 if double else np.complex64)
    return np.dtype(np.float64 if double else np.float32)


def prep(*xs):
    xs = [asarray_any(x) for x in xs]
    dt = common_dtype(*xs)
    return [cast(x, dt) for x in xs]


def assert_stacked_2d(*xs):
    for a in xs:
        if a.ndim < 2:
            raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least "
                              "two-dimensional")


def assert_stacked_square(*xs):
    assert_stacked_2d(*xs)
    for a in xs:
        if a.shape[-1] != a.shape[-2]:
            raise LinAlgError("Last 2 dimensions of the array must be square")


def hermitian_from(a, lower):
    """The Hermitian matrix numpy's LAPACK call sees when it reads one triangle of ``a``."""
    if lower:
        t, strict = _lops.tril(a), _lops.tril(a, -1)
    else:
        t, strict = _lops.triu(a), _lops.triu(a, 1)
    return ops.add(t, _lops.matrix_adjoint(strict))


def uplo(UPLO):
    u = UPLO.upper()
    if u not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return u == "L"


def keepdims_reshape(y, shape, axes):
    return ops.reshape(y, tuple(1 if i in axes else n for i, n in enumerate(shape)))
