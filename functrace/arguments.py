"""Argument and output checks at the API boundary, shared by api, forward and jit.

Owns the user-facing errors for what a transform is given (a callable, array leaves,
``argnums``, differentiable dtypes) and for what the user's function returns (array leaves,
one scalar for ``grad``), and ``flatten_fun``, which wraps a pytree function as a flat one.
API layer: imports core, errors, tracing and tree_util only; nothing here runs or transforms a
graph.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import tree_util
from .core import AVal, on_device
from .errors import FunctraceTypeError, FunctraceValueError, where
from .tracing import Tracer

__all__ = ["check_callable", "check_leaf_arg", "check_out_leaf", "flatten_fun", "describe_out",
           "check_argnums", "argnums_tuple", "wrt_leaf_indices", "check_wrt_dtypes",
           "check_scalar_out", "aval_of"]


def check_callable(fun, fname: str) -> None:
    """Refuse a non-callable ``fun`` when the transform is built (as JAX does)."""
    if not callable(fun):
        raise FunctraceTypeError(
            f"ft.{fname} takes a function, but {type(fun).__name__} {fun!r:.40} is not "
            f"callable. Fix: pass the function itself, ft.{fname}(f), and call the result "
            f"with the arguments ({where()})")


def check_leaf_arg(x, i, what: str = "argument leaf"):
    if isinstance(x, Tracer | AVal | np.ndarray | np.generic | bool | int | float | complex) or (
            on_device(x)):
        if not isinstance(x, Tracer | AVal | bool | int | float | complex) and (
                np.dtype(x.dtype).kind not in "biufc"):
            raise FunctraceTypeError(
                f"{what} {i}: arrays of dtype {x.dtype} cannot be traced (use bool, integer, "
                f"float or complex data) ({where()})")
        return x
    if hasattr(x, "__array__"):
        a = np.asarray(x)
        if a.dtype.kind in "biufc":
            return a
    raise FunctraceTypeError(
        f"{what} {i} is a {type(x).__name__} ({x!r:.50}), not an array; pass arrays or "
        "numbers (non-array arguments can be closed over, or marked static with jit's "
        f"static_argnums) ({where()})")


def check_out_leaf(x, i):
    if isinstance(x, Tracer | np.ndarray | np.generic | bool | int | float | complex):
        if isinstance(x, np.ndarray | np.generic) and x.dtype.kind not in "biufc":
            raise FunctraceTypeError(f"output leaf {i} has dtype {x.dtype}, which is not an "
                                     f"array type ({where()})")
        return x
    raise FunctraceTypeError(
        f"the traced function returned a {type(x).__name__} ({x!r:.50}) as output leaf {i}; "
        f"functions must return arrays (or pytrees of arrays) ({where()})")


def flatten_fun(fun: Callable, in_tree) -> tuple[Callable, list]:
    """Wrap ``fun(*args, **kwargs)`` as a flat function; the output treedef lands in the box."""
    box: list = []

    def flat(*leaves):
        args, kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
        out = fun(*args, **kwargs)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return [check_out_leaf(o, i) for i, o in enumerate(out_leaves)]
    return flat, box


def describe_out(x) -> str:
    if isinstance(x, Tracer):
        return f"one array of shape {x.shape}"
    if isinstance(x, tuple | list):
        return f"a {type(x).__name__} of {len(x)} values"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(x)!r:.60}"
    return f"a {type(x).__name__}"


def _is_int(a) -> bool:
    return isinstance(a, int | np.integer) and not isinstance(a, bool | np.bool_)


def check_argnums(argnums, fname: str) -> None:
    """Refuse an ``argnums`` that is not an int or a sequence of distinct ints (at the time
    the transform is built, so the error names the line that wrote it)."""
    if _is_int(argnums):
        return
    if isinstance(argnums, tuple | list) and all(_is_int(a) for a in argnums):
        if len(set(int(a) for a in argnums)) != len(argnums):
            raise FunctraceValueError(
                f"ft.{fname}: argnums={argnums!r} has a duplicate entry; name each argument "
                f"once ({where()})")
        return
    raise FunctraceTypeError(
        f"ft.{fname}: argnums must be an int or a tuple of ints (positions of the arguments "
        f"to differentiate), got {type(argnums).__name__} {argnums!r:.40}. Fix: e.g. "
        f"argnums=0 or argnums=(0, 1) ({where()})")


def argnums_tuple(argnums, nargs, fname="grad"):
    single = _is_int(argnums)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise FunctraceValueError(
                f"ft.{fname}: argnums={argnums!r} is out of range for {nargs} positional "
                f"argument(s) ({where()})")
    return tuple(int(a) % nargs for a in nums), single


def wrt_leaf_indices(args, kwargs, nums):
    """Flat leaf indices (in the (args, kwargs) flattening) of the positional args ``nums``."""
    counts = [len(tree_util.tree_leaves(a)) for a in args]
    starts = np.cumsum([0] + counts)
    idx = []
    for n in nums:
        idx.extend(range(starts[n], starts[n] + counts[n]))
    return idx


def check_wrt_dtypes(leaves, wrt, fname, holomorphic, complex_inputs: bool = True):
    """Refuse what cannot be differentiated: integer or bool inputs always; with
    ``holomorphic=True``, real inputs (the derivative is f'(z), of complex z); with
    ``complex_inputs=False`` (the Jacobians, as in JAX), complex inputs unless holomorphic.
    ``grad`` takes complex inputs of a real-valued function without holomorphic (JAX's
    convention: see docs/numerics.md)."""
    for i in wrt:
        x = leaves[i]
        dt = np.dtype(x.dtype) if isinstance(x, Tracer | AVal) or on_device(x) else (
            np.asarray(x).dtype)
        if dt.kind not in "fc":
            raise FunctraceTypeError(
                f"{fname} requires float (or complex) inputs to differentiate, but input leaf "
                f"{i} has dtype {dt}. Fix: pass it as a float array, e.g. x.astype(float), or "
                f"leave it out of argnums ({where()})")
        if holomorphic and dt.kind != "c":
            raise FunctraceTypeError(
                f"{fname}(holomorphic=True) differentiates with respect to complex inputs, but "
                f"input leaf {i} has dtype {dt}. Fix: pass it as x.astype(complex), or drop "
                f"holomorphic=True ({where()})")
        if dt.kind == "c" and not holomorphic and not complex_inputs:
            raise FunctraceTypeError(
                f"{fname} of a complex input (leaf {i}, dtype {dt}) needs holomorphic=True: "
                f"for a holomorphic function the result is then f'(z). For a function that is "
                f"not holomorphic use ft.vjp or ft.jvp ({where()})")


def check_scalar_out(aval, fname, holomorphic):
    """The checks of grad's output: one element (a 0-d array, or shape (1,), (1, 1)...: the
    gradient is that element's, as in autograd), float, complex only with holomorphic."""
    if aval.size != 1:
        raise FunctraceTypeError(
            f"{fname} requires a scalar output (one element), got shape {aval.shape} "
            f"(size {aval.size}). Fix: reduce it (e.g. fnp.sum(...)), or use ft.vjp / "
            f"ft.jacrev for non-scalar outputs ({where()})")
    if aval.dtype.kind == "c" and not holomorphic:
        raise FunctraceTypeError(
            f"{fname} of a complex output needs holomorphic=True (or take the real part / abs "
            f"of the output first) ({where()})")
    if holomorphic and aval.dtype.kind != "c":
        raise FunctraceTypeError(
            f"{fname}(holomorphic=True) needs a complex output, got dtype {aval.dtype}. Fix: "
            f"drop holomorphic=True for a real-valued function ({where()})")
    if aval.dtype.kind not in "fc":
        raise FunctraceTypeError(
            f"{fname} requires a float output, got dtype {aval.dtype}. Fix: compute the "
            f"output in floating point ({where()})")


def aval_of(x):
    return x.aval if isinstance(x, Tracer) else AVal.of(x)
