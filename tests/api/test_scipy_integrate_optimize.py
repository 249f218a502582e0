"""functrace.scipy.integrate.odeint and functrace.scipy.optimize.minimize against scipy.

odeint: values against closed forms and scipy's solvers; gradients (the adjoint custom_vjp)
with respect to y0, t and args against central differences and against differentiating a
fixed-step RK4 written with ft.fori_loop; pytrees, closures, vmap and ft.jit.
minimize: BFGS against scipy's BFGS on Rosenbrock and quadratics; ft.jit, args, status codes.
"""

import numpy as np
import pytest
import scipy.integrate as si
import scipy.optimize as so

import functrace as ft
import functrace.numpy as fnp
from functrace.scipy.integrate import odeint
from functrace.scipy.optimize import OptimizeResults, minimize

TIGHT = {"rtol": 1e-10, "atol": 1e-10}


def central(f, x, eps=1e-5):
    """Central differences of the scalar f at the float array x."""
    x = np.asarray(x, float)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


# --------------------------------------------------------------------------------------------
# the test problems
# --------------------------------------------------------------------------------------------

def decay(y, t, k):
    return -k * y


def lotka_volterra(y, t, a, b, c, d):
    prey, pred = y[0], y[1]
    return fnp.stack([a * prey - b * prey * pred, -c * pred + d * prey * pred])


LV_Y0, LV_ARGS = np.array([10.0, 5.0]), (1.5, 1.0, 3.0, 1.0)


def lv_numpy(y, t, a, b, c, d):
    return np.array([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])


def pendulum(state, t, params):
    """A damped, driven pendulum on a dict state with dict parameters (pytrees)."""
    theta, omega = state["theta"], state["omega"]
    force = params["drive"] * fnp.cos(t)
    return {"theta": omega,
            "omega": -params["damping"] * omega - params["g"] * fnp.sin(theta) + force}


PEND_Y0 = {"omega": 0.0, "theta": np.pi - 0.1}
PEND_P = {"damping": 0.25, "drive": 0.5, "g": 5.0}


def pend_numpy(t, y):
    p = PEND_P
    return [y[1], -p["damping"] * y[1] - p["g"] * np.sin(y[0]) + p["drive"] * np.cos(t)]


def rk4(func, y0, t, *args, steps=100):
    """A fixed-step RK4 reference with ft.fori_loop: y at each time of t (steps per
    interval); differentiable by ordinary reverse mode through the loop."""
    rows = [y0]
    y = y0
    for k in range(len(t) - 1):
        h = (t[k + 1] - t[k]) / steps

        def step(i, y, t0=t[k], h=h):
            s = t0 + i * h
            k1 = func(y, s, *args)
            k2 = func(y + 0.5 * h * k1, s + 0.5 * h, *args)
            k3 = func(y + 0.5 * h * k2, s + 0.5 * h, *args)
            k4 = func(y + h * k3, s + h, *args)
            return y + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        y = ft.fori_loop(0, steps, step, y)
        rows.append(y)
    return fnp.stack(rows)


# --------------------------------------------------------------------------------------------
# odeint: values
# --------------------------------------------------------------------------------------------

