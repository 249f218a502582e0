"""CUDA kernel templates: a ``KernelSpec`` -> the Python source of a ``numba.cuda.jit`` kernel.

Owns what the CUDA target fuses (``fusible``, ``unfused_reason``: the code of each op is on
its declaration, ``op.code["cuda"]``, templates in ``ops.scalar_code``), and the
three launch templates: an elementwise grid-stride loop, and two reduction templates (a
block per output row with a shared-memory tree, and a thread per output with a serial loop),
both able to split a long reduction into segments whose partial results a small *finish*
kernel combines. Specs come from ``codegen.build_spec`` for this target, so the CUDA kernels
have the same fusion groups, operands, index maps and expression bodies as the CPU kernels;
operand reads (fused ``pad``s' guarded shifted reads included) are ``codegen.operand_read``.
This file generates text only: it never imports numba or cupy. Imports core and
backends.codegen only.

Semantics follow the reference interpreter (numpy): NaN propagation of maximum/minimum and of
max/min reductions, numpy's signed-zero rule for maximum/minimum, a stable logistic, numpy's
``logaddexp``. Exact arithmetic is numpy's bit for bit: NVVM contracts ``a * b + c`` into an
FMA by default (its ``-fma=1``, which numba-cuda does not let a kernel turn off), so a float
product is libdevice's ``dmul_rn``/``fmul_rn`` -- PTX ``mul.rn``, a multiply with an explicit
rounding mode, which CUDA documents as never merged into a multiply-add; division and sqrt
are IEEE (numba-cuda's defaults: ``prec_div``, ``prec_sqrt``, no ``ftz``, no fastmath).
Transcendental functions are libdevice's (``math.exp`` in a CUDA kernel is
``__nv_exp``/``__nv_expf``, within 1-2 ulp); every constant carries the operand's dtype, so
float32 kernels never compute in float64 by accident. Float sums and products accumulate in
float64 (like the CPU kernels); max/min in the operand's dtype.

Layout of a reduction: the spec's loop axes split into *kept* axes (the output's, flattened to
``k < nk``) and *reduced* axes (flattened to ``j < nr``). Each output's reduction range is cut
into ``nseg`` segments; a unit of work is one (k, segment). ``block`` template: a block per
unit, threads stride over the segment (coalesced when the innermost loop axis is reduced).
``thread`` template: a thread per unit, adjacent threads on adjacent outputs (coalesced when
the innermost axis is kept). With ``nseg == 1`` the kernel writes the result; otherwise it
writes partials ``p0[k, s]`` (and ``p1`` for logsumexp: segment max, then the sum of
``exp(v - max)``) and the finish kernel reduces them. Every (k, j) is visited exactly once, so
a group's elementwise outputs are written by the same loop.
"""

from __future__ import annotations

import re

import numpy as np

from ...ops.scalar_code import nan_max, nan_min
from ..lowering.plan import Target
from ..lowering.spec import (
    KernelSpec,
    Reduction,
    Unsupported,
    combine,
    const_expr,
    dtype_ctor,
    operand_read,
    read_axes,
)

__all__ = ["CudaTarget", "CUDA", "fusible", "unfused_reason", "supports", "prefer_kernel",
           "render_elementwise", "render_reduction", "render_finish", "acc_dtype",
           "CODEGEN_VERSION", "TARGET"]

CODEGEN_VERSION = "5"

# --------------------------------------------------------------------------------------------
# what the target fuses (the code itself is on each op's declaration: ``op.code["cuda"]``)
# --------------------------------------------------------------------------------------------

TARGET = "cuda"


class CudaTarget(Target):
    """The CUDA target's answers to the shared lowering (``lowering.plan.Target``)."""

    name, label = TARGET, "CUDA"

    def dtype_ok(self, dt: np.dtype) -> bool:
        return dt.kind in "biu" or (dt.kind == "f" and dt.itemsize in (4, 8))

    def prefer_kernel(self, e) -> bool:
        """A group of this one equation still deserves a kernel: every elementwise op (a
        launch of ours costs a few microseconds of host time; cupy's ufunc dispatch cost far
        more on the H200 -- the MLP's lone scalar ``div`` took 44 us alone, synchronised,
        where a fused kernel over 4,096 elements took 17 us) and ``logsumexp`` (cupy needs
        two passes). Lone reductions other than logsumexp stay with cupy (CUB)."""
        return e.op.elementwise or e.op.reduce_kind == "logsumexp"


