"""Products of functrace.numpy: matmul, dot, inner, outer, tensordot, einsum, kron, cross, vdot.

Every contraction lowers to the one ``dot_general`` op. ``einsum`` asks opt_einsum for a
pairwise contraction order and emits one dot_general per pair (plus reduce_sum / diagonal
gathers for indices private to one operand), so it needs no gradient rule of its own.
"""

from __future__ import annotations

import functools
import string
import warnings

import numpy as np

from .. import ops
from ..tracing import current_trace
from ._core import asarray_any, cast, dtype_key, normalize_axis

__all__ = ["matmul", "dot", "inner", "outer", "tensordot", "einsum", "kron", "cross", "vdot",
           "vecdot", "matvec"]


def _promote(*xs):
    xs = [asarray_any(x) for x in xs]
    dt = np.result_type(*[dtype_key(x) for x in xs])
    if dt == np.dtype(bool):
        dt = np.dtype(bool)
    return [cast(x, dt) for x in xs]


def matmul(x1, x2, /):
    """numpy.matmul (``@``): 1-d operands are promoted, leading batch axes broadcast.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.matmul(np.ones((2, 3)), np.ones(3))
        array([3., 3.])
    """
    if current_trace() is None:
        return np.matmul(x1, x2)
    a, b = _promote(x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: Input operand does not have enough dimensions (shapes "
                         f"{a.shape} and {b.shape}; use * to multiply by a scalar)")
    shapes = f"shapes {a.shape} and {b.shape}"
    if b.ndim == 1 and a.shape[-1] == b.shape[0]:
        # (..., k) @ (k,): one contraction, no reshapes (keeps vmap'd graphs copy-free)
        return ops.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())))
    if a.ndim == 1 and b.ndim == 2 and a.shape[0] == b.shape[0]:
        return ops.dot_general(a, b, (((0,), (0,)), ((), ())))
    squeeze_a = a.ndim == 1
    squeeze_b = b.ndim == 1
    if squeeze_a:
        a = ops.reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = ops.reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: {shapes} do not align: Input operand 1 has a mismatch in "
                         f"its core dimension 0 (size {b.shape[-2]} is different from "
                         f"{a.shape[-1]})")
    if b.ndim == 2:
        y = ops.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())))
    elif a.ndim == 2:
        y = ops.dot_general(a, b, (((1,), (b.ndim - 2,)), ((), ())))
        # (n, batch..., m) -> (batch..., n, m)
        nb = b.ndim - 2
        y = ops.transpose(y, tuple(range(1, nb + 1)) + (0, nb + 1))
    else:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = ops.broadcast_to_shape(a, batch + a.shape[-2:])
        b = ops.broadcast_to_shape(b, batch + b.shape[-2:])
        nb = len(batch)
        y = ops.dot_general(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    if squeeze_a and squeeze_b:
        return ops.reshape(y, y.shape[:-2])
    if squeeze_a:
        return ops.reshape(y, y.shape[:-2] + y.shape[-1:])
    if squeeze_b:
        return ops.reshape(y, y.shape[:-1])
    return y


def dot(a, b, out=None):
    """numpy.dot.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.dot(np.ones(3), np.ones(3)))
        3.0
    """
    if current_trace() is None:
        return np.dot(a, b, out)
    x, y = _promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return ops.mul(*_bc(x, y))
    if y.ndim == 1 or (x.ndim == 1 and y.ndim <= 2):
        return matmul(x, y)
    return ops.dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), ((), ())))


def _bc(x, y):
    from ._core import broadcast_all
    return broadcast_all(x, y)[1]


def inner(a, b, /):
    """numpy.inner (contracts the last axes).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.inner(np.ones(3), np.ones(3)))
        3.0
    """
    if current_trace() is None:
        return np.inner(a, b)
    x, y = _promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return ops.mul(*_bc(x, y))
    return ops.dot_general(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())))


