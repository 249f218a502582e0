"""Lowering a ``loop`` equation (``ops.control.loop_p``, made by ``passes.roll``) for the CPU:
the whole loop becomes one numba function that runs every trip in compiled code.

Owns ``LoopStep`` (the module source of one loop: a single ``loop`` function whose trip
runs the body's fused kernels, inlined, and its BLAS contractions), ``plan_body`` (the body's
kernel plan, cached per body graph), ``body_ok`` (``passes.roll`` asks it before rolling a
run), ``loop_refusal`` (why not), ``make_runner`` (the Python wrapper the driver calls) and
``warm_up``. Text only, like ``cpu_driver``: never imports numba. Imports core, ops,
passes, codegen, cpu_target and cpu_driver.

Layout inside the compiled loop: every value is a flat, C-contiguous 1-d buffer, reshaped (a
free view in numba) to whatever shape a kernel reads it with. Constants and initial carries
are flattened once per call; per-trip reads are gathered once per call into a ``(trips,
size)`` array whose row ``j`` is trip ``j``'s slice; stacked results are written straight
into row ``j`` of their ``(trips, size)`` output. Carries live in two buffers that swap
after every trip (a trip reads the old one and writes the new one), except a carry that is
also a stacked result or a per-trip read: the next trip reads it from row ``j - 1``. The
runner copies the initial carries in with numpy, and one buffer of each pair is the fresh
output the final value ends in (which one, by the trip count's parity): the numba function
copies nothing in or out (each copy it made cost compile time). Body
values nobody outside the trip reads go to scratch buffers. All buffers come from the caller
(``np.empty`` inside the numba function costs compile time).
"""

from __future__ import annotations

import ast
import linecache

import numpy as np

from ... import caches
from ...core import Eqn, Graph, Lit, Var
from ...ops.control import loop_slices
from ...passes.fusion import Group, OpStep, plan_fusion
from ...passes.loops import inline_calls
from ..lowering.plan import expand_unfused, fold_constants_any_size
from ..lowering.spec import Unsupported, build_spec, spec_key
from .dots import dot_dims, small_dots_as_loops
from .render import render_cpu
from .target import (
    CODEGEN_VERSION,
    CPU,
    JIT_FLAGS,
    TARGET,
    fusible,
    module_imports,
    vecmath_hash,
)

__all__ = ["LoopStep", "plan_body", "body_ok", "loop_refusal", "make_runner", "warm_up"]

# body graph -> _BodyPlan | reason; weak keys: a plan keeps the parts of its graph it uses,
# never the Graph object itself (a value referring to its weak key would keep it alive)
_plans = caches.LRU("cpu_loop.body_plans", weak_keys=True)


def plan_body(body: Graph):
    """The kernel plan of a loop body, or an ``Unsupported`` reason (str) when a trip cannot
    run as compiled code (cached per body graph, held weakly)."""
    hit = _plans.get(body)
    if hit is None:
        try:
            hit = _BodyPlan(body)
        except Unsupported as exc:
            hit = str(exc)
        _plans[body] = hit
    return hit


class _Parts:
    """A graph's inputs, equations and outputs without the Graph object (see ``_plans``)."""

    __slots__ = ("inputs", "eqns", "outputs")

    def __init__(self, g: Graph):
        self.inputs, self.eqns, self.outputs = g.inputs, g.eqns, g.outputs


def body_ok(eqn) -> bool:
    """Whether a ``loop`` equation can run as a compiled loop (``passes.roll`` asks before it
    rolls a run: a refused run stays unrolled)."""
    return loop_refusal(eqn) is None


def loop_refusal(eqn) -> str | None:
    """Why a ``loop`` equation cannot run as one compiled loop (the op that stops it, and
    where the user wrote it), or None when it can."""
    try:
        LoopStep(eqn, "L")
    except Unsupported as exc:
        return str(exc)
    return None


