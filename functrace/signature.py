"""Signatures of calls, and the one cache of traced graphs keyed by them.

Owns what decides whether a graph traced earlier may answer a call now, for every cache that
holds traced graphs: ``ft.jit``'s compiled signatures, functrace.numpy's graphs for device
arrays, and the autograd facade's backward graphs. (Un-jitted transforms cache nothing: they
re-run the user's function on every call.) A cache never changes an answer, so an entry
answers only while everything it was traced from still holds:

* the *signature* of the call: the pytree structure and each array leaf's shape and dtype
  (``fast_signature`` for plain containers, in one pass), and each static value by type and
  exact value (``static_key``: ``1``, ``1.0`` and ``True`` differ, as do ``0.0`` and ``-0.0``);
* the *fingerprint* of the function: the identity of every global and closure value it reads
  (``fingerprint``), so rebinding a name the function reads retraces;
* the *constants* the trace baked in: arrays the function closed over, bit for bit
  (``consts_current``), so updating one in place retraces.

``SignatureCache`` keeps the entries in a bounded LRU of ``functrace.caches`` (so
``ft.clear_caches()`` empties it) and checks the fingerprint and constants on every hit.
A function whose Python code branches on traced values has one graph per path taken, each
valid only where its guards (the decisions it recorded) hold: ``Variants`` holds them, as
one value of a ``SignatureCache``, each with its own constants. Imports caches and core only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from . import caches
from .core import on_device

__all__ = ["Unsupported", "fast_signature", "static_key", "fingerprint", "consts_current",
           "SignatureCache", "Variants"]


class Unsupported(Exception):
    """``fast_signature`` met something other than plain containers of arrays and numbers."""


def fast_signature(x: Any, leaves: list) -> Hashable:
    """The signature of ``x`` (plain containers of arrays and numbers), appending its leaves
    to ``leaves`` in tree_util's order (tuples and lists in order, dict keys sorted, None
    empty); ``Unsupported`` for anything else. On every jitted call: plain type tests."""
    t = type(x)
    if t is np.ndarray:
        leaves.append(x)
        return (x.shape, x.dtype)
    if t is tuple or t is list:
        return (t, tuple(fast_signature(c, leaves) for c in x))
    if t is dict:
        keys = sorted(x)
        return (dict, tuple(keys), tuple(fast_signature(x[k], leaves) for k in keys))
    if t is float or t is int or t is bool:
        a = np.asarray(x)
        leaves.append(a)
        return (t, a.dtype)
    if x is None:
        return None
    raise Unsupported


def static_key(v: Any) -> Hashable:
    """A key for a static (untraced) value that equals another's only when tracing with either
    gives the same graph: the type is part of it (``1 == 1.0 == True`` in Python, not here),
    floats compare by their bits (``-0.0`` is not ``0.0``; a NaN equals itself), tuples item by
    item. Raises TypeError for an unhashable value."""
    t = type(v)
    if t is float:
        return (float, v.hex() if not math.isnan(v) else "nan")
    if t is complex:
        return (complex, static_key(v.real), static_key(v.imag))
    if isinstance(v, np.generic):
        return (t, v.dtype.str, v.tobytes())
    if isinstance(v, tuple):
        return (t, tuple(static_key(e) for e in v))
    hash(v)
    return (t, v)


_FunctionType = type(static_key)


def fingerprint(fun: Callable, depth: int = 0) -> tuple:
    """Identity of what ``fun`` reads from its closure and globals: a rebinding invalidates
    a cached graph. (Arrays mutated in place are caught by ``consts_current``.) Functions in
    the closure are followed a few levels down, so ``jit(grad(f))`` notices a name that ``f``
    closes over being rebound. (On every jitted call: kept to plain lookups.)"""
    f = getattr(fun, "__func__", fun)
    code = getattr(f, "__code__", None)
    if code is None:
        return ()
    g = f.__globals__
    # functrace's own wrappers (grad's, jit's) read only functrace's globals: not the user's
    out = [] if g.get("__name__", "").startswith("functrace.") else [
        id(g.get(n)) for n in code.co_names]
    for c in f.__closure__ or ():
        try:
            v = c.cell_contents
        except ValueError:       # an empty cell (a closure variable not assigned yet)
            out.append(None)
            continue
        out.append(id(v))
        if depth < 3 and type(v) is _FunctionType and v is not f:
            out.append(fingerprint(v, depth + 1))
    return tuple(out)


def _const_current(orig, lit) -> bool:
    """Whether an array the trace baked in as a constant still holds that value, bit for bit
    (NaN equals NaN, -0.0 differs from 0.0). A device array counts by identity (comparing
    contents would synchronise with the GPU per call)."""
    if on_device(orig):
        return True
    a = np.asarray(orig)
    if a.shape != lit.shape or a.dtype != lit.dtype:
        return False
    if a.nbytes <= 4096:
        return a.tobytes() == lit.tobytes()
    return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                               np.ascontiguousarray(lit).view(np.uint8)))


def consts_current(consts: Sequence[tuple[Any, np.ndarray]]) -> bool:
    """Whether every ``(array, the literal traced from it)`` pair (``Traced.consts``) still
    agrees, bit for bit."""
    for orig, lit in consts:
        if not _const_current(orig, lit):
            return False
    return True


class SignatureCache:
    """Traced graphs (or anything built from one) by signature, bounded and checked.

    ``put(key, value, fun, consts)`` stamps the entry with ``fingerprint(fun)`` (when ``fun``
    is given) and the constants the trace baked in; ``get(key, fun)`` returns the value only
    while both still hold, else None (the caller traces again and puts the new value). The
    key is the caller's signature (``fast_signature``, ``static_key`` and shapes); entries
    live in ``caches.LRU(name, scale=...)``.

    Example:
        >>> import numpy as np
        >>> from functrace.signature import SignatureCache
        >>> c = SignatureCache("example", maxsize=4)
        >>> w = np.ones(2)
        >>> c.put("sig", "graph", consts=[(w, w.copy())])
        >>> c.get("sig")
        'graph'
        >>> w[0] = 5.0            # the baked-in array changed: the entry no longer answers
        >>> c.get("sig") is None
        True
    """

    __slots__ = ("_lru",)

    def __init__(self, name: str, *, scale: float = 1.0, maxsize: int | None = None):
        self._lru = caches.LRU(name, scale=scale, maxsize=maxsize)

    def get(self, key: Hashable, fun: Callable | None = None) -> Any:
        hit = self._lru.get(key)
        if hit is None:
            return None
        value, fp, consts = hit
        if fp is not None and fp != fingerprint(fun):
            return None
        if consts and not consts_current(consts):
            return None
        return value

    def put(self, key: Hashable, value: Any, fun: Callable | None = None,
            consts: Sequence = ()) -> None:
        self._lru[key] = (value, None if fun is None else fingerprint(fun), tuple(consts))

    def values(self) -> list:
        """The cached values, least recently used first (a snapshot; not checked)."""
        return [v for v, _, _ in self._lru.values()]

    def clear(self) -> None:
        self._lru.clear()

    def __len__(self) -> int:
        return len(self._lru)

    def __repr__(self) -> str:
        return f"<SignatureCache {self._lru!r}>"


class Variants:
    """The guarded variants of one signature: one value per Python path the function took
    (``if fnp.sum(x) > 0:`` gives two), most recently used first.

    Whether a variant answers a call is known only after running it: its guards' values are
    extra outputs of its own compiled graph, so the caller runs the candidates in order and
    keeps the first whose guards hold (``use``), which moves it to the front (a loop that
    stays on one path pays one run per call). Each variant keeps the constants its trace
    baked in (``consts_current``); ``candidates`` drops the variants whose constants changed.
    The whole set is one value of a ``SignatureCache``, so ``ft.clear_caches()`` and a
    changed fingerprint drop every variant at once.

    Example:
        >>> from functrace.signature import Variants
        >>> v, a, b = Variants(), ["path a"], ["path b"]
        >>> v.use(a); v.use(b)
        >>> v.candidates()
        [['path b'], ['path a']]
        >>> v.use(a); v.candidates()         # variants are told apart by identity
        [['path a'], ['path b']]
    """

    # (value, consts) pairs, replaced whole and never mutated: readers in other threads see
    # one consistent tuple (a race can lose a variant, which costs a retrace, never an answer)
    __slots__ = ("_items",)

    consts = ()     # what SignatureCache checks for the set itself: each variant checks its own

    def __init__(self):
        self._items: tuple = ()

    def candidates(self) -> list:
        """The variants whose constants are current, most recently used first."""
        items = self._items
        ok = [it for it in items if not it[1] or consts_current(it[1])]
        if len(ok) != len(items):
            self._items = tuple(ok)
        return [v for v, _ in ok]

    def use(self, value: Any, consts: Sequence = ()) -> None:
        """Make ``value`` the most recently used variant (adding it, with the constants its
        trace baked in, if it is new)."""
        items = self._items
        for it in items:
            if it[0] is value:
                self._items = (it, *(i for i in items if i is not it))
                return
        self._items = ((value, tuple(consts)), *items)

    def values(self) -> list:
        """Every variant, most recently used first (not checked)."""
        return [v for v, _ in self._items]

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<Variants {len(self._items)}>"
