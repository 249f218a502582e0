"""Linear-algebra primitives: cholesky, triangular_solve, solve, inv, det, slogdet (eigh, svd
and qr are in ``decomp.py``, which shares this file's matrix helpers and conventions).

Owns these ops, their op-level functions and their rules. Imports core/tracing and sibling op
families only (``elementwise``, ``dot``, ``shape``, ``reduce``); never ``functrace.numpy``.

Conventions shared by every op here:
* Operands are stacks of matrices, ``(..., M, N)``; the leading batch axes must be equal
  across operands (``functrace.numpy.linalg`` broadcasts them), and all operands share one
  dtype among float32, float64, complex64, complex128 (``functrace.numpy`` promotes, with
  numpy's rule that integers become float64).
* Each impl calls ``numpy.linalg``, so values are numpy's (numpy computes float32 in float64
  and rounds the result; so does the impl).
* Rules are written with op-level functions (``dot_general``, ``transpose``, ``select``, these
  ops themselves), so every rule is differentiable again. Complex cotangents follow the
  package convention (JAX's): the cotangent of ``z`` pairs with a tangent as
  ``Re(sum(ct * dz))`` with no conjugation, so the rule of a complex-linear map is its plain
  transpose.
* ``cholesky`` and ``eigh`` are defined on the Hermitian part ``(A + A^H)/2`` of their
  operand: the impl factorises that matrix and both rules project tangents / cotangents onto
  Hermitian matrices. Their values equal numpy's for Hermitian input; ``functrace.numpy.linalg``
  passes the Hermitian matrix numpy itself reads (one triangle, ``UPLO``), so traced values
  equal numpy's for every input and the gradient is the gradient of numpy's function.
* Degenerate spectra (docs/numerics.md): the eigh / svd rules use ``F_ij = 1/(l_j - l_i)`` with the
  diagonal and numerically equal pairs set to 0 by a double ``select``; when the eigenvector
  (singular vector) cotangent is None, ``F`` is not built at all, so a function of the
  eigenvalues alone has a finite gradient even for a repeated spectrum.
* Every op takes leading batch axes: ``batch_family="leading"`` (vmap moves the mapped axis to
  the front and binds the op once).
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from . import elementwise as ew
from ._base import as_array, dtype_of, lit, shape_of
from .dot import dot_general
from .reduce import reduce_sum
from .shape import broadcast_in_dim, iota, transpose

__all__ = ["cholesky", "cholesky_p", "det", "det_p", "inv", "inv_p", "slogdet", "slogdet_p",
           "solve", "solve_p", "triangular_solve", "triangular_solve_p"]

_LINALG_DTYPES = tuple(np.dtype(d) for d in ("float32", "float64", "complex64", "complex128"))

# --------------------------------------------------------------------------------------------
# type-rule helpers
# --------------------------------------------------------------------------------------------


def real_dtype(dt) -> np.dtype:
    return np.empty(0, dt).real.dtype


def check_dtype(name, *avals):
    dt = avals[0].dtype
    for a in avals:
        if a.dtype != dt:
            raise TypeError(f"{name}: operand dtypes differ "
                            f"({', '.join(str(b.dtype) for b in avals)}); functrace.numpy "
                            "promotes before binding")
    if dt not in _LINALG_DTYPES:
        raise TypeError(f"{name} supports float32, float64, complex64 and complex128 operands, "
                        f"got {dt}")


def check_matrix(name, a, square=False):
    if a.ndim < 2:
        raise ShapeError(f"{name} needs a stack of matrices (..., M, N), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name} needs square matrices (..., N, N), got shape {a.shape}")


def _check_rhs(name, a, b):
    check_matrix(name, b)
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"{name}: right-hand side {b.shape} does not match {a.shape} (it must "
                         "be (..., N, K) with the matrix's batch axes)")


# --------------------------------------------------------------------------------------------
# op-level matrix helpers (batched over the leading axes); also used by functrace.numpy
# --------------------------------------------------------------------------------------------


def ndim_of(x) -> int:
    return len(shape_of(x))


def is_complex(x) -> bool:
    return dtype_of(x).kind == "c"


def matrix_transpose(x):
    """Swap the last two axes."""
    nd = ndim_of(x)
    return transpose(x, (*tuple(range(nd - 2)), nd - 1, nd - 2))


def cconj(x):
    return ew.conj(x) if is_complex(x) else x


def matrix_adjoint(x):
    """Conjugate transpose over the last two axes (the transpose for real dtypes)."""
    return cconj(matrix_transpose(x))


_mT, _mH = matrix_transpose, matrix_adjoint


def batched_matmul(a, b):
    """``a @ b`` for ``(..., M, K) @ (..., K, N)`` with equal batch axes."""
    nd = ndim_of(a)
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


mm = batched_matmul


def mm3(a, b, c):
    return mm(mm(a, b), c)


def cast_to(x, dtype):
    return x if dtype_of(x) == np.dtype(dtype) else ew.convert_element_type(x, dtype)


def _iota2(n, m):
    return iota(np.int64, (n, m), 0), iota(np.int64, (n, m), 1)


def _lift2(x2, shape):
    """Broadcast an (M, N) array over the batch axes of ``shape``."""
    nd = len(shape)
    return broadcast_in_dim(x2, shape, (nd - 2, nd - 1))


def eye_like(shape, dtype):
    """The identity pattern of ``shape`` (..., M, N), built from iota (no large literal)."""
    r, c = _iota2(shape[-2], shape[-1])
    return _lift2(ew.convert_element_type(ew.eq(r, c), dtype), tuple(shape))


def _eye_mask(shape):
    r, c = _iota2(shape[-2], shape[-1])
    return _lift2(ew.eq(r, c), tuple(shape))


def _tri_mask(shape, k, lower):
    r, c = _iota2(shape[-2], shape[-1])
    d = ew.sub(c, r)
    m = ew.le(d, np.asarray(k, np.int64)) if lower else ew.ge(d, np.asarray(k, np.int64))
    return _lift2(m, tuple(shape))


def tril(x, k=0):
    """Zero the entries above the k-th diagonal of the last two axes."""
    return ew.select(_tri_mask(shape_of(x), k, True), x, lit(0, x))


def triu(x, k=0):
    """Zero the entries below the k-th diagonal of the last two axes."""
    return ew.select(_tri_mask(shape_of(x), k, False), x, lit(0, x))


def diag_part(x):
    """The diagonal of square matrices: (..., N, N) -> (..., N)."""
    return reduce_sum(ew.mul(x, eye_like(shape_of(x), dtype_of(x))), (ndim_of(x) - 1,))


def along_cols(v, shape):
    """(..., K) -> shape (..., M, K) with entry [..., i, j] = v[..., j]."""
    nb = len(shape) - 2
    return broadcast_in_dim(v, tuple(shape), (*tuple(range(nb)), nb + 1))


def along_rows(v, shape):
    """(..., M) -> shape (..., M, K) with entry [..., i, j] = v[..., i]."""
    nb = len(shape) - 2
    return broadcast_in_dim(v, tuple(shape), (*tuple(range(nb)), nb))


def _per_matrix(s, shape):
    """A per-matrix scalar (...) broadcast over the matrix axes of ``shape``."""
    return broadcast_in_dim(s, tuple(shape), tuple(range(len(shape) - 2)))


def diag_embed(v):
    """Square matrices with ``v`` on the diagonal: (..., N) -> (..., N, N)."""
    n = shape_of(v)[-1]
    shape = (*shape_of(v), n)
    return ew.mul(along_rows(v, shape), eye_like(shape, dtype_of(v)))


def hermitian_part(x):
    return ew.mul(ew.add(x, _mH(x)), lit(0.5, x))


def _masked_reciprocal(d, tol):
    """1/d where |d| > tol, else 0, with a double select so no inf reaches any derivative."""
    small = ew.le(ew.abs(d), tol)
    safe = ew.select(small, lit(1, d), d)
    return ew.select(small, lit(0, d), ew.div(lit(1, d), safe))


def spectral_f(lam, scale):
    """F[..., i, j] = 1/(lam_j - lam_i), with i == j and numerically equal pairs set to 0.

    Pairs closer than ``n * eps * scale`` (``scale`` a per-matrix magnitude) count as equal:
    their eigenvectors are not determined, and a masked term is what a function invariant
    under rotations inside a degenerate eigenspace needs.
    """
    n = shape_of(lam)[-1]
    shape = (*shape_of(lam), n)
    diff = ew.sub(along_cols(lam, shape), along_rows(lam, shape))
    tol = ew.mul(_per_matrix(scale, shape),
                 lit(n * float(np.finfo(dtype_of(lam)).eps), lam))
    return _masked_reciprocal(diff, tol)


def solve_right(a, b, lower, transpose_a):
    """``b @ op(tri(a))^{-1}`` (op = transpose when ``transpose_a``)."""
    return _mT(triangular_solve(a, _mT(b), lower, not transpose_a))


def zeros_of(shape, dtype):
    return broadcast_in_dim(np.zeros((), dtype), tuple(shape), ())


def sum_terms(terms):
    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = ew.add(out, t)
    return out


# --------------------------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------------------------


def _chol_abstract(a):
    check_matrix("cholesky", a, square=True)
    check_dtype("cholesky", a)
    return AVal(a.shape, a.dtype)


def herm_np(a):
    return (a + np.conj(np.swapaxes(a, -1, -2))) / a.dtype.type(2)


def _chol_impl(a):
    return np.linalg.cholesky(herm_np(a))


cholesky_p = Op("cholesky", _chol_abstract, _chol_impl,
                  batch_family="leading", fresh=True)


def cholesky(a):
    """Lower Cholesky factor of the Hermitian part ``(a + a^H)/2`` of ``a``."""
    return bind(cholesky_p, a)


def _phi(x):
    """Lower triangle with the diagonal halved."""
    shape = shape_of(x)
    half = ew.select(_eye_mask(shape), lit(0.5, x), lit(1, x))
    return ew.mul(tril(x), half)


def _chol_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None,)
    L = outs[0]
    h = hermitian_part(t)
    y = triangular_solve(L, h, True, False)                     # L^-1 H'
    x = _mH(triangular_solve(L, _mH(y), True, False))           # L^-1 H' L^-H
    return (mm(L, _phi(x)),)


def _chol_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    L = outs[0]
    p = _phi(mm(_mT(L), ct))
    w = triangular_solve(L, p, True, True)                       # L^-T P
    q = cconj(solve_right(L, cconj(w), True, False))            # L^-T P conj(L)^-1
    return (hermitian_part(q),)


cholesky_p.jvp, cholesky_p.vjp = _chol_jvp, _chol_vjp

# --------------------------------------------------------------------------------------------
# triangular_solve
# --------------------------------------------------------------------------------------------


def _trisolve_abstract(a, b, *, lower, transpose_a):
    check_matrix("triangular_solve", a, square=True)
    _check_rhs("triangular_solve", a, b)
    check_dtype("triangular_solve", a, b)
    return AVal(b.shape, b.dtype)


def _trisolve_impl(a, b, *, lower, transpose_a):
    t = np.tril(a) if lower else np.triu(a)
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    return np.linalg.solve(t, b)


triangular_solve_p = Op("triangular_solve", _trisolve_abstract, _trisolve_impl,
                          batch_family="leading", fresh=True)


def triangular_solve(a, b, lower=True, transpose_a=False):
    """Solve ``op(T) x = b`` for ``T = tril(a)`` (``lower``) or ``triu(a)``; ``op`` transposes
    when ``transpose_a``. ``b`` is ``(..., N, K)``; only the named triangle of ``a`` is read."""
    return bind(triangular_solve_p, a, b, lower=bool(lower), transpose_a=bool(transpose_a))


def _tri_op(a, lower, transpose_a):
    t = tril(a) if lower else triu(a)
    return _mT(t) if transpose_a else t


def _trisolve_jvp(primals, tangents, outs, *, lower, transpose_a):
    a, _ = primals
    ta, tb = tangents
    if ta is None and tb is None:
        return (None,)
    x = outs[0]
    rhs = tb
    if ta is not None:
        m = mm(_tri_op(ta, lower, transpose_a), x)
        rhs = ew.neg(m) if rhs is None else ew.sub(rhs, m)
    return (triangular_solve(a, rhs, lower, transpose_a),)


def _trisolve_vjp(cts, ins, outs, *, lower, transpose_a):
    ct = cts[0]
    if ct is None:
        return None, None
    a = ins[0]
    x = outs[0]
    bbar = triangular_solve(a, ct, lower, not transpose_a)
    mbar = ew.neg(mm(bbar, _mT(x)) if not transpose_a else mm(x, _mT(bbar)))
    abar = tril(mbar) if lower else triu(mbar)
    return abar, bbar


triangular_solve_p.jvp, triangular_solve_p.vjp = _trisolve_jvp, _trisolve_vjp

# --------------------------------------------------------------------------------------------
# solve, inv
# --------------------------------------------------------------------------------------------


def _solve_abstract(a, b):
    check_matrix("solve", a, square=True)
    _check_rhs("solve", a, b)
    check_dtype("solve", a, b)
    return AVal(b.shape, b.dtype)


def _solve_impl(a, b):
    return np.linalg.solve(a, b)


solve_p = Op("solve", _solve_abstract, _solve_impl,
               batch_family="leading", fresh=True)


def solve(a, b):
    """Solve ``a x = b`` for ``b`` of shape ``(..., N, K)`` (batch axes equal to ``a``'s)."""
    return bind(solve_p, a, b)


def _solve_jvp(primals, tangents, outs):
    a, _ = primals
    ta, tb = tangents
    if ta is None and tb is None:
        return (None,)
    x = outs[0]
    rhs = tb
    if ta is not None:
        m = mm(ta, x)
        rhs = ew.neg(m) if rhs is None else ew.sub(rhs, m)
    return (solve(a, rhs),)


def _solve_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return None, None
    bbar = solve(_mT(ins[0]), ct)
    return ew.neg(mm(bbar, _mT(outs[0]))), bbar


solve_p.jvp, solve_p.vjp = _solve_jvp, _solve_vjp


def _inv_abstract(a):
    check_matrix("inv", a, square=True)
    check_dtype("inv", a)
    return AVal(a.shape, a.dtype)


inv_p = Op("inv", _inv_abstract, lambda a: np.linalg.inv(a),
             batch_family="leading", fresh=True)


def inv(a):
    """The inverse of square matrices."""
    return bind(inv_p, a)


def _inv_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None,)
    y = outs[0]
    return (ew.neg(mm3(y, t, y)),)


