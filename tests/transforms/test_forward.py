"""Forward mode and batching: jvp, linearize, jacfwd, jacrev, hessian, vmap, compositions."""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.errors import ConcretizationError, MissingRuleError
from functrace.test_util import check_grads

rng = np.random.default_rng(0)


def rosen(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def rosen_hessian(x):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n - 1):
        H[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        H[i + 1, i + 1] += 200
        H[i, i + 1] += -400 * x[i]
        H[i + 1, i] += -400 * x[i]
    return H


def test_jvp_matches_vjp_inner_product():
    f = lambda x, W: fnp.tanh(W @ x) * fnp.sum(x)  # noqa: E731
    x, W = rng.standard_normal(4), rng.standard_normal((3, 4))
    v, dW, u = rng.standard_normal(4), rng.standard_normal((3, 4)), rng.standard_normal(3)
    _, tout = ft.jvp(f, (x, W), (v, dW))
    _, pull = ft.vjp(f, x, W)
    gx, gW = pull(u)
    np.testing.assert_allclose(u @ tout, gx @ v + np.sum(gW * dW), rtol=1e-12)


def test_check_grads_fwd_and_rev_to_order_3():
    f = lambda x: fnp.sum(fnp.sin(x) * fnp.exp(-x ** 2) / (1.0 + x ** 2))  # noqa: E731
    check_grads(f, (rng.standard_normal(5),), order=3, modes=("fwd", "rev"))


def test_linearize_reuses_residuals():
    y, f_jvp = ft.linearize(lambda x: fnp.sin(x) * x, np.array([0.5, 1.0]))
    np.testing.assert_allclose(y, np.sin([0.5, 1.0]) * [0.5, 1.0])
    t = np.array([1.0, 2.0])
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(f_jvp(t), (np.cos(x) * x + np.sin(x)) * t)


def test_jacfwd_equals_jacrev():
    def g(x, y):
        return {"a": fnp.sin(x) * y[0], "b": fnp.stack([fnp.sum(x * y[1:]), fnp.prod(y)])}
    x, y = rng.standard_normal(3), rng.standard_normal(4)
    Jf = ft.jacfwd(g, argnums=(0, 1))(x, y)
    Jr = ft.jacrev(g, argnums=(0, 1))(x, y)
    for k in ("a", "b"):
        for i in range(2):
            np.testing.assert_allclose(Jf[k][i], Jr[k][i], rtol=1e-12, atol=1e-14)
    assert Jf["a"][0].shape == (3, 3) and Jf["b"][1].shape == (2, 4)


def test_hessian_is_forward_over_reverse_and_matches_analytic():
    x = rng.uniform(-1, 1, 7)
    np.testing.assert_allclose(ft.hessian(rosen)(x), rosen_hessian(x), rtol=1e-12, atol=1e-9)
    # one batched graph: its size does not grow with n (no loop over rows). Sizes above the
    # constant-folding threshold (64 elements) so folding treats both alike.
    n_a = len(ft.trace(ft.hessian(rosen))(rng.uniform(-1, 1, 70)).nodes)
    n_b = len(ft.trace(ft.hessian(rosen))(rng.uniform(-1, 1, 300)).nodes)
    assert n_a == n_b


@pytest.mark.parametrize("chunk", [1, 3, 7, 100])
def test_chunked_jacobians(chunk):
    x = rng.uniform(-1, 1, 7)
    np.testing.assert_allclose(ft.hessian(rosen, chunk_size=chunk)(x), rosen_hessian(x),
                               rtol=1e-12, atol=1e-9)
    f = lambda x: fnp.outer(x, fnp.sin(x))  # noqa: E731
    np.testing.assert_allclose(ft.jacrev(f, chunk_size=chunk)(x), ft.jacfwd(f)(x), atol=1e-14)


def test_jacobian_picks_a_mode_and_agrees():
    wide = lambda x: fnp.sum(x ** 2)         # noqa: E731  (many inputs, one output: rev)
    tall = lambda x: fnp.stack([x * 2.0, x ** 2, fnp.sin(x)])  # noqa: E731
    x = rng.standard_normal(4)
    np.testing.assert_allclose(ft.jacobian(wide)(x), 2 * x)
    np.testing.assert_allclose(ft.jacobian(tall)(1.5), [2.0, 3.0, np.cos(1.5)])


def test_vmap_matches_loop_with_axes_mixes():
    f = lambda x, w: fnp.tanh(x @ w + fnp.sum(x))  # noqa: E731
    X, W = rng.standard_normal((6, 3)), rng.standard_normal((3, 2))
    np.testing.assert_allclose(ft.vmap(f, in_axes=(0, None))(X, W), [f(x, W) for x in X],
                               rtol=1e-13)
    XT = X.T.copy()
    np.testing.assert_allclose(ft.vmap(f, in_axes=(1, None))(XT, W), [f(x, W) for x in X],
                               rtol=1e-13)
    Ws = rng.standard_normal((6, 3, 2))
    np.testing.assert_allclose(ft.vmap(f)(X, Ws), [f(x, w) for x, w in zip(X, Ws)], rtol=1e-13)
    out = ft.vmap(f, in_axes=(0, None), out_axes=1)(X, W)
    assert out.shape == (2, 6)


def test_vmap_pytrees_and_nested():
    def f(p, x):
        return {"y": p["a"] * x, "s": fnp.sum(p["b"] * x)}
    p = {"a": rng.standard_normal(3), "b": rng.standard_normal((4, 3))}
    X = rng.standard_normal((4, 3))
    out = ft.vmap(f, in_axes=({"a": None, "b": 0}, 0))(p, X)
    np.testing.assert_allclose(out["s"], [np.sum(b * x) for b, x in zip(p["b"], X)])
    np.testing.assert_allclose(out["y"], p["a"] * X)
    M = rng.standard_normal((3, 4, 5))
    nested = ft.vmap(ft.vmap(lambda v: fnp.sum(v ** 2), in_axes=1), in_axes=0)(M)
    np.testing.assert_allclose(nested, np.sum(M ** 2, axis=1))   # columns of each M[k]


def test_vmap_indexing_and_scatter():
    X = rng.standard_normal((5, 6))
    idx = np.array([[0, 2], [1, 1], [5, 0], [3, 3], [4, 1]])
    got = ft.vmap(lambda x, i: x[i] * 2.0)(X, idx)
    np.testing.assert_allclose(got, [x[i] * 2.0 for x, i in zip(X, idx)])
    got = ft.vmap(lambda x: x[1:4:2])(X)
    np.testing.assert_allclose(got, X[:, 1:4:2])
    got = ft.vmap(lambda x, i: fnp.at(x)[i].add(1.0))(X, idx)
    ref = []
    for x, i in zip(X, idx):
        r = x.copy()
        np.add.at(r, i, 1.0)
        ref.append(r)
    np.testing.assert_allclose(got, ref)
    got = ft.vmap(lambda i: fnp.at(X)[i].get(), in_axes=0)(np.array([1, 3]))
    np.testing.assert_allclose(got, X[[1, 3]])


def test_per_example_gradients():
    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)
    w = rng.standard_normal((4, 2))
    X = rng.standard_normal((8, 4))
    per = ft.vmap(ft.grad(loss), in_axes=(None, 0))(w, X)
    ref = [ft.grad(loss)(w, x) for x in X]
    np.testing.assert_allclose(per, ref, rtol=1e-12)
    assert per.shape == (8, 4, 2)


