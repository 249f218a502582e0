"""Gaussian process regression, its kernel's hyperparameters fitted by maximum marginal likelihood.

Ported from autograd's examples/gaussian_process.py (HIPS/autograd, MIT licence). The program
down to the ``__main__`` block is autograd's, unchanged but for its imports:

* ``functrace.numpy`` for ``autograd.numpy``, ``functrace.numpy.linalg.solve``,
  ``functrace.value_and_grad``;
* ``from functrace.scipy.stats import multivariate_normal as mvn`` for ``import
  autograd.scipy.stats.multivariate_normal as mvn`` (functrace's distributions are objects,
  as scipy's are, not modules);
* ``numpy.random`` for ``autograd.numpy.random`` (it only makes the data and the first point);
* ``scipy.optimize.minimize`` (nonlinear conjugate gradients) is scipy's own, as in
  autograd's file: scipy drives the search and calls the value and gradient functrace computes.

In the ``__main__`` block matplotlib is imported and used only with ``--plot`` (the posterior
is computed at every iteration either way), the callback also keeps the log-likelihoods, and
the script checks its result:

* the optimizer converges and the log marginal likelihood rises by more than 40 nats
  (from -22.4 at the first point to 18.905);
* at the optimum, functrace's ``mvn.logpdf`` equals scipy.stats' on the same covariance;
* the objective's gradient and Hessian-vector products match finite differences
  (``ft.test_util.check_grads``, forward and reverse mode, order 2);
* with autograd installed, this file with autograd's imports put back (``IMPORTS`` below)
  computes the same value and gradient, and reaches the same optimum.

``ft.jit`` is not used: the search takes about 40 evaluations of about 3 ms each, and
compiling the gradient costs more than it would save.

Run:  python examples/gaussian_process.py [--plot]
"""

# ruff: noqa: E501, E731  (autograd's lines as they are: its line length is 120, and lambdas)

import sys

import numpy.random as npr
from scipy.optimize import minimize

import functrace.numpy as np
from functrace import value_and_grad
from functrace.numpy.linalg import solve
from functrace.scipy.stats import multivariate_normal as mvn


def make_gp_funs(cov_func, num_cov_params):
    """Functions that perform Gaussian process regression.
    cov_func has signature (cov_params, x, x')"""

    def unpack_kernel_params(params):
        mean = params[0]
        cov_params = params[2:]
        noise_scale = np.exp(params[1]) + 0.0001
        return mean, cov_params, noise_scale

    def predict(params, x, y, xstar):
        """Returns the predictive mean and covariance at locations xstar,
        of the latent function value f (without observation noise)."""
        mean, cov_params, noise_scale = unpack_kernel_params(params)
        cov_f_f = cov_func(cov_params, xstar, xstar)
        cov_y_f = cov_func(cov_params, x, xstar)
        cov_y_y = cov_func(cov_params, x, x) + noise_scale * np.eye(len(y))
        pred_mean = mean + np.dot(solve(cov_y_y, cov_y_f).T, y - mean)
        pred_cov = cov_f_f - np.dot(solve(cov_y_y, cov_y_f).T, cov_y_f)
        return pred_mean, pred_cov

    def log_marginal_likelihood(params, x, y):
        mean, cov_params, noise_scale = unpack_kernel_params(params)
        cov_y_y = cov_func(cov_params, x, x) + noise_scale * np.eye(len(y))
        prior_mean = mean * np.ones(len(y))
        return mvn.logpdf(y, prior_mean, cov_y_y)

    return num_cov_params + 2, predict, log_marginal_likelihood


# Define an example covariance function.
def rbf_covariance(kernel_params, x, xp):
    output_scale = np.exp(kernel_params[0])
    lengthscales = np.exp(kernel_params[1:])
    diffs = np.expand_dims(x / lengthscales, 1) - np.expand_dims(xp / lengthscales, 0)
    return output_scale * np.exp(-0.5 * np.sum(diffs**2, axis=2))


