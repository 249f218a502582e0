"""The CUDA target's lowered program: the fusion plan with a launch per kernel
(``KernelStep``), one-kernel ops (``OpKernel``: gather, scatter-add), the buffer plan of the
device pool (``Program``), and the kernel modules (``module_source``, ``load_module``: content
hashed, on disk, loaded once). Lowering needs no numba and no GPU. Imports core, passes,
``lowering`` and ``cuda.codegen``/``cuda.launch``.
"""

from __future__ import annotations

import math
import sys
import threading

from ... import caches
from ...core import Graph
from ...passes.fusion import Group
from ...passes.memory import escaping_values, plan_buffers, step_io, view_bases
from ..lowering.plan import fresh_result, plan_kernels
from ..lowering.spec import spec_key
from ..modfiles import load_source_module
from . import codegen as cg
from .device import SimLibdevice, SimMath, simulator_enabled
from .launch import LaunchConfig, choose_launch

__all__ = ["Program", "KernelStep", "OpKernel", "module_source", "load_module", "clear_modules"]


# kernel modules and their disk cache
# --------------------------------------------------------------------------------------------

_HEAD = ("# functrace kernel (numba CUDA), codegen v{v}\n"
         "import math\n\nimport numpy as np\nfrom numba import cuda\n"
         "from numba.cuda import libdevice\n\n\n")
_DECORATOR = "@cuda.jit(cache=True)"


def module_source(body: str) -> tuple[str, str]:
    """(key, full module source) of a kernel module."""
    text = _HEAD.format(v=cg.CODEGEN_VERSION) + body
    key = spec_key(text)
    return key, text.replace("# functrace kernel", f"# functrace kernel {key}", 1)


def _unload(key: str, _mod) -> None:
    """An evicted kernel module leaves ``sys.modules`` too (executables using its kernels
    keep their references)."""
    sys.modules.pop(f"functrace_cuda_kernels.ftc_{key}", None)


_modules = caches.LRU("numba_cuda.modules", scale=4, on_drop=_unload)
_module_lock = threading.RLock()


def load_module(key: str, source: str):
    """The imported kernel module (written as ``ftc_<key>.py`` first if missing): a file, so
    numba-cuda's ``cache=True`` can keep the compiled code next to it."""
    mod = _modules.get(key)
    if mod is not None:
        return mod
    with _module_lock:
        mod = _modules.get(key)
        if mod is not None:
            return mod
        from numba import cuda  # noqa: F401  (before the module: modfiles then pins numba-cuda's
        # cache locator, so the kernel's @cuda.jit(cache=True) caches in the checked directory)
        mod = load_source_module("functrace_cuda_kernels", "ftc_", key, source)
        if simulator_enabled():
            mod.math = SimMath
            mod.libdevice = SimLibdevice
        _modules[key] = mod
        return mod


# --------------------------------------------------------------------------------------------
# lowering: plan + launch configuration + sources (no numba, no GPU)
# --------------------------------------------------------------------------------------------

class KernelStep:
    __slots__ = ("group", "spec", "binding", "launch", "key", "source", "finish_key",
                 "finish_source", "acc")

    def __init__(self, group, spec, binding, launch, cfg):
        self.group, self.spec, self.binding, self.launch = group, spec, binding, launch
        red = spec.reduction
        if red is None:
            body = cg.render_elementwise(spec, "kernel", _DECORATOR)
            self.acc = None
        else:
            body = cg.render_reduction(spec, launch.strategy, cfg.threads, "kernel", _DECORATOR)
            self.acc = cg.acc_dtype(red)
        self.key, self.source = module_source(body)
        self.finish_key = self.finish_source = None
        if red is not None and launch.nseg > 1:
            self.finish_key, self.finish_source = module_source(cg.render_finish(
                red.kind, self.acc, red.dtype, cfg.threads, "finish", _DECORATOR,
                per_thread=launch.finish == "thread"))


