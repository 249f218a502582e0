"""The CUDA executor: the CPU executor's fusion plan, run as numba.cuda kernels on cupy arrays.

Owns ``compile(graph, ...) -> Executable`` (cached per graph and options), ``lower`` (plan,
launch configuration and every generated source, without numba or a GPU), the launch
configuration, the compiled steps, and the CUDA kernel module cache. It reaches the device
only through an adapter of ``cuda_device`` (``CupyArrays`` on a GPU; ``HostArrays``, a numpy
stand-in, under numba's CUDA simulator), which it re-exports with the availability check.
Imports core, passes and sibling backends; never the API layer. **Importing this file imports
neither numba nor cupy**: they are imported when a graph first runs on the device.

Pipeline for one graph (the CPU executor's, target by target):

0. ``passes.contract`` writes skinny contractions (``contraction_layout``: a contracting or a
   free size of at most 16) as a multiply closed by a sum, so they plan as reduction kernels.
1. ``passes.fusion.plan_fusion`` with the CUDA target's ``fusible`` splits the graph into
   kernel groups and single-op steps (the same planner, so the same groups as on the CPU
   wherever both targets fuse the same ops).
2. ``codegen.build_spec`` with the ops' CUDA code (``op.code["cuda"]``) turns each group into a
   ``KernelSpec`` (the same operands, index maps and bodies as the CPU kernel); the launch
   configuration is chosen from the loop extents and the device's SM count, and
   ``cuda_codegen`` renders a ``@cuda.jit`` kernel (grid-stride elementwise loop, or a block /
   thread reduction template, plus a finish kernel when a reduction is split in segments).
3. ``passes.memory.plan_buffers`` places kernel outputs that do not escape in a device buffer
   pool reused from call to call (stream-ordered reuse is safe: every step of a call site runs
   on the call site's stream).
4. Single-op steps run the op's numpy impl *with cupy arrays* (numpy dispatches to cupy
   through ``__array_function__``/``__array_ufunc__``): contractions become cuBLAS calls
   (with ``FUNCTRACE_CUDA_GEMM=lt``, tuned cuBLASLt calls: ``cublaslt``), reductions CUB,
   linalg cuSOLVER. An impl cupy cannot run (it converts to numpy) runs on the
   host, logged once per op.
5. Control-flow steps (``loop``, ``cond``, ``while``, ``specialize``: ops holding sub-graphs)
   run their impls too, which evaluate each sub-graph through ``lowering.subgraphs``: as a
   CUDA executable of its own, compiled at its first use. A ``scan``/``fori_loop`` is a host
   loop over its body's kernels; a branch index, a while predicate or a trip count is read on
   the host (one synchronisation per decision). Such graphs are never captured as CUDA
   graphs.

Streams: each Executable (a call site) owns one stream; its kernels and cupy calls are
enqueued there and the call returns without synchronising the host. The stream waits for the
caller's current stream at entry and the caller's stream waits for it at exit (CUDA events; no
events are needed when the caller is on the legacy default stream, which orders itself with
our blocking stream). Kernels receive arrays as numba device arrays made from
``__cuda_array_interface__`` with ``sync=False`` (numba would otherwise synchronise the host on
every argument).

Tiers, as on the CPU: the first ``hot_after - 1`` calls run the reference interpreter with
cupy as its array module (no compile); then kernels compile (``eager=True``: at once). A kernel
that fails to compile is logged and its group runs as single ops instead.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
import threading
import time

import numpy as np

from ... import caches
from ...core import Graph, Lit, Var
from ...ops.dot import dot_general_p
from ...passes.contract import contractions_as_reductions
from ...passes.fusion import Group
from .. import gc_pause
from ..lowering.executable import ExecutableBase, debug_level
from ..lowering.plan import expand_unfused
from ..lowering.subgraphs import SubgraphHost
from .codegen import CUDA
from .cublaslt import gemm_shape_of
from .device import (
    CupyArrays,
    HostArrays,
    check_available,
    default_arrays,
    simulator_enabled,
    unavailable_reason,
)
from .launch import (
    SIM_CONFIG,
    SKINNY_MAX,
    Launch,
    LaunchConfig,
    choose_launch,
    contraction_layout,
    skinny_default,
)
from .program import KernelStep, OpKernel, Program, clear_modules, load_module, module_source

__all__ = ["compile", "lower", "Executable", "Program", "LaunchConfig", "SIM_CONFIG", "SKINNY_MAX",
           "choose_launch", "contraction_layout", "module_source", "load_module", "KernelStep",
           "OpKernel", "HostArrays", "CupyArrays", "default_arrays", "simulator_enabled",
           "check_available", "unavailable_reason", "clear_memory_caches"]

log = logging.getLogger("functrace")


# --------------------------------------------------------------------------------------------
# executables
# --------------------------------------------------------------------------------------------

class Executable(ExecutableBase):
    """A graph bound to the CUDA backend. Call with the graph's flat inputs (device arrays;
    host arrays are copied to the device); returns the list of outputs, on the device."""

    def __init__(self, graph: Graph, *, donate: tuple = (), eager: bool = False,
                 hot_after: int | None = None, arrays=None, config: LaunchConfig | None = None,
                 graphs: bool | None = None):
        super().__init__(graph, donate=donate, eager=eager, hot_after=hot_after)
        self.gemm = _gemm_default()
        self.graphs = _graphs_default() if graphs is None else bool(graphs)
        # the sub-graphs of its control-flow steps run as CUDA executables of their own (a
        # loop: a host loop over the body's kernels); a partial, not a closure over self
        self._host = SubgraphHost(graph, functools.partial(
            compile, eager=True, arrays=arrays, config=config, graphs=self.graphs))
        self._replay: _Replay | None = None
        # no CUDA graph for a graph with control flow: its steps read values on the host (a
        # predicate, a trip count) and run other executables on their own streams
        self._graph_state = "off" if (not self.graphs or donate or self._host.active) \
            else "pending"
        self._graph_lock = threading.Lock()
        self._arrays = arrays
        self._config = config
        self._lowered: tuple | None = None
        self._kept_products: frozenset = frozenset()    # ids of dot_generals not rewritten
        self._steps = None
        self._stream = None
        self._consts: dict = {}

    # -- configuration ------------------------------------------------------------------------
    @property
    def arrays(self):
        if self._arrays is None:
            self._arrays = default_arrays()
        return self._arrays

    def _cfg_sm(self, need_device: bool) -> tuple[LaunchConfig, int]:
        cfg = self._config
        if cfg is None:
            cfg = dataclasses.replace(SIM_CONFIG, skinny=skinny_default()) if \
                (self._arrays is not None and self._arrays.simulated) or \
                (self._arrays is None and simulator_enabled()) else LaunchConfig()
        sm = cfg.sm_count
        if sm is None:
            sm = self.arrays.sm_count() if need_device else 132
        return cfg, sm

    def _target_graph(self, cfg: LaunchConfig) -> Graph:
        """The graph the kernels are planned from: ``self.graph`` with its skinny contractions
        written as reductions (``contraction_layout``), except those kept as products after
        their kernel failed (``_program``). Made once per configuration and kept set, so a
        re-plan sees the same equations. (The reference interpreter runs ``self.graph``: it
        would store a rewritten product's whole loop nest.)"""
        key = (cfg.skinny, self._kept_products)
        if self._lowered is None or self._lowered[0] != key:
            keep = self._kept_products
            g = contractions_as_reductions(
                self.graph, lambda e: None if id(e) in keep else contraction_layout(e, cfg))
            g = expand_unfused(g, CUDA)
            self._lowered = (key, g)
        return self._lowered[1]

    def _program_for(self, cfg: LaunchConfig, sm: int, no_fuse=frozenset(),
                 no_op_kernels=frozenset()) -> Program:
        """The Program of the target graph. A skinny product whose multiply and sum did not
        end up in a kernel (its kernel failed to compile, or the target cannot fuse it) goes
        back to a matrix product: as single ops its multiply would store the whole loop nest
        (a (65536, 4096) @ (4096, 16) product: 17 GB)."""
        products = {e.outputs[0]: e for e in self.graph.eqns if e.op is dot_general_p}
        while True:
            prog = Program(self._target_graph(cfg), cfg, sm, self.donate, no_fuse,
                           no_op_kernels)
            producer_eqn = {o: e for e in prog.graph.eqns for o in e.outputs}
            stray = {id(e) for v, e in products.items()
                     if producer_eqn.get(v) is not None
                     and producer_eqn[v].op is not dot_general_p
                     and not isinstance(prog.plan.producer.get(v), Group)}
            if not stray:
                return prog
            log.warning("functrace: %d skinny product(s) could not run as kernels; they run "
                        "as matrix products", len(stray))
            self._kept_products = self._kept_products | frozenset(stray)

    def lower(self) -> Program:
        if self._program is None:
            cfg, sm = self._cfg_sm(need_device=self._arrays is not None)
            self._program = self._program_for(cfg, sm)
        return self._program

    @property
    def compiled(self) -> bool:
        return self._steps is not None

    # -- compiling ----------------------------------------------------------------------------
    def compile(self) -> Executable:
        """Load every kernel, compile it (a one-element warm-up launch) and build the steps;
        groups whose kernel fails run as single ops instead. Idempotent."""
        if self._steps is not None:
            return self
        with self._lock, gc_pause.paused():
            if self._steps is not None:
                return self
            ar = self.arrays
            t0 = time.perf_counter()
            cfg, sm = self._cfg_sm(need_device=True)
            if self._program is not None and self._program.sm != sm:
                self._program = None          # lowered without the device: redo with its SMs
            if self._program is None:
                self._program = self._program_for(cfg, sm)
            prog = self._program
            if self._stream is None:
                self._stream = ar.new_stream()
            dbg = debug_level()
            if dbg >= 1:
                print(f"functrace: compiling graph for CUDA\n{self.graph}", file=sys.stderr)
            for _ in range(4):
                failed, failed_ops = [], []
                for i, ok in prog.op_kernels.items():
                    try:
                        self._warm_up_op(prog.graph.eqns[i], ok)
                    except Exception as exc:
                        log.warning("functrace: CUDA kernel for %s (equation %d) failed, "
                                    "running its impl instead: %s", ok.kind, i, str(exc)[:500])
                        failed_ops.append(i)
                        self.compile_failures.append(str(exc))
                for ks in prog.kernels.values():
                    try:
                        self._warm_up(ks)
                    except Exception as exc:   # typing/compile errors
                        names = " ".join(prog.graph.eqns[i].op.name for i in ks.group.eqns)
                        log.warning("functrace: CUDA kernel for group %d (%s) failed, running "
                                    "it as single ops: %s", ks.group.id, names, str(exc)[:500])
                        failed.extend(ks.group.eqns)
                        self.compile_failures.append(str(exc))
                if not failed and not failed_ops:
                    break
                prog = self._program = self._program_for(
                    prog.cfg, prog.sm, prog.no_fuse | frozenset(failed),
                    prog.no_op_kernels | frozenset(failed_ops))
            if dbg >= 2:
                print(prog.source, file=sys.stderr)
            self._steps = self._build_steps(prog)
            self.compile_seconds = time.perf_counter() - t0
            log.info("functrace: CUDA: %d kernels, %d steps in %.3f s", len(prog.kernels),
                     len(prog.plan.steps), self.compile_seconds)
        return self

    def _warm_up(self, ks: KernelStep) -> None:
        """Compile the C-contiguous specialisation now (extents 1, one-element arrays, one
        thread: the templates work with any power-of-two block up to the shared array)."""
        ar = self.arrays
        spec = ks.spec
        kernel = load_module(ks.key, ks.source).kernel
        args: list = [1] * spec.ndim
        red = spec.reduction
        if red is not None:
            args.append(1)
        for op in spec.operands:
            args.append(ar.kernel_arg(ar.zeros((1,) * max(len(op.axes), 1), op.dtype)))
        for _, dt in spec.outputs:
            args.append(ar.kernel_arg(ar.zeros((1,) * max(spec.ndim, 1), dt)))
        if red is not None:
            p = ar.kernel_arg(ar.zeros((1, 1), ks.acc))
            args += [ar.kernel_arg(ar.zeros((1,), red.dtype)), p, p]
        with ar.stream_scope(self._stream):
            ar.launcher(kernel, 1, 1, self._stream)(*args)
            if ks.finish_key is not None:
                fin = load_module(ks.finish_key, ks.finish_source).finish
                ar.launcher(fin, 1, 1, self._stream)(
                    1, 1, p, p, ar.kernel_arg(ar.zeros((1,), red.dtype)))

    def _warm_up_op(self, e, ok: OpKernel) -> None:
        """Compile an op kernel's C-contiguous specialisation: one-element arrays and an empty
        index space (the outermost extent 0: slices may start past one element)."""
        ar = self.arrays
        kernel = load_module(ok.key, ok.source).kernel

        def one(av):
            return ar.kernel_arg(ar.zeros((1,) * max(len(av.shape), 1), av.dtype))
        ins = [a.aval for a in e.inputs]
        if ok.kind == "gather":
            args = [one(ins[0]), *[one(a) for a in ins[1:]], one(e.outputs[0].aval)]
        else:
            args = [one(ins[0]), *[one(a) for a in ins[2:]], one(ins[1])]
        kernels = [kernel]
        if ok.kind == "scatter_set":
            args.append(ar.kernel_arg(ar.zeros((1,) * max(len(ins[0].shape), 1), np.int64)))
            kernels.append(load_module(ok.key, ok.source).kernel2)
        with ar.stream_scope(self._stream):
            for k in kernels:
                ar.launcher(k, 1, 1, self._stream)(0, *([1] * (len(ok.n) - 1)), *args)

    # -- the compiled steps -------------------------------------------------------------------
    def _const(self, lit: Lit):
        c = self._consts.get(id(lit))
        if c is None:
            c = self._consts[id(lit)] = (lit, self.arrays.to_device(lit.val))
        return c[1]

    def _build_steps(self, prog: Program):
        """Closures, one per plan step, over an environment list (inputs first)."""
        ar, g = self.arrays, prog.graph
        bp = prog.buffers
        slot: dict[Var, int] = {v: i for i, v in enumerate(g.inputs)}
        for e in g.eqns:
            for o in e.outputs:
                slot[o] = len(slot)
        n_env = len(slot)
        views: list[tuple[int, tuple, np.dtype]] = []     # pool views: (slot, shape, dtype)
        view_index: dict = {}
        scratch: list[tuple[tuple, np.dtype]] = []         # per-pool partial buffers

        def pool_view(v: Var, shape) -> int:
            k = (bp.slot_of[v], tuple(shape), v.aval.dtype.str)
            if k not in view_index:
                view_index[k] = len(views)
                views.append((bp.slot_of[v], tuple(shape), v.aval.dtype))
            return view_index[k]

        def out_plan(v: Var, kshape):
            """('pool', kernel view, value view) or ('new', kernel shape, dtype, donor input,
            value shape)."""
            if v in bp.slot_of:
                return ("pool", pool_view(v, kshape), pool_view(v, v.aval.shape))
            return ("new", tuple(kshape), v.aval.dtype, bp.donated_slot.get(v), v.aval.shape)

        steps = []
        for s in prog.plan.steps:
            if isinstance(s, Group):
                ks = prog.kernels[s.id]
                kernel = load_module(ks.key, ks.source).kernel
                la = ks.launch
                launch = ar.launcher(kernel, la.grid, la.block, self._stream)
                ops = []
                for atom, rshape in ks.binding.operands:
                    if isinstance(atom, Lit):
                        ops.append(("const", ar.kernel_arg(
                            self._const(atom).reshape(rshape))))
                    elif tuple(rshape) != atom.aval.shape and atom in bp.slot_of:
                        # a pool value read in another shape: a view made once per pool,
                        # not a reshape per call
                        ops.append(("pool", pool_view(atom, rshape)))
                    else:
                        same = tuple(rshape) == atom.aval.shape
                        ops.append(("env", slot[atom], None if same else tuple(rshape)))
                outs = [(slot[v], out_plan(v, kshape)) for v, kshape in ks.binding.outputs]
                red = None
                if ks.binding.reduction is not None:
                    v, _ = ks.binding.reduction
                    red = (slot[v], out_plan(v, (la.nk,)))
                fin = None
                if ks.finish_key is not None:
                    fk = load_module(ks.finish_key, ks.finish_source).finish
                    fin = ar.launcher(fk, la.finish_grid, la.block, self._stream)
                    p0 = len(scratch)
                    scratch.append(((la.nk, la.nseg), ks.acc))
                    scratch.append(((la.nk, la.nseg), ks.acc))
                    parts = ("scratch", p0)
                elif ks.acc is not None:
                    parts = ("dummy", ks.acc)
                else:
                    parts = None
                steps.append(_kernel_step(ar, ks.binding.extents, la, launch, ops, outs, red,
                                          fin, parts))
            else:
                e = g.eqns[s.eqn]
                ins = [("const", self._const(a)) if isinstance(a, Lit) else ("env", slot[a])
                       for a in e.inputs]
                gemm = self._gemm(e)
                if gemm is not None:
                    steps.append(_gemm_step(ar, gemm, e, ins, slot[e.outputs[0]]))
                    continue
                ok = prog.op_kernels.get(s.eqn)
                if ok is not None:
                    mod = load_module(ok.key, ok.source)
                    launches = [ar.launcher(k, ok.grid, ok.block, self._stream)
                                for k in ((mod.kernel, mod.kernel2) if ok.kind == "scatter_set"
                                          else (mod.kernel,))]
                    steps.append(_index_step(ar, ok, launches, ins, slot[e.outputs[0]],
                                             e.outputs[0].aval))
                    continue
                steps.append(_op_step(ar, e, ins, [slot[o] for o in e.outputs]))
        out_refs = []
        for a in g.outputs:
            out_refs.append(("const", a) if isinstance(a, Lit) else ("env", slot[a]))
        donors = [(i, g.inputs[i]) for i in self.donate if i < len(g.inputs)]
        self._views, self._scratch = views, scratch
        return steps, n_env, out_refs, donors

    def _gemm(self, e):
        """With ``FUNCTRACE_CUDA_GEMM=lt``: (product, shape) for a ``dot_general`` that is one
        matrix product, tuned now (``cublaslt``); else None (the op's impl: cupy's matmul)."""
        if self.gemm != "lt" or e.op is not dot_general_p:
            return None
        shape = gemm_shape_of(e)
        make = getattr(self.arrays, "gemm", None)
        if shape is None or make is None:
            return None
        try:
            with self.arrays.stream_scope(self._stream):
                return make(shape, self._stream), shape
        except Exception as exc:       # no libcublasLt, a failing call: cupy's path
            if not _GEMM_WARNED:
                _GEMM_WARNED.append(True)
                log.warning("functrace: cuBLASLt products unavailable, using cupy's matmul "
                            "(%s: %s)", type(exc).__name__, str(exc)[:300])
            return None

    def _new_pool(self):
        ar, prog = self.arrays, self._program
        storage = [ar.empty((max(n, 1),), np.uint8) for n in prog.buffers.sizes]
        vals, kargs = [], []
        for sl, shape, dt in self._views:
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            v = storage[sl][:n].view(dt).reshape(shape)
            vals.append(v)
            kargs.append(ar.kernel_arg(v))
        scratch = [ar.kernel_arg(ar.empty(shape, dt)) for shape, dt in self._scratch]
        dummies = {}
        return {"vals": vals, "kargs": kargs, "scratch": scratch, "dummies": dummies,
                "storage": storage}

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, *args):
        ar = self.arrays
        args = [a if ar.is_device(a) else ar.to_device(a) for a in args]
        if self._steps is None:
            self.calls += 1
            if self.eager or self.calls >= self.hot_after:
                self.compile()
            else:
                return self.interpret(args)
        if self._graph_state != "off":
            outs = self._graph_call(args)
            if outs is not None:
                return outs
        steps, n_env, out_refs, donors = self._steps
        try:
            pool = self._pools.pop()
        except IndexError:
            pool = self._new_pool()
        stream = self._stream
        token = self._host.enter()
        try:
            caller = ar.enter(stream)
            with ar.stream_scope(stream):
                env = list(args) + [None] * (n_env - len(args))
                ctx = _Ctx(ar, env, pool, _donors(ar, args, donors))
                for step in steps:
                    step(ctx)
                outs = [ar.own(self._const(r)) if k == "const" else env[r]
                        for k, r in out_refs]
            ar.leave(stream, caller)
            return outs
        finally:
            self._pools.append(pool)
            self._host.leave(token)

    # -- CUDA graphs ---------------------------------------------------------------------------
    def _graph_call(self, args):
        """With graphs on: the first compiled call runs as usual (None), the second captures
        the steps into a CUDA graph over static input buffers, and every call from then on
        copies its inputs into those buffers, replays the graph (one launch instead of one
        per kernel) and copies the outputs out. A capture that fails turns graphs off for this
        executable (logged): the steps run as before."""
        if self._graph_state == "pending":
            self._graph_state = "armed"          # the next call captures
            return None
        with self._graph_lock:
            if self._replay is None:
                if self._graph_state != "armed":
                    return None
                self._replay = self._capture(args)
                if self._replay is None:
                    self._graph_state = "off"
                    return None
            rep = self._replay
            ar, stream = self.arrays, self._stream
            caller = ar.enter(stream)
            with ar.stream_scope(stream):
                for buf, a in zip(rep.inputs, args):
                    ar.copy_into(buf, a, stream)
                ar.launch_graph(rep.graph, stream)
                outs = [ar.copy_out(o, stream) for o in rep.outputs]
            ar.leave(stream, caller)
            return outs

    def _capture(self, args):
        ar = self.arrays
        capture = getattr(ar, "capture", None)
        if capture is None:
            return None
        steps, n_env, out_refs, _ = self._steps
        stream = self._stream
        inputs = [ar.empty(tuple(a.shape), a.dtype) for a in args]
        pool = self._new_pool()

        def run():
            env = list(inputs) + [None] * (n_env - len(inputs))
            ctx = _Ctx(ar, env, pool, {})
            for step in steps:
                step(ctx)
            outs = [self._const(r) if k == "const" else env[r] for k, r in out_refs]
            return outs, env

        caller = ar.enter(stream)
        try:
            with ar.stream_scope(stream):
                graph, memory, (outs, env) = capture(stream, run)
        except Exception as exc:
            log.warning("functrace: CUDA graph capture failed, running the steps one by one "
                        "(%s: %s)", type(exc).__name__, str(exc)[:300])
            return None
        finally:
            ar.leave(stream, caller)
        return _Replay(graph, inputs, outs, env, pool, memory)

    def interpret(self, args) -> list:
        """The reference interpreter with the adapter's array module (cupy on a GPU); the
        sub-graphs of control-flow steps are interpreted the same way."""
        ar = self.arrays
        if self._stream is None:
            self._stream = ar.new_stream()
        caller = ar.enter(self._stream)
        token = self._host.enter(self._interpret_graph)
        try:
            with ar.stream_scope(self._stream):
                outs = [ar.own(o) for o in self._interpret_graph(self.graph, args)]
        finally:
            self._host.leave(token)
        ar.leave(self._stream, caller)
        return outs

    def _interpret_graph(self, graph: Graph, args) -> list:
        ar = self.arrays
        env: dict = dict(zip(graph.inputs, args))
        for e in graph.eqns:
            ins = [self._const(a) if isinstance(a, Lit) else env[a] for a in e.inputs]
            res = ar.run_impl(e.op, ins, dict(e.params))
            if e.op.multiple_results:
                env.update(zip(e.outputs, res))
            else:
                env[e.outputs[0]] = res
        return [self._const(a) if isinstance(a, Lit) else env[a] for a in graph.outputs]

    def release_buffers(self) -> None:
        """Free the pooled device buffers and a captured CUDA graph with its buffers (they
        are re-made by the next calls)."""
        self._pools.clear()
        with self._graph_lock:
            self._replay = None
            if self._graph_state != "off":
                self._graph_state = "armed"


