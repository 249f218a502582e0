"""Lowering a graph for the CPU: constant folding, fusion plan, kernel specs, buffer plan, and
the generated Python driver (``Program``).

Owns ``Program`` (everything about one graph that can be decided without numba: which groups
become which kernels, which value lives in which pool slot, and the straight-line driver that
calls kernels, BLAS and numpy impls) and the inline numpy expressions of views and
contractions. Text only: never imports numba (``lower(...).source`` is free). Imports core,
passes, codegen and cpu_target.

The driver: one generated Python function per graph, locals instead of an environment, one
line per step, ``del`` after the last use of a numpy-allocated value; contractions become
``np.matmul(a, b, out=pool slot)`` with operand transposes/reshapes precomputed; views
(slice, reshape, transpose, broadcast) are inlined; kernel outputs that do not escape live in
the pool; operands of uncertain layout go through ``_c`` so calls hit the kernel
specialisation compiled at warm-up.
"""

from __future__ import annotations

import logging

import numpy as np

from ...core import Graph, Lit, Var
from ...passes.fusion import Group, OpStep
from ...passes.loops import inline_calls
from ...passes.memory import escaping_values, plan_buffers, step_io, view_bases
from ...passes.roll import roll_loops
from .. import reference
from ..lowering.plan import expand_unfused, fold_constants_any_size, fresh_result, plan_kernels
from .dots import dot_dims, dot_expr, operand_expr, small_dots_as_loops
from .kernels import is_cached_on_disk
from .loop import LoopStep, body_ok, loop_refusal
from .target import CPU, kernel_module_source
from .threads import SERIAL, Threads, kernel_threads, resolve

__all__ = ["Program", "KernelStep"]

log = logging.getLogger("functrace")

class KernelStep:
    """One group's kernel: its spec, binding and (serial) module source. ``threads`` > 1
    when the cost model gives it several threads: ``par_key``/``par_source`` are then its
    ``parallel=True`` variant (same results, bit for bit), which the executor loads later."""

    __slots__ = ("group", "spec", "binding", "key", "source", "n_eqns", "threads", "par_key",
                 "par_source")

    def __init__(self, group, spec, binding, key, source, threads=1, par=(None, None)):
        self.group, self.spec, self.binding = group, spec, binding
        self.key, self.source = key, source
        self.n_eqns = len(group.eqns)
        self.threads = threads
        self.par_key, self.par_source = par


