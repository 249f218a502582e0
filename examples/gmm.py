"""Implements a Gaussian mixture model, in which parameters are fit using
gradient descent.  This example runs on 2-dimensional data, but the model
works on arbitrarily-high dimension.

Ported from autograd's examples/gmm.py (HIPS/autograd, MIT licence; the paragraph above is
its docstring). The program is autograd's, unchanged but for its imports and its plotting:

* ``functrace.numpy``, ``functrace.numpy.random``, ``functrace.grad`` and
  ``functrace.scipy.special.logsumexp`` for autograd's; ``from functrace.scipy.stats import
  multivariate_normal as mvn`` for ``import autograd.scipy.stats.multivariate_normal as mvn``;
  ``make_pinwheel`` from the ported ``data.py``;
* autograd's ``hessian_vector_product`` and ``misc.flatten.flatten_func`` have no functrace
  (or JAX) counterpart: both are written out below, line for line autograd's, on
  ``functrace.grad`` and ``functrace.flatten_util.ravel_pytree``;
* matplotlib is imported and used only with ``--plot``; the callback also keeps the
  log-likelihoods; ``scipy.optimize.minimize`` (Newton-CG) gets ``options={"maxiter": n}``
  with n from the command line (default none: autograd's run to convergence, 123 iterations
  and 1354 Hessian-vector products, several minutes here as with autograd).

autograd's ``flatten_func`` flattens the objective's value too, so the function scipy
differentiates returns an array of shape (1,): ``ft.grad`` takes a one-element output, as
autograd does (``jax.grad`` asks for a scalar). Run to convergence it takes 123 Newton-CG
iterations (log-likelihood -710 -> 0.656; -521 after 10); autograd's own run ends at 2.216
after 122: the two paths part after the first few iterations by rounding, as Newton-CG's
inner solves are sensitive.

The script checks that the log-likelihood rose, and, with autograd installed, that this
file with autograd's imports put back (``IMPORTS``) and autograd's own ``flatten_func``,
``grad`` and ``hessian_vector_product`` compute the same objective, gradient and
Hessian-vector product at the initial parameters.

Run:  python examples/gmm.py [maxiter] [--plot]
"""

# ruff: noqa: E501, E731, I001  (autograd's lines as they are, its lambdas, its import order)

import sys

from data import make_pinwheel
from scipy.optimize import minimize

import functrace.numpy as np
import functrace.numpy.random as npr
from functrace.scipy.stats import multivariate_normal as mvn
from functrace import grad
from functrace.flatten_util import ravel_pytree as flatten
from functrace.scipy.special import logsumexp


# ---- not autograd's program: its hessian_vector_product and misc.flatten.flatten_func ------

def hessian_vector_product(fun, argnum=0):
    """autograd's hessian_tensor_product: grad of (grad(fun) . vector)."""
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return np.tensordot(fun_grad(*args, **kwargs), vector, np.ndim(vector))

    return grad(vector_dot_grad, argnum)


def flatten_func(func, example):
    _ex, unflatten = flatten(example)
    _func = lambda _x, *args: flatten(func(unflatten(_x), *args))[0]
    return _func, unflatten, _ex


# ---- autograd's program ----------------------------------------------------------------------


def init_gmm_params(num_components, D, scale, rs=None):
    rs = rs if rs is not None else npr.RandomState(0)
    return {
        "log proportions": rs.randn(num_components) * scale,
        "means": rs.randn(num_components, D) * scale,
        "lower triangles": np.zeros((num_components, D, D)) + np.eye(D),
    }


def log_normalize(x):
    return x - logsumexp(x)


def unpack_gmm_params(params):
    normalized_log_proportions = log_normalize(params["log proportions"])
    return normalized_log_proportions, params["means"], params["lower triangles"]


def gmm_log_likelihood(params, data):
    cluster_lls = []
    for log_proportion, mean, cov_sqrt in zip(*unpack_gmm_params(params)):
        cov = np.dot(cov_sqrt.T, cov_sqrt)
        cluster_lls.append(log_proportion + mvn.logpdf(data, mean, cov))
    return np.sum(logsumexp(np.vstack(cluster_lls), axis=0))


