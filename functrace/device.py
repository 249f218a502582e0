"""Device placement: ``ft.device_put`` / ``ft.device_get`` and the array-module lookup.

Owns the user-facing side of GPU arrays: moving pytrees of arrays to and from the CUDA device,
and ``array_module(x)`` (``xp`` = cupy for a cupy array, numpy otherwise). API level: imports
tree_util and ``backends.cuda`` (for the device-array adapter and its availability
check). Importing this file imports neither cupy nor numba; a cupy array is recognised without
importing cupy (a program holding one has imported it already).

On a GPU, "cuda" arrays are cupy arrays, and ``functrace.numpy`` functions called on them
outside a transform compute with cupy (numpy dispatches to cupy through
``__array_function__``/``__array_ufunc__``); ``ft.jit(f, backend="cuda")`` takes and returns
them. Under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, for testing without a GPU)
the device is simulated with numpy arrays, so ``device_put`` returns numpy arrays there.
"""

from __future__ import annotations

from typing import Any

from . import tree_util
from .core import on_device
from .ops import namespace_of

__all__ = ["device_put", "device_get", "array_module", "is_device_array"]

_CUDA_NAMES = ("cuda", "gpu")


def is_device_array(x: Any) -> bool:
    """Whether ``x`` is an array in GPU memory (anything exposing
    ``__cuda_array_interface__``: cupy, numba device arrays, torch CUDA tensors)."""
    return on_device(x)


def array_module(x: Any):
    """The array module of ``x``: cupy for a cupy array, numpy for anything else.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.device.array_module(np.zeros(2)).__name__
        'numpy'
    """
    return namespace_of(x)


def _device_index(device: str) -> int | None:
    name, _, idx = str(device).lower().partition(":")
    if name in _CUDA_NAMES:
        return int(idx) if idx else None
    if name in ("cpu", "host"):
        return -1
    raise ValueError(f"unknown device {device!r}: use 'cuda' (or 'cuda:N') or 'cpu'")


def device_put(x: Any, device: str = "cuda") -> Any:
    """Copy a pytree of arrays to ``device`` ("cuda", "cuda:N" or "cpu").

    On a GPU the leaves become cupy arrays (already-resident leaves are returned as they are);
    under numba's CUDA simulator they stay numpy arrays. Raises ``BackendError`` naming the
    extra to install (and whether a driver was found) when no GPU can be used.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.device_put({"w": np.ones(2)}, "cpu")["w"]
        array([1., 1.])
    """
    idx = _device_index(device)
    if idx == -1:
        return device_get(x)
    from .backends.cuda import executor as numba_cuda
    ar = numba_cuda.default_arrays()

    def put(leaf):
        if ar.is_device(leaf):
            return leaf
        return ar.to_device(leaf)

    if idx is not None and not ar.simulated:
        with ar.cp.cuda.Device(idx):
            return tree_util.tree_map(put, x)
    return tree_util.tree_map(put, x)


def device_get(x: Any) -> Any:
    """Copy a pytree of arrays to host memory (numpy); host leaves are returned as they are.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.device_get([np.zeros(1)])
        [array([0.])]
    """
    def get(leaf):
        if hasattr(leaf, "get") and is_device_array(leaf):
            return leaf.get()                     # cupy (synchronises with its stream)
        if hasattr(leaf, "copy_to_host"):
            return leaf.copy_to_host()            # numba device arrays
        return leaf

    return tree_util.tree_map(get, x)