class Program:
    """A lowered graph: fusion plan, kernel sources, buffer plan, and the driver source.

    Attributes:
        graph: the graph.
        plan: the ``FusionPlan``.
        kernels: one ``KernelStep`` per group that became a kernel.
        driver_source: the generated Python driver.
        source: every kernel's module source, then the driver, as one readable text.
    """

    def __init__(self, graph: Graph, parallel: Threads | bool | int | str = SERIAL,
                 donate: tuple = (), no_fuse: frozenset = frozenset(), roll: bool = True):
        # deterministic rewrites, so equation indices are stable across re-plans
        graph = expand_unfused(fold_constants_any_size(inline_calls(graph)), CPU)
        if roll:     # unrolled Python loops back into compiled loops (passes.roll)
            graph = roll_loops(graph, body_ok)
        graph = small_dots_as_loops(graph)
        self.roll = roll
        self.graph = graph
        # threads: a kernel is compiled parallel only when the cost model gives it more than
        # one thread (the shapes are static), so a graph of small kernels compiles as fast as
        # with threads off, and a kernel is never compiled twice
        self.threads = threads = resolve(parallel)
        self.parallel = threads.parallel
        self.donate = tuple(donate)

        def kernel(group, spec, binding):
            key, src = kernel_module_source(spec)
            n = kernel_threads(spec, binding.extents, threads)
            par = kernel_module_source(spec, True) if n > 1 else (None, None)
            return KernelStep(group, spec, binding, key, src, n, par)
        kp = plan_kernels(graph, CPU, kernel, no_fuse)
        self.unsupported: list[tuple[str, str]] = kp.unsupported   # (ops, reason) left out
        self.no_fuse = kp.no_fuse                   # equation indices kept out of kernels
        self.plan = kp.plan
        self.kernels = kp.kernels
        self._build_driver()

    # -- buffer plan + driver --------------------------------------------------------------
    def _build_driver(self):
        g = self.graph
        steps = self.plan.steps
        eqns = g.eqns
        reads, writes = step_io(g, steps, lambda s: self.kernels[s.id].binding)
        escaping = escaping_values(g, steps, fresh_result)
        kernel_out = set()
        for w, s in zip(writes, steps):
            if isinstance(s, Group):
                kernel_out.update(w)
            elif _dot_out_ok(eqns[s.eqn]):
                kernel_out.update(w)

        def poolable(v):
            return v in kernel_out and v not in escaping

        def nbytes(v):
            return int(v.aval.size * v.aval.dtype.itemsize)

        donated = [(i, g.inputs[i]) for i in self.donate if i < len(g.inputs)]

        def inplace_ok(k, v):
            s = steps[k]
            if not isinstance(s, Group):
                return False
            ks = self.kernels[s.id]
            if ks.spec.epilogue:
                # a softmax's epilogue reads its operands again after the row's exps were
                # stored: no output of the kernel may hold an operand
                return False
            # a shifted (fused pad) read is not elementwise: it never shares an output buffer
            return all(a is not v or (len(sp.axes) == ks.spec.ndim and
                       sp.axes == tuple(range(ks.spec.ndim)) and not sp.shifted)
                       for (a, _), sp in zip(ks.binding.operands, ks.spec.operands))
        # views made by numpy steps (reshape, transpose, slice, ...) keep their base's
        # storage alive until their own last use
        self.buffers = plan_buffers(reads, writes, g.outputs, poolable, nbytes, donated,
                                    inplace_ok, aliases=view_bases(g, steps, fresh_result))
        self._emit_driver()

    def _emit_driver(self):
        """Write the driver: donated inputs, then each step's lines and the values dead after
        it, then the returned list."""
        d = _DriverText(self.graph, self.plan, self.buffers)
        in_names = [d.name(v) for v in self.graph.inputs]
        d.donors(self.donate, in_names)
        for k, s in enumerate(self.plan.steps):
            if isinstance(s, Group):
                d.kernel_call(s, self.kernels[s.id])
            else:
                d.op_step(k, self.graph.eqns[s.eqn])
            d.free_dead(k)
        self.driver_source = d.text(in_names)
        self.pool_views: list[tuple[int, tuple, np.dtype]] = d.pool_views  # (slot, shape, dtype)
        self.loops: list = d.loops              # cpu_loop.LoopStep per loop equation
        self.kernel_names = d.kernel_names
        self.namespace = d.ns

    # -- public -----------------------------------------------------------------------------
    @property
    def source(self) -> str:
        parts = []
        for ks in self.kernels.values():
            parts.append(f"# ---- kernel ftk_{ks.key} (group {ks.group.id}, "
                         f"{ks.n_eqns} equations, loop {ks.binding.extents}) ----\n"
                         + ks.source)
            if ks.par_key is not None:
                parts.append(f"# ---- its parallel variant ftk_{ks.par_key} ({ks.threads} "
                             f"threads, same results) ----\n" + ks.par_source)
        for ls in self.loops:
            parts.append(f"# ---- loop {ls.name}: ftl_{ls.key} ({ls.length} trips) ----\n"
                         + ls.source)
        parts.append("# ---- driver (K<n> are the kernels above, in order of first use) ----\n"
                     + self.driver_source)
        return "\n".join(parts)

    def parallel_cached(self) -> bool:
        """Whether numba has every parallel kernel variant on disk already."""
        return all(is_cached_on_disk(ks.par_key) for ks in self.kernels.values()
                   if ks.par_key is not None)

    def all_cached(self) -> bool:
        """Whether numba has every kernel on disk already (no numba import)."""
        return all(is_cached_on_disk(ks.key) for ks in self.kernels.values()) and all(
            is_cached_on_disk(ls.key, "ftl_") for ls in self.loops)

    def __repr__(self):
        return (f"<Program: {len(self.plan.steps)} steps, {len(self.kernels)} kernels, "
                f"pool {self.buffers.pool_bytes} bytes>")


