"""Every convention of docs/numerics.md, one test each."""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp


def g(f, x):
    return ft.grad(f)(x)


def test_abs_at_zero_is_zero():
    assert g(fnp.abs, 0.0) == 0.0


def test_maximum_minimum_ties_split_evenly():
    assert ft.grad(lambda x, y: fnp.maximum(x, y), argnums=(0, 1))(1.0, 1.0) == (0.5, 0.5)
    assert ft.grad(lambda x, y: fnp.minimum(x, y), argnums=(0, 1))(1.0, 1.0) == (0.5, 0.5)


def test_relu_at_zero_is_zero():
    assert g(ft.nn.relu, 0.0) == 0.0
    assert g(ft.nn.relu, 1.0) == 1.0


def test_reduce_max_min_ties_split_evenly():
    np.testing.assert_array_equal(g(fnp.max, np.array([1.0, 3.0, 3.0])), [0, 0.5, 0.5])
    np.testing.assert_array_equal(g(fnp.min, np.array([1.0, 1.0, 3.0])), [0.5, 0.5, 0])


def test_clip_at_bounds_is_one():
    np.testing.assert_array_equal(
        g(lambda x: fnp.sum(fnp.clip(x, -1.0, 1.0)), np.array([-1.0, 1.0, 2.0, 0.0])),
        [1.0, 1.0, 0.0, 1.0])


@pytest.mark.parametrize("f", [fnp.sqrt, fnp.log, lambda x: x ** 0.5])
def test_sqrt_log_pow_half_at_zero_are_inf(f):
    with np.errstate(divide="ignore", invalid="ignore"):
        assert g(f, 0.0) == np.inf


def test_norm_of_zero_vector_has_zero_gradient():
    np.testing.assert_array_equal(g(fnp.linalg.norm, np.zeros(3)), np.zeros(3))


def test_logsumexp_of_all_minus_inf_has_zero_gradient():
    x = np.full(3, -np.inf)
    np.testing.assert_array_equal(g(fnp.logsumexp, x), np.zeros(3))
    np.testing.assert_allclose(g(fnp.logsumexp, np.zeros(2)), [0.5, 0.5])


@pytest.mark.parametrize("f", [fnp.std, fnp.var])
def test_std_var_of_constant_have_zero_gradient(f):
    np.testing.assert_array_equal(g(f, np.full(4, 2.0)), np.zeros(4))


def test_arctan2_at_origin_is_zero():
    assert ft.grad(fnp.arctan2, argnums=(0, 1))(0.0, 0.0) == (0.0, 0.0)


def test_sinc_at_zero_is_zero():
    assert g(fnp.sinc, 0.0) == 0.0


def test_power_at_zero_base():
    # d/dx x**y at x=0, y=2 is 0; d/dy 0**y is 0 (no log(0) * 0 = nan)
    dx, dy = ft.grad(lambda x, y: fnp.power(x, y), argnums=(0, 1))(0.0, 2.0)
    assert (dx, dy) == (0.0, 0.0)
    assert g(lambda x: x ** 2, 0.0) == 0.0


def test_integer_and_bool_inputs_raise_type_error_with_hint():
    with pytest.raises(TypeError, match="astype"):
        g(lambda x: x * 1.0, np.array([1, 2]))
    with pytest.raises(TypeError, match="astype"):
        g(lambda x: x * 1.0, np.array([True]))


def test_broadcasting_is_summed_back():
    gx, gb = ft.grad(lambda x, b: fnp.sum(x + b), argnums=(0, 1))(np.ones((3, 2)), np.ones(2))
    np.testing.assert_array_equal(gb, [3.0, 3.0])
    assert gx.shape == (3, 2)
    assert ft.grad(lambda s, x: fnp.sum(s * x))(2.0, np.ones(5)) == 5.0


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_gradient_dtype_is_primal_dtype(dt):
    x = np.ones(3, dt)
    assert g(lambda x: fnp.sum(fnp.sin(x) * 2.0), x).dtype == dt


def test_complex_abs_squared_gradient():
    assert ft.grad(lambda z: fnp.abs(z) ** 2)(1.0 + 1.0j) == pytest.approx(2 - 2j)


def test_eigh_degenerate_eigenvalues_only():
    if not hasattr(fnp.linalg, "eigh"):
        pytest.skip("linalg not landed")
    A = np.eye(3)
    gr = g(lambda a: fnp.sum(fnp.linalg.eigh(a)[0] * np.array([1.0, 2.0, 3.0])), A)
    assert np.all(np.isfinite(gr))


def test_where_trap_warns_with_line_and_safe_where_fixes_it():
    import warnings
    f = lambda x: fnp.sum(fnp.where(x > 0, fnp.log(x), 0.0))  # noqa: E731
    x = np.array([0.0, 2.0])
    with warnings.catch_warnings(record=True) as w, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        plain = ft.grad(f)(x)
    assert np.isnan(plain[0]) and plain[1] == 0.5      # the plain answer is kept by default
    msgs = [str(m.message) for m in w if issubclass(m.category, ft.FunctraceWarning)]
    assert msgs and "test_numerics.py" in msgs[0] and "log" in msgs[0]
    np.testing.assert_array_equal(ft.grad(ft.safe_where(f))(x), [0.0, 0.5])
    # the rewrite changes no value where the branch is taken
    np.testing.assert_array_equal(ft.safe_where(f)(x), f(x))


def test_guarded_where_does_not_warn():
    import warnings
    def f(x):
        safe = fnp.where(x > 0, x, 1.0)
        return fnp.sum(fnp.where(x > 0, fnp.log(safe), 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ft.FunctraceWarning)
        np.testing.assert_array_equal(ft.grad(f)(np.array([0.0, 2.0])), [0.0, 0.5])


@pytest.mark.parametrize("name", ["pow rule", "second order", "library where", "jit of grad"])
def test_where_lint_is_quiet_about_wheres_the_user_did_not_write(name):
    # x ** x has no where in the user's code (the select is inside pow's rule); fnp.linalg's
    # functions select internally; neither is the user's to fix
    import warnings
    run = {"pow rule": lambda: ft.grad(lambda x: fnp.sum(x ** x))(np.array([0.5, 2.0])),
           "second order": lambda: ft.grad(ft.grad(lambda x: x ** x))(0.5),
           "library where": lambda: ft.grad(
               lambda x: fnp.linalg.cond(fnp.diag(x)))(np.array([0.5, 2.0])),
           "jit of grad": lambda: ft.jit(ft.grad(lambda x: fnp.sum(x ** x)))(
               np.array([0.5, 2.0]))}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ft.FunctraceWarning)
        run()


def test_where_lint_warns_under_jit_of_grad_too():
    import warnings
    f = lambda x: fnp.sum(fnp.where(x > 1, fnp.sqrt(x - 1), 0.0))  # noqa: E731
    with warnings.catch_warnings(record=True) as w, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        ft.jit(ft.grad(f), backend="numpy")(np.array([0.0, 2.0]))
    msgs = [str(m.message) for m in w if issubclass(m.category, ft.FunctraceWarning)]
    assert msgs and "sqrt" in msgs[0] and "test_numerics.py" in msgs[0]
