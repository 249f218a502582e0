"""Matrix functions, the LU factorisation and the general eigendecomposition: expm, sqrtm, lu,
lu_pivots_to_permutation, eig; their op-level functions and rules (``functrace.scipy.linalg``
and ``functrace.numpy.linalg.eig`` are their user faces).

Owns these ops. Imports core/tracing, ``_base`` and the families below it (elementwise, shape,
linalg), never one above, nor ``functrace.numpy``/``functrace.scipy``. The impls call
``scipy.linalg`` (imported when an impl first runs: scipy is an optional dependency, and
``functrace.scipy`` needs it anyway, since outside a transform it *is* scipy), so values are
scipy's; ``eig`` calls ``numpy.linalg.eig``. The conventions of ``linalg.py`` hold: stacks of
matrices with leading batch axes (``batch_family="leading"``), one dtype among
float32/float64/complex64/complex128, rules written with op-level functions, JAX's complex
cotangent pairing ``Re(sum(ct * dz))``.

Primary matrix functions (expm, sqrtm) differentiate by the block-triangular identity

    f([[A, E], [0, A]]) = [[f(A), L_f(A, E)], [0, f(A)]]

(Higham, *Functions of Matrices*, 3.2): the jvp is the top-right block of ``f`` of a matrix
twice the size, and since ``L_f(A, .)`` is adjoint to ``L_f(A^T, .)`` under the pairing above
(no conjugation), the vjp is the same construction on ``A^T``. Both rules bind the op itself,
so the derivative of every order exists (each order doubles the matrix once more), and it is
as accurate as the function: scipy's own ``expm_frechet`` is built the same way.
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from . import elementwise as ew
from ._base import dtype_of, lit, shape_of
from .linalg import (
    along_cols,
    along_rows,
    batched_matmul,
    cast_to,
    check_dtype,
    check_matrix,
    diag_embed,
    diag_part,
    eye_like,
    is_complex,
    matrix_transpose,
    ndim_of,
    solve,
    triangular_solve,
    tril,
    triu,
    zeros_of,
)
from .reduce import reduce_max, reduce_sum
from .shape import broadcast_in_dim, concatenate, iota, slice_op

__all__ = ["expm", "expm_p", "sqrtm", "sqrtm_p", "lu", "lu_p", "lu_pivots_to_permutation",
           "lu_pivots_to_permutation_p", "permutation_matrix", "eig", "eig_p"]

mm, _mT = batched_matmul, matrix_transpose


def _scipy_linalg():
    try:
        import scipy.linalg
    except ImportError as e:   # pragma: no cover - scipy is installed with functrace[scipy]
        raise ImportError("this op calls scipy.linalg: pip install 'functrace[scipy]'") from e
    return scipy.linalg


def _square_abstract(name):
    def abstract(a):
        check_matrix(name, a, square=True)
        check_dtype(name, a)
        return AVal(a.shape, a.dtype)
    return abstract


# --------------------------------------------------------------------------------------------
# the block-triangular derivative of a primary matrix function
# --------------------------------------------------------------------------------------------


def _block_upper(a, e):
    """[[a, e], [0, a]] over the last two axes."""
    nd = ndim_of(a)
    top = concatenate([a, e], nd - 1)
    bottom = concatenate([zeros_of(shape_of(a), dtype_of(a)), a], nd - 1)
    return concatenate([top, bottom], nd - 2)


def _top_right(x, n):
    shape = shape_of(x)
    nd = len(shape)
    return slice_op(x, [0] * (nd - 2) + [0, n], list(shape[:-2]) + [n, 2 * n])


def _frechet(f, a, e):
    """L_f(a, e), the derivative of the primary matrix function ``f`` at ``a`` along ``e``."""
    return _top_right(f(_block_upper(a, e)), shape_of(a)[-1])


def _primary_rules(op, f):
    def jvp(primals, tangents, outs):
        t = tangents[0]
        return (None,) if t is None else (_frechet(f, primals[0], t),)

    def vjp(cts, ins, outs):
        ct = cts[0]
        return (None,) if ct is None else (_frechet(f, _mT(ins[0]), ct),)

    op.jvp, op.vjp = jvp, vjp


# --------------------------------------------------------------------------------------------
# expm
# --------------------------------------------------------------------------------------------


def _expm_impl(a):
    return np.asarray(_scipy_linalg().expm(a), dtype=a.dtype)


expm_p = Op("expm", _square_abstract("expm"), _expm_impl, batch_family="leading", fresh=True)


def expm(a):
    """The matrix exponential of square matrices (scipy's scaling and squaring, Padé 13)."""
    return bind(expm_p, a)


_primary_rules(expm_p, expm)

# --------------------------------------------------------------------------------------------
# sqrtm
# --------------------------------------------------------------------------------------------


def _sqrtm_impl(a):
    x = np.asarray(_scipy_linalg().sqrtm(a))
    if x.dtype.kind == "c" and a.dtype.kind != "c":
        if np.any(x.imag != 0):
            raise ValueError(
                "sqrtm: this real matrix has an eigenvalue on the closed negative real axis, "
                "so its principal square root is complex; a traced sqrtm keeps the input's "
                "dtype: pass a complex matrix (a.astype(complex))")
        x = x.real
    return np.asarray(x, dtype=a.dtype)


sqrtm_p = Op("sqrtm", _square_abstract("sqrtm"), _sqrtm_impl, batch_family="leading",
             fresh=True)


def sqrtm(a):
    """The principal square root of square matrices (scipy's Schur method); real input stays
    real (an error where the root is complex). Differentiable where no two eigenvalues
    ``l_i, l_j`` of the root have ``l_i + l_j == 0`` (no eigenvalue of ``a`` at 0)."""
    return bind(sqrtm_p, a)


_primary_rules(sqrtm_p, sqrtm)

# --------------------------------------------------------------------------------------------
# lu: P a = L U with partial pivoting (LAPACK getrf, through scipy.linalg.lu_factor)
# --------------------------------------------------------------------------------------------


def _lu_abstract(a):
    check_matrix("lu", a)
    check_dtype("lu", a)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return (AVal(a.shape, a.dtype), AVal((*batch, min(m, n)), np.dtype(np.int32)),
            AVal((*batch, m), np.dtype(np.int32)))


def _perm_from_pivots(piv, m):
    batch = piv.shape[:-1]
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), (*batch, m)).copy()
    for idx in np.ndindex(*batch):
        p = perm[idx]
        for i, j in enumerate(piv[idx]):
            p[i], p[j] = p[j], p[i]
    return perm


