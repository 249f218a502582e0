"""Spectral decompositions: eigh, svd, qr (reduced), their op-level functions and rules.

Split from ``linalg.py``, whose conventions hold here too (stacks of matrices with leading
batch axes, numpy.linalg impls, rules written with op-level functions, JAX's complex
cotangent convention, the degenerate-spectrum rule of docs/numerics.md). Imports core/tracing,
``_base`` and the families below it (elementwise, shape, reduce, linalg), never one above.
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op
from ..tracing import bind
from . import elementwise as ew
from ._base import dtype_of, lit, shape_of
from .linalg import (
    along_cols,
    along_rows,
    cast_to,
    cconj,
    check_dtype,
    check_matrix,
    diag_embed,
    diag_part,
    eye_like,
    herm_np,
    hermitian_part,
    is_complex,
    matrix_adjoint,
    matrix_transpose,
    mm,
    mm3,
    ndim_of,
    real_dtype,
    solve_right,
    spectral_f,
    sum_terms,
    tril,
    zeros_of,
)
from .reduce import reduce_max
from .shape import concatenate, slice_op

_mT, _mH = matrix_transpose, matrix_adjoint

__all__ = ["eigh", "eigh_p", "qr", "qr_p", "svd", "svd_p"]

# --------------------------------------------------------------------------------------------
# eigh
# --------------------------------------------------------------------------------------------


def _eigh_abstract(a, *, lower=True):
    check_matrix("eigh", a, square=True)
    check_dtype("eigh", a)
    return (AVal(a.shape[:-1], real_dtype(a.dtype)), AVal(a.shape, a.dtype))


def _eigh_impl(a, *, lower=True):
    # ``lower`` only picks the triangle LAPACK works on (the matrix is Hermitian by now); it
    # lets a caller reproduce numpy's eigenvector signs for either UPLO
    w, v = np.linalg.eigh(herm_np(a), "L" if lower else "U")
    return w, v


eigh_p = Op("eigh", _eigh_abstract, _eigh_impl, multiple_results=True,
              batch_family="leading", fresh=True)


def eigh(a, lower=True):
    """Eigenvalues (ascending, real) and eigenvectors of the Hermitian part of ``a``
    (``lower`` names the triangle LAPACK reads, which can only change eigenvector signs)."""
    return bind(eigh_p, a, lower=bool(lower))


def _eigh_f(w):
    scale = reduce_max(ew.abs(w), (ndim_of(w) - 1,))
    return spectral_f(w, scale)


def _eigh_jvp(primals, tangents, outs, *, lower=True):
    t = tangents[0]
    if t is None:
        return (None, None)
    w, v = outs
    m = mm3(_mH(v), hermitian_part(t), v)
    dw = diag_part(m)
    dw = ew.real(dw) if is_complex(dw) else dw
    f = cast_to(_eigh_f(w), dtype_of(v))
    dv = mm(v, ew.mul(f, m))
    return (dw, dv)


def _eigh_vjp(cts, ins, outs, *, lower=True):
    wbar, vbar = cts
    if wbar is None and vbar is None:
        return (None,)
    w, v = outs
    g = None if wbar is None else diag_embed(cast_to(wbar, dtype_of(v)))
    if vbar is not None:
        f = cast_to(_eigh_f(w), dtype_of(v))
        gv = ew.mul(f, mm(_mT(v), vbar))
        g = gv if g is None else ew.add(g, gv)
    q = mm3(cconj(v), g, _mT(v))
    return (hermitian_part(q),)


eigh_p.jvp, eigh_p.vjp = _eigh_jvp, _eigh_vjp

# --------------------------------------------------------------------------------------------
# svd (reduced)
# --------------------------------------------------------------------------------------------


def _svd_abstract(a, *, compute_uv):
    check_matrix("svd", a)
    check_dtype("svd", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    s = AVal((*batch, k), real_dtype(a.dtype))
    if not compute_uv:
        return (s,)
    return (AVal((*batch, m, k), a.dtype), s, AVal((*batch, k, n), a.dtype))


def _svd_impl(a, *, compute_uv):
    if not compute_uv:
        return (np.linalg.svd(a, full_matrices=False, compute_uv=False),)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u, s, vh


svd_p = Op("svd", _svd_abstract, _svd_impl, multiple_results=True,
             batch_family="leading", fresh=True)


def svd(a, compute_uv=True):
    """Reduced SVD of ``a``: ``(U, s, Vh)``; ``(s,)`` when not ``compute_uv``."""
    return bind(svd_p, a, compute_uv=bool(compute_uv))


def _svd_f(s):
    smax = reduce_max(s, (ndim_of(s) - 1,))
    return spectral_f(ew.mul(s, s), ew.mul(lit(2, s), ew.mul(smax, smax)))


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
    ds_mat = mm3(_mH(u), t, v)                                   # U^H A' V   (k, k)
    ds = diag_part(ds_mat)
    ds = ew.real(ds) if is_complex(ds) else ds
    if not compute_uv:
        return (ds,)
    m, n = shape_of(a)[-2:]
    kk = shape_of(ds_mat)
    f = cast_to(_svd_f(s), dt)
    sc = cast_to(s, dt)
    dss = ew.mul(ds_mat, along_cols(sc, kk))                     # dS diag(s)
    sds = ew.mul(ds_mat, along_rows(sc, kk))                     # diag(s) dS
    k_u = ew.mul(f, ew.add(dss, _mH(dss)))
    if is_complex(a):
        sinv = cast_to(_inv_or_zero(s), dt)
        j = ew.mul(ew.mul(ew.sub(ds_mat, _mH(ds_mat)), lit(0.5, ds_mat)), diag_embed(sinv))
        k_u = ew.add(k_u, j)
    du = mm(u, k_u)
    dv = mm(v, ew.mul(f, ew.add(sds, _mH(sds))))
    if m > n or n > m:
        sinv = cast_to(_inv_or_zero(s), dt)
    if m > n:
        dav = mm(t, v)
        extra = ew.sub(dav, mm3(u, _mH(u), dav))
        du = ew.add(du, ew.mul(extra, along_cols(sinv, shape_of(extra))))
    if n > m:
        dahu = mm(_mH(t), u)
        extra = ew.sub(dahu, mm3(v, vh, dahu))
        dv = ew.add(dv, ew.mul(extra, along_cols(sinv, shape_of(extra))))
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
        terms.append(diag_embed(cast_to(sbar, dt)))
    if ubar is not None or vhbar is not None:
        f = cast_to(_svd_f(s), dt)
        sc = cast_to(s, dt)
        if ubar is not None:
            kbar = mm(_mT(u), ubar)
            pbar = ew.mul(f, kbar)
            terms.append(ew.mul(along_cols(sc, kk), ew.add(pbar, _mH(pbar))))
            if is_complex(a):
                jbar = diag_embed(ew.mul(cast_to(_inv_or_zero(s), dt), diag_part(kbar)))
                terms.append(ew.mul(ew.sub(jbar, _mH(jbar)), lit(0.5, jbar)))
        if vhbar is not None:
            lbar = mm(cconj(vh), _mH(vhbar))
            qbar = ew.mul(f, lbar)
            terms.append(ew.mul(along_rows(sc, kk), ew.add(qbar, _mH(qbar))))
    dsbar = sum_terms(terms)
    abar = mm3(cconj(u), dsbar, cconj(vh))
    if (m > n and ubar is not None) or (n > m and vhbar is not None):
        sinv = cast_to(_inv_or_zero(s), dt)
    if m > n and ubar is not None:
        x = ew.sub(ubar, mm3(cconj(u), _mT(u), ubar))
        x = ew.mul(x, along_cols(sinv, shape_of(x)))
        abar = ew.add(abar, mm(x, cconj(vh)))
    if n > m and vhbar is not None:
        cu = ew.mul(cconj(u), along_cols(sinv, shape_of(u)))
        y = ew.sub(vhbar, mm3(vhbar, _mT(vh), cconj(vh)))
        abar = ew.add(abar, mm(cu, y))
    return (abar,)


svd_p.jvp, svd_p.vjp = _svd_jvp, _svd_vjp

# --------------------------------------------------------------------------------------------
# qr (reduced)
# --------------------------------------------------------------------------------------------


def _qr_abstract(a):
    check_matrix("qr", a)
    check_dtype("qr", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    return (AVal((*batch, m, k), a.dtype), AVal((*batch, k, n), a.dtype))


def _qr_impl(a):
    q, r = np.linalg.qr(a, mode="reduced")
    return q, r


qr_p = Op("qr", _qr_abstract, _qr_impl, multiple_results=True,
            batch_family="leading", fresh=True)


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
    y = solve_right(r, t, False, False)                         # A' R^-1
    c = mm(_mH(q), y)
    lw = tril(c, -1)
    do = ew.sub(lw, _mH(lw))
    if is_complex(c):
        do = ew.add(do, ew.mul(eye_like(shape_of(c), dtype_of(c)),
                               ew.sub(c, cast_to(ew.real(c), dtype_of(c)))))
    dq = ew.add(mm(q, ew.sub(do, c)), y)
    dr = mm(ew.sub(c, do), r)
    return dq, dr


def _qr_tall_vjp(qbar, rbar, q, r):
    terms = []
    if qbar is not None:
        terms.append(mm(_mT(q), qbar))
    if rbar is not None:
        terms.append(ew.neg(mm(rbar, _mT(r))))
    dobar = sum_terms(terms)
    cbar = ew.add(ew.neg(dobar), tril(ew.sub(dobar, _mH(dobar)), -1))
    if is_complex(dobar):
        cbar = ew.add(cbar, ew.mul(eye_like(shape_of(dobar), dtype_of(dobar)),
                                   ew.sub(dobar, cast_to(ew.real(dobar), dtype_of(dobar)))))
    ybar = mm(cconj(q), cbar)
    if qbar is not None:
        ybar = ew.add(ybar, qbar)
    return solve_right(r, ybar, False, True)                   # Ybar R^-T


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
    dry = ew.add(mm(_mH(dq), y), mm(_mH(q), ty))
    return dq, concatenate([drx, dry], ndim_of(a) - 1)


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
        extra = mm(cconj(y), _mH(rybar))                        # from R_Y = Q^H Y
        qbar = extra if qbar is None else ew.add(qbar, extra)
        ybar = mm(cconj(q), rybar)
    else:
        rxbar = None
        ybar = zeros_of(shape_of(y), dtype_of(a))
    xbar = _qr_tall_vjp(qbar, rxbar, q, rx)
    return (concatenate([xbar, ybar], ndim_of(a) - 1),)


qr_p.jvp, qr_p.vjp = _qr_jvp, _qr_vjp
