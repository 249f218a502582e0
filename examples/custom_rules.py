"""custom_vjp, stop_gradient and checkpoint.

Run:  python examples/custom_rules.py
"""

import numpy as np

import functrace as ft
import functrace.numpy as fnp


@ft.custom_vjp
def clip_gradient(x):
    """The identity, whose gradient is clipped to [-1, 1] on the way back."""
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -1.0, 1.0),))


@ft.custom_vjp
def log1pexp(x):
    """log(1 + e^x) with a numerically safe gradient (JAX's classic example)."""
    return fnp.logaddexp(x, 0.0)


log1pexp.defvjp(lambda x: (log1pexp(x), x), lambda x, g: (g * (1.0 - 1.0 / (1.0 + fnp.exp(x))),))


def main():
    g = ft.grad(lambda x: fnp.sum(clip_gradient(x) * 10.0))(np.ones(3))
    print("clipped gradient:", g)
    assert np.allclose(g, 1.0)

    print("d/dx log(1+e^x) at 100:", ft.grad(log1pexp)(100.0))
    print("second derivative at 0:", ft.grad(ft.grad(log1pexp))(0.0))

    print("x * stop_gradient(x) has derivative x:", ft.grad(lambda x: x * ft.stop_gradient(x))(3.0))

    layer = ft.checkpoint(lambda x: fnp.tanh(fnp.sin(x) * 2.0))
    deep = lambda x: fnp.sum(layer(layer(layer(x))))  # noqa: E731
    x = np.linspace(-1, 1, 4)
    print("gradient through 3 checkpointed layers:", ft.grad(deep)(x))
    print(ft.trace(ft.grad(deep))(x))


if __name__ == "__main__":
    main()