def plot_ellipse(ax, mean, cov_sqrt, alpha, num_points=100):
    angles = np.linspace(0, 2 * np.pi, num_points)
    circle_pts = np.vstack([np.cos(angles), np.sin(angles)]).T * 2.0
    cur_pts = mean + np.dot(circle_pts, cov_sqrt)
    ax.plot(cur_pts[:, 0], cur_pts[:, 1], "-", alpha=alpha)


def plot_gaussian_mixture(params, ax):
    for log_proportion, mean, cov_sqrt in zip(*unpack_gmm_params(params)):
        alpha = np.minimum(1.0, np.exp(log_proportion) * 10)
        plot_ellipse(ax, mean, cov_sqrt, alpha)



# ---- not autograd's: the checks ------------------------------------------------------------

# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import functrace.numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "from functrace.scipy.stats import multivariate_normal as mvn\n": "import autograd.scipy.stats.multivariate_normal as mvn\n",
    "from functrace import grad\n": "from autograd import grad\n",
    "from functrace.flatten_util import ravel_pytree as flatten\n": "from autograd.misc.flatten import flatten\n",
    "from functrace.scipy.special import logsumexp\n": "from autograd.scipy.special import logsumexp\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    init_params = init_gmm_params(num_components=10, D=2, scale=0.1)

    data = make_pinwheel(radial_std=0.3, tangential_std=0.05, num_classes=3, num_per_class=100, rate=0.4)

    def objective(params):
        return -gmm_log_likelihood(params, data)

    flattened_obj, unflatten, flattened_init_params = flatten_func(objective, init_params)

    plot = "--plot" in sys.argv
    if plot:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(12, 8), facecolor="white")
        ax = fig.add_subplot(111, frameon=False)
        plt.show(block=False)

    log_likelihoods = [-objective(init_params)]
    maxiter = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--plot" else None

    def callback(flattened_params):
        params = unflatten(flattened_params)
        print(f"Log likelihood {-objective(params)}")
        log_likelihoods.append(-objective(params))
        if not plot:
            return
        ax.cla()
        ax.plot(data[:, 0], data[:, 1], "k.")
        ax.set_xticks([])
        ax.set_yticks([])
        plot_gaussian_mixture(params, ax)
        plt.draw()
        plt.pause(1.0 / 60.0)

    result = minimize(
        flattened_obj,
        flattened_init_params,
        jac=grad(flattened_obj),
        hessp=hessian_vector_product(flattened_obj),
        method="Newton-CG",
        callback=callback,
        options={"maxiter": maxiter},
    )

    # ---- not autograd's: the checks --------------------------------------------------------
    import numpy

    print(f"log likelihood {log_likelihoods[0]:.3f} -> {log_likelihoods[-1]:.3f} in {result.nit} iterations")
    assert log_likelihoods[-1] > log_likelihoods[0] + 100, log_likelihoods
    assert result.success or result.nit == maxiter, result.message

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side run")
    else:
        their_obj = lambda params: -theirs["gmm_log_likelihood"](params, data)
        import autograd
        from autograd.misc.flatten import flatten_func as their_flatten_func
        their_flat, _, _ = their_flatten_func(their_obj, init_params)
        x, v = flattened_init_params, numpy.random.RandomState(1).randn(len(flattened_init_params))
        numpy.testing.assert_allclose(flattened_obj(x), their_flat(x), rtol=1e-12)
        numpy.testing.assert_allclose(grad(flattened_obj)(x), autograd.grad(their_flat)(x), rtol=1e-9, atol=1e-12)
        numpy.testing.assert_allclose(hessian_vector_product(flattened_obj)(x, v), autograd.hessian_vector_product(their_flat)(x, v), rtol=1e-9, atol=1e-12)
        print("autograd computes the same objective, gradient and Hessian-vector product")
