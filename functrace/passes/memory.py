"""Liveness and buffer planning over an ordered list of steps (side tables only).

Owns ``last_uses``, ``plan_buffers`` and the side tables they take (``step_io``, ``view_bases``,
``escaping_values``). The input is abstract: per step, the Vars it reads and
the Vars it writes, plus which written Vars may live in planned storage. The output says, for
every such Var, which storage slot holds it; slots are reused once their previous value is
dead (the nnvm ``plan_memory`` idea: best fit among free slots, never growing a slot by more
than a factor). Imports core only; backends turn slots into real buffers.

Invariants:
* A slot is handed to a new value only at a step strictly after the last use of the value
  that held it, so a kernel never reads and writes the same memory (that would also stop
  LLVM from vectorising its loop); the exception is an explicitly *donated* input, which may
  be overwritten by an output of the very step that reads it last, when that step reads it
  elementwise (``inplace_ok``).
* Values that escape to the caller (graph outputs and anything they may be views of) are
  never placed in pooled slots: the pool is reused by the next call.
* A view aliases its base: a step that reads a view (a reshape, transpose, broadcast or slice
  of a pooled value, made by a numpy step) reads the base's memory, so the base's last use
  is extended to the last use of every view of it, transitively (``aliases``). Without this
  the base's slot was handed to a new value while a view of it was still to be read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ..core import Var

__all__ = ["last_uses", "BufferPlan", "plan_buffers", "step_io", "view_bases",
           "escaping_values"]


def last_uses(reads: Sequence[Sequence[Var]], outputs: Sequence,
              aliases: Mapping[Var, Sequence[Var]] | None = None) -> dict[Var, int]:
    """Index of the last step reading each Var; graph outputs live to ``len(reads)``.

    ``aliases`` maps a value that may be a view to the values it may be a view of, in the
    order the values are made: a base lives as long as its longest-lived view (transitively:
    a view of a view of ``x`` keeps ``x`` alive)."""
    last: dict[Var, int] = {}
    for s, rs in enumerate(reads):
        for v in rs:
            last[v] = s
    end = len(reads)
    for a in outputs:
        if isinstance(a, Var):
            last[a] = end
    if aliases:
        for view in reversed(list(aliases)):      # latest views first: transitive
            s = last.get(view)
            if s is None:
                continue
            for base in aliases[view]:
                if last.get(base, -1) < s:
                    last[base] = s
    return last


@dataclasses.dataclass
class BufferPlan:
    """Where each planned value lives.

    Attributes:
        slot_of: Var -> slot index (pooled slots are ``0..len(sizes)-1``).
        sizes: bytes per pooled slot.
        donated_slot: Var -> index of the donated input whose buffer it reuses.
        frees_after: per step, the Vars whose last use it is (the interpreter drops them).
    """

    slot_of: dict[Var, int]
    sizes: list[int]
    donated_slot: dict[Var, int]
    frees_after: list[list[Var]]

    @property
    def pool_bytes(self) -> int:
        return sum(self.sizes)


def plan_buffers(reads: Sequence[Sequence[Var]], writes: Sequence[Sequence[Var]],
                 outputs: Sequence, poolable: Callable[[Var], bool],
                 nbytes: Callable[[Var], int], donated: Sequence[tuple[int, Var]] = (),
                 inplace_ok: Callable[[int, Var], bool] = lambda s, v: False,
                 slack: float = 2.0,
                 aliases: Mapping[Var, Sequence[Var]] | None = None) -> BufferPlan:
    """Assign pooled storage to the values written by each step.

    Args:
        reads, writes: per step, the Vars read and written (in execution order).
        outputs: the graph's output atoms (they live to the end and are never pooled).
        poolable: whether a written Var may live in planned storage (kernel outputs that do
            not escape).
        nbytes: bytes of a Var.
        donated: ``(input index, Var)`` of donated inputs: after their last use their buffer
            may hold an *escaping* value of the same size (an output reuses the input).
        inplace_ok: ``(step, donated Var)`` -> whether the step reads the donated Var only
            elementwise, so an output of that step may overwrite it.
        slack: a free slot is reused for a value only if it is at most ``slack`` times larger.
        aliases: view -> the values it may be a view of, in the order they are made
            (``view_bases``); a base's storage lives until its views' last use.
    """
    n = len(reads)
    last = last_uses(reads, outputs, aliases)
    frees_after: list[list[Var]] = [[] for _ in range(n)]
    out_vars = {a for a in outputs if isinstance(a, Var)}
    for v, s in last.items():
        if s < n and v not in out_vars:
            frees_after[s].append(v)
    slot_of: dict[Var, int] = {}
    sizes: list[int] = []
    free: list[int] = []                      # pooled slots available
    release_at: dict[int, list[int]] = {}    # step -> slots freed after it
    donor_free: list[tuple[int, Var]] = []    # donated inputs whose last use has passed
    donor_release: dict[int, list[tuple[int, Var]]] = {}
    donated_slot: dict[Var, int] = {}
    for k, v in donated:
        s = last.get(v, -1)
        if s < 0:
            donor_free.append((k, v))
        else:
            donor_release.setdefault(s, []).append((k, v))
    for s in range(n):
        # donated inputs read last by this step, elementwise, can take this step's outputs
        same_step = [(k, v) for k, v in donor_release.get(s, []) if inplace_ok(s, v)]
        for v in writes[s]:
            need = nbytes(v)
            if v in out_vars or not poolable(v):
                if not poolable(v) and v not in out_vars:
                    continue
                for pool in (donor_free, same_step):
                    hit = next((d for d in pool if nbytes(d[1]) == need), None)
                    if hit is not None:
                        pool.remove(hit)
                        donated_slot[v] = hit[0]
                        break
                continue
            best = None
            for j in free:
                if need <= sizes[j] <= max(need * slack, need + 64) and (
                        best is None or sizes[j] < sizes[best]):
                    best = j
            if best is None:
                best = len(sizes)
                sizes.append(need)
            else:
                free.remove(best)
            slot_of[v] = best
            ls = last.get(v, s)
            release_at.setdefault(max(ls, s), []).append(best)
        free.extend(release_at.pop(s, []))
        used = set(donated_slot.values())
        donor_free.extend(d for d in donor_release.get(s, []) if d[0] not in used)
    return BufferPlan(slot_of, sizes, donated_slot, frees_after)


def step_io(graph, steps, binding_of: Callable) -> tuple[list, list]:
    """Per step of a fusion plan, the Vars it reads and writes.

    ``binding_of(group)`` gives a kernel's binding (``operands``: (atom, ...) pairs,
    ``outputs``: (var, ...) pairs, ``reduction``: None or (var, ...)); an op step reads and
    writes its equation's Vars."""
    from .fusion import Group
    reads, writes = [], []
    for s in steps:
        if isinstance(s, Group):
            b = binding_of(s)
            reads.append([a for a, _ in b.operands if isinstance(a, Var)])
            w = [v for v, _ in b.outputs]
            if b.reduction is not None:
                w.append(b.reduction[0])
            writes.append(w)
        else:
            e = graph.eqns[s.eqn]
            reads.append([a for a in e.inputs if isinstance(a, Var)])
            writes.append(list(e.outputs))
    return reads, writes