CUDA = CudaTarget()
supports = CUDA.supports
unfused_reason = CUDA.unfused_reason
fusible = CUDA.fusible
prefer_kernel = CUDA.prefer_kernel


# --------------------------------------------------------------------------------------------
# templates
# --------------------------------------------------------------------------------------------

_NAME = re.compile(r"\b([xt]\d+)\b")
_INDEX = re.compile(r"\bi(\d+)\b")


class _W:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _idx(axes) -> str:
    return ", ".join(f"i{d}" for d in axes) if axes else "0"


def _deps(spec: KernelSpec) -> dict[str, frozenset]:
    """The loop axes each read (``x<k>``, its guards included) and body value (``t<k>``)
    depends on; a body value computed from loop indices (``i<d>``: a single-diagonal
    literal) depends on those axes."""
    dep: dict[str, frozenset] = {f"x{k}": read_axes(o) for k, o in enumerate(spec.operands)}
    for name, expr, _dt, _d in spec.body:
        s: frozenset = frozenset(int(d) for d in _INDEX.findall(expr))
        for tok in _NAME.findall(expr):
            s |= dep.get(tok, frozenset())
        dep[name] = s
    return dep


def _lines(spec: KernelSpec) -> list[tuple[str, str]]:
    """(name, statement) of every operand read and body line, reads first (body lines only
    use earlier names)."""
    out = [(f"x{k}", operand_read(k, o)) for k, o in enumerate(spec.operands)]
    out += [(name, f"{name} = {expr}") for name, expr, _dt, _d in spec.body]
    return out


def _emit_split(w: _W, spec: KernelSpec, deps, levels: list[frozenset], indents: list[int],
                done: set):
    """Emit each statement at the first level whose available axes cover its dependencies
    (loop-invariant values are hoisted out of the loops)."""
    stmts = _lines(spec)
    for avail, ind in zip(levels, indents):
        for name, st in stmts:
            if name not in done and deps[name] <= avail:
                w(ind, st)
                done.add(name)


def _decompose(w: _W, ind: int, var: str, axes: list[int]):
    """Loop indices ``i<d>`` of ``axes`` (row-major, last fastest) from the flat ``var``."""
    if not axes:
        return
    if len(axes) == 1:
        w(ind, f"i{axes[0]} = {var}")
        return
    w(ind, f"q = {var}")
    for d in reversed(axes[1:]):
        w(ind, f"i{d} = q % n{d}")
        w(ind, f"q = q // n{d}")
    w(ind, f"i{axes[0]} = q")


def _stepper(w: _W, ind: int, start: str, stride: str, axes: list[int]):
    """Loop indices ``i<d>`` of ``axes`` for a loop whose flat counter starts at ``start`` and
    advances by ``stride``: decomposed once (``q // n``, ``q % n``), then advanced with one
    add, compare and conditional subtract per axis (``_advance``). A GPU divides 64-bit
    integers in a subroutine of tens of instructions; doing that per element made the index
    arithmetic the bulk of a 2-D elementwise kernel (benchmarks/cuda_sass.py). Returns the
    advance statements, to be emitted at the end of the loop body."""
    if len(axes) <= 1:
        return None
    _decompose(w, ind, start, axes)
    w(ind, f"q = {stride}")
    for d in reversed(axes[1:]):
        w(ind, f"st{d} = q % n{d}")
        w(ind, f"q = q // n{d}")
    w(ind, f"st{axes[0]} = q")
    return axes


def _advance(w: _W, ind: int, axes):
    """Advance the loop indices of ``_stepper`` by its stride: each axis adds its part of the
    stride and a carry; ``i + st + carry < 2 n`` so one conditional subtraction is enough.
    (After the last iteration the outermost index may run past its extent: never read.)"""
    if axes is None:
        return
    for d, outer in zip(reversed(axes[1:]), reversed(axes[:-1])):
        w(ind, f"i{d} += st{d}")
        w(ind, f"if i{d} >= n{d}:")
        w(ind + 1, f"i{d} -= n{d}")
        w(ind + 1, f"i{outer} += 1")
    w(ind, f"i{axes[0]} += st{axes[0]}")


def _prod(axes) -> str:
    return " * ".join(f"n{d}" for d in axes) if axes else "1"