def outer(a, b, out=None):
    """numpy.outer.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.outer(np.ones(2), np.ones(3)).shape
        (2, 3)
    """
    if current_trace() is None:
        return np.outer(a, b, out)
    x, y = _promote(a, b)
    x, y = ops.reshape(x, (x.size,)), ops.reshape(y, (y.size,))
    return ops.mul(ops.broadcast_in_dim(x, (x.shape[0], y.shape[0]), (0,)),
                   ops.broadcast_in_dim(y, (x.shape[0], y.shape[0]), (1,)))


def tensordot(a, b, axes=2):
    """numpy.tensordot.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.tensordot(np.ones((2, 3)), np.ones((3, 4)), axes=1).shape
        (2, 4)
    """
    if current_trace() is None:
        return np.tensordot(a, b, axes)
    x, y = _promote(a, b)
    if isinstance(axes, int | np.integer):
        n = int(axes)
        xa = tuple(range(x.ndim - n, x.ndim))
        ya = tuple(range(n))
    else:
        xa, ya = axes
        xa = (xa,) if isinstance(xa, int | np.integer) else tuple(xa)
        ya = (ya,) if isinstance(ya, int | np.integer) else tuple(ya)
        xa = tuple(normalize_axis(i, x.ndim) for i in xa)
        ya = tuple(normalize_axis(i, y.ndim) for i in ya)
    return ops.dot_general(x, y, ((xa, ya), ((), ())))


def vdot(a, b, /):
    """numpy.vdot (conjugates the first argument, flattens both).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.vdot(np.ones(3), np.ones(3)))
        3.0
    """
    if current_trace() is None:
        return np.vdot(a, b)
    x, y = _promote(a, b)
    x = ops.reshape(x, (x.size,))
    y = ops.reshape(y, (y.size,))
    if x.dtype.kind == "c":
        x = ops.conj(x)
    return ops.dot_general(x, y, (((0,), (0,)), ((), ())))


def vecdot(x1, x2, /, *, axis=-1):
    """numpy.vecdot (conjugates x1 for complex input).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.vecdot(np.ones((2, 3)), np.ones(3))
        array([3., 3.])
    """
    if current_trace() is None:
        return np.vecdot(x1, x2, axis=axis)
    x, y = _promote(x1, x2)
    if x.dtype.kind == "c":
        x = ops.conj(x)
    x, y = _bc(x, y)
    from ._reductions import sum as fsum
    return fsum(ops.mul(x, y), axis=axis)


def matvec(x1, x2, /):
    """numpy.matvec.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.matvec(np.ones((2, 3)), np.ones(3))
        array([3., 3.])
    """
    if current_trace() is None:
        return np.matvec(x1, x2)
    from ._shape import expand_dims, squeeze
    return squeeze(matmul(x1, expand_dims(x2, -1)), -1)


def kron(a, b):
    """numpy.kron.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.kron(np.eye(2), np.ones((1, 2))).shape
        (2, 4)
    """
    if current_trace() is None:
        return np.kron(a, b)
    x, y = _promote(a, b)
    nd = max(x.ndim, y.ndim)
    x = ops.reshape(x, (1,) * (nd - x.ndim) + x.shape)
    y = ops.reshape(y, (1,) * (nd - y.ndim) + y.shape)
    inter = []
    for i in range(nd):
        inter += [x.shape[i], y.shape[i]]
    inter = tuple(inter)
    xb = ops.broadcast_in_dim(x, inter, tuple(2 * i for i in range(nd)))
    yb = ops.broadcast_in_dim(y, inter, tuple(2 * i + 1 for i in range(nd)))
    return ops.reshape(ops.mul(xb, yb), tuple(x.shape[i] * y.shape[i] for i in range(nd)))