def _inv_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    yt = _mT(outs[0])
    return (ew.neg(mm3(yt, ct, yt)),)


inv_p.jvp, inv_p.vjp = _inv_jvp, _inv_vjp

# --------------------------------------------------------------------------------------------
# det, slogdet
# --------------------------------------------------------------------------------------------


def _det_abstract(a):
    check_matrix("det", a, square=True)
    check_dtype("det", a)
    return AVal(a.shape[:-2], a.dtype)


def _det_impl(a):
    return as_array(np.linalg.det(a))


det_p = Op("det", _det_abstract, _det_impl,
             batch_family="leading", fresh=True)


def det(a):
    """The determinant of square matrices: (..., N, N) -> (...)."""
    return bind(det_p, a)


def _trace_of_solve(a, t):
    """tr(A^-1 T) per matrix."""
    return reduce_sum(diag_part(solve(a, t)), (ndim_of(a) - 2,))


def _times_inv_t(a, coef):
    """coef * A^-T (coef per matrix), as a solve: A^T X = coef * I."""
    shape = shape_of(a)
    rhs = ew.mul(_per_matrix(coef, shape), eye_like(shape, dtype_of(a)))
    return solve(_mT(a), rhs)


def _det_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None,)
    return (ew.mul(outs[0], _trace_of_solve(primals[0], t)),)