def build_toy_dataset(D=1, n_data=20, noise_std=0.1):
    rs = npr.RandomState(0)
    inputs = np.concatenate([np.linspace(0, 3, num=n_data // 2), np.linspace(6, 8, num=n_data // 2)])
    targets = (np.cos(inputs) + rs.randn(n_data) * noise_std) / 2.0
    inputs = (inputs - 4.0) / 2.0
    inputs = inputs.reshape((len(inputs), D))
    return inputs, targets


# ---- not autograd's: the checks ------------------------------------------------------------

# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "from functrace.scipy.stats import multivariate_normal as mvn\n":
        "import autograd.scipy.stats.multivariate_normal as mvn\n",
    "from functrace import value_and_grad\n": "from autograd import value_and_grad\n",
    "from functrace.numpy.linalg import solve\n": "from autograd.numpy.linalg import solve\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    import numpy
    import scipy.stats

    import functrace as ft

    plot = "--plot" in sys.argv
    D = 1

    # Build model and objective function.
    num_params, predict, log_marginal_likelihood = make_gp_funs(rbf_covariance, num_cov_params=D + 1)

    X, y = build_toy_dataset(D=D)
    objective = lambda params: -log_marginal_likelihood(params, X, y)

    if plot:
        import matplotlib.pyplot as plt

        # Set up figure.
        fig = plt.figure(figsize=(12, 8), facecolor="white")
        ax = fig.add_subplot(111, frameon=False)
        plt.show(block=False)

    log_likelihoods = []

    def callback(params):
        print(f"Log likelihood {-objective(params)}")
        log_likelihoods.append(-objective(params))

        # Show posterior marginals.
        plot_xs = np.reshape(np.linspace(-7, 7, 300), (300, 1))
        pred_mean, pred_cov = predict(params, X, y, plot_xs)
        marg_std = np.sqrt(np.diag(pred_cov))
        if not plot:
            return
        plt.cla()
        ax.plot(plot_xs, pred_mean, "b")
        ax.fill(
            np.concatenate([plot_xs, plot_xs[::-1]]),
            np.concatenate([pred_mean - 1.96 * marg_std, (pred_mean + 1.96 * marg_std)[::-1]]),
            alpha=0.15,
            fc="Blue",
            ec="None",
        )

        # Show samples from posterior.
        rs = npr.RandomState(0)
        sampled_funcs = rs.multivariate_normal(pred_mean, pred_cov, size=10)
        ax.plot(plot_xs, sampled_funcs.T)

        ax.plot(X, y, "kx")
        ax.set_ylim([-1.5, 1.5])
        ax.set_xticks([])
        ax.set_yticks([])
        plt.draw()
        plt.pause(1.0 / 60.0)

    # Initialize covariance parameters
    rs = npr.RandomState(0)
    init_params = 0.1 * rs.randn(num_params)

    print("Optimizing covariance parameters...")
    cov_params = minimize(value_and_grad(objective), init_params, jac=True, method="CG", callback=callback)
    if plot:
        plt.pause(10.0)

    # ---- not autograd's: the checks --------------------------------------------------------
    start, best = -objective(init_params), -objective(cov_params.x)
    print(f"log marginal likelihood {start:.4f} -> {best:.4f} in {cov_params.nit} iterations")
    assert cov_params.success, cov_params.message
    assert best > start + 40.0 and abs(best - log_likelihoods[-1]) < 1e-12, (start, best)

    mean, noise = cov_params.x[0], numpy.exp(cov_params.x[1]) + 0.0001
    cov = rbf_covariance(cov_params.x[2:], X, X) + noise * numpy.eye(len(y))
    reference = scipy.stats.multivariate_normal.logpdf(y, mean * numpy.ones(len(y)), cov)
    numpy.testing.assert_allclose(best, reference, rtol=1e-12)

    ft.test_util.check_grads(objective, (init_params,), order=2, modes=("fwd", "rev"))
    print("value equals scipy.stats' logpdf; gradient and Hessian match finite differences")

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side run")
    else:
        _, _, their_lml = theirs["make_gp_funs"](theirs["rbf_covariance"], num_cov_params=D + 1)
        their_objective = lambda params: -their_lml(params, X, y)
        v, g = value_and_grad(objective)(init_params)
        their_v, their_g = theirs["value_and_grad"](their_objective)(init_params)
        numpy.testing.assert_allclose(v, their_v, rtol=1e-12)
        numpy.testing.assert_allclose(g, their_g, rtol=1e-9, atol=1e-12)
        their_params = minimize(theirs["value_and_grad"](their_objective), init_params,
                                jac=True, method="CG")
        numpy.testing.assert_allclose(cov_params.x, their_params.x, rtol=1e-6, atol=1e-8)
        print("autograd's run of the same program agrees (value, gradient, optimum)")
