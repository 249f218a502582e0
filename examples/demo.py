"""The main demo: trace a function, look at its graph, differentiate it twice, check.

Run:  python examples/demo.py
"""

import numpy as np

import functrace as ft
import functrace.numpy as fnp
from functrace.test_util import check_grads


def loss(x, w):
    h = fnp.tanh(x @ w + 1.0)
    return fnp.sum(h ** 2) / h.shape[0]


def main():
    rng = np.random.default_rng(0)
    x, w = rng.random((8, 3)), rng.random((3, 4))

    print("eager value (plain numpy):", loss(x, w))
    sym = ft.trace(loss)(x, w)
    print("\nthe traced graph:\n" + str(sym))
    assert np.allclose(sym(x, w), loss(x, w))
    assert ft.Symbol.from_json(sym.to_json()) == sym

    grad_w = ft.grad(loss, argnums=1)
    print("\nd loss / d w:\n", grad_w(x, w))
    print("\nthe gradient graph:\n" + str(ft.trace(grad_w)(x, w)))

    # second order: the Hessian of the loss in w (a (3*4) x (3*4) matrix)
    H = ft.hessian(lambda wf: loss(x, fnp.reshape(wf, (3, 4))))(w.ravel())
    print("\nHessian shape:", H.shape, " symmetric:", np.allclose(H, H.T))

    # check first and second derivatives against central differences
    check_grads(lambda w: loss(x, w), (w,), order=2, modes=("fwd", "rev"))
    print("\ncheck_grads (order 2, forward and reverse mode): OK")

    # compiled: numba kernels (the first call runs on the interpreter, later ones compiled)
    step = ft.jit(ft.value_and_grad(loss, argnums=1), eager=True)
    value, g = step(x, w)
    assert np.allclose(g, grad_w(x, w)) and np.isclose(value, loss(x, w))
    print("\nft.jit(value_and_grad) matches the interpreter; its generated code starts:")
    print("\n".join(ft.jit(ft.grad(loss, argnums=1)).lower(x, w).source.splitlines()[:12]))


if __name__ == "__main__":
    main()
