"""Helpers shared by the functrace.random tests (tests/api/test_random*.py)."""

from __future__ import annotations

import numpy as np


def words(x):
    """``(dtype name, shape, [each element's bits as an int])``: the form the jax goldens in
    ``random_golden.py`` are stored in (complex as two floats, floats as unsigned words,
    booleans as bytes)."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    if x.dtype.kind == "c":
        flat = flat.view(np.dtype(f"float{x.dtype.itemsize * 4}"))
    if flat.dtype.kind == "f":
        flat = flat.view(np.dtype(f"uint{flat.dtype.itemsize * 8}"))
    if flat.dtype.kind == "b":
        flat = flat.astype(np.uint8)
    return x.dtype.name, x.shape, [int(v) for v in flat]
