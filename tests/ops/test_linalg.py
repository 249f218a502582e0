"""Tests for functrace.ops.linalg (primitives and their rules) and functrace.numpy.linalg.

Layers checked: eager calls are numpy's; traced graphs reproduce the eager values (and result
types); reverse-mode gradients match central differences *of numpy's own eager function*, to
second order for the factorizations; the jvp rules match central differences and are the
transposes of the vjp rules (dot-product test, real and complex); float32 stays float32; and the
docs/numerics.md conventions (degenerate spectra, norm of the zero vector).
"""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace import ops as L

LA = fnp.linalg


def _rng(seed=0):
    return np.random.default_rng(seed)


def randn(shape, dtype=np.float64, seed=0):
    r = _rng(seed)
    x = r.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * r.standard_normal(shape)
    return x.astype(dtype)


def general(n, batch=(), dtype=np.float64, seed=0):
    """A well-conditioned general square matrix (stack)."""
    return (randn((*batch, n, n), dtype, seed) + 2.5 * n ** 0.5 * np.eye(n)).astype(dtype)


def spd(n, batch=(), dtype=np.float64, seed=0):
    r = randn((*batch, n, n), dtype, seed)
    return (r @ np.conj(np.swapaxes(r, -1, -2)) + n * np.eye(n)).astype(dtype)


def sym(n, batch=(), dtype=np.float64, seed=0):
    r = randn((*batch, n, n), dtype, seed)
    return ((r + np.conj(np.swapaxes(r, -1, -2))) / 2).astype(dtype)


def traced(f, *args):
    return ft.trace(f)(*args)(*args)


def assert_tree_close(a, b, rtol=1e-10, atol=1e-12):
    if isinstance(a, tuple):
        assert type(a) is type(b)
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=False):
            assert_tree_close(x, y, rtol, atol)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def check_grad(f, x, *, eps=1e-6, rtol=1e-6, atol=1e-8, n_dirs=2, seed=1):
    """ft.grad(f)(x) against central differences of ``f`` (run eagerly, i.e. numpy) along
    random directions; complex inputs use the package's pairing Re(sum(g * dx))."""
    g = ft.grad(f)(x)
    assert g.shape == np.shape(x) and g.dtype == np.asarray(x).dtype
    assert np.all(np.isfinite(g))
    for k in range(n_dirs):
        d = randn(np.shape(x), np.asarray(x).dtype, seed + k)
        fd = (float(f(x + eps * d)) - float(f(x - eps * d))) / (2 * eps)
        an = float(np.real(np.sum(g * d)))
        assert abs(fd - an) <= atol + rtol * abs(fd), (fd, an)
    return g


def check_grad2(f, x, seed=3, rtol=1e-5):
    """Second order: the gradient of <grad f(x), V> against central differences."""
    V = randn(np.shape(x), np.asarray(x).dtype, seed)

    def h(a):
        return fnp.real(fnp.sum(ft.grad(f)(a) * V))
    return check_grad(h, x, rtol=rtol, atol=1e-7, eps=1e-5)


# --------------------------------------------------------------------------------------------
# eager == numpy, traced == eager
# --------------------------------------------------------------------------------------------

A4 = general(4)
S4 = spd(4)
B4 = randn((4, 2), seed=5)
Ab = general(3, (2,), seed=2)
Sb = spd(3, (2,), seed=2)
T53 = randn((5, 3), seed=7)
W35 = randn((3, 5), seed=8)
C3 = general(3, dtype=np.complex128, seed=4)
H3 = spd(3, dtype=np.complex128, seed=4)

