"""API details that JAX and autograd programs rely on (issue #18): each test is one thing a
port written for JAX or autograd does, checked against an analytic value, finite differences
or autograd itself."""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp

rng = np.random.default_rng(18)


# ---- ft.vjp(..., has_aux=True) returns (out, vjp_fn, aux), as jax.vjp ----------------------

def test_vjp_has_aux_returns_out_vjp_fn_aux():
    x = np.array([0.5, 1.5])

    def f(x):
        return fnp.sin(x) * x, {"sq": x ** 2, "n": 3}

    res = ft.vjp(f, x, has_aux=True)
    assert len(res) == 3
    out, vjp_fn, aux = res
    np.testing.assert_allclose(out, np.sin(x) * x)
    assert type(aux["sq"]) is np.ndarray                 # aux is a plain value, not a tracer
    np.testing.assert_allclose(aux["sq"], x ** 2)
    assert aux["n"] == 3
    (g,) = vjp_fn(np.ones(2))
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-14)


def test_vjp_has_aux_under_jit_and_grad():
    x = np.array([0.5, 1.5])

    def f(x):
        return x ** 3, fnp.sum(x)

    def pulled(x):
        out, vjp_fn, aux = ft.vjp(f, x, has_aux=True)
        (g,) = vjp_fn(np.ones(2))
        return fnp.sum(g) + aux

    want = np.sum(3 * x ** 2) + np.sum(x)
    np.testing.assert_allclose(pulled(x), want, rtol=1e-14)
    np.testing.assert_allclose(ft.jit(pulled)(x), want, rtol=1e-14)
    np.testing.assert_allclose(ft.grad(pulled)(x), 6 * x + 1, rtol=1e-14)


def test_vjp_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match="pair"):
        ft.vjp(lambda x: x * 2, np.ones(2), has_aux=True)


# ---- x.at[idx] on eager results (ft.config.eager_at), and .min / .max / .get --------------

@pytest.fixture
def eager_at():
    ft.config.eager_at = True
    try:
        yield
    finally:
        ft.config.eager_at = False


def test_eager_results_are_plain_numpy_by_default():
    x = fnp.zeros(3)
    assert type(x) is np.ndarray
    y = fnp.at(x)[1].set(2.0)                 # the spelling that works on any array
    assert type(y) is np.ndarray
    np.testing.assert_array_equal(y, [0.0, 2.0, 0.0])
    np.testing.assert_array_equal(x, 0.0)     # functional: x is unchanged


def test_eager_at_makes_fnp_results_carry_at(eager_at):
    x = fnp.zeros(4)
    assert isinstance(x, np.ndarray) and isinstance(x, fnp.AtArray)
    y = x.at[1].set(3.0)
    np.testing.assert_array_equal(y, [0.0, 3.0, 0.0, 0.0])
    np.testing.assert_array_equal(x, 0.0)      # never mutated
    z = (y * 2).at[np.array([0, 0, 3])].add(1.0)     # numpy's own operators keep .at
    np.testing.assert_array_equal(z, [2.0, 6.0, 0.0, 1.0])
    assert isinstance(z.at[2:].get(), fnp.AtArray)
    w, v = fnp.linalg.eigh(np.eye(2))                 # tuple results: each leaf
    assert isinstance(w, fnp.AtArray) and isinstance(v, fnp.AtArray)
    # numpy interop: an AtArray is an ndarray to numpy, and converts back to a plain one
    assert type(np.asarray(y)) is np.ndarray
    np.testing.assert_array_equal(np.concatenate([y, x]), [0, 3, 0, 0, 0, 0, 0, 0])


