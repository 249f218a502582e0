"""functrace.extend: define new primitives from outside the package.

Owns the public op-definition API. The package declares its own elementwise ops through the
same constructor (``ops.elementwise.elementwise_op``), so an op defined here is a first-class
primitive: it runs eagerly, traces, prints, round-trips through JSON (found by name in the
registry; a document naming an op whose module is not imported is a ``GraphFormatError``
that names the module), differentiates to any order, batches, and compiles, fused with its
neighbours on the CPU and CUDA targets when it has a scalar function.

* ``define_elementwise(name, impl, *, scalar, derivative)``: an elementwise function.
* ``define_op(name, impl, abstract_eval, *, vjp, jvp, batch)``: any other primitive.

Imports core, tracing, ops and functrace.numpy (for the user function's promotion and
broadcasting); nothing below imports it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import numpy as fnp
from .core import AVal, Op, registry
from .errors import FunctraceTypeError, FunctraceValueError
from .ops.elementwise import elementwise_op
from .tracing import Tracer, bind

__all__ = ["define_elementwise", "define_op"]


def _caller_module() -> str:
    f = sys._getframe(2)
    return f.f_globals.get("__name__", "") if f is not None else ""


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise FunctraceTypeError(f"an op name is a non-empty string, got {name!r}")
    if name in registry:
        op = registry[name]
        raise FunctraceValueError(
            f"op {name!r} is already defined (by {op.module or 'functrace'}); each name "
            "defines one primitive: pick another name")


def _arity(scalar: Callable) -> int:
    try:
        params = inspect.signature(scalar).parameters.values()
    except (TypeError, ValueError):
        raise FunctraceTypeError(f"scalar={scalar!r} must be a Python function of scalars "
                                 "(e.g. lambda x: math.tanh(x))") from None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    n = sum(1 for p in params if p.kind in kinds)
    if n < 1:
        raise FunctraceTypeError("scalar must take one positional argument per operand")
    return n


def define_elementwise(name: str, impl: Callable, *, scalar: Callable,
                       derivative: Callable | None) -> Callable:
    """Define an elementwise primitive and return its user function.

    Args:
        name: the primitive's unique name (``"softplus"``): printed in graphs and JSON.
        impl: the numpy function of the operands (the living definition every backend is
            checked against), e.g. ``lambda x: np.logaddexp(0.0, x)``.
        scalar: the same function of Python scalars, for the kernels numba generates on the
            CPU and CUDA targets (``lambda x: math.log1p(math.exp(x))``). It may use ``math``,
            numbers and builtins (and ``numpy`` on the CPU). Its number of parameters is the
            op's number of operands. A scalar function that cannot be inlined or compiled
            leaves the op unfused (an op step running ``impl``), never wrong.
        derivative: ``(x, y) -> dy/dx`` (one operand) or ``(x1, ..., xn, y) -> (dy/dx1, ...,
            dy/dxn)`` written with ``functrace.numpy``, so it differentiates again to any
            order; ``None`` for a zero partial. ``derivative=None``: not differentiable.

    Returns:
        ``f(*operands)``: numpy's promotion (integer operands become float when ``impl``
        gives float) and broadcasting, then one equation of the new op.

    Example:
        >>> import math, numpy as np, functrace as ft, functrace.numpy as fnp
        >>> from functrace.extend import define_elementwise
        >>> softplus = define_elementwise(
        ...     "doc_softplus", lambda x: np.logaddexp(0.0, x),
        ...     scalar=lambda x: math.log1p(math.exp(-abs(x))) + max(x, 0.0),
        ...     derivative=lambda x, y: 1 / (1 + fnp.exp(-x)))
        >>> float(softplus(0.0))
        0.6931471805599453
        >>> float(ft.grad(softplus)(0.0))
        0.5
    """
    _check_name(name)
    nin = _arity(scalar)
    module = _caller_module()
    out_types: dict[np.dtype, np.dtype] = {}

    def out_dtype(dt: np.dtype) -> np.dtype:
        got = out_types.get(dt)
        if got is None:
            with np.errstate(all="ignore"):
                got = out_types[dt] = np.asarray(impl(*[np.ones((), dt)] * nin)).dtype
        return got

    op = elementwise_op(name, impl, nin, scalar=scalar, derivative=derivative,
                        out_dtype=out_dtype, module=module,
                        differentiable=derivative is not None)

    def f(*args):
        if len(args) != nin:
            raise FunctraceTypeError(f"{name}() takes {nin} operand(s), got {len(args)}")
        dt = np.result_type(*[a.dtype if isinstance(a, Tracer | np.ndarray | np.generic)
                              else a for a in args])
        if dt.kind in "biu":
            res = out_dtype(dt)
            if res.kind in "fc":        # numpy computes float functions of integers in float
                dt = res
        xs = [fnp.asarray(a, dtype=dt) for a in args]
        shapes = {tuple(np.shape(x)) for x in xs}
        if len(shapes - {()}) > 1:
            xs = fnp.broadcast_arrays(*xs)
        return bind(op, *xs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The ``{name}`` primitive (functrace.extend.define_elementwise)."
    f.op = op
    return f


def _aval(out, name: str) -> AVal:
    if isinstance(out, AVal):
        return out
    try:
        shape, dtype = out
        return AVal(tuple(shape), dtype)
    except (TypeError, ValueError):
        raise FunctraceTypeError(f"the abstract_eval of {name} must return (shape, dtype), got "
                                 f"{out!r:.80}") from None


def define_op(name: str, impl: Callable, abstract_eval: Callable, *,
              vjp: Callable | None = None, jvp: Callable | None = None,
              batch: Callable | None = None, multiple_results: bool = False,
              expand: Callable | None = None) -> Callable:
    """Define a primitive and return its user function ``f(*operands, **params)``.

    Args:
        name: the primitive's unique name.
        impl: ``(*arrays, **params) -> array`` (a tuple with ``multiple_results``): numpy.
        abstract_eval: ``(*avals, **params) -> (shape, dtype)`` (a list of them with
            ``multiple_results``); an aval has ``.shape`` and ``.dtype``. Raise TypeError or
            ValueError for operands the op does not accept.
        vjp: ``(cts, ins, outs, **params) -> tuple`` with one cotangent per operand (None: zero),
            written with ``functrace.numpy`` so it differentiates again; ``cts`` has one entry
            per output (None: zero).
        jvp: ``(primals, tangents, outs, **params) -> tuple`` of output tangents (a tangent None
            is zero).
        batch: ``(args, dims, **params) -> (out, out_dim)``: ``dims[i]`` is the batch axis of
            ``args[i]`` or None; return the batched result and where its batch axis is
            (``(outs, out_dims)`` with ``multiple_results``). Bind the op itself inside.
        multiple_results: the op returns a tuple.
        expand: ``(*operands, **params) -> result`` written with ``functrace.numpy``,
            computing what ``impl`` computes: compiled backends run it in place of the op
            (its parts fuse with the kernels around it), the interpreter runs ``impl``.
            Rules still come from ``vjp``/``jvp``.

    Params (keyword arguments of ``f``) must be hashable: ints, floats, strings, tuples.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> from functrace.extend import define_op
        >>> def _vjp(cts, ins, outs, *, axis):
        ...     return (fnp.flip(fnp.cumsum(fnp.flip(cts[0], axis), axis=axis), axis),)
        >>> cumsum = define_op(
        ...     "doc_cumsum", lambda x, *, axis: np.cumsum(x, axis=axis),
        ...     lambda x, *, axis: (x.shape, x.dtype), vjp=_vjp)
        >>> cumsum(np.arange(3.0), axis=0)
        array([0., 1., 3.])
        >>> ft.grad(lambda x: cumsum(x, axis=0).sum())(np.ones(3))
        array([3., 2., 1.])
    """
    _check_name(name)
    module = _caller_module()

    def abstract(*avals, **params):
        out = abstract_eval(*avals, **params)
        if multiple_results:
            return tuple(_aval(o, name) for o in out)
        return _aval(out, name)

    rule = None
    if batch is not None:
        if multiple_results:
            rule = batch
        else:
            def rule(args, dims, **params):
                out, d = batch(args, dims, **params)
                return (out,), (d,)

    op = Op(name, abstract, impl, multiple_results=multiple_results, vjp=vjp, jvp=jvp,
            batch=rule, module=module, expand=expand,
            differentiable=vjp is not None or jvp is not None)

    def f(*args: Any, **params: Any):
        xs: Sequence = [a if isinstance(a, Tracer | np.ndarray) else fnp.asarray(a)
                        for a in args]
        return bind(op, *xs, **params)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The ``{name}`` primitive (functrace.extend.define_op)."
    f.op = op
    return f
