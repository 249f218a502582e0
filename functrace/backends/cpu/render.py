"""The numba CPU loop template: a ``KernelSpec`` -> the Python source of one ``@numba.njit``
loop nest (``render_cpu``). Elementwise groups are one loop nest; a reduction accumulates
straight into its output when the innermost loop axis is kept, and otherwise runs the inner
axis in chunks of ``CHUNK`` (a vectorised buffer fill, a pairwise halving sum, Neumaier
compensation across chunks; logsumexp in two passes). A reduction over the outermost axis
runs in blocks of it fixed by the extents (``reduction_blocks``), the same in the serial and
the parallel (``prange``) kernel, so results never depend on the thread count. Text only:
never imports numba. Imports ``lowering.spec``."""

from __future__ import annotations

import ast
import dataclasses
import re

import numpy as np

from ..lowering.spec import (
    CHUNK,
    NATIVE_DTYPES,
    SOFTMAX_VALUE,
    KernelSpec,
    Reduction,
    Unsupported,
    combine,
    const_expr,
    dtype_ctor,
    index_list,
    operand_read,
    read_depth,
    reads_softmax,
)

__all__ = ["render_cpu"]


def _combine(kind: str, a: str, b: str, dt: np.dtype) -> str:
    """``a (op) b`` for a reduction kind, with numpy's NaN propagation for max/min."""
    return combine(kind, a, b, dt, _extremum)


def _extremum(kind: str, a: str, b: str, dt: np.dtype) -> str:
    # numba's np.maximum: numpy's NaN rule, vectorises
    return (f"np.maximum({a}, {b})" if kind in ("max", "logsumexp", "softmax")
            else f"np.minimum({a}, {b})")


def _acc_dtype(red: Reduction) -> np.dtype:
    if red.kind in ("and", "or"):
        return np.dtype(bool)
    dt = red.in_dtype
    if dt.kind == "f":
        return np.dtype("float64") if red.kind in ("sum", "prod", "logsumexp", "softmax") \
            else dt
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
    if red.kind in ("max", "logsumexp", "softmax"):
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


#: Reductions over the outermost loop axis run in blocks of that axis, each reduced into its
#: own slot, the slots then combined in block order. The number of blocks depends on the
#: extents only (never on the thread count, nor on whether the kernel is the parallel
#: variant), so one thread and many give the same bits. At most ``MAX_BLOCKS`` blocks, each
#: of at least ``BLOCK_MIN`` elements, and the slots (``blocks x`` output size) at most a
#: quarter of the elements read; a reduction too small for two blocks is one block, which is
#: exactly the unblocked loop.
MAX_BLOCKS = 64
BLOCK_MIN = 1 << 15
#: Parallel kernels whose outermost axis is kept split it into at most this many blocks (one
#: scratch buffer each, not one per row; results do not depend on it).
KEPT_BLOCKS = 256


