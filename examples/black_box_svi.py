"""Black-box stochastic variational inference: a Gaussian fitted to a funnel-shaped density.

Ported from autograd's examples/black_box_svi.py (HIPS/autograd, MIT licence). The program is
autograd's, unchanged but for its imports and its plotting:

* ``functrace.numpy``, ``functrace.numpy.random``, ``functrace.grad`` and
  ``functrace.scipy.stats.norm`` for autograd's; ``from functrace.scipy.stats import
  multivariate_normal as mvn`` for ``import autograd.scipy.stats.multivariate_normal as mvn``
  (functrace's distributions are objects, as scipy's are, not modules);
* ``from optimizers import adam`` for ``from autograd.misc.optimizers import adam``
  (``examples/optimizers.py``: autograd's driver taking ``functrace.optim.adam`` steps);
* matplotlib is imported and used only with ``--plot`` (``import sys`` for that), the
  callback also keeps the parameters, and the number of iterations comes from the command
  line (default autograd's 2000; CI runs 300).

The objective draws its Monte Carlo samples from a ``RandomState`` inside the function, on
every call: functrace's un-jitted ``grad`` re-runs the Python function each time (as
autograd's does), so each step sees fresh samples. (For the same inference under ``ft.jit``,
with the randomness a key argument, see ``advi.py`` and ``black_box_vi.py``.)
``bayesian_neural_net.py`` imports ``black_box_variational_inference`` from here.

The script checks that the lower bound rises from about -10 (log std -5) above -1.2 (the
density is normalised, so the bound is at most 0; -0.77 after 300 steps), and that the
fitted mean of ``mu`` is near 0; with autograd installed, this file
with autograd's imports put back (``IMPORTS``) takes the same steps (same seed, same draws).

Run:  python examples/black_box_svi.py [iterations] [--plot]
"""

# ruff: noqa: E501, E731, I001  (autograd's lines as they are, its lambdas, its import order)

import sys

import functrace.numpy as np
import functrace.numpy.random as npr
from functrace.scipy.stats import multivariate_normal as mvn
from functrace import grad
from optimizers import adam
from functrace.scipy.stats import norm


def black_box_variational_inference(logprob, D, num_samples):
    """Implements http://arxiv.org/abs/1401.0118, and uses the
    local reparameterization trick from http://arxiv.org/abs/1506.02557"""

    def unpack_params(params):
        # Variational dist is a diagonal Gaussian.
        mean, log_std = params[:D], params[D:]
        return mean, log_std

    def gaussian_entropy(log_std):
        return 0.5 * D * (1.0 + np.log(2 * np.pi)) + np.sum(log_std)

    rs = npr.RandomState(0)

    def variational_objective(params, t):
        """Provides a stochastic estimate of the variational lower bound."""
        mean, log_std = unpack_params(params)
        samples = rs.randn(num_samples, D) * np.exp(log_std) + mean
        lower_bound = gaussian_entropy(log_std) + np.mean(logprob(samples, t))
        return -lower_bound

    gradient = grad(variational_objective)

    return variational_objective, gradient, unpack_params



# ---- not autograd's: the checks ------------------------------------------------------------

# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import functrace.numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "from functrace.scipy.stats import multivariate_normal as mvn\n": "import autograd.scipy.stats.multivariate_normal as mvn\n",
    "from functrace import grad\n": "from autograd import grad\n",
    "from optimizers import adam\n": "from autograd.misc.optimizers import adam\n",
    "from functrace.scipy.stats import norm\n": "from autograd.scipy.stats import norm\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    # Specify an inference problem by its unnormalized log-density.
    D = 2

    def log_density(x, t):
        mu, log_sigma = x[:, 0], x[:, 1]
        sigma_density = norm.logpdf(log_sigma, 0, 1.35)
        mu_density = norm.logpdf(mu, 0, np.exp(log_sigma))
        return sigma_density + mu_density

    # Build variational objective.
    objective, gradient, unpack_params = black_box_variational_inference(log_density, D, num_samples=2000)

    # Set up plotting code
    def plot_isocontours(ax, func, xlimits=None, ylimits=None, numticks=101):
        if ylimits is None:
            ylimits = [-4, 2]
        if xlimits is None:
            xlimits = [-2, 2]
        x = np.linspace(*xlimits, num=numticks)
        y = np.linspace(*ylimits, num=numticks)
        X, Y = np.meshgrid(x, y)
        zs = func(np.concatenate([np.atleast_2d(X.ravel()), np.atleast_2d(Y.ravel())]).T)
        Z = zs.reshape(X.shape)
        plt.contour(X, Y, Z)
        ax.set_yticks([])
        ax.set_xticks([])

    # Set up figure.
    plot = "--plot" in sys.argv
    if plot:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(8, 8), facecolor="white")
        ax = fig.add_subplot(111, frameon=False)
        plt.ion()
        plt.show(block=False)

    trajectory = []

    def callback(params, t, g):
        print(f"Iteration {t} lower bound {-objective(params, t)}")
        trajectory.append(params)
        if not plot:
            return

        plt.cla()
        target_distribution = lambda x: np.exp(log_density(x, t))
        plot_isocontours(ax, target_distribution)

        mean, log_std = unpack_params(params)
        variational_contour = lambda x: mvn.pdf(x, mean, np.diag(np.exp(2 * log_std)))
        plot_isocontours(ax, variational_contour)
        plt.draw()
        plt.pause(1.0 / 30.0)

    print("Optimizing variational parameters...")
    init_mean = -1 * np.ones(D)
    init_log_std = -5 * np.ones(D)
    init_var_params = np.concatenate([init_mean, init_log_std])
    num_iters = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--plot" else 2000
    variational_params = adam(gradient, init_var_params, step_size=0.1, num_iters=num_iters, callback=callback)

    # ---- not autograd's: the checks --------------------------------------------------------
    import numpy

    mean, log_std = unpack_params(variational_params)
    estimate = lambda params: numpy.mean([-objective(params, 0) for _ in range(20)])
    first, last = estimate(trajectory[0]), estimate(variational_params)
    print(f"lower bound {first:.2f} -> {last:.2f}; mean {mean}, std {numpy.exp(log_std)}")
    assert last > first + 5 and -1.2 < last < 0.1, (first, last)   # the density is normalised
    assert abs(mean[0]) < 0.2, mean

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side run")
    else:
        anp, anorm = theirs["np"], theirs["norm"]   # log_density (above) with autograd's functions
        their_log_density = lambda x, t: anorm.logpdf(x[:, 1], 0, 1.35) + anorm.logpdf(x[:, 0], 0, anp.exp(x[:, 1]))
        their_objective, their_gradient, _ = theirs["black_box_variational_inference"](their_log_density, D, num_samples=2000)
        # its callback draws once per step, as ours does (the samples come from one RandomState)
        their_params = theirs["adam"](their_gradient, init_var_params, step_size=0.1, num_iters=num_iters,
                                      callback=lambda params, t, g: their_objective(params, t))
        numpy.testing.assert_allclose(variational_params, their_params, rtol=1e-8, atol=1e-10)
        print(f"autograd's run takes the same {num_iters} steps")