def test_a_jax_style_function_runs_eagerly_and_under_transforms(eager_at):
    def loss(w):                # written for JAX: functional updates on a fresh array
        h = fnp.zeros(3).at[0].set(w[0] * w[1])
        h = h.at[1:].add(fnp.sin(w))
        h = h.at[np.array([2, 2])].max(w * 3.0)
        return fnp.sum(h ** 2)

    w = np.array([0.3, 0.7])
    eager = loss(w)             # outside any transform: fnp results carry .at

    def ref(w):
        h = np.array([w[0] * w[1], np.sin(w[0]), np.sin(w[1])])
        h[2] = max(h[2], 3 * w[0], 3 * w[1])
        return np.sum(h ** 2)

    np.testing.assert_allclose(eager, ref(w), rtol=1e-15)
    np.testing.assert_allclose(ft.jit(loss)(w), ref(w), rtol=1e-14)
    g = ft.grad(loss)(w)
    eps = 1e-6
    fd = [(ref(w + eps * e) - ref(w - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_at_min_max_values_match_numpy_ufunc_at():
    x = np.array([1.0, 5.0, -2.0, 0.5])
    idx = np.array([0, 2, 0, 3, 2])
    v = np.array([3.0, -4.0, -1.0, 0.25, 7.0])
    for meth, uf in (("min", np.minimum), ("max", np.maximum)):
        want = x.copy()
        uf.at(want, idx, v)
        np.testing.assert_array_equal(getattr(fnp.at(x)[idx], meth)(v), want)
        got = ft.jit(lambda x, v, meth=meth: getattr(x.at[idx], meth)(v))(x, v)
        np.testing.assert_array_equal(got, want)


def test_at_max_ties_share_the_gradient_evenly():
    # x[0] == v[0] == v[1]: three tied candidates, each gets a third (reduce max's rule)
    def f(x, v):
        return fnp.sum(fnp.at(x)[np.array([0, 0])].max(v))

    x, v = np.array([2.0, 1.0]), np.array([2.0, 2.0])
    gx, gv = ft.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(gx, [1 / 3, 1.0])
    np.testing.assert_allclose(gv, [1 / 3, 1 / 3])
    # forward mode agrees with reverse mode
    _, t = ft.jvp(f, (x, v), (np.array([1.0, 0.0]), np.array([1.0, 1.0])))
    np.testing.assert_allclose(t, 1.0)


def test_at_refuses_modes_that_would_change_values():
    with pytest.raises(ValueError, match="mode='clip'"):
        fnp.at(np.zeros(3))[5].set(1.0, mode="clip")
    with pytest.raises(ValueError, match="fill_value"):
        fnp.at(np.zeros(3))[1].get(fill_value=0.0)
    with pytest.raises(TypeError, match="real"):
        fnp.at(np.zeros(2, complex))[0].max(1.0)


# ---- einsum broadcasts size-1 axes of a shared letter, as numpy does ------------------------

def test_einsum_broadcasts_size_one_axes_eager_traced_jit_and_gradient():
    a = rng.standard_normal((1, 4, 2))
    b = rng.standard_normal((5, 2, 3))
    w = rng.standard_normal((5, 4, 3))
    want = np.einsum("mnd,mdo->mno", a, b)
    assert want.shape == (5, 4, 3)

    def f(a, b):
        return fnp.einsum("mnd,mdo->mno", a, b)

    np.testing.assert_allclose(f(a, b), want, rtol=1e-14)
    np.testing.assert_allclose(ft.trace(f)(a, b)(a, b), want, rtol=1e-14)
    np.testing.assert_allclose(ft.jit(f)(a, b), want, rtol=1e-14)
    np.testing.assert_allclose(ft.jit(f, backend="numpy")(a, b), want, rtol=1e-14)

    def loss(a, b):
        return fnp.sum(w * f(a, b))

    # d/da[0, n, d] sums over the broadcast letter m: sum_{m, o} w[m, n, o] b[m, d, o]
    ga_want = np.einsum("mno,mdo->nd", w, b)[None]
    gb_want = np.einsum("mno,nd->mdo", w, a[0])
    for grad in (ft.grad(loss, argnums=(0, 1)), ft.jit(ft.grad(loss, argnums=(0, 1)))):
        ga, gb = grad(a, b)
        assert ga.shape == (1, 4, 2)
        np.testing.assert_allclose(ga, ga_want, rtol=1e-12)
        np.testing.assert_allclose(gb, gb_want, rtol=1e-12)
    # forward mode and vmap see the same broadcast
    np.testing.assert_allclose(ft.jacfwd(loss)(a, b), ga_want, rtol=1e-12)
    batched = ft.vmap(f, in_axes=(0, None))(np.stack([a, 2 * a]), b)
    np.testing.assert_allclose(batched, np.stack([want, 2 * want]), rtol=1e-14)


def test_einsum_size_mismatch_is_a_shape_error_naming_einsum():
    def f(a, b):
        return fnp.einsum("ij,jk->ik", a, b)

    with pytest.raises(ft.ShapeError, match=r"einsum.*subscript 'j' has size 2"):
        ft.grad(lambda a: fnp.sum(f(a, np.ones((3, 4)))))(np.ones((2, 2)))
    with pytest.raises(ft.ShapeError, match="collapsing index 'i'"):
        ft.trace(lambda a: fnp.einsum("ii->i", a))(np.ones((1, 3)))


# ---- ft.jacobian / ft.hessian pick reverse mode through a custom_vjp ------------------------

@ft.custom_vjp
def _softclip(x):
    return fnp.tanh(x) * 2.0


_softclip.defvjp(lambda x: (_softclip(x), x),
                 lambda x, g: (g * 2.0 * (1.0 - fnp.tanh(x) ** 2),))


def test_jacobian_uses_reverse_mode_through_a_custom_vjp():
    def f(x):                               # 2 inputs, 3 outputs: forward mode by size
        return fnp.stack([_softclip(x[0]), _softclip(x[1]) * x[0], x[1] ** 2])

    x = np.array([0.3, -0.8])
    t0, t1 = np.tanh(x)
    want = np.array([[2 * (1 - t0 ** 2), 0.0],
                     [2 * t1, x[0] * 2 * (1 - t1 ** 2)],
                     [0.0, 2 * x[1]]])
    np.testing.assert_allclose(ft.jacobian(f)(x), want, rtol=1e-14)
    np.testing.assert_allclose(ft.jit(ft.jacobian(f))(x), want, rtol=1e-14)
    np.testing.assert_allclose(ft.jacrev(f)(x), want, rtol=1e-14)
    # inside control flow too (the custom_vjp call sits in a branch's sub-graph)
    g = lambda x: ft.cond(x[0] > 0, f, lambda x: f(x) * 2.0, x)  # noqa: E731
    np.testing.assert_allclose(ft.jacobian(g)(x), want, rtol=1e-14)
    # forward mode itself says what to do instead
    with pytest.raises(ft.MissingRuleError, match=r"custom_vjp function _softclip.*ft\.jacrev"):
        ft.jacfwd(f)(x)


def test_hessian_through_a_custom_vjp_is_reverse_over_reverse():
    def f(x):
        return fnp.sum(_softclip(x) * x)

    x = np.array([0.3, -0.8, 1.1])
    t = np.tanh(x)
    # d/dx [2 tanh(x) x] = 2 (1 - t^2) x + 2 t;  d2 = -4 t (1 - t^2) x + 4 (1 - t^2)
    want = np.diag(-4 * t * (1 - t ** 2) * x + 4 * (1 - t ** 2))
    np.testing.assert_allclose(ft.hessian(f)(x), want, rtol=1e-13)
    np.testing.assert_allclose(ft.jit(ft.hessian(f))(x), want, rtol=1e-13)


# ---- custom_vjp / custom_jvp: nondiff_argnums, and Python control flow on values -------------

def _halve_until_small(x):
    while x > 1:
        x = x / 2
    return x


@ft.custom_vjp
def _halving(x):
    return _halve_until_small(x)


def _halving_fwd(x):
    y = x
    k = 0
    while y > 1:            # Python control flow on the value, in the forward rule
        y = y / 2
        k += 1
    return y, (2.0 ** -k,)


_halving.defvjp(_halving_fwd, lambda res, g: (g * res[0],))


@ft.custom_jvp
def _halving_j(x):
    return _halve_until_small(x)


@_halving_j.defjvp
def _halving_j_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    y = _halving_j(x)
    return y, t * (y / x)


def test_custom_rules_run_python_control_flow_on_values_like_a_plain_function():
    x = np.array(5.0)                        # 5 -> 2.5 -> 1.25 -> 0.625: slope 1/8
    f = lambda x: _halving(x) * x            # noqa: E731
    plain = lambda x: _halve_until_small(x) * x  # noqa: E731
    want = ft.grad(plain)(x)
    np.testing.assert_allclose(want, 0.625 + 5 / 8)
    for g in (ft.grad(f), ft.jit(ft.grad(f)), ft.grad(ft.checkpoint(f)),
              ft.jit(ft.grad(ft.checkpoint(f)))):
        np.testing.assert_allclose(g(x), want, rtol=1e-15)
    np.testing.assert_allclose(ft.vjp(f, x)[1](np.array(1.0))[0], want)
    np.testing.assert_allclose(ft.grad(ft.grad(f))(x), 2 / 8)
    # custom_jvp: forward mode, linearize (a graph transform), reverse mode
    fj = lambda x: _halving_j(x) * x         # noqa: E731
    np.testing.assert_allclose(ft.jvp(fj, (x,), (np.array(1.0),))[1], want)
    np.testing.assert_allclose(ft.linearize(fj, x)[1](np.array(1.0)), want)
    np.testing.assert_allclose(ft.grad(fj)(x), want)
    np.testing.assert_allclose(ft.grad(ft.checkpoint(fj))(x), want)
    # the imperative facade
    from functrace import autograd
    xa = autograd.attach_grad(np.array(5.0))
    with autograd.record():
        y = _halving(xa) * xa
    y.backward()
    np.testing.assert_allclose(xa.grad, want)


def test_custom_rule_control_flow_where_values_are_unknown_is_a_clear_error():
    # a loop body is traced once for every iteration: no value to decide on, as in JAX
    with pytest.raises(ft.ConcretizationError, match="while x > 1"):
        ft.grad(lambda x: ft.fori_loop(0, 2, lambda i, c: _halving(c) * c, x))(np.array(5.0))


def test_custom_vjp_nondiff_argnums_jax_semantics():
    from functools import partial

    @partial(ft.custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    def app_fwd(f, x):                       # fwd takes every argument, as the function does
        return f(x), x

    def app_bwd(f, x, g):                    # nondiff arguments first; a cotangent for x only
        _, pullback = ft.vjp(f, x)
        return pullback(g)

    app.defvjp(app_fwd, app_bwd)
    x = np.array([0.3, 1.2])
    np.testing.assert_allclose(app(np.sin, x), np.sin(x))
    loss = lambda x: fnp.sum(app(fnp.sin, x) ** 2)    # noqa: E731
    want = 2 * np.sin(x) * np.cos(x)
    np.testing.assert_allclose(ft.grad(loss)(x), want, rtol=1e-15)
    np.testing.assert_allclose(ft.jit(ft.grad(loss))(x), want, rtol=1e-15)
    np.testing.assert_allclose(ft.vmap(ft.grad(lambda x: app(fnp.sin, x) ** 2))(x), want,
                               rtol=1e-15)
    np.testing.assert_allclose(ft.hessian(loss)(x), np.diag(2 * np.cos(2 * x)), rtol=1e-14)


def test_custom_jvp_nondiff_argnums_jax_semantics():
    from functools import partial

    @partial(ft.custom_jvp, nondiff_argnums=(1,))
    def power(x, n):
        y = x
        for _ in range(n - 1):              # n is a plain int: Python uses it freely
            y = y * x
        return y

    @power.defjvp
    def power_jvp(n, primals, tangents):     # nondiff arguments first
        (x,), (t,) = primals, tangents
        return power(x, n), n * power(x, n - 1) * t

    x = np.array([1.5, -0.5])
    np.testing.assert_allclose(ft.jvp(lambda x: power(x, 3), (x,), (np.ones(2),))[1],
                               3 * x ** 2)
    np.testing.assert_allclose(ft.grad(lambda x: fnp.sum(power(x, 4)))(x), 4 * x ** 3)
    np.testing.assert_allclose(ft.jit(ft.grad(lambda x: fnp.sum(power(x, 4))))(x), 4 * x ** 3)
    np.testing.assert_allclose(ft.hessian(lambda x: fnp.sum(power(x, 4)))(x),
                               np.diag(12 * x ** 2))


def test_nondiff_argnums_errors_name_the_fix():
    from functools import partial

    @partial(ft.custom_vjp, nondiff_argnums=(1,))
    def scale(x, s):
        return x * s

    with pytest.raises(TypeError, match=r"bwd\(nondiff, residuals, cotangent\)"):
        scale.defvjp(lambda x, s: (x * s, None), lambda res, g: (g,))
    scale.defvjp(lambda x, s: (x * s, None), lambda s, res, g: (g * s,))
    np.testing.assert_allclose(ft.grad(lambda x: scale(x, 3.0))(1.0), 3.0)
    with pytest.raises(TypeError, match=r"nondiff_argnums.*ordinary argument"):
        ft.grad(lambda s: scale(2.0, s))(3.0)     # s is being differentiated
    with pytest.raises(TypeError, match="called with 1 argument"):
        ft.grad(lambda x: scale(x))(1.0)
    with pytest.raises(TypeError, match="nondiff_argnums must be"):
        ft.custom_jvp(lambda x: x, nondiff_argnums=(-1,))


# ---- graphs with custom rules round-trip through JSON (rules named, never imported) ---------

def test_symbols_with_custom_rules_round_trip_through_json():
    x = np.array([0.5, -2.0])

    def f(x):
        return fnp.sum(_softclip(x) * fnp.sin(x))

    assert _softclip.registered_name == f"{__name__}:_softclip"   # module-level: by default
    for sym in (ft.trace(f)(x), ft.trace(ft.grad(f))(x),
                ft.trace(ft.vmap(lambda x: _softclip(x) * x))(np.ones((3, 2)))):
        back = ft.Symbol.from_json(sym.to_json())
        assert back == sym
        args = [np.ones((3, 2))] if sym.inputs[0].aval.shape == (3, 2) else [x]
        np.testing.assert_array_equal(back(*args), sym(*args))
    back = ft.Symbol.from_json(ft.trace(f)(x).to_json())
    np.testing.assert_allclose(ft.grad(back)(x), ft.grad(f)(x), rtol=1e-15)
    np.testing.assert_allclose(ft.jacobian(back)(x), ft.grad(f)(x), rtol=1e-15)


def test_custom_rules_need_a_name_for_json_and_register_custom_rule_gives_one():
    import functrace.custom_rules as cr

    def make():
        @ft.custom_jvp
        def cube(x):
            return x ** 3

        cube.defjvp(lambda p, t: (cube(p[0]), 3 * p[0] ** 2 * t[0]))
        return cube

    cube = make()                  # defined inside a function: no unique default name
    assert cube.registered_name is None
    sym = ft.trace(lambda x: cube(x) * 2.0)(1.5)
    with pytest.raises(TypeError, match=r"register_custom_rule\('pkg.cube', cube\)"):
        sym.to_json()
    ft.register_custom_rule("tests.porting.cube", cube)
    text = sym.to_json()
    assert "tests.porting.cube" in text
    np.testing.assert_allclose(ft.grad(ft.Symbol.from_json(text))(1.5), 6 * 1.5 ** 2)
    # a process that never registered the name: the graph loads and runs; differentiating
    # it says which rule to register
    del cr._REGISTRY["tests.porting.cube"]
    back = ft.Symbol.from_json(text)
    np.testing.assert_allclose(back(1.5), 2 * 1.5 ** 3)
    with pytest.raises(ft.MissingRuleError, match=r"'tests\.porting\.cube'.*register"):
        ft.grad(back)(1.5)
    assert ft.Symbol.from_json(back.to_json()).to_json() == text   # still named the same


def test_custom_rule_json_names_and_nondiff_values():
    from functools import partial

    @partial(ft.custom_vjp, nondiff_argnums=(1,), name="tests.porting.scaled")
    def scaled(x, k):
        return x * k

    scaled.defvjp(lambda x, k: (x * k, None), lambda k, res, g: (g * k,))
    sym = ft.trace(lambda x: scaled(x, 3))(2.0)
    back = ft.Symbol.from_json(sym.to_json())
    assert back == sym
    np.testing.assert_allclose(ft.grad(back)(2.0), 3.0)
    # a nondiff value JSON cannot hold: the error names the argument and the fix
    app = ft.custom_vjp(lambda f, x: f(x), nondiff_argnums=(0,), name="tests.porting.app")
    app.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (g,))
    with pytest.raises(TypeError, match="argument 0 of <lambda> is in nondiff_argnums"):
        ft.trace(lambda x: app(fnp.sin, x))(2.0).to_json()


# ---- grad of a one-element output of shape (1,) or (1, 1), as autograd ---------------------

def test_grad_of_a_one_element_output_matches_autograd():
    import autograd
    import autograd.numpy as anp

    w = rng.standard_normal((3, 1))
    x = rng.standard_normal(3)

    def make(np_):
        def f(x):              # a (1,)-shaped loss, as x @ W with W (3, 1) gives
            return np_.tanh(x @ w) * 2.0

        def g(x):              # (1, 1)
            return np_.reshape(np_.sum(np_.sin(x)), (1, 1))
        return f, g

    (f, g), (af, ag) = make(fnp), make(anp)
    for mine, theirs in ((f, af), (g, ag)):
        np.testing.assert_allclose(ft.grad(mine)(x), autograd.grad(theirs)(x), rtol=1e-14)
        np.testing.assert_allclose(ft.jit(ft.grad(mine))(x), autograd.grad(theirs)(x),
                                   rtol=1e-14)
        v, gr = ft.value_and_grad(mine)(x)
        assert v.shape == theirs(x).shape           # the value keeps its shape
        np.testing.assert_allclose(gr, autograd.grad(theirs)(x), rtol=1e-14)
    np.testing.assert_allclose(ft.grad(ft.grad(lambda x: g(x)[0, 0] * 1.0))(1.0),
                               -np.sin(1.0))
    np.testing.assert_allclose(ft.grad(lambda x: ft.grad(g)(x)[0])(x)[0], -np.sin(x[0]))


def test_grad_of_a_larger_output_says_its_size():
    with pytest.raises(TypeError, match=r"shape \(2,\) \(size 2\)"):
        ft.grad(lambda x: x * 2.0)(np.ones(2))
    with pytest.raises(TypeError, match=r"shape \(0,\) \(size 0\)"):
        ft.grad(lambda x: x[:0])(np.ones(2))


# ---- day-one extras: eval_shape, block_until_ready, device_put, disable_jit, config ---------

def test_eval_shape_returns_shapes_and_dtypes_without_computing():
    calls = []

    def f(x, p):
        calls.append(1)
        return {"y": fnp.tanh(x @ p["w"]) + p["b"], "n": fnp.sum(x)}

    out = ft.eval_shape(f, ft.ShapeDtype((8, 3), np.float32),
                        {"w": np.ones((3, 5), np.float32), "b": np.zeros(5, np.float32)})
    assert out["y"].shape == (8, 5) and out["y"].dtype == np.float32
    assert out["n"].shape == () and out["n"].dtype == np.float32
    with pytest.raises(ft.ConcretizationError):
        ft.eval_shape(lambda x: x if x.sum() > 0 else -x, np.ones(2))


def test_block_until_ready_and_device_put_on_the_host():
    tree = {"w": np.ones(2), "b": [np.zeros(1)]}
    assert ft.block_until_ready(tree) is tree
    from functrace.backends.cuda.device import simulator_enabled, unavailable_reason
    if not simulator_enabled() and unavailable_reason() is not None:   # a CPU-only machine
        assert ft.device_put(tree) is tree                  # the default device: a no-op
        assert ft.device_put(tree, "cpu")["w"] is tree["w"]
        with pytest.raises(ft.BackendError):
            ft.device_put(tree, "cuda")                     # asked for explicitly: says why


def test_disable_jit_runs_python_directly():
    seen = []

    @ft.jit
    def f(x):
        seen.append(type(x))
        return x * 2.0

    f(np.ones(2))
    assert seen[-1] is not np.ndarray                      # traced
    with ft.disable_jit():
        np.testing.assert_array_equal(f(np.ones(2)), 2.0)
        assert seen[-1] is np.ndarray                      # ran on the values
        assert ft.config.disable_jit
    assert not ft.config.disable_jit


def test_config_update_and_enable_checks(monkeypatch):
    ft.config.update("jax_enable_checks", True)
    try:
        assert ft.config.enable_checks
        from functrace.passes import simplify
        checked = []
        monkeypatch.setattr(simplify, "verify", lambda g: checked.append(g))
        ft.jit(lambda x: fnp.sin(x) * 2.0 + 0.0, backend="numpy")(np.ones(3))
        assert checked, "enable_checks verifies graphs after each simplification round"
    finally:
        ft.config.enable_checks = False
    with pytest.raises(AttributeError, match="no switch"):
        ft.config.update("debug_infs", True)


@pytest.fixture
def debug_nans():
    ft.config.debug_nans = True
    try:
        yield
    finally:
        ft.config.debug_nans = False


def _where_sqrt(x):
    return fnp.sum(fnp.where(x > 0, fnp.sqrt(x), 0.0))


@pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::functrace.FunctraceWarning")
def test_debug_nans_names_the_rule_and_line_of_a_gradient_nan(debug_nans):
    x = np.array([0.0, 4.0])
    for g in (ft.grad(_where_sqrt), ft.jit(ft.grad(_where_sqrt)),
              ft.trace(ft.grad(_where_sqrt))(x)):
        with pytest.raises(FloatingPointError) as info:
            g(x)
        msg = str(info.value)
        assert isinstance(info.value, ft.NaNError)
        assert "mul(0.0, inf)" in msg and "derivative rule of sqrt" in msg, msg
        assert "fnp.where(x > 0, fnp.sqrt(x), 0.0)" in msg         # the user's line
        assert "inf made from finite values came from div" in msg
    ft.config.debug_nans = False
    assert np.isnan(ft.grad(_where_sqrt)(x)[0])          # off: the NaN flows out, as before


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_debug_nans_in_forward_passes_and_not_for_nans_that_flow_in(debug_nans):
    def f(x):
        return fnp.sum(fnp.log(x - 1.0) * 0.0 + x)      # log(-0.5) is NaN

    x = np.array([0.5, 2.0])
    for run in (ft.grad(f), ft.jit(f), ft.vmap(f), lambda x: ft.jvp(f, (x,), (x,))):
        with pytest.raises(ft.NaNError, match=r"log\(-0.5\).*produced a NaN at .*fnp\.log"):
            run(x)
    # a NaN that comes in with the inputs is not any op's doing
    np.testing.assert_array_equal(ft.grad(lambda x: fnp.sum(x * 2.0))(np.array([np.nan])),
                                  [2.0])


# ---- ft.debug.print ---------------------------------------------------------------------

def _printing(x):
    ft.debug.print("x={} s={s} {}", x, "tag", s=fnp.sum(x))
    return fnp.sum(x ** 2)


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_debug_print_eager_grad_jvp(capsys):
    x = np.array([1.0, 2.0])
    _printing(x)
    assert _lines(capsys) == ["x=[1. 2.] s=3.0 tag"]
    np.testing.assert_array_equal(ft.grad(_printing)(x), [2.0, 4.0])
    assert _lines(capsys) == ["x=[1. 2.] s=3.0 tag"]       # the forward pass, once
    ft.jvp(_printing, (x,), (x,))
    assert _lines(capsys) == ["x=[1. 2.] s=3.0 tag"]       # primal values


def test_debug_print_under_vmap_prints_each_example(capsys):
    ft.vmap(_printing)(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert _lines(capsys) == ["x=[1. 2.] s=3.0 tag", "x=[3. 4.] s=7.0 tag"]
    ft.vmap(ft.vmap(lambda x: ft.debug.print("{}", x)))(np.arange(4.0).reshape(2, 2))
    assert _lines(capsys) == ["0.0", "1.0", "2.0", "3.0"]


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_debug_print_under_jit_prints_when_the_compiled_code_runs(capsys, backend):
    f = ft.jit(_printing, backend=backend, eager=True)
    f(np.array([1.0, 2.0]))
    f(np.array([0.0, 5.0]))                                  # no re-trace: printed at run time
    assert _lines(capsys) == ["x=[1. 2.] s=3.0 tag", "x=[0. 5.] s=5.0 tag"]
    g = ft.jit(ft.grad(_printing), backend=backend, eager=True)
    g(np.array([1.0, 1.0]))
    assert _lines(capsys) == ["x=[1. 1.] s=2.0 tag"]
    # inside a branch, twice with equal arguments (never merged), and on constants only
    # (never folded into a constant at trace time)
    h = ft.jit(lambda x: ft.cond(x[0] > 0, lambda x: _printing(x) + _printing(x),
                                 lambda x: x[0] * 0.0, x) + _const_print(), backend=backend)
    h(np.array([1.0, 2.0]))
    assert _lines(capsys) == ["x=[1. 2.] s=3.0 tag"] * 2 + ["const 7"]
    h(np.array([-1.0, 2.0]))
    assert _lines(capsys) == ["const 7"]


def _const_print():
    ft.debug.print("const {}", np.int64(7))
    return 0.0


def test_debug_print_round_trips_through_json(capsys):
    sym = ft.trace(_printing)(np.ones(2))
    _lines(capsys)
    ft.Symbol.from_json(sym.to_json())(np.array([2.0, 2.0]))
    assert _lines(capsys) == ["x=[2. 2.] s=4.0 tag"]
    with pytest.raises(TypeError, match="pytree"):
        ft.grad(lambda x: ft.debug.print("{}", {"x": x}) or fnp.sum(x))(np.ones(2))
