"""Contractions: the single ``dot_general`` primitive behind matmul, dot, tensordot and einsum.

Owns ``dot_general_p`` (batch dims, contracting dims; output = batch, lhs free, rhs free) and its
bilinear rules. The impl transposes to (batch, free, contract), reshapes to 3-d and calls
``np.matmul`` so BLAS does the work. Imports core/tracing and sibling op families only.
"""

from __future__ import annotations

import math

import numpy as np

from .. import caches
from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind, cotangent_wanted
from . import elementwise as ew
from ._base import shape_of
from .shape import moveaxis, transpose


def _free(ndim, contract, batch):
    used = set(contract) | set(batch)
    return tuple(d for d in range(ndim) if d not in used)


def _dg_abstract(x, y, *, dimension_numbers):
    (xc, yc), (xb, yb) = dimension_numbers
    if len(xc) != len(yc) or len(xb) != len(yb):
        raise ShapeError(f"dot_general dimension numbers {dimension_numbers} are unpaired")
    for a, b in zip(xc + xb, yc + yb):
        if not (0 <= a < x.ndim and 0 <= b < y.ndim) or x.shape[a] != y.shape[b]:
            raise ShapeError(f"cannot contract {x.shape} with {y.shape} over "
                             f"{dimension_numbers}")
    if x.dtype != y.dtype:
        raise TypeError(f"operand dtypes differ ({x.dtype}, {y.dtype})")
    xf = _free(x.ndim, xc, xb)
    yf = _free(y.ndim, yc, yb)
    shape = ([x.shape[d] for d in xb] + [x.shape[d] for d in xf] + [y.shape[d] for d in yf])
    return AVal(shape, x.dtype)


@caches.lru_cached("ops.dot_general_layouts", maxsize=1024)
def _dg_layout(dimension_numbers, nx, ny):
    """Transposes that bring the operands to (batch, free, contract) / (batch, contract,
    free), computed once per (dimension numbers, ranks)."""
    (xc, yc), (xb, yb) = dimension_numbers
    xf = _free(nx, xc, xb)
    yf = _free(ny, yc, yb)
    pa, pb = xb + xf + xc, yb + yc + yf
    return (pa if pa != tuple(range(nx)) else None, pb if pb != tuple(range(ny)) else None,
            xb, xf, xc, yf)


@caches.lru_cached("ops.dot_plain", maxsize=1024)
def _dg_plain(dimension_numbers, nx, ny):
    """Which plain ``np.dot`` computes these dimension numbers for these ranks (its result
    axes are already in dot_general's order), or None: 0 = dot(x, y), 1 = dot(x, y.T),
    2 = dot(x.T, y)."""
    (xc, yc), (xb, yb) = dimension_numbers
    if xb or yb or len(xc) != 1 or nx == 0 or ny == 0 or ny > 2:
        return None
    if xc == (nx - 1,) and yc == (0,):
        return 0
    if xc == (nx - 1,) and ny == 2 and yc == (1,):
        return 1
    if nx == 2 and xc == (0,) and yc == (0,):
        return 2
    return None


def _dg_impl(x, y, *, dimension_numbers):
    plain = _dg_plain(dimension_numbers, x.ndim, y.ndim)
    if plain is not None and type(x) is np.ndarray and type(y) is np.ndarray:
        # small products: np.dot without the general path's reshapes (BLAS reads the
        # transposed operand through flags, no copy)
        return np.dot(x, y) if plain == 0 else np.dot(x, y.T) if plain == 1 else \
            np.dot(x.T, y)
    pa, pb, xb, xf, xc, yf = _dg_layout(dimension_numbers, x.ndim, y.ndim)
    xs, ys = x.shape, y.shape
    bshape = [xs[d] for d in xb]
    xfs = [xs[d] for d in xf]
    yfs = [ys[d] for d in yf]
    B, M, N = math.prod(bshape), math.prod(xfs), math.prod(yfs)
    K = math.prod([xs[d] for d in xc])
    a = (x if pa is None else x.transpose(pa)).reshape(B, M, K)
    b = (y if pb is None else y.transpose(pb)).reshape(B, K, N)
    if K == 1:   # an outer product: a broadcast multiply beats matmul's K=1 path by ~2x
        return np.multiply(a, b).reshape(bshape + xfs + yfs)
    if B == 1:   # 2-d BLAS call: transposed operands are passed as flags, not copied
        return np.dot(a[0], b[0]).reshape(bshape + xfs + yfs)
    return np.matmul(a, b).reshape(bshape + xfs + yfs)


dot_general_p = Op("dot_general", _dg_abstract, _dg_impl, fresh=True, c_result=True)


def dot_general(x, y, dimension_numbers):
    """Contract ``x`` and ``y``: ``dimension_numbers = ((x_contract, y_contract),
    (x_batch, y_batch))``; result axes are batch, then x's free, then y's free axes."""
    (xc, yc), (xb, yb) = dimension_numbers
    dn = ((tuple(map(int, xc)), tuple(map(int, yc))), (tuple(map(int, xb)), tuple(map(int, yb))))
    return bind(dot_general_p, x, y, dimension_numbers=dn)


