"""Every in-memory cache of functrace: one bounded LRU class, one registry, one ``clear_all``.

Owns ``LRU`` (a least-recently-used mapping with a bound, optionally holding its keys or its
values weakly), the registry of every cache the package makes (module-level ones, and
per-object ones such as each ``ft.jit`` function's signature cache), the size setting and
``clear_all``. Imports nothing from functrace, so every layer may use it.

Why one class: a cache that grows without bound, or that keeps a graph alive after the user
dropped every object that could reach it, is a memory leak in a long-running process (a
training loop over varying shapes, a server tracing user functions). So every cache here is
bounded, and a cache keyed by a ``Graph`` holds the graph weakly and never lets its value
refer to the graph (a value that refers to its own weak key keeps the key alive forever: the
bug the reference interpreter's plan cache had).

Size: a cache holds at most ``int(scale * size())`` entries; ``size()`` is
``$FUNCTRACE_CACHE_SIZE`` (read at import, default 256), changed at run time with
``set_size(n)`` (which trims every live cache at once). Each cache's ``scale`` is chosen for
what its entries cost (docs/executor.md, "Caches and memory", lists them all). ``size 0``
turns caching off (every entry is dropped as soon as it is made: correct, and slow).

Example:
    >>> from functrace import caches
    >>> c = caches.LRU("example", maxsize=2)   # a fixed bound (default: scale * size())
    >>> c["a"], c["b"] = 1, 2
    >>> c.get("a")          # "a" is now the most recently used
    1
    >>> c["c"] = 3          # evicts "b", the least recently used
    >>> sorted(c.keys())
    ['a', 'c']
"""

from __future__ import annotations

import functools
import gc
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["LRU", "size", "set_size", "register", "clear_all", "stats", "DEFAULT_SIZE"]

DEFAULT_SIZE = 256


def _size_from_env() -> int:
    raw = os.environ.get("FUNCTRACE_CACHE_SIZE", "")
    if not raw.strip():
        return DEFAULT_SIZE
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"FUNCTRACE_CACHE_SIZE must be a non-negative integer (entries per "
                         f"cache, default {DEFAULT_SIZE}); got {raw!r}")
    return n


_size = _size_from_env()

# every LRU made (weakly: a per-object cache goes away with its object), and every other
# clearable cache (functools.lru_cache'd functions: bounded already, cleared by clear_all)
_lrus: weakref.WeakSet = weakref.WeakSet()
_others: dict[str, Callable[[], None]] = {}
_releases: dict[str, Callable[[], None]] = {}     # run last, after gc: give memory back
_registry_lock = threading.Lock()

_MISSING = object()
_ref = weakref.ref


