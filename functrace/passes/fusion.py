"""Fusion analysis: partition a graph into kernel groups and single-op steps (a side table).

Owns ``plan_fusion(graph, fusible, prefer_kernel) -> FusionPlan`` and ``view_map``. It never
mutates or rewrites the graph: the plan lists, in execution order, *steps* that refer to the
graph's equations by index. Imports core only; the target decides which equations it can fuse
(``fusible``), so this pass is shared by every compiled backend.

The rules (compile latency is a first-class constraint: docs/executor.md, "Compile latency
and tiers"):

* A **group** is a maximal region of elementwise equations over one *loop shape*, closed by at
  most one reduction over that shape; it has at most ``max_eqns`` equations, so numba compile
  time stays bounded and a kernel is reused wherever the same group structure appears.
* **Views are folded**: ``broadcast_in_dim``, ``transpose`` and reshapes that only add or drop
  unit axes in front of a group become static index maps of the group's reads
  (``resolve``); such a view equation only runs (as a numpy view) if something outside a group
  reads it.
* **Pads are shifted reads**: a ``pad`` the target accepts (``op.fusion == "shifted"``;
  non-negative padding, a constant fill) joins groups like an elementwise equation whose loop
  shape is its *output* shape; its input is read at ``loop index - low`` (with interior
  padding, ``(loop index - low) // (interior + 1)`` where that division is exact) where in
  range, else the fill is used. Because the read is shifted it never reads a value of its
  own group, and its input is never recomputed into the group.
* Equations are visited in topological order (graph order, except that a 0-d elementwise
  equation comes as soon as its inputs are computed: scalar math on parameters, such as
  ``log(scale)``, must not split the kernel of the arrays that read it) and join an existing
  group when (a) the loop shape matches, (b) they do not read the group's reduction result
  (but where that result keeps the loop shape, softmax's, they may read it elementwise: the
  group's *epilogue*, computed in the reduction's last pass over each row),
  (c) they read the group's own values only elementwise (identity map), and (d) every other
  step they read was *created before* the group. (d) makes creation order a valid schedule,
  so no cycle between steps can arise. Candidates are the groups that produce an input, then
  groups that read one of the same inputs (sibling fusion: a forward pass and its backward
  pass over one input share a loop), then the most recent groups over the same loop shape.
* **Recomputation**: a group that reads an elementwise value of an earlier group with the same
  loop shape recomputes it instead, when the value's defining equations are few and cheap
  (no transcendental math) and add at most one read to the later kernel: forward values
  are recomputed in the backward kernel instead of being stored, and the earlier group writes
  the value only if someone else needs it. The recomputation may start from a costly value
  of the earlier group that it writes anyway (read outside it): ``1 - t * t`` after
  ``t = tanh(z)``, with ``t`` also read by a matrix product, is recomputed from ``t``.
* Everything else (contractions, linalg, gathers, scans, sub-graph ops, ...) is a single-op
  step that runs the op's numpy impl, as is a group of one cheap equation (numpy's ufunc is as
  fast as a kernel there, and needs no compile) -- but a lone reduction of at least
  ``LONE_REDUCTION_MIN`` elements whose operand the recomputation above can rebuild from one
  read stays a kernel, so the earlier group need not store that operand.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable

from ..core import Eqn, Graph, Var

__all__ = ["Group", "OpStep", "FusionPlan", "plan_fusion", "view_map"]

MAX_GROUP_EQNS = 40
RECOMPUTE_MAX = 6
#: a lone reduction of a cheap value of an earlier group becomes a kernel that recomputes
#: the value (rather than a numpy step reading it back) from this many elements: below, the
#: stored value stays in cache, and a kernel's compile would not pay for itself
LONE_REDUCTION_MIN = 1 << 18


@dataclasses.dataclass(eq=False)      # identity semantics: steps are compared by object
class Group:
    """A fused kernel: ``eqns`` (graph indices, topological) over ``shape``.

    Attributes:
        id: the step's position in ``FusionPlan.steps``.
        shape: the loop shape (elementwise outputs have it; the reduction's input has it).
        eqns: member equations (recomputed ones included), ascending.
        reduction: index of the closing reduction equation, or None.
        outputs: member values that must be written (read outside the group or graph
            outputs); the reduction result is always written, but where ``reduction_read``
            is False: a softmax read only by its own group's epilogue.
        roots: external values the group reads (after folding views).
        recomputed: indices of equations duplicated from earlier groups.
    """

    id: int
    shape: tuple
    eqns: list[int]
    reduction: int | None = None
    outputs: list[Var] = dataclasses.field(default_factory=list)
    roots: list = dataclasses.field(default_factory=list)
    recomputed: list[int] = dataclasses.field(default_factory=list)
    reduction_read: bool = True

    @property
    def kind(self) -> str:
        return "group"


@dataclasses.dataclass(eq=False)
class OpStep:
    """One equation run by its numpy impl (``view`` steps only when needed)."""

    id: int
    eqn: int
    view: bool = False

    @property
    def kind(self) -> str:
        return "op"


@dataclasses.dataclass
class FusionPlan:
    """The side table: ``steps`` in execution order, and which step produces each Var."""

    graph: Graph
    steps: list
    producer: dict            # Var -> step
    resolve: Callable         # (atom, loop_shape, group=None) -> (root atom, index map)

    def __str__(self):
        lines = []
        for s in self.steps:
            if isinstance(s, Group):
                names = [self.graph.eqns[i].op.name for i in s.eqns]
                r = f" -> {self.graph.eqns[s.reduction].op.name}" if s.reduction is not None \
                    else ""
                lines.append(f"group {s.id} {s.shape}: {' '.join(names)}{r}")
            else:
                e = self.graph.eqns[s.eqn]
                lines.append(f"op {s.id}: {e.op.name}{' (view)' if s.view else ''}")
        return "\n".join(lines)


def view_map(e: Eqn) -> tuple | None:
    """For a view equation (``op.fusion == "view"``), the output axis each operand axis is read
    from (None: a unit axis read at index 0); None when the op is not a pure re-indexing of its
    operand (the declaration's ``view_map`` decides)."""
    vm = e.op.view_map
    return vm(e) if vm is not None else None


def _view_resolver(graph: Graph):
    """The plan's view resolver over ``graph`` (``FusionPlan.resolve``), memoised per Var."""
    eqns = graph.eqns
    producer_eqn: dict[Var, int] = {}
    for i, e in enumerate(eqns):
        for o in e.outputs:
            producer_eqn[o] = i

    memo: dict = {}

    def resolve(atom, loop_shape, group=None):
        """Follow foldable views back from ``atom`` (read at ``loop_shape``): the root value
        and, per root axis, the loop axis indexing it (None: unit axis at 0)."""
        if atom.aval.ndim == 0:
            return atom, ()
        if isinstance(atom, Var):
            hit = memo.get(atom)
            if hit is None:
                hit = memo[atom] = _resolve(atom)
            return hit
        return _resolve(atom)

    def _resolve(atom):
        cur, cmap = atom, tuple(range(atom.aval.ndim))
        while isinstance(cur, Var):
            i = producer_eqn.get(cur)
            if i is None or eqns[i].op.fusion != "view":
                break
            vm = view_map(eqns[i])
            if vm is None:
                break
            cur = eqns[i].inputs[0]
            cmap = tuple(cmap[j] if j is not None else None for j in vm)
            if cur.aval.ndim == 0:
                return cur, ()
        return cur, cmap

    return resolve


def plan_fusion(graph: Graph, fusible: Callable[[Eqn], bool],
                prefer_kernel: Callable[[Eqn], bool] = lambda e: True,
                max_eqns: int = MAX_GROUP_EQNS, recompute: bool = True) -> FusionPlan:
    """Partition ``graph`` into groups and single-op steps.

    Args:
        graph: the graph to plan.
        fusible: whether the target can put this equation (elementwise, reduction, or a
            ``fusion="shifted"`` equation) in a kernel; other equations become single-op steps.
        prefer_kernel: whether a group made of just this one equation is still worth a
            kernel (true for transcendental math; false for ``add``, ``reduce_sum``...).
        max_eqns: bound on a group's size.
        recompute: recompute cheap values of earlier groups instead of storing them.
    """
    eqns = graph.eqns
    resolve = _view_resolver(graph)

    steps: list = []
    producer: dict[Var, object] = {}          # Var -> step
    reduction_out: set[Var] = set()
    readers_of_root: dict[Var, list[Group]] = {}
    group_of_eqn: dict[int, Group] = {}
    by_shape: dict[tuple, list[Group]] = {}

    def loop_shape(e: Eqn):
        if _pointwise(e):
            return e.outputs[0].aval.shape
        return e.inputs[0].aval.shape

    def legal(e: Eqn, g: Group, shape) -> bool:
        if g.shape != shape or len(g.eqns) >= max_eqns:
            return False
        if not _pointwise(e) and g.reduction is not None:
            return False
        shifted = e.op.fusion == "shifted"
        for a in e.inputs:
            root, amap = resolve(a, shape)
            if not isinstance(root, Var):
                continue
            p = producer.get(root)
            if p is None:
                continue
            if p is g:
                if shifted:      # a shifted read of the group's own value: not elementwise
                    return False
                if root in reduction_out and not (_epilogue_reduction(eqns[g.reduction])
                                                  and amap == tuple(range(len(shape)))):
                    return False
                if amap != tuple(range(len(shape))) and amap != ():
                    return False
            elif p.id > g.id:
                return False
        return True

    for i in _visit_order(eqns):
        e = eqns[i]
        shape = loop_shape(e) if _pointwise(e) or e.op.reduction else None
        if shape is None or not fusible(e) or 0 in shape:
            st = OpStep(len(steps), i, view=e.op.fusion == "view")
            steps.append(st)
            for o in e.outputs:
                producer[o] = st
            continue
        roots = [resolve(a, shape)[0] for a in e.inputs]
        cands: list[Group] = []
        for r in roots:
            if isinstance(r, Var):
                p = producer.get(r)
                if isinstance(p, Group) and p not in cands:
                    cands.append(p)
        cands.sort(key=lambda g: -g.id)
        for r in roots:
            if isinstance(r, Var):   # the latest few readers (a weight read by every step
                for g in reversed(readers_of_root.get(r, [])[-4:]):   # must not be O(n^2))
                    if g not in cands:
                        cands.append(g)
        # then any recent group over the same loop shape (e.g. for constant-only equations)
        # that has no reduction yet: unrelated work joining a reduction's group takes the
        # group from the next reduction of that shape (a skinny product written as
        # mul + reduce_sum would find its multiply there and its sum alone, a single op
        # step, and the product stored in full)
        for g in reversed(by_shape.get(shape, [])[-4:]):
            if g not in cands and g.reduction is None:
                cands.append(g)
        target = next((g for g in cands if legal(e, g, shape)), None)
        if target is None:
            target = Group(len(steps), shape, [])
            steps.append(target)
            by_shape.setdefault(shape, []).append(target)
        target.eqns.append(i)
        group_of_eqn[i] = target
        if not _pointwise(e):
            target.reduction = i
            reduction_out.update(e.outputs)
        for o in e.outputs:
            producer[o] = target
        for r in roots:
            if isinstance(r, Var) and producer.get(r) is not target:
                lst = readers_of_root.setdefault(r, [])
                if target not in lst[-4:]:
                    lst.append(target)

    for g in steps:
        if isinstance(g, Group):
            g.eqns.sort()        # graph order is topological; visit order may differ
    _demote_cheap_singletons(eqns, steps, producer, reduction_out, prefer_kernel,
                             resolve if recompute else None)

    groups = [s for s in steps if isinstance(s, Group)]
    if recompute:
        _recompute(graph, groups, producer, resolve, reduction_out)

    kept = _live_steps(graph, steps, groups, producer, resolve, reduction_out)
    return FusionPlan(graph, kept, producer, resolve)


def _scalar(e: Eqn) -> bool:
    """A 0-d elementwise equation: arithmetic on scalars (``log(scale)``, ``1 / n``)."""
    return _pointwise(e) and all(o.aval.ndim == 0 for o in e.outputs)


def _visit_order(eqns) -> list[int]:
    """Graph order, except that each 0-d elementwise equation comes as soon as its inputs are
    computed. Scalars are often derived from parameters late in a traced function
    (``logpdf(z) - log(scale)``); visited there, the array equation that reads such a scalar
    could not join the group of the arrays it reads (rule (d): the scalar's step would be
    created after that group), and the group would be split in two kernels with an array
    written and read back between them. The other equations keep their graph order (the
    smallest index ready is taken, and a scalar ready is taken first)."""
    if not any(_scalar(e) for e in eqns):
        return list(range(len(eqns)))
    producer = {o: i for i, e in enumerate(eqns) for o in e.outputs}
    waiting = [0] * len(eqns)
    readers: dict[int, list[int]] = {}
    for i, e in enumerate(eqns):
        deps = {producer[a] for a in e.inputs if isinstance(a, Var) and a in producer}
        waiting[i] = len(deps)
        for d in deps:
            readers.setdefault(d, []).append(i)
    ready = [(not _scalar(e), i) for i, e in enumerate(eqns) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for r in readers.get(i, ()):
            waiting[r] -= 1
            if not waiting[r]:
                heapq.heappush(ready, (not _scalar(eqns[r]), r))
    return order


def _demote_cheap_singletons(eqns, steps, producer, reduction_out, prefer_kernel,
                             resolve=None) -> None:
    """Replace, in place, each group of one equation ``prefer_kernel`` declines by an op step:
    a group of one cheap equation is a numpy call (no compile, same speed). Kept (with
    ``resolve``, when values are recomputed): a lone reduction of a cheap value of an earlier
    group over its loop shape. As a kernel it recomputes that value (``_recompute``), so the
    earlier group need not store it for numpy to read back (the row sums of a cross-entropy
    gradient's ``-y / n`` read ``y``, instead of a stored product of ``y``'s size), when the
    value has at least ``LONE_REDUCTION_MIN`` elements."""
    producer_eqn = ({o: i for i, e in enumerate(eqns) for o in e.outputs}
                    if resolve is not None else {})

    def recomputable(e) -> bool:
        """The value ``_recompute`` would recompute here: a cheap cone of one read."""
        if resolve is None or _pointwise(e) or e.inputs[0].aval.size < LONE_REDUCTION_MIN:
            return False
        root, amap = resolve(e.inputs[0], e.inputs[0].aval.shape)
        p = producer.get(root) if isinstance(root, Var) else None
        if not (isinstance(p, Group) and p.shape == e.inputs[0].aval.shape
                and root not in reduction_out and amap == tuple(range(len(p.shape)))):
            return False
        found = _cheap_cone(root, p, eqns, producer_eqn, resolve)
        return found is not None and len(found[1]) <= 1
    for k, s in enumerate(steps):
        if isinstance(s, Group) and len(s.eqns) == 1 and not prefer_kernel(eqns[s.eqns[0]]) \
                and not recomputable(eqns[s.eqns[0]]):
            st = OpStep(s.id, s.eqns[0])
            steps[k] = st
            for o in eqns[s.eqns[0]].outputs:
                producer[o] = st
            reduction_out.difference_update(eqns[s.eqns[0]].outputs)


def _live_steps(graph, steps, groups, producer, resolve, reduction_out) -> list:
    """The steps that remain, renumbered, with each live group's ``outputs`` set.

    Which values each step reads (after folding) gives group outputs and needed views. A
    group whose every value is recomputed by later groups (and that closes no reduction)
    writes nothing: it is dropped, which may leave more values unread (a fixed point). A view
    op step nothing reads is dropped too.
    """
    eqns = graph.eqns
    live = groups
    while True:
        needed, outputs = _needed_values(graph, steps, live, producer, resolve, reduction_out)
        dead = {id(g) for g in live if not outputs[g.id] and g.reduction is None}
        if not dead:
            break
        live = [g for g in live if id(g) not in dead]
    for g in live:
        g.outputs = outputs[g.id]
        if g.reduction is not None:
            g.reduction_read = eqns[g.reduction].outputs[0] in needed
    live_ids = {id(g) for g in live}
    kept = []
    for s in steps:
        if isinstance(s, OpStep) and s.view and eqns[s.eqn].outputs[0] not in needed:
            continue
        if isinstance(s, Group) and id(s) not in live_ids:
            continue
        kept.append(s)
    for k, s in enumerate(kept):
        s.id = k
    return kept


def _needed_values(graph, steps, groups, producer, resolve, reduction_out):
    """The values read by ``groups`` (after folding views into their reads), by op steps and
    by the graph's outputs, with the views those need; and per group id, the values it must
    write (its members that are needed and that it produces)."""
    eqns = graph.eqns
    needed: set = {a for a in graph.outputs if isinstance(a, Var)}

    def reads_own_result(s, a) -> bool:
        return s.reduction is not None and a in eqns[s.reduction].outputs and \
            _epilogue_reduction(eqns[s.reduction])
    for s in groups:
        members = {o for i in s.eqns for o in eqns[i].outputs}
        roots = []
        for i in s.eqns:
            for a in eqns[i].inputs:
                # a member value, or the reduction result read by the group's epilogue
                if isinstance(a, Var) and a in members and (
                        a not in reduction_out or reads_own_result(s, a)):
                    continue
                r = resolve(a, s.shape)[0]
                if isinstance(r, Var) and r not in members and r not in roots:
                    roots.append(r)
        s.roots = roots
        needed.update(roots)
    for s in steps:
        if isinstance(s, OpStep) and not s.view:
            needed.update(a for a in eqns[s.eqn].inputs if isinstance(a, Var))
    # views run only when read outside groups (reverse order handles chains of views)
    for s in reversed(steps):
        if isinstance(s, OpStep) and s.view:
            e = eqns[s.eqn]
            if e.outputs[0] in needed:
                needed.update(a for a in e.inputs if isinstance(a, Var))
    outputs = {}
    for s in groups:
        outs = []
        for i in s.eqns:
            if i == s.reduction:
                continue
            for o in eqns[i].outputs:
                if o in needed and producer.get(o) is s:
                    outs.append(o)
        outputs[s.id] = outs
    return needed, outputs


def _epilogue_reduction(e: Eqn) -> bool:
    """A reduction whose result keeps its operand's shape (softmax): elementwise equations
    of its group may read that result, in a last pass over each row (its *epilogue*)."""
    return e.outputs[0].aval.shape == e.inputs[0].aval.shape


def _pointwise(e: Eqn) -> bool:
    """Elementwise over its output shape: elementwise ops and shifted reads (``pad``)."""
    return e.op.elementwise or e.op.fusion == "shifted"


def _recompute(graph, groups, producer, resolve, reduction_out):
    """Duplicate cheap elementwise cones of earlier groups into the groups that read them,
    when the cone adds at most one read (the one that replaces reading the value itself), so
    recomputing costs no extra memory traffic and the earlier group may not need to store the
    value. The inputs of shifted reads (``pad``) are never recomputed (a shifted read of a
    member value is not elementwise)."""
    eqns = graph.eqns
    producer_eqn = {o: i for i, e in enumerate(eqns) for o in e.outputs}
    readers: dict[Var, set[int]] = {}
    for i, e in enumerate(eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                readers.setdefault(a, set()).add(i)
    graph_outputs = {a for a in graph.outputs if isinstance(a, Var)}

    def stored(v: Var, h: Group) -> bool:
        """Whether ``h`` writes ``v`` whatever the later groups recompute: an equation
        outside ``h`` reads it, or the graph returns it."""
        hset = set(h.eqns)
        return v in graph_outputs or any(i not in hset for i in readers.get(v, ()))

    for g in groups:
        # values the group's shifted reads read: they must stay outside the group
        shifted_roots = set()
        for i in g.eqns:
            if eqns[i].op.fusion == "shifted":
                r = resolve(eqns[i].inputs[0], g.shape)[0]
                if isinstance(r, Var):
                    shifted_roots.add(r)
        changed = True
        while changed:
            changed = False
            members = {o for i in g.eqns for o in eqns[i].outputs}
            reads = set()
            viewed = set()      # values the group reads through a non-identity view
            ident = tuple(range(len(g.shape)))
            for i in g.eqns:
                for a in eqns[i].inputs:
                    r, amap = resolve(a, g.shape)
                    if isinstance(r, Var) and r not in members:
                        reads.add(r)
                        if amap not in (ident, ()):
                            viewed.add(r)
            for i in list(g.eqns):
                if eqns[i].op.fusion == "shifted":
                    continue
                for a in eqns[i].inputs:
                    root, amap = resolve(a, g.shape)
                    if not isinstance(root, Var) or root in members or root in reduction_out:
                        continue
                    h = producer.get(root)
                    if not isinstance(h, Group) or h is g or h.shape != g.shape:
                        continue
                    if amap != tuple(range(len(g.shape))):
                        continue
                    found = _cheap_cone(root, h, eqns, producer_eqn, resolve,
                                        lambda v, h=h: stored(v, h))
                    if found is None:
                        continue
                    cone, leaves = found
                    if shifted_roots and any(o in shifted_roots for j in cone
                                             for o in eqns[j].outputs):
                        continue
                    # a value read through a view (x + x.T) must stay outside: kernels read
                    # member values only at the loop index
                    if viewed and any(o in viewed for j in cone for o in eqns[j].outputs):
                        continue
                    # at most one new read, replacing the read of ``root`` itself
                    if len(leaves - (reads - {root})) > 1 or \
                            len(g.eqns) + len(cone) > MAX_GROUP_EQNS:
                        continue
                    g.eqns = sorted(set(g.eqns) | set(cone))
                    g.recomputed = sorted(set(g.recomputed) | set(cone))
                    members.update(o for j in cone for o in eqns[j].outputs)
                    reads.discard(root)
                    changed = True
                    break
                if changed:
                    break


def _cheap_cone(root, h: Group, eqns, producer_eqn, resolve, stored=lambda v: False):
    """The equations of group ``h`` computing ``root`` from values the later group can read,
    if they are few and all cheap, with those values; else None. Readable: ``h``'s external
    reads, and values of ``h`` that ``h`` writes anyway (``stored``: read outside ``h``) but
    that are costly to recompute -- ``1 - h * h`` after ``h = tanh(z)`` is recomputed from the
    stored ``h``, not from ``z``."""
    cone: list[int] = []
    leaves: set = set()
    stack = [root]
    hset = set(h.eqns)
    seen = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        i = producer_eqn.get(v)
        if i is None or i not in hset:
            leaves.add(v)     # an external read of h: available to the later group too
            continue
        e = eqns[i]
        if i == h.reduction or not e.op.cheap:
            if v is not root and stored(v):
                leaves.add(v)     # h writes it anyway: read it rather than recompute it
                continue
            return None
        cone.append(i)
        if len(cone) > RECOMPUTE_MAX:
            return None
        for a in e.inputs:
            r, _ = resolve(a, h.shape)
            if isinstance(r, Var):
                stack.append(r)
    return sorted(cone), leaves
