"""Kernel code generation: fusion groups -> kernel specs -> Python source text.

Owns the backend-neutral description of a fused kernel (``KernelSpec``: a loop nest over a
*loop shape*, operands read through static index maps, a straight-line scalar body, elementwise
outputs and at most one reduction), the construction of a spec from a fusion group
(``build_spec``), the per-element expression generation (``element_expr``, driven by a
per-target table of expression templates), and the numba CPU loop template
(``render_cpu``). A CUDA target reuses ``build_spec`` and the body lines and supplies its own
expression table and launch template. This file generates text only: it never imports numba
(so ``lower(...).source`` and the disk-cache check cost no numba start-up). Imports core and
passes.fusion only.

How a group becomes a kernel:

* Every operand of the group (an external Var or array literal) is read through a static
  *index map*: for each of the operand's axes, the loop axis that indexes it, or None for a
  size-1 axis read at 0. Broadcasts, transposes and unit-axis reshapes in front of the group
  are folded into these maps (``passes.fusion.resolve_view``), so they cost nothing.
* A ``pad`` (non-negative padding, a constant fill; ``fusible_pad``) is a *guarded shifted
  read* of its input: ``x = a[i0 - lo0, i1] if (i0 >= lo0) and (i0 < n0 - hi0) else fill``
  (``Operand.offsets``/``guards``/``fill``, rendered by ``operand_read``); interior padding
  (the transpose of a strided slice ``x[0::2]``) is a strided read, ``a[(i0 - lo0) // 2]``
  where ``(i0 - lo0) % 2 == 0`` too (``Operand.steps``). Views between the
  pad's input and its root fold as above (a root axis indexed by loop axis ``d`` is shifted
  by ``lo_d``); the pad's output is that read. Guarded loop axes are never merged.
* An array literal root is not read when ``literal_kind`` (bitwise, once per literal) finds it
  *uniform* (a scalar constant, like a 0-d literal) or *single-diagonal* (zero except ``v`` on
  ``index_q - index_p == k`` of its two varying axes, or on a slice of that diagonal; or on a
  strided diagonal ``dr * index_q - dc * index_p == k``, a strided slice of ``eye``): the
  latter is a body value computed from the loop indices, ``(v if i1 - i0 == k else 0)``, at
  the depth of its deeper axis, and its two loop axes are never merged. (jacfwd's ``eye``
  basis, sliced/scaled/padded and folded at lowering, is read as nothing.)
* Loop axes of extent 1 are dropped and adjacent loop axes that every operand reads in order
  are merged (``(256, 512)`` elementwise becomes one loop of 131072), so the inner loop is
  long and contiguous and LLVM vectorises it. The kernel key depends only on the structure,
  dtypes and maps (and pad amounts), never on the extents (passed as arguments), so one
  compiled kernel serves every shape with the same structure.
* Body values are emitted at the shallowest loop depth whose indices they depend on (a
  row-broadcast value is computed once per row).
* Reductions: if the innermost loop axis is not reduced, each element is accumulated straight
  into the output (a vectorisable loop over the inner axis). If it is, the inner axis is
  processed in chunks: the body fills a buffer (a vectorised loop), the buffer is reduced
  pairwise by halving (vectorised too, and as accurate as numpy's pairwise sum), and chunk
  results are combined with Neumaier compensated summation: no reassociation is assumed (no
  ``fastmath=True``). ``logsumexp`` takes two passes (max, then sum of ``exp(v - max)``) over
  the same chunks, like its numpy impl. ``softmax`` takes the same two passes, writes each
  ``exp(v - max)`` to its output in the second, and scales its row by ``1 / sum`` in a third:
  one exp per element.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Callable, Mapping

import numpy as np

from ...core import Graph, Lit, Op, ScalarCode, Var
from ...ops.scalar_code import Unsupported, const_expr, convert_expr, dtype_ctor, logic_expr
from . import scalar_fn

__all__ = ["Operand", "Reduction", "KernelSpec", "Unsupported", "build_spec", "element_expr",
           "const_expr", "spec_key", "index_list", "combine", "logic_expr", "convert_expr",
           "fusible_pad", "operand_read", "read_axes", "read_depth", "literal_kind", "target_code",
           "supports", "dtype_ctor", "CHUNK", "NATIVE_DTYPES", "SOFTMAX_VALUE", "reads_softmax"]

#: elements per chunk of an inner-axis reduction (the buffer stays in L1/L2)
CHUNK = 2048


@dataclasses.dataclass(frozen=True)
class Operand:
    """An array read by a kernel: after the run-time reshape to ``len(axes)`` dims, operand
    axis ``p`` is indexed by loop index ``axes[p]``; ``axes == ()`` is a scalar read at [0].

    A *shifted* operand (a fused ``pad``) reads operand axis ``p`` at ``i{axes[p]} -
    offsets[p]``, only where every guard ``(d, lo, hi)`` holds (``lo <= i{d} < n{d} - hi``),
    and is ``fill`` (a constant expression) elsewhere. With interior padding, ``steps[g] > 1``
    for guard ``g = (d, lo, hi)`` (the pad's ``interior + 1`` along loop axis ``d``): an
    operand axis read on ``d`` is read at ``(i{d} - lo) // steps[g]``, and only where that
    division is exact (tested even where no operand axis is read on ``d``: a broadcast). The
    defaults are a plain read.
    """

    dtype: np.dtype
    axes: tuple[int, ...]
    offsets: tuple[int, ...] = ()
    guards: tuple[tuple[int, int, int], ...] = ()
    fill: str | None = None
    steps: tuple[int, ...] = ()

    @property
    def shifted(self) -> bool:
        """Whether the read is not a plain elementwise read (offsets, steps or guards)."""
        return bool(self.guards) or any(self.offsets) or any(s != 1 for s in self.steps)


@dataclasses.dataclass(frozen=True)
class Reduction:
    """The closing reduction: ``kind`` over loop ``axes`` of body value ``value``.

    ``softmax`` is the one kind whose output keeps the loop shape: ``exp(value - lse)`` at
    every element, ``lse`` the logsumexp of its row (the innermost axis); ``masked_zero``
    says what a row of all -inf gives (0, else NaN); not ``stored``: only the kernel's
    epilogue reads it, and the kernel has no reduction output."""

    kind: str
    value: str
    in_dtype: np.dtype
    dtype: np.dtype
    axes: tuple[int, ...]
    masked_zero: bool = False
    stored: bool = True

    def out_axes(self, ndim: int) -> tuple[int, ...]:
        """The loop axes of a ``ndim``-deep nest that index the output: the kept ones, or
        all of them for softmax."""
        return tuple(d for d in range(ndim) if d not in self.axes or self.kind == "softmax")


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """A fused kernel, independent of the target and of the loop extents.

    Attributes:
        ndim: rank of the (simplified) loop nest.
        operands: arrays read (names ``a0, a1, ...`` in the body, values ``x0, x1, ...``).
        body: ``(name, expr, dtype, depth)`` lines in dependency order; ``depth`` is the number
            of enclosing loops the value needs (0: loop invariant).
        outputs: ``(name, dtype)`` elementwise outputs written at every loop index.
        reduction: the optional closing reduction.
        helpers: source of the functions the body calls that the module must define (users'
            scalar functions, ``backends.scalar_fn``; recipe helpers, ``ops.scalar_recipe``),
            decorated for the target.
        epilogue: the body values that read a softmax reduction's value (``sm``), directly
            or not: computed in its last pass over each row, after the row's sum.
    """

    ndim: int
    operands: tuple[Operand, ...]
    body: tuple[tuple[str, str, np.dtype, int], ...]
    outputs: tuple[tuple[str, np.dtype], ...]
    reduction: Reduction | None
    helpers: tuple[str, ...] = ()
    epilogue: tuple[str, ...] = ()


@dataclasses.dataclass
class Binding:
    """How the executor calls a kernel built from a group (plan-time, shape-specific).

    Attributes:
        extents: the simplified loop extents (the kernel's first arguments).
        operands: ``(atom, runtime_shape)`` per operand: reshape the atom's value to it.
        outputs: ``(var, runtime_shape)`` per elementwise output.
        reduction: ``(var, runtime_shape)`` of the reduction output, or None.
    """

    extents: tuple[int, ...]
    operands: list[tuple[object, tuple[int, ...]]]
    outputs: list[tuple[Var, tuple[int, ...]]]
    reduction: tuple[Var, tuple[int, ...]] | None


# --------------------------------------------------------------------------------------------
# per-element expressions
# --------------------------------------------------------------------------------------------

def target_code(op: Op, target: str) -> ScalarCode | str:
    """The code ``target`` computes elementwise ``op`` with (its ``code[target]``, else the
    op's ``scalar``; a scalar *function* inlined by ``scalar_fn``), or why it has none."""
    c = op.code.get(target)
    if isinstance(c, str):
        return c
    expr = c.expr if c is not None else None
    if expr is None:
        expr = op.scalar
        if expr is None:
            return (f"{op.name} declares no scalar code for the {target} target (give it "
                    f"scalar= or {target}=, or say why not)")
        if callable(expr):
            expr = scalar_fn.inline(op, target)
            if isinstance(expr, str):
                return expr
    return ScalarCode(expr, c.kinds, c.alone) if c is not None else ScalarCode(expr)


def supports(op: Op, target: str) -> bool | str:
    """Whether ``target``'s kernels can hold ``op`` at all (dtypes aside): True, or why not."""
    if op.elementwise:
        c = target_code(op, target)
        return True if isinstance(c, ScalarCode) else c
    if op.fusion in ("view", "shifted") or op.reduce_kind is not None:
        return True
    return (f"{op.name} is not elementwise, a view, a shifted read or a kernel reduction: "
            "it runs as an op step (its impl, or a library call)")


# dtypes whose arithmetic numba keeps in the operand type without a cast
NATIVE_DTYPES = {np.dtype("float64"), np.dtype("int64"), np.dtype("bool")}


def element_expr(op_name: str, template: str | Callable | None, args: list[str],
                 params: Mapping, in_dtypes: list[np.dtype], out_dtype: np.dtype) -> str:
    """The scalar expression of one elementwise equation.

    ``template`` is the target's code for the op (``target_code``):
    a format string over ``{0}, {1}, ...`` and the params, or a callable
    ``(args, params, in_dtypes, out_dtype) -> str``. Operands are always names or constants,
    so templates may repeat them. The result is cast to the equation's dtype where the
    target's scalar promotion could differ from numpy's (float32, small integers).
    """
    if template is None:
        raise Unsupported(f"{op_name} has no kernel expression")
    if callable(template):
        expr = template(args, params, in_dtypes, out_dtype)
    else:
        try:
            expr = template.format(*args, **params)
        except (KeyError, IndexError) as e:
            raise Unsupported(f"{op_name}: bad kernel template {template!r}") from e
    if np.dtype(out_dtype) not in NATIVE_DTYPES:
        expr = f"{dtype_ctor(out_dtype)}({expr})"
    return expr


# --------------------------------------------------------------------------------------------
# operand reads (shared by every target's templates)
# --------------------------------------------------------------------------------------------

def fusible_pad(e, dtype_ok: Callable[[np.dtype], bool] = lambda dt: True) -> bool:
    """Whether ``pad`` equation ``e`` can be a guarded shifted read in a kernel: non-negative
    low and high padding (interior padding too: a strided read, the transpose of a strided
    slice), a scalar literal fill, a non-empty operand of rank >= 1, and a dtype the target
    handles."""
    if e.op.fusion != "shifted":
        return False
    x, v = e.inputs
    if x.aval.ndim == 0 or x.aval.size == 0:
        return False
    if any(lo < 0 or hi < 0 or it < 0 for lo, hi, it in e.params["config"]):
        return False
    if not (isinstance(v, Lit) and v.val.ndim == 0):
        return False
    return dtype_ok(np.dtype(x.aval.dtype)) and np.dtype(x.aval.dtype).kind in "biuf"


def read_axes(o: Operand) -> frozenset:
    """The loop axes a read depends on: its index axes and its guard axes."""
    return frozenset(o.axes) | frozenset(d for d, _lo, _hi in o.guards)


def read_depth(o: Operand) -> int:
    """The loop depth a read needs (0: loop invariant)."""
    ax = read_axes(o)
    return max(ax) + 1 if ax else 0


def operand_read(k: int, o: Operand, unsigned: frozenset = frozenset()) -> str:
    """The statement reading operand ``k`` into ``x{k}``: ``x3 = a3[i0, i1]``, or for a
    shifted operand ``x3 = a3[i0 - 1, i1] if (i0 >= 1) and (i0 < n0 - 2) else fill`` (the
    read itself is guarded: kernels run without bounds checks; with interior padding the
    index is ``(i1 - 1) // 2`` and ``((i1 - 1) % 2 == 0)`` is tested after the range guards).
    Loop indices in ``unsigned`` are ``np.uint64`` (the chunked inner axis), so their
    constants are too (numba types ``uint64 - int64`` as float64)."""
    if not o.shifted:
        return f"x{k} = a{k}[{index_list(o.axes)}]"

    def const(d, c):
        return f"np.uint64({c})" if d in unsigned else str(c)
    offs = o.offsets or (0,) * len(o.axes)
    step_of = dict(zip((d for d, _lo, _hi in o.guards), o.steps))
    steps = [step_of.get(d, 1) for d in o.axes]

    def at(d, off, paren=False):
        if not off:
            return f"i{d}"
        return f"(i{d} - {const(d, off)})" if paren else f"i{d} - {const(d, off)}"
    idx = ", ".join(at(d, off) if st == 1 else f"{at(d, off, True)} // {const(d, st)}"
                    for d, off, st in zip(o.axes, offs, steps)) if o.axes else "0"
    read = f"a{k}[{idx}]"
    conds = []
    for d, lo, hi in o.guards:
        if lo:
            conds.append(f"(i{d} >= {const(d, lo)})")
        if hi:
            bound = f"np.uint64(n{d} - {hi})" if d in unsigned else f"n{d} - {hi}"
            conds.append(f"(i{d} < {bound})")
    # the exact-division tests come after the range tests, which keep ``i - lo`` >= 0
    conds += [f"({at(d, lo, True)} % {const(d, st)} == 0)"
              for (d, lo, _hi), st in zip(o.guards, o.steps) if st != 1]
    if not conds:
        return f"x{k} = {read}"
    return f"x{k} = {read} if {' and '.join(conds)} else {o.fill}"


# --------------------------------------------------------------------------------------------
# group -> spec
# --------------------------------------------------------------------------------------------

def build_spec(graph: Graph, group, target: str, view_of) -> tuple[KernelSpec, Binding]:
    """Build the kernel spec and its plan-time binding for a fusion group.

    Args:
        graph: the graph the group belongs to.
        group: a ``passes.fusion.Group``.
        target: the target whose code the body uses (``target_code``: ``"cpu"``, ``"cuda"``).
        view_of: the fusion plan's view resolver (``FusionPlan.resolve``): ``(atom,
            loop_shape, group) -> (root atom, index map)``.

    Raises:
        Unsupported: the group cannot be a kernel on this target.
    """
    eqns = [graph.eqns[i] for i in group.eqns]
    loop_shape = group.shape
    red_eqn = graph.eqns[group.reduction] if group.reduction is not None else None
    members: set[Var] = set()
    for e in eqns:
        if e is not red_eqn:
            members.update(e.outputs)

    # operands: (root atom, map, shift) -> index; loop axes of extent 1 are dropped later.
    # shift: None, or (low per loop axis, high per loop axis, fill) of a fused pad
    ops_index: dict[tuple, int] = {}
    op_list: list[tuple[object, tuple, tuple | None]] = []
    names: dict[Var, str] = {}
    lines: list[tuple[str, str, np.dtype, frozenset]] = []
    # array literals computed from the loop indices instead of read (``literal_kind``)
    kinds: dict[int, tuple | None] = {}       # id(literal) -> its kind, checked once
    diag_index: dict[tuple, str] = {}         # (id(literal), dp, dq) -> body value name
    diags: list[tuple] = []       # (name, dp, dq, (k, lo, hi), value, zero, dtype)
    tmp = 0
    helpers: list[str] = []

    def literal_value(root, amap) -> str | None:
        """A uniform literal's constant, or the body value of a single-diagonal one read with
        both diagonal axes on distinct loop axes of extent > 1; None: read it."""
        nonlocal tmp
        if id(root) not in kinds:
            kinds[id(root)] = literal_kind(root.val)
        kind = kinds[id(root)]
        if kind is None:
            return None
        dt = root.aval.dtype
        if kind[0] == "uniform":
            return const_expr(kind[1], dt)
        _tag, p, q, k, v, lo, hi, *steps = kind
        dp, dq = amap[p], amap[q]
        if dp is None or dq is None or dp == dq or loop_shape[dp] == 1 or loop_shape[dq] == 1:
            return None
        key = (id(root), dp, dq)
        name = diag_index.get(key)
        if name is None:
            name = diag_index[key] = f"t{tmp}"
            tmp += 1
            diags.append((name, dp, dq, (k, lo, hi, *steps), const_expr(v, dt),
                          const_expr(0, dt), dt))
        return name

    def operand(atom) -> str:
        if isinstance(atom, Lit) and atom.val.ndim == 0:
            return const_expr(atom.val, atom.aval.dtype)
        if isinstance(atom, Var) and atom in names:
            return names[atom]
        root, amap = view_of(atom, loop_shape, group)
        if isinstance(root, Lit) and root.val.ndim == 0:
            return const_expr(root.val, root.aval.dtype)
        if isinstance(root, Lit):
            value = literal_value(root, amap)
            if value is not None:
                return value
        if isinstance(root, Var) and root in members:
            raise Unsupported("a group value is read through a non-identity view")
        key = (root if isinstance(root, Var) else ("lit", id(root)), amap)
        k = ops_index.get(key)
        if k is None:
            k = ops_index[key] = len(op_list)
            op_list.append((root, amap, None))
        return f"x{k}"

    def shifted_operand(e) -> str:
        """A pad: its input (a non-member, views folded) read at ``loop index - low`` where in
        range, its fill elsewhere; the pad's value is that read."""
        x = e.inputs[0]
        if isinstance(x, Var) and x in names:
            raise Unsupported("a pad of a value of its own group")
        cfg = e.params["config"]
        if any(lo < 0 or hi < 0 or it < 0 for lo, hi, it in cfg):
            raise Unsupported("negative padding")
        fill = e.inputs[1]
        if not (isinstance(fill, Lit) and fill.val.ndim == 0):
            raise Unsupported("pad with a computed fill value")
        shift = (tuple(lo for lo, _hi, _it in cfg), tuple(hi for _lo, hi, _it in cfg),
                 const_expr(fill.val, e.outputs[0].aval.dtype))
        if any(it for _lo, _hi, it in cfg):        # interior padding: a strided read
            shift += (tuple(it + 1 for _lo, _hi, it in cfg),)
        root, amap = view_of(x, loop_shape, group)
        if isinstance(root, Var) and root in members:
            raise Unsupported("a pad of a value of its own group")
        key = (root if isinstance(root, Var) else ("lit", id(root)), amap, shift)
        k = ops_index.get(key)
        if k is None:
            k = ops_index[key] = len(op_list)
            op_list.append((root, amap, shift))
        return f"x{k}"

    for e in eqns:
        if e is red_eqn:
            if e.op.reduce_kind == "softmax":    # its epilogue reads it: ``sm``
                names[e.outputs[0]] = SOFTMAX_VALUE
            continue
        if e.op.fusion == "shifted":
            names[e.outputs[0]] = shifted_operand(e)
            continue
        args = [operand(a) for a in e.inputs]
        code = target_code(e.op, target)
        if isinstance(code, str):
            raise Unsupported(code)
        template = code.expr
        helper = getattr(template, "helper", None)
        if callable(helper):       # a helper that depends on the equation's params and dtypes
            helper = helper(e.params, [a.aval.dtype for a in e.inputs], e.outputs[0].aval.dtype)
        if helper is not None and helper not in helpers:
            helpers.append(helper)
        expr = element_expr(e.op.name, template, args, e.params,
                            [a.aval.dtype for a in e.inputs], e.outputs[0].aval.dtype)
        name = f"t{tmp}"
        tmp += 1
        names[e.outputs[0]] = name
        lines.append((name, expr, e.outputs[0].aval.dtype, frozenset(args)))

    red = None
    if red_eqn is not None:
        kind = red_eqn.op.reduce_kind
        if kind is None:
            raise Unsupported(f"reduction {red_eqn.op.name}")
        axes = tuple(red_eqn.params["axes"])
        if not axes:
            raise Unsupported("reduction over no axes")
        src = operand(red_eqn.inputs[0])
        red = (kind, src, red_eqn.inputs[0].aval.dtype, red_eqn.outputs[0].aval.dtype, axes,
               red_eqn.params.get("masked_zero", False))

    # elementwise outputs: member values read outside the group (decided by the planner)
    outputs = [(names[v], v) for v in group.outputs if v in names]

    # --- simplify the loop nest, then order the body by loop depth and close the reduction
    operands, binding_ops, extents, new_of = _simplify_loop_nest(loop_shape, op_list, diags, red)
    ndim = len(extents)
    body, depth = _body_at_depths(operands, diags, lines, new_of, ndim, red)
    reduction = None
    epilogue: tuple[str, ...] = ()
    if red is not None:
        sm = red[0] == "softmax"
        reduction, closed = _closing_reduction(red, new_of, ndim, depth,
                                               SOFTMAX_VALUE if sm else f"t{tmp}")
        if closed is not None:
            # before the first line that reads it (a softmax over extent-1 rows is a value)
            at = next((k for k, ln in enumerate(body) if reads_softmax(ln[1])), len(body))
            body.insert(at, closed)
            outputs.append((closed[0], red_eqn.outputs[0]))
        elif sm:
            epilogue = _epilogue_names(body)
            if epilogue and not group.reduction_read:
                reduction = dataclasses.replace(reduction, stored=False)
    outs = tuple((n, v.aval.dtype) for n, v in outputs)
    spec = KernelSpec(ndim, tuple(operands), tuple(body), outs, reduction, tuple(helpers),
                      epilogue)
    bind_outs = [(v, extents or (1,)) for _, v in outputs]
    bind_red = None
    if reduction is not None and reduction.stored:
        rshape = tuple(extents[j] for j in reduction.out_axes(ndim))
        bind_red = (red_eqn.outputs[0], rshape or (1,))
    return spec, Binding(extents, binding_ops, bind_outs, bind_red)


#: the body's name for a softmax reduction's value, which its epilogue lines read
SOFTMAX_VALUE = "sm"
_SM = re.compile(rf"\b{SOFTMAX_VALUE}\b")
_TEMP = re.compile(r"\b[tx]\d+\b")


def reads_softmax(expr: str) -> bool:
    """Whether a body expression reads the softmax value (``SOFTMAX_VALUE``)."""
    return _SM.search(expr) is not None


def _epilogue_names(body) -> tuple[str, ...]:
    """The body values that depend on the softmax value (transitively): the epilogue."""
    epi: set[str] = set()
    for name, expr, _dt, _d in body:
        if reads_softmax(expr) or any(n in epi for n in _TEMP.findall(expr)):
            epi.add(name)
    return tuple(name for name, *_ in body if name in epi)


def _simplify_loop_nest(loop_shape, op_list, diags, red):
    """Drop extent-1 loop axes and merge adjacent axes every access reads in order (never a
    guarded axis: its guard tests its own index; nor a diagonal's axis: its value compares two
    indices).

    Returns ``(operands, binding_ops, extents, new_of)``: the ``Operand`` of each entry of
    ``op_list`` on the new loop nest, its ``(root, runtime_shape)`` binding, the new loop
    extents, and the new loop axis of each kept original one.
    """
    nd = len(loop_shape)
    guarded: set[int] = set()
    for _root, _amap, shift in op_list:
        if shift is not None:
            guarded.update(d for d in range(nd) if _guarded_axis(shift, d))
    if any(loop_shape[d] == 1 for d in guarded):
        raise Unsupported("a padded loop axis of extent 1")
    pinned = guarded | {d for _n, dp, dq, *_rest in diags for d in (dp, dq)}
    keep = [d for d in range(nd) if loop_shape[d] != 1]
    maps, reads_at = [], []
    for root, amap, shift in op_list:
        # per kept operand axis: (loop axis, offset, the root's size along it)
        acc = [(d, shift[0][d] if shift else 0, root.aval.shape[p])
               for p, d in enumerate(amap) if d is not None and loop_shape[d] != 1]
        reads_at.append(acc)
        maps.append(tuple(d for d, _o, _n in acc))
    red_axes = set(red[4]) if red else set()
    axis_groups = []          # each: list of original loop axes merged into one
    for d in keep:
        if axis_groups and _mergeable(axis_groups[-1][-1], d, maps, red_axes, pinned):
            axis_groups[-1].append(d)
        else:
            axis_groups.append([d])
    new_of = {}
    for j, grp in enumerate(axis_groups):
        for d in grp:
            new_of[d] = j
    extents = tuple(int(np.prod([loop_shape[d] for d in grp], dtype=np.int64))
                    for grp in axis_groups)
    operands, binding_ops = [], []
    for (root, _amap, shift), acc in zip(op_list, reads_at):
        new_axes, offsets, rshape = [], [], []
        for d, off, n in acc:
            j = new_of[d]
            if not new_axes or new_axes[-1] != j:
                new_axes.append(j)
                offsets.append(off)
                # a guarded axis reads the root's own extent; others span the merged loop axis
                rshape.append(n if d in guarded else extents[j])
        if shift is None:
            operands.append(Operand(root.aval.dtype, tuple(new_axes)))
        else:
            los, his, fill = shift[:3]
            gaxes = [d for d in range(nd) if _guarded_axis(shift, d)]
            guards = tuple((new_of[d], los[d], his[d]) for d in gaxes)
            steps = [shift[3][d] if len(shift) > 3 else 1 for d in gaxes]
            operands.append(Operand(root.aval.dtype, tuple(new_axes),
                                    tuple(offsets) if any(offsets) else (), guards, fill,
                                    tuple(steps) if any(st != 1 for st in steps) else ()))
        binding_ops.append((root, tuple(rshape) or (1,)))
    return operands, binding_ops, extents, new_of


def _guarded_axis(shift, d: int) -> bool:
    """Whether a fused pad's read (``shift``: lows, highs, fill[, steps]) tests loop index
    ``d`` (low or high padding, or interior padding: a step)."""
    return bool(shift[0][d] or shift[1][d] or (len(shift) > 3 and shift[3][d] != 1))


def _body_at_depths(operands, diags, lines, new_of, ndim, red) -> tuple[list, dict[str, int]]:
    """The spec's body: the diagonal values, then ``lines``, each as ``(name, expr, dtype,
    depth)``; and the depth of every operand and body value by name. A value needs the loops
    of the operands it (transitively) reads (guards too)."""
    opdepth = {f"x{k}": read_depth(o) for k, o in enumerate(operands)}
    depth: dict[str, int] = dict(opdepth)
    depth[SOFTMAX_VALUE] = ndim       # a softmax's value varies along every loop axis
    body = []
    if diags:
        # the chunked inner index of a CPU reduction is np.uint64 (see operand_read): cast it,
        # or numba computes uint64 - int64 in float64
        raxes0 = {new_of[d] for d in red[4] if d in new_of} if red else set()
        unsigned = {ndim - 1} if (ndim - 1) in raxes0 else set()
        for name, dp, dq, band, v, zero, dt in diags:
            jp, jq = new_of[dp], new_of[dq]
            k, lo, hi, *steps = band
            cond = _diag_cond(jp, jq, k, lo, hi, unsigned, *steps)
            # a bool diagonal is True (an all-False literal is uniform)
            expr = cond if np.dtype(dt).kind == "b" else f"({v} if {cond} else {zero})"
            depth[name] = max(jp, jq) + 1
            body.append((name, expr, np.dtype(dt), depth[name]))
    for name, expr, dt, used in lines:
        dd = max([depth.get(u, 0) for u in used], default=0)
        depth[name] = dd
        body.append((name, expr, np.dtype(dt), dd))
    return body, depth


def _closing_reduction(red, new_of, ndim, depth, name):
    """The group's reduction ``red`` (``(kind, src, in_dtype, out_dtype, axes)``) on the
    simplified loop nest: ``(Reduction, None)``, or, when every reduced axis has extent 1,
    ``(None, line)`` with the body line ``name`` computing the (cast) value itself, an
    elementwise output.

    Raises:
        Unsupported: a logsumexp over more than the innermost loop axis, a sum/prod of bools.
    """
    kind, src, in_dt, out_dt, axes, masked_zero = red
    raxes = tuple(sorted({new_of[d] for d in axes if d in new_of}))
    if not raxes:
        if kind == "logsumexp":
            expr = src      # log(exp(x - m)) + m == x, inf and NaN included
        elif kind == "softmax":
            # exp(x - x) / exp(x - x): 1 where x is finite, NaN at +inf and NaN, and at -inf
            # (every exp 0) 0 if masked_zero else NaN
            one, nan = const_expr(1, out_dt), const_expr(np.nan, out_dt)
            dead = const_expr(0, out_dt) if masked_zero else nan
            expr = (f"({one} if {src} - {src} == 0 else "
                    f"({dead} if {src} < {const_expr(0, in_dt)} else {nan}))")
        elif kind in ("and", "or"):
            expr = f"({src} != 0)" if np.dtype(in_dt).kind != "b" else src
        else:
            expr = src
        if np.dtype(out_dt) != np.dtype(in_dt) or kind in ("and", "or"):
            expr = f"{dtype_ctor(out_dt)}({expr})"
        if kind == "sum" and np.dtype(out_dt).kind == "f":
            # numpy adds to its identity: a sum of one -0.0 is +0.0
            expr = f"({expr} + {const_expr(0, out_dt)})"
        return None, (name, expr, np.dtype(out_dt), max(depth.get(src, 0), 0))
    if kind in ("logsumexp", "softmax") and (raxes != (ndim - 1,)):
        raise Unsupported(f"{kind} over more than the innermost loop axis")
    if kind in ("sum", "prod") and np.dtype(in_dt).kind == "b":
        raise Unsupported("sum/prod of booleans")
    return Reduction(kind, src, np.dtype(in_dt), np.dtype(out_dt), raxes,
                     bool(masked_zero) if kind == "softmax" else False), None


def _diag_cond(jp: int, jq: int, k: int, lo: int, hi: int, unsigned, dr: int = 1,
               dc: int = 1) -> str:
    """``i<jq> - i<jp> == k`` (strided: ``dr * i<jq> - dc * i<jp> == k``), and ``lo <= i<jp>
    < n<jp> - hi`` where the run of non-zeros does not cover the whole diagonal (signed
    indices)."""
    def ix(j, c=1):
        i = f"np.int64(i{j})" if j in unsigned else f"i{j}"
        return i if c == 1 else f"{int(c)} * {i}"
    conds = [f"({ix(jq, dr)} - {ix(jp, dc)} == {int(k)})"]
    if lo:
        conds.append(f"({ix(jp)} >= {int(lo)})")
    if hi:
        conds.append(f"({ix(jp)} < n{jp} - {int(hi)})")
    return conds[0] if len(conds) == 1 else "(" + " and ".join(conds) + ")"


def literal_kind(val: np.ndarray):
    """How a kernel can use an array literal without reading it (bitwise checks, so ``-0.0``
    and NaN payloads are exact): ``("uniform", value)`` when every element is the same;
    ``("diag", p, q, k, value, lo, hi)`` when it varies along exactly two axes ``p < q``
    (other axes have size 1, or it is constant along them: a folded broadcast), and every
    element is ``+0`` except on the diagonal ``index_q - index_p == k``, where each is
    ``value`` (``lo``/``hi`` > 0: only for ``lo <= index_p < size_p - hi``, a slice of the
    diagonal, as a padded slice of ``eye`` has); ``("diag", p, q, k, value, lo, hi, dr, dc)``
    for a *strided* diagonal, ``dr * index_q - dc * index_p == k`` with coprime steps ``dr,
    dc >= 1`` not both 1 (a strided slice of ``eye``: ``eye(200)[:, 0::2]`` has ``dr = 2``);
    None otherwise (also for dtypes without a scalar constant)."""
    val = np.asarray(val)
    dt = val.dtype
    if val.ndim == 0 or val.size == 0 or dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8):
        return None
    bits = val.view(np.dtype(f"u{dt.itemsize}"))
    flat = bits.reshape(-1)
    if (flat == flat[0]).all():
        return ("uniform", val.reshape(-1)[0])
    axes = [a for a, n in enumerate(val.shape) if n != 1]
    if len(axes) > 2:         # a folded broadcast: drop the axes it is constant along
        axes = [a for a in axes if not (bits == bits.take([0], axis=a)).all()]
    if len(axes) != 2:
        return None
    p, q = axes
    rows, cols = val.shape[p], val.shape[q]
    at = tuple(slice(None) if a in axes else 0 for a in range(val.ndim))
    m = bits[at]
    val = val[at]
    # the non-zero elements, in row-major order: T points (r + t*dr, c + t*dc) of one line,
    # all the same value, with coprime steps (so they are every lattice point of the line
    # dr*index_q - dc*index_p == k between the first and the last)
    nz = np.flatnonzero(m.reshape(-1) != 0)
    rs, cs = np.divmod(nz, cols)
    r, c = int(rs[0]), int(cs[0])
    if not (m.reshape(-1)[nz] == m[r, c]).all():
        return None
    dr = dc = 1
    if nz.size > 1:
        dr, dc = int(rs[1] - rs[0]), int(cs[1] - cs[0])
        if dr < 1 or dc < 1 or math.gcd(dr, dc) != 1:
            return None
        if not ((np.diff(rs) == dr).all() and (np.diff(cs) == dc).all()):
            return None
    t = nz.size
    k = dr * c - dc * r
    # lo/hi: only where the run does not reach the box's edge (a lattice point of the line
    # inside the box before the first or after the last)
    lo = r if (r - dr >= 0 and c - dc >= 0) else 0
    end = r + (t - 1) * dr + 1
    hi = rows - end if (r + t * dr < rows and c + t * dc < cols) else 0
    if dr == dc == 1:
        return ("diag", p, q, k, val[r, c], lo, hi)
    return ("diag", p, q, k, val[r, c], lo, hi, dr, dc)


def _mergeable(a: int, b: int, maps, red_axes, guarded=frozenset()) -> bool:
    """Loop axes a < b (adjacent after dropping unit axes) merge when every operand reads
    both in order or neither, the reduction reduces both or neither, and neither is guarded
    (a fused pad tests its index) or a single-diagonal literal's axis."""
    if (a in red_axes) != (b in red_axes) or a in guarded or b in guarded:
        return False
    for m in maps:
        ia = m.index(a) if a in m else None
        ib = m.index(b) if b in m else None
        if (ia is None) != (ib is None):
            return False
        if ia is not None and ib != ia + 1:
            return False
    return True


def spec_key(source: str) -> str:
    """Content hash of a kernel's source (the structural key of its group)."""
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def index_list(axes) -> str:
    """The loop indices ``i<d>`` of ``axes``, comma-separated (``0`` for none)."""
    return ", ".join(f"i{d}" for d in axes) if axes else "0"


def combine(kind: str, a: str, b: str, dt: np.dtype,
            extremum: Callable[[str, str, str, np.dtype], str]) -> str:
    """``a (op) b`` for a reduction kind; ``extremum(kind, a, b, dt)`` writes max, min and
    logsumexp's running max, whose NaN and signed-zero rules each target spells its own way."""
    if kind == "sum":
        return f"{a} + {b}"
    if kind == "prod":
        return f"{a} * {b}"
    if kind == "and":
        return f"{a} & {b}"
    if kind == "or":
        return f"{a} | {b}"
    if kind in ("max", "min", "logsumexp"):
        return extremum(kind, a, b, np.dtype(dt))
    raise Unsupported(kind)