CASES = [
    ("inv", LA.inv, (A4,)),
    ("inv_batched", LA.inv, (Ab,)),
    ("inv_int", LA.inv, (np.array([[2, 1], [1, 3]]),)),
    ("inv_f32", LA.inv, (A4.astype(np.float32),)),
    ("inv_c", LA.inv, (C3,)),
    ("solve_mat", LA.solve, (A4, B4)),
    ("solve_vec", LA.solve, (A4, B4[:, 0])),
    ("solve_vec_batched_a", LA.solve, (Ab, np.ones(3))),
    ("solve_bcast", LA.solve, (Ab, randn((3, 2)))),
    ("solve_mixed", LA.solve, (A4.astype(np.float32), B4)),
    ("det", LA.det, (A4,)),
    ("det_batched", LA.det, (Ab,)),
    ("det_c", LA.det, (C3,)),
    ("slogdet", LA.slogdet, (A4,)),
    ("slogdet_batched_f32", LA.slogdet, (Ab.astype(np.float32),)),
    ("slogdet_c", LA.slogdet, (C3,)),
    ("cholesky", LA.cholesky, (S4,)),
    ("cholesky_nonsym", LA.cholesky, (S4 + np.triu(randn((4, 4)), 1),)),
    ("cholesky_upper", lambda a: LA.cholesky(a, upper=True), (S4 + np.tril(A4, -1),)),
    ("cholesky_batched", LA.cholesky, (Sb,)),
    ("cholesky_c", LA.cholesky, (H3,)),
    ("eigh", LA.eigh, (sym(4),)),
    ("eigh_nonsym", LA.eigh, (A4,)),
    ("eigh_U", lambda a: LA.eigh(a, "U"), (A4,)),
    ("eigh_symmetrize", lambda a: LA.eigh(a, symmetrize_input=True), (A4,)),
    ("eigh_batched", LA.eigh, (Sb,)),
    ("eigh_c", LA.eigh, (H3,)),
    ("eigvalsh", LA.eigvalsh, (A4,)),
    ("eigvalsh_U", lambda a: LA.eigvalsh(a, UPLO="U"), (A4,)),
    ("svd_square_full", LA.svd, (A4,)),
    ("svd_tall", lambda a: LA.svd(a, full_matrices=False), (T53,)),
    ("svd_wide", lambda a: LA.svd(a, full_matrices=False), (W35,)),
    ("svd_batched", lambda a: LA.svd(a, full_matrices=False), (Ab,)),
    ("svd_novecs", lambda a: LA.svd(a, compute_uv=False), (T53,)),
    ("svd_hermitian", lambda a: LA.svd(a, hermitian=True), (sym(4),)),
    ("svd_hermitian_novecs", lambda a: LA.svd(a, compute_uv=False, hermitian=True), (sym(4),)),
    ("svd_c", lambda a: LA.svd(a, full_matrices=False), (C3,)),
    ("svdvals", LA.svdvals, (W35,)),
    ("qr", LA.qr, (T53,)),
    ("qr_wide", LA.qr, (W35,)),
    ("qr_r", lambda a: LA.qr(a, mode="r"), (T53,)),
    ("qr_complete_wide", lambda a: LA.qr(a, mode="complete"), (W35,)),
    ("qr_batched", LA.qr, (Ab,)),
    ("qr_c", LA.qr, (C3,)),
    ("pinv", LA.pinv, (T53,)),
    ("pinv_rankdef", LA.pinv, (np.outer(np.arange(1.0, 4.0), np.ones(3)),)),
    ("pinv_rtol", lambda a: LA.pinv(a, rtol=None), (W35,)),
    ("pinv_c", LA.pinv, (C3,)),
    ("matrix_power_0", lambda a: LA.matrix_power(a, 0), (Ab,)),
    ("matrix_power_1", lambda a: LA.matrix_power(a, 1), (A4,)),
    ("matrix_power_5", lambda a: LA.matrix_power(a, 5), (A4 / 4,)),
    ("matrix_power_m3", lambda a: LA.matrix_power(a, -3), (A4,)),
    ("matrix_power_int", lambda a: LA.matrix_power(a, 6), (np.array([[1, 1], [1, 0]]),)),
    ("multi_dot3", lambda a, b, c: LA.multi_dot([a, b, c]), (T53, A4[:3, :3], W35)),
    ("multi_dot4_vecs", lambda a, b, c, d: LA.multi_dot([a, b, c, d]),
     (np.ones(5), T53, W35, np.ones(5))),
    ("matrix_rank", LA.matrix_rank, (np.outer(np.arange(1.0, 4.0), np.ones(3)),)),
    ("matrix_rank_batched", LA.matrix_rank, (Ab,)),
    ("matrix_rank_vec", LA.matrix_rank, (np.zeros(3),)),
    ("cond", LA.cond, (A4,)),
    ("cond_1", lambda a: LA.cond(a, 1), (A4,)),
    ("cond_fro", lambda a: LA.cond(a, "fro"), (A4,)),
    ("trace", LA.trace, (Ab,)),
    ("diagonal", lambda a: LA.diagonal(a, offset=1), (Ab,)),
    ("outer", LA.outer, (np.ones(2), np.arange(3.0))),
    ("matmul", LA.matmul, (Ab, Ab)),
    ("tensordot", LA.tensordot, (Ab, A4[:3, :3])),
    ("vecdot", LA.vecdot, (T53, np.ones(3))),
    ("cross", LA.cross, (T53, np.arange(3.0))),
    ("matrix_transpose", LA.matrix_transpose, (Ab,)),
    ("tensorinv", lambda a: LA.tensorinv(a, ind=1), (A4.reshape(4, 2, 2),)),
    ("tensorsolve", LA.tensorsolve, (A4.reshape(2, 2, 2, 2), np.ones((2, 2)))),
    ("vector_norm", LA.vector_norm, (Ab,)),
    ("vector_norm_axes", lambda a: LA.vector_norm(a, axis=(0, 2), keepdims=True, ord=3),
     (Ab,)),
    ("vector_norm_inf", lambda a: LA.vector_norm(a, axis=1, ord=np.inf), (Ab,)),
    ("matrix_norm", LA.matrix_norm, (Ab,)),
    ("matrix_norm_nuc", lambda a: LA.matrix_norm(a, ord="nuc", keepdims=True), (Ab,)),
]