class _Replay:
    """A captured CUDA graph and everything whose memory it reads and writes: the static input
    buffers, the outputs, the environment of the captured call, its pool, and the private
    memory pool the capture allocated from (temporaries freed after the capture stay
    reserved for the graph)."""

    __slots__ = ("graph", "inputs", "outputs", "env", "pool", "memory")

    def __init__(self, graph, inputs, outputs, env, pool, memory):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs
        self.env, self.pool, self.memory = env, pool, memory


def _graphs_default() -> bool:
    return os.environ.get("FUNCTRACE_CUDA_GRAPHS", "0") not in ("", "0")


def _gemm_default() -> str:
    """"cublas" (cupy's matmul) or "lt" (cuBLASLt, tuned per shape: ``cublaslt.Lt``)."""
    v = os.environ.get("FUNCTRACE_CUDA_GEMM", "") or "cublas"
    if v not in ("cublas", "lt"):
        raise ValueError(f"FUNCTRACE_CUDA_GEMM must be 'cublas' or 'lt', got {v!r}")
    return v


class _Ctx:
    """Per-call state: the environment, the pool, and kernel arguments made this call."""

    __slots__ = ("ar", "env", "pool", "donors", "kargs")

    def __init__(self, ar, env, pool, donors):
        self.ar, self.env, self.pool, self.donors = ar, env, pool, donors
        self.kargs: dict = {}

    def karg(self, i: int, shape):
        if shape is None and self.ar.passes_arrays:     # cupy: the array is the argument
            return self.env[i]
        k = (i, shape)
        a = self.kargs.get(k)
        if a is None:
            x = self.env[i]
            a = self.kargs[k] = self.ar.kernel_arg(x if shape is None else x.reshape(shape))
        return a