def test_grad_of_vmap_and_vmap_of_grad_compose():
    f = lambda x: fnp.sum(fnp.sin(x) ** 2)  # noqa: E731
    X = rng.standard_normal((3, 4))
    g1 = ft.grad(lambda X: fnp.sum(ft.vmap(f)(X)))(X)
    g2 = ft.vmap(ft.grad(f))(X)
    np.testing.assert_allclose(g1, g2, rtol=1e-13)
    np.testing.assert_allclose(g1, 2 * np.sin(X) * np.cos(X), rtol=1e-13)


def test_vmap_errors():
    with pytest.raises(ValueError, match="inconsistent sizes"):
        ft.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ConcretizationError):
        ft.vmap(lambda x: x if fnp.sum(x) > 0 else -x)(np.ones((2, 3)))


def test_vmap_missing_rule_is_an_error():
    from functrace.core import AVal, Op, registry
    from functrace.tracing import bind
    op = Op("test_nobatch", lambda x: AVal(x.shape, x.dtype), lambda x: x + 0)
    try:
        with pytest.raises(MissingRuleError, match="test_nobatch"):
            ft.vmap(lambda x: bind(op, x))(np.ones((2, 3)))
    finally:
        del registry["test_nobatch"]


def test_jvp_of_integer_inputs_and_dtype():
    y, t = ft.jvp(lambda x, n: x * n, (np.ones(2, np.float32), np.array([2, 3])),
                  (np.ones(2, np.float32), np.zeros(2, np.int64)))
    assert t.dtype == y.dtype == np.float64      # numpy promotes f32 * i64 to f64
    np.testing.assert_array_equal(t, [2.0, 3.0])
    _, t32 = ft.jvp(lambda x: x * 2.0, (np.ones(2, np.float32),), (np.ones(2, np.float32),))
    assert t32.dtype == np.float32