class _BodyPlan:
    """The body's fusion plan and kernel specs; every step must be a kernel or a reshape."""

    def __init__(self, body: Graph):
        g = expand_unfused(fold_constants_any_size(inline_calls(body)), CPU)
        g = small_dots_as_loops(g)
        for _ in range(4):
            plan = plan_fusion(g, fusible, lambda e: True)
            views = {s.eqn for s in plan.steps if isinstance(s, OpStep)
                     and g.eqns[s.eqn].op.strided_view}
            if not views:
                break
            g = _materialise(g, views)
        self.graph = _Parts(g)
        self.steps = []
        for s in plan.steps:
            if isinstance(s, Group):
                spec, binding = build_spec(g, s, TARGET, plan.resolve)
                if spec.reduction is None and not spec.outputs:
                    raise Unsupported("a kernel without outputs")
                self.steps.append(("kernel", spec, binding, s))
                continue
            e = g.eqns[s.eqn]
            if e.op.name == "reshape" and isinstance(e.inputs[0], Var):
                self.steps.append(("alias", e.outputs[0], e.inputs[0]))
                continue
            if e.op.name == "dot_general":
                self.steps.append(("dot", e, _blas_dot(e)))
                continue
            raise Unsupported(f"{e.op.name}{_where(e)} has no compiled form inside a loop")
        for o in g.outputs:
            if isinstance(o, Lit):
                raise Unsupported("a literal loop result")


def _where(e) -> str:
    """`` (file:line: code)`` of the user's line that recorded ``e``, or ``""``."""
    src = e.source
    if src is None:
        return ""
    code = src.line.strip() if src.line else linecache.getline(src.filename,
                                                                src.lineno).strip()
    return f" ({src}: {code})" if code else f" ({src})"


# views a trip may need as a value of its own (a contraction's operand, a result) whose op is
# a ``strided_view`` become a copy kernel: a flat buffer cannot be a broadcast or a transpose


def _materialise(g: Graph, views: set) -> Graph:
    """``g`` with each view equation in ``views`` followed by an identity copy
    (``stop_gradient``, an elementwise kernel over the view's shape that the view folds
    into); readers keep reading the same Var, now the copy's result."""
    from ... import ops
    eqns = []
    for i, e in enumerate(g.eqns):
        if i not in views:
            eqns.append(e)
            continue
        y = e.outputs[0]
        tmp = Var(y.aval)
        eqns.append(Eqn(e.op, e.inputs, e.params, [tmp], e.source))
        eqns.append(Eqn(ops.stop_gradient_p, [tmp], {}, [y], e.source))
    return Graph(g.inputs, eqns, g.outputs)


def _blas_dot(e):
    """The matmul layout of a contraction too large for ``small_dots_as_loops``, run inside
    the compiled loop by numba's ``np.dot(a, b, out)`` (BLAS through SciPy): operands are the
    flat buffers viewed as a C matrix or its transpose, so nothing is copied."""
    import importlib.util
    if importlib.util.find_spec("scipy") is None:
        raise Unsupported("a contraction in a loop body needs SciPy (numba calls BLAS "
                          "through it)")
    x, y = e.inputs
    dt = e.outputs[0].aval.dtype
    if dt.kind != "f" or x.aval.dtype != dt or y.aval.dtype != dt:
        raise Unsupported("a non-float contraction in a loop body")
    ((pa, sa), (pb, sb)), mn = dot_dims(e)
    if len(sa) > 2 or len(sb) > 2:
        raise Unsupported("a batched contraction in a loop body")
    return (_matrix_view(x.aval, pa, sa), _matrix_view(y.aval, pb, sb), tuple(mn))


