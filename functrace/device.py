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

__all__ = ["device_put", "device_get", "array_module", "is_device_array", "block_until_ready"]

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


def device_put(x: Any, device: str | None = None) -> Any:
    """Copy a pytree of arrays to ``device`` ("cuda", "cuda:N" or "cpu"; None: the default
    device, as ``jax.device_put(x)``: the GPU when one can be used, else the host).

    On a GPU the leaves become cupy arrays (already-resident leaves are returned as they are);
    under numba's CUDA simulator they stay numpy arrays. On a machine without a usable GPU,
    ``device_put(x)`` returns ``x`` unchanged (code written for JAX runs as is), while an
    explicit ``"cuda"`` raises ``BackendError`` naming the extra to install (and whether a
    driver was found).

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.device_put({"w": np.ones(2)}, "cpu")["w"]
        array([1., 1.])
    """
    if device is None:
        from .backends.cuda.device import simulator_enabled, unavailable_reason
        if not simulator_enabled() and unavailable_reason() is not None:
            return x                    # the host is the default device: nothing to move
        device = "cuda"
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


def block_until_ready(x: Any) -> Any:
    """Wait until every array in the pytree ``x`` is computed, and return ``x`` (JAX's
    ``jax.block_until_ready``, for timing). numpy results are ready when returned; for GPU
    arrays this waits for their device's work to finish.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.block_until_ready({"w": np.ones(2)})["w"]
        array([1., 1.])
    """
    for leaf in tree_util.tree_leaves(x):
        if is_device_array(leaf):
            dev = getattr(leaf, "device", None)
            sync = getattr(dev, "synchronize", None)
            if sync is not None:
                sync()                              # cupy: the array's device
            else:
                import sys
                cuda = getattr(sys.modules.get("numba"), "cuda", None)
                if cuda is not None and hasattr(cuda, "synchronize"):
                    cuda.synchronize()              # numba device arrays
    return x
