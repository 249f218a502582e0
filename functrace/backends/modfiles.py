"""Generated kernel modules on disk: a private directory, verified contents, atomic writes.

numba's ``cache=True`` cannot cache functions defined by ``exec`` of a string ("no locator
available"); it works for functions whose code names a real file. Both compiled backends
therefore write each kernel source to ``<cache dir>/<prefix><key>.py`` and load it from here.
Imports nothing from functrace (numba only when a module is loaded, which imports it anyway).

Nothing in the cache is trusted, because whatever is there runs:

* **Location.** ``$FUNCTRACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/functrace/kernels``, else
  ``~/.cache/functrace/kernels``. A directory functrace creates gets mode 0700. A directory
  that belongs to another user, or that is group- or world-writable (itself or its
  ``__pycache__``), is refused: a ``KernelCacheWarning`` says so once, and the process uses a
  private temporary directory instead (removed at exit).
* **Contents.** A module is never imported from its file. The caller holds the source (its
  key is a hash of it); the file's bytes are compared with it, a file that differs (replaced,
  truncated, half-written by a crash) is rewritten, and the module is executed from the
  source in hand, compiled with the file's name so numba can cache it. Python's bytecode
  cache is neither read nor written for these modules.
* **Writes** go to a temporary file in the same directory, flushed and fsync'ed, renamed over
  the target (``os.replace``), then the directory is fsync'ed: concurrent processes and
  crashes never leave a partial module under the real name.
* **numba's own cache** (``__pycache__/*.nbi`` index and ``*.nbc`` machine code, which numba
  unpickles at load) is pinned next to the module, inside the checked directory, by a cache
  locator placed first in numba's list: ``NUMBA_CACHE_DIR`` does not move it elsewhere. numba
  keys that cache on the module file's contents (stamp) and the function's bytecode, so a
  rewritten module invalidates what was compiled from a corrupt one.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import logging
import os
import shutil
import stat
import sys
import tempfile
import threading
import warnings

__all__ = ["KernelCacheWarning", "cache_dir", "configured_cache_dir", "module_path",
           "load_source_module"]

log = logging.getLogger("functrace")


class KernelCacheWarning(UserWarning):
    """The kernel cache directory is not safe to import code from; a private one is used."""


_lock = threading.RLock()
_dirs: dict[str, str] = {}          # configured directory -> the directory used for it
_checked: set[str] = set()          # every directory handed out (numba's locator trusts these)
_warned: set[str] = set()
_private: list[str] = []            # this process's temporary directory, once made


def configured_cache_dir() -> str:
    """The kernel cache directory the environment asks for (not yet checked or created):
    ``$FUNCTRACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/functrace/kernels``, else
    ``~/.cache/functrace/kernels``."""
    d = os.environ.get("FUNCTRACE_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):          # the XDG spec: a relative value is ignored
            base = os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "functrace", "kernels")
    return os.path.abspath(d)


def cache_dir() -> str:
    """The directory kernel modules are written to and loaded from: the configured one
    (created with mode 0700 if missing) when it is safe, else this process's private
    temporary directory (with one ``KernelCacheWarning``)."""
    want = configured_cache_dir()
    got = _dirs.get(want)
    if got is not None and os.path.isdir(got):
        return got
    with _lock:
        got = _dirs[want] = _prepare(want)
        _checked.add(got)
    return got


def _unsafe(path: str) -> str | None:
    """Why ``path`` must not hold code this process imports, or None if it may."""
    if os.name != "posix":
        return None          # POSIX modes and owners only; Windows ACLs are not checked
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is group- or world-writable (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _prepare(want: str) -> str:
    try:
        os.makedirs(want, mode=0o700, exist_ok=True)
        problem = _unsafe(want)
        if problem is None:
            pycache = os.path.join(want, "__pycache__")
            with contextlib.suppress(FileExistsError):
                os.mkdir(pycache, 0o700)
            problem = _unsafe(pycache)
            if problem is not None:
                problem = f"its __pycache__: {problem}"
    except OSError as exc:
        problem = f"it cannot be used ({exc.strerror or exc})"
    if problem is None:
        return want
    private = _private_dir()
    if want not in _warned:
        _warned.add(want)
        msg = (f"functrace: not using the kernel cache directory {want}: {problem}. Compiled "
               "kernels are imported from there, so it must belong to you and be writable "
               "by you alone (chmod 700, or point FUNCTRACE_CACHE_DIR elsewhere). This "
               f"process uses the private directory {private} instead.")
        log.warning("%s", msg)
        warnings.warn(msg, KernelCacheWarning, stacklevel=3)
    return private


def _private_dir() -> str:
    if _private and os.path.isdir(_private[0]):
        return _private[0]
    d = tempfile.mkdtemp(prefix="functrace-kernels-")        # mode 0700, ours
    os.mkdir(os.path.join(d, "__pycache__"), 0o700)
    _private[:] = [d]
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    _checked.add(d)
    return d


def module_path(prefix: str, key: str) -> str:
    return os.path.join(cache_dir(), f"{prefix}{key}.py")


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return               # e.g. Windows: directories cannot be opened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that no reader ever sees a partial file: a temporary file
    in the same directory, fsync'ed, renamed over ``path``, then the directory fsync'ed (so
    the rename itself survives a crash)."""
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(d)


