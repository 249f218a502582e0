"""functrace.scipy: scipy's API, traceable and differentiable (like jax.scipy).

Submodules (``signal``, ``integrate``, ``optimize``, ...) are imported on first use, so
importing functrace stays cheap; scipy itself is imported only when an eager call needs it.
Layer: may import api, control and numpy, never be imported by them.
"""

_SUBMODULES = ("signal", "integrate", "optimize", "special", "stats", "linalg")


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