def reduction_blocks(extents, red: Reduction | None) -> int:
    """How many blocks a kernel of these loop extents reduces its outermost axis in (1 when
    it is not reduced); the rendered kernel computes the same number from its extents."""
    if red is None or not blocked_reduction(red, len(extents)):
        return 1
    tot = 1
    for n in extents:
        tot *= int(n)
    outn = 1
    for d, n in enumerate(extents):
        if d not in red.axes:
            outn *= int(n)
    return max(1, min(MAX_BLOCKS, int(extents[0]), tot // BLOCK_MIN, tot // (4 * outn)))


def blocked_reduction(red: Reduction, nd: int) -> bool:
    """Whether a reduction is rendered in blocks of its outermost (reduced) axis: every kind
    but logsumexp and softmax (their passes need the global maximum first)."""
    return nd > 0 and 0 in red.axes and red.kind not in ("logsumexp", "softmax")


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.prange = False        # the outermost loop is a numba.prange (elementwise kernels)
        self.outer = None          # (lo, hi) bounds of the outermost loop inside a block
        self.r = "r"               # where the reduction accumulates (``rb``: a block's slot)

    def loop(self, depth: int, d: int):
        if d == 0 and self.outer is not None:
            self(depth, f"for i0 in range({self.outer[0]}, {self.outer[1]}):")
            return
        rng = "numba.prange" if self.prange and d == 0 else "range"
        self(depth, f"for i{d} in {rng}(n{d}):")

    def __call__(self, depth: int, text: str):
        self.lines.append("    " * depth + text)


def render_cpu(spec: KernelSpec, fn_name: str = "kernel", decorator: str = "",
               parallel: bool = False, extents=None) -> str:
    """The Python source of a numba CPU kernel for ``spec``.

    Signature: ``fn(n0, .., n{k-1}, a0, .., o0, .., [r])`` with the loop extents, the operands
    reshaped as the binding says, the elementwise outputs and the reduction output.

    With ``parallel`` the outermost loop runs over threads: a ``numba.prange`` for
    elementwise kernels, a ``prange`` over blocks of it for reductions that keep it
    (iterations write disjoint outputs). A reduction over the outermost axis is rendered in
    blocks (``reduction_blocks``) whether ``parallel`` or not, and ``parallel`` only makes
    the block loop a ``prange``: the serial and the parallel kernel add in the same order.
    """
    nd = spec.ndim
    red = spec.reduction
    args = [f"n{d}" for d in range(nd)] + [f"a{k}" for k in range(len(spec.operands))]
    args += [f"o{k}" for k in range(len(spec.outputs))]
    if red is not None and red.stored:
        args.append("r")
    w = _Writer()
    blocked = red is not None and blocked_reduction(red, nd)
    if blocked and not parallel and extents is not None and all(
            isinstance(n, (int, np.integer)) for n in extents):
        blocked = reduction_blocks(extents, red) > 1
    # (a logsumexp or softmax over the only loop axis has no kept axis to split: its
    # "parallel" variant is the serial loop, and kernel_threads never runs it on more)
    kept_blocks = parallel and not blocked and red is not None and nd > 0 and \
        0 not in red.axes
    w.prange = parallel and nd > 0 and red is None
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

    def body(ind):
        w.r, w.outer = "r", None
        if red is None:
            _render_loops(w, spec, by_depth, ind, nd, inner=None)
        elif blocked:
            _render_blocked(w, spec, by_depth, ind, parallel)
        else:
            if kept_blocks:
                w.outer = ("lo", "hi")
            if (nd - 1) not in red.axes:
                _render_direct_reduction(w, spec, by_depth, ind)
            else:
                _render_chunked_reduction(w, spec, by_depth, ind)

    check = _trig_check(spec, parallel)
    if check is None:
        body(base)
    else:
        for line in check:
            w(base, line)
        w(base, "if tb == 0:")
        start = len(w.lines)
        body(base + 1)
        w.lines[start:] = [_TRIG_CALL.sub(r"vm.v\1_fast(", ln) for ln in w.lines[start:]]
        w(base, "else:")
        start = len(w.lines)
        body(base + 1)
        w.lines[start:] = [_VM.sub("vc.", _TRIG_CALL.sub(r"vm.v\1_scalar(", ln))
                           for ln in w.lines[start:]]
    w(base, "return 0")
    return "\n".join(w.lines) + "\n"


# --------------------------------------------------------------------------------------------
# sin, cos and tan without a libm call in the vector loop
# --------------------------------------------------------------------------------------------

_TRIG_CALL = re.compile(r"\bvm\.v(sin|cos|tan)\(")
_VM = re.compile(r"\bvm\.")
#: helper-module calls: a trig argument computed with one of them is not checked twice
_HELPER_CALL = re.compile(r"\b(vm|vs|vi|vc|cs|av)\.")
_NAME = re.compile(r"\b[tx]\d+\b")


def _trig_check(spec: KernelSpec, parallel: bool) -> list[str] | None:
    """The lines of a loop nest counting the trig arguments that need libm (``tb``), or None
    when the kernel is rendered as it is.

    ``vm.vsin``/``vcos``/``vtan`` call libm for a finite ``|x| >= 1e6`` (and only there), on
    the lanes that need it: LLVM's loop vectoriser calls their masked vector variant on every
    vector iteration, and as every zmm register is caller-saved, the loop keeps its constants
    on the stack and spills its live values around each call (the chain workload's gradient
    kernel: 35% of its time, ~3.5 ms per 1e6 elements). So a kernel whose trig arguments are
    cheap (reads and arithmetic, no helper calls) first counts the arguments that need libm
    (``vm.trig_big``, one vectorised pass over the arguments' inputs, before anything is
    written: outputs may be their inputs' buffers), and then runs its loops either with
    ``vm.v<fn>_fast`` (no libm call; exact where ``trig_big`` is 0) or, when some argument
    needs libm, with ``vc.v<fn>_scalar`` (``vm.v<fn>`` bit for bit, in a form that LLVM does
    not vectorise: the rare branch stays cheap to compile, and its other helpers are called,
    not inlined again, ``vecmath_calls``). Both branches give ``vm.v<fn>``'s bits."""
    nd = spec.ndim
    if nd == 0:
        return None
    lines = {name: (expr, d) for name, expr, _dt, d in spec.body}
    args: list[tuple[str, int]] = []
    for _name, expr, _dt, d in spec.body:
        if not _TRIG_CALL.search(expr):
            continue
        tree = ast.parse(expr, mode="eval")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "vm"
                    and node.func.attr in ("vsin", "vcos", "vtan")):
                if len(node.args) != 1 or node.keywords:
                    return None
                a = (ast.unparse(node.args[0]), d)
                if a not in args:      # sin(x) and cos(x): one check
                    args.append(a)
    if not args:
        return None
    # the lines the arguments need: their names' closure over the body
    need: set[str] = set()
    todo = [n for a, _d in args for n in _NAME.findall(a)]
    while todo:
        n = todo.pop()
        if n in need:
            continue
        need.add(n)
        if n in lines:
            todo.extend(_NAME.findall(lines[n][0]))
    # an argument that reads a softmax (``sm``, or an epilogue value) is known only in the
    # softmax's last pass, after any check could run
    if need & set(spec.epilogue) or any(reads_softmax(a) for a, _d in args):
        return None
    cone = [(name, expr, d) for name, (expr, d) in lines.items() if name in need]
    if any(_HELPER_CALL.search(expr) for _n, expr, _d in cone) or any(
            _HELPER_CALL.search(a) for a, _d in args):
        return None
    by_depth: dict[int, list[str]] = {}
    for k, o in enumerate(spec.operands):
        if f"x{k}" in need:
            by_depth.setdefault(read_depth(o), []).append(operand_read(k, o))
    for name, expr, d in cone:
        by_depth.setdefault(d, []).append(f"{name} = {expr}")
    for a, d in args:
        by_depth.setdefault(d, []).append(f"tb += vm.trig_big({a})")
    depth = max(by_depth)
    out = ["tb = 0"]
    out.extend(by_depth.get(0, []))
    for d in range(depth):
        rng = "numba.prange" if parallel and d == 0 else "range"
        out.append("    " * d + f"for i{d} in {rng}(n{d}):")
        out.extend("    " * (d + 1) + ln for ln in by_depth.get(d + 1, []))
    return out


def _open_blocks(w, base: int, nb: str, parallel: bool) -> int:
    """``for b in (p)range(nb):`` with the block's outermost-axis bounds ``lo``, ``hi``;
    returns the indent of the block's body."""
    rng = "numba.prange" if parallel else "range"
    w(base, f"for b in {rng}({nb}):")
    w(base + 1, f"lo = (b * n0) // {nb}")
    w(base + 1, f"hi = ((b + 1) * n0) // {nb}")
    return base + 1


def _render_blocked(w, spec, by_depth, base, parallel):
    """A reduction over the outermost axis: each block of it reduces into its own slot of
    ``P`` (``rb``, laid out like ``r``), then the slots are combined in block order. A
    single block is the unblocked loop (its slot is copied to ``r``)."""
    red = spec.reduction
    nd = spec.ndim
    keep = [d for d in range(nd) if d not in red.axes]
    tot = " * ".join(f"n{d}" for d in range(nd))
    outn = " * ".join(f"n{d}" for d in keep) or "1"
    w(base, f"nb = max(1, min({MAX_BLOCKS}, n0, ({tot}) // {BLOCK_MIN}, "
            f"({tot}) // (4 * {outn})))")
    # the 1-d chunked sum keeps its slot in the accumulator's type (a block's compensated
    # sum), every other kind accumulates in the output's type, as the unblocked loop does
    one_d = nd == 1
    pdt = _acc_dtype(red) if one_d else red.dtype
    w(base, f"P = np.empty((nb,) + r.shape, {dtype_ctor(pdt)})")
    ind = _open_blocks(w, base, "nb", parallel)
    w(ind, "rb = P[b]")
    w.r = "rb"
    w.outer = ("lo", "hi")
    if (nd - 1) not in red.axes:
        _render_direct_reduction(w, spec, by_depth, ind)
    else:
        _render_chunked_reduction(w, spec, by_depth, ind)
    w.r, w.outer = "r", None
    # combine the slots in block order, one output element at a time
    for j, d in enumerate(keep):
        rng = "numba.prange" if parallel and j == 0 else "range"
        w(base + j, f"for j{d} in {rng}(n{d}):")
    ind = base + len(keep)
    jidx = ", ".join(f"j{d}" for d in keep) if keep else "0"
    adt = pdt
    comp = one_d and red.kind == "sum" and adt.kind == "f"
    w(ind, f"pa = P[0, {jidx}]")
    if comp:
        w(ind, f"pc = {const_expr(0, adt)}")
    w(ind, "for pb in range(1, nb):")
    if comp:   # Neumaier across blocks, as across chunks
        w(ind + 1, f"ps = P[pb, {jidx}]")
        w(ind + 1, "pt = pa + ps")
        w(ind + 1, "if pt - pt == 0:")
        w(ind + 2, "pc += ((pa - pt) + ps) if abs(pa) >= abs(ps) else ((ps - pt) + pa)")
        w(ind + 1, "pa = pt")
        w(ind, "pa = pa + pc if pa - pa == 0 else pa")
    else:
        expr = _combine(red.kind, "pa", f"P[pb, {jidx}]", adt)
        if adt not in NATIVE_DTYPES:
            expr = f"{dtype_ctor(adt)}({expr})"
        w(ind + 1, f"pa = {expr}")
    w(ind, f"r[{jidx}] = {dtype_ctor(red.dtype)}(pa)")


def _lines_for(lines: list[str], expr: str) -> list[str]:
    """The lines of ``lines`` (``name = expr``, in order) that ``expr`` needs, in order."""
    need = set(_NAME.findall(expr))
    keep = []
    for line in reversed(lines):
        name, rhs = line.split(" = ", 1)
        if name in need:
            keep.append(line)
            need.update(_NAME.findall(rhs))
    return keep[::-1]


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
        w(base, f"{w.r}[0] = {ident}")
        return
    for j, d in enumerate(keep):
        w(base + j, f"for i{d} in range(n{d}):")
    w(base + len(keep), f"{w.r}[{index_list(keep)}] = {ident}")


def _render_direct_reduction(w, spec, by_depth, base):
    """Innermost loop axis not reduced: accumulate each element into r (vectorises)."""
    red = spec.reduction
    odt = red.dtype
    _render_init(w, spec, base, _identity(red, odt))
    ridx = _red_outindex_list(spec)
    if w.outer is not None and w.r == "r":   # parallel blocks of the kept outer axis
        base = _open_blocks(w, base, f"min(n0, {KEPT_BLOCKS})", True)

    def inner(ind):
        v = _as_input(red, red.value)
        expr = _combine(red.kind, f"{w.r}[{ridx}]", v, odt)
        if odt not in NATIVE_DTYPES:
            expr = f"{dtype_ctor(odt)}({expr})"
        w(ind, f"{w.r}[{ridx}] = {expr}")
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
    if w.outer is not None and w.r == "r":   # parallel blocks of the kept outer axis
        base = _open_blocks(w, base, f"min(n0, {KEPT_BLOCKS})", True)
    # one buffer per kernel call, or per block (blocks may run on different threads)
    w(base, f"buf = av.scratch({CHUNK}, {ctor})")
    if not red.stored:      # a softmax only its epilogue reads: its row's exps, kept here
        w(base, f"eb = av.scratch(n{inner}, {ctor})")
    _emit_level(w, by_depth, 0, base)
    for d in range(inner):
        w.loop(base + d, d)
        _emit_level(w, by_depth, d + 1, base + d + 1)
    ind = base + inner
    ridx = _red_outindex_list(spec)
    full = index_list(range(nd))
    v = _as_input(red, red.value)
    vin = f"{ctor}({v})" if adt != red.in_dtype or v != red.value else v
    lse_like = red.kind in ("logsumexp", "softmax")
    passes = ["max", "sumexp"] if lse_like else [red.kind]
    epilogue = frozenset(spec.epilogue)
    # a 1-d reduction in blocks: the chunks of this block's range
    lo, hi = w.outer if inner == 0 and w.outer is not None else ("0", f"n{inner}")
    for pname in passes:
        kind = "sum" if pname == "sumexp" else pname
        pident = _identity(dataclasses.replace(red, kind=kind), adt)
        comp = kind == "sum" and adt.kind == "f"
        w(ind, f"acc = {pident}")
        if comp:
            w(ind, f"cmp = {const_expr(0, adt)}")
        w(ind, f"for c in range({lo}, {hi}, {CHUNK}):")
        w(ind + 1, f"m = min({CHUNK}, {hi} - c)")
        w(ind + 1, "for l in range(m):")
        # unsigned: numba then skips negative-index wraparound, which blocks vectorisation
        w(ind + 2, f"i{inner} = np.uint64(c + l)")
        if lse_like and pname == "max":
            # the maximum pass needs only the reduced value: the kernel's other values are
            # computed (and its outputs written) in the second pass. LLVM would drop them
            # here anyway, but numba inlines and types each vecmath call they make first
            for line in _lines_for(by_depth.get(nd, []), v):
                w(ind + 2, line)
        else:     # (a softmax's epilogue waits for its last pass)
            for line in by_depth.get(nd, []):
                if line.split(" = ", 1)[0] not in epilogue:
                    w(ind + 2, line)
        if not lse_like or pname == "sumexp":
            for k, (name, _dt) in enumerate(spec.outputs):
                if name not in epilogue:
                    w(ind + 2, f"o{k}[{full}] = {name}")
        val = f"vm.vexp({ctor}({v}) - shift)" if pname == "sumexp" else vin
        if red.kind == "softmax" and pname == "sumexp":
            # keep each exp in the output (or the row buffer); the third pass scales the row
            # by 1 / sum
            w(ind + 2, f"e = {val}")
            if red.stored:
                w(ind + 2, f"{w.r}[{full}] = {_cast(red.dtype, 'e', adt)}")
            else:
                w(ind + 2, f"eb[i{inner}] = e")
            val = "e"
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
        if pname == "max" and lse_like:
            # like the numpy impl: a non-finite maximum shifts by 0
            w(ind, f"shift = acc if acc - acc == 0 else {const_expr(0, adt)}")
    odt = red.dtype
    if red.kind == "softmax":
        _render_softmax_scale(w, spec, by_depth, ind, adt, odt)
        return
    res = "vm.vlog(acc) + shift" if red.kind == "logsumexp" else "acc"
    if inner == 0 and w.r != "r":   # a block's slot keeps the accumulator's type
        w(ind, f"{w.r}[0] = acc")
        return
    if outer_reduced:
        res = _combine(red.kind, f"{w.r}[{ridx}]", f"{dtype_ctor(odt)}({res})", odt)
    w(ind, f"{w.r}[{ridx}] = {dtype_ctor(odt)}({res})")


def _cast(dt: np.dtype, expr: str, from_dt: np.dtype) -> str:
    return expr if np.dtype(dt) == np.dtype(from_dt) else f"{dtype_ctor(dt)}({expr})"


def _render_softmax_scale(w, spec, by_depth, ind, adt, odt):
    """softmax's third pass: its row holds ``exp(v - max)``; scale it by ``1 / sum``, where
    a sum of 0 (a row of all -inf) gives 0 with ``masked_zero`` (else ``0 * inf``, NaN).
    A float32 row is scaled in float64 and rounded once more. The kernel's epilogue (values
    that read the softmax, ``spec.epilogue``) is computed here, with the values of the
    second pass it reads computed again, and its outputs written."""
    inner = spec.ndim - 1
    full = index_list(range(spec.ndim))
    one, zero = const_expr(1, adt), const_expr(0, adt)
    if spec.reduction.masked_zero:
        w(ind, f"scale = {one} / acc if acc != {zero} else {zero}")
    else:
        w(ind, f"scale = {one} / acc")
    w(ind, f"for l in range(n{inner}):")
    w(ind + 1, f"i{inner} = np.uint64(l)")
    cell = f"{w.r}[{full}]"
    epi_outs = [(k, name) for k, (name, _dt) in enumerate(spec.outputs)
                if name in spec.epilogue]
    if not epi_outs:
        w(ind + 1, f"{cell} = {_cast(odt, _cast(adt, cell, odt) + ' * scale', adt)}")
        return
    if spec.reduction.stored:
        w(ind + 1, f"{SOFTMAX_VALUE} = {_cast(odt, _cast(adt, cell, odt) + ' * scale', adt)}")
        w(ind + 1, f"{cell} = {SOFTMAX_VALUE}")
    else:
        w(ind + 1, f"{SOFTMAX_VALUE} = {_cast(odt, f'eb[i{inner}] * scale', adt)}")
    for line in _lines_for(by_depth.get(spec.ndim, []), " ".join(n for _k, n in epi_outs)):
        w(ind + 1, line)
    for k, name in epi_outs:
        w(ind + 1, f"o{k}[{full}] = {name}")
