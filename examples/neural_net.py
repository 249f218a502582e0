"""A multi-layer perceptron for classification of MNIST handwritten digits.

Ported from autograd's examples/neural_net.py (HIPS/autograd, MIT licence; the first line
above is its docstring). The program is autograd's, unchanged but for its imports:

* ``functrace.numpy``, ``functrace.numpy.random``, ``functrace.grad`` and
  ``functrace.scipy.special.logsumexp`` for autograd's;
* ``from functrace.flatten_util import ravel_pytree as flatten`` for ``from
  autograd.misc.flatten import flatten`` (the same ``(vector, unflatten)`` pair; the L2
  penalty differentiates through it);
* ``from optimizers import adam`` for ``from autograd.misc.optimizers import adam``:
  ``examples/optimizers.py`` is autograd's driver (same signature, same callback) taking
  ``functrace.optim.adam`` steps;
* ``data.load_mnist`` is ``examples/data.py``'s: made-up digits in MNIST's layout (2,560 for
  training, 512 for testing), no download here.

Below autograd's program, the number of epochs comes from the command line (default
autograd's 5; CI runs 3), and the script checks that the training and test accuracies rose
from chance (about 10 %) above 80 % and 70 % (autograd's callback prints them at the start of
each epoch; the last one is printed once more), and that the gradient matches central
differences in a random direction; with autograd installed, this file with autograd's imports
put back (``IMPORTS``) computes the same objective and gradient.

``ft.jit`` is not used, as autograd's program is written: ``objective`` picks its batch from
the iteration number with Python slicing, so each batch would be a new trace.

Run:  python examples/neural_net.py [epochs]
"""

# ruff: noqa: E501, E731, I001  (autograd's lines as they are, its lambdas, its import order)

import sys

import itertools

from data import load_mnist

import functrace.numpy as np
import functrace.numpy.random as npr
from functrace import grad
from functrace.flatten_util import ravel_pytree as flatten
from optimizers import adam
from functrace.scipy.special import logsumexp


def init_random_params(scale, layer_sizes, rs=None):
    """Build a list of (weights, biases) tuples,
    one for each layer in the net."""
    rs = rs if rs is not None else npr.RandomState(0)
    return [
        (
            scale * rs.randn(m, n),  # weight matrix
            scale * rs.randn(n),
        )  # bias vector
        for m, n in itertools.pairwise(layer_sizes)
    ]


def neural_net_predict(params, inputs):
    """Implements a deep neural network for classification.
    params is a list of (weights, bias) tuples.
    inputs is an (N x D) matrix.
    returns normalized class log-probabilities."""
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs - logsumexp(outputs, axis=1, keepdims=True)


def l2_norm(params):
    """Computes l2 norm of params by flattening them into a vector."""
    flattened, _ = flatten(params)
    return np.dot(flattened, flattened)


def log_posterior(params, inputs, targets, L2_reg):
    log_prior = -L2_reg * l2_norm(params)
    log_lik = np.sum(neural_net_predict(params, inputs) * targets)
    return log_prior + log_lik


def accuracy(params, inputs, targets):
    target_class = np.argmax(targets, axis=1)
    predicted_class = np.argmax(neural_net_predict(params, inputs), axis=1)
    return np.mean(predicted_class == target_class)



# ---- not autograd's: the checks ------------------------------------------------------------

# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import functrace.numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "from functrace import grad\n": "from autograd import grad\n",
    "from functrace.flatten_util import ravel_pytree as flatten\n": "from autograd.misc.flatten import flatten\n",
    "from optimizers import adam\n": "from autograd.misc.optimizers import adam\n",
    "from functrace.scipy.special import logsumexp\n": "from autograd.scipy.special import logsumexp\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    # Model parameters
    layer_sizes = [784, 200, 100, 10]
    L2_reg = 1.0

    # Training parameters
    param_scale = 0.1
    batch_size = 256
    num_epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    step_size = 0.001

    print("Loading training data...")
    N, train_images, train_labels, test_images, test_labels = load_mnist()

    init_params = init_random_params(param_scale, layer_sizes)

    num_batches = int(np.ceil(len(train_images) / batch_size))

    def batch_indices(iter):
        idx = iter % num_batches
        return slice(idx * batch_size, (idx + 1) * batch_size)

    # Define training objective
    def objective(params, iter):
        idx = batch_indices(iter)
        return -log_posterior(params, train_images[idx], train_labels[idx], L2_reg)

    # Get gradient of objective using autograd.
    objective_grad = grad(objective)

    print("     Epoch     |    Train accuracy  |       Test accuracy  ")

    def print_perf(params, iter, gradient):
        if iter % num_batches == 0:
            train_acc = accuracy(params, train_images, train_labels)
            test_acc = accuracy(params, test_images, test_labels)
            print(f"{iter // num_batches:15}|{train_acc:20}|{test_acc:20}")

    # The optimizers provided can optimize lists, tuples, or dicts of parameters.
    optimized_params = adam(
        objective_grad,
        init_params,
        step_size=step_size,
        num_iters=num_epochs * num_batches,
        callback=print_perf,
    )

    # ---- not autograd's: the checks --------------------------------------------------------
    import numpy

    import functrace as ft

    train_acc = accuracy(optimized_params, train_images, train_labels)
    test_acc = accuracy(optimized_params, test_images, test_labels)
    print(f"{num_epochs:15}|{train_acc:20}|{test_acc:20}")
    assert train_acc > 0.8 and test_acc > 0.7, (train_acc, test_acc)

    rs = numpy.random.RandomState(1)
    flat, unflatten = flatten(optimized_params)
    v = rs.randn(len(flat))
    f = lambda x: objective(unflatten(x), 0)
    fd = (f(flat + 1e-5 * v) - f(flat - 1e-5 * v)) / 2e-5
    numpy.testing.assert_allclose(numpy.dot(flatten(objective_grad(optimized_params, 0))[0], v), fd, rtol=1e-6)
    print("the gradient matches central differences")

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side run")
    else:
        their_objective = lambda params, iter: -theirs["log_posterior"](params, train_images[batch_indices(iter)], train_labels[batch_indices(iter)], L2_reg)
        numpy.testing.assert_allclose(their_objective(optimized_params, 3), objective(optimized_params, 3), rtol=1e-12)
        ours, theirs_g = objective_grad(optimized_params, 3), theirs["grad"](their_objective)(optimized_params, 3)
        for a, b in zip(ft.tree_util.tree_leaves(ours), ft.tree_util.tree_leaves(theirs_g)):
            numpy.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        print("autograd computes the same objective and gradient")