class OpKernel:
    """One equation (gather, scatter-add) run as one generated kernel over its index space."""

    __slots__ = ("kind", "key", "source", "grid", "block", "n")

    @classmethod
    def of(cls, e, cfg: LaunchConfig, sm: int) -> OpKernel | None:
        got = cg.op_kernel_source(e, _DECORATOR)
        if got is None:
            return None
        kind, body = got
        space = e.outputs[0].aval.shape if kind == "gather" else e.inputs[1].aval.shape
        return cls(kind, body, space, cfg, sm)

    def __init__(self, kind, body, space, cfg, sm):
        self.kind = kind
        self.key, self.source = module_source(body)
        self.n = tuple(space)
        t = cfg.threads
        self.block = t
        self.grid = min(max(1, -(-math.prod(space) // t)), max(1, sm * cfg.blocks_per_sm))


class Program:
    """A graph lowered for the GPU: fusion plan, launches, kernel sources, buffer plan.

    Attributes:
        graph, plan: the graph and its ``FusionPlan``.
        kernels: group id -> ``KernelStep``.
        op_kernels: equation index -> ``OpKernel`` (gather, scatter-add: one kernel each
            instead of cupy's several).
        buffers: the ``BufferPlan`` of the device pool.
        source: every kernel module, then a listing of the steps.
    """

    def __init__(self, graph: Graph, cfg: LaunchConfig, sm: int, donate: tuple = (),
                 no_fuse: frozenset = frozenset(), no_op_kernels: frozenset = frozenset()):
        self.graph, self.cfg, self.sm = graph, cfg, sm
        self.no_op_kernels = frozenset(no_op_kernels)
        self.donate = tuple(donate)

        def kernel(group, spec, binding):
            return KernelStep(group, spec, binding, choose_launch(spec, binding.extents, cfg, sm),
                              cfg)
        kp = plan_kernels(graph, cg.CUDA, kernel, no_fuse)
        self.unsupported: list[tuple[str, str]] = kp.unsupported
        self.no_fuse = kp.no_fuse                 # equation indices kept out of kernels
        plan = self.plan = kp.plan
        self.kernels = kp.kernels
        self.op_kernels: dict[int, OpKernel] = {}
        for s in plan.steps:
            if not isinstance(s, Group) and s.eqn not in no_op_kernels:
                ok = OpKernel.of(graph.eqns[s.eqn], cfg, sm)
                if ok is not None:
                    self.op_kernels[s.eqn] = ok
        self._plan_buffers()

    def _plan_buffers(self):
        g, steps = self.graph, self.plan.steps
        reads, writes = step_io(g, steps, lambda s: self.kernels[s.id].binding)
        escaping = escaping_values(g, steps, fresh_result)
        kernel_out = {v for w, s in zip(writes, steps) if isinstance(s, Group) for v in w}

        def inplace_ok(k, v):
            s = steps[k]
            if not isinstance(s, Group):
                return False
            ks = self.kernels[s.id]
            nd = ks.spec.ndim
            return all(a is not v or (sp.axes == tuple(range(nd)) and not sp.shifted)
                       for (a, _), sp in zip(ks.binding.operands, ks.spec.operands))

        self.buffers = plan_buffers(
            reads, writes, g.outputs, lambda v: v in kernel_out and v not in escaping,
            lambda v: int(v.aval.size * v.aval.dtype.itemsize),
            [(i, g.inputs[i]) for i in self.donate if i < len(g.inputs)], inplace_ok,
            aliases=view_bases(g, steps, fresh_result))     # cupy views keep bases alive

    @property
    def source(self) -> str:
        parts = []
        seen = set()
        for ks in self.kernels.values():
            la = ks.launch
            parts.append(f"# ---- kernel ftc_{ks.key} (group {ks.group.id}, "
                         f"{len(ks.group.eqns)} equations, loop {ks.binding.extents}, "
                         f"{la.strategy}, grid {la.grid} x {la.block}"
                         f"{f', {la.nseg} segments' if la.nseg > 1 else ''}) ----\n"
                         + ks.source)
            if ks.finish_key and ks.finish_key not in seen:
                seen.add(ks.finish_key)
                parts.append(f"# ---- finish ftc_{ks.finish_key} ----\n" + ks.finish_source)
        for i, ok in self.op_kernels.items():
            parts.append(f"# ---- kernel ftc_{ok.key} ({ok.kind} of equation {i}, grid "
                         f"{ok.grid} x {ok.block}) ----\n" + ok.source)
        lines = []
        for s in self.plan.steps:
            if isinstance(s, Group):
                lines.append(f"# kernel ftc_{self.kernels[s.id].key}  (group {s.id})")
            elif s.eqn in self.op_kernels:
                lines.append(f"# kernel ftc_{self.op_kernels[s.eqn].key}  "
                             f"({self.graph.eqns[s.eqn].op.name})")
            else:
                lines.append(f"# {self.graph.eqns[s.eqn].op.name}  (cupy)")
        parts.append("# ---- steps ----\n" + "\n".join(lines) + "\n")
        return "\n".join(parts)

    def __repr__(self):
        return (f"<cuda Program: {len(self.plan.steps)} steps, {len(self.kernels)} kernels, "
                f"pool {self.buffers.pool_bytes} bytes>")


# --------------------------------------------------------------------------------------------


def clear_modules() -> None:
    """Forget the loaded kernel modules (they leave ``sys.modules`` too)."""
    _modules.clear()