class _DriverText:
    """The driver being written: its namespace, the names of values and constants, its lines,
    and the pool views it unpacks (names are handed out in order of first use)."""

    def __init__(self, graph: Graph, plan, buffers):
        self.graph, self.plan, self.buffers = graph, plan, buffers
        self.ns: dict = {"np": np, "_own": reference._own, "_donor": _donor, "_c": _c}
        self.names: dict[Var, str] = {}
        self.lit_names: dict[int, str] = {}
        self.n_const = 0
        self.hoist: dict[str, str] = {}
        self.body: list[str] = []
        self.pool_views: list[tuple[int, tuple, np.dtype]] = []
        self.view_index: dict[tuple, str] = {}
        self.donor_names: dict[int, str] = {}
        self.kernel_names: dict[str, str] = {}
        self.loops: list = []

    # -- names ------------------------------------------------------------------------------
    def const(self, value) -> str:
        """A new namespace constant holding ``value``."""
        cname = f"c{self.n_const}"
        self.n_const += 1
        self.ns[cname] = value
        return cname

    def name(self, a) -> str:
        """The driver's name of an atom (a literal becomes a constant, once per object)."""
        if isinstance(a, Lit):
            if id(a) not in self.lit_names:
                self.lit_names[id(a)] = self.const(a.val)
            return self.lit_names[id(a)]
        if a not in self.names:
            self.names[a] = f"v{len(self.names)}"
        return self.names[a]

    def hoisted(self, atom, expr: str) -> str:
        """A transposed/reshaped view of a graph input or constant is made once per call
        (where first needed) and reused by every contraction that reads it."""
        if (isinstance(atom, Var) and atom not in self.graph.inputs) or "." not in expr:
            return expr
        if expr not in self.hoist:
            self.hoist[expr] = f"h{len(self.hoist)}"
            self.body.append(f"{self.hoist[expr]} = {expr}")
        return self.hoist[expr]

    def pool_view(self, slot: int, shape, dtype) -> str:
        """The name of pool slot ``slot`` viewed as ``shape`` and ``dtype``."""
        k = (slot, tuple(shape), np.dtype(dtype).str)
        if k not in self.view_index:
            self.view_index[k] = f"b{len(self.pool_views)}"
            self.pool_views.append((slot, tuple(shape), np.dtype(dtype)))
        return self.view_index[k]

    def out_array(self, v: Var, kshape) -> tuple[list[str], str]:
        """(line(s), kernel-view expr) for a value written by a kernel."""
        bp = self.buffers
        dt = v.aval.dtype
        name = self.name(v)
        if v in bp.slot_of:
            slot = bp.slot_of[v]
            kv = self.pool_view(slot, kshape, dt)
            lv = self.pool_view(slot, v.aval.shape, dt)
            return [f"{name} = {lv}"], kv
        ctor = f"np.empty({tuple(kshape)!r}, np.{dt.name})"
        if v in bp.donated_slot:
            d = self.donor_names[bp.donated_slot[v]]
            donated = f"{d}.view(np.{dt.name}).reshape({tuple(kshape)!r})"
            ctor = f"({ctor} if {d} is None else {donated})"
        if tuple(kshape) == v.aval.shape:
            return [f"{name} = {ctor}"], name
        return [f"{name}_k = {ctor}", f"{name} = {name}_k.reshape({v.aval.shape!r})"], \
            f"{name}_k"

    # -- lines ------------------------------------------------------------------------------
    def donors(self, donate: tuple, in_names: list[str]) -> None:
        """A ``d<i>`` line per donated input: its memory as bytes, or None."""
        g = self.graph
        for i in donate:
            if i < len(g.inputs):
                v = g.inputs[i]
                self.donor_names[i] = f"d{i}"
                self.body.append(
                    f"d{i} = _donor({in_names[i]}, {v.aval.size * v.aval.dtype.itemsize})")

    def kernel_call(self, s: Group, ks: KernelStep) -> None:
        """The output arrays of a group's kernel, then the call."""
        kn = self.kernel_names.setdefault(ks.key, f"K{len(self.kernel_names)}")
        args = [str(n) for n in ks.binding.extents]
        args += [self._kernel_operand(atom, rshape) for atom, rshape in ks.binding.operands]
        written = list(ks.binding.outputs)
        if ks.binding.reduction is not None:
            written.append(ks.binding.reduction)
        for v, kshape in written:
            lines, kv = self.out_array(v, kshape)
            self.body.extend(lines)
            args.append(kv)
        ops = " ".join(self.graph.eqns[i].op.name for i in s.eqns)
        self.body.append(f"{kn}({', '.join(args)})   # group {s.id}: {ops[:70]}")

    def _kernel_operand(self, atom, rshape) -> str:
        """The expression a kernel reads an operand through."""
        if isinstance(atom, Lit):   # a writeable C copy: the warmed-up layout
            return self.const(np.array(atom.val.reshape(rshape), order="C"))
        expr = self.name(atom)
        prod = self.plan.producer.get(atom)
        if isinstance(prod, OpStep) and not _c_result(self.graph.eqns[prod.eqn]):
            # views (slices, broadcasts, LAPACK results) are made C-contiguous and
            # writeable, so every call hits the kernel compiled at warm-up
            expr = f"_c({expr})"
        if tuple(rshape) != atom.aval.shape:
            expr = f"{expr}.reshape({tuple(rshape)!r})"
        return expr

    def op_step(self, k: int, e) -> None:
        """The line(s) of op step ``k``: a contraction, a loop, an inlined view, or the op's
        numpy impl (bound in the namespace as ``f<k>``, its params as ``P<k>``)."""
        self.ns[f"f{k}"] = e.op.impl
        pname = ""
        if e.params:
            self.ns[f"P{k}"] = dict(e.params)
            pname = f", **P{k}"
        in_exprs = [self.name(a) for a in e.inputs]
        ins = ", ".join(in_exprs)
        outs = ", ".join(self.name(o) for o in e.outputs)
        if e.op.multiple_results:
            outs += ","
        if e.op.name == "dot_general":
            self._dot_call(e, outs)
        elif e.op.name == "loop" and (why := loop_refusal(e)) is None:
            self._loop_call(e, ins, outs)
        elif (view := _view_expr(e, in_exprs)) is not None:
            self.body.append(f"{outs} = {view}   # {e.op.name}")
        else:
            if e.op.name == "loop":
                log.info("functrace: the loop at %s (%d trips) runs as a Python loop over its "
                         "body's kernels, not as one compiled loop: %s", e.source or "?",
                         e.params["length"], why)
            call = f"{ins}{pname}" if ins else pname[2:]
            self.body.append(f"{outs} = f{k}({call})   # {e.op.name}")

    def _dot_call(self, e, outs: str) -> None:
        """A contraction as ``np.matmul``, into its pool slot when it has one."""
        ((pa, sa), (pb, sb)), mn = dot_dims(e)
        xa, ya = e.inputs
        ops_ = [self.hoisted(xa, operand_expr(self.name(xa), xa.aval, pa, sa)),
                self.hoisted(ya, operand_expr(self.name(ya), ya.aval, pb, sb))]
        v = e.outputs[0]
        slot_of = self.buffers.slot_of
        out2 = self.pool_view(slot_of[v], mn, v.aval.dtype) if v in slot_of else None
        expr = dot_expr(e, ops_, out2)
        if out2 is not None:
            self.body.append(f"{expr}   # dot_general")
            lv = self.pool_view(slot_of[v], v.aval.shape, v.aval.dtype)
            self.body.append(f"{outs} = {lv}")
        else:
            self.body.append(f"{outs} = {expr}   # dot_general")

    def _loop_call(self, e, ins: str, outs: str) -> None:
        """A call of the loop's runner ``L<n>`` (interpreted until the compiled loop loads)."""
        ls = LoopStep(e, f"L{len(self.loops)}")
        self.loops.append(ls)
        self.ns[ls.name] = _interpreted(e)
        self.body.append(f"{outs} = {ls.name}({ins})   # loop: {ls.length} trips, "
                         f"{ls.n_kernels} kernels")

    def free_dead(self, k: int) -> None:
        """``del`` the values numpy allocated once their last use (step ``k``) has passed."""
        bp, g = self.buffers, self.graph
        dead = [self.name(v) for v in bp.frees_after[k]
                if v not in bp.slot_of and v in self.names and v not in g.inputs]
        if dead:
            self.body.append(f"del {', '.join(dead)}")

    def text(self, in_names: list[str]) -> str:
        """The driver's source: the signature, pool views unpacked, the body, the return."""
        outs = [self._result(a) for a in self.graph.outputs]
        head = [f"def driver(pool, {', '.join(in_names)}):" if in_names else "def driver(pool):"]
        if self.pool_views:
            n = len(self.pool_views)
            head.append(f"    {', '.join(f'b{j}' for j in range(n))}{',' if n == 1 else ''} = pool")
        return "\n".join(head + ["    " + line for line in self.body] +
                         [f"    return [{', '.join(outs)}]"]) + "\n"

    def _result(self, a) -> str:
        """A returned value: owned by the caller unless a kernel wrote it or it is an input."""
        if isinstance(a, Lit):
            return f"_own({self.name(a)})"
        if a in self.graph.inputs:
            return self.name(a)
        producer = self.plan.producer.get(a)
        return self.name(a) if isinstance(producer, Group) else f"_own({self.name(a)})"


