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
from ...passes.loops import inline_checkpoints
from ...passes.memory import escaping_values, plan_buffers, step_io, view_bases
from ...passes.roll import roll_loops
from .. import reference
from ..lowering.plan import fold_constants_any_size, fresh_result, plan_kernels
from .dots import dot_dims, dot_expr, operand_expr, small_dots_as_loops
from .kernels import is_cached_on_disk
from .loop import LoopStep, body_ok
from .target import CPU, kernel_module_source

__all__ = ["Program", "KernelStep"]

log = logging.getLogger("functrace")

class KernelStep:
    __slots__ = ("group", "spec", "binding", "key", "source", "n_eqns")

    def __init__(self, group, spec, binding, key, source):
        self.group, self.spec, self.binding = group, spec, binding
        self.key, self.source = key, source
        self.n_eqns = len(group.eqns)


class Program:
    """A lowered graph: fusion plan, kernel sources, buffer plan, and the driver source.

    Attributes:
        graph: the graph.
        plan: the ``FusionPlan``.
        kernels: one ``KernelStep`` per group that became a kernel.
        driver_source: the generated Python driver.
        source: every kernel's module source, then the driver, as one readable text.
    """

    def __init__(self, graph: Graph, parallel: bool = False, donate: tuple = (),
                 no_fuse: frozenset = frozenset(), roll: bool = True):
        # deterministic rewrites, so equation indices are stable across re-plans
        graph = fold_constants_any_size(inline_checkpoints(graph))
        if roll:     # unrolled Python loops back into compiled loops (passes.roll)
            graph = roll_loops(graph, body_ok)
        graph = small_dots_as_loops(graph)
        self.roll = roll
        self.graph = graph
        self.parallel = parallel
        self.donate = tuple(donate)

        def kernel(group, spec, binding):
            key, src = kernel_module_source(spec, parallel)
            return KernelStep(group, spec, binding, key, src)
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
            # a shifted (fused pad) read is not elementwise: it never shares an output buffer
            return all(a is not v or (len(sp.axes) == ks.spec.ndim and
                       sp.axes == tuple(range(ks.spec.ndim)) and not sp.shifted)
                       for (a, _), sp in zip(ks.binding.operands, ks.spec.operands))
        # views made by numpy steps (reshape, transpose, slice, ...) keep their base's
        # storage alive until their own last use
        self.buffers = plan_buffers(reads, writes, g.outputs, poolable, nbytes, donated,
                                    inplace_ok, aliases=view_bases(g, steps, fresh_result))
        self._emit_driver(reads, writes, escaping)

    def _emit_driver(self, reads, writes, escaping):
        g = self.graph
        eqns = g.eqns
        bp = self.buffers
        ns: dict = {"np": np, "_own": reference._own, "_donor": _donor, "_c": _c}
        names: dict[Var, str] = {}
        lit_names: dict[int, str] = {}
        n_const = [0]

        def new_const(value):
            cname = f"c{n_const[0]}"
            n_const[0] += 1
            ns[cname] = value
            return cname

        def nm(a):
            if isinstance(a, Lit):
                if id(a) not in lit_names:
                    lit_names[id(a)] = new_const(a.val)
                return lit_names[id(a)]
            if a not in names:
                names[a] = f"v{len(names)}"
            return names[a]

        in_names = [nm(v) for v in g.inputs]
        hoist: dict[str, str] = {}

        def hoisted(atom, expr):
            """A transposed/reshaped view of a graph input or constant is made once per call
            (where first needed) and reused by every contraction that reads it."""
            if (isinstance(atom, Var) and atom not in g.inputs) or "." not in expr:
                return expr
            if expr not in hoist:
                hoist[expr] = f"h{len(hoist)}"
                body.append(f"{hoist[expr]} = {expr}")
            return hoist[expr]
        body: list[str] = []
        self.pool_views: list[tuple[int, tuple, np.dtype, str]] = []   # (slot, shape, dtype)
        view_index: dict[tuple, str] = {}

        def pool_view(slot, shape, dtype):
            k = (slot, tuple(shape), np.dtype(dtype).str)
            if k not in view_index:
                view_index[k] = f"b{len(self.pool_views)}"
                self.pool_views.append((slot, tuple(shape), np.dtype(dtype)))
            return view_index[k]

        donor_names = {}
        for i in self.donate:
            if i < len(g.inputs):
                v = g.inputs[i]
                donor_names[i] = f"d{i}"
                body.append(f"d{i} = _donor({in_names[i]}, {v.aval.size * v.aval.dtype.itemsize})")

        def out_array(v, kshape):
            """(line(s), kernel-view expr) for a value written by a kernel."""
            dt = v.aval.dtype
            name = nm(v)
            if v in bp.slot_of:
                slot = bp.slot_of[v]
                kv = pool_view(slot, kshape, dt)
                lv = pool_view(slot, v.aval.shape, dt)
                return [f"{name} = {lv}"], kv
            ctor = f"np.empty({tuple(kshape)!r}, np.{dt.name})"
            if v in bp.donated_slot:
                d = donor_names[bp.donated_slot[v]]
                donated = f"{d}.view(np.{dt.name}).reshape({tuple(kshape)!r})"
                ctor = f"({ctor} if {d} is None else {donated})"
            if tuple(kshape) == v.aval.shape:
                return [f"{name} = {ctor}"], name
            return [f"{name}_k = {ctor}", f"{name} = {name}_k.reshape({v.aval.shape!r})"], \
                f"{name}_k"

        kernel_names = {}
        self.loops: list = []               # cpu_loop.LoopStep per loop equation
        for k, s in enumerate(self.plan.steps):
            if isinstance(s, Group):
                ks = self.kernels[s.id]
                kn = kernel_names.setdefault(ks.key, f"K{len(kernel_names)}")
                args = [str(n) for n in ks.binding.extents]
                for atom, rshape in ks.binding.operands:
                    shape = atom.aval.shape
                    if isinstance(atom, Lit):   # a writeable C copy: the warmed-up layout
                        args.append(new_const(np.array(atom.val.reshape(rshape), order="C")))
                        continue
                    expr = nm(atom)
                    prod = self.plan.producer.get(atom)
                    if isinstance(prod, OpStep) and not _c_result(eqns[prod.eqn]):
                        # views (slices, broadcasts, LAPACK results) are made C-contiguous
                        # and writeable, so every call hits the kernel compiled at warm-up
                        expr = f"_c({expr})"
                    if tuple(rshape) != shape:
                        expr = f"{expr}.reshape({tuple(rshape)!r})"
                    args.append(expr)
                for v, kshape in ks.binding.outputs:
                    lines, kv = out_array(v, kshape)
                    body.extend(lines)
                    args.append(kv)
                if ks.binding.reduction is not None:
                    v, kshape = ks.binding.reduction
                    lines, kv = out_array(v, kshape)
                    body.extend(lines)
                    args.append(kv)
                ops = " ".join(eqns[i].op.name for i in s.eqns)
                body.append(f"{kn}({', '.join(args)})   # group {s.id}: {ops[:70]}")
            else:
                e = eqns[s.eqn]
                fname = f"f{k}"
                ns[fname] = e.op.impl
                pname = ""
                if e.params:
                    ns[f"P{k}"] = dict(e.params)
                    pname = f", **P{k}"
                ins = ", ".join(nm(a) for a in e.inputs)
                outs = ", ".join(nm(o) for o in e.outputs)
                if e.op.multiple_results:
                    outs += ","
                in_exprs = [nm(a) for a in e.inputs]
                if e.op.name == "dot_general":
                    ((pa, sa), (pb, sb)), mn = dot_dims(e)
                    xa, ya = e.inputs
                    ops_ = [hoisted(xa, operand_expr(nm(xa), xa.aval, pa, sa)),
                            hoisted(ya, operand_expr(nm(ya), ya.aval, pb, sb))]
                    v = e.outputs[0]
                    out2 = None
                    if v in bp.slot_of:
                        out2 = pool_view(bp.slot_of[v], mn, v.aval.dtype)
                    expr = dot_expr(e, ops_, out2)
                    if out2 is not None:
                        body.append(f"{expr}   # dot_general")
                        lv = pool_view(bp.slot_of[v], v.aval.shape, v.aval.dtype)
                        body.append(f"{outs} = {lv}")
                    else:
                        body.append(f"{outs} = {expr}   # dot_general")
                elif e.op.name == "loop" and body_ok(e):
                    ls = LoopStep(e, f"L{len(self.loops)}")
                    self.loops.append(ls)
                    ns[ls.name] = _interpreted(e)     # until the compiled loop is loaded
                    body.append(f"{outs} = {ls.name}({ins})   # loop: {ls.length} trips, "
                                f"{ls.n_kernels} kernels")
                elif _view_expr(e, in_exprs) is not None:
                    body.append(f"{outs} = {_view_expr(e, in_exprs)}   # {e.op.name}")
                else:
                    call = f"{ins}{pname}" if ins else pname[2:]
                    body.append(f"{outs} = {fname}({call})   # {e.op.name}")
            # drop values numpy allocated once their last use has passed
            dead = [nm(v) for v in bp.frees_after[k] if v not in bp.slot_of and v in names
                    and v not in g.inputs]
            if dead:
                body.append(f"del {', '.join(dead)}")
        outs = []
        for a in g.outputs:
            if isinstance(a, Lit):
                outs.append(f"_own({nm(a)})")
            elif a in g.inputs:
                outs.append(nm(a))
            else:
                producer = self.plan.producer.get(a)
                outs.append(nm(a) if isinstance(producer, Group) else f"_own({nm(a)})")
        head = [f"def driver(pool, {', '.join(in_names)}):" if in_names else "def driver(pool):"]
        if self.pool_views:
            head.append(f"    {', '.join(f'b{j}' for j in range(len(self.pool_views)))}"
                        f"{',' if len(self.pool_views) == 1 else ''} = pool")
        text = "\n".join(head + ["    " + line for line in body] +
                         [f"    return [{', '.join(outs)}]"]) + "\n"
        self.driver_source = text
        self.kernel_names = kernel_names
        self.namespace = ns

    # -- public -----------------------------------------------------------------------------
    @property
    def source(self) -> str:
        parts = []
        for ks in self.kernels.values():
            parts.append(f"# ---- kernel ftk_{ks.key} (group {ks.group.id}, "
                         f"{ks.n_eqns} equations, loop {ks.binding.extents}) ----\n"
                         + ks.source)
        for ls in self.loops:
            parts.append(f"# ---- loop {ls.name}: ftl_{ls.key} ({ls.length} trips) ----\n"
                         + ls.source)
        parts.append("# ---- driver (K<n> are the kernels above, in order of first use) ----\n"
                     + self.driver_source)
        return "\n".join(parts)

    def all_cached(self) -> bool:
        """Whether numba has every kernel on disk already (no numba import)."""
        return all(is_cached_on_disk(ks.key) for ks in self.kernels.values()) and all(
            is_cached_on_disk(ls.key, "ftl_") for ls in self.loops)

    def __repr__(self):
        return (f"<Program: {len(self.plan.steps)} steps, {len(self.kernels)} kernels, "
                f"pool {self.buffers.pool_bytes} bytes>")


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
