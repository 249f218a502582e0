"""Marking arrays as variables: mark_variables, attach_grad, drop_grads, grad_of.

Owns how an array becomes a variable (a leaf, or a recorded result: a non-leaf variable) and
stops being one (MXNet's MarkVariables and DropGrads). Imports the sibling ``_ndarray``
and ``_nodes``.
"""

from __future__ import annotations

import numpy as np

from ..core import Var
from ..errors import FunctraceTypeError, FunctraceValueError, ShapeError, where
from ._ndarray import NDArray, wrap
from ._nodes import Slot, as_list, check_req

__all__ = ["attach_grad", "drop_grads", "grad_of", "mark_variables"]


def mark_variables(variables, gradients, grad_reqs="write", _what="mark_variables") -> None:
    """Mark arrays as variables whose gradients ``backward`` writes into ``gradients``.

    Args:
        variables: an NDArray or a list of them (marked in place).
        gradients: the gradient buffers, one NDArray per variable, of the variable's shape.
        grad_reqs: "write" (overwrite), "add" (accumulate across backward calls) or "null"
            (no gradient), one for all or one per variable.

    A result computed while recording can be marked too (a non-leaf variable): backward then
    also writes the gradient with respect to it. Marking an array twice is an error; unmark it
    with ``drop_grads`` first.

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x, gx = autograd.array([1.0, 2.0]), autograd.array([0.0, 0.0])
        >>> autograd.mark_variables([x], [gx], "add")
        >>> x.grad is gx
        True
    """
    variables, gradients = as_list(variables), as_list(gradients)
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    if not len(variables) == len(gradients) == len(reqs):
        raise FunctraceValueError(
            f"mark_variables: got {len(variables)} variables, {len(gradients)} gradients and "
            f"{len(reqs)} grad_reqs; give one of each per variable ({where()})")
    for i, (v, g, req) in enumerate(zip(variables, gradients, reqs, strict=True)):
        if not isinstance(v, NDArray) or not isinstance(g, NDArray):
            bad = v if not isinstance(v, NDArray) else g
            raise FunctraceTypeError(
                f"mark_variables marks autograd arrays in place, but got a "
                f"{type(bad).__name__} (variable {i}). Use x = autograd.attach_grad(x), which "
                "returns an autograd array, or wrap it with autograd.array(x) first "
                f"({where()})")
        check_req(req)
        if v.dtype.kind not in "fc":
            raise FunctraceTypeError(
                f"autograd.{_what}: variable {i} has dtype {v.dtype}; only float (or complex) "
                "arrays have gradients. Fix: convert it first, e.g. "
                f"autograd.attach_grad(x.astype(float)) ({where()})")
        if g.shape != v.shape:
            raise ShapeError(f"mark_variables: the gradient buffer of variable {i} has shape "
                             f"{g.shape}, the variable {v.shape} ({where()})")
        if v._slot is not None:
            raise FunctraceValueError(
                f"autograd.{_what}: variable {i} ({v.aval}) already has a gradient attached "
                f"(grad_req={v._slot.req!r}); an array can be marked once. Call "
                "autograd.drop_grads([x]) first to unmark it, or set x.grad_req to change "
                f"how its gradient is written ({where()})")
        slot = Slot(g, req)
        node = v._node
        if node is not None and not node.freed:   # a recorded result: a non-leaf variable
            if node.marks is None:
                node.marks = {}
            node.marks[v._index] = slot
        else:
            v._node = None
            v._var = Var(v._var.aval)   # a fresh variable, unknown to graphs recorded so far
        v._slot = slot


def attach_grad(x, grad_req: str = "write") -> NDArray:
    """Mark ``x`` as a variable with a zero gradient buffer; returns it as an autograd array.

    ``x`` may be an NDArray (marked in place and returned) or anything ``numpy.asarray``
    accepts (copied into a new NDArray).

    Example:
        >>> import numpy as np
        >>> from functrace import autograd
        >>> x = autograd.attach_grad(np.array([1.0, 2.0]))
        >>> x.grad, x.grad_req
        (NDArray([0., 0.]), 'write')
    """
    if not isinstance(x, NDArray):
        x = NDArray(x)
    mark_variables([x], [wrap(np.zeros_like(x._data))], [grad_req], _what="attach_grad")
    return x


def drop_grads(variables) -> None:
    """Unmark variables and free their gradient buffers (MXNet's DropGrads).

    Graphs recorded before keep working; the array no longer gets a gradient from them and
    new recordings treat it as a constant until it is marked again.
    """
    for v in as_list(variables):
        if not isinstance(v, NDArray) or v._slot is None:
            continue
        slot = v._slot
        slot.grad, slot.req = None, "null"
        if v._node is not None and v._node.marks:
            v._node.marks.pop(v._index, None)
        v._slot = None


def grad_of(x: NDArray) -> NDArray | None:
    """``x.grad``: the gradient buffer of a marked array (None if not marked)."""
    return x.grad if isinstance(x, NDArray) else None


def _attach_grad_method(self, grad_req: str = "write") -> NDArray:
    """Mark this array as a variable with a zero gradient buffer; returns it."""
    return attach_grad(self, grad_req)


# NDArray sits below this module; its method is installed here (as functrace.numpy installs
# the array methods of a Tracer), so the import runs one way
NDArray.attach_grad = _attach_grad_method