def _donors(ar, args, donors) -> dict:
    """Donated inputs whose memory an output may take: contiguous device arrays."""
    out = {}
    for i, v in donors:
        x = args[i]
        nbytes = v.aval.size * v.aval.dtype.itemsize
        if ar.is_device(x) and x.flags.c_contiguous and x.nbytes == nbytes and (
                not hasattr(x.flags, "writeable") or x.flags.writeable):
            out[i] = x.reshape(-1).view(np.uint8)
    return out


def _make_out(ctx: _Ctx, env_slot: int, plan):
    """Place a kernel output: returns the kernel argument and stores the value in env."""
    if plan[0] == "pool":
        _, kv, vv = plan
        ctx.env[env_slot] = ctx.pool["vals"][vv]
        return ctx.pool["kargs"][kv]
    _, kshape, dt, donor, vshape = plan
    x = None
    if donor is not None:
        d = ctx.donors.pop(donor, None)
        if d is not None:
            x = d.view(dt).reshape(kshape)
    if x is None:
        x = ctx.ar.empty(kshape, dt)
    ctx.env[env_slot] = x if kshape == vshape else x.reshape(vshape)
    return ctx.ar.kernel_arg(x)


def _kernel_step(ar, extents, la: Launch, launch, ops, outs, red, fin, parts):
    ext = list(extents)
    if red is not None:
        ext.append(la.nseg)

    def step(ctx: _Ctx):
        args = list(ext)
        karg = ctx.karg
        kargs = ctx.pool["kargs"]
        for op in ops:
            kind = op[0]
            args.append(op[1] if kind == "const" else kargs[op[1]] if kind == "pool"
                        else karg(op[1], op[2]))
        for sl, plan in outs:
            args.append(_make_out(ctx, sl, plan))
        if red is not None:
            r = _make_out(ctx, red[0], red[1])     # the kernel writes it flat: (nk,)
            args.append(r)
            if parts[0] == "scratch":
                p0 = ctx.pool["scratch"][parts[1]]
                p1 = ctx.pool["scratch"][parts[1] + 1]
            else:
                p0 = p1 = _dummy(ctx, parts[1])
            args += [p0, p1]
            launch(*args)
            if fin is not None:
                fin(la.nk, la.nseg, p0, p1, r)
            return
        launch(*args)
    return step