VEC_ORDS = [None, 2, 1, -1, 0, np.inf, -np.inf, 3, 0.5, -2.5]
MAT_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]
for o in VEC_ORDS:
    CASES.append((f"norm_vec_{o}", (lambda o: lambda x: LA.norm(x, o))(o), (randn(5),)))
    CASES.append((f"norm_vec_axis_{o}",
                  (lambda o: lambda x: LA.norm(x, o, axis=-1, keepdims=True))(o), (Ab,)))
for o in MAT_ORDS:
    CASES.append((f"norm_mat_{o}", (lambda o: lambda x: LA.norm(x, o))(o), (T53,)))
    CASES.append((f"norm_mat_axes_{o}",
                  (lambda o: lambda x: LA.norm(x, o, axis=(2, 0), keepdims=True))(o), (Ab,)))
CASES += [
    ("norm_none_3d", LA.norm, (Ab,)),
    ("norm_int", LA.norm, (np.arange(4),)),
    ("norm_c", lambda x: LA.norm(x, 1), (C3[0],)),
    ("norm_c_fro", LA.norm, (C3,)),
    ("norm_f32_nuc", lambda x: LA.norm(x, "nuc"), (T53.astype(np.float32),)),
]


def _np_version(name, fn, args):
    """The same call made on numpy directly (for the eager == numpy check)."""
    return fn(*args)


@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_traced_equals_eager(name, fn, args):
    eager = fn(*args)
    out = traced(fn, *args)
    tol = 1e-4 if any(np.asarray(a).dtype in (np.float32, np.complex64) for a in args) else 1e-9
    assert_tree_close(out, eager, rtol=tol, atol=tol)


EAGER = [
    (LA.inv, np.linalg.inv, (A4,)), (LA.solve, np.linalg.solve, (A4, B4)),
    (LA.det, np.linalg.det, (Ab,)), (LA.slogdet, np.linalg.slogdet, (A4,)),
    (LA.cholesky, np.linalg.cholesky, (S4,)), (LA.eigh, np.linalg.eigh, (A4,)),
    (LA.eigvalsh, np.linalg.eigvalsh, (A4,)), (LA.svd, np.linalg.svd, (T53,)),
    (LA.svdvals, np.linalg.svdvals, (T53,)), (LA.qr, np.linalg.qr, (T53,)),
    (LA.pinv, np.linalg.pinv, (T53,)), (LA.norm, np.linalg.norm, (Ab,)),
    (LA.matrix_rank, np.linalg.matrix_rank, (A4,)), (LA.cond, np.linalg.cond, (A4,)),
    (LA.trace, np.linalg.trace, (Ab,)), (LA.outer, np.linalg.outer, (np.ones(2), np.ones(3))),
    (LA.matmul, np.linalg.matmul, (A4, A4)), (LA.vector_norm, np.linalg.vector_norm, (Ab,)),
    (LA.matrix_norm, np.linalg.matrix_norm, (Ab,)),
    (LA.multi_dot, np.linalg.multi_dot, ([T53, A4[:3, :3], W35],)),
    (lambda a: LA.matrix_power(a, 3), lambda a: np.linalg.matrix_power(a, 3), (A4,)),
    (LA.eig, np.linalg.eig, (A4,)), (LA.lstsq, np.linalg.lstsq, (T53, np.ones(5))),
]


@pytest.mark.parametrize("i", range(len(EAGER)))
def test_eager_is_numpy(i):
    ours, theirs, args = EAGER[i]
    a, b = ours(*args), theirs(*args)
    assert type(a) is type(b)
    a_t = a if isinstance(a, tuple) else (a,)
    b_t = b if isinstance(b, tuple) else (b,)
    for x, y in zip(a_t, b_t, strict=True):
        np.testing.assert_array_equal(x, y)
        assert np.asarray(x).dtype == np.asarray(y).dtype


def test_graph_records_one_primitive():
    sym_ = ft.trace(LA.inv)(A4)
    assert [e.op.name for e in sym_.nodes] == ["inv"]
    sym_ = ft.trace(lambda a, b: LA.solve(a, b))(A4, B4)
    assert [e.op.name for e in sym_.nodes] == ["solve"]


