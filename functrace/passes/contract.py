"""Contractions as reductions: ``dot_general`` rewritten as a broadcast multiply and a sum.

Owns ``contractions_as_reductions(graph, layout) -> Graph``. A backend calls it before fusion
for the contractions its matrix library runs badly, so that they become ordinary groups of
the fusion plan -- ``mul`` over a loop nest, closed by ``reduce_sum`` -- and run as
generated reduction kernels. On the CPU that is the tiny product (``cpu_driver``: a BLAS
call's overhead dwarfs a 16 x 16 matrix-vector product, which as a loop fuses with the code
around it); on a GPU the skinny product (``numba_cuda``): ``(4096, 2048) @ (2048, 10)``
moves 33 MB, a few microseconds of bandwidth, yet a general matrix library tiles it for a
large output and leaves most of the device idle.

The rewrite, for ``out = dot_general(x, y)`` with contracting axes ``c``, batch axes ``b`` and
free axes ``fx``, ``fy`` (output axes: ``b, fx, fy``)::

    nest = (c, b, fx, fy)            # layout "outer": contracting axes first
    nest = (b, fx, fy, c)            # layout "inner": contracting axes last
    x' = broadcast_in_dim(transpose(x, x's axes in nest order), nest)
    y' = broadcast_in_dim(transpose(y, y's axes in nest order), nest)
    out = reduce_sum(mul(x', y'), axes=the contracting positions)

The transposes and broadcasts are views the fusion plan folds into the reads' index maps, so
nothing of the nest's size is ever stored. Without contracting axes (an outer product) the
multiply is the result. The result is the contraction's own Var, so the
graph's outputs and every reader are unchanged. "outer" keeps the innermost axes for the
output (a reduction kernel gives adjacent threads adjacent outputs); "inner" reduces the
innermost axis (a block of threads per output, reading a row). Which one a contraction gets
is the caller's choice (``layout(eqn)`` returns "outer", "inner" or None to keep it).

Imports core and ops only; never changes what the graph computes, only how it is written
(the sum's order of addition is the reduction kernel's, not the matrix library's).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import AVal, Eqn, Graph, Var
from ..ops.dot import dot_general_p
from ..ops.elementwise import mul_p
from ..ops.reduce import reduce_sum_p
from ..ops.shape import broadcast_in_dim_p, transpose_p

__all__ = ["contractions_as_reductions", "contraction_sizes"]

LAYOUTS = ("outer", "inner")


def contraction_sizes(e: Eqn) -> tuple[int, int, int, int]:
    """(batch, x free, y free, contracting) element counts of a ``dot_general`` equation."""
    (xc, yc), (xb, _) = e.params["dimension_numbers"]
    xs, ys = e.inputs[0].aval.shape, e.inputs[1].aval.shape
    used_x, used_y = set(xc) | set(xb), set(yc) | set(e.params["dimension_numbers"][1][1])

    def prod(v):
        n = 1
        for s in v:
            n *= int(s)
        return n

    return (prod(xs[d] for d in xb), prod(s for d, s in enumerate(xs) if d not in used_x),
            prod(s for d, s in enumerate(ys) if d not in used_y), prod(xs[d] for d in xc))


def _operand(x, axes: tuple, positions: tuple, nest: tuple, source, eqns: list):
    """``x`` with its axes ``axes`` (in nest order) broadcast to ``nest`` at ``positions``."""
    if axes != tuple(range(len(axes))):
        t = Var(AVal(tuple(x.aval.shape[a] for a in axes), x.aval.dtype))
        eqns.append(Eqn(transpose_p, (x,), {"permutation": axes}, (t,), source))
        x = t
    if tuple(x.aval.shape) == nest and positions == tuple(range(len(nest))):
        return x
    b = Var(AVal(nest, x.aval.dtype))
    eqns.append(Eqn(broadcast_in_dim_p, (x,), {"shape": nest,
                                               "broadcast_dimensions": positions}, (b,), source))
    return b


def _rewrite(e: Eqn, layout: str) -> list[Eqn]:
    x, y = e.inputs
    (xc, yc), (xb, yb) = e.params["dimension_numbers"]
    xf = tuple(d for d in range(x.aval.ndim) if d not in set(xc) | set(xb))
    yf = tuple(d for d in range(y.aval.ndim) if d not in set(yc) | set(yb))
    nc, nb, nx, ny = len(xc), len(xb), len(xf), len(yf)
    cs = tuple(x.aval.shape[d] for d in xc)
    rest = tuple(e.outputs[0].aval.shape)             # batch, x free, y free
    if layout == "outer":
        nest, c_pos, r0 = cs + rest, tuple(range(nc)), nc
    else:
        nest, c_pos, r0 = rest + cs, tuple(range(len(rest), len(rest) + nc)), 0
    b_pos = tuple(range(r0, r0 + nb))
    xf_pos = tuple(range(r0 + nb, r0 + nb + nx))
    yf_pos = tuple(range(r0 + nb + nx, r0 + nb + nx + ny))
    eqns: list[Eqn] = []
    # each operand's axes sorted by their nest position (broadcast dimensions must increase)
    xa = sorted(zip(c_pos + b_pos + xf_pos, xc + xb + xf))
    ya = sorted(zip(c_pos + b_pos + yf_pos, yc + yb + yf))
    xn = _operand(x, tuple(a for _, a in xa), tuple(p for p, _ in xa), nest, e.source, eqns)
    yn = _operand(y, tuple(a for _, a in ya), tuple(p for p, _ in ya), nest, e.source, eqns)
    if not nc:              # an outer product: nothing to sum
        eqns.append(Eqn(mul_p, (xn, yn), {}, e.outputs, e.source))
        return eqns
    prod = Var(AVal(nest, e.outputs[0].aval.dtype))
    eqns.append(Eqn(mul_p, (xn, yn), {}, (prod,), e.source))
    eqns.append(Eqn(reduce_sum_p, (prod,), {"axes": c_pos}, e.outputs, e.source))
    return eqns


def contractions_as_reductions(graph: Graph, layout: Callable[[Eqn], str | None]) -> Graph:
    """``graph`` with every ``dot_general`` equation ``e`` for which ``layout(e)`` is
    "outer" or "inner" written as ``reduce_sum(mul(...))`` (module docstring). Returns
    ``graph`` itself when nothing is rewritten.

    >>> import numpy as np, functrace as ft, functrace.numpy as fnp
    >>> g = ft.trace(lambda a, b: a @ b)(np.ones((6, 4)), np.ones((4, 2))).graph
    >>> h = contractions_as_reductions(g, lambda e: "outer")
    >>> [e.op.name for e in h.eqns]
    ['transpose', 'broadcast_in_dim', 'broadcast_in_dim', 'mul', 'reduce_sum']
    """
    out, changed = [], False
    for e in graph.eqns:
        lay = layout(e) if e.op is dot_general_p else None
        if lay is None:
            out.append(e)
            continue
        if lay not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {lay!r}")
        out.extend(_rewrite(e, lay))
        changed = True
    return Graph(graph.inputs, out, graph.outputs) if changed else graph
