"""An RK4 integrator written with ``ft.fori_loop``, and its gradients.

A damped harmonic oscillator ``x'' + 2 zeta omega x' + omega**2 x = 0`` with parameters
``(omega, zeta)`` is integrated from ``y0 = (x0, v0)`` for 200 RK4 steps. The loop is one
``loop`` equation whatever the number of steps, so ``ft.grad`` of the final position with
respect to the initial state and the parameters is one backward loop, and ``ft.jit`` runs
both as compiled loops. Everything is checked against the exact solution and against central
finite differences.

Run:  python examples/ode.py
"""

import time

import numpy as np

import functrace as ft
import functrace.numpy as fnp

T_END, STEPS = 10.0, 200
DT = T_END / STEPS


def oscillator(y, omega, zeta):
    """dy/dt for the state y = (x, v), a tuple: the loop carry is a pytree."""
    x, v = y
    return v, -2.0 * zeta * omega * v - omega ** 2 * x


def axpy(a, k, y):
    return tuple(yi + a * ki for yi, ki in zip(y, k))


def rk4_step(y, omega, zeta, dt):
    k1 = oscillator(y, omega, zeta)
    k2 = oscillator(axpy(0.5 * dt, k1, y), omega, zeta)
    k3 = oscillator(axpy(0.5 * dt, k2, y), omega, zeta)
    k4 = oscillator(axpy(dt, k3, y), omega, zeta)
    return tuple(yi + dt / 6.0 * (a + 2.0 * b + 2.0 * c + d)
                 for yi, a, b, c, d in zip(y, k1, k2, k3, k4))


def final_state(y0, params):
    # omega and zeta are closed over by the body: fori_loop turns them into operands of the
    # loop, so gradients flow into them. They are read out of params (and the state out of
    # y0) before the loop: under ft.jit a body that slices an array is refused by the
    # compiled loop and runs trip by trip instead (docs/control_flow.md)
    omega, zeta = params[0], params[1]
    x, v = ft.fori_loop(0, STEPS, lambda i, y: rk4_step(y, omega, zeta, DT), (y0[0], y0[1]))
    return fnp.stack([x, v])


def final_position(y0, params):
    return final_state(y0, params)[0]


def exact_position(y0, params, t):
    """The closed-form solution of the underdamped oscillator (zeta < 1)."""
    (x0, v0), (omega, zeta) = y0, params
    wd = omega * np.sqrt(1.0 - zeta ** 2)
    b = (v0 + zeta * omega * x0) / wd
    return np.exp(-zeta * omega * t) * (x0 * np.cos(wd * t) + b * np.sin(wd * t))


def central_differences(f, y0, params, eps=1e-6):
    def fd(i, which):
        args = [y0.copy(), params.copy()]
        args[which][i] += eps
        up = f(*args)
        args[which][i] -= 2 * eps
        return (up - f(*args)) / (2 * eps)
    return (np.array([fd(i, 0) for i in range(y0.size)]),
            np.array([fd(i, 1) for i in range(params.size)]))


def main():
    y0 = np.array([1.0, 0.0])             # released from rest at x = 1
    params = np.array([2.0, 0.1])         # omega, zeta

    yT = final_state(y0, params)
    exact = exact_position(y0, params, T_END)
    print(f"x({T_END:g}) by RK4 with {STEPS} steps: {yT[0]:.10f} (exact {exact:.10f})")
    assert abs(yT[0] - exact) < 1e-5       # RK4: global error O(dt**4)

    grad = ft.grad(final_position, argnums=(0, 1))
    g_y0, g_params = grad(y0, params)
    fd_y0, fd_params = central_differences(final_position, y0, params)
    print("d x(T) / d (x0, v0):      ", g_y0, "  finite differences:", fd_y0)
    print("d x(T) / d (omega, zeta): ", g_params, "  finite differences:", fd_params)
    np.testing.assert_allclose(g_y0, fd_y0, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_params, fd_params, rtol=1e-6, atol=1e-8)

    # the same gradient, compiled: the forward and backward loops each run as one numba loop
    step = ft.jit(ft.value_and_grad(final_position, argnums=(0, 1)))
    t0 = time.perf_counter()
    step.lower(y0, params).compile()
    print(f"ft.jit: compiled in {time.perf_counter() - t0:.2f} s")
    for _ in range(3):                     # the first calls trace, then the compiled code runs
        value, (j_y0, j_params) = step(y0, params)
    np.testing.assert_allclose(value, yT[0], rtol=1e-12)
    np.testing.assert_allclose(j_y0, g_y0, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(j_params, g_params, rtol=1e-12, atol=1e-14)
    t0 = time.perf_counter()
    for _ in range(100):
        step(y0, params)
    print(f"ft.jit(ft.value_and_grad): {(time.perf_counter() - t0) * 10:.3f} ms per call, "
          "matches the un-jitted gradient")

    # forward mode works through the loop too: the 2x2 sensitivity of the final state to y0
    J = ft.jacfwd(final_state)(y0, params)
    np.testing.assert_allclose(J[0], g_y0, rtol=1e-10)
    print("d y(T) / d y0 (jacfwd):\n", J)


if __name__ == "__main__":
    main()