def test_abstract_tracing():
    spec = ft.ShapeDtype((2, 3, 3), np.float32)
    s = ft.trace(lambda a: (LA.slogdet(a).logabsdet, LA.matrix_rank(a), LA.svdvals(a)))(spec)
    avals = [o.aval for o in s.outputs]
    assert str(avals[0]) == "f32[2]" and avals[1].dtype == np.intp and str(avals[2]) == "f32[2,3]"


def test_errors():
    with pytest.raises(np.linalg.LinAlgError):
        ft.trace(LA.inv)(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError):
        ft.trace(LA.det)(np.ones(3))
    with pytest.raises(NotImplementedError):
        ft.trace(LA.svd)(T53)          # full_matrices=True, not square
    with pytest.raises(TypeError):
        ft.trace(LA.inv)(np.eye(2, dtype=np.float16))
    with pytest.raises(ValueError):
        ft.trace(lambda x: LA.norm(x, "fro"))(np.ones(3))
    with pytest.raises(ValueError):
        ft.trace(lambda x: LA.norm(x, 3))(np.ones((2, 2)))


# --------------------------------------------------------------------------------------------
# the rules themselves: jvp vs central differences, jvp/vjp dot-product test
# --------------------------------------------------------------------------------------------


def _outs(op, args, params):
    r = op.impl(*args, **params)
    return tuple(r) if op.multiple_results else (r,)


RULE_CASES = [
    ("inv", L.inv_p, lambda dt: [general(4, (2,), dt)], {}, ()),
    ("solve", L.solve_p, lambda dt: [general(4, (2,), dt), randn((2, 4, 3), dt, 3)], {}, ()),
    ("trisolve_L", L.triangular_solve_p, lambda dt: [general(4, (2,), dt), randn((2, 4, 3), dt)],
     {"lower": True, "transpose_a": False}, ()),
    ("trisolve_UT", L.triangular_solve_p,
     lambda dt: [general(4, (2,), dt), randn((2, 4, 3), dt)],
     {"lower": False, "transpose_a": True}, ()),
    ("det", L.det_p, lambda dt: [general(4, (2,), dt)], {}, ()),
    ("slogdet", L.slogdet_p, lambda dt: [general(4, (2,), dt)], {}, ()),
    ("cholesky", L.cholesky_p, lambda dt: [spd(4, (2,), dt)], {}, ()),
    ("eigh", L.eigh_p, lambda dt: [randn((2, 4, 4), dt)], {}, "v"),
    ("svd_sq", L.svd_p, lambda dt: [randn((2, 4, 4), dt)], {"compute_uv": True}, "uv"),
    ("svd_tall", L.svd_p, lambda dt: [randn((5, 3), dt)], {"compute_uv": True}, "uv"),
    ("svd_wide", L.svd_p, lambda dt: [randn((3, 5), dt)], {"compute_uv": True}, "uv"),
    ("svd_s", L.svd_p, lambda dt: [randn((2, 3, 5), dt)], {"compute_uv": False}, ()),
    ("qr_tall", L.qr_p, lambda dt: [randn((2, 5, 3), dt)], {}, ()),
    ("qr_sq", L.qr_p, lambda dt: [randn((4, 4), dt)], {}, ()),
    ("qr_wide", L.qr_p, lambda dt: [randn((3, 5), dt)], {}, ()),
]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("name,op,make,params,gauge", RULE_CASES,
                         ids=[c[0] for c in RULE_CASES])
def test_rules_jvp_fd_and_transpose(name, op, make, params, gauge, dtype):
    args = make(dtype)
    outs = _outs(op, args, params)
    tans = [randn(a.shape, a.dtype, 11 + i) for i, a in enumerate(args)]
    jv = op.jvp(tuple(args), tuple(tans), outs, **params)
    eps = 1e-6
    plus = _outs(op, [a + eps * t for a, t in zip(args, tans, strict=False)], params)
    minus = _outs(op, [a - eps * t for a, t in zip(args, tans, strict=False)], params)
    # outputs whose phase/sign is a gauge are skipped for complex inputs (eigenvectors of a
    # complex matrix are defined up to a phase; LAPACK's choice is not what a rule assumes)
    skip = set()
    if dtype == np.complex128 and gauge == "v":
        skip = {1}
    if dtype == np.complex128 and gauge == "uv":
        skip = {0, 2}
    for i, (j, p, m) in enumerate(zip(jv, plus, minus, strict=False)):
        fd = (np.asarray(p) - np.asarray(m)) / (2 * eps)
        if j is None:
            np.testing.assert_allclose(fd, 0, atol=1e-7)
        elif i not in skip:
            np.testing.assert_allclose(np.asarray(j), fd, rtol=1e-6, atol=1e-7)
    cts = [None if i in skip else randn(np.shape(o), np.asarray(o).dtype, 21 + i)
           for i, o in enumerate(outs)]
    vj = op.vjp(tuple(cts), tuple(args), outs, **params)
    lhs = sum(np.real(np.sum(c * np.asarray(j))) for c, j in zip(cts, jv, strict=False)
              if c is not None and j is not None)
    rhs = sum(np.real(np.sum(np.asarray(v) * t)) for v, t in zip(vj, tans, strict=False)
              if v is not None)
    assert abs(lhs - rhs) <= 1e-10 * (1 + abs(lhs))