def _args(spec: KernelSpec, reduction: bool) -> list[str]:
    args = [f"n{d}" for d in range(spec.ndim)]
    if reduction:
        args.append("nseg")
    args += [f"a{k}" for k in range(len(spec.operands))]
    args += [f"o{k}" for k in range(len(spec.outputs))]
    if reduction:
        args += ["r", "p0", "p1"]
    return args


def _kernel_head(w: _W, spec: KernelSpec, fn_name: str, decorator: str, reduction: bool):
    """The spec's helper functions, the decorator and the ``def`` line."""
    for h in spec.helpers:
        w(0, h + "\n\n")
    if decorator:
        w(0, decorator)
    w(0, f"def {fn_name}({', '.join(_args(spec, reduction))}):")


def render_elementwise(spec: KernelSpec, fn_name: str = "kernel", decorator: str = "") -> str:
    """A grid-stride loop over the flattened loop nest: ``fn(n0.., a0.., o0..)``."""
    assert spec.reduction is None
    nd = spec.ndim
    w = _W()
    _kernel_head(w, spec, fn_name, decorator, False)
    deps = _deps(spec)
    done: set = set()
    _emit_split(w, spec, deps, [frozenset()], [1], done)
    w(1, f"total = {_prod(range(nd))}")
    w(1, "w0 = cuda.grid(1)")
    w(1, "gs = cuda.gridsize(1)")
    axes = list(range(nd))
    steps = _stepper(w, 1, "w0", "gs", axes)
    full = _idx(axes)
    stores = [f"o{k}[{full}] = {name}" for k, (name, _dt) in enumerate(spec.outputs)]
    start = "w0"
    if nd:
        # UNROLL elements per thread and iteration, their reads first (see _unrolled_loop)
        stmts = _loop_statements(spec, deps, done)
        w(1, "wu = w0")
        w(1, f"while wu + {UNROLL - 1} * gs < total:")
        for u in range(UNROLL):
            if steps is None:
                w(2, f"i0_{u} = wu + {u} * gs")
            else:
                for d in axes:
                    w(2, f"i{d}_{u} = i{d}")
                _advance(w, 2, steps)
        _slots(w, 2, stmts, [f"i{d}" for d in axes], stores)
        w(2, f"wu += {UNROLL} * gs")
        start = "wu"
    w(1, f"for w in range({start}, total, gs):")
    if steps is None:
        _decompose(w, 2, "w", axes)
    _emit_split(w, spec, deps, [frozenset(axes)], [2], done)
    for st in stores:
        w(2, st)
    _advance(w, 2, steps)
    return w.text()


# -- reductions -------------------------------------------------------------------------------

def acc_dtype(red: Reduction) -> np.dtype:
    """The accumulator dtype: float64 for float sums/products/logsumexp, 64-bit integers for
    integer sums/products, the operand's dtype for max/min, bool for and/or."""
    if red.kind in ("and", "or"):
        return np.dtype(bool)
    dt = red.in_dtype
    if red.kind in ("sum", "prod", "logsumexp"):
        if dt.kind == "f":
            return np.dtype("float64")
        if dt.kind == "u":
            return np.dtype("uint64")
        if dt.kind == "i":
            return np.dtype("int64")
        raise Unsupported(f"{red.kind} over {dt}")
    return dt


