"""Linear-algebra primitives: cholesky, triangular_solve, solve, inv, det, slogdet, eigh, svd, qr.

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
* Degenerate spectra (NUMERICS.md): the eigh / svd rules use ``F_ij = 1/(l_j - l_i)`` with the
  diagonal and numerically equal pairs set to 0 by a double ``select``; when the eigenvector
  (singular vector) cotangent is None, ``F`` is not built at all, so a function of the
  eigenvalues alone has a finite gradient even for a repeated spectrum.
* Every op takes leading batch axes, so each sets its own ``batch`` rule (vmap moves the mapped
  axis to the front and binds the op once).
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from . import elementwise as ew
from ._base import as_array, dtype_of, lit, shape_of
from .dot import dot_general
from .reduce import reduce_max, reduce_sum
from .shape import broadcast_in_dim, concatenate, iota, slice_op, transpose

__all__ = ["cholesky", "cholesky_p", "det", "det_p", "eigh", "eigh_p", "inv", "inv_p", "qr",
           "qr_p", "slogdet", "slogdet_p", "solve", "solve_p", "svd", "svd_p", "triangular_solve",
           "triangular_solve_p"]

_LINALG_DTYPES = tuple(np.dtype(d) for d in ("float32", "float64", "complex64", "complex128"))

# --------------------------------------------------------------------------------------------
# type-rule helpers
# --------------------------------------------------------------------------------------------


def _real_dtype(dt) -> np.dtype:
    return np.empty(0, dt).real.dtype


def _check_dtype(name, *avals):
    dt = avals[0].dtype
    for a in avals:
        if a.dtype != dt:
            raise TypeError(f"{name}: operand dtypes differ "
                            f"({', '.join(str(b.dtype) for b in avals)}); functrace.numpy "
                            "promotes before binding")
    if dt not in _LINALG_DTYPES:
        raise TypeError(f"{name} supports float32, float64, complex64 and complex128 operands, "
                        f"got {dt}")


def _check_matrix(name, a, square=False):
    if a.ndim < 2:
        raise ShapeError(f"{name} needs a stack of matrices (..., M, N), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name} needs square matrices (..., N, N), got shape {a.shape}")


def _check_rhs(name, a, b):
    _check_matrix(name, b)
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"{name}: right-hand side {b.shape} does not match {a.shape} (it must "
                         "be (..., N, K) with the matrix's batch axes)")


# --------------------------------------------------------------------------------------------
# op-level matrix helpers (batched over the leading axes); also used by functrace.numpy
# --------------------------------------------------------------------------------------------


def _nd(x) -> int:
    return len(shape_of(x))


def _is_complex(x) -> bool:
    return dtype_of(x).kind == "c"


def matrix_transpose(x):
    """Swap the last two axes."""
    nd = _nd(x)
    return transpose(x, (*tuple(range(nd - 2)), nd - 1, nd - 2))


def _conj(x):
    return ew.conj(x) if _is_complex(x) else x


def matrix_adjoint(x):
    """Conjugate transpose over the last two axes (the transpose for real dtypes)."""
    return _conj(matrix_transpose(x))


_mT, _mH = matrix_transpose, matrix_adjoint


def batched_matmul(a, b):
    """``a @ b`` for ``(..., M, K) @ (..., K, N)`` with equal batch axes."""
    nd = _nd(a)
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


_mm = batched_matmul


def _mm3(a, b, c):
    return _mm(_mm(a, b), c)


def _cast(x, dtype):
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
    return reduce_sum(ew.mul(x, eye_like(shape_of(x), dtype_of(x))), (_nd(x) - 1,))


def _along_cols(v, shape):
    """(..., K) -> shape (..., M, K) with entry [..., i, j] = v[..., j]."""
    nb = len(shape) - 2
    return broadcast_in_dim(v, tuple(shape), (*tuple(range(nb)), nb + 1))


def _along_rows(v, shape):
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
    return ew.mul(_along_rows(v, shape), eye_like(shape, dtype_of(v)))


def _hermitian_part(x):
    return ew.mul(ew.add(x, _mH(x)), lit(0.5, x))


def _masked_reciprocal(d, tol):
    """1/d where |d| > tol, else 0, with a double select so no inf reaches any derivative."""
    small = ew.le(ew.abs(d), tol)
    safe = ew.select(small, lit(1, d), d)
    return ew.select(small, lit(0, d), ew.div(lit(1, d), safe))


def _spectral_f(lam, scale):
    """F[..., i, j] = 1/(lam_j - lam_i), with i == j and numerically equal pairs set to 0.

    Pairs closer than ``n * eps * scale`` (``scale`` a per-matrix magnitude) count as equal:
    their eigenvectors are not determined, and a masked term is what a function invariant
    under rotations inside a degenerate eigenspace needs.
    """
    n = shape_of(lam)[-1]
    shape = (*shape_of(lam), n)
    diff = ew.sub(_along_cols(lam, shape), _along_rows(lam, shape))
    tol = ew.mul(_per_matrix(scale, shape),
                 lit(n * float(np.finfo(dtype_of(lam)).eps), lam))
    return _masked_reciprocal(diff, tol)


def _solve_right(a, b, lower, transpose_a):
    """``b @ op(tri(a))^{-1}`` (op = transpose when ``transpose_a``)."""
    return _mT(triangular_solve(a, _mT(b), lower, not transpose_a))


def _zeros(shape, dtype):
    return broadcast_in_dim(np.zeros((), dtype), tuple(shape), ())


def _sum_terms(terms):
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
    _check_matrix("cholesky", a, square=True)
    _check_dtype("cholesky", a)
    return AVal(a.shape, a.dtype)


def _herm_np(a):
    return (a + np.conj(np.swapaxes(a, -1, -2))) / a.dtype.type(2)


def _chol_impl(a):
    return np.linalg.cholesky(_herm_np(a))


cholesky_p = Op("cholesky", _chol_abstract, _chol_impl,
                doc="Lower Cholesky factor L of the Hermitian part H of A (H = L L^H).")


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
    h = _hermitian_part(t)
    y = triangular_solve(L, h, True, False)                     # L^-1 H'
    x = _mH(triangular_solve(L, _mH(y), True, False))           # L^-1 H' L^-H
    return (_mm(L, _phi(x)),)


def _chol_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    L = outs[0]
    p = _phi(_mm(_mT(L), ct))
    w = triangular_solve(L, p, True, True)                       # L^-T P
    q = _conj(_solve_right(L, _conj(w), True, False))            # L^-T P conj(L)^-1
    return (_hermitian_part(q),)


cholesky_p.jvp, cholesky_p.vjp = _chol_jvp, _chol_vjp

# --------------------------------------------------------------------------------------------
# triangular_solve
# --------------------------------------------------------------------------------------------


def _trisolve_abstract(a, b, *, lower, transpose_a):
    _check_matrix("triangular_solve", a, square=True)
    _check_rhs("triangular_solve", a, b)
    _check_dtype("triangular_solve", a, b)
    return AVal(b.shape, b.dtype)


def _trisolve_impl(a, b, *, lower, transpose_a):
    t = np.tril(a) if lower else np.triu(a)
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    return np.linalg.solve(t, b)


triangular_solve_p = Op("triangular_solve", _trisolve_abstract, _trisolve_impl,
                        doc="x = op(T)^-1 b, T = tril(a) or triu(a), op = transpose or not.")


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
        m = _mm(_tri_op(ta, lower, transpose_a), x)
        rhs = ew.neg(m) if rhs is None else ew.sub(rhs, m)
    return (triangular_solve(a, rhs, lower, transpose_a),)


def _trisolve_vjp(cts, ins, outs, *, lower, transpose_a):
    ct = cts[0]
    if ct is None:
        return None, None
    a = ins[0]
    x = outs[0]
    bbar = triangular_solve(a, ct, lower, not transpose_a)
    mbar = ew.neg(_mm(bbar, _mT(x)) if not transpose_a else _mm(x, _mT(bbar)))
    abar = tril(mbar) if lower else triu(mbar)
    return abar, bbar


triangular_solve_p.jvp, triangular_solve_p.vjp = _trisolve_jvp, _trisolve_vjp

# --------------------------------------------------------------------------------------------
# solve, inv
# --------------------------------------------------------------------------------------------


def _solve_abstract(a, b):
    _check_matrix("solve", a, square=True)
    _check_rhs("solve", a, b)
    _check_dtype("solve", a, b)
    return AVal(b.shape, b.dtype)


def _solve_impl(a, b):
    return np.linalg.solve(a, b)


solve_p = Op("solve", _solve_abstract, _solve_impl, doc="x = A^-1 B (B is (..., N, K)).")


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
        m = _mm(ta, x)
        rhs = ew.neg(m) if rhs is None else ew.sub(rhs, m)
    return (solve(a, rhs),)


def _solve_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return None, None
    bbar = solve(_mT(ins[0]), ct)
    return ew.neg(_mm(bbar, _mT(outs[0]))), bbar


solve_p.jvp, solve_p.vjp = _solve_jvp, _solve_vjp


def _inv_abstract(a):
    _check_matrix("inv", a, square=True)
    _check_dtype("inv", a)
    return AVal(a.shape, a.dtype)


inv_p = Op("inv", _inv_abstract, lambda a: np.linalg.inv(a), doc="A^-1.")


def inv(a):
    """The inverse of square matrices."""
    return bind(inv_p, a)


def _inv_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None,)
    y = outs[0]
    return (ew.neg(_mm3(y, t, y)),)


def _inv_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    yt = _mT(outs[0])
    return (ew.neg(_mm3(yt, ct, yt)),)


inv_p.jvp, inv_p.vjp = _inv_jvp, _inv_vjp

# --------------------------------------------------------------------------------------------
# det, slogdet
# --------------------------------------------------------------------------------------------


def _det_abstract(a):
    _check_matrix("det", a, square=True)
    _check_dtype("det", a)
    return AVal(a.shape[:-2], a.dtype)


def _det_impl(a):
    return as_array(np.linalg.det(a))


det_p = Op("det", _det_abstract, _det_impl, doc="det(A) per matrix.")


def det(a):
    """The determinant of square matrices: (..., N, N) -> (...)."""
    return bind(det_p, a)


def _trace_of_solve(a, t):
    """tr(A^-1 T) per matrix."""
    return reduce_sum(diag_part(solve(a, t)), (_nd(a) - 2,))


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
    _check_matrix("slogdet", a, square=True)
    _check_dtype("slogdet", a)
    return (AVal(a.shape[:-2], a.dtype), AVal(a.shape[:-2], _real_dtype(a.dtype)))


def _slogdet_impl(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return as_array(sign), as_array(logabsdet)


slogdet_p = Op("slogdet", _slogdet_abstract, _slogdet_impl, multiple_results=True,
               doc="(sign, log|det A|); sign has a zero derivative for real A.")


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
    if not _is_complex(a):
        return (None, tr)
    # d sign = sign * i * Im(tr(A^-1 A'))
    i_im = ew.mul(_cast(ew.imag(tr), dtype_of(a)), np.asarray(1j, dtype_of(a)))
    return (ew.mul(sign, i_im), ew.real(tr))


def _slogdet_vjp(cts, ins, outs):
    ct_sign, ct_log = cts
    a = ins[0]
    coef = None if ct_log is None else _cast(ct_log, dtype_of(a))
    if _is_complex(a) and ct_sign is not None:
        # Re(ct_s * d sign) = Re(i Im(ct_s * sign) * tr(A^-1 A'))
        c = ew.mul(ct_sign, outs[0])
        cs = ew.mul(_cast(ew.imag(c), dtype_of(a)), np.asarray(1j, dtype_of(a)))
        coef = cs if coef is None else ew.add(coef, cs)
    if coef is None:
        return (None,)
    return (_times_inv_t(a, coef),)


slogdet_p.jvp, slogdet_p.vjp = _slogdet_jvp, _slogdet_vjp

# --------------------------------------------------------------------------------------------
# eigh
# --------------------------------------------------------------------------------------------


def _eigh_abstract(a, *, lower=True):
    _check_matrix("eigh", a, square=True)
    _check_dtype("eigh", a)
    return (AVal(a.shape[:-1], _real_dtype(a.dtype)), AVal(a.shape, a.dtype))


def _eigh_impl(a, *, lower=True):
    # ``lower`` only picks the triangle LAPACK works on (the matrix is Hermitian by now); it
    # lets a caller reproduce numpy's eigenvector signs for either UPLO
    w, v = np.linalg.eigh(_herm_np(a), "L" if lower else "U")
    return w, v


eigh_p = Op("eigh", _eigh_abstract, _eigh_impl, multiple_results=True,
            doc="(w, V) of the Hermitian part H of A: H = V diag(w) V^H, w ascending.")


def eigh(a, lower=True):
    """Eigenvalues (ascending, real) and eigenvectors of the Hermitian part of ``a``
    (``lower`` names the triangle LAPACK reads, which can only change eigenvector signs)."""
    return bind(eigh_p, a, lower=bool(lower))


def _eigh_f(w):
    scale = reduce_max(ew.abs(w), (_nd(w) - 1,))
    return _spectral_f(w, scale)


def _eigh_jvp(primals, tangents, outs, *, lower=True):
    t = tangents[0]
    if t is None:
        return (None, None)
    w, v = outs
    m = _mm3(_mH(v), _hermitian_part(t), v)
    dw = diag_part(m)
    dw = ew.real(dw) if _is_complex(dw) else dw
    f = _cast(_eigh_f(w), dtype_of(v))
    dv = _mm(v, ew.mul(f, m))
    return (dw, dv)


def _eigh_vjp(cts, ins, outs, *, lower=True):
    wbar, vbar = cts
    if wbar is None and vbar is None:
        return (None,)
    w, v = outs
    g = None if wbar is None else diag_embed(_cast(wbar, dtype_of(v)))
    if vbar is not None:
        f = _cast(_eigh_f(w), dtype_of(v))
        gv = ew.mul(f, _mm(_mT(v), vbar))
        g = gv if g is None else ew.add(g, gv)
    q = _mm3(_conj(v), g, _mT(v))
    return (_hermitian_part(q),)


eigh_p.jvp, eigh_p.vjp = _eigh_jvp, _eigh_vjp

# --------------------------------------------------------------------------------------------
# svd (reduced)
# --------------------------------------------------------------------------------------------


def _svd_abstract(a, *, compute_uv):
    _check_matrix("svd", a)
    _check_dtype("svd", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    s = AVal((*batch, k), _real_dtype(a.dtype))
    if not compute_uv:
        return (s,)
    return (AVal((*batch, m, k), a.dtype), s, AVal((*batch, k, n), a.dtype))


def _svd_impl(a, *, compute_uv):
    if not compute_uv:
        return (np.linalg.svd(a, full_matrices=False, compute_uv=False),)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u, s, vh


svd_p = Op("svd", _svd_abstract, _svd_impl, multiple_results=True,
           doc="Reduced SVD: (U, s, Vh) with A = U diag(s) Vh, or (s,) without compute_uv.")


def svd(a, compute_uv=True):
    """Reduced SVD of ``a``: ``(U, s, Vh)``; ``(s,)`` when not ``compute_uv``."""
    return bind(svd_p, a, compute_uv=bool(compute_uv))


def _svd_f(s):
    smax = reduce_max(s, (_nd(s) - 1,))
    return _spectral_f(ew.mul(s, s), ew.mul(lit(2, s), ew.mul(smax, smax)))


def _inv_or_zero(s):
    z = ew.eq(s, lit(0, s))
    return ew.select(z, lit(0, s), ew.div(lit(1, s), ew.select(z, lit(1, s), s)))


def _svd_jvp(primals, tangents, outs, *, compute_uv):
    t = tangents[0]
    if t is None:
        return (None,) * (3 if compute_uv else 1)
    a = primals[0]
    if compute_uv:
        u, s, vh = outs
    else:
        u, s, vh = svd(a, True)
    dt = dtype_of(a)
    v = _mH(vh)
    ds_mat = _mm3(_mH(u), t, v)                                   # U^H A' V   (k, k)
    ds = diag_part(ds_mat)
    ds = ew.real(ds) if _is_complex(ds) else ds
    if not compute_uv:
        return (ds,)
    m, n = shape_of(a)[-2:]
    kk = shape_of(ds_mat)
    f = _cast(_svd_f(s), dt)
    sc = _cast(s, dt)
    dss = ew.mul(ds_mat, _along_cols(sc, kk))                     # dS diag(s)
    sds = ew.mul(ds_mat, _along_rows(sc, kk))                     # diag(s) dS
    k_u = ew.mul(f, ew.add(dss, _mH(dss)))
    if _is_complex(a):
        sinv = _cast(_inv_or_zero(s), dt)
        j = ew.mul(ew.mul(ew.sub(ds_mat, _mH(ds_mat)), lit(0.5, ds_mat)), diag_embed(sinv))
        k_u = ew.add(k_u, j)
    du = _mm(u, k_u)
    dv = _mm(v, ew.mul(f, ew.add(sds, _mH(sds))))
    if m > n or n > m:
        sinv = _cast(_inv_or_zero(s), dt)
    if m > n:
        dav = _mm(t, v)
        extra = ew.sub(dav, _mm3(u, _mH(u), dav))
        du = ew.add(du, ew.mul(extra, _along_cols(sinv, shape_of(extra))))
    if n > m:
        dahu = _mm(_mH(t), u)
        extra = ew.sub(dahu, _mm3(v, vh, dahu))
        dv = ew.add(dv, ew.mul(extra, _along_cols(sinv, shape_of(extra))))
    return (du, ds, _mH(dv))


def _svd_vjp(cts, ins, outs, *, compute_uv):
    a = ins[0]
    dt = dtype_of(a)
    if compute_uv:
        ubar, sbar, vhbar = cts
        u, s, vh = outs
    else:
        (sbar,) = cts
        ubar = vhbar = None
        u, s, vh = svd(a, True)
    if ubar is None and sbar is None and vhbar is None:
        return (None,)
    m, n = shape_of(a)[-2:]
    k = min(m, n)
    kk = (*shape_of(s), k)
    terms = []
    if sbar is not None:
        terms.append(diag_embed(_cast(sbar, dt)))
    if ubar is not None or vhbar is not None:
        f = _cast(_svd_f(s), dt)
        sc = _cast(s, dt)
        if ubar is not None:
            kbar = _mm(_mT(u), ubar)
            pbar = ew.mul(f, kbar)
            terms.append(ew.mul(_along_cols(sc, kk), ew.add(pbar, _mH(pbar))))
            if _is_complex(a):
                jbar = diag_embed(ew.mul(_cast(_inv_or_zero(s), dt), diag_part(kbar)))
                terms.append(ew.mul(ew.sub(jbar, _mH(jbar)), lit(0.5, jbar)))
        if vhbar is not None:
            lbar = _mm(_conj(vh), _mH(vhbar))
            qbar = ew.mul(f, lbar)
            terms.append(ew.mul(_along_rows(sc, kk), ew.add(qbar, _mH(qbar))))
    dsbar = _sum_terms(terms)
    abar = _mm3(_conj(u), dsbar, _conj(vh))
    if (m > n and ubar is not None) or (n > m and vhbar is not None):
        sinv = _cast(_inv_or_zero(s), dt)
    if m > n and ubar is not None:
        x = ew.sub(ubar, _mm3(_conj(u), _mT(u), ubar))
        x = ew.mul(x, _along_cols(sinv, shape_of(x)))
        abar = ew.add(abar, _mm(x, _conj(vh)))
    if n > m and vhbar is not None:
        cu = ew.mul(_conj(u), _along_cols(sinv, shape_of(u)))
        y = ew.sub(vhbar, _mm3(vhbar, _mT(vh), _conj(vh)))
        abar = ew.add(abar, _mm(cu, y))
    return (abar,)


svd_p.jvp, svd_p.vjp = _svd_jvp, _svd_vjp

# --------------------------------------------------------------------------------------------
# qr (reduced)
# --------------------------------------------------------------------------------------------


def _qr_abstract(a):
    _check_matrix("qr", a)
    _check_dtype("qr", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    return (AVal((*batch, m, k), a.dtype), AVal((*batch, k, n), a.dtype))


def _qr_impl(a):
    q, r = np.linalg.qr(a, mode="reduced")
    return q, r


qr_p = Op("qr", _qr_abstract, _qr_impl, multiple_results=True,
          doc="Reduced QR: (Q, R), A = Q R, Q (..., M, K) orthonormal columns, R upper.")


def qr(a):
    """Reduced QR decomposition ``(Q, R)``; R must be invertible for the derivative."""
    return bind(qr_p, a)


def _split_cols(a, k):
    shape = shape_of(a)
    nd = len(shape)
    lo = [0] * nd
    hi = list(shape)
    hi[-1] = k
    left = slice_op(a, lo, hi)
    lo2 = [0] * nd
    lo2[-1] = k
    return left, slice_op(a, lo2, list(shape))


def _qr_tall_jvp(t, q, r):
    """Tangents of (Q, R) for M >= N (R square)."""
    y = _solve_right(r, t, False, False)                         # A' R^-1
    c = _mm(_mH(q), y)
    lw = tril(c, -1)
    do = ew.sub(lw, _mH(lw))
    if _is_complex(c):
        do = ew.add(do, ew.mul(eye_like(shape_of(c), dtype_of(c)),
                               ew.sub(c, _cast(ew.real(c), dtype_of(c)))))
    dq = ew.add(_mm(q, ew.sub(do, c)), y)
    dr = _mm(ew.sub(c, do), r)
    return dq, dr


def _qr_tall_vjp(qbar, rbar, q, r):
    terms = []
    if qbar is not None:
        terms.append(_mm(_mT(q), qbar))
    if rbar is not None:
        terms.append(ew.neg(_mm(rbar, _mT(r))))
    dobar = _sum_terms(terms)
    cbar = ew.add(ew.neg(dobar), tril(ew.sub(dobar, _mH(dobar)), -1))
    if _is_complex(dobar):
        cbar = ew.add(cbar, ew.mul(eye_like(shape_of(dobar), dtype_of(dobar)),
                                   ew.sub(dobar, _cast(ew.real(dobar), dtype_of(dobar)))))
    ybar = _mm(_conj(q), cbar)
    if qbar is not None:
        ybar = ew.add(ybar, qbar)
    return _solve_right(r, ybar, False, True)                   # Ybar R^-T


def _qr_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None, None)
    a = primals[0]
    q, r = outs
    m, n = shape_of(a)[-2:]
    if m >= n:
        return _qr_tall_jvp(t, q, r)
    # wide: A = [X | Y], Q R_X = X, R_Y = Q^H Y
    rx, _ = _split_cols(r, m)
    tx, ty = _split_cols(t, m)
    _, y = _split_cols(a, m)
    dq, drx = _qr_tall_jvp(tx, q, rx)
    dry = ew.add(_mm(_mH(dq), y), _mm(_mH(q), ty))
    return dq, concatenate([drx, dry], _nd(a) - 1)


def _qr_vjp(cts, ins, outs):
    qbar, rbar = cts
    if qbar is None and rbar is None:
        return (None,)
    a = ins[0]
    q, r = outs
    m, n = shape_of(a)[-2:]
    if m >= n:
        return (_qr_tall_vjp(qbar, rbar, q, r),)
    rx, _ = _split_cols(r, m)
    _, y = _split_cols(a, m)
    if rbar is not None:
        rxbar, rybar = _split_cols(rbar, m)
        extra = _mm(_conj(y), _mH(rybar))                        # from R_Y = Q^H Y
        qbar = extra if qbar is None else ew.add(qbar, extra)
        ybar = _mm(_conj(q), rybar)
    else:
        rxbar = None
        ybar = _zeros(shape_of(y), dtype_of(a))
    xbar = _qr_tall_vjp(qbar, rxbar, q, rx)
    return (concatenate([xbar, ybar], _nd(a) - 1),)


qr_p.jvp, qr_p.vjp = _qr_jvp, _qr_vjp

# --------------------------------------------------------------------------------------------
# batching: every op here takes leading batch axes, so vmap moves the mapped axis to the front
# (broadcasting unmapped operands) and binds the same op once
# --------------------------------------------------------------------------------------------


def _leading_batch_rule(op):
    def rule(args, dims, **params):
        size = next(shape_of(a)[d] for a, d in zip(args, dims, strict=False) if d is not None)
        new = []
        for a, d in zip(args, dims, strict=False):
            shape = shape_of(a)
            if d is None:
                a = broadcast_in_dim(a, (size, *shape), tuple(range(1, len(shape) + 1)))
            elif d != 0:
                a = transpose(a, (d, *tuple(i for i in range(len(shape)) if i != d)))
            new.append(a)
        out = bind(op, *new, **params)
        if op.multiple_results:
            return tuple(out), (0,) * len(out)
        return (out,), (0,)
    return rule


for _op in (cholesky_p, triangular_solve_p, solve_p, inv_p, det_p, slogdet_p, eigh_p, svd_p,
            qr_p):
    _op.batch = _leading_batch_rule(_op)
del _op