@functools.cache
def numpy_crosses_2d() -> bool:
    """Whether the installed numpy takes 2-vectors in ``cross`` (deprecated in 2.0, removed
    in 2.5). ``fnp.cross`` follows it, traced or not."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            np.cross(np.ones(2), np.ones(2))
        except ValueError:
            return False
    return True


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy.cross for 3-vectors (and 2-vectors, giving the z component).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.cross(np.array([1.0, 0, 0]), np.array([0.0, 1, 0]))
        array([0., 0., 1.])
    """
    if current_trace() is None:
        return np.cross(a, b, axisa, axisb, axisc, axis)
    from ._joining import stack
    from ._shape import moveaxis
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = _promote(a, b)
    x = moveaxis(x, axisa, -1)
    y = moveaxis(y, axisb, -1)
    if 2 in (x.shape[-1], y.shape[-1]) and not numpy_crosses_2d():
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                         f"are {x.shape[-1]} and {y.shape[-1]} dimensional instead.")

    def comp(v, i):
        return v[..., i] if v.shape[-1] > i else None
    from ._core import broadcast_all
    x0, x1, y0, y1 = comp(x, 0), comp(x, 1), comp(y, 0), comp(y, 1)
    if x.shape[-1] == 2 and y.shape[-1] == 2:
        return ops.sub(*broadcast_all(ops.mul(*_bc(x0, y1)), ops.mul(*_bc(x1, y0)))[1])
    zero = np.zeros((), x.dtype)
    x2 = comp(x, 2) if x.shape[-1] == 3 else zero
    y2 = comp(y, 2) if y.shape[-1] == 3 else zero

    def m(p, q):
        return ops.mul(*_bc(p, q))

    def s(p, q):
        return ops.sub(*_bc(p, q))
    c = stack([s(m(x1, y2), m(x2, y1)), s(m(x2, y0), m(x0, y2)), s(m(x0, y1), m(x1, y0))],
              axis=-1)
    return moveaxis(c, -1, axisc)


# --------------------------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------------------------

def _parse_einsum(subscripts, shapes):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs, out = subscripts, None
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {len(ins)} subscripts for {len(shapes)} operands")
    used = set(subscripts) - set(".,->")
    free_letters = [c for c in string.ascii_letters if c not in used]
    ell_n = max((len(s) - (len(t.replace("...", "")))) and len(s) - len(t.replace("...", ""))
                for t, s in zip(ins, shapes)) if any("..." in t for t in ins) else 0
    ell = "".join(free_letters[:ell_n])
    new_ins = []
    for t, s in zip(ins, shapes):
        if "..." in t:
            k = len(s) - len(t.replace("...", ""))
            t = t.replace("...", ell[ell_n - k:] if k else "")
        if len(t) != len(s):
            raise ValueError(f"einsum: operand with subscripts {t!r} has {len(s)} dimensions")
        new_ins.append(t)
    if out is None:
        counts = {}
        for t in new_ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return new_ins, out


def _broadcast_size_one(xs, ins):
    """numpy's einsum broadcasts an axis of size 1 against the other operands' size for the
    same letter (``"mnd,mdo->mno"`` with m = 1 and m = 5). Such an axis is squeezed out of its
    operand here, which is the same thing (the operand does not vary along that letter), so
    the letter is then private to the other operands and every contraction below sees equal
    sizes; the gradient of the squeezed operand is summed over the letter by the contraction
    itself (the letter is not among its axes). Returns (operands, subscripts)."""
    size: dict = {}
    for x, sub in zip(xs, ins):
        seen: dict = {}
        for c, n in zip(sub, x.shape):
            if seen.setdefault(c, n) != n:
                raise ValueError(f"einsum: dimensions in single operand for collapsing index "
                                 f"{c!r} don't match ({seen[c]} != {n})")
            if n != 1:
                if size.setdefault(c, n) != n:
                    raise ValueError(
                        f"einsum: operands could not be broadcast together: subscript {c!r} "
                        f"has size {size[c]} in one operand and {n} in another "
                        f"(shapes {', '.join(str(tuple(a.shape)) for a in xs)})")
    out_xs, out_ins = [], []
    for x, sub in zip(xs, ins):
        keep = [k for k, (c, n) in enumerate(zip(sub, x.shape)) if n != 1 or size.get(c, 1) == 1]
        if len(keep) != len(sub):
            x = ops.reshape(x, tuple(x.shape[k] for k in keep))
            sub = "".join(sub[k] for k in keep)
        out_xs.append(x)
        out_ins.append(sub)
    return out_xs, out_ins


