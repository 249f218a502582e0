# Copyright 2018 The JAX Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""A basic MNIST example using Numpy and JAX.

The primary aim here is simplicity and minimal dependencies.

Ported from JAX's examples/mnist_classifier_fromscratch.py (jax-ml/jax, Apache 2.0; the
docstring above is JAX's). The program is JAX's, unchanged but for its imports and two lines:

* ``functrace.jit``/``grad`` for ``jax``'s, ``functrace.scipy.special.logsumexp`` and
  ``functrace.numpy`` for ``jax.scipy.special``'s and ``jax.numpy``;
* ``import datasets`` for ``from examples import datasets``: there is no MNIST download here,
  ``examples/datasets.py`` draws 2,560 training and 512 test digits in MNIST's layout
  (seven-segment glyphs with random slant, offset, stroke width and noise);
* the number of epochs is a command-line argument (default JAX's 10; CI runs 4), which takes
  ``import sys`` at the top of the ``__main__`` block.

The parameters are float64 (``npr.RandomState.randn``), so unlike JAX, which would compute in
float32, every step computes in float64 (numpy's promotion; examples/mnist_adam.py trains the
same model in float32 with ``functrace.optim.adam``). ``update`` is traced and compiled once:
the batch size divides the training set, so every batch has the same shape.

After JAX's loop the script checks that the jitted ``update`` equals the un-jitted one on a
batch, and that the training and test accuracies rose from the initial parameters' (about
10 %, chance): by 0.10 and 0.05 after 4 epochs (the plain SGD steps of size 0.001 are slow:
23 % and 20 % after 4 epochs, 43 % and 35 % after 10; Adam reaches 95 % in 4).

Run:  python examples/mnist_classifier_fromscratch.py [epochs]
"""

# ruff: noqa: I001, B008  (JAX's lines as they are: its import order, its default RandomState)

import time

import numpy.random as npr

from functrace import jit, grad
from functrace.scipy.special import logsumexp
import functrace.numpy as jnp
import datasets


def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
  return [(scale * rng.randn(m, n), scale * rng.randn(n))
          for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]

def predict(params, inputs):
  activations = inputs
  for w, b in params[:-1]:
    outputs = jnp.dot(activations, w) + b
    activations = jnp.tanh(outputs)

  final_w, final_b = params[-1]
  logits = jnp.dot(activations, final_w) + final_b
  return logits - logsumexp(logits, axis=1, keepdims=True)

def loss(params, batch):
  inputs, targets = batch
  preds = predict(params, inputs)
  return -jnp.mean(jnp.sum(preds * targets, axis=1))

def accuracy(params, batch):
  inputs, targets = batch
  target_class = jnp.argmax(targets, axis=1)
  predicted_class = jnp.argmax(predict(params, inputs), axis=1)
  return jnp.mean(predicted_class == target_class)


if __name__ == "__main__":
  import sys
  layer_sizes = [784, 1024, 1024, 10]
  param_scale = 0.1
  step_size = 0.001
  num_epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
  batch_size = 128

  train_images, train_labels, test_images, test_labels = datasets.mnist()
  num_train = train_images.shape[0]
  num_complete_batches, leftover = divmod(num_train, batch_size)
  num_batches = num_complete_batches + bool(leftover)

  def data_stream():
    rng = npr.RandomState(0)
    while True:
      perm = rng.permutation(num_train)
      for i in range(num_batches):
        batch_idx = perm[i * batch_size:(i + 1) * batch_size]
        yield train_images[batch_idx], train_labels[batch_idx]
  batches = data_stream()

  @jit
  def update(params, batch):
    grads = grad(loss)(params, batch)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]

  params = init_random_params(param_scale, layer_sizes)
  for epoch in range(num_epochs):
    start_time = time.time()
    for _ in range(num_batches):
      params = update(params, next(batches))
    epoch_time = time.time() - start_time

    train_acc = accuracy(params, (train_images, train_labels))
    test_acc = accuracy(params, (test_images, test_labels))
    print(f"Epoch {epoch} in {epoch_time:0.2f} sec")
    print(f"Training set accuracy {train_acc}")
    print(f"Test set accuracy {test_acc}")

  # ---- not JAX's: the checks ---------------------------------------------------------------
  import numpy as np
  import functrace as ft
  batch = (train_images[:batch_size], train_labels[:batch_size])
  eager, jitted = update.__wrapped__(params, batch), update(params, batch)
  for a, b in zip(ft.tree_util.tree_leaves(eager), ft.tree_util.tree_leaves(jitted)):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
  initial = init_random_params(param_scale, layer_sizes, npr.RandomState(0))
  train_acc0 = accuracy(initial, (train_images, train_labels))
  test_acc0 = accuracy(initial, (test_images, test_labels))
  print(f"accuracy from {train_acc0:.3f} (training), {test_acc0:.3f} (test) to "
        f"{train_acc:.3f}, {test_acc:.3f}; jitted update equals the un-jitted one")
  assert train_acc > train_acc0 + 0.1 and test_acc > test_acc0 + 0.05
