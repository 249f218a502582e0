"""Memory: the bounded LRU of ``functrace.caches``, that nothing keeps a dropped function's or
Symbol's graphs alive, that ``ft.clear_caches()`` frees every cache, and RSS (read from
/proc/self/statm) over many calls and many shapes.

RSS checks compare growth between two phases of one run (never absolute numbers, never time)
and pair it with an exact count of live ``Graph`` objects, which is what the bound is about.
The 2,000-shape versions are ``slow`` and run only when asked for
(``python -m pytest -m slow tests/api/test_memory.py``, several minutes); the default run has
small versions of each.
"""

from __future__ import annotations

import gc
import os
import sys
import weakref

import numpy as np
import pytest
from backend_checks import kernel_cache_dir

import functrace as ft
import functrace.numpy as fnp
from functrace import caches
from functrace.autograd import _backward
from functrace.backends import reference as numpy_ref
from functrace.backends.cpu import kernels as cpu_kernels
from functrace.core import Graph

pytest.importorskip("numba")

# live_graphs() and made_since() collect and scan the whole heap: run these tests while the
# worker is young (tests/conftest.py moves ``early`` tests first)
pytestmark = pytest.mark.early


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-kernels") as d:
        yield d


@pytest.fixture(autouse=True)
def _slow_only_when_asked(request):
    """``slow`` tests here run only when the marker expression names them (``-m slow``)."""
    if request.node.get_closest_marker("slow") and "slow" not in (
            request.config.getoption("markexpr") or ""):
        pytest.skip("slow (minutes): run with -m slow")


@pytest.fixture
def cache_size():
    """Lets a test call ``caches.set_size``; the size is restored afterwards."""
    old = caches.size()
    yield caches.set_size
    caches.set_size(old)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def live_graphs() -> dict[int, weakref.ref]:
    """Every live Graph, by id (a snapshot to diff against; identity, not equality)."""
    gc.collect()
    return {id(o): weakref.ref(o) for o in gc.get_objects() if type(o) is Graph}


def made_since(before: dict) -> list[Graph]:
    """The live Graphs that did not exist in the snapshot ``before``."""
    gc.collect()
    out = []
    for o in gc.get_objects():
        if type(o) is Graph:
            r = before.get(id(o))
            if r is None or r() is not o:
                out.append(o)
    return out


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mib() -> float:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


needs_statm = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                 reason="RSS is read from /proc/self/statm (Linux)")


def heavy(x):
    """~40 equations, different scalar literals per step (so no loop is rolled): a graph
    big enough that keeping one per shape shows in RSS."""
    y = x
    for i in range(8):
        y = fnp.tanh(y * 0.5 + float(i)) + fnp.sin(y) * (1.0 + i)
    return fnp.sum(y)


# --------------------------------------------------------------------------------------------
# the LRU class
# --------------------------------------------------------------------------------------------

def test_lru_evicts_the_least_recently_used_first():
    c = caches.LRU("test", maxsize=3)
    for k in "abc":
        c[k] = k.upper()
    assert c.get("a") == "A"            # a is now the most recent: b is the oldest
    c["d"] = "D"
    assert c.keys() == ["c", "a", "d"]
    c["c"] = "C2"                       # re-setting refreshes too
    c["e"] = "E"
    assert c.keys() == ["d", "c", "e"]
    assert "a" not in c and c.get("a") is None and c.get("a", 0) == 0
    with pytest.raises(KeyError):
        c["a"]
    assert "c" in c and c["c"] == "C2" and len(c) == 3
    assert c.pop("c") == "C2" and c.pop("c", "gone") == "gone"
    assert c.setdefault("f", 1) == 1 and c.setdefault("f", 2) == 1


def test_lru_size_follows_set_size_and_scale(cache_size):
    cache_size(10)
    a = caches.LRU("test.a")
    b = caches.LRU("test.b", scale=2)
    fixed = caches.LRU("test.fixed", maxsize=3)
    assert (a.maxsize, b.maxsize, fixed.maxsize) == (10, 20, 3)
    for i in range(30):
        a[i] = b[i] = fixed[i] = i
    assert (len(a), len(b), len(fixed)) == (10, 20, 3)
    assert a.keys() == list(range(20, 30))
    cache_size(4)                       # shrinking trims live caches at once, oldest first
    assert a.keys() == [26, 27, 28, 29] and b.keys() == list(range(22, 30))
    assert len(fixed) == 3
    cache_size(0)                       # size 0: nothing is kept
    a["x"] = 1
    assert len(a) == 0 and a.get("x") is None
    with pytest.raises(ValueError):
        caches.set_size(-1)