def _diag_reduce(x, subs, needed):
    """Take diagonals of repeated letters and sum letters not ``needed``."""
    while len(set(subs)) != len(subs):
        for c in subs:
            pos = [i for i, d in enumerate(subs) if d == c]
            if len(pos) > 1:
                break
        i, j = pos[0], pos[1]
        from ._shape import diagonal
        x = diagonal(x, 0, i, j)
        subs = "".join(d for k, d in enumerate(subs) if k not in (i, j)) + c
    drop = tuple(k for k, d in enumerate(subs) if d not in needed)
    if drop:
        x = ops.reduce_sum(x, drop)
        subs = "".join(d for k, d in enumerate(subs) if k not in drop)
    return x, subs


def einsum(subscripts, *operands, optimize=False, dtype=None, out=None, **kwargs):
    """numpy.einsum, lowered to pairwise dot_general contractions in opt_einsum's order.

    Outside a transform this is numpy's einsum with numpy's defaults (``optimize=False``), so
    eager results are numpy's bit for bit; traced, the contraction order is opt_einsum's
    (``"greedy"`` unless ``optimize`` names another strategy). As in numpy, an axis of size
    1 broadcasts against the other operands' size for the same letter
    (``einsum("mnd,mdo->mno", a, b)`` with ``a.shape[0] == 1``); the gradient of such an
    operand is summed over that letter.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 4))).shape
        (2, 4)
    """
    if current_trace() is None:
        return np.einsum(subscripts, *operands, optimize=optimize, dtype=dtype, out=out,
                         **kwargs)
    if out is not None:
        raise TypeError("out= is not supported on traced arrays")
    xs = _promote(*operands)
    if dtype is not None:
        xs = [cast(x, dtype) for x in xs]
    ins, outs = _parse_einsum(subscripts, [x.shape for x in xs])
    xs, ins = _broadcast_size_one(xs, ins)
    import opt_einsum
    if len(xs) > 1:
        path, _ = opt_einsum.contract_path(",".join(ins) + "->" + outs,
                                           *[x.shape for x in xs], shapes=True,
                                           optimize="greedy" if optimize in (True, False, None)
                                           else optimize)
    else:
        path = [(0,)]
    ops_list = list(zip(xs, ins))
    for step in path:
        picked = [ops_list[i] for i in step]
        for i in sorted(step, reverse=True):
            del ops_list[i]
        rest_letters = set(outs) | {c for _, s in ops_list for c in s}
        if len(picked) == 1:
            x, s = _diag_reduce(*picked[0], rest_letters)
            ops_list.append((x, s))
            continue
        (x, sx), (y, sy) = picked
        x, sx = _diag_reduce(x, sx, rest_letters | set(sy))
        y, sy = _diag_reduce(y, sy, rest_letters | set(sx))
        batch = [c for c in sx if c in sy and c in rest_letters]
        contract = [c for c in sx if c in sy and c not in rest_letters]
        dn = ((tuple(sx.index(c) for c in contract), tuple(sy.index(c) for c in contract)),
              (tuple(sx.index(c) for c in batch), tuple(sy.index(c) for c in batch)))
        z = ops.dot_general(x, y, dn)
        sz = "".join(batch) + "".join(c for c in sx if c not in sy) + \
            "".join(c for c in sy if c not in sx)
        ops_list.append((z, sz))
    (z, sz), = ops_list
    z, sz = _diag_reduce(z, sz, set(outs))
    return ops.transpose(z, tuple(sz.index(c) for c in outs))