def test_jvp_when_only_the_0d_operand_has_a_tangent():
    """Elementwise ops broadcast 0-d operands; when only that operand depends on the input
    (x constant, mean(w) traced) the output's tangent is the 0-d tangent broadcast (found by
    the random loop programs of tests/transforms/test_roll.py)."""
    x, w = np.ones(4), np.arange(4.0)
    for f in (lambda w: x * 2.0 + fnp.mean(w), lambda w: x - fnp.mean(w),
              lambda w: fnp.mean(w) - x, lambda w: fnp.maximum(x, fnp.sum(w))):
        _, t = ft.jvp(f, (w,), (w,))
        eps = 1e-6
        fd = (f(w + eps * w) - f(w - eps * w)) / (2 * eps)
        assert t.shape == (4,)
        np.testing.assert_allclose(t, fd, rtol=1e-6)
        np.testing.assert_allclose(ft.jacfwd(f)(w), ft.jacrev(f)(w), rtol=1e-12)


def test_hessian_has_aux_returns_the_aux_and_does_not_differentiate_it():
    f = lambda x: (fnp.sum(x ** 3), {"s": fnp.sum(x)})  # noqa: E731
    x = np.array([1.0, 2.0])
    H, aux = ft.hessian(f, has_aux=True)(x)
    np.testing.assert_allclose(H, np.diag(6 * x))
    assert float(aux["s"]) == 3.0
    Hj, auxj = ft.jit(ft.hessian(f, has_aux=True))(x)
    np.testing.assert_allclose(Hj, H)
    assert float(auxj["s"]) == 3.0


# --------------------------------------------------------------------------------------------
# holomorphic=True: the complex derivative f'(z), as JAX; complex without it is a TypeError
# --------------------------------------------------------------------------------------------

_HOLO = {
    "z**3": (lambda z: z ** 3, lambda z: 3 * z ** 2, lambda z: 6 * z),
    "sin": (lambda z: fnp.sin(z), np.cos, lambda z: -np.sin(z)),
    "exp(z)*z": (lambda z: fnp.exp(z) * z, lambda z: np.exp(z) * (1 + z),
                 lambda z: np.exp(z) * (2 + z)),
}


@pytest.mark.parametrize("name", sorted(_HOLO))
@pytest.mark.parametrize("z", [0.3 + 0.7j, -1.1 + 0.2j, 2.0 - 1.5j])
def test_holomorphic_derivatives_are_f_prime_of_z(name, z):
    f, d1, d2 = _HOLO[name]
    z = np.complex128(z)
    for tr in (ft.grad, ft.jacrev, ft.jacfwd, ft.jacobian):
        np.testing.assert_allclose(tr(f, holomorphic=True)(z), d1(z), rtol=1e-12,
                                   err_msg=tr.__name__)
    np.testing.assert_allclose(ft.hessian(f, holomorphic=True)(z), d2(z), rtol=1e-12)
    # a vector of points: the Jacobian is diagonal, with f'(z_k) on it
    zs = np.array([z, 2 * z, -z])
    vf = lambda v: f(v)  # noqa: E731
    for tr in (ft.jacrev, ft.jacfwd):
        np.testing.assert_allclose(tr(vf, holomorphic=True)(zs), np.diag(d1(zs)), rtol=1e-12)


def test_complex_without_holomorphic_is_a_type_error_with_a_fix():
    z = np.complex128(0.3 + 0.7j)
    for tr in (ft.jacrev, ft.jacfwd, ft.jacobian, ft.hessian):
        with pytest.raises(TypeError, match="holomorphic=True"):
            tr(lambda z: z ** 3)(z)
    with pytest.raises(TypeError, match="holomorphic=True"):
        ft.grad(lambda z: z ** 3)(z)
    with pytest.raises(TypeError, match="holomorphic=True"):
        ft.jacrev(lambda x: x * 1j)(np.ones(2))
    # holomorphic=True needs complex inputs and outputs
    with pytest.raises(TypeError, match="holomorphic=True"):
        ft.grad(lambda x: x ** 2, holomorphic=True)(1.5)
    with pytest.raises(TypeError, match="holomorphic=True"):
        ft.jacrev(lambda z: fnp.real(z), holomorphic=True)(z)
    # what stays allowed: a real-valued function of complex input under grad (JAX's
    # convention, docs/numerics.md), and jacfwd of a real input with complex outputs
    assert ft.grad(lambda z: fnp.real(z * fnp.conj(z)))(1.0 + 1.0j) == 2 - 2j
    np.testing.assert_allclose(ft.jacfwd(lambda x: x * 1j)(np.ones(2)), np.eye(2) * 1j)
