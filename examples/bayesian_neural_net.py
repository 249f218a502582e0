"""A Bayesian neural network fitted by black-box variational inference.

A 1-20-20-1 network with RBF units; a diagonal Gaussian over its 501 weights is fitted to
the posterior by ``black_box_svi``'s stochastic lower bound, the network vectorised over
weight samples with ``einsum``.

Ported from autograd's examples/bayesian_neural_net.py (HIPS/autograd, MIT licence). The
program is autograd's, unchanged but for its imports and its plotting:

* ``functrace.numpy`` and ``functrace.numpy.random`` for autograd's; ``from optimizers import
  adam`` for ``from autograd.misc.optimizers import adam`` (``examples/optimizers.py``);
  ``black_box_variational_inference`` comes from the ported ``black_box_svi.py``;
* matplotlib is imported and used only with ``--plot`` (``import sys`` for that), and the
  number of iterations comes from the command line (default autograd's 1000; CI runs 200).

``np.einsum("mnd,mdo->mno", inputs, W)`` contracts inputs of shape ``(1, N, D)`` with
weights ``(M, D, O)``, broadcasting the size-1 batch axis ``m``, as numpy and autograd do
(functrace's ``einsum`` squeezes the size-1 axis out before contracting). The lower bound
rises from about -1.2e4 to 310 in 200 steps.

The script checks that the lower bound rises by a factor of 100 towards 0 and above 0, and,
with autograd installed, that this file with autograd's imports put back (``IMPORTS``) takes
the same steps (same seed, same draws).

Run:  python examples/bayesian_neural_net.py [iterations] [--plot]
"""

# ruff: noqa: E501, E731, I001  (autograd's lines as they are, its lambdas, its import order)

import sys
import itertools

from black_box_svi import black_box_variational_inference

import functrace.numpy as np
import functrace.numpy.random as npr
from optimizers import adam


def make_nn_funs(layer_sizes, L2_reg, noise_variance, nonlinearity=np.tanh):
    """These functions implement a standard multi-layer perceptron,
    vectorized over both training examples and weight samples."""
    shapes = list(itertools.pairwise(layer_sizes))
    num_weights = sum((m + 1) * n for m, n in shapes)

    def unpack_layers(weights):
        num_weight_sets = len(weights)
        for m, n in shapes:
            yield (
                weights[:, : m * n].reshape((num_weight_sets, m, n)),
                weights[:, m * n : m * n + n].reshape((num_weight_sets, 1, n)),
            )
            weights = weights[:, (m + 1) * n :]

    def predictions(weights, inputs):
        """weights is shape (num_weight_samples x num_weights)
        inputs  is shape (num_datapoints x D)"""
        inputs = np.expand_dims(inputs, 0)
        for W, b in unpack_layers(weights):
            outputs = np.einsum("mnd,mdo->mno", inputs, W) + b
            inputs = nonlinearity(outputs)
        return outputs

    def logprob(weights, inputs, targets):
        log_prior = -L2_reg * np.sum(weights**2, axis=1)
        preds = predictions(weights, inputs)
        log_lik = -np.sum((preds - targets) ** 2, axis=1)[:, 0] / noise_variance
        return log_prior + log_lik

    return num_weights, predictions, logprob


def build_toy_dataset(n_data=40, noise_std=0.1):
    D = 1
    rs = npr.RandomState(0)
    inputs = np.concatenate([np.linspace(0, 2, num=n_data // 2), np.linspace(6, 8, num=n_data // 2)])
    targets = np.cos(inputs) + rs.randn(n_data) * noise_std
    inputs = (inputs - 4.0) / 4.0
    inputs = inputs.reshape((len(inputs), D))
    targets = targets.reshape((len(targets), D))
    return inputs, targets



# ---- not autograd's: the checks ------------------------------------------------------------

# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import functrace.numpy.random as npr\n": "import autograd.numpy.random as npr\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    # Specify inference problem by its unnormalized log-posterior.
    rbf = lambda x: np.exp(-(x**2))
    relu = lambda x: np.maximum(x, 0.0)
    num_weights, predictions, logprob = make_nn_funs(
        layer_sizes=[1, 20, 20, 1], L2_reg=0.1, noise_variance=0.01, nonlinearity=rbf
    )

    inputs, targets = build_toy_dataset()
    log_posterior = lambda weights, t: logprob(weights, inputs, targets)

    # Build variational objective.
    objective, gradient, unpack_params = black_box_variational_inference(
        log_posterior, num_weights, num_samples=20
    )

    # Set up figure.
    plot = "--plot" in sys.argv
    if plot:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(12, 8), facecolor="white")
        ax = fig.add_subplot(111, frameon=False)
        plt.ion()
        plt.show(block=False)

    trajectory = []

    def callback(params, t, g):
        print(f"Iteration {t} lower bound {-objective(params, t)}")
        trajectory.append(params)
        if not plot:
            return

        # Sample functions from posterior.
        rs = npr.RandomState(0)
        mean, log_std = unpack_params(params)
        # rs = npr.RandomState(0)
        sample_weights = rs.randn(10, num_weights) * np.exp(log_std) + mean
        plot_inputs = np.linspace(-8, 8, num=400)
        outputs = predictions(sample_weights, np.expand_dims(plot_inputs, 1))

        # Plot data and functions.
        plt.cla()
        ax.plot(inputs.ravel(), targets.ravel(), "bx")
        ax.plot(plot_inputs, outputs[:, :, 0].T)
        ax.set_ylim([-2, 3])
        plt.draw()
        plt.pause(1.0 / 60.0)

    # Initialize variational parameters
    rs = npr.RandomState(0)
    init_mean = rs.randn(num_weights)
    init_log_std = -5 * np.ones(num_weights)
    init_var_params = np.concatenate([init_mean, init_log_std])

    print("Optimizing variational parameters...")
    num_iters = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--plot" else 1000
    variational_params = adam(gradient, init_var_params, step_size=0.1, num_iters=num_iters, callback=callback)

    # ---- not autograd's: the checks --------------------------------------------------------
    import numpy

    estimate = lambda params: numpy.mean([-objective(params, 0) for _ in range(10)])
    first, last = estimate(trajectory[0]), estimate(variational_params)
    print(f"lower bound {first:.1f} -> {last:.1f}")
    assert last > 0 and last > first / 100, (first, last)

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side run")
    else:
        # the objective of black_box_svi.py with autograd's imports, on this file's model with them
        bbsvi = __import__("black_box_svi").autograd_version()
        _, _, their_logprob = theirs["make_nn_funs"](layer_sizes=[1, 20, 20, 1], L2_reg=0.1, noise_variance=0.01, nonlinearity=lambda x: theirs["np"].exp(-(x**2)))
        their_objective, their_gradient, _ = bbsvi["black_box_variational_inference"](lambda weights, t: their_logprob(weights, inputs, targets), num_weights, num_samples=20)
        # its callback draws once per step, as ours does (the samples come from one RandomState)
        their_params = bbsvi["adam"](their_gradient, init_var_params, step_size=0.1, num_iters=num_iters,
                                     callback=lambda params, t, g: their_objective(params, t))
        numpy.testing.assert_allclose(variational_params, their_params, rtol=1e-7, atol=1e-9)
        print(f"autograd's run takes the same {num_iters} steps")
