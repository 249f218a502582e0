"""Hessians and Hessian-vector products of the extended Rosenbrock function.

Run:  python examples/hessians.py
"""

import numpy as np

import functrace as ft
import functrace.numpy as fnp


def rosenbrock(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def main():
    x = np.linspace(-1.0, 1.0, 6)
    H = ft.hessian(rosenbrock)(x)
    print("Hessian:\n", np.round(H, 2))
    v = np.ones_like(x)
    hvp = ft.grad(lambda x: ft.grad(rosenbrock)(x) @ v)(x)   # reverse-over-reverse
    assert np.allclose(hvp, H @ v)
    print("Hessian-vector product matches H @ v")
    # Newton's method converges to the minimum at (1, ..., 1)
    x = np.full(6, 0.8)
    for _ in range(30):
        x = x - np.linalg.solve(ft.hessian(rosenbrock)(x), ft.grad(rosenbrock)(x))
    print("Newton's method ->", np.round(x, 8))
    assert np.allclose(x, 1.0)


if __name__ == "__main__":
    main()