def _dummy(ctx: _Ctx, dt):
    d = ctx.pool["dummies"].get(dt)
    if d is None:
        d = ctx.pool["dummies"][dt] = ctx.ar.kernel_arg(ctx.ar.zeros((1, 1), dt))
    return d


def _index_step(ar, ok: OpKernel, launches, ins, out_slot, out_aval):
    """gather: ``out = x[idx]`` into a new array. scatter: a copy of ``x``, then the atomic
    adds of ``v`` (add), or the owner pass and the owners' writes (set: every target's owner,
    -1 before, is the last update to it)."""
    n = ok.n
    kind = ok.kind
    shape, dtype = out_aval.shape, out_aval.dtype

    def step(ctx: _Ctx):
        env = ctx.env
        args = [x[1] if x[0] == "const" else env[x[1]] for x in ins]
        if kind == "gather":
            out = ar.empty(shape, dtype)
            launches[0](*n, ar.kernel_arg(args[0]), *[ar.kernel_arg(a) for a in args[1:]],
                        ar.kernel_arg(out))
        else:
            out = ar.copy(args[0])
            kargs = [ar.kernel_arg(out), *[ar.kernel_arg(a) for a in args[2:]],
                     ar.kernel_arg(args[1])]
            if kind == "scatter_set":
                kargs.append(ar.kernel_arg(ar.full(shape, -1, np.int64)))
            for launch in launches:
                launch(*n, *kargs)
        env[out_slot] = out
    return step


