"""Gradients of a small MLP's softmax cross-entropy loss with pytree parameters, and plain
gradient descent with them.

Run:  python examples/mlp_gradients.py
"""

import numpy as np

import functrace as ft
import functrace.numpy as fnp


def init(rng, sizes):
    return [{"w": rng.standard_normal((m, n)) / np.sqrt(m), "b": np.zeros(n)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def loss(params, x, labels):
    h = x
    for layer in params[:-1]:
        h = fnp.tanh(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    logp = ft.nn.log_softmax(logits, axis=1)
    return -fnp.mean(fnp.sum(logp * labels, axis=1))


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 10))
    y = ft.nn.one_hot((x[:, 0] > 0).astype(int) + (x[:, 1] > 0), 3)
    params = init(rng, [10, 32, 3])
    step = ft.value_and_grad(loss)
    for i in range(60):
        value, grads = step(params, x, y)
        params = ft.tree_util.tree_map(lambda p, g: p - 0.5 * g, params, grads)
        if i % 20 == 0:
            print(f"step {i:3d} loss {value:.4f}")
    final = loss(params, x, y)
    print(f"final loss {final:.4f}")
    assert final < 0.5


if __name__ == "__main__":
    main()
