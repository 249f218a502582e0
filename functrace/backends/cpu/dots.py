"""Contractions on the CPU: which become fused loops (``small_dots_as_loops``), and the
matmul layout of the others, which run on BLAS (``dot_dims``, ``operand_expr``,
``dot_expr``). Text only. Imports passes only."""

from __future__ import annotations

import numpy as np

from ...core import Graph
from ...passes.contract import contraction_sizes, contractions_as_reductions

__all__ = ["SMALL_DOT", "small_dots_as_loops", "dot_dims", "operand_expr", "dot_expr"]


#: contractions with at most this many multiply-adds become fused loops, not BLAS calls
SMALL_DOT = 4096


def small_dots_as_loops(g: Graph) -> Graph:
    """Rewrite tiny ``dot_general``s (no batch axes, at most ``SMALL_DOT`` multiply-adds, float)
    as ``reduce_sum(mul(broadcast x, broadcast y))`` over a loop shape *contracting axes
    first*, then the free axes of x and y (``passes.contract``, layout "outer"). numpy's
    matmul costs ~1 us of overhead even for a 16x16 matrix-vector product; as a loop the
    product fuses with its neighbours (the accumulation of an outer product, the elementwise
    code around a matrix-vector product), and the reduction takes the vectorised
    accumulate-into-output path. Larger contractions stay BLAS calls."""
    return contractions_as_reductions(g, _small_dot_layout)


def _small_dot_layout(e) -> str | None:
    (_, _), (xb, yb) = e.params["dimension_numbers"]
    out = e.outputs[0].aval
    if xb or yb or out.dtype.kind != "f" or not out.shape:
        return None
    _, m, n, k = contraction_sizes(e)
    return "outer" if 0 < m * n * k <= SMALL_DOT else None


def dot_dims(e):
    """Plan-time layout of a dot_general as one (batched) matmul: the operand permutations,
    the 3-d (or 2-d when there is no batch) operand shapes, and the result's matmul shape."""
    (xc, yc), (xb, yb) = e.params["dimension_numbers"]
    x, y = e.inputs[0].aval, e.inputs[1].aval
    xf = tuple(d for d in range(x.ndim) if d not in xc and d not in xb)
    yf = tuple(d for d in range(y.ndim) if d not in yc and d not in yb)

    def size(shape, dims):
        return int(np.prod([shape[d] for d in dims], dtype=np.int64))
    B, M = size(x.shape, xb), size(x.shape, xf)
    N, K = size(y.shape, yf), size(x.shape, xc)
    lead = (B,) if xb else ()
    pa, pb = tuple(xb) + xf + tuple(xc), tuple(yb) + tuple(yc) + yf
    if not xb and (bool(xf) != bool(yf)):
        # matrix-vector: keep the vector 1-d (no reshape, numpy picks gemv)
        if not yf:
            return ((pa, (M, K)), (pb, (K,))), (M,)
        return ((pa, (K,)), (pb, (K, N))), (N,)
    return ((pa, lead + (M, K)), (pb, lead + (K, N))), lead + (M, N)


def operand_expr(expr, aval, perm, shape):
    if perm != tuple(range(aval.ndim)):
        expr = f"{expr}.transpose({perm!r})"
    if tuple(aval.shape[d] for d in perm) != tuple(shape):
        expr = f"{expr}.reshape({tuple(shape)!r})"
    return expr


def dot_expr(e, ops_, out) -> str:
    """``np.matmul`` source for a dot_general whose operands ``ops_`` are already laid out
    by ``operand_expr`` (BLAS; transposes are views), writing into ``out`` when given."""
    ((_, sa), (_, sb)), mn = dot_dims(e)
    a, b = ops_
    # K == 1 (an outer product, e.g. per-example weight gradients): a broadcast multiply is
    # about twice as fast as matmul's K=1 path
    fn = "np.multiply" if len(sa) == len(sb) and sa[-1] == 1 else "np.matmul"
    if out is not None:
        return f"{fn}({a}, {b}, out={out})"
    expr = f"{fn}({a}, {b})"
    if tuple(mn) != e.outputs[0].aval.shape:
        expr = f"{expr}.reshape({e.outputs[0].aval.shape!r})"
    return expr