def _identity(kind: str, dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if kind == "sum":
        return const_expr(0, dt)
    if kind == "prod":
        return const_expr(1, dt)
    if kind == "and":
        return "True"
    if kind == "or":
        return "False"
    if kind == "max":
        if dt.kind == "f":
            return const_expr(-np.inf, dt)
        return "False" if dt.kind == "b" else const_expr(np.iinfo(dt).min, dt)
    if kind == "min":
        if dt.kind == "f":
            return const_expr(np.inf, dt)
        return "True" if dt.kind == "b" else const_expr(np.iinfo(dt).max, dt)
    raise Unsupported(kind)


def _combine(kind: str, a: str, b: str, dt: np.dtype) -> str:
    return combine(kind, a, b, dt, _extremum)


def _extremum(kind: str, a: str, b: str, dt: np.dtype) -> str:
    if kind == "max":
        return nan_max(a, b) if dt.kind == "f" else f"max({a}, {b})"
    if kind == "min":
        return nan_min(a, b) if dt.kind == "f" else f"min({a}, {b})"
    raise Unsupported(kind)


def _cast(dt: np.dtype, expr: str) -> str:
    dt = np.dtype(dt)
    if dt.kind == "b":
        return expr
    return f"{dtype_ctor(dt)}({expr})"


def _lse_shift(m: str, adt) -> str:
    """The numpy impl's shift: the maximum where finite, else 0."""
    return f"({m} if {m} - {m} == {const_expr(0, adt)} else {const_expr(0, adt)})"


def _safe_log(x: str, adt) -> str:
    """log of a sum of exponentials (>= 0 or NaN), with log(0) = -inf spelt out (Python's
    math.log raises there, so the simulator needs it; on the GPU it is one select)."""
    return (f"(math.log({x}) if {x} > {const_expr(0, adt)} else "
            f"({const_expr(-np.inf, adt)} if {x} == {const_expr(0, adt)} else {x}))")


def _block_tree(w: _W, ind: int, kind: str, adt, sm: str = "sm"):
    """Shared-memory tree over the block (blockDim.x is a power of two); leaves the result
    in ``total`` for every thread."""
    w(ind, "cuda.syncthreads()")
    w(ind, "h = nthr // 2")
    w(ind, "while h > 0:")
    w(ind + 1, "if tid < h:")
    w(ind + 2, f"{sm}[tid] = {_combine(kind, f'{sm}[tid]', f'{sm}[tid + h]', adt)}")
    w(ind + 1, "cuda.syncthreads()")
    w(ind + 1, "h = h // 2")
    w(ind, f"total = {sm}[0]")
    w(ind, "cuda.syncthreads()")   # every thread has read sm[0] before it is reused


def render_reduction(spec: KernelSpec, strategy: str, block: int, fn_name: str = "kernel",
                     decorator: str = "") -> str:
    """The source of a fused kernel closing with a reduction.

    Signature: ``fn(n0.., nseg, a0.., o0.., r, p0, p1)``; ``r`` is the output flattened to
    ``(nk,)``, ``p0``/``p1`` the ``(nk, nseg)`` partials (any small array when ``nseg == 1``).

    Args:
        strategy: ``"block"`` (a block per (output, segment), shared-memory tree over the
            block; launch with ``block`` threads) or ``"thread"`` (a thread per (output,
            segment)).
        block: threads per block (a power of two; the size of the shared array).
    """
    red = spec.reduction
    assert red is not None and strategy in ("block", "thread")
    blk = strategy == "block"
    adt = acc_dtype(red)
    w = _W()
    _kernel_head(w, spec, fn_name, decorator, True)
    deps = _deps(spec)
    done: set = set()
    _reduction_prologue(w, spec, deps, done, blk, block, adt)
    vin = _reduced_value(red, adt)

    def loop(acc_update: str, write_outputs: bool):
        _reduction_loop(w, spec, deps, done, blk, acc_update, write_outputs)

    if red.kind == "logsumexp":
        # pass 1: the maximum; pass 2: the sum of exp(v - shift); outputs written in pass 2
        w(2, f"acc = {const_expr(-np.inf, adt)}")
        loop(nan_max("acc", vin), False)
        _unit_result(w, blk, "max", adt, "m")
        w(2, f"shift = {_lse_shift('m', adt)}")
        w(2, f"acc = {const_expr(0, adt)}")
        loop(f"acc + math.exp({vin} - shift)", True)
        _unit_result(w, blk, "sum", adt, "acc")
        final = f"{_safe_log('acc', adt)} + shift"
        _store(w, blk, _cast(red.dtype, final), ["p0[k, s] = m", "p1[k, s] = acc"])
    else:
        w(2, f"acc = {_identity(red.kind, adt)}")
        loop(_combine(red.kind, "acc", vin, adt), True)
        _unit_result(w, blk, red.kind, adt, "acc")
        _store(w, blk, _cast(red.dtype, "acc"), ["p0[k, s] = acc"])
    return w.text()


def _reduction_prologue(w: _W, spec: KernelSpec, deps, done: set, blk: bool, block: int, adt):
    """The kernel's set-up (shared array, sizes, hoisted reads) and the loop over units of
    work (k, s), down to the unit's range ``j0 <= j < j1`` of the reduced index."""
    kept = [d for d in range(spec.ndim) if d not in spec.reduction.axes]
    if blk:
        w(1, f"sm = cuda.shared.array({block}, {dtype_ctor(adt)})")
        w(1, "tid = cuda.threadIdx.x")
        w(1, "nthr = cuda.blockDim.x")
    w(1, f"nk = {_prod(kept)}")
    w(1, f"nr = {_prod(spec.reduction.axes)}")
    w(1, "seg = (nr + nseg - 1) // nseg")
    _emit_split(w, spec, deps, [frozenset()], [1], done)
    if blk:
        w(1, "for u in range(cuda.blockIdx.x, nk * nseg, cuda.gridDim.x):")
        w(2, "k = u // nseg")
        w(2, "s = u - k * nseg")
    else:
        w(1, "for u in range(cuda.grid(1), nk * nseg, cuda.gridsize(1)):")
        w(2, "s = u // nk")
        w(2, "k = u - s * nk")
    _decompose(w, 2, "k", kept)
    _emit_split(w, spec, deps, [frozenset(kept)], [2], done)
    w(2, "j0 = s * seg")
    w(2, "j1 = min(j0 + seg, nr)")


def _reduced_value(red: Reduction, adt) -> str:
    """The expression the accumulator folds in: the reduced value in the accumulator's type
    (``!= 0`` for and/or over non-bool operands)."""
    v = red.value
    if red.kind in ("and", "or") and red.in_dtype.kind != "b":
        return f"({v} != 0)"
    if adt != red.in_dtype:
        return f"{dtype_ctor(adt)}({v})"
    return v


def _reduction_loop(w: _W, spec: KernelSpec, deps, done: set, blk: bool, acc_update: str,
                    write_outputs: bool):
    """One pass over the unit's range: the body, the group's elementwise outputs when
    ``write_outputs``, and ``acc = acc_update``."""
    nd, rax = spec.ndim, list(spec.reduction.axes)
    full = _idx(range(nd))
    if not blk and len(rax) == 1:
        _unrolled_loop(w, spec, deps, done, rax[0], full, acc_update, write_outputs)
        return
    start = "j0 + tid" if blk else "j0"
    steps = _stepper(w, 2, start, "nthr" if blk else "1", rax)
    w(2, f"for j in range({start}, j1{', nthr' if blk else ''}):")
    if steps is None:
        _decompose(w, 3, "j", rax)
    sub = set(done)
    _emit_split(w, spec, deps, [frozenset(range(nd))], [3], sub)
    if write_outputs:
        for k, (name, _dt) in enumerate(spec.outputs):
            w(3, f"o{k}[{full}] = {name}")
    w(3, f"acc = {acc_update}")
    _advance(w, 3, steps)


def _unit_result(w: _W, blk: bool, kind: str, adt, into: str):
    """``into`` = the unit's result: the block's threads' accumulators combined (block
    template), or the thread's own."""
    if blk:
        w(2, "sm[tid] = acc")
        _block_tree(w, 2, kind, adt)
        w(2, f"{into} = total")
    elif into != "acc":
        w(2, f"{into} = acc")


def _store(w: _W, blk: bool, result: str, partials: list[str]):
    """Store the unit's ``result`` (one segment) or its partials (several)."""
    b = _store_guard(w, blk)
    w(b, "if nseg == 1:")
    w(b + 1, f"r[k] = {result}")
    w(b, "else:")
    for line in partials:
        w(b + 1, line)


#: loop iterations whose reads are issued together (the thread template's reduction loop
#: and the elementwise grid-stride loop)
UNROLL = 4


def _loop_statements(spec: KernelSpec, deps, done: set) -> list[tuple[str, str]]:
    """The reads and body lines that depend on the innermost loop level (not hoisted)."""
    return [(name, st) for name, st in _lines(spec)
            if name not in done and deps[name] <= frozenset(range(spec.ndim))]


def _slots(w: _W, ind: int, stmts, index_names, stores, acc_update: str | None = None):
    """``UNROLL`` copies of a loop body, names suffixed ``_<slot>`` (the slots' loop indices
    ``i<d>_<slot>`` are set by the caller): every slot's reads, then every slot's body, then
    the stores, then the accumulator updates in slot order."""
    names = sorted({name for name, _ in stmts} | set(index_names))
    pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")

    def ren(text: str, u: int) -> str:
        return pat.sub(lambda m: f"{m.group(1)}_{u}", text)

    for group in ([st for n, st in stmts if n.startswith("x")],
                  [st for n, st in stmts if not n.startswith("x")], stores):
        for u in range(UNROLL):
            for st in group:
                w(ind, ren(st, u))
    if acc_update is not None:
        for u in range(UNROLL):
            w(ind, f"acc = {ren(acc_update, u)}")


def _unrolled_loop(w: _W, spec: KernelSpec, deps, done: set, r: int, full: str,
                   acc_update: str, write_outputs: bool):
    """The thread template's serial loop over one reduced axis, ``UNROLL`` iterations at a
    time: first every operand read of the ``UNROLL`` iterations, then their bodies, stores and
    accumulator updates (in iteration order: the same sum, bit for bit). Numba cannot tell
    that a kernel's output does not alias its inputs, so in a plain loop the next iteration's
    reads wait behind this iteration's stores: one memory latency per element and thread.
    Issued together, ``UNROLL`` reads are in flight at once. The remainder runs the plain
    loop."""
    stmts = _loop_statements(spec, deps, done)
    stores = [f"o{k}[{full}] = {name}" for k, (name, _dt) in enumerate(spec.outputs)] \
        if write_outputs else []
    w(2, "jj = j0")
    w(2, f"while jj + {UNROLL} <= j1:")
    for u in range(UNROLL):
        w(3, f"i{r}_{u} = jj + {u}")
    _slots(w, 3, stmts, [f"i{r}"], stores, acc_update)
    w(3, f"jj += {UNROLL}")
    w(2, "for j in range(jj, j1):")
    w(3, f"i{r} = j")
    for _name, st in stmts:
        w(3, st)
    for st in stores:
        w(3, st)
    w(3, f"acc = {acc_update}")


def _store_guard(w: _W, blk: bool) -> int:
    """In the block template thread 0 stores the block's result; returns the indent."""
    if blk:
        w(2, "if tid == 0:")
        return 3
    return 2


def _lse_pairs(w: _W, segments: str, adt) -> None:
    """``acc``: the sum over ``segments`` of each (max, sum) pair rescaled to ``shift``."""
    zero = const_expr(0, adt)
    w(2, f"acc = {zero}")
    w(2, f"for s in {segments}:")
    w(3, "l = p1[k, s]")
    # a segment of all -inf has l == 0 (its shift may be far from ours: skip, 0 * inf)
    w(3, f"if l != {zero}:")
    w(4, f"acc = acc + l * math.exp({_lse_shift('p0[k, s]', adt)} - shift)")


def render_finish(kind: str, acc_dt, out_dt, block: int, fn_name: str = "finish",
                  decorator: str = "", per_thread: bool = False) -> str:
    """The kernel combining segment partials: ``fn(nk, nseg, p0, p1, r)``, a block per output
    (launch with ``block`` threads), or with ``per_thread`` a thread per output adding its
    few partials in order (no shared memory, no barriers: many outputs of few segments each,
    as a skinny product's, would otherwise spend a block's tree on a handful of values)."""
    adt = np.dtype(acc_dt)
    w = _W()
    if decorator:
        w(0, decorator)
    w(0, f"def {fn_name}(nk, nseg, p0, p1, r):")
    if per_thread:
        w(1, "for k in range(cuda.grid(1), nk, cuda.gridsize(1)):")
        if kind == "logsumexp":
            w(2, f"m = {const_expr(-np.inf, adt)}")
            w(2, "for s in range(nseg):")
            w(3, f"m = {nan_max('m', 'p0[k, s]')}")
            w(2, f"shift = {_lse_shift('m', adt)}")
            _lse_pairs(w, "range(nseg)", adt)
            final = f"{_safe_log('acc', adt)} + shift"
        else:
            w(2, f"acc = {_identity(kind, adt)}")
            w(2, "for s in range(nseg):")
            w(3, f"acc = {_combine(kind, 'acc', 'p0[k, s]', adt)}")
            final = "acc"
        w(2, f"r[k] = {_cast(out_dt, final)}")
        return w.text()
    w(1, f"sm = cuda.shared.array({block}, {dtype_ctor(adt)})")
    w(1, "tid = cuda.threadIdx.x")
    w(1, "nthr = cuda.blockDim.x")
    w(1, "for k in range(cuda.blockIdx.x, nk, cuda.gridDim.x):")
    if kind == "logsumexp":
        w(2, f"acc = {const_expr(-np.inf, adt)}")
        w(2, "for s in range(tid, nseg, nthr):")
        w(3, f"acc = {nan_max('acc', 'p0[k, s]')}")
        w(2, "sm[tid] = acc")
        _block_tree(w, 2, "max", adt)
        w(2, f"shift = {_lse_shift('total', adt)}")
        _lse_pairs(w, "range(tid, nseg, nthr)", adt)
        w(2, "sm[tid] = acc")
        _block_tree(w, 2, "sum", adt)
        final = f"{_safe_log('total', adt)} + shift"
    else:
        w(2, f"acc = {_identity(kind, adt)}")
        w(2, "for s in range(tid, nseg, nthr):")
        w(3, f"acc = {_combine(kind, 'acc', 'p0[k, s]', adt)}")
        w(2, "sm[tid] = acc")
        _block_tree(w, 2, kind, adt)
        final = "total"
    w(2, "if tid == 0:")
    w(3, f"r[k] = {_cast(out_dt, final)}")
    return w.text()


# --------------------------------------------------------------------------------------------
# indexing ops: gather and scatter-add as one kernel each
# --------------------------------------------------------------------------------------------

#: dtypes numba's ``cuda.atomic.add`` takes
_ATOMIC_ADD = frozenset(np.dtype(d) for d in ("float32", "float64", "int32", "int64",
                                               "uint32", "uint64"))


def index_plan(x_shape, spec, idx_shapes):
    """``x[spec]`` (numpy's rules, as ``ops.indexing.index_shape``) as kernel expressions: for
    every axis of ``x``, its index in terms of the output loop indices ``i<d>`` and the
    index-array reads ``v<k>``; returns (x index expressions, index-array read statements,
    output rank). Raises ``Unsupported`` for 0-d index arrays (integers mixed with arrays)."""
    consumed = sum(1 for e in spec if e[0] != "none")
    spec = tuple(spec) + tuple(("slice", 0, n, 1) for n in x_shape[consumed:])
    adv = tuple(np.broadcast_shapes(*idx_shapes)) if idx_shapes else ()
    na = len(adv)
    adv_pos = [i for i, e in enumerate(spec) if e[0] == "arr"]
    adjacent = bool(adv_pos) and adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    adv_start = 0 if adv_pos and not adjacent else None
    out_d = na if adv_start == 0 else 0
    exprs, reads = [], []
    axis = 0
    for e in spec:
        kind = e[0]
        if kind == "none":
            out_d += 1
            continue
        if kind == "slice":
            start, step = e[1], e[3]
            term = f"i{out_d}" if step == 1 else f"{step} * i{out_d}"
            exprs.append(term if start == 0 else f"{start} + {term}")
            out_d += 1
        elif kind == "int":
            exprs.append(str(e[1]))
        else:
            if adv_start is None:
                adv_start, out_d = out_d, out_d + na
            k = e[1]
            s = idx_shapes[k]
            if not s:
                raise Unsupported("0-d index array")
            sub = ", ".join("0" if n == 1 else f"i{adv_start + na - len(s) + j}"
                            for j, n in enumerate(s))
            reads.append(f"v{axis} = ix{k}[{sub}]")
            reads.append(f"if v{axis} < 0 or v{axis} >= xs{axis}:")
            reads.append(f"    v{axis} = v{axis} % xs{axis}")
            exprs.append(f"v{axis}")
        axis += 1
    return exprs, reads, out_d


def _index_kernel(w: _W, fn_name: str, x_ndim: int, n_idx: int, plan, body: list[str],
                  target: str, last: list[str], decorator: str) -> None:
    """A grid-stride loop over an index space (``w`` is the flat position, C order), with the
    indices into ``target`` (the indexed array) computed by ``index_plan``."""
    exprs, reads, m = plan
    if decorator:
        w(0, decorator)
    args = [f"n{d}" for d in range(m)] + [target] + [f"ix{k}" for k in range(n_idx)] + last
    w(0, f"def {fn_name}({', '.join(args)}):")
    for a in range(x_ndim):
        if any(f"xs{a}" in r for r in reads):
            w(1, f"xs{a} = {target}.shape[{a}]")
    w(1, f"total = {_prod(range(m))}")
    w(1, "w0 = cuda.grid(1)")
    w(1, "gs = cuda.gridsize(1)")
    steps = _stepper(w, 1, "w0", "gs", list(range(m)))
    w(1, "for w in range(w0, total, gs):")
    if steps is None:
        _decompose(w, 2, "w", list(range(m)))
    for r in reads:
        w(2, r)
    xi, oi = ", ".join(exprs), _idx(range(m))
    for line in body:
        w(2, line.format(xi=xi, oi=oi))
    _advance(w, 2, steps)


def render_gather(x_shape, spec, idx_shapes, decorator: str = "") -> str:
    """``out = x[spec]`` with index arrays ``ix<k>``: ``kernel(n0.., x, ix0.., out)``, a
    grid-stride loop over the output. Index arrays hold non-negative indices (functrace.numpy
    wraps negative ones); an out-of-range index wraps around (as cupy's indexing does: a GPU
    kernel cannot raise numpy's IndexError)."""
    w = _W()
    _index_kernel(w, "kernel", len(x_shape), len(idx_shapes),
                  index_plan(x_shape, spec, idx_shapes), ["out[{oi}] = x[{xi}]"], "x", ["out"],
                  decorator)
    return w.text()


def render_scatter_add(x_shape, spec, idx_shapes, dtype, decorator: str = "") -> str:
    """``out[spec] += v`` with repeated targets accumulating (``np.add.at``): atomic adds,
    ``kernel(n0.., out, ix0.., v)`` over ``v``'s elements (``out`` holds a copy of ``x``).
    Float sums of repeated targets land in the order the GPU runs them (numpy's order is
    sequential: the last bits may differ)."""
    if np.dtype(dtype) not in _ATOMIC_ADD:
        raise Unsupported(f"no atomic add for {np.dtype(dtype)}")
    w = _W()
    _index_kernel(w, "kernel", len(x_shape), len(idx_shapes),
                  index_plan(x_shape, spec, idx_shapes),
                  ["cuda.atomic.add(out, ({xi},), v[{oi}])"], "out", ["v"], decorator)
    return w.text()


def render_scatter_set(x_shape, spec, idx_shapes, decorator: str = "") -> str:
    """``out[spec] = v`` with numpy's rule for repeated targets (the last update in ``v``'s
    order wins) in two kernels over ``v``'s elements: ``kernel(n0.., out, ix0.., v, owner)``
    makes each target's ``owner`` (all -1 before) the largest position writing it
    (``cuda.atomic.max``), ``kernel2`` (same arguments) writes the updates that own their
    target. ``out`` holds a copy of ``x``."""
    w = _W()
    plan = index_plan(x_shape, spec, idx_shapes)
    _index_kernel(w, "kernel", len(x_shape), len(idx_shapes), plan,
                  ["cuda.atomic.max(owner, ({xi},), w)"], "out", ["v", "owner"], decorator)
    w(0, "")
    w(0, "")
    _index_kernel(w, "kernel2", len(x_shape), len(idx_shapes), plan,
                  ["if owner[{xi}] == w:", "    out[{xi}] = v[{oi}]"], "out", ["v", "owner"],
                  decorator)
    return w.text()


def op_kernel_source(e, decorator: str = "") -> tuple[str, str] | None:
    """(kind, kernel source) for an indexing equation the GPU runs as generated kernels:
    ``gather`` with an index array, ``scatter`` adding (the gradient of gather) or setting.
    None for others."""
    name = e.op.name
    if name not in ("gather", "scatter"):
        return None
    spec = e.params["spec"]
    if not any(s[0] == "arr" for s in spec):
        return None                      # basic indexing: a view, no kernel
    x = e.inputs[0].aval
    if not CUDA.dtype_ok(x.dtype):     # float16, complex: cupy's indexing
        return None
    if name == "gather":
        idx = [a.aval.shape for a in e.inputs[1:]]
        if not e.outputs[0].aval.size:
            return None
        try:
            return "gather", render_gather(x.shape, spec, idx, decorator)
        except Unsupported:
            return None
    idx = [a.aval.shape for a in e.inputs[2:]]
    if not e.inputs[1].aval.size or e.params["mode"] not in ("add", "set"):
        return None               # multiply: no atomic multiply (cupy's path)
    try:
        if e.params["mode"] == "set":
            return "scatter_set", render_scatter_set(x.shape, spec, idx, decorator)
        return "scatter_add", render_scatter_add(x.shape, spec, idx, x.dtype, decorator)
    except Unsupported:
        return None