def test_size_from_the_environment(monkeypatch):
    monkeypatch.setenv("FUNCTRACE_CACHE_SIZE", "17")
    assert caches._size_from_env() == 17
    monkeypatch.setenv("FUNCTRACE_CACHE_SIZE", "")
    assert caches._size_from_env() == caches.DEFAULT_SIZE
    monkeypatch.setenv("FUNCTRACE_CACHE_SIZE", "many")
    with pytest.raises(ValueError, match="FUNCTRACE_CACHE_SIZE"):
        caches._size_from_env()


def test_clear_calls_on_drop_and_clear_all_reaches_every_cache():
    dropped = []
    c = caches.LRU("test", maxsize=2, on_drop=lambda k, v: dropped.append((k, v)))
    c[1], c[2], c[3] = "a", "b", "c"     # 1 evicted
    assert dropped == [(1, "a")]
    c.clear()
    assert dropped == [(1, "a"), (2, "b"), (3, "c")] and len(c) == 0

    calls = []
    per_object = caches.LRU("test.per_object", maxsize=5)
    per_object["k"] = 1

    @caches.lru_cached("test.memo", maxsize=8)
    def memo(x):
        calls.append(x)
        return x

    memo(1), memo(1)
    assert calls == [1]
    caches.clear_all()
    assert len(per_object) == 0
    memo(1)
    assert calls == [1, 1]
    assert ("test.per_object", 0, 5) in caches.stats()
    del per_object
    gc.collect()
    assert "test.per_object" not in {name for name, _, _ in caches.stats()}   # weakly held


class _Key:
    """Weak-referenceable key with value equality (like Graph: structural)."""

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _Key) and other.v == self.v

    def __hash__(self):
        return hash(self.v)


class _Value:
    pass


def test_weak_keys_go_with_their_key_and_equal_keys_share_an_entry():
    c = caches.LRU("test", maxsize=10, weak_keys=True)
    k1, k2 = _Key(1), _Key(2)
    c[k1], c[k2] = "one", "two"
    assert c.get(_Key(1)) == "one"       # found through an equal key
    assert len(c) == 2
    del k1
    gc.collect()
    assert len(c) == 1 and c.get(_Key(1)) is None and c.keys() == [k2]
    with pytest.raises(TypeError):
        c[1] = "an int cannot be weakly referenced"


def test_weak_values_go_with_their_value():
    c = caches.LRU("test", maxsize=10, weak_values=True)
    v = _Value()
    key = ("a key", _Value())
    kref = weakref.ref(key[1])
    c[key] = v
    assert c.get(key) is v and c.values() == [v]
    del v, key
    gc.collect()
    assert len(c) == 0 and kref() is None   # the entry, and with it the key, are gone


# --------------------------------------------------------------------------------------------
# dropped functions and Symbols are collected; clear_caches frees the rest
# --------------------------------------------------------------------------------------------

def _calls(fun, x, n=3):
    for _ in range(n):          # the second call of a new graph compiles it (FUNCTRACE_HOT)
        out = fun(x)
    return out


@pytest.mark.parametrize("transform", ["jit", "jit_grad", "jit_numpy"])
def test_a_dropped_jitted_function_frees_its_graphs(transform):
    before = live_graphs()

    def f(x):
        return fnp.sum(fnp.tanh(x) * x + fnp.exp(-x * x))

    if transform == "jit":
        jf = ft.jit(f)
    elif transform == "jit_grad":
        jf = ft.jit(ft.grad(f))
    else:
        jf = ft.jit(f, backend="numpy")
    x = np.linspace(-1, 1, 13)
    _calls(jf, x)
    (entry,) = {id(e): e for e in jf._cache.values()}.values()
    graph, run = weakref.ref(entry.graph), weakref.ref(entry.run)
    if transform != "jit_numpy":
        assert entry.run.compiled
    del entry
    assert made_since(before)
    del jf, f
    gc.collect()
    assert graph() is None and run() is None
    assert made_since(before) == []


