"""An MNIST-style classifier trained with ``functrace.optim.adam``, one ``ft.jit`` step.

The model is the one of ``mnist_classifier_fromscratch.py`` (JAX's example, ported): a
784-1024-1024-10 tanh MLP with a log-softmax output and the mean cross-entropy ``loss``. Where
that program takes plain SGD steps, here the whole training step (gradient, Adam's moments
and the parameter update) is one jitted function of ``(params, opt_state, batch)``, as one
writes it with JAX and optax:

    @ft.jit
    def step(params, opt_state, batch):
        value, grads = ft.value_and_grad(loss)(params, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, value

The parameters are float32 (as JAX's would be); the data are the made-up digits of
``datasets.py`` (no MNIST download here). The script prints the loss curve (the mean training
loss of each epoch) and the accuracies, and checks that:

* the jitted gradient equals the un-jitted one, and the step is traced once (the Adam
  state's step count is an int32 array, so every step has the same signature);
* the loss falls to less than a quarter of its first epoch's value, the test accuracy rises
  from chance (about 10 %) above 80 %, and the parameters stay float32.

Run:  python examples/mnist_adam.py [epochs]      (default 6; CI runs 4)
"""

import sys
import time

import datasets
import numpy as np
from mnist_classifier_fromscratch import accuracy, init_random_params, loss

import functrace as ft
from functrace import optim


def main(num_epochs=6, batch_size=128):
    train_images, train_labels, test_images, test_labels = datasets.mnist()
    num_batches = len(train_images) // batch_size
    params = [(w.astype(np.float32), b.astype(np.float32))
              for w, b in init_random_params(0.1, [784, 1024, 1024, 10],
                                             np.random.RandomState(0))]
    opt = optim.adam(1e-3)
    opt_state = opt.init(params)
    traces = []

    def train_step(params, opt_state, batch):
        traces.append(1)                       # runs only while jit traces
        value, grads = ft.value_and_grad(loss)(params, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, value

    step = ft.jit(train_step)

    # the jitted gradient is the un-jitted one (float32 sums in another order: ~1e-6)
    batch = (train_images[:batch_size], train_labels[:batch_size])
    for a, b in zip(ft.tree_util.tree_leaves(ft.grad(loss)(params, batch)),
                    ft.tree_util.tree_leaves(ft.jit(ft.grad(loss))(params, batch))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    test_acc0 = accuracy(params, (test_images, test_labels))
    print(f"before training: test accuracy {test_acc0:.3f}")
    print("epoch | mean training loss | test accuracy | seconds")
    rng = np.random.RandomState(0)
    curve, start = [], time.time()
    for epoch in range(num_epochs):
        perm = rng.permutation(len(train_images))
        losses = []
        for i in range(num_batches):
            idx = perm[i * batch_size:(i + 1) * batch_size]
            params, opt_state, value = step(params, opt_state,
                                            (train_images[idx], train_labels[idx]))
            losses.append(float(value))
        curve.append(np.mean(losses))
        test_acc = accuracy(params, (test_images, test_labels))
        print(f"{epoch:5} | {curve[-1]:18.4f} | {test_acc:13.3f} | {time.time() - start:7.1f}")

    assert len(traces) == 1, f"the step was traced {len(traces)} times"
    assert all(w.dtype == np.float32 for w in ft.tree_util.tree_leaves(params))
    assert curve[-1] < curve[0] / 4, curve
    assert test_acc > max(0.8, test_acc0 + 0.5), (test_acc0, test_acc)
    print(f"loss {curve[0]:.3f} -> {curve[-1]:.3f}, test accuracy {test_acc0:.3f} -> "
          f"{test_acc:.3f}; one trace of the step")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
