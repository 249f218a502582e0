"""Helpers shared by the op families: declaration shortcuts and shape/dtype rules.

Owns the building blocks of op declarations (type rules, literal helpers). Imports ``core``,
``errors`` and ``tracing`` only; never ``functrace.numpy`` or a backend.

Elementwise ops take operands of one shape, except that 0-d operands broadcast (a scalar
times an array needs no ``broadcast_in_dim``: it keeps graphs small and kernels simple). All
operands share one dtype: promotion is ``functrace.numpy``'s job, done before ``bind``.
The gradient machinery sums a cotangent back to 0-d for scalar operands, so rules never
un-broadcast by hand.
"""

from __future__ import annotations

import sys

import numpy as np

from ..core import AVal, Lit, on_device
from ..errors import ShapeError
from ..tracing import Tracer

__all__ = ["same_dtype_shape", "lit", "aval_of", "shape_of", "dtype_of",
           "as_array", "namespace_of", "on_device"]


def aval_of(x) -> AVal:
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, Lit):
        return x.aval
    if isinstance(x, AVal):   # a value the backward pass does not read (shape and dtype only)
        return x
    return AVal.of(x)


def shape_of(x) -> tuple[int, ...]:
    if type(x) is np.ndarray or isinstance(x, Tracer | np.generic | AVal):
        return x.shape
    return aval_of(x).shape


def dtype_of(x) -> np.dtype:
    if type(x) is np.ndarray or isinstance(x, Tracer | np.generic | AVal):
        return x.dtype
    return aval_of(x).dtype


def as_array(x, dtype=None):
    """``np.asarray`` for host values; a device array (cupy: anything with
    ``__cuda_array_interface__``) stays where it is, cast when ``dtype`` differs. Op impls use
    this, not ``np.asarray``, so that the CUDA backend can run them on cupy arrays (cupy
    refuses implicit conversion to numpy)."""
    if on_device(x):
        return x if dtype is None or x.dtype == np.dtype(dtype) else x.astype(dtype)
    return np.asarray(x, dtype=dtype)


def namespace_of(*xs):
    """cupy if one of ``xs`` is a cupy array, else numpy: for the few impls that create
    arrays (``xp.empty``) rather than compute on their operands. (cupy is looked up, never
    imported: a program holding a cupy array has imported it.)"""
    cp = sys.modules.get("cupy")
    if cp is not None:
        for x in xs:
            if isinstance(x, cp.ndarray):
                return cp
    return np


def lit(value, like) -> np.ndarray:
    """A 0-d constant with ``like``'s dtype (for constants inside rules)."""
    return np.asarray(value, dtype=dtype_of(like))


def same_dtype_shape(*avals: AVal) -> tuple[tuple[int, ...], np.dtype]:
    """The common shape of elementwise operands (0-d operands broadcast) and their dtype."""
    dtype = avals[0].dtype
    shape: tuple[int, ...] = ()
    for a in avals:
        if a.dtype != dtype:
            raise TypeError(f"operand dtypes differ ({', '.join(str(b.dtype) for b in avals)}); "
                            "functrace ops need equal dtypes (functrace.numpy promotes)")
        if a.shape:
            if shape and a.shape != shape:
                raise ShapeError(f"operand shapes {[b.shape for b in avals]} differ; "
                                 "broadcast them explicitly (functrace.numpy does)")
            shape = a.shape
    return shape, dtype
