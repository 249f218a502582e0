"""How the CUDA target launches a kernel: the launch configuration (``LaunchConfig``, and
``SIM_CONFIG`` for numba's simulator), the grid and block of each kernel (``choose_launch``),
and which contractions run as generated reduction kernels rather than cuBLAS
(``contraction_layout``, ``SKINNY_MAX``). Plan-time only: no numba, no GPU. Imports passes.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from ...passes.contract import contraction_sizes
from . import codegen as cg

__all__ = ["LaunchConfig", "SIM_CONFIG", "Launch", "choose_launch", "contraction_layout",
           "SKINNY_MAX", "skinny_default"]


# launch configuration
# --------------------------------------------------------------------------------------------

def skinny_default() -> int:
    return int(os.environ.get("FUNCTRACE_CUDA_SKINNY", "") or SKINNY_MAX)


#: contractions with a contracting size, or a free size on one side, of at most this many
#: elements run as generated reduction kernels, not cuBLAS (``contraction_layout``)
SKINNY_MAX = 16


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """How groups are launched (plan-time, shape-specific).

    Attributes:
        threads: threads per block (a power of two; the shared array of reductions).
        sm_count: multiprocessors (None: ask the device; 132 when lowering without one).
        blocks_per_sm: grid-stride loops launch at most ``sm_count * blocks_per_sm`` blocks.
        block_reduce_min: the block template needs at least this many elements per output
            (and the innermost loop axis reduced); otherwise the thread template runs.
        segment_min, thread_segment_min: a reduction is split into segments of no fewer
            elements than this (block template, thread template).
        finish_thread_max: up to this many segments an output, the finish kernel gives each
            output a thread (a serial sum of a few partials) rather than a block and a
            shared-memory tree.
        strategy, nseg: force the reduction template / segment count (tests).
        skinny: contractions whose contracting size or smaller free size is at most this
            run as generated reduction kernels (``contraction_layout``); 0: every
            contraction goes to cuBLAS. Default ``SKINNY_MAX``, or the environment variable
            ``FUNCTRACE_CUDA_SKINNY``.
    """

    threads: int = 256
    sm_count: int | None = None
    blocks_per_sm: int = 32
    block_reduce_min: int = 64
    segment_min: int = 4096
    thread_segment_min: int = 64
    finish_thread_max: int = 16
    strategy: str | None = None
    nseg: int | None = None
    skinny: int = dataclasses.field(default_factory=skinny_default)

    def __post_init__(self):
        if self.threads < 1 or self.threads & (self.threads - 1):
            raise ValueError(f"threads per block must be a power of two, got {self.threads}")


#: the simulator runs every CUDA thread as a Python thread: small blocks, few of them
SIM_CONFIG = LaunchConfig(threads=16, sm_count=2, blocks_per_sm=2, block_reduce_min=8,
                          segment_min=64, thread_segment_min=4)


@dataclasses.dataclass
class Launch:
    strategy: str          # "elementwise" | "block" | "thread"
    grid: int
    block: int
    nseg: int = 1
    nk: int = 1
    finish_grid: int = 1
    finish: str = "block"  # "block": a block per output; "thread": a thread per output


def choose_launch(spec, extents, cfg: LaunchConfig, sm: int) -> Launch:
    """The template and grid for a kernel over ``extents``."""
    t = cfg.threads
    max_blocks = max(1, sm * cfg.blocks_per_sm)
    red = spec.reduction
    if red is None:
        # enough threads that each runs whole unrolled iterations (cg.UNROLL elements with
        # their reads in flight together), at most one resident wave (8 blocks an SM), and
        # every SM busy when there is an element per thread for it
        n = math.prod(extents)
        blocks = -(-n // (t * cg.UNROLL))
        if blocks < sm:
            blocks = min(-(-n // t), sm)
        return Launch("elementwise", max(1, min(blocks, sm * min(cfg.blocks_per_sm, 8))), t)
    nd = spec.ndim
    nk = math.prod(extents[d] for d in range(nd) if d not in red.axes)
    nr = math.prod(extents[d] for d in red.axes)
    inner_reduced = (nd - 1) in red.axes
    strategy = cfg.strategy or ("block" if inner_reduced and nr >= cfg.block_reduce_min
                                else "thread")
    if strategy == "block":
        want = sm * 4                          # blocks that fill the machine
        nseg = 1 if nk >= want else max(1, min(-(-want // nk), nr // cfg.segment_min))
    else:
        # a full machine of threads (2,048 an SM), so long serial loops hide their latency:
        # a skinny product's 40,960 outputs of 2,048 terms each run as 7 segments
        want = sm * 2048
        nseg = 1 if nk * 2 >= want else max(1, min(-(-want // nk),
                                                   nr // cfg.thread_segment_min))
    if cfg.nseg is not None:
        nseg = max(1, min(cfg.nseg, nr))
    units = nk * nseg
    grid = min(units if strategy == "block" else -(-units // t), max_blocks)
    if 1 < nseg <= cfg.finish_thread_max:
        return Launch(strategy, max(1, grid), t, nseg, nk, min(-(-nk // t), max_blocks),
                      "thread")
    return Launch(strategy, max(1, grid), t, nseg, nk, min(max(1, nk), max_blocks))


def contraction_layout(e, cfg: LaunchConfig) -> str | None:
    """How the CUDA target runs a ``dot_general`` equation: None for cuBLAS (through cupy),
    or the loop-nest layout of a generated reduction kernel (``passes.contract``).

    cuBLAS tiles a product for a large output; a skinny one -- a contracting size, or one
    side's free size, of at most ``cfg.skinny`` elements (``(4096, 2048) @ (2048, 10)``, the
    outer-product-like ``(4096, 10) @ (10, 2048)``, ``h.T @ d`` with ``d`` of 10 columns) --
    leaves most of the GPU idle in it (89-129 us each on an H200 where its bytes take a
    few). As a reduction group of the fusion plan it runs as one generated kernel:

    * "outer" (contracting axes first, a thread per output, adjacent threads on adjacent
      outputs, long sums cut into segments) wherever the larger operand is then read along
      its rows or re-read from L1: its innermost axis is not contracted, the contraction is
      short, or the other side's free size is >= 8 (a warp then spans at most four rows);
    * "inner" (contracting axes innermost: a block of threads per output reads a row,
      coalesced) for a matrix-vector-like product along the larger operand's rows.

    Only float32/float64 operands of one dtype; empty contractions stay with cupy.
    """
    small = cfg.skinny
    if small <= 0:
        return None
    x, y = e.inputs
    dt = e.outputs[0].aval.dtype
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)) or x.aval.dtype != dt \
            or y.aval.dtype != dt:
        return None
    _b, m, n, k = contraction_sizes(e)
    if min(_b, m, n, k) == 0 or (k > small and min(m, n) > small):
        return None
    (xc, yc), _ = e.params["dimension_numbers"]
    big_x = x.aval.size >= y.aval.size
    big, contracted = (x, xc) if big_x else (y, yc)
    if k <= small or big.aval.ndim == 0 or big.aval.ndim - 1 not in contracted:
        return "outer"
    return "outer" if big_x and n >= 8 else "inner"


# --------------------------------------------------------------------------------------------