def test_rules_with_no_cotangent():
    a = randn((3, 3))
    w, v = L.eigh_p.impl(a)
    assert L.eigh_p.vjp((None, None), (a,), (w, v)) == (None,)
    assert L.qr_p.vjp((None, None), (a,), L.qr_p.impl(a)) == (None,)
    assert L.inv_p.jvp((a,), (None,), (a,)) == (None,)


# --------------------------------------------------------------------------------------------
# gradients against central differences of numpy's function (float64)
# --------------------------------------------------------------------------------------------

W4 = randn((4, 4), seed=9)
# cholesky/eigh default to the symmetric gradient (docs/numerics.md); central differences of
# numpy's function along arbitrary directions check the exact one, gradient="triangle"
TRI = "triangle"
W53 = randn((5, 3), seed=9)


GRAD_CASES = [
    ("inv", lambda a: fnp.sum(LA.inv(a) * W4), A4),
    ("inv_batched", lambda a: fnp.sum(LA.inv(a) ** 2), Ab),
    ("solve_a", lambda a: fnp.sum(LA.solve(a, B4) ** 2), A4),
    ("solve_b", lambda b: fnp.sum(LA.solve(A4, b) * B4), B4),
    ("solve_vec_b", lambda b: fnp.sum(LA.solve(Ab, b) ** 2), np.ones(3)),
    ("solve_bcast_a", lambda a: fnp.sum(LA.solve(a, randn((2, 3, 2), seed=4)) ** 2), A4[:3, :3]),
    ("det", LA.det, A4),
    ("det_batched", lambda a: fnp.sum(LA.det(a) ** 2), Ab),
    ("slogdet", lambda a: LA.slogdet(a)[1], A4),
    ("slogdet_sign", lambda a: LA.slogdet(a)[0] * LA.slogdet(a)[1], -A4),
    ("cholesky", lambda a: fnp.sum(LA.cholesky(a, gradient=TRI) * W4), S4),
    ("cholesky_upper", lambda a: fnp.sum(LA.cholesky(a, upper=True, gradient=TRI) * W4), S4),
    ("cholesky_batched",
     lambda a: fnp.sum(fnp.log(fnp.diagonal(LA.cholesky(a, gradient=TRI), 0, -2, -1))), Sb),
    ("eigh_w", lambda a: fnp.sum(LA.eigh(a, gradient=TRI)[0] * np.arange(1.0, 5.0)), A4),
    ("eigh_v", lambda a: fnp.sum(LA.eigh(a, gradient=TRI)[1] ** 2 * W4), A4),
    ("eigh_U", lambda a: fnp.sum(LA.eigh(a, "U", gradient=TRI)[1] ** 2 * W4)
     + LA.eigh(a, "U", gradient=TRI)[0][0], A4),
    ("eigh_sym", lambda a: fnp.sum(LA.eigh(a, symmetrize_input=True)[1] ** 2 * W4), A4),
    ("eigvalsh_batched", lambda a: fnp.sum(LA.eigvalsh(a, gradient=TRI) ** 3), Sb),
    ("svd_s", lambda a: fnp.sum(LA.svd(a, compute_uv=False) * np.arange(1.0, 4.0)), T53),
    ("svd_uv_tall", lambda a: fnp.sum(fnp.matmul(*LA.svd(a, full_matrices=False)[::2]) * W53)
     + fnp.sum(LA.svd(a, full_matrices=False)[0] ** 2 * W53), T53),
    ("svd_uv_wide", lambda a: fnp.sum(LA.svd(a, full_matrices=False)[2] ** 2 * W53.T), W35),
    ("svd_full_square", lambda a: fnp.sum(LA.svd(a)[0] ** 2 * W4), A4),
    ("svdvals", lambda a: fnp.sum(LA.svdvals(a) ** 2), Ab),
    ("qr_tall", lambda a: fnp.sum(LA.qr(a)[0] * W53) + fnp.sum(LA.qr(a)[1] ** 2), T53),
    ("qr_wide", lambda a: fnp.sum(LA.qr(a)[0] * W4[:3, :3]) + fnp.sum(LA.qr(a)[1] * W53.T),
     W35),
    ("qr_r_batched", lambda a: fnp.sum(LA.qr(a, mode="r") ** 2 * W4[:3, :3]), Ab),
    ("pinv", lambda a: fnp.sum(LA.pinv(a) * W53.T), T53),
    ("matrix_power", lambda a: fnp.sum(LA.matrix_power(a, 5) * W4), A4 / 4),
    ("matrix_power_neg", lambda a: fnp.sum(LA.matrix_power(a, -2) * W4), A4),
    ("multi_dot", lambda a: LA.multi_dot([np.ones(5), a, W35, np.ones(5)]), T53),
    ("cond", LA.cond, A4),
    ("cond_fro", lambda a: LA.cond(a, "fro"), A4),
    ("trace", lambda a: fnp.sum(LA.trace(a) ** 2), Ab),
    ("tensorinv", lambda a: fnp.sum(LA.tensorinv(a, ind=1) ** 2), A4.reshape(4, 2, 2)),
    ("vector_norm_axes", lambda a: fnp.sum(LA.vector_norm(a, axis=(0, 2), ord=3)), Ab),
    ("matrix_norm_nuc", lambda a: fnp.sum(LA.matrix_norm(a, ord="nuc")), Ab),
]
for o in VEC_ORDS:
    if o != 0:
        GRAD_CASES.append((f"norm_vec_{o}", (lambda o: lambda x: LA.norm(x, o))(o),
                           randn(5, seed=12)))
