"""The ``Target`` interface and the planning loop every compiled target runs.

Owns ``Target`` (what the shared lowering asks a target: which equations it fuses, which lone
equations still deserve a kernel; override its hooks, as torch.fx's ``CodeGen`` is
overridden), ``plan_kernels`` (fusion plan, then a kernel spec per group; a group the target
cannot express is planned again without its equations, until every group compiles),
``fold_constants_any_size`` (the constant folding a graph gets before it runs) and
``fresh_result``. Text only: never imports numba. Imports core, passes and ``lowering.spec``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np

from ...core import Graph
from ...passes.fusion import FusionPlan, Group, plan_fusion
from ...passes.loops import splice
from ...passes.simplify import fold_constants
from . import scalar_fn
from .spec import Binding, KernelSpec, Unsupported, build_spec, fusible_pad, supports, target_code

__all__ = ["Target", "KernelPlan", "plan_kernels", "fold_constants_any_size", "fresh_result",
           "expand_unfused"]

log = logging.getLogger("functrace")


class Target:
    """What a compiled target tells the shared lowering. Subclass it and override the hooks.

    Attributes:
        name: the key of the ops' code for this target (``op.code[name]``) and of
            ``spec.build_spec``.
        label: how messages name the target ("CPU").

    Example:
        >>> class Plain(Target):
        ...     name, label = "cpu", "plain CPU"
        ...     def dtype_ok(self, dt):
        ...         return dt.kind == "f"
        >>> Plain().supports(__import__("functrace").ops.sin_p)
        True
    """

    name = ""
    label = ""

    def dtype_ok(self, dt: np.dtype) -> bool:
        """Whether kernels of this target compute values of dtype ``dt``."""
        raise NotImplementedError

    def supports(self, op) -> bool | str:
        """Whether this target's kernels can hold ``op`` (dtypes aside): True, or why not."""
        return supports(op, self.name)

    def reduction_reason(self, e, kind: str, axes: tuple) -> str | None:
        """Why a reduction of this kind over these axes is not fused (None: it is)."""
        x = e.inputs[0].aval
        if kind == "logsumexp" and x.dtype.kind != "f":
            return "logsumexp of non-float data"
        if kind == "softmax":
            return f"no softmax kernel on the {self.label} target (it runs as its op's impl)"
        return None

    def unfused_reason(self, e) -> str | None:
        """Why this target cannot put equation ``e`` in a kernel (None: it can)."""
        op = e.op
        if not all(self.dtype_ok(a.aval.dtype) for a in e.inputs) or \
                not all(self.dtype_ok(o.aval.dtype) for o in e.outputs):
            return f"a dtype {self.label} kernels do not compute (complex, float16)"
        if op.elementwise:
            code = target_code(op, self.name)
            if isinstance(code, str):
                return code
            if not {a.aval.dtype.kind for a in e.inputs} <= set(code.kinds):
                return f"{op.name}'s {self.label} code is exact for dtype kinds {code.kinds!r} only"
            return scalar_fn.why_not(op, self.name, [a.aval.dtype for a in e.inputs])
        if op.fusion == "shifted":      # a guarded shifted read (spec.fusible_pad)
            return None if fusible_pad(e, self.dtype_ok) else "not a plain constant pad"
        kind = op.reduce_kind
        if kind is None:
            return self.supports(op) if op.fusion != "view" else "views fold into their readers"
        axes = tuple(e.params["axes"])
        if not axes:
            return "a reduction over no axes"
        if kind in ("sum", "prod") and e.inputs[0].aval.dtype.kind == "b":
            return "a bool sum or product"
        return self.reduction_reason(e, kind, axes)

    def fusible(self, e) -> bool:
        """Whether this target can put equation ``e`` in a kernel."""
        return self.unfused_reason(e) is None

    def prefer_kernel(self, e) -> bool:
        """Whether a group of this one equation still deserves a kernel (else the equation
        runs as its op's impl)."""
        return False


@dataclasses.dataclass
class KernelPlan:
    """A fusion plan whose every group has a kernel.

    Attributes:
        plan: the ``FusionPlan``.
        kernels: group id -> what ``make_kernel`` made of the group's spec.
        no_fuse: the equation indices kept out of kernels (given, and found unsupported).
        unsupported: (ops, reason) of each group that could not be a kernel.
    """

    plan: FusionPlan
    kernels: dict
    no_fuse: frozenset
    unsupported: list


def plan_kernels(graph: Graph, target: Target,
                 make_kernel: Callable[[Group, KernelSpec, Binding], object],
                 no_fuse: frozenset = frozenset(), rounds: int = 8) -> KernelPlan:
    """Plan fusion until every group can be expressed as a kernel of ``target`` (re-plans are
    rare: a group whose spec raises ``Unsupported`` is planned again without its equations).
    ``no_fuse`` holds equation indices that stay out of kernels."""
    no_fuse = set(no_fuse)
    index = {id(e): i for i, e in enumerate(graph.eqns)}

    def can_fuse(e):
        return index[id(e)] not in no_fuse and target.fusible(e)

    unsupported: list[tuple[str, str]] = []
    for _ in range(rounds):
        plan = plan_fusion(graph, can_fuse, target.prefer_kernel)
        bad: list[int] = []
        kernels = {}
        for s in plan.steps:
            if isinstance(s, Group):
                try:
                    spec, binding = build_spec(graph, s, target.name, plan.resolve)
                except Unsupported as exc:
                    log.debug("group %d not fused: %s", s.id, exc)
                    unsupported.append(
                        (" ".join(graph.eqns[i].op.name for i in s.eqns), str(exc)))
                    bad.extend(s.eqns)
                    continue
                kernels[s.id] = make_kernel(s, spec, binding)
        if not bad:
            break
        no_fuse.update(bad)
    return KernelPlan(plan, kernels, frozenset(no_fuse), unsupported)


def expand_unfused(g: Graph, target: Target) -> Graph:
    """``g`` with each equation ``target`` cannot put in a kernel replaced, where its op
    declares an expansion (``Op.expand``), by the expansion's equations on fresh variables
    (traced once per equation); its parts may then fuse with their neighbours. Other
    equations, and graphs with no such equation, are returned as they are."""
    if not any(e.op.expand is not None and not target.fusible(e) for e in g.eqns):
        return g
    from ...tracing import trace_to_graph

    def sub_of(e):
        if e.op.expand is None or target.fusible(e):
            return None
        op, params = e.op, e.params

        def fn(*xs):
            out = op.expand(*xs, **params)
            return list(out) if op.multiple_results else [out]
        return trace_to_graph(fn, [a.aval for a in e.inputs]).graph
    # the expansion's equations take the user's line of the equation they replace
    return splice(g, sub_of, own_source=False)


_FOLD_LIMIT = 1 << 22      # elements; larger constant results stay equations


def fold_constants_any_size(g: Graph) -> Graph:
    """Evaluate, once at lowering time, every equation whose inputs are all literals (slices,
    pads and arithmetic on constant basis matrices from ``jacfwd``, ...), however large: the
    result becomes a literal the kernels read. (``passes.simplify`` folds only small ones,
    to keep graphs printable; here the graph is about to run.)"""
    return fold_constants(g, max_size=_FOLD_LIMIT, keep_scalar_broadcasts=False)


def fresh_result(e) -> bool:
    """Whether an op step's outputs are new arrays, never views of its inputs (the
    declaration's ``fresh``); any other op's result may alias its inputs (gather of a slice,
    reshape, ...), so those inputs escape too."""
    return e.op.fresh