def test_a_dropped_jitted_loop_frees_its_body_plans():
    """A rolled loop's body graph is a key of cpu_loop's plan cache (held weakly)."""
    from functrace.backends.cpu import loop as cpu_loop

    def rnn(W, xs):
        h = fnp.zeros(W.shape[0])
        for t in range(xs.shape[0]):
            h = fnp.tanh(W @ h + xs[t])
        return fnp.sum(h * h)

    rng = np.random.default_rng(0)
    W, xs = rng.normal(0, 0.3, (4, 4)), rng.normal(size=(10, 4))
    before = live_graphs()
    jf = ft.jit(rnn, eager=True)
    np.testing.assert_allclose(jf(W, xs), rnn(W, xs), rtol=1e-12)
    (entry,) = {id(e): e for e in jf._cache.values()}.values()
    assert entry.run.lower().loops, "the recurrence should have been rolled"
    bodies = [weakref.ref(e.params["body"]) for e in entry.run.lower().graph.eqns
              if e.op.name == "loop"]
    assert bodies and len(cpu_loop._plans) >= 1
    del entry, jf
    gc.collect()
    assert all(b() is None for b in bodies)
    assert made_since(before) == []


def test_a_dropped_symbol_frees_its_graph_and_plan():
    before = live_graphs()
    sym = ft.trace(heavy)(np.ones(5))
    for _ in range(3):
        sym(np.full(5, 0.5))
    graph = weakref.ref(sym.graph)
    assert numpy_ref._plans.get(sym.graph) is not None
    n_plans = len(numpy_ref._plans)
    del sym
    gc.collect()
    assert graph() is None and len(numpy_ref._plans) == n_plans - 1
    assert made_since(before) == []


def _nothing_cached():
    assert [(name, n) for name, n, _ in caches.stats() if n] == []
    assert not [m for m in sys.modules if m.startswith(("functrace_kernels.",
                                                        "functrace_loops."))]


def small(x):
    return fnp.sum(fnp.tanh(x) * x + fnp.exp(-x * x))


def test_clear_caches_frees_what_live_functions_cached_and_they_still_work():
    before = live_graphs()
    f = small                          # a function that stays alive (module level)
    jf, jg = ft.jit(f), ft.jit(ft.grad(f))
    sym = ft.trace(f)(np.ones(4))
    x = np.linspace(0, 1, 4)
    want_f, want_g = _calls(jf, x), _calls(jg, x)
    sym(x)
    w = ft.autograd.attach_grad(x.copy())
    with ft.autograd.record():
        loss = f(w)
    loss.backward()
    assert len(_backward._CACHE) >= 1 and len(cpu_kernels._kernels) >= 1
    del w, loss
    ft.clear_caches()
    _nothing_cached()
    # only the Symbol's own graph is left: everything else functrace made is gone
    assert made_since(before) == [sym.graph]
    np.testing.assert_array_equal(jf(x), want_f)   # rebuilt on demand
    np.testing.assert_array_equal(jg(x), want_g)


def test_the_autograd_backward_cache_is_bounded_and_cleared(cache_size):
    cache_size(4)
    ag = ft.autograd
    before = live_graphs()
    for k in range(1, 13):             # 12 shapes: 12 backward graphs made, 4 kept
        w = ag.attach_grad(np.linspace(0, 1, k))
        with ag.record():
            loss = fnp.sum(fnp.tanh(w) * w)
        loss.backward()
        np.testing.assert_allclose(w.grad, np.tanh(w.asnumpy()) + w.asnumpy() * (
            1 - np.tanh(w.asnumpy()) ** 2), rtol=1e-12)
    del w, loss
    assert len(_backward._CACHE) == 4
    assert 0 < len(made_since(before)) <= 2 * 4       # forward key + backward graph per entry
    ft.clear_caches()
    assert made_since(before) == []


def test_jit_keeps_its_most_recently_used_signatures(cache_size):
    cache_size(1)                       # 2 keys (a static argument: one key per signature)
    traced = []

    def f(x, s):
        traced.append(x.shape)
        return x * 2.0

    jf = ft.jit(f, backend="numpy", static_argnums=1)
    a, b, c = np.ones(1), np.ones(2), np.ones(3)
    jf(a, "s"), jf(b, "s"), jf(a, "s"), jf(c, "s")    # c evicts b (a was used after b)
    jf(a, "s")
    assert traced == [(1,), (2,), (3,)]
    jf(b, "s")
    assert traced == [(1,), (2,), (3,), (2,)]
    assert len(jf._cache) == 2