for o in MAT_ORDS:
    GRAD_CASES.append((f"norm_mat_{o}",
                       (lambda o: lambda x: fnp.sum(LA.norm(x, o, axis=(2, 0))))(o), Ab))


@pytest.mark.parametrize("name,f,x", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_vs_finite_differences(name, f, x):
    check_grad(f, x)


def test_det_grad_is_det_times_inv_transpose():
    g = ft.grad(LA.det)(A4)
    np.testing.assert_allclose(g, np.linalg.det(A4) * np.linalg.inv(A4).T, rtol=1e-10)
    gb = ft.grad(lambda a: fnp.sum(LA.det(a)))(Ab)
    want = np.linalg.det(Ab)[:, None, None] * np.swapaxes(np.linalg.inv(Ab), -1, -2)
    np.testing.assert_allclose(gb, want, rtol=1e-10)


def test_slogdet_grad_is_inv_transpose():
    g = ft.grad(lambda a: LA.slogdet(a).logabsdet)(-A4)
    np.testing.assert_allclose(g, np.linalg.inv(-A4).T, rtol=1e-10)
    g0 = ft.grad(lambda a: LA.slogdet(a).sign)(A4)
    np.testing.assert_array_equal(g0, 0)


def test_norm0_has_zero_gradient():
    np.testing.assert_array_equal(ft.grad(lambda x: LA.norm(x, 0))(randn(4)), 0)


# --------------------------------------------------------------------------------------------
# second order
# --------------------------------------------------------------------------------------------

SECOND = [
    ("inv", lambda a: fnp.sum(LA.inv(a) * W4), A4),
    ("solve", lambda a: fnp.sum(LA.solve(a, B4) * B4), A4),
    ("det", LA.det, A4),
    ("slogdet", lambda a: LA.slogdet(a)[1], A4),
    ("cholesky", lambda a: fnp.sum(LA.cholesky(a, gradient=TRI) * W4), S4),
    ("eigh_w", lambda a: fnp.sum(LA.eigh(a, gradient=TRI)[0] ** 2 * np.arange(1.0, 5.0)), A4),
    ("eigh_v", lambda a: fnp.sum(LA.eigh(a, gradient=TRI)[1] ** 2 * W4), A4),
    ("svd_s", lambda a: fnp.sum(LA.svdvals(a) * np.arange(1.0, 4.0)), T53),
    ("qr", lambda a: fnp.sum(LA.qr(a)[0] * W53), T53),
]


@pytest.mark.parametrize("name,f,x", SECOND, ids=[s[0] for s in SECOND])
def test_second_order(name, f, x):
    check_grad2(f, x)


def test_hessian_of_logdet():
    # d2/dA2 log det A [E] = -A^-1 E A^-1 (as a bilinear form: -tr(A^-1 E A^-1 F))
    a = S4[:2, :2]
    h = ft.hessian(lambda x: LA.slogdet(x)[1])(a)
    ai = np.linalg.inv(a)
    want = -np.einsum("li,jk->ijkl", ai, ai)
    np.testing.assert_allclose(h, want, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# complex inputs (real-valued functions; pairing Re(sum(g * dz)))
# --------------------------------------------------------------------------------------------

WC = randn((3, 3), np.complex128, 13)

COMPLEX = [
    ("inv", lambda a: fnp.sum(fnp.abs(LA.inv(a)) ** 2), C3),
    ("solve", lambda a: fnp.sum(fnp.real(LA.solve(a, WC) * WC)), C3),
    ("det", lambda a: fnp.abs(LA.det(a)), C3),
    ("slogdet", lambda a: LA.slogdet(a)[1] + fnp.real(LA.slogdet(a)[0] * (1 + 2j)), C3),
    ("cholesky", lambda a: fnp.sum(fnp.real(LA.cholesky(a, gradient=TRI) * WC)), H3),
    ("eigh", lambda a: fnp.sum(LA.eigh(a, gradient=TRI)[0] * np.arange(3.0))
     + fnp.sum(fnp.abs(LA.eigh(a, gradient=TRI)[1]) ** 2 * fnp.real(WC)), C3),
    ("svd", lambda a: fnp.sum(LA.svdvals(a) ** 2 * np.arange(3.0))
     + fnp.sum(fnp.real(fnp.matmul(*LA.svd(a, full_matrices=False)[::2]) * WC)), C3),
    ("svd_tall_u", lambda a: fnp.sum(fnp.abs(LA.svd(a, full_matrices=False)[0]) ** 2
                                     * np.arange(6.0).reshape(3, 2)), C3[:, :2]),
    ("qr", lambda a: fnp.sum(fnp.real(LA.qr(a)[0] * WC)) + fnp.sum(fnp.imag(LA.qr(a)[1])), C3),
    ("pinv", lambda a: fnp.sum(fnp.real(LA.pinv(a) * WC)), C3),
    ("norm_nuc", lambda a: LA.norm(a, "nuc"), C3),
]


@pytest.mark.parametrize("name,f,x", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_grad(name, f, x):
    check_grad(f, x)


# --------------------------------------------------------------------------------------------
# float32, degenerate spectra, zero vector
# --------------------------------------------------------------------------------------------

F32 = [
    ("inv", lambda a: fnp.sum(LA.inv(a) * W4), A4),
    ("solve", lambda a: fnp.sum(LA.solve(a, B4)), A4),
    ("det", LA.det, A4),
    ("slogdet", lambda a: LA.slogdet(a)[1], A4),
    ("cholesky", lambda a: fnp.sum(LA.cholesky(a) * W4), S4),
    ("eigh", lambda a: fnp.sum(LA.eigh(a)[1] ** 2 * W4) + LA.eigvalsh(a)[-1], A4),
    ("svd", lambda a: fnp.sum(LA.svd(a)[0] ** 2 * W4) + LA.norm(a, 2), A4),
    ("qr", lambda a: fnp.sum(LA.qr(a)[0] * W4), A4),
    ("norm", lambda a: LA.norm(a) + LA.norm(a, "nuc") + LA.norm(a, np.inf), A4),
    ("pinv", lambda a: fnp.sum(LA.pinv(a) * W4), A4),
]


@pytest.mark.parametrize("name,f,x", F32, ids=[c[0] for c in F32])
def test_float32_gradients_stay_float32(name, f, x):
    g32 = ft.grad(f)(x.astype(np.float32))
    assert g32.dtype == np.float32
    g64 = ft.grad(f)(x)
    np.testing.assert_allclose(g32, g64, rtol=2e-3, atol=2e-3 * np.abs(g64).max())


def test_eigh_degenerate_eigenvalues_only():
    eye = np.eye(4)
    g = ft.grad(lambda a: fnp.sum(LA.eigvalsh(a) ** 2))(eye)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, 2 * np.tril(eye), atol=1e-12)   # d tr(A^2) on the read triangle
    g = ft.grad(lambda a: fnp.sum(LA.eigh(a, symmetrize_input=True)[0] ** 2))(eye)
    np.testing.assert_allclose(g, 2 * eye, atol=1e-12)
    # eigenvectors used but with a zero cotangent: the masked F keeps it finite
    g = ft.grad(lambda a: fnp.sum(LA.eigh(a)[0]) + 0.0 * fnp.sum(LA.eigh(a)[1]))(eye)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, eye, atol=1e-12)
    # second order through a degenerate spectrum
    h = ft.grad(lambda a: fnp.sum(ft.grad(lambda b: fnp.sum(LA.eigvalsh(b) ** 2))(a)))(eye)
    assert np.all(np.isfinite(h))


def test_svd_degenerate_singular_values_only():
    eye = np.eye(3)
    g = ft.grad(lambda a: fnp.sum(LA.svdvals(a)))(eye)
    np.testing.assert_allclose(g, eye, atol=1e-12)
    g = ft.grad(lambda a: LA.norm(a, "nuc") + LA.norm(a, 2) + fnp.sum(LA.svd(a)[1]))(eye)
    assert np.all(np.isfinite(g))


def test_eigh_degenerate_subspace_invariant_function():
    # a projector onto a degenerate eigenspace is well defined: its gradient is finite and
    # matches central differences
    q, _ = np.linalg.qr(randn((4, 4), seed=17))
    a = q @ np.diag([1.0, 1.0, 3.0, 4.0]) @ q.T
    wts = randn((4, 4), seed=18)

    def f(x):
        v = LA.eigh(x, gradient=TRI)[1][:, :2]
        return fnp.sum(fnp.matmul(v, v.T) * wts)
    check_grad(f, a, rtol=1e-5)


@pytest.mark.parametrize("ord_,axis", [(None, None), (2, None), ("fro", None), (None, 1),
                                       (2, 0)])
def test_norm_of_zero_has_zero_gradient(ord_, axis):
    x = np.zeros((3, 3)) if ord_ == "fro" or (ord_ is None and axis is None) else np.zeros(3)
    if axis == 1:
        x = np.zeros((2, 3))
    g = ft.grad(lambda v: fnp.sum(LA.norm(v, ord_, axis)))(x)
    np.testing.assert_array_equal(g, 0)
    g = ft.grad(lambda v: fnp.sum(LA.vector_norm(v)))(np.zeros(4))
    np.testing.assert_array_equal(g, 0)


# --------------------------------------------------------------------------------------------
# forward mode, vmap and Jacobians through the public transforms
# --------------------------------------------------------------------------------------------

FWD = [
    ("inv", lambda a: LA.inv(a), A4),
    ("solve", lambda a: LA.solve(a, B4), A4),
    ("det", LA.det, Ab),
    ("slogdet", lambda a: LA.slogdet(a)[1], A4),
    ("cholesky", lambda a: LA.cholesky(a, gradient=TRI), Sb),
    ("eigh", lambda a: LA.eigh(a, gradient=TRI)[0]
     + fnp.sum(LA.eigh(a, gradient=TRI)[1] ** 2, axis=0), A4),
    ("svd", lambda a: fnp.matmul(*LA.svd(a, full_matrices=False)[::2]) + LA.svdvals(a), T53),
    ("svd_wide", lambda a: LA.svd(a, full_matrices=False)[0] ** 2, W35),
    ("qr", lambda a: LA.qr(a)[0] + 1.0, T53),
    ("qr_wide", lambda a: LA.qr(a)[1], W35),
    ("pinv", LA.pinv, T53),
    ("norm_nuc", lambda a: LA.norm(a, "nuc"), T53),
]


@pytest.mark.parametrize("name,f,x", FWD, ids=[c[0] for c in FWD])
def test_check_grads_fwd_and_rev(name, f, x):
    from functrace.test_util import check_grads
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))