def _interpreted(e):
    """An op step's numpy impl with its params bound."""
    impl, params = e.op.impl, dict(e.params)
    return lambda *args: impl(*args, **params)


def _c_result(e) -> bool:
    """Whether an op step's results are C-contiguous and writeable whenever its inputs are
    (the declaration's ``c_result``)."""
    c = e.op.c_result
    return c(e) if callable(c) else bool(c)


def _c(x):
    """``x`` as a C-contiguous, writeable array (a copy only when it is not one already)."""
    if x.flags.c_contiguous and x.flags.writeable:
        return x
    return np.array(x, order="C")


def _donor(x, nbytes):
    """A donated input's memory as flat bytes, when it is a writeable C-contiguous numpy
    array (a donated view's memory is overwritten too: the caller gave it up)."""
    if (type(x) is np.ndarray and x.flags.c_contiguous and x.flags.writeable
            and x.nbytes == nbytes):
        return x.reshape(-1).view(np.uint8)
    return None


def _dot_out_ok(e) -> bool:
    """dot_general equations that the driver runs into a pooled output buffer."""
    if e.op.name != "dot_general":
        return False
    dt = e.outputs[0].aval.dtype
    return dt.kind in "fc" and e.inputs[0].aval.dtype == dt


def _view_expr(e, ins) -> str | None:
    """Inline source for cheap view/shape ops (no function call, no kwargs)."""
    name, p = e.op.name, e.params
    x = e.inputs[0].aval if e.inputs else None
    if name == "reshape":
        return f"{ins[0]}.reshape({p['new_sizes']!r})"
    if name == "transpose":
        return f"{ins[0]}.transpose({p['permutation']!r})"
    if name == "slice":
        idx = ", ".join(f"{a}:{b}" + (f":{c}" if c != 1 else "")
                        for a, b, c in zip(p["start_indices"], p["limit_indices"], p["strides"]))
        return f"{ins[0]}[{idx}{',' if len(p['strides']) == 1 else ''}]"
    if name == "broadcast_in_dim" and not isinstance(e.inputs[0], Lit):
        expanded = [1] * len(p["shape"])
        for i, d in enumerate(p["broadcast_dimensions"]):
            expanded[d] = x.shape[i]
        return f"np.broadcast_to({ins[0]}.reshape({tuple(expanded)!r}), {p['shape']!r})"
    return None
