"""Generated kernel modules on disk: write once (content-hashed, atomic), import as a module.

numba's ``cache=True`` cannot cache functions defined by ``exec`` ("no locator available"); it
works for functions of a real module file. Both compiled backends therefore write each kernel
source to ``<cache dir>/<prefix><key>.py`` (atomic ``os.replace``, so concurrent processes
never see half a file) and import it, registered in ``sys.modules`` before ``exec_module``.
Imports nothing from functrace.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

__all__ = ["cache_dir", "module_path", "load_source_module"]


def cache_dir() -> str:
    """Where kernel modules live: ``$FUNCTRACE_CACHE_DIR`` or ``~/.cache/functrace/kernels``."""
    d = os.environ.get("FUNCTRACE_CACHE_DIR")
    if not d:
        d = os.path.join(os.path.expanduser("~"), ".cache", "functrace", "kernels")
    return d


def module_path(prefix: str, key: str) -> str:
    return os.path.join(cache_dir(), f"{prefix}{key}.py")


def load_source_module(package: str, prefix: str, key: str, source: str):
    """The module ``<package>.<prefix><key>`` for ``source`` (written first if missing).
    Callers hold their own lock and memo: this always imports."""
    path = module_path(prefix, key)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    name = f"{package}.{prefix}{key}"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod
