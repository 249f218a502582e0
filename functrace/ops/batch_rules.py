"""Batch rules of the op families, and ``rule_for(op)``: the batch rule of any op.

Owns the helpers every batch rule uses (``size_of``, ``moveaxis``, ``bdim_to_front``: they live in
``ops.shape``, whose rules use them too) and the
rules shared by a family of ops, chosen by the declaration's ``batch_family``:
``"elementwise"`` (operands batched or broadcast to one leading batch axis), ``"axes"`` (the
op's single operand; the param named by ``batch_axes`` shifts by one) and ``"leading"`` (the op
accepts any leading batch axes, numpy.linalg style). The transforms ask ``rule_for(op)``: the
declaration's own ``op.batch`` if it set one, else the family's rule, built on the first
request and kept on the op. A declaring module therefore never imports this one (the
elementwise family sits below ``ops.shape``, which these rules need). Imports core/tracing and
``ops.shape`` only.

A batch rule has the signature ``rule(args, dims, **params) -> (outs, out_dims)``: ``args`` are
values in the current trace, ``dims[i]`` is the batch axis of ``args[i]`` or ``None`` (not
batched). Rules emit batched ops, never a Python loop over the batch.
"""

from __future__ import annotations

from ..core import Op
from ..tracing import bind
from ._base import shape_of
from .shape import bdim_to_front, broadcast_in_dim, moveaxis, size_of

__all__ = ["moveaxis", "bdim_to_front", "size_of", "rule_for", "FAMILIES"]


def _outs(op, out):
    if op.multiple_results:
        return tuple(out), (0,) * len(out)
    return (out,), (0,)


def _elementwise(op: Op):
    def rule(args, dims, **params):
        size = size_of(args, dims)
        unb = [tuple(s for i, s in enumerate(shape_of(a)) if i != d) if d is not None
               else tuple(shape_of(a)) for a, d in zip(args, dims)]
        out_shape = next((s for s in unb if s), ())
        new = []
        for a, d, s in zip(args, dims, unb):
            if d is not None:
                a = moveaxis(a, d, 0)
                if not s and out_shape:
                    a = broadcast_in_dim(a, (size, *out_shape), (0,))
            elif s:
                a = broadcast_in_dim(a, (size, *out_shape), tuple(range(1, len(out_shape) + 1)))
            new.append(a)
        return _outs(op, bind(op, *new, **params))
    return rule


def _axes(op: Op):
    key = op.batch_axes
    if key is None:
        raise ValueError(f"op {op.name}: batch_family='axes' needs batch_axes (the param that "
                         "names the operand's axes)")

    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        x = moveaxis(x, d, 0)
        v = params[key]
        params = {**params, key: tuple(a + 1 for a in v) if isinstance(v, tuple) else v + 1}
        return _outs(op, bind(op, x, **params))
    return rule


def _leading(op: Op):
    def rule(args, dims, **params):
        size = size_of(args, dims)
        return _outs(op, bind(op, *[bdim_to_front(a, d, size) for a, d in zip(args, dims)],
                              **params))
    return rule


#: batch family -> rule factory (op -> rule)
FAMILIES = {"elementwise": _elementwise, "axes": _axes, "leading": _leading}


def rule_for(op: Op):
    """The batch rule of ``op``: its own ``op.batch``, else its ``batch_family``'s rule (built
    once, then kept as ``op.batch``); None when it has neither (vmap of it is a
    MissingRuleError, raised by the caller, which knows the user's line)."""
    if op.batch is None and op.batch_family is not None:
        try:
            factory = FAMILIES[op.batch_family]
        except KeyError:
            raise ValueError(f"op {op.name}: unknown batch_family {op.batch_family!r} (one of "
                             f"{sorted(FAMILIES)})") from None
        op.batch = factory(op)
    return op.batch