_GEMM_WARNED: list = []


def _gemm_step(ar, gemm, e, ins, out_slot):
    """A matrix product into a new array; operands that are not C-contiguous (a strided
    input) take the op's impl."""
    fn, shape = gemm
    op, params = e.op, dict(e.params)
    rows_cols = (shape.m, shape.n)
    oshape, dt = e.outputs[0].aval.shape, e.outputs[0].aval.dtype

    def step(ctx: _Ctx):
        env = ctx.env
        x, y = [a[1] if a[0] == "const" else env[a[1]] for a in ins]
        if not (ar.contiguous(x) and ar.contiguous(y)):
            env[out_slot] = ar.run_impl(op, [x, y], params)
            return
        out = ar.empty(rows_cols, dt)
        fn(x, y, out)
        env[out_slot] = out.reshape(oshape)
    return step


def _op_step(ar, e, ins, out_slots):
    op, params = e.op, dict(e.params)
    multi = op.multiple_results

    def step(ctx: _Ctx):
        env = ctx.env
        args = [x[1] if x[0] == "const" else env[x[1]] for x in ins]
        res = ar.run_impl(op, args, params)
        if multi:
            for sl, r in zip(out_slots, res):
                env[sl] = r
        else:
            env[out_slots[0]] = res
    return step