def test_jacfwd_equals_jacrev():
    for f, x in [(LA.inv, A4[:3, :3]), (lambda a: LA.eigh(a)[0], A4[:3, :3]),
                 (lambda a: LA.qr(a)[1], T53[:4])]:
        np.testing.assert_allclose(ft.jacfwd(f)(x), ft.jacrev(f)(x), rtol=1e-9, atol=1e-12)


VMAP = [
    ("inv", LA.inv, 0, (Ab,)),
    ("inv_axis2", LA.inv, 2, (np.moveaxis(Ab, 0, 2),)),
    ("solve_b", LA.solve, (None, 0), (A4[:3, :3], randn((2, 3, 2)))),
    ("solve_a", LA.solve, (0, None), (Ab, randn(3))),
    ("det", LA.det, 0, (Ab,)),
    ("slogdet", LA.slogdet, 0, (Ab,)),
    ("cholesky", LA.cholesky, 0, (Sb,)),
    ("eigh", LA.eigh, 0, (Sb,)),
    ("svd", lambda a: LA.svd(a, full_matrices=False), 1, (np.stack([T53, T53 * 2], 1),)),
    ("qr", LA.qr, 0, (Ab,)),
    ("norm2", lambda a: LA.norm(a, 2), 0, (Ab,)),
]


@pytest.mark.parametrize("name,f,in_axes,args", VMAP, ids=[c[0] for c in VMAP])
def test_vmap_equals_loop(name, f, in_axes, args):
    out = ft.vmap(f, in_axes=in_axes)(*args)
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[d] for a, d in zip(args, axes, strict=False) if d is not None)
    rows = [f(*[a if d is None else np.take(a, i, axis=d)
                for a, d in zip(args, axes, strict=False)]) for i in range(n)]
    if isinstance(rows[0], tuple):
        for k in range(len(rows[0])):
            np.testing.assert_allclose(out[k], np.stack([r[k] for r in rows]), rtol=1e-10,
                                       atol=1e-12)
    else:
        np.testing.assert_allclose(out, np.stack(rows), rtol=1e-10, atol=1e-12)


def test_vmap_of_grad():
    g = ft.vmap(ft.grad(LA.det))(Ab)
    want = np.linalg.det(Ab)[:, None, None] * np.swapaxes(np.linalg.inv(Ab), -1, -2)
    np.testing.assert_allclose(g, want, rtol=1e-10)