def _lu_impl(a):
    sl = _scipy_linalg()
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    lu_ = np.empty(a.shape, a.dtype)
    piv = np.empty((*batch, min(m, n)), np.int32)
    for idx in np.ndindex(*batch):
        f, p = sl.lu_factor(a[idx])
        lu_[idx], piv[idx] = f, p
    return lu_, piv, _perm_from_pivots(piv, m)


lu_p = Op("lu", _lu_abstract, _lu_impl, multiple_results=True, batch_family="leading",
          fresh=True)


def lu(a):
    """``(lu, pivots, permutation)`` of ``a`` (..., M, N): ``a[..., permutation, :] = L @ U``
    with ``L`` unit lower trapezoidal (strictly below the diagonal of ``lu``) and ``U`` upper
    trapezoidal; ``pivots`` are LAPACK's row swaps (0-based, scipy's ``lu_factor``)."""
    return bind(lu_p, a)


def _lu_pivperm_abstract(piv, *, m):
    if piv.dtype.kind not in "iu":
        raise TypeError(f"lu_pivots_to_permutation takes integer pivots, got {piv.dtype}")
    if piv.ndim < 1 or piv.shape[-1] > m:
        raise ShapeError(f"lu_pivots_to_permutation: pivots {piv.shape} for {m} rows")
    return AVal((*piv.shape[:-1], m), np.dtype(np.int32))


lu_pivots_to_permutation_p = Op(
    "lu_pivots_to_permutation", _lu_pivperm_abstract,
    lambda piv, *, m: _perm_from_pivots(np.asarray(piv), m),
    differentiable=False, batch_family="leading", fresh=True)


def lu_pivots_to_permutation(piv, m):
    """The row permutation (..., m) that LAPACK's sequence of row swaps ``piv`` applies."""
    return bind(lu_pivots_to_permutation_p, piv, m=int(m))


def permutation_matrix(perm, n, dtype):
    """P (..., M, n) with ``P[..., i, j] = (perm[..., i] == j)``: ``P @ a`` is ``a[perm]``."""
    shape = (*shape_of(perm), n)
    cols = broadcast_in_dim(iota(np.int32, (n,), 0), shape, (len(shape) - 1,))
    rows = broadcast_in_dim(ew.convert_element_type(perm, np.int32), shape,
                            tuple(range(len(shape) - 1)))
    return ew.convert_element_type(ew.eq(rows, cols), dtype)


def _lu_factors(lu_):
    """Square L (..., M, M) and U (..., N, N), padded with the identity (JAX's lu jvp)."""
    shape = shape_of(lu_)
    m, n = shape[-2:]
    k = min(m, n)
    nd = len(shape)
    batch = list(shape[:-2])
    dt = dtype_of(lu_)
    left = tril(slice_op(lu_, [0] * nd, batch + [m, k]), -1)
    if m > k:
        left = concatenate([left, zeros_of((*batch, m, m - k), dt)], nd - 1)
    L = ew.add(left, eye_like((*batch, m, m), dt))
    top = triu(slice_op(lu_, [0] * nd, batch + [k, n]))
    if n > k:
        rest = slice_op(eye_like((*batch, n, n), dt), [0] * (nd - 2) + [k, 0], batch + [n, n])
        top = concatenate([top, rest], nd - 2)
    return L, top