def _det_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    return (_times_inv_t(ins[0], ew.mul(ct, outs[0])),)


det_p.jvp, det_p.vjp = _det_jvp, _det_vjp


def _slogdet_abstract(a):
    check_matrix("slogdet", a, square=True)
    check_dtype("slogdet", a)
    return (AVal(a.shape[:-2], a.dtype), AVal(a.shape[:-2], real_dtype(a.dtype)))


def _slogdet_impl(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return as_array(sign), as_array(logabsdet)


slogdet_p = Op("slogdet", _slogdet_abstract, _slogdet_impl, multiple_results=True,
                 batch_family="leading", fresh=True)


def slogdet(a):
    """``(sign, log|det a|)`` of square matrices."""
    return bind(slogdet_p, a)


def _slogdet_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None, None)
    a = primals[0]
    sign = outs[0]
    tr = _trace_of_solve(a, t)
    if not is_complex(a):
        return (None, tr)
    # d sign = sign * i * Im(tr(A^-1 A'))
    i_im = ew.mul(cast_to(ew.imag(tr), dtype_of(a)), np.asarray(1j, dtype_of(a)))
    return (ew.mul(sign, i_im), ew.real(tr))


def _slogdet_vjp(cts, ins, outs):
    ct_sign, ct_log = cts
    a = ins[0]
    coef = None if ct_log is None else cast_to(ct_log, dtype_of(a))
    if is_complex(a) and ct_sign is not None:
        # Re(ct_s * d sign) = Re(i Im(ct_s * sign) * tr(A^-1 A'))
        c = ew.mul(ct_sign, outs[0])
        cs = ew.mul(cast_to(ew.imag(c), dtype_of(a)), np.asarray(1j, dtype_of(a)))
        coef = cs if coef is None else ew.add(coef, cs)
    if coef is None:
        return (None,)
    return (_times_inv_t(a, coef),)


slogdet_p.jvp, slogdet_p.vjp = _slogdet_jvp, _slogdet_vjp
