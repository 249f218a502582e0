"""functrace.scipy: scipy's functions, traceable and differentiable (``functrace.scipy.signal``).

Submodules are imported on first use (scipy itself is imported only when an eager call needs
it).
"""


def __getattr__(name):
    if name in ("signal",):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
