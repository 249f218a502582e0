"""functrace.signature: the one cache of traced graphs (jit, functrace.numpy on devices, the
autograd facade). The differential rule: a cached call answers exactly as an uncached one,
whatever changed between the calls (a global, a closure value, an array baked in, the type or
sign of a static value)."""

from __future__ import annotations

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace import autograd, caches
from functrace.signature import (
    SignatureCache,
    Unsupported,
    consts_current,
    fast_signature,
    fingerprint,
    static_key,
)

SCALE = 2.0


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
    np.testing.assert_array_equal(a, b)


def _differential(fun, calls, **jit_kw):
    """Each step: maybe change the world, then call; the jitted (cached) function must agree
    with the plain one on every call."""
    jf = ft.jit(fun, backend="numpy", **jit_kw)
    for change, args in calls:
        if change is not None:
            change()
        _same(jf(*args), fun(*args))
    return jf


def test_a_rebound_global_is_seen():
    global SCALE
    x = np.linspace(-1, 1, 5)

    def f(x):
        return fnp.sin(x) * SCALE

    def rebind(v):
        def go():
            global SCALE
            SCALE = v
        return go
    try:
        _differential(f, [(None, (x,)), (None, (x,)), (rebind(3.0), (x,)), (None, (x,)),
                          (rebind(-0.5), (x,))])
    finally:
        SCALE = 2.0


def test_a_rebound_closure_value_and_a_mutated_closed_over_array_are_seen():
    x = np.linspace(-1, 1, 5)
    w = np.ones(5)
    k = 2.0

    def f(x):
        return fnp.tanh(x * w) + k

    def set_k():
        nonlocal k
        k = -1.0

    def mutate():
        w[2] = 7.0

    def rebind_w():
        nonlocal w
        w = np.full(5, 0.5)
    _differential(f, [(None, (x,)), (set_k, (x,)), (mutate, (x,)), (None, (x,)),
                      (rebind_w, (x,))])


def test_a_closure_seen_through_a_transform_wrapper():
    x = np.linspace(0.1, 1, 4)
    c = 1.0

    def f(x):
        return fnp.sum(fnp.sin(x) * c)

    def set_c():
        nonlocal c
        c = 3.0
    _differential(ft.grad(f), [(None, (x,)), (set_c, (x,))])


def test_each_array_baked_in_once_and_jacfwd_basis_not_at_all():
    """Every cached call compares the arrays a trace baked in with their literals (a 200x200
    basis: ~0.1 ms a compare). An array read three times is compared once; jacfwd's basis,
    which functrace made and no one else holds (``tracing.fresh_constant``), not at all. An
    in-place update of the array read three times is still seen."""
    from functrace.tracing import trace_to_graph
    w = np.linspace(1, 2, 5)
    x = np.linspace(-1, 1, 5)

    def f(x):
        return fnp.sum(x * w + fnp.sin(x) * w + w * x)
    tr = trace_to_graph(lambda x: [f(x)], [x])
    assert len(tr.consts) == 1 and tr.consts[0][0] is w
    tr = trace_to_graph(lambda x: [ft.hessian(lambda x: fnp.sum(x[1:] * x[:-1] ** 3))(x)], [x])
    assert tr.consts == []
    tr = trace_to_graph(lambda x: [ft.jacrev(lambda x: fnp.sin(x) * w)(x)], [x])
    assert [c for c, _ in tr.consts] == [w]

    def mutate():
        w[2] = 7.0
    _differential(f, [(None, (x,)), (None, (x,)), (mutate, (x,)), (None, (x,))])
    _differential(ft.hessian(lambda x: fnp.sum(fnp.sin(x) * w)),
                  [(None, (x,)), (None, (x,)), (mutate, (x,))])


@pytest.mark.parametrize("first,second", [(1, 1.0), (1.0, True), (0.0, -0.0),
                                          (np.float32(2), np.float64(2)), ((1, 2.0), (1.0, 2))])
def test_static_values_differ_by_type_and_sign(first, second):
    def f(x, s):
        s0 = s[0] if isinstance(s, tuple) else s
        return fnp.full(x.shape, s0) + x * 0 if not isinstance(s0, bool) else x + s0

    x = -np.zeros(3)
    jf = _differential(f, [(None, (x, first)), (None, (x, second)), (None, (x, first))],
                       static_argnums=1)
    assert len(jf._cache) == 2


def test_the_cache_is_bounded_and_cleared():
    jf = ft.jit(lambda x: x + 1.0, backend="numpy")
    for n in range(1, 6):
        jf(np.ones(n))
    assert len(jf._cache) > 0
    ft.clear_caches()
    assert len(jf._cache) == 0
    c = SignatureCache("test.bounded", maxsize=3)
    for i in range(10):
        c.put(i, i)
    assert len(c) == 3 and c.get(9) == 9 and c.get(0) is None
    assert any(name == "test.bounded" for name, _, _ in caches.stats())


def test_signature_cache_checks_fingerprint_and_constants():
    c = SignatureCache("test.checks", maxsize=8)
    a = np.arange(3.0)
    g = 1

    def f():
        return g

    c.put("k", "v", f, [(a, a.copy())])
    assert c.get("k", f) == "v"
    a[1] = -0.0 if a[1] else 5.0
    assert c.get("k", f) is None
    c.put("k", "v", f, [(a, a.copy())])
    assert c.get("k", f) == "v"
    g = 2
    assert c.get("k", f) is None


def test_the_pieces():
    leaves: list = []
    sig = fast_signature(((np.ones(2), 1.0), {"b": None, "a": np.zeros((1, 2), "f4")}), leaves)
    assert len(leaves) == 3 and hash(sig) is not None
    with pytest.raises(Unsupported):
        fast_signature(object(), [])
    assert static_key(0.0) != static_key(-0.0)
    assert static_key(float("nan")) == static_key(float("nan"))
    assert static_key(1) != static_key(True) != static_key(1.0)
    with pytest.raises(TypeError):
        static_key([1])
    z = np.zeros(2)
    assert consts_current([(z, z.copy())])
    assert not consts_current([(z, -z)])    # -0.0 is not 0.0, bit for bit
    assert fingerprint(len) == ()


def test_autograd_backward_cache_answers_as_a_fresh_backward():
    w = autograd.attach_grad(np.array([0.5, -1.0, 2.0]))
    grads = []
    for step in range(3):
        with autograd.record():
            y = (fnp.sin(w * (step + 1.0)) * w).sum()
        y.backward()
        grads.append(np.array(w.grad))
        ft.clear_caches()
        with autograd.record():
            y = (fnp.sin(w * (step + 1.0)) * w).sum()
        y.backward()
        _same(w.grad, grads[-1])
    v = np.array([0.5, -1.0, 2.0])
    for step, g in enumerate(grads):
        want = np.sin(v * (step + 1.0)) + v * (step + 1.0) * np.cos(v * (step + 1.0))
        np.testing.assert_allclose(g, want, rtol=1e-12)