def _lu_jvp(primals, tangents, outs):
    t = tangents[0]
    if t is None:
        return (None, None, None)
    lu_, _, perm = outs
    L, U = _lu_factors(lu_)
    m = shape_of(lu_)[-2]
    pt = mm(permutation_matrix(perm, m, dtype_of(t)), t)             # P A'
    la = triangular_solve(L, pt, True, False)                        # L^-1 P A'
    x = _mT(triangular_solve(U, _mT(la), False, True))               # L^-1 P A' U^-1
    return (ew.add(mm(L, tril(x, -1)), mm(triu(x), U)), None, None)


def _lu_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    lu_, _, perm = outs
    L, U = _lu_factors(lu_)
    m = shape_of(lu_)[-2]
    xbar = ew.add(tril(mm(_mT(L), ct), -1), triu(mm(ct, _mT(U))))
    y = triangular_solve(L, xbar, True, True)                        # L^-T Xbar
    ybar = _mT(triangular_solve(U, _mT(y), False, False))            # L^-T Xbar U^-T
    return (mm(_mT(permutation_matrix(perm, m, dtype_of(ct))), ybar),)


lu_p.jvp, lu_p.vjp = _lu_jvp, _lu_vjp

# --------------------------------------------------------------------------------------------
# eig: eigenvalues and right eigenvectors of a general square matrix (always complex)
# --------------------------------------------------------------------------------------------


def _complex_dtype(dt):
    return np.result_type(dt, np.complex64)


def _eig_abstract(a, *, compute_v):
    check_matrix("eig", a, square=True)
    check_dtype("eig", a)
    cdt = _complex_dtype(a.dtype)
    w = AVal(a.shape[:-1], cdt)
    return (w, AVal(a.shape, cdt)) if compute_v else (w,)


def _eig_impl(a, *, compute_v):
    cdt = _complex_dtype(a.dtype)
    if not compute_v:
        return (np.asarray(np.linalg.eigvals(a), cdt),)
    w, v = np.linalg.eig(a)
    return np.asarray(w, cdt), np.asarray(v, cdt)


eig_p = Op("eig", _eig_abstract, _eig_impl, multiple_results=True, batch_family="leading",
           fresh=True)


def eig(a, compute_v=True):
    """Eigenvalues (complex, LAPACK's order) and unit-norm right eigenvectors (columns) of
    square matrices: ``(w, v)``, or ``(w,)`` when not ``compute_v``. Always complex."""
    return bind(eig_p, a, compute_v=bool(compute_v))


def _eig_f(w):
    """F[..., i, j] = 1/(w_j - w_i), 0 on the diagonal and for numerically equal pairs (the
    masking of ``linalg.spectral_f``, with a real tolerance for complex eigenvalues)."""
    n = shape_of(w)[-1]
    shape = (*shape_of(w), n)
    diff = ew.sub(along_cols(w, shape), along_rows(w, shape))
    mag = ew.abs(w)
    scale = reduce_max(mag, (ndim_of(w) - 1,))
    tol = ew.mul(broadcast_in_dim(scale, shape, tuple(range(len(shape) - 2))),
                 lit(n * float(np.finfo(dtype_of(mag)).eps), mag))
    small = ew.le(ew.abs(diff), tol)
    safe = ew.select(small, lit(1, diff), diff)
    return ew.select(small, lit(0, diff), ew.div(lit(1, diff), safe))


def _eig_vectors(a, compute_v, outs):
    if compute_v:
        return outs
    return eig(a, True)


def _eig_jvp(primals, tangents, outs, *, compute_v):
    t = tangents[0]
    if t is None:
        return (None,) * (2 if compute_v else 1)
    w, v = _eig_vectors(primals[0], compute_v, outs)
    m = solve(v, mm(cast_to(t, dtype_of(v)), v))                     # V^-1 A' V
    dw = diag_part(m)
    if not compute_v:
        return (dw,)
    du = mm(v, ew.mul(_eig_f(w), m))
    # unit-norm columns: remove the radial part Re(v_i^H du_i) v_i
    radial = ew.real(reduce_sum(ew.mul(ew.conj(v), du), (ndim_of(v) - 2,)))
    dv = ew.sub(du, ew.mul(v, along_cols(cast_to(radial, dtype_of(v)), shape_of(v))))
    return (dw, dv)


def _eig_vjp(cts, ins, outs, *, compute_v):
    wbar = cts[0]
    vbar = cts[1] if compute_v else None
    if wbar is None and vbar is None:
        return (None,)
    a = ins[0]
    w, v = _eig_vectors(a, compute_v, outs)
    mbar = None if wbar is None else diag_embed(wbar)
    if vbar is not None:
        c = ew.real(reduce_sum(ew.mul(vbar, v), (ndim_of(v) - 2,)))
        ubar = ew.sub(vbar, ew.mul(ew.conj(v), along_cols(cast_to(c, dtype_of(v)),
                                                          shape_of(v))))
        fm = ew.mul(_eig_f(w), mm(_mT(v), ubar))
        mbar = fm if mbar is None else ew.add(mbar, fm)
    abar = solve(_mT(v), mm(mbar, _mT(v)))                            # V^-T Mbar V^T
    return (abar if is_complex(a) else ew.real(abar),)


eig_p.jvp, eig_p.vjp = _eig_jvp, _eig_vjp