def test_exponential_decay_matches_the_exact_solution():
    t = np.linspace(0.0, 3.0, 7)
    ys = odeint(decay, np.array([1.0, 2.0]), t, 0.7)
    assert isinstance(ys, np.ndarray) and ys.shape == (7, 2) and ys.dtype == np.float64
    exact = np.exp(-0.7 * t)[:, None] * np.array([1.0, 2.0])
    np.testing.assert_allclose(ys, exact, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(odeint(decay, 1.0, t, 0.7, **TIGHT), exact[:, 0], rtol=1e-9)
    assert odeint(decay, np.float32(1.0), t.astype(np.float32), 0.7).dtype == np.float32


def test_lotka_volterra_matches_scipy():
    t = np.linspace(0.0, 10.0, 21)
    ref = si.odeint(lv_numpy, LV_Y0, t, LV_ARGS, rtol=1e-12, atol=1e-12)
    ours = odeint(lotka_volterra, LV_Y0, t, *LV_ARGS)
    default_scipy = si.odeint(lv_numpy, LV_Y0, t, LV_ARGS)
    # at the default tolerances, as close to the truth as scipy's own default
    err, scipy_err = np.abs(ours - ref).max(), np.abs(default_scipy - ref).max()
    assert err < 1e-4 and err < 20 * scipy_err
    np.testing.assert_allclose(odeint(lotka_volterra, LV_Y0, t, *LV_ARGS, **TIGHT), ref,
                               rtol=1e-7, atol=1e-8)


def test_pendulum_with_pytree_state_and_args_matches_solve_ivp():
    t = np.linspace(0.0, 8.0, 17)
    ys = odeint(pendulum, PEND_Y0, t, PEND_P, **TIGHT)
    assert set(ys) == {"theta", "omega"} and ys["theta"].shape == (17,)
    ref = si.solve_ivp(pend_numpy, (0.0, 8.0), [PEND_Y0["theta"], PEND_Y0["omega"]],
                       t_eval=t, method="DOP853", rtol=1e-12, atol=1e-12).y
    np.testing.assert_allclose(ys["theta"], ref[0], rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ys["omega"], ref[1], rtol=1e-7, atol=1e-8)


def test_output_times_do_not_change_the_steps_and_a_single_time_is_y0():
    f = lambda y, t: fnp.cos(t) * y   # noqa: E731  (y = exp(sin t))
    coarse = odeint(f, 1.0, np.array([0.0, 2.0]), **TIGHT)
    fine = odeint(f, 1.0, np.linspace(0.0, 2.0, 41), **TIGHT)
    np.testing.assert_allclose(fine, np.exp(np.sin(np.linspace(0.0, 2.0, 41))), rtol=1e-8)
    np.testing.assert_allclose(coarse[-1], fine[-1], rtol=1e-9)
    assert odeint(f, 3.0, np.array([0.5])).tolist() == [3.0]


def test_mxstep_and_hmax():
    oscillator = lambda y, t: fnp.stack([y[1], -y[0]])   # noqa: E731
    t = np.array([0.0, 1.0, 100.0])
    ys = odeint(oscillator, np.array([1.0, 0.0]), t, mxstep=20)
    # 20 steps reach t = 1 but not t = 100: that row is NaN
    np.testing.assert_allclose(ys[1], [np.cos(1.0), -np.sin(1.0)], rtol=1e-7)
    assert np.isnan(ys[2]).all()
    np.testing.assert_allclose(odeint(decay, 1.0, t, 1.0, hmax=0.05)[1], np.exp(-1.0),
                               rtol=1e-8)


def test_errors():
    with pytest.raises(ft.ShapeError, match="1-D"):
        odeint(decay, 1.0, np.zeros((2, 2)), 1.0)
    with pytest.raises(ft.FunctraceTypeError, match="structure"):
        odeint(lambda y, t: (y, y), 1.0, np.array([0.0, 1.0]))
    with pytest.raises(ft.FunctraceTypeError, match="rtol"):
        odeint(decay, 1.0, np.array([0.0, 1.0]), 1.0, rtol=-1.0)
    with pytest.raises(ft.ConcretizationError):
        odeint(lambda y, t: y if t > 0 else -y, 1.0, np.array([0.0, 1.0]))
    with pytest.raises(ft.FunctraceValueError, match="non-decreasing"):
        odeint(decay, 1.0, np.array([1.0, 0.0]), 1.0)
    # forward mode is not defined (as in JAX): a MissingRuleError that says so
    with pytest.raises(ft.MissingRuleError, match="custom_vjp"):
        ft.jvp(lambda k: odeint(decay, 1.0, np.array([0.0, 1.0]), k), (1.0,), (1.0,))


# --------------------------------------------------------------------------------------------
# odeint: adjoint gradients
# --------------------------------------------------------------------------------------------

def test_decay_gradients_are_exact():
    t = np.array([0.0, 0.5, 2.0])

    def loss(y0, t, k):
        return fnp.sum(odeint(decay, y0, t, k, **TIGHT) * np.array([1.0, 2.0, 3.0]))

    gy0, gt, gk = ft.grad(loss, argnums=(0, 1, 2))(1.5, t, 0.8)
    w, e = np.array([1.0, 2.0, 3.0]), np.exp(-0.8 * (t - t[0]))
    np.testing.assert_allclose(gy0, np.sum(w * e), rtol=1e-8)
    np.testing.assert_allclose(gk, np.sum(w * -(t - t[0]) * 1.5 * e), rtol=1e-7)
    dt = w * -0.8 * 1.5 * e                    # d y(t_i) / d t_i
    dt[0] = -np.sum(dt[1:])                   # moving t_0 shifts the whole solution
    np.testing.assert_allclose(gt, dt, rtol=1e-7, atol=1e-12)
    # second order: the backward pass is odeint again, so it is differentiable too
    d2 = ft.grad(ft.grad(lambda k: odeint(decay, 1.0, t, k, **TIGHT)[-1]))(0.8)
    np.testing.assert_allclose(d2, 4.0 * np.exp(-1.6), rtol=1e-7)       # t**2 exp(-k t)


def test_lotka_volterra_gradients_match_rk4_and_finite_differences():
    t = np.linspace(0.0, 2.0, 3)
    weights = np.arange(6.0).reshape(3, 2) / 10.0

    def loss(y0, t, params):
        return fnp.sum(odeint(lotka_volterra, y0, t, *params, **TIGHT) * weights)

    def loss_rk4(y0, t, params):
        return fnp.sum(rk4(lotka_volterra, y0, t, *params) * weights)

    params = np.array(LV_ARGS)
    ours = ft.grad(loss, argnums=(0, 1, 2))(LV_Y0, t, tuple(params))
    ref = ft.grad(loss_rk4, argnums=(0, 2))(LV_Y0, t, tuple(params))
    # RK4 with h = 0.01 is itself accurate to ~1e-8 (h**4)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.array(ours[2]), np.array(ref[1]), rtol=1e-6, atol=1e-7)
    fd_y0 = central(lambda y: loss(y, t, tuple(params)), LV_Y0)
    fd_t = central(lambda tt: loss(LV_Y0, tt, tuple(params)), t)
    fd_p = central(lambda p: loss(LV_Y0, t, tuple(p)), params)
    np.testing.assert_allclose(ours[0], fd_y0, rtol=1e-5)
    np.testing.assert_allclose(ours[1], fd_t, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(ours[2]), fd_p, rtol=1e-5)


def test_pendulum_gradients_with_pytree_args_and_a_closure():
    t = np.linspace(0.0, 3.0, 4)

    def loss(state, params, scale):
        # scale is closed over by func: its gradient flows through the closure
        ys = odeint(lambda s, tt, p: pendulum(s, tt, {**p, "g": scale * p["g"]}),
                    state, t, params, **TIGHT)
        return fnp.sum(ys["theta"] ** 2) + fnp.sum(fnp.sin(ys["omega"]))

    gs, gp, gscale = ft.grad(loss, argnums=(0, 1, 2))(PEND_Y0, PEND_P, 1.0)
    assert set(gs) == set(PEND_Y0) and set(gp) == set(PEND_P)
    for key in PEND_P:
        fd = central(lambda v, key=key: loss(PEND_Y0, {**PEND_P, key: float(v)}, 1.0),
                     PEND_P[key])
        np.testing.assert_allclose(gp[key], fd, rtol=1e-5)
    for key in PEND_Y0:
        fd = central(lambda v, key=key: loss({**PEND_Y0, key: float(v)}, PEND_P, 1.0),
                     PEND_Y0[key])
        np.testing.assert_allclose(gs[key], fd, rtol=1e-5)
    np.testing.assert_allclose(gscale, central(lambda v: loss(PEND_Y0, PEND_P, float(v)),
                                               1.0), rtol=1e-5)


def test_vmap_of_odeint_and_of_its_gradient():
    t = np.array([0.0, 1.0])
    y0s = np.array([1.0, 2.0, 3.0])
    ys = ft.vmap(lambda y0: odeint(decay, y0, t, 2.0))(y0s)
    np.testing.assert_allclose(ys[:, 1], y0s * np.exp(-2.0), rtol=1e-7)
    ks = np.array([0.5, 1.0])
    gk = ft.vmap(ft.grad(lambda k: odeint(decay, 1.0, t, k, **TIGHT)[1]))(ks)
    np.testing.assert_allclose(gk, -np.exp(-ks), rtol=1e-7)


def _decay_loss(y0, k):
    return fnp.sum(odeint(decay, y0, np.linspace(0.0, 1.0, 3), k) ** 2)


def _check_jitted_odeint(jitted, calls):
    for y0, k in calls:
        value, grads = jitted(y0, k)
        np.testing.assert_allclose(value, _decay_loss(y0, k), rtol=1e-12)
        g_eager = ft.grad(_decay_loss, argnums=(0, 1))(y0, k)
        np.testing.assert_allclose(grads, g_eager, rtol=1e-10)
        np.testing.assert_allclose(g_eager[1], central(lambda v: _decay_loss(y0, float(v)), k),
                                   rtol=1e-5)


def test_odeint_under_jit():
    # the first call of a CPU jit runs the traced graph on the interpreter; the compiled tier
    # (numba, ~30 kernels to compile cold) is test_odeint_compiled, marked slow
    _check_jitted_odeint(ft.jit(ft.value_and_grad(_decay_loss, argnums=(0, 1))), [(1.0, 0.5)])
    _check_jitted_odeint(ft.jit(ft.value_and_grad(_decay_loss, argnums=(0, 1)),
                                backend="numpy"), [(1.0, 0.5), (2.0, 1.5)])


@pytest.mark.slow
def test_odeint_compiled():
    _check_jitted_odeint(ft.jit(ft.value_and_grad(_decay_loss, argnums=(0, 1))),
                         [(1.0, 0.5), (2.0, 1.5), (0.5, 1.0)])


# --------------------------------------------------------------------------------------------
# minimize
# --------------------------------------------------------------------------------------------

def rosen(x, a=1.0, b=100.0):
    return fnp.sum(b * (x[1:] - x[:-1] ** 2) ** 2 + (a - x[:-1]) ** 2)


@pytest.mark.parametrize("x0", [np.array([-1.2, 1.0]), np.array([1.3, 0.7, 0.8, 1.9, 1.2]),
                                np.linspace(-1.0, 1.0, 10)], ids=["2d", "5d", "10d"])
def test_rosenbrock_matches_scipy_bfgs(x0):
    ours = minimize(rosen, x0, method="BFGS")
    ref = so.minimize(so.rosen, x0, jac=so.rosen_der, method="BFGS")
    assert isinstance(ours, OptimizeResults)
    assert bool(ours.success) and int(ours.status) == 0 and ref.success
    assert ours.message == ref.message
    np.testing.assert_allclose(ours.x, np.ones_like(x0), atol=1e-6)
    np.testing.assert_allclose(ours.x, ref.x, atol=2e-6)
    assert float(ours.fun) < 1e-10
    np.testing.assert_allclose(ours.jac, so.rosen_der(ours.x), rtol=1e-6, atol=1e-12)
    assert np.max(np.abs(ours.jac)) <= 1e-5
    # the same algorithm: iteration and evaluation counts within a few of scipy's
    assert abs(int(ours.nit) - ref.nit) <= max(5, ref.nit // 5)
    assert abs(int(ours.nfev) - ref.nfev) <= max(8, ref.nfev // 4)
    assert int(ours.njev) == int(ours.nfev)


def test_quadratic_with_args():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(6, 6))
    A, b = m @ m.T + 6 * np.eye(6), rng.normal(size=6)

    def quad(x, A, b):
        return 0.5 * x @ (A @ x) - b @ x

    res = minimize(quad, np.zeros(6), args=(A, b), tol=1e-10)
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.hess_inv, np.linalg.inv(A), rtol=0.05, atol=1e-3)
    ref = so.minimize(quad, np.zeros(6), args=(A, b), jac=lambda x, A, b: A @ x - b,
                      method="BFGS", tol=1e-10)
    np.testing.assert_allclose(res.x, ref.x, rtol=1e-8, atol=1e-12)
    # x0 of any shape is flattened for the search and fun sees its shape (as scipy)
    res2 = minimize(lambda X: fnp.sum((X - np.arange(4.0).reshape(2, 2)) ** 2),
                    np.zeros((2, 2), np.int64))
    assert res2.x.shape == (2, 2) and res2.x.dtype == np.float64
    np.testing.assert_allclose(res2.x, np.arange(4.0).reshape(2, 2), atol=1e-8)


def _rosen_solve(x0, a, b):
    res = minimize(rosen, x0, args=(a, b))
    return res.x, res.nit, res.status


def _check_jitted_minimize(jitted, scales):
    for a in scales:
        x, nit, status = jitted(np.array([-1.2, 1.0]), a, 100.0)
        assert int(status) == 0
        np.testing.assert_allclose(x, [a, a * a], rtol=1e-6)
        ex, enit, _ = _rosen_solve(np.array([-1.2, 1.0]), a, 100.0)
        np.testing.assert_allclose(x, ex, rtol=1e-12)
        assert int(nit) == int(enit)


def test_minimize_under_jit_and_vmap():
    # one call of the CPU jit (the interpreter tier); the compiled tier is
    # test_minimize_compiled, marked slow
    _check_jitted_minimize(ft.jit(_rosen_solve), [1.0])
    _check_jitted_minimize(ft.jit(_rosen_solve, backend="numpy"), [1.0, 2.0])
    starts = np.array([[-1.2, 1.0], [2.0, 2.0], [0.0, 0.0]])
    xs = ft.vmap(lambda x0: minimize(rosen, x0).x)(starts)
    np.testing.assert_allclose(xs, np.ones((3, 2)), atol=1e-6)


@pytest.mark.slow
def test_minimize_compiled():
    _check_jitted_minimize(ft.jit(_rosen_solve), [1.0, 2.0, 0.5])


def test_status_codes_and_errors():
    res = minimize(lambda x: fnp.sum((x - 2.0) ** 2) + fnp.sum(x ** 4), np.zeros(3),
                   options={"maxiter": 1})
    assert int(res.status) == 1 and not bool(res.success)
    assert res.message == "Maximum number of iterations has been exceeded."
    res = minimize(lambda x: fnp.sum(x) * np.nan, np.zeros(2))
    assert int(res.status) == 3 and res.message == "NaN result encountered."
    with pytest.raises(ft.FunctraceValueError, match="BFGS"):
        minimize(rosen, np.zeros(2), method="Nelder-Mead")
    with pytest.raises(ft.FunctraceTypeError, match="unknown BFGS options"):
        minimize(rosen, np.zeros(2), options={"disp": True})
    with pytest.raises(ft.FunctraceTypeError, match="tuple"):
        minimize(rosen, np.zeros(2), args=1.0)


def test_the_examples_of_docs_scipy_md_run():
    import pathlib
    import re
    text = (pathlib.Path(__file__).parents[2] / "docs" / "scipy.md").read_text()
    namespace: dict = {}     # the blocks of a page build on each other
    for section in re.split(r"\n## ", text):
        if section.startswith(("integrate", "optimize")):
            for block in re.findall(r"```python\n(.*?)```", section, re.S):
                exec(compile(block, "docs/scipy.md", "exec"), namespace)