def _matrix_view(aval, perm, shape):
    """How a flat buffer becomes a matmul operand: ``(shape, transposed)`` where the buffer is
    reshaped to ``shape`` (its logical C layout, axes already in ``perm`` order) and then
    ``.T``-ed, or None when that needs a copy."""
    shape = tuple(int(n) for n in shape)
    if perm == tuple(range(aval.ndim)):
        return shape, False
    # a transpose is a free view only as the transpose of a C matrix: the operand's axes
    # split into two contiguous blocks that swap places
    for cut in range(1, aval.ndim):
        if perm == tuple(range(cut, aval.ndim)) + tuple(range(cut)) and len(shape) == 2:
            rows = int(np.prod(aval.shape[:cut], dtype=np.int64))
            cols = int(np.prod(aval.shape[cut:], dtype=np.int64))
            if shape == (cols, rows):
                return (rows, cols), True
    raise Unsupported("a contraction operand that is not a matrix view")


def _copy(dst: str, src: str) -> list[str]:
    """Lines copying flat buffer ``src`` into ``dst``: a call of ``views.copy`` (a loop
    written here costs compile time in every module; numba compiles the generic ``dst[:] =
    src`` slice assignment in ~1.6 s)."""
    return [f"av.copy({dst}, {src})"]


def _inline(kernel_text: str, args: list[str], sfx: str) -> list[str]:
    """The body of a rendered kernel function as lines of the loop function: parameters bound
    to ``args``, every local renamed with ``sfx`` (one numba function per loop module compiles
    ~0.15 s faster than a loop calling separate kernel functions)."""
    fn = ast.parse(kernel_text).body[0]
    params = [a.arg for a in fn.args.args]
    local = set(params) | {n.id for n in ast.walk(fn)
                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    body = fn.body
    if not isinstance(body[-1], ast.Return) or any(
            isinstance(n, ast.Return) for st in body[:-1] for n in ast.walk(st)):
        raise Unsupported("a kernel that returns early cannot be inlined")

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in local:
                return ast.copy_location(ast.Name(node.id + sfx, node.ctx), node)
            if node.id == "vm":         # vecmath: called, not inlined (``vecmath_calls``)
                return ast.copy_location(ast.Name("vc", node.ctx), node)
            return node
    lines = [f"{p}{sfx} = {a}" for p, a in zip(params, args)]
    for st in body[:-1]:
        lines.extend(ast.unparse(Rename().visit(st)).splitlines())
    return lines


def _rows(m) -> str:
    """The stacked array a carry is read back from: ``Y<m>`` (a result) or ``X<k>``."""
    return f"Y{m}" if isinstance(m, int) else m


def _view(name: str, shape) -> str:
    """A flat buffer as the ``shape`` a kernel reads (1-d: the buffer itself; else a view
    made by ``views.shaped``: numba's reshape costs compile time at every call site)."""
    if len(shape) == 1:
        return name
    return f"av.shaped({name}, {tuple(int(n) for n in shape)!r})"


class LoopStep:
    """One ``loop`` equation lowered: its module source, content key and call layout.

    Attributes:
        key: content hash of ``source`` (the module file is ``ftl_<key>.py``).
        source: the generated module (kernels ``k<n>`` and the ``loop`` function).
        name: the driver's name for the runner (``L<n>``).
    """

    def __init__(self, eqn, name: str):
        p = eqn.params
        bp = plan_body(p["body"])
        if isinstance(bp, str):
            raise Unsupported(bp)
        self.name = name
        self.length = int(p["length"])
        self.n_consts, self.n_carry = p["n_consts"], p["n_carry"]
        self.xs = p["xs"]
        self.in_avals = [a.aval for a in eqn.inputs]
        self.out_avals = [o.aval for o in eqn.outputs]
        g = bp.graph
        nc, nk = self.n_consts, self.n_carry
        carry_out, ys = list(g.outputs[:nk]), list(g.outputs[nk:])
        # a per-trip read of row T-1-j of a whole array (scan with reverse=True, and the
        # reverse loop of every scan gradient) indexes that row: no reversed copy per call
        rows = [_row_read(spec, a.shape, self.length) for spec, a in
                zip(self.xs, self.in_avals[nc + nk:])]
        trip = _Trip(g.inputs, nc, nk, rows)
        stacked_carry = trip.place_results(carry_out, ys)
        for step in bp.steps:
            trip.step(step, g)
        _stack_per_trip_carries(carry_out, trip.name_of, stacked_carry)
        copies = _result_copies(carry_out, ys, trip.name_of, stacked_carry)
        self.lits: list[np.ndarray] = trip.lits
        n_x = len(g.inputs) - nc - nk
        # the initial value of a carry with buffers is copied in, and its final value read
        # out, by the runner (make_runner): only a carry read back from a stack is passed
        self.stacked_carry = stacked_carry
        params = (["T"] + [f"c{k}" for k in range(nc)] + [f"i{k}" for k in stacked_carry]
                  + [f"X{k}" for k in range(n_x)] + [f"Y{m}" for m in range(len(ys))]
                  + [f"L{q}" for q in range(len(self.lits))])
        # carry pairs and scratch come from the caller (np.empty in numba costs compile time)
        self.swapped = [k for k in range(nk) if k not in stacked_carry]
        params += [f"{b}{k}" for k in self.swapped for b in ("cur", "nxt")]
        self.buffers = [(nm, max(size, 1), np.dtype(dt)) for nm, size, dt in trip.scratch]
        params += [nm for nm, _, _ in self.buffers]
        text = _module_text(_loop_lines(params, self.swapped, stacked_carry,
                                        trip.calls + copies))
        self.key = spec_key(text)
        self.source = text.replace("# functrace loop", f"# functrace loop {self.key}", 1)
        self.n_kernels = trip.n_kernels
        self.y_avals = [v.aval for v in ys]
        self.carry_avals = [v.aval for v in carry_out]


class _Trip:
    """One trip's code being written: where each body value lives (``name_of``: a flat
    buffer, or a row ``[j]`` of a stacked one), the scratch buffers and literals it needs, and
    its lines (inlined kernels and BLAS calls)."""

    def __init__(self, ins, nc: int, nk: int, rows: list):
        self.name_of: dict[Var, str] = {}
        for k, v in enumerate(ins[:nc]):
            self.name_of[v] = f"c{k}"
        for k, v in enumerate(ins[nc:nc + nk]):
            self.name_of[v] = f"cur{k}"
        for k, v in enumerate(ins[nc + nk:]):
            self.name_of[v] = f"X{k}[T - 1 - j]" if rows[k] == "rev" else f"X{k}[j]"
        self.home: dict[Var, str] = {}      # where each kernel-written value lives
        self.scratch: list[tuple[str, int, np.dtype]] = []
        self.lits: list[np.ndarray] = []
        self.calls: list[str] = []
        self.n_kernels = 0

    def place_results(self, carry_out: list, ys: list) -> dict[int, int | str]:
        """Home the trip's results in their outputs (``Y<m>[j]``, ``nxt<k>``); returns the
        carries that are also stacked results (carry index -> result index)."""
        # a carry that is also a stacked result lives only in its row of the stack: the next
        # trip reads row j - 1 (no carry buffers, no copy)
        stacked_carry: dict[int, int | str] = {}
        name_of, home = self.name_of, self.home
        for m, v in enumerate(ys):
            if isinstance(v, Var) and v not in name_of and v not in home:
                home[v] = f"Y{m}[j]"
                for k, c in enumerate(carry_out):
                    if c is v and k not in stacked_carry:
                        stacked_carry[k] = m
        for k, v in enumerate(carry_out):
            if isinstance(v, Var) and v not in name_of and v not in home:
                home[v] = f"nxt{k}"
        return stacked_carry

    def step(self, step: tuple, g) -> None:
        """The lines of one body step (a reshape alias, a BLAS contraction or a kernel)."""
        if step[0] == "alias":
            _, out, src = step
            if src not in self.name_of:
                raise Unsupported("a reshape of a value the loop does not hold")
            self.name_of[out] = self.name_of[src]
        elif step[0] == "dot":
            _, e, layout = step
            self.calls.append(self._dot(e, layout))
        else:
            _, spec, binding, grp = step
            self._kernel(spec, binding, " ".join(g.eqns[i].op.name for i in grp.eqns))

    def _place(self, v: Var) -> str:
        """The buffer a step writes ``v`` to: its home, else a new scratch buffer."""
        if v not in self.home:
            self.home[v] = f"s{len(self.scratch)}"
            self.scratch.append((self.home[v], int(v.aval.size), v.aval.dtype))
        self.name_of[v] = self.home[v]
        return self.home[v]

    def _lit(self, flat: np.ndarray) -> str:
        """A literal passed to the loop function flat, as ``L<q>``."""
        self.lits.append(flat)
        return f"L{len(self.lits) - 1}"

    def _dot(self, e, layout) -> str:
        """``np.dot`` of a contraction's matrix views into the buffer of its result."""
        va, vb, mn = layout
        mats = []
        for atom, (shape, tr) in zip(e.inputs, (va, vb)):
            if isinstance(atom, Lit):
                src = self._lit(np.ascontiguousarray(atom.val).reshape(-1))
            elif atom in self.name_of:
                src = self.name_of[atom]
            else:
                raise Unsupported("a contraction reads a value the loop does not hold")
            mats.append(_view(src, shape) + (".T" if tr else ""))
        out = self._place(e.outputs[0])
        return f"np.dot({mats[0]}, {mats[1]}, {_view(out, mn)})   # dot_general (BLAS)"

    def _kernel(self, spec, binding, ops_: str) -> None:
        """A fused kernel inlined, its operands and outputs bound to the trip's buffers."""
        kernel_text = render_cpu(spec, "kernel", extents=binding.extents)
        args = [str(n) for n in binding.extents]
        for atom, rshape in binding.operands:
            if isinstance(atom, Lit):
                flat = np.ascontiguousarray(atom.val.reshape(rshape)).reshape(-1)
                args.append(_view(self._lit(flat), rshape))
                continue
            if atom not in self.name_of:
                raise Unsupported("a kernel reads a value the loop does not hold")
            args.append(_view(self.name_of[atom], rshape))
        written = list(binding.outputs)
        if binding.reduction is not None:
            written.append(binding.reduction)
        for v, kshape in written:
            args.append(_view(self._place(v), kshape))
        n = self.n_kernels
        self.calls.append(f"# kernel {n}: {ops_[:70]}")
        self.calls.extend(_inline(kernel_text, args, f"_{n}"))
        self.n_kernels += 1


def _stack_per_trip_carries(carry_out: list, name_of: dict, stacked_carry: dict) -> None:
    """Add to ``stacked_carry`` each carry that is a per-trip read of row ``j``: like a carry
    that is a stacked result, the next trip reads it from the previous row of ``X<k>``. (A
    read of row ``T - 1 - j`` is copied into the carry's buffers like any other value.)"""
    for k, v in enumerate(carry_out):
        src = name_of.get(v, "")
        if src.startswith("X") and src.endswith("[j]") and k not in stacked_carry:
            stacked_carry[k] = src[:-len("[j]")]


def _result_copies(carry_out: list, ys: list, name_of: dict, stacked_carry: dict) -> list[str]:
    """Lines copying the results not written in place, at the end of the trip (before the
    carry buffers swap)."""
    copies = []
    for k, v in enumerate(carry_out):
        src = name_of.get(v)
        if src is None:
            raise Unsupported("a loop carry with no compiled value")
        if k in stacked_carry:
            continue
        if src != f"nxt{k}":
            copies += _copy(f"nxt{k}", src)
    for m, v in enumerate(ys):
        src = name_of.get(v)
        if src is None:
            raise Unsupported("a loop result with no compiled value")
        if src != f"Y{m}[j]":
            copies += _copy(f"Y{m}[j]", src)
    return copies


def _loop_lines(params: list[str], swapped: list[int], stacked_carry: dict,
                trip: list[str]) -> list[str]:
    """The ``loop`` function: run ``T`` trips, swapping the carry buffers after each (the
    runner fills ``cur<k>`` with the initial carry and finds the final one in the buffer
    the last swap leaves as ``cur<k>``)."""
    lines = [f"@numba.njit({JIT_FLAGS})", f"def loop({', '.join(params)}):"]
    lines.append("    for j in range(T):")
    for k, m in stacked_carry.items():
        lines.append(f"        cur{k} = i{k} if j == 0 else {_rows(m)}[j - 1]")
    lines.extend("        " + c for c in trip)
    for k in swapped:
        lines.append(f"        cur{k}, nxt{k} = nxt{k}, cur{k}")
    lines.append("    return 0")
    return lines


def _module_text(lines: list[str]) -> str:
    """The loop module: header, imports, then ``lines``."""
    body = "\n".join(lines) + "\n"
    head = (f"# functrace loop (numba CPU), codegen v{CODEGEN_VERSION}, "
            f"vecmath {vecmath_hash()}\n")
    return head + module_imports(body) + body


def _writeable_c(a: np.ndarray) -> np.ndarray:
    """``a`` as a writeable C-contiguous array (copied only when it is not one): numba types
    read-only arrays differently, and every call must hit the specialisation compiled at
    warm-up (a read-only input would compile the whole loop a second time)."""
    a = np.ascontiguousarray(a)
    return a if a.flags.writeable else a.copy()


def _flat(x, dt):
    a = x if type(x) is np.ndarray else np.asarray(x)
    if a.dtype != dt:
        a = a.astype(dt)
    elif a.flags.c_contiguous and a.flags.writeable:     # the usual case: no copy, no check
        return a.reshape(-1)
    return _writeable_c(a).reshape(-1)


def _stack(x, spec, trips: int, dt) -> np.ndarray:
    """Every trip's slice of ``x`` as rows of a C-contiguous ``(trips, size)`` array."""
    a = np.asarray(x)
    if a.dtype != dt:
        a = a.astype(dt)
    base = a[loop_slices(spec, 0)]
    step = sum(d * s for d, s in zip(spec[1], a.strides))
    view = np.lib.stride_tricks.as_strided(base, (trips,) + base.shape,
                                           (step,) + base.strides,
                                           writeable=base.flags.writeable)
    return _writeable_c(view).reshape(trips, -1)


def _row_read(spec, shape, trips: int):
    """``"fwd"`` when trip ``j`` reads row ``j`` of an array of ``shape`` whole (what
    ``scan`` does), ``"rev"`` for row ``trips - 1 - j``, else None: those reads stack as the
    array itself (reversed), with no gather."""
    start, step, span, strides = spec
    if (not shape or shape[0] != trips or tuple(span) != (1,) + tuple(shape[1:])
            or set(strides) != {1} or any(step[1:]) or any(start[1:])):
        return None
    if (start[0], step[0]) == (0, 1):
        return "fwd"
    if (start[0], step[0]) == (trips - 1, -1):
        return "rev"
    return None


def _stacker(spec, shape, trips: int, dt):
    """The function that stacks one per-trip read for the compiled loop. A read of whole rows
    in order or in reverse order (``_row_read``) passes the array itself: the loop indexes
    row ``j`` or ``T - 1 - j``."""
    if _row_read(spec, shape, trips) is None:
        return lambda x: _stack(x, spec, trips, dt)

    def rows(x):
        a = x if type(x) is np.ndarray else np.asarray(x)
        if a.dtype != dt:
            a = a.astype(dt)
        elif a.flags.c_contiguous and a.flags.writeable:
            return a.reshape(trips, -1)
        return _writeable_c(a).reshape(trips, -1)
    return rows


def make_runner(fn, ls: LoopStep):
    """The driver-side call of a compiled loop: flatten, gather, call, reshape.

    The scratch buffers (one spare per swapped carry and the trip's intermediates) are
    reused from call to call: a call takes a set from a free list and puts it back when the
    loop returns, so concurrent calls (threads: the loop releases the GIL) each get their
    own. The outputs are fresh on every call.

    A swapped carry's final value is in the buffer that started as ``cur`` when the trip
    count is even, else in the one that started as ``nxt``: the fresh output takes that
    role and the spare the other, so the final value needs no copy, and the initial one is
    copied in here by numpy (a copy inside the numba function costs compile time)."""
    T, nc, nk = ls.length, ls.n_consts, ls.n_carry
    in_dts = [a.dtype for a in ls.in_avals]
    flat_dts = in_dts[:nc + nk]
    specs = ls.xs
    ys = [(a.shape, a.dtype, max(int(np.prod(a.shape[1:], dtype=np.int64)), 1))
          for a in ls.out_avals[nk:]]
    carries = [(a.shape, a.dtype, max(a.size, 1)) for a in ls.out_avals[:nk]]
    outs = carries + ys
    lits = list(ls.lits)
    swapped = ls.swapped
    stacked = ls.stacked_carry
    spares = [(carries[k][2], carries[k][1]) for k in swapped]
    bufs = [(n, dt) for _, n, dt in ls.buffers]
    free: list[list[np.ndarray]] = []
    even = T % 2 == 0

    stackers = [_stacker(spec, a.shape, T, a.dtype) for spec, a in
                zip(specs, ls.in_avals[nc + nk:])]

    def run(*args):
        flat = [_flat(a, dt) for a, dt in zip(args, flat_dts)]
        X = [st(a) for st, a in zip(stackers, args[nc + nk:])]
        Y = [np.empty((T, m), dt) for _, dt, m in ys]
        F = [np.empty(m, dt) for _, dt, m in carries]
        try:
            scratch = free.pop()
        except IndexError:
            scratch = [np.empty(n, dt) for n, dt in spares + bufs]
        pairs = []
        for q, k in enumerate(swapped):
            first, second = (F[k], scratch[q]) if even else (scratch[q], F[k])
            np.copyto(first, flat[nc + k])
            pairs += (first, second)
        try:
            fn(T, *flat[:nc], *[flat[nc + k] for k in stacked], *X, *Y, *lits, *pairs,
               *scratch[len(swapped):])
        finally:
            free.append(scratch)
        for k, m in stacked.items():
            rows = Y[m] if isinstance(m, int) else X[int(m[1:])]
            np.copyto(F[k], rows[T - 1] if T > 0 else flat[nc + k])
        return [r.reshape(s) for r, (s, _, _) in zip(F + Y, outs)]
    return run


def warm_up(fn, ls: LoopStep) -> None:
    """Compile the one specialisation the runner calls (zero trips: nothing runs)."""
    nc, nk = ls.n_consts, ls.n_carry
    args = [0]
    for a in ls.in_avals[:nc]:
        args.append(np.zeros(max(a.size, 1), a.dtype))
    for k in ls.stacked_carry:
        a = ls.in_avals[nc + k]
        args.append(np.zeros(max(a.size, 1), a.dtype))
    for a in ls.in_avals[nc + nk:]:
        args.append(np.zeros((1, 1), a.dtype))
    for a in ls.y_avals:
        args.append(np.zeros((1, max(a.size, 1)), a.dtype))
    args.extend(ls.lits)
    for k in ls.swapped:
        a = ls.carry_avals[k]
        args += [np.zeros(max(a.size, 1), a.dtype) for _ in range(2)]
    args.extend(np.empty(n, dt) for _, n, dt in ls.buffers)
    fn(*args)