class LRU:
    """A bounded mapping that forgets its least recently used entries.

    Args:
        name: what ``stats()`` calls it (per-object caches share one name).
        scale: the bound is ``int(scale * size())`` entries.
        maxsize: a fixed bound instead, not changed by ``set_size`` (for tests and
            examples; the package's caches use ``scale``).
        weak_keys: hold keys weakly: an entry goes when its key is collected. Keys must be
            weak-referenceable (``Graph`` is); lookups use the key's ``__eq__``/``__hash__``
            (structurally equal graphs share an entry). The value must not refer to the key,
            or the key is never collected.
        weak_values: hold values weakly: an entry goes when its value is collected. The
            key is held strongly until then.
        on_drop: called as ``on_drop(key, value)`` for each entry evicted or cleared (not for
            entries whose weak key or value died): e.g. to unload a kernel module.

    Reads (``get``, ``[]``, ``in``) take no lock; writes do. ``keys``/``values``/``items``
    return lists (snapshots). Thread-safe under the GIL.
    """

    __slots__ = ("name", "scale", "fixed", "weak_keys", "weak_values", "on_drop", "_data", "_lock",
                 "_on_key_death", "_on_value_death", "__weakref__")

    def __init__(self, name: str, *, scale: float = 1.0, maxsize: int | None = None,
                 weak_keys: bool = False, weak_values: bool = False,
                 on_drop: Callable[[Any, Any], None] | None = None):
        if weak_keys and weak_values:
            raise ValueError("an LRU holds its keys or its values weakly, not both")
        self.name = name
        self.scale = float(scale)
        self.fixed = None if maxsize is None else int(maxsize)
        self.weak_keys = weak_keys
        self.weak_values = weak_values
        self.on_drop = on_drop
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        me = weakref.ref(self)

        # Death callbacks hold the cache weakly and mutate its dict directly (one atomic
        # OrderedDict operation: safe even if it runs inside another operation of ours, like
        # the callbacks of the stdlib's weak dictionaries).
        def on_key_death(ref, me=me):
            s = me()
            if s is not None:
                s._data.pop(ref, None)

        def on_value_death(ref, me=me):
            s = me()
            if s is not None and s._data.get(ref.key) is ref:
                s._data.pop(ref.key, None)

        self._on_key_death = on_key_death
        self._on_value_death = on_value_death
        with _registry_lock:
            _lrus.add(self)

    # -- size ----------------------------------------------------------------------------
    @property
    def maxsize(self) -> int:
        """The current bound: ``int(scale * size())``, or the fixed ``maxsize``."""
        return int(self.scale * _size) if self.fixed is None else self.fixed

    def _trim(self) -> None:
        dropped = []
        with self._lock:
            limit = self.maxsize
            while len(self._data) > limit:
                try:
                    k, v = self._data.popitem(last=False)
                except KeyError:          # emptied meanwhile by a death callback
                    break
                dropped.append((k, v))
        self._dropped(dropped)

    def _dropped(self, items) -> None:
        if self.on_drop is None:
            return
        for k, v in items:
            k, v = self._unwrap(k, v)
            if k is not _MISSING and v is not _MISSING:
                self.on_drop(k, v)

    def _unwrap(self, k, v):
        if self.weak_keys:
            k = k()
            if k is None:
                k = _MISSING
        if self.weak_values:
            v = v()
            if v is None:
                v = _MISSING
        return k, v

    # -- the mapping -----------------------------------------------------------------------
    def _key(self, key):
        return weakref.ref(key) if self.weak_keys else key

    def get(self, key, default=None):
        """The value for ``key`` (now the most recently used entry), else ``default``."""
        # on every jitted call and interpreter run: kept to a few C-level operations
        if self.weak_keys:
            key = _ref(key)
        data = self._data
        v = data.get(key, _MISSING)
        if v is _MISSING:
            return default
        if self.weak_values:
            v = v()
            if v is None:
                return default
        try:
            data.move_to_end(key)
        except KeyError:                  # evicted by another thread meanwhile
            pass
        return v

    def __getitem__(self, key):
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __contains__(self, key) -> bool:
        v = self._data.get(self._key(key), _MISSING)
        return v is not _MISSING and (not self.weak_values or v() is not None)

    def __setitem__(self, key, value) -> None:
        k = weakref.ref(key, self._on_key_death) if self.weak_keys else key
        v = weakref.KeyedRef(value, self._on_value_death, key) if self.weak_values else value
        with self._lock:
            self._data[k] = v
            self._data.move_to_end(k)
        if len(self._data) > self.maxsize:
            self._trim()

    def setdefault(self, key, value):
        """The value for ``key``, stored first as ``value`` if missing."""
        v = self.get(key, _MISSING)
        if v is _MISSING:
            self[key] = v = value
        return v

    def pop(self, key, default=None):
        with self._lock:
            v = self._data.pop(self._key(key), _MISSING)
        if v is _MISSING:
            return default
        if self.weak_values:
            v = v()
            return default if v is None else v
        return v

    def __delitem__(self, key) -> None:
        if self.pop(key, _MISSING) is _MISSING:
            raise KeyError(key)

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        return iter(self.keys())

    def _snapshot(self) -> list:
        while True:
            try:
                items = list(self._data.items())
                break
            except RuntimeError:          # a death callback changed the dict meanwhile
                continue
        out = []
        for k, v in items:
            k, v = self._unwrap(k, v)
            if k is not _MISSING and v is not _MISSING:
                out.append((k, v))
        return out

    def items(self) -> list:
        """The live (key, value) pairs, least recently used first."""
        return self._snapshot()

    def keys(self) -> list:
        return [k for k, _ in self._snapshot()]

    def values(self) -> list:
        return [v for _, v in self._snapshot()]

    def clear(self) -> None:
        """Forget every entry (``on_drop`` is called for each)."""
        with self._lock:
            items = list(self._data.items()) if self.on_drop is not None else ()
            self._data.clear()
        self._dropped(items)

    def __repr__(self) -> str:
        kind = " weak keys" if self.weak_keys else " weak values" if self.weak_values else ""
        return f"<LRU {self.name!r}{kind}: {len(self)}/{self.maxsize}>"


def size() -> int:
    """The base bound of every cache (``$FUNCTRACE_CACHE_SIZE``, default 256)."""
    return _size


def set_size(n: int) -> None:
    """Set the base bound of every cache to ``n`` (>= 0) entries (times each cache's scale),
    trimming live caches now (least recently used entries go first)."""
    global _size
    n = int(n)
    if n < 0:
        raise ValueError(f"cache size must be >= 0, got {n}")
    _size = n
    for c in list(_lrus):
        c._trim()


def register(name: str, clear: Callable[[], None] | Any, *, release: bool = False) -> None:
    """Make ``clear_all`` also clear a cache that is not an ``LRU``: a callable that clears
    it, or a ``functools.lru_cache``-wrapped function (bounded by its own ``maxsize``).
    ``release=True``: not a cache but a step that gives freed memory back to the operating
    system, run last (after the caches are cleared and garbage is collected)."""
    fn = getattr(clear, "cache_clear", clear)
    if not callable(fn):
        raise TypeError(f"register({name!r}, ...) needs a callable or an lru_cache'd function")
    with _registry_lock:
        (_releases if release else _others)[name] = fn


def clear_all(collect: bool = True) -> None:
    """Forget every in-memory entry of every functrace cache (``ft.clear_caches()`` calls
    this); with ``collect``, then run the garbage collector (graphs and executables can sit
    in reference cycles) and give freed heap back to the OS (``malloc_trim`` on glibc, whose
    trim threshold ``backends.malloc_tuning`` raised). The on-disk kernel cache
    (``$FUNCTRACE_CACHE_DIR``) is left alone. Objects the caller still holds (a jitted
    function, a Symbol, a compiled executable) stay usable: what they need is rebuilt on
    their next call."""
    for c in list(_lrus):
        c.clear()
    for fn in list(_others.values()):
        fn()
    if collect:
        gc.collect()
        for fn in list(_releases.values()):
            fn()


def stats() -> list[tuple[str, int, int]]:
    """``(name, entries, bound)`` per live cache (``LRU``s only), sorted by name: for
    debugging memory use."""
    return sorted((c.name, len(c), c.maxsize) for c in list(_lrus))


def lru_cached(name: str, maxsize: int) -> Callable:
    """``functools.lru_cache(maxsize)`` registered under ``name`` (for small pure functions
    of hashable metadata on hot paths, where the C implementation's speed matters)."""
    def deco(fn):
        wrapped = functools.lru_cache(maxsize=maxsize)(fn)
        register(name, wrapped)
        return wrapped
    return deco
