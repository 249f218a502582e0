"""What the parts of ``functrace.numpy.linalg`` share: numpy.linalg's result types and error,
its promotion rule (``common_dtype``, ``prep``: bool and integers compute in float64, float16
and longdouble are rejected) and argument checks (``assert_stacked_2d``,
``assert_stacked_square``, ``uplo``), and small traced helpers (``hermitian_from``: the matrix
LAPACK sees when it reads one triangle; ``hermitian_input``: the same matrix with the gradient
convention of docs/numerics.md; ``keepdims_reshape``). Imports ``ops`` and
``numpy._core`` only; the parts, ``_linalg_norms`` and ``_linalg_solvers``, import it.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import ops
from ..ops import linalg as _lops
from ..tracing import current_trace
from ._core import asarray_any, cast

__all__ = ["EigResult", "EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult",
           "NO_VALUE",
           "traced", "common_dtype", "prep", "assert_stacked_2d", "assert_stacked_square",
           "hermitian_from", "hermitian_input", "GRADIENTS", "check_gradient", "uplo",
           "keepdims_reshape"]

LinAlgError = np.linalg.LinAlgError


def _result_type(name, fields):
    try:
        from numpy.linalg import _linalg
        return getattr(_linalg, name)
    except (ImportError, AttributeError):   # pragma: no cover - older numpy layouts
        return namedtuple(name, fields)


SlogdetResult = _result_type("SlogdetResult", ["sign", "logabsdet"])
EighResult = _result_type("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = _result_type("EigResult", ["eigenvalues", "eigenvectors"])
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


GRADIENTS = ("symmetric", "triangle")


def check_gradient(gradient):
    if gradient not in GRADIENTS:
        raise ValueError(f"gradient must be 'symmetric' (the default) or 'triangle', got "
                         f"{gradient!r}")


def hermitian_input(a, lower, gradient="symmetric"):
    """The Hermitian matrix read from one triangle of ``a`` (``hermitian_from``), whose value is
    exactly numpy's input to LAPACK, with one of two gradient conventions (docs/numerics.md):

    * ``"symmetric"`` (the default, JAX's and autograd's cholesky): the derivative is that of
      ``(a + a^H)/2``, so the gradient is Hermitian. For Hermitian ``a`` both conventions agree
      along every Hermitian direction; this one is the gradient *within* Hermitian matrices.
    * ``"triangle"``: the exact derivative of numpy's function, which reads one triangle: the
      gradient is zero on the other triangle and its off-diagonal entries are doubled.

    The symmetric form is ``stop_gradient(h) + (s - stop_gradient(s))`` with ``s`` the
    Hermitian part: its value is ``h`` bit for bit (``s - s`` is exactly 0 for finite ``s``),
    its derivative is ``s``'s to every order.
    """
    check_gradient(gradient)
    h = hermitian_from(a, lower)
    if gradient == "triangle":
        return h
    s = _lops.hermitian_part(a)
    return ops.add(ops.stop_gradient(h), ops.sub(s, ops.stop_gradient(s)))


def uplo(UPLO):
    u = UPLO.upper()
    if u not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return u == "L"


def keepdims_reshape(y, shape, axes):
    return ops.reshape(y, tuple(1 if i in axes else n for i, n in enumerate(shape)))