def view_bases(graph, steps, fresh_result: Callable) -> dict:
    """For every op step whose result may be a view of its inputs (``not
    fresh_result(eqn)``: reshape, transpose, broadcast, slice, ...), its outputs mapped to its
    Var inputs, in step order: the ``aliases`` of ``plan_buffers``."""
    from .fusion import OpStep
    out: dict = {}
    for s in steps:
        if isinstance(s, OpStep):
            e = graph.eqns[s.eqn]
            if not fresh_result(e):
                bases = [a for a in e.inputs if isinstance(a, Var)]
                if bases:
                    for o in e.outputs:
                        out[o] = bases
    return out


def escaping_values(graph, steps, fresh_result: Callable) -> set:
    """Values that reach the caller: the graph's outputs, and whatever an op step whose
    result may be a view of its inputs (``not fresh_result(eqn)``) reads to produce them.
    Such values must never live in a reused pool buffer."""
    from .fusion import OpStep
    escaping = {a for a in graph.outputs if isinstance(a, Var)}
    for s in reversed(steps):
        if isinstance(s, OpStep):
            e = graph.eqns[s.eqn]
            if not fresh_result(e) and any(o in escaping for o in e.outputs):
                escaping.update(a for a in e.inputs if isinstance(a, Var))
    return escaping
