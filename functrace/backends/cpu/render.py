"""The numba CPU loop template: a ``KernelSpec`` -> the Python source of one ``@numba.njit``
loop nest (``render_cpu``). Elementwise groups are one loop nest; a reduction accumulates
straight into its output when the innermost loop axis is kept, and otherwise runs the inner
axis in chunks of ``CHUNK`` (a vectorised buffer fill, a pairwise halving sum, Neumaier
compensation across chunks; logsumexp in two passes). Text only: never imports numba.
Imports ``lowering.spec``."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..lowering.spec import (
    CHUNK,
    NATIVE_DTYPES,
    KernelSpec,
    Reduction,
    Unsupported,
    combine,
    const_expr,
    dtype_ctor,
    index_list,
    operand_read,
    read_depth,
)

__all__ = ["render_cpu"]


def _combine(kind: str, a: str, b: str, dt: np.dtype) -> str:
    """``a (op) b`` for a reduction kind, with numpy's NaN propagation for max/min."""
    return combine(kind, a, b, dt, _extremum)


def _extremum(kind: str, a: str, b: str, dt: np.dtype) -> str:
    # numba's np.maximum: numpy's NaN rule, vectorises
    return f"np.maximum({a}, {b})" if kind in ("max", "logsumexp") else f"np.minimum({a}, {b})"


def _acc_dtype(red: Reduction) -> np.dtype:
    if red.kind in ("and", "or"):
        return np.dtype(bool)
    dt = red.in_dtype
    if dt.kind == "f":
        return np.dtype("float64") if red.kind in ("sum", "prod", "logsumexp") else dt
    if dt.kind in "iu":
        return np.dtype("uint64") if dt.kind == "u" and red.kind in ("sum", "prod") else (
            np.dtype("int64") if red.kind in ("sum", "prod") else dt)
    if dt.kind == "b":
        return dt
    raise Unsupported(f"reduction over {dt}")