# --------------------------------------------------------------------------------------------
# RSS: flat over repeated calls; bounded over many shapes
# --------------------------------------------------------------------------------------------

def _repeat(kind: str):
    """A no-argument function that makes one call of the kind."""
    x = np.linspace(0, 1, 32)
    if kind == "jit":
        jf = ft.jit(small)
        return lambda: jf(x)
    if kind == "jit_grad":
        jg = ft.jit(ft.grad(small))
        return lambda: jg(x)
    if kind == "symbol":
        sym = ft.trace(small)(x)
        return lambda: sym(x)
    ag = ft.autograd
    w = ag.attach_grad(x.copy())

    def step():
        with ag.record():
            loss = fnp.sum(fnp.tanh(w) * w)
        loss.backward()
    return step


def _flat(kind: str, n: int):
    call = _repeat(kind)
    for _ in range(1_000):              # warm-up: compile, pools, allocator arenas
        call()
    before, graphs = rss_mib(), live_graphs()
    for _ in range(n):
        call()
    grown = rss_mib() - before
    assert made_since(graphs) == []
    assert grown < 4.0, f"RSS grew {grown:.1f} MiB over {n:,} calls"


@needs_statm
@pytest.mark.parametrize("kind", ["jit", "jit_grad", "symbol"])
def test_rss_is_flat_over_10000_calls(kind):
    _flat(kind, 10_000)                 # a leak of 400 bytes a call would show


@needs_statm
def test_rss_is_flat_over_3000_autograd_steps():
    _flat("autograd", 3_000)


@pytest.mark.slow
@needs_statm
def test_rss_is_flat_over_10000_autograd_steps():
    _flat("autograd", 10_000)


def distinct_shapes(n: int) -> list[tuple[int]]:
    """``n`` distinct 1-d shapes of sizes in ``[n, 2n)``, in a shuffled (fixed) order: sizes do
    not trend upwards, so a bounded cache's live set does not grow with them either."""
    ks = np.random.default_rng(0).permutation(np.arange(n, 2 * n))
    return [(int(k),) for k in ks]


def _shapes(kind: str, n: int, calls: int, cache_size, size: int):
    """Run ``kind`` over ``n`` distinct shapes with the cache size set to ``size``: returns
    RSS growth over the second half, over the first half, and the Graphs left alive."""
    cache_size(size)
    if kind == "jit":
        fun = ft.jit(heavy)
    elif kind == "jit_grad":
        fun = ft.jit(ft.grad(heavy))
    else:
        def fun(x):
            return ft.trace(heavy)(x)(x)   # a new Symbol per call, dropped after it
    before = live_graphs()
    r0 = rss_mib()
    r_half = None
    for i, shape in enumerate(distinct_shapes(n), 1):
        x = np.linspace(0, 1, shape[0])
        for _ in range(calls):
            fun(x)
        if i == n // 2:
            r_half = rss_mib()
    r_end = rss_mib()
    return r_end - r_half, r_half - r0, len(made_since(before))


def _shape_cases():
    return ["jit", "jit_grad", "symbol"]


@needs_statm
@pytest.mark.parametrize("kind", _shape_cases())
def test_graphs_over_many_shapes_are_bounded_by_the_cache_size(kind, cache_size):
    late, early, alive = _shapes(kind, n=160, calls=1, cache_size=cache_size, size=8)
    # jit: 8 x 2 keys hold at most 16 signatures, each one graph; symbol: none survives
    assert alive <= {"jit": 16, "jit_grad": 16, "symbol": 0}[kind]
    # measured here: 0.0 MiB bounded; ~6 MiB with an unbounded cache (~80 KB a shape)
    assert late < 3.0, f"RSS grew {late:.1f} MiB over the last 80 shapes (first 80: {early:.1f})"


@pytest.mark.slow
@needs_statm
@pytest.mark.parametrize("kind", _shape_cases())
def test_rss_over_2000_shapes_is_bounded_by_the_cache_size(kind, cache_size):
    late, early, alive = _shapes(kind, n=2000, calls=2, cache_size=cache_size, size=64)
    assert alive <= {"jit": 128, "jit_grad": 128, "symbol": 0}[kind]
    # measured here: 0.0 MiB bounded; ~64 MiB a half with an unbounded cache
    assert late < 0.5 * early + 8.0, f"RSS grew {late:.1f} MiB over the last 1,000 shapes " \
                                     f"(first 1,000: {early:.1f})"