def _matches(path: str, data: bytes) -> bool:
    """Whether the regular file at ``path`` holds exactly ``data``."""
    try:
        with open(path, "rb") as f:
            return f.read(len(data) + 1) == data
    except OSError:
        return False


def load_source_module(package: str, prefix: str, key: str, source: str):
    """The module ``<package>.<prefix><key>`` for ``source``, whose file in the cache
    directory is (re)written first unless it already holds exactly ``source``.

    The module is executed from ``source`` itself (compiled under the file's name, for
    numba's cache and for tracebacks), never imported from the file. Callers hold their own
    lock and memo."""
    name = f"{package}.{prefix}{key}"
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "__functrace_source__", None) == source:
        return mod
    path = module_path(prefix, key)
    data = source.encode("utf-8")
    if not _matches(path, data):
        if os.path.lexists(path):
            log.warning("functrace: the cached kernel module %s differs from its source "
                        "(replaced or corrupt); rewriting it", path)
        write_atomic(path, data)
    _pin_numba_cache_locator()
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = path
    mod.__functrace_source__ = source
    code = compile(source, path, "exec", dont_inherit=True)
    sys.modules[name] = mod
    try:
        exec(code, mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


# --------------------------------------------------------------------------------------------
# numba's cache for our modules stays in the checked directory
# --------------------------------------------------------------------------------------------

_pinned: set[str] = set()        # numba caching modules whose locator list we extended


def _pin_numba_cache_locator() -> None:
    """Put a locator first in numba's list that keeps the compiled code of any module in a
    checked kernel directory in that module's own ``__pycache__`` (the directory we checked),
    even when ``NUMBA_CACHE_DIR`` points elsewhere. Other files are left to numba's own
    locators. numba-cuda has its own copy of the caching module, pinned once it is loaded."""
    names = ["numba.core.caching"]
    if "numba.cuda" in sys.modules:
        names.append("numba.cuda.core.caching")
    for name in names:
        if name in _pinned:
            continue
        with _lock:
            if name in _pinned:
                continue
            _pinned.add(name)
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            impl = getattr(mod, "CacheImpl", None) or getattr(mod, "_CacheImpl", None)
            base = (getattr(mod, "InTreeCacheLocator", None)
                    or getattr(mod, "_InTreeCacheLocator", None))
            classes = getattr(impl, "_locator_classes", None)
            if base is None or not isinstance(classes, list):
                log.warning("functrace: cannot pin numba's cache locator in %s (an unknown "
                            "numba version); numba may cache kernels outside %s",
                            name, cache_dir())
                continue
            classes.insert(0, _kernel_locator(base))
    config = sys.modules.get("numba.core.config")
    if getattr(config, "CACHE_LOCATOR_CLASSES", "") and "env" not in _pinned:
        _pinned.add("env")
        log.warning("functrace: NUMBA_CACHE_LOCATOR_CLASSES is set, so numba chooses where "
                    "compiled kernels are cached, not functrace; that directory is not checked")


def _kernel_locator(base):
    class FunctraceKernelLocator(base):
        """numba's cache of a functrace kernel module: its own ``__pycache__`` inside the
        kernel cache directory functrace checked (see functrace.backends.modfiles)."""

        @classmethod
        def from_function(cls, py_func, py_file):
            if os.path.dirname(os.path.abspath(py_file)) not in _checked:
                return None
            return cls(py_func, py_file)

    return FunctraceKernelLocator