def _dg_vjp(cts, ins, outs, *, dimension_numbers):
    ct = cts[0]
    x, y = ins
    (xc, yc), (xb, yb) = dimension_numbers
    nx, ny = len(shape_of(x)), len(shape_of(y))
    xf, yf = _free(nx, xc, xb), _free(ny, yc, yb)
    B, Fx, Fy = len(xb), len(xf), len(yf)
    cb = tuple(range(B))
    ct_xf = tuple(range(B, B + Fx))
    ct_yf = tuple(range(B + Fx, B + Fx + Fy))
    gx = gy = None
    if cotangent_wanted(0):
        gx = _dg_ct_x(ct, y, xc, yc, xb, yb, xf, yf, B, Fx, cb, ct_yf, nx)
    if cotangent_wanted(1):
        gy = _dg_ct_y(ct, x, xc, yc, xb, yb, xf, yf, B, cb, ct_xf, ny)
    return gx, gy


def _dg_ct_x(ct, y, xc, yc, xb, yb, xf, yf, B, Fx, cb, ct_yf, nx):
    # ct_x: contract ct's y-free axes with y's free axes -> (batch, x free, y contract sorted)
    gx = dot_general(ct, y, ((ct_yf, yf), (cb, yb)))
    pos = {}
    for i, d in enumerate(xb):
        pos[d] = i
    for j, d in enumerate(xf):
        pos[d] = B + j
    ycs = sorted(yc)
    for k, d in enumerate(xc):
        pos[d] = B + Fx + ycs.index(yc[k])
    return transpose(gx, tuple(pos[d] for d in range(nx)))


def _dg_ct_y(ct, x, xc, yc, xb, yb, xf, yf, B, cb, ct_xf, ny):
    # ct_y with x first: (batch, x contract sorted, y free) is y's own layout in the common
    # matmul case, so no transpose is needed there
    gy = dot_general(x, ct, ((xf, ct_xf), (xb, cb)))
    pos = {}
    for i, d in enumerate(yb):
        pos[d] = i
    xcs = sorted(xc)
    for k, d in enumerate(yc):
        pos[d] = B + xcs.index(xc[k])
    for j, d in enumerate(yf):
        pos[d] = B + len(xc) + j
    return transpose(gy, tuple(pos[d] for d in range(ny)))


def _dg_jvp(primals, tangents, outs, *, dimension_numbers):
    x, y = primals
    tx, ty = tangents
    terms = []
    if tx is not None:
        terms.append(dot_general(tx, y, dimension_numbers))
    if ty is not None:
        terms.append(dot_general(x, ty, dimension_numbers))
    if not terms:
        return (None,)
    return (terms[0] if len(terms) == 1 else ew.add(*terms),)


dot_general_p.vjp, dot_general_p.jvp = _dg_vjp, _dg_jvp


def matmul2d(x, y):
    """``x @ y`` for 2-d operands."""
    return dot_general(x, y, (((1,), (0,)), ((), ())))


# --------------------------------------------------------------------------------------------
# batch rule
# --------------------------------------------------------------------------------------------

def _dot_rule(args, dims, *, dimension_numbers):
    (x, y), (dx, dy) = args, dims
    (xc, yc), (xb, yb) = dimension_numbers
    if dx is not None and dy is not None:
        x, y = moveaxis(x, dx, 0), moveaxis(y, dy, 0)
        dn = ((tuple(c + 1 for c in xc), tuple(c + 1 for c in yc)),
              ((0,) + tuple(b + 1 for b in xb), (0,) + tuple(b + 1 for b in yb)))
        return (dot_general(x, y, dn),), (0,)
    if dx is not None:
        x = moveaxis(x, dx, 0)
        dn = ((tuple(c + 1 for c in xc), yc), (tuple(b + 1 for b in xb), yb))
        return (dot_general(x, y, dn),), (len(xb),)
    # only y is batched: contract with y first so the batch axis comes right after the batch
    # dims, then restore (batch, B, x free, y free) order; the transpose is the identity in the
    # common matrix-vector case, so no copy is made
    y = moveaxis(y, dy, 0)
    dn = ((tuple(c + 1 for c in yc), xc), (tuple(b + 1 for b in yb), xb))
    z = dot_general(y, x, dn)      # (batch, B, y free rest, x free)
    nb = len(xb)
    ny_rest = len(shape_of(y)) - 1 - len(yc) - len(yb)
    nx_free = len(shape_of(x)) - len(xc) - len(xb)
    perm = (tuple(range(nb + 1)) + tuple(range(nb + 1 + ny_rest, nb + 1 + ny_rest + nx_free))
            + tuple(range(nb + 1, nb + 1 + ny_rest)))
    return (transpose(z, perm),), (nb,)


dot_general_p.batch = _dot_rule
