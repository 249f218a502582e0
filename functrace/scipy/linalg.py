"""functrace.scipy.linalg: scipy.linalg, traceable and differentiable.

Every function has scipy's signature. Outside a transform it *is* scipy's (``scipy.linalg.f``
is called and its result returned unchanged). Inside one it promotes like scipy (bool and
integers become float64, float32 stays float32), broadcasts batch axes as scipy does (a 1-d
right-hand side is a vector, anything else a stack of ``(N, K)`` matrices), and records
functrace ops: the ``functrace.ops.linalg`` primitives (cholesky, triangular_solve, solve, inv,
...) and ``functrace.ops.matfuncs`` (expm, sqrtm, lu), whose rules make every function here
differentiable to any order.

Choices worth knowing (docs/scipy.md, docs/numerics.md):
* ``cholesky``, ``cho_factor`` and ``eigh`` read one triangle, as scipy does; their gradient is
  the symmetric one by default, ``gradient="triangle"`` the exact one of scipy's function.
* ``cho_factor`` returns scipy's ``c``: the factor in one triangle, ``a``'s own entries in the
  other (scipy leaves them there), so traced values are scipy's bit for bit.
* ``overwrite_*`` is ignored (traced arrays are immutable) and so is ``check_finite`` under a
  transform (values are not known when a graph is built).
* ``sqrtm`` of a real matrix is real when traced; where scipy returns a complex root (an
  eigenvalue on the closed negative real axis) the traced function raises: pass a complex
  matrix.
* Traced ``qr(mode="full")`` and ``lu`` derivatives: see each function.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import ops
from ..numpy import linalg as _fla
from ..numpy._core import asarray_any, cast
from ..numpy._linalg_common import (
    assert_stacked_2d,
    assert_stacked_square,
    check_gradient,
    hermitian_input,
    prep,
    traced,
)
from ..ops import linalg as _lops
from ..ops import matfuncs as _mf

__all__ = ["solve_triangular", "cho_factor", "cho_solve", "cholesky", "lu_factor", "lu_solve",
           "lu", "expm", "sqrtm", "block_diag", "inv", "solve", "det", "eigh", "svd", "qr"]


def _sl():
    import scipy.linalg
    return scipy.linalg


# --------------------------------------------------------------------------------------------
# helpers: right-hand sides, transposes
# --------------------------------------------------------------------------------------------


def _rhs(a, b, name):
    """(a, b as a matrix stack with a's batch axes broadcast, undo) for scipy's rule: a 1-d
    ``b`` is one vector, any other ``b`` a stack of (N, K) matrices."""
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"{name}: incompatible shapes {a.shape} and {b.shape}")
        bm = ops.broadcast_in_dim(b, (*a.shape[:-2], n, 1), (a.ndim - 2,))
        return a, bm, lambda x: ops.reshape(x, x.shape[:-1])
    if b.shape[-2] != n:
        raise ValueError(f"{name}: incompatible shapes {a.shape} and {b.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = ops.broadcast_to_shape(a, batch + a.shape[-2:])
    b = ops.broadcast_to_shape(b, batch + b.shape[-2:])
    return a, b, lambda x: x


def _trans(trans):
    t = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}.get(trans)
    if t is None:
        raise ValueError(f"trans must be 0/'N', 1/'T' or 2/'C', got {trans!r}")
    return t


def _unit(a):
    """``a`` with ones on the diagonal (a unit-triangular solve never reads it)."""
    return ops.select(_lops.eye_like(a.shape, np.bool_), np.ones((), a.dtype), a)


def _tri_solve(a, b, lower, t):
    """op(tri(a)) x = b with op = identity, transpose (t=1) or conjugate transpose (t=2)."""
    if t == 2 and a.dtype.kind == "c":
        a = ops.conj(a)
    return ops.triangular_solve(a, b, lower, t != 0)


# --------------------------------------------------------------------------------------------
# triangular and Cholesky solves
# --------------------------------------------------------------------------------------------


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """scipy.linalg.solve_triangular: ``x`` with ``op(a) @ x == b`` for triangular ``a``.

    Only the ``lower`` (default: upper) triangle of ``a`` is read, and not its diagonal when
    ``unit_diagonal``; ``trans`` is 0/'N', 1/'T' (``a.T``) or 2/'C' (``a.conj().T``).
    Differentiable in ``a`` (on the triangle read) and ``b``.

    Example:
        >>> import functrace as ft, numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> a = np.array([[2.0, 1.0], [0.0, 4.0]])
        >>> fsl.solve_triangular(a, np.array([4.0, 8.0]))
        array([1., 2.])
        >>> ft.grad(lambda b: fsl.solve_triangular(a, b).sum())(np.array([4.0, 8.0]))
        array([0.5  , 0.125])
    """
    if not traced():
        return _sl().solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b,
                                      check_finite)
    a, b = prep(a, b)
    assert_stacked_square(a)
    t = _trans(trans)
    if unit_diagonal:
        a = _unit(a)
    a, bm, undo = _rhs(a, b, "solve_triangular")
    return undo(_tri_solve(a, bm, bool(lower), t))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True, *, gradient="symmetric"):
    """scipy.linalg.cho_factor: ``(c, lower)``, ``c`` holding the Cholesky factor in its
    ``lower`` (default: upper) triangle and ``a``'s own entries in the other, for ``cho_solve``.

    ``gradient`` is ``cholesky``'s (docs/numerics.md). The entries of the other triangle are
    ``a``'s (scipy leaves them there), so their derivative is the identity.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> c, low = fsl.cho_factor(np.array([[4.0, 2.0], [2.0, 2.0]]))
        >>> c, low
        (array([[2., 1.],
               [2., 1.]]), False)
    """
    if not traced():
        check_gradient(gradient)
        return _sl().cho_factor(a, lower, overwrite_a, check_finite)
    (a,) = prep(a)
    assert_stacked_square(a)
    lower = bool(lower)
    f = ops.cholesky(hermitian_input(a, lower, gradient))
    if not lower:
        f = _lops.matrix_adjoint(f)
    rest = _lops.triu(a, 1) if lower else _lops.tril(a, -1)
    return ops.add(f, rest), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """scipy.linalg.cho_solve: ``x`` with ``a @ x == b``, given ``cho_factor(a)``.

    Only the factor's triangle of ``c`` is read. Differentiable in ``c`` and ``b``.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> a = np.array([[4.0, 2.0], [2.0, 2.0]])
        >>> fsl.cho_solve(fsl.cho_factor(a), np.array([6.0, 4.0]))
        array([1., 1.])
    """
    if not traced():
        return _sl().cho_solve(c_and_lower, b, overwrite_b, check_finite)
    c, lower = c_and_lower
    c, b = prep(c, b)
    assert_stacked_square(c)
    c, bm, undo = _rhs(c, b, "cho_solve")
    lower = bool(lower)
    if lower:      # a = L L^H
        y = _tri_solve(c, bm, True, 0)
        x = _tri_solve(c, y, True, 2)
    else:          # a = U^H U
        y = _tri_solve(c, bm, False, 2)
        x = _tri_solve(c, y, False, 0)
    return undo(x)


def cholesky(a, lower=False, overwrite_a=False, check_finite=True, *, gradient="symmetric"):
    """scipy.linalg.cholesky: the **upper** factor ``U`` with ``a = U^H @ U`` by default (scipy's
    default, unlike numpy's), the lower ``L`` with ``a = L @ L^H`` if ``lower``.

    One triangle of ``a`` is read (the one the factor lives in). ``gradient`` (an extension):
    ``"symmetric"`` (default) or ``"triangle"`` (docs/numerics.md).

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.cholesky(np.array([[4.0, 2.0], [2.0, 2.0]]))
        array([[2., 1.],
               [0., 1.]])
    """
    if not traced():
        check_gradient(gradient)
        return _sl().cholesky(a, lower, overwrite_a, check_finite)
    return _fla.cholesky(a, upper=not lower, gradient=gradient)


# --------------------------------------------------------------------------------------------
# LU
# --------------------------------------------------------------------------------------------


def lu_factor(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.lu_factor: ``(lu, piv)`` with partial pivoting; ``lu`` holds ``L`` (unit
    diagonal not stored) and ``U``, ``piv`` LAPACK's row swaps (0-based, int32).

    Differentiable in ``a`` (``piv`` is piecewise constant), for square and rectangular
    matrices, where ``U``'s leading square block is invertible.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> lu, piv = fsl.lu_factor(np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> piv
        array([1, 1], dtype=int32)
    """
    if not traced():
        return _sl().lu_factor(a, overwrite_a, check_finite)
    (a,) = prep(a)
    assert_stacked_2d(a)
    lu_, piv, _ = _mf.lu(a)
    return lu_, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """scipy.linalg.lu_solve: ``x`` with ``op(a) @ x == b`` given ``lu_factor(a)`` (``trans``:
    0/'N', 1/'T', 2/'C').

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
        >>> fsl.lu_solve(fsl.lu_factor(a), np.array([5.0, 11.0]))
        array([1., 2.])
    """
    if not traced():
        return _sl().lu_solve(lu_and_piv, b, trans, overwrite_b, check_finite)
    lu_, piv = lu_and_piv
    lu_, b = prep(lu_, b)
    assert_stacked_square(lu_)
    t = _trans(trans)
    n = lu_.shape[-1]
    perm = _mf.lu_pivots_to_permutation(asarray_any(piv), n)
    lu_, bm, undo = _rhs(lu_, b, "lu_solve")
    if perm.ndim - 1 != lu_.ndim - 2:
        perm = ops.broadcast_to_shape(perm, (*lu_.shape[:-2], n))
    p = _mf.permutation_matrix(perm, n, lu_.dtype)                   # P a = L U
    unit_l = _unit(lu_)
    if t == 0:
        y = _tri_solve(unit_l, _lops.mm(p, bm), True, 0)
        x = _tri_solve(lu_, y, False, 0)
    else:      # a^T = U^T L^T P: x = P^T L^-T U^-T b (conjugated for t == 2)
        y = _tri_solve(lu_, bm, False, t)
        y = _tri_solve(unit_l, y, True, t)
        x = _lops.mm(_lops.matrix_transpose(p), y)
    return undo(x)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """scipy.linalg.lu: ``(p, l, u)`` with ``a = p @ l @ u`` (``(p @ l, u)`` if ``permute_l``;
    ``p`` as row indices, ``a = l[p] @ u``, if ``p_indices``).

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> p, l, u = fsl.lu(np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> p
        array([[0., 1.],
               [1., 0.]])
        >>> u
        array([[3.        , 4.        ],
               [0.        , 0.66666667]])
    """
    if not traced():
        return _sl().lu(a, permute_l, overwrite_a, check_finite, p_indices)
    (a,) = prep(a)
    assert_stacked_2d(a)
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    lu_, _, perm = _mf.lu(a)
    nd = a.ndim
    batch = list(a.shape[:-2])
    zero = [0] * nd
    lo = _lops.tril(ops.slice_op(lu_, zero, batch + [m, k]), -1)
    l_ = ops.add(lo, _lops.eye_like(lo.shape, a.dtype))
    u = _lops.triu(ops.slice_op(lu_, zero, batch + [k, n]))
    pt = _lops.matrix_transpose(_mf.permutation_matrix(perm, m, a.dtype))   # a = P^T L U
    if permute_l:
        return _lops.mm(pt, l_), u
    if p_indices:
        ip = _mf.permutation_matrix(perm, m, np.int32)
        rows = ops.broadcast_in_dim(ops.iota(np.int32, (m,), 0), (*a.shape[:-2], m, 1),
                                    (nd - 2,))
        inv = ops.reshape(_lops.mm(_lops.matrix_transpose(ip), rows), (*a.shape[:-2], m))
        return inv, l_, u
    return pt, l_, u


# --------------------------------------------------------------------------------------------
# matrix functions
# --------------------------------------------------------------------------------------------


def expm(A):
    """scipy.linalg.expm: the matrix exponential (of the last two axes).

    The derivative (of every order) is the Fréchet derivative, computed as scipy's
    ``expm_frechet`` does: the top-right block of ``expm([[A, E], [0, A]])``.

    Example:
        >>> import functrace as ft, numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.expm(np.array([[0.0, 1.0], [0.0, 0.0]]))
        array([[1., 1.],
               [0., 1.]])
        >>> ft.grad(lambda a: fsl.expm(a)[0, 0])(np.zeros((2, 2)))
        array([[1., 0.],
               [0., 0.]])
    """
    if not traced():
        return _sl().expm(A)
    (a,) = prep(A)
    assert_stacked_square(a)
    return _mf.expm(a)


def sqrtm(A, disp=None, blocksize=None):
    """scipy.linalg.sqrtm: the principal matrix square root (Schur method; any square matrix,
    not only symmetric ones).

    Traced, a real matrix gives a real root; one whose root is complex (an eigenvalue on the
    closed negative real axis) raises ValueError when evaluated: pass a complex matrix there.
    ``disp``/``blocksize`` (deprecated in scipy) are passed through eagerly only. The
    derivative solves ``X dX + dX X = dA`` (the top-right block of ``sqrtm([[A, E], [0,
    A]])``), defined where ``A`` has no eigenvalue at 0.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.sqrtm(np.array([[4.0, 0.0], [0.0, 9.0]]))
        array([[2., 0.],
               [0., 3.]])
    """
    if not traced():
        kw = {k: v for k, v in (("disp", disp), ("blocksize", blocksize)) if v is not None}
        return _sl().sqrtm(A, **kw)
    (a,) = prep(A)
    assert_stacked_square(a)
    return _mf.sqrtm(a)


def block_diag(*arrs):
    """scipy.linalg.block_diag: the block-diagonal matrix of the arguments (each taken as 2-d:
    a scalar is 1x1, a 1-d array one row).

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.block_diag(np.array([[1.0, 2.0]]), 3.0)
        array([[1., 2., 0.],
               [0., 0., 3.]])
    """
    if not traced() or not arrs:
        return _sl().block_diag(*arrs)
    xs = [asarray_any(a) for a in arrs]
    bad = [i for i, x in enumerate(xs) if x.ndim > 2]
    if bad:
        raise ValueError(f"arguments in the following positions have dimension greater than 2: "
                         f"{bad}")
    dt = np.result_type(*[x.dtype for x in xs])
    xs = [cast(ops.reshape(x, (1, 1) if x.ndim == 0 else (1, x.shape[0]) if x.ndim == 1
                           else x.shape), dt) for x in xs]
    ncols = builtins.sum(x.shape[1] for x in xs)
    rows, left = [], 0
    for x in xs:
        right = ncols - left - x.shape[1]
        rows.append(ops.pad(x, np.zeros((), dt), ((0, 0, 0), (left, right, 0))))
        left += x.shape[1]
    return rows[0] if len(rows) == 1 else ops.concatenate(rows, 0)


# --------------------------------------------------------------------------------------------
# the usual: inv, solve, det, eigh, svd, qr with scipy's signatures
# --------------------------------------------------------------------------------------------

_GENERAL = (None, "general", "gen")
_POS = ("pos", "positive definite")
_SYM = ("sym", "symmetric", "her", "hermitian")
_TRI = {"lower triangular": True, "upper triangular": False}
_DIAG = ("diagonal",)


def _assume(assume_a, name):
    known = _GENERAL + _POS + _SYM + tuple(_TRI) + _DIAG
    if assume_a not in known:
        raise NotImplementedError(f"traced {name}(assume_a={assume_a!r}): supported are "
                                  f"{[k for k in known if k]}")
    return assume_a


def _solve_structured(a, bm, assume_a, lower, transposed=False):
    """a x = b (a^T x = b if transposed) for scipy's ``assume_a``, reading what scipy reads."""
    # a Hermitian ``a`` is its own transpose when real (complex ``transposed`` is refused)
    if assume_a in _POS:
        return cho_solve(cho_factor(a, lower=lower), bm)
    if assume_a in _SYM:
        h = hermitian_input(a, bool(lower))
        if assume_a in ("sym", "symmetric") and a.dtype.kind == "c":   # complex symmetric
            h = ops.add(_lops.tril(a) if lower else _lops.triu(a),
                        _lops.matrix_transpose(_lops.tril(a, -1) if lower else _lops.triu(a, 1)))
        return ops.solve(h, bm)
    if assume_a in _TRI:
        return ops.triangular_solve(a, bm, _TRI[assume_a], transposed)
    if assume_a in _DIAG:
        d = _lops.diag_part(a)
        return ops.div(bm, _lops.along_rows(d, bm.shape))
    return ops.solve(_lops.matrix_transpose(a) if transposed else a, bm)


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    """scipy.linalg.inv. ``assume_a`` (scipy >= 1.17): None/'general', 'pos' (Cholesky, one
    triangle read), 'sym'/'her' (one triangle read), 'lower triangular'/'upper triangular',
    'diagonal'.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.inv(np.array([[2.0, 0.0], [0.0, 4.0]]))
        array([[0.5 , 0.  ],
               [0.  , 0.25]])
    """
    if not traced():
        kw = {} if assume_a is None and not lower else {"assume_a": assume_a, "lower": lower}
        return _sl().inv(a, overwrite_a, check_finite, **kw)
    (a,) = prep(a)
    assert_stacked_square(a)
    if _assume(assume_a, "inv") in _GENERAL:
        return ops.inv(a)
    return _solve_structured(a, _lops.eye_like(a.shape, a.dtype), assume_a, lower)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """scipy.linalg.solve: ``x`` with ``a @ x == b`` (``a.T @ x == b`` if ``transposed``).

    ``assume_a`` as in ``inv`` ('pos', 'sym', 'her' read the ``lower`` triangle, default upper).
    A 1-d ``b`` is one vector; any other ``b`` a stack of (N, K) matrices.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]))
        array([1. , 0.5])
    """
    if not traced():
        return _sl().solve(a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a,
                           transposed)
    a, b = prep(a, b)
    assert_stacked_square(a)
    _assume(assume_a, "solve")
    if transposed and a.dtype.kind == "c":
        raise NotImplementedError("scipy.linalg.solve(transposed=True) of complex matrices")
    a, bm, undo = _rhs(a, b, "solve")
    return undo(_solve_structured(a, bm, assume_a, lower, transposed))


def det(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.det (of the last two axes); the gradient is ``det(a) * inv(a).T``.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> float(fsl.det(np.array([[2.0, 1.0], [1.0, 3.0]])))
        5.0
    """
    if not traced():
        return _sl().det(a, overwrite_a, check_finite)
    return _fla.det(a)


def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None,
         gradient="symmetric"):
    """scipy.linalg.eigh of a Hermitian matrix (the ``lower`` triangle is read): ``(w, v)``,
    eigenvalues ascending, or ``w`` if ``eigvals_only``.

    Traced: the standard problem (``b=None``), with ``subset_by_index``; ``gradient`` as in
    ``functrace.numpy.linalg.eigh`` (symmetric by default). The generalized problem and
    ``subset_by_value`` (a value-dependent shape) are eager only.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.eigh(np.array([[2.0, 1.0], [1.0, 2.0]]), eigvals_only=True)
        array([1., 3.])
    """
    if not traced():
        check_gradient(gradient)
        return _sl().eigh(a, b, lower=lower, eigvals_only=eigvals_only,
                          overwrite_a=overwrite_a, overwrite_b=overwrite_b, type=type,
                          check_finite=check_finite, subset_by_index=subset_by_index,
                          subset_by_value=subset_by_value, driver=driver)
    if b is not None or subset_by_value is not None:
        raise NotImplementedError("traced scipy.linalg.eigh: the generalized problem (b) and "
                                  "subset_by_value are not supported; use b=None")
    w, v = _fla.eigh(a, "L" if lower else "U", gradient=gradient)
    if subset_by_index is not None:
        lo, hi = (int(i) for i in subset_by_index)
        w, v = w[..., lo:hi + 1], v[..., lo:hi + 1]
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """scipy.linalg.svd: ``(U, s, Vh)`` (a plain tuple, as scipy's), or ``s``.

    Traced, ``full_matrices=True`` is supported for square matrices (where it equals the
    reduced SVD); pass ``full_matrices=False`` otherwise. ``lapack_driver`` is eager only.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> fsl.svd(np.array([[3.0, 0.0], [0.0, -2.0]]), compute_uv=False)
        array([3., 2.])
    """
    if not traced():
        return _sl().svd(a, full_matrices, compute_uv, overwrite_a, check_finite,
                         lapack_driver)
    r = _fla.svd(a, full_matrices, compute_uv)
    return tuple(r) if compute_uv else r


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """scipy.linalg.qr: ``(Q, R)`` (mode 'full' or 'economic') or ``(R,)`` (mode 'r').

    Traced: 'economic'; 'r' (``R`` padded with zero rows for a tall matrix, as LAPACK's);
    'full' when M <= N (where it equals 'economic'). 'raw' and ``pivoting`` are eager only.

    Example:
        >>> import numpy as np
        >>> from functrace.scipy import linalg as fsl
        >>> (r,) = fsl.qr(np.array([[3.0], [4.0]]), mode="r")
        >>> r
        array([[-5.],
               [ 0.]])
    """
    if not traced():
        return _sl().qr(a, overwrite_a, lwork, mode, pivoting, check_finite)
    if pivoting or mode not in ("full", "economic", "r"):
        raise NotImplementedError(f"traced scipy.linalg.qr(mode={mode!r}, pivoting={pivoting})"
                                  "; use mode 'economic', 'r' or 'full' (M <= N)")
    (a,) = prep(a)
    assert_stacked_2d(a)
    m, n = a.shape[-2:]
    if mode == "full" and m > n:
        raise NotImplementedError(f"traced scipy.linalg.qr(mode='full') of a tall {m}x{n} "
                                  "matrix: the extra columns of Q are not unique, so they have "
                                  "no derivative; use mode='economic'")
    q, r = ops.qr(a)
    if mode == "r":
        if m > n:
            r = ops.pad(r, np.zeros((), r.dtype), ((0, 0, 0),) * (a.ndim - 2)
                        + ((0, m - n, 0), (0, 0, 0)))
        return (r,)
    return q, r