def _identity(red: Reduction, dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if red.kind == "sum":
        return const_expr(0, dt)
    if red.kind == "prod":
        return const_expr(1, dt)
    if red.kind == "and":
        return "True"
    if red.kind == "or":
        return "False"
    if red.kind in ("max", "logsumexp"):
        if dt.kind == "f":
            return const_expr(-np.inf, dt)
        return const_expr(np.iinfo(dt).min if dt.kind in "iu" else False, dt)
    if red.kind == "min":
        if dt.kind == "f":
            return const_expr(np.inf, dt)
        return const_expr(np.iinfo(dt).max if dt.kind in "iu" else True, dt)
    raise Unsupported(red.kind)


def _as_input(red: Reduction, v: str) -> str:
    """The body value as the reduction consumes it (and/or of non-bool data test != 0)."""
    if red.kind in ("and", "or") and red.in_dtype.kind != "b":
        return f"({v} != 0)"
    return v


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.prange = False

    def loop(self, depth: int, d: int):
        rng = "numba.prange" if self.prange and d == 0 else "range"
        self(depth, f"for i{d} in {rng}(n{d}):")

    def __call__(self, depth: int, text: str):
        self.lines.append("    " * depth + text)


def render_cpu(spec: KernelSpec, fn_name: str = "kernel", decorator: str = "",
               parallel: bool = False) -> str:
    """The Python source of a numba CPU kernel for ``spec``.

    Signature: ``fn(n0, .., n{k-1}, a0, .., o0, .., [r])`` with the loop extents, the operands
    reshaped as the binding says, the elementwise outputs and the reduction output. With
    ``parallel`` the outermost loop is a ``numba.prange`` when it is not reduced (iterations
    then write disjoint outputs).
    """
    nd = spec.ndim
    red = spec.reduction
    args = [f"n{d}" for d in range(nd)] + [f"a{k}" for k in range(len(spec.operands))]
    args += [f"o{k}" for k in range(len(spec.outputs))]
    if red is not None:
        args.append("r")
    w = _Writer()
    w.prange = parallel and nd > 0 and (red is None or 0 not in red.axes) and not (
        red is not None and nd == 1)
    for h in spec.helpers:
        w(0, h + "\n\n")
    if decorator:
        w(0, decorator)
    w(0, f"def {fn_name}({', '.join(args)}):")
    base = 1
    reads = {}
    # the chunked reduction's inner index is unsigned (see _render_chunked_reduction)
    unsigned = frozenset({nd - 1}) if red is not None and (nd - 1) in red.axes else frozenset()
    for k, o in enumerate(spec.operands):
        reads[f"x{k}"] = (read_depth(o), operand_read(k, o, unsigned))
    by_depth: dict[int, list[str]] = {}
    for d, line in reads.values():
        by_depth.setdefault(d, []).append(line)
    for name, expr, _dt, d in spec.body:
        by_depth.setdefault(d, []).append(f"{name} = {expr}")
    # reads are listed before body lines of the same depth: body lines only use reads/temps of
    # lower or equal depth, and body lines are already in dependency order
    if red is None:
        _render_loops(w, spec, by_depth, base, nd, inner=None)
    elif (nd - 1) not in red.axes:
        _render_direct_reduction(w, spec, by_depth, base)
    else:
        _render_chunked_reduction(w, spec, by_depth, base)
    w(base, "return 0")
    return "\n".join(w.lines) + "\n"


def _emit_level(w, by_depth, depth, indent):
    for line in by_depth.get(depth, []):
        w(indent, line)


def _render_loops(w, spec, by_depth, base, nd, inner):
    """Plain loop nest: values at their depth, outputs stored innermost."""
    _emit_level(w, by_depth, 0, base)
    for d in range(nd):
        w.loop(base + d, d)
        _emit_level(w, by_depth, d + 1, base + d + 1)
    ind = base + nd
    full = index_list(range(nd)) if nd else "0"
    for k, (name, _dt) in enumerate(spec.outputs):
        w(ind, f"o{k}[{full}] = {name}")
    if inner is not None:
        inner(ind)


def _red_outindex_list(spec) -> str:
    keep = [d for d in range(spec.ndim) if d not in spec.reduction.axes]
    return index_list(keep)


def _render_init(w, spec, base, ident):
    """Fill the reduction output with the identity (when it accumulates over loops)."""
    keep = [d for d in range(spec.ndim) if d not in spec.reduction.axes]
    if not keep:
        w(base, f"r[0] = {ident}")
        return
    for j, d in enumerate(keep):
        w(base + j, f"for i{d} in range(n{d}):")
    w(base + len(keep), f"r[{index_list(keep)}] = {ident}")


def _render_direct_reduction(w, spec, by_depth, base):
    """Innermost loop axis not reduced: accumulate each element into r (vectorises)."""
    red = spec.reduction
    odt = red.dtype
    _render_init(w, spec, base, _identity(red, odt))
    ridx = _red_outindex_list(spec)

    def inner(ind):
        v = _as_input(red, red.value)
        expr = _combine(red.kind, f"r[{ridx}]", v, odt)
        if odt not in NATIVE_DTYPES:
            expr = f"{dtype_ctor(odt)}({expr})"
        w(ind, f"r[{ridx}] = {expr}")
    _render_loops(w, spec, by_depth, base, spec.ndim, inner)


def _render_chunked_reduction(w, spec, by_depth, base):
    """Innermost loop axis reduced: the inner axis runs in chunks of up to CHUNK elements.
    The body writes each chunk into a buffer (a long loop with no carried dependency, so LLVM
    vectorises it), the buffer is reduced by halving (``buf[l] op= buf[l + h]``, also
    vectorised: pairwise summation, as accurate as numpy's), and chunk results are combined
    (Neumaier-compensated for float sums)."""
    red = spec.reduction
    nd = spec.ndim
    inner = nd - 1
    adt = _acc_dtype(red)
    ctor = dtype_ctor(adt)
    outer_reduced = any(d in red.axes for d in range(inner))
    if outer_reduced:
        _render_init(w, spec, base, _identity(red, red.dtype))
    if not w.prange:
        w(base, f"buf = av.scratch({CHUNK}, {ctor})")
    _emit_level(w, by_depth, 0, base)
    for d in range(inner):
        w.loop(base + d, d)
        _emit_level(w, by_depth, d + 1, base + d + 1)
    ind = base + inner
    if w.prange:   # one buffer per outer iteration: iterations run on different threads
        w(ind, f"buf = av.scratch({CHUNK}, {ctor})")
    ridx = _red_outindex_list(spec)
    full = index_list(range(nd))
    v = _as_input(red, red.value)
    vin = f"{ctor}({v})" if adt != red.in_dtype or v != red.value else v
    passes = ["max", "sumexp"] if red.kind == "logsumexp" else [red.kind]
    n = f"n{inner}"
    for pname in passes:
        kind = "sum" if pname == "sumexp" else pname
        pident = _identity(dataclasses.replace(red, kind=kind), adt)
        comp = kind == "sum" and adt.kind == "f"
        w(ind, f"acc = {pident}")
        if comp:
            w(ind, f"cmp = {const_expr(0, adt)}")
        w(ind, f"for c in range(0, {n}, {CHUNK}):")
        w(ind + 1, f"m = min({CHUNK}, {n} - c)")
        w(ind + 1, "for l in range(m):")
        # unsigned: numba then skips negative-index wraparound, which blocks vectorisation
        w(ind + 2, f"i{inner} = np.uint64(c + l)")
        _emit_level(w, by_depth, nd, ind + 2)
        if red.kind != "logsumexp" or pname == "sumexp":
            for k, (name, _dt) in enumerate(spec.outputs):
                w(ind + 2, f"o{k}[{full}] = {name}")
        val = f"vm.vexp({ctor}({v}) - shift)" if pname == "sumexp" else vin
        w(ind + 2, f"buf[l] = {val}")
        # pairwise: fold the upper half onto the lower half until one element is left
        w(ind + 1, "h = m")
        w(ind + 1, "while h > 1:")
        w(ind + 2, "k = (h + 1) // 2")
        w(ind + 2, "for l in range(h - k):")
        w(ind + 3, f"buf[l] = {_combine(kind, 'buf[l]', 'buf[l + k]', adt)}")
        w(ind + 2, "h = k")
        if comp:   # Neumaier across chunks; skipped once the sum is inf/NaN
            w(ind + 1, "s = buf[0]")
            w(ind + 1, "t = acc + s")
            w(ind + 1, "if t - t == 0:")
            w(ind + 2, "cmp += ((acc - t) + s) if abs(acc) >= abs(s) else ((s - t) + acc)")
            w(ind + 1, "acc = t")
        else:
            w(ind + 1, f"acc = {_combine(kind, 'acc', 'buf[0]', adt)}")
        if comp:
            w(ind, "acc = acc + cmp if acc - acc == 0 else acc")
        if pname == "max" and red.kind == "logsumexp":
            # like the numpy impl: a non-finite maximum shifts by 0
            w(ind, f"shift = acc if acc - acc == 0 else {const_expr(0, adt)}")
    res = "vm.vlog(acc) + shift" if red.kind == "logsumexp" else "acc"
    odt = red.dtype
    if outer_reduced:
        res = _combine(red.kind, f"r[{ridx}]", f"{dtype_ctor(odt)}({res})", odt)
    w(ind, f"r[{ridx}] = {dtype_ctor(odt)}({res})")
