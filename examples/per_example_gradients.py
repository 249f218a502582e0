"""Per-example gradients with ``ft.vmap(ft.grad(loss), in_axes=(None, 0, 0))``, and a
differentially private SGD step built on them.

``ft.grad(loss)(params, x, y)`` is the gradient for one example; ``ft.vmap`` over the
examples (``in_axes=(None, 0, 0)``: the parameters shared, ``x`` and ``y`` batched) gives a
batch of them in one call, each leaf with a leading batch axis, as ``jax.vmap(jax.grad(...))``
does. The script checks that this equals a Python loop over the examples, jitted and not,
and that the mean of the per-example gradients is the gradient of the mean loss.

Then it trains the MLP of the ported MNIST examples (smaller: 784-128-10) on the made-up
digits of ``datasets.py`` with DP-SGD (Abadi et al. 2016): each example's gradient is clipped
to norm 1, the clipped gradients are summed, Gaussian noise is added, and Adam
(``functrace.optim``) takes the step. The whole step is one ``ft.jit`` function of
``(params, opt_state, key, x, y)``; the noise comes from ``functrace.random`` with a key
split afresh for every step, so it is new noise each time although the step is compiled
once. The script prints the loss curve and checks that the loss falls and the test accuracy
rises well above chance, and that the step was traced once.

Run:  python examples/per_example_gradients.py [steps]      (default 150; CI runs 100)
"""

import sys
import time

import datasets
import numpy as np

import functrace as ft
import functrace.numpy as fnp
from functrace import optim, random
from functrace.scipy.special import logsumexp


def init_params(sizes, rs):
    return [(rs.randn(m, n) / np.sqrt(m), np.zeros(n)) for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for w, b in params[:-1]:
        x = fnp.tanh(fnp.dot(x, w) + b)
    w, b = params[-1]
    logits = fnp.dot(x, w) + b
    return logits - logsumexp(logits, axis=-1, keepdims=True)


def loss(params, x, y):
    """Cross-entropy of one example (x: (784,), y: one-hot (10,)) or a batch (mean)."""
    return -fnp.mean(fnp.sum(predict(params, x) * y, axis=-1))


per_example_grads = ft.vmap(ft.grad(loss), in_axes=(None, 0, 0))


def check_against_a_loop(params, x, y):
    batched = per_example_grads(params, x, y)
    looped = [ft.grad(loss)(params, x[i], y[i]) for i in range(len(x))]
    jitted = ft.jit(per_example_grads)(params, x, y)
    for k, leaf in enumerate(ft.tree_util.tree_leaves(batched)):
        loop_leaf = np.stack([ft.tree_util.tree_leaves(g)[k] for g in looped])
        assert leaf.shape == (len(x), *ft.tree_util.tree_leaves(params)[k].shape)
        np.testing.assert_allclose(leaf, loop_leaf, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ft.tree_util.tree_leaves(jitted)[k], loop_leaf,
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(leaf.mean(0), ft.tree_util.tree_leaves(
            ft.grad(loss)(params, x, y))[k], rtol=1e-10, atol=1e-14)
    print(f"per-example gradients of {len(x)} examples: vmap, jit(vmap) and mean all agree "
          "with a Python loop")


def make_dp_step(opt, clip_norm=1.0, noise_multiplier=0.5):
    traces = []

    def dp_step(params, opt_state, key, x, y):
        traces.append(1)                                  # runs only while jit traces
        grads = per_example_grads(params, x, y)           # leaves (batch, ...)
        leaves, tree = ft.tree_util.tree_flatten(grads)
        norms = fnp.sqrt(sum(fnp.sum(g.reshape(len(x), -1) ** 2, axis=1) for g in leaves))
        scale = fnp.minimum(1.0, clip_norm / (norms + 1e-12))
        keys = random.split(key, len(leaves))
        noisy = [(fnp.tensordot(scale, g, axes=1)
                  + noise_multiplier * clip_norm * random.normal(k, g.shape[1:])) / len(x)
                 for k, g in zip(keys, leaves)]
        updates, opt_state = opt.update(ft.tree_util.tree_unflatten(tree, noisy), opt_state,
                                        params)
        return optim.apply_updates(params, updates), opt_state, loss(params, x, y)

    return ft.jit(dp_step), traces


def main(num_steps=150, batch_size=64):
    train_x, train_y, test_x, test_y = (a.astype(np.float64) for a in datasets.mnist(2560, 512))
    rs = np.random.RandomState(0)
    params = init_params([784, 128, 10], rs)
    check_against_a_loop(params, train_x[:16], train_y[:16])

    accuracy = lambda p: np.mean(np.argmax(predict(p, test_x), 1) == np.argmax(test_y, 1))  # noqa: E731
    acc0 = accuracy(params)
    opt = optim.adam(1e-2)
    opt_state = opt.init(params)
    step, traces = make_dp_step(opt)
    key = random.key(0)
    curve, losses, start = [], [], time.time()
    print("step | mean loss of the last 10 steps")
    for i in range(num_steps):
        key, subkey = random.split(key)                   # fresh noise on every step
        idx = rs.randint(0, len(train_x), batch_size)
        params, opt_state, value = step(params, opt_state, subkey, train_x[idx], train_y[idx])
        losses.append(float(value))
        if (i + 1) % 10 == 0:
            curve.append(np.mean(losses[-10:]))
            print(f"{i + 1:4} | {curve[-1]:.4f}")
    acc = accuracy(params)
    print(f"{num_steps} DP-SGD steps in {time.time() - start:.1f} s: loss {curve[0]:.3f} -> "
          f"{curve[-1]:.3f}, test accuracy {acc0:.3f} -> {acc:.3f}")
    assert len(traces) == 1, f"the step was traced {len(traces)} times"
    assert curve[-1] < 0.5 * curve[0], curve
    assert acc > max(0.6, acc0 + 0.4), (acc0, acc)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