# --------------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------------

# (graph, options) -> Executable, held weakly (as in numba_cpu): shared while a holder keeps
# it, never keeping a graph, its device buffers or its constants alive by itself
_executables = caches.LRU("numba_cuda.executables", scale=4, weak_values=True)


def compile(graph: Graph, *, donate: tuple = (), eager: bool = False,
            hot_after: int | None = None, arrays=None,
            config: LaunchConfig | None = None, graphs: bool | None = None) -> Executable:
    """The cached Executable of ``graph`` on the CUDA backend (equal graphs share one).

    ``arrays`` replaces the device-array adapter (default: ``default_arrays()``, resolved at
    the first call, so lowering needs no GPU); ``config`` the launch configuration;
    ``graphs`` replays the compiled steps as a CUDA graph (default: the environment variable
    ``FUNCTRACE_CUDA_GRAPHS=1``; see docs/gpu.md).
    """
    graphs = _graphs_default() if graphs is None else bool(graphs)
    key = (graph, tuple(donate), eager, hot_after, id(arrays) if arrays is not None else None,
           config, graphs, skinny_default() if config is None else None, _gemm_default())
    ex = _executables.get(key)
    if ex is None:
        ex = Executable(graph, donate=donate, eager=eager, hot_after=hot_after, arrays=arrays,
                        config=config, graphs=graphs)
        _executables[key] = ex
    return ex


def lower(graph: Graph, *, donate: tuple = (), config: LaunchConfig | None = None) -> Program:
    """The lowered program of ``graph``: plan, launches and sources; nothing compiled, no GPU
    needed (launches assume 132 SMs unless ``config.sm_count`` says otherwise)."""
    return Executable(graph, donate=donate, config=config).lower()


def clear_memory_caches() -> None:
    """Forget executables and loaded kernel modules (disk cache untouched;
    ``functrace.caches.clear_all`` does this and more)."""
    _executables.clear()
    clear_modules()

