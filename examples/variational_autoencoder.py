"""A variational autoencoder (auto-encoding variational Bayes) trained with Adam.

Ported from autograd's examples/variational_autoencoder.py (HIPS/autograd, MIT licence). The
model and objective, down to ``vae_lower_bound``, are autograd's, unchanged but for imports:

* ``functrace.numpy`` for ``autograd.numpy``, ``functrace.grad``,
  ``functrace.scipy.special.expit`` and ``functrace.scipy.stats.norm`` for autograd's;
* ``numpy.random`` for ``autograd.numpy.random`` (the noise of the Monte Carlo estimate is
  drawn from a numpy RandomState inside the objective, on every call: functrace's un-jitted
  ``grad`` re-runs the Python function each time, as autograd's does);
* functrace has no optimizer library: ``adam`` (autograd.misc.optimizers.adam, same arguments
  and update, on any pytree of parameters) is written out below;
* there is no MNIST download here: ``load_mnist`` below makes 1,200 28x28 pictures of a
  blurred stroke at a random angle and offset (a two-parameter family), and ``save_images``
  (matplotlib) runs only with ``--plot``.

``ft.jit`` is not used: the objective draws its noise from a RandomState and picks its batch
from the iteration number, so a compiled graph would freeze the first draw and batch.

The ``__main__`` block is autograd's with the number of iterations as a command-line argument
(default: 15 epochs of the data set, 75 iterations, as autograd's 15 epochs; CI runs 30), and
its callback also reports the last iteration and keeps the numbers it prints. The script then
checks that the objective (minus the lower bound per pixel) starts at log 2 (an
untrained decoder says 1/2 for every pixel) and falls by more than a tenth, on the training
batches and on the test set (0.693 -> 0.61 in 30 iterations, 0.46 in 75), and, with autograd
installed, that this file with autograd's imports put back (``IMPORTS``) computes the same
gradient for the same random draws.

Run:  python examples/variational_autoencoder.py [iterations] [--plot]
"""

import itertools
import sys

import numpy
import numpy.random as npr

import functrace.numpy as np
from functrace import grad
from functrace.scipy.special import expit as sigmoid
from functrace.scipy.stats import norm


def diag_gaussian_log_density(x, mu, log_std):
    return np.sum(norm.logpdf(x, mu, np.exp(log_std)), axis=-1)


def unpack_gaussian_params(params):
    # Params of a diagonal Gaussian.
    D = np.shape(params)[-1] // 2
    mean, log_std = params[:, :D], params[:, D:]
    return mean, log_std


def sample_diag_gaussian(mean, log_std, rs):
    return rs.randn(*mean.shape) * np.exp(log_std) + mean


def bernoulli_log_density(targets, unnormalized_logprobs):
    # unnormalized_logprobs are in R
    # Targets must be -1 or 1
    label_probabilities = -np.logaddexp(0, -unnormalized_logprobs * targets)
    return np.sum(label_probabilities, axis=-1)  # Sum across pixels.


def relu(x):
    return np.maximum(0, x)


def init_net_params(scale, layer_sizes, rs=None):
    """Build a (weights, biases) tuples for all layers."""
    rs = rs if rs is not None else npr.RandomState(0)
    return [
        (
            scale * rs.randn(m, n),  # weight matrix
            scale * rs.randn(n),
        )  # bias vector
        for m, n in itertools.pairwise(layer_sizes)
    ]


def batch_normalize(activations):
    mbmean = np.mean(activations, axis=0, keepdims=True)
    return (activations - mbmean) / (np.std(activations, axis=0, keepdims=True) + 1)


def neural_net_predict(params, inputs):
    """Params is a list of (weights, bias) tuples.
    inputs is an (N x D) matrix.
    Applies batch normalization to every layer but the last."""
    for W, b in params[:-1]:
        outputs = batch_normalize(np.dot(inputs, W) + b)  # linear transformation
        inputs = relu(outputs)  # nonlinear transformation
    outW, outb = params[-1]
    outputs = np.dot(inputs, outW) + outb
    return outputs


def nn_predict_gaussian(params, inputs):
    # Returns means and diagonal variances
    return unpack_gaussian_params(neural_net_predict(params, inputs))


def generate_from_prior(gen_params, num_samples, noise_dim, rs):
    latents = rs.randn(num_samples, noise_dim)
    return sigmoid(neural_net_predict(gen_params, latents))


def p_images_given_latents(gen_params, images, latents):
    preds = neural_net_predict(gen_params, latents)
    return bernoulli_log_density(images, preds)


def vae_lower_bound(gen_params, rec_params, data, rs):
    # We use a simple Monte Carlo estimate of the KL
    # divergence from the prior.
    q_means, q_log_stds = nn_predict_gaussian(rec_params, data)
    latents = sample_diag_gaussian(q_means, q_log_stds, rs)
    q_latents = diag_gaussian_log_density(latents, q_means, q_log_stds)
    p_latents = diag_gaussian_log_density(latents, 0, 0)
    likelihood = p_images_given_latents(gen_params, data, latents)
    return np.mean(p_latents + likelihood - q_latents)


# ---- not autograd's: stand-ins for its helpers, and the checks ------------------------------

def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=10**-8):
    """Adam as in autograd.misc.optimizers, on any pytree of arrays."""
    from functrace.tree_util import tree_map
    m = tree_map(numpy.zeros_like, x)
    v = tree_map(numpy.zeros_like, x)
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = tree_map(lambda m, g: (1 - b1) * g + b1 * m, m, g)
        v = tree_map(lambda v, g: (1 - b2) * (g**2) + b2 * v, v, g)
        mhat = tree_map(lambda m: m / (1 - b1 ** (i + 1)), m)
        vhat = tree_map(lambda v: v / (1 - b2 ** (i + 1)), v)
        x = tree_map(lambda x, m, v: x - step_size * m / (numpy.sqrt(v) + eps), x, mhat, vhat)
    return x


def load_mnist(n_train=1000, n_test=200, rs=None):
    """MNIST's layout (N, train images, train labels, test images, test labels), flattened
    28x28 pictures in [0, 1]: a blurred stroke through the picture at a random angle and
    offset. There are no labels (None)."""
    rs = rs if rs is not None else numpy.random.RandomState(1)
    yy, xx = numpy.mgrid[0:28, 0:28] / 27.0 - 0.5

    def pictures(n):
        angle = numpy.pi * rs.rand(n, 1, 1)
        offset = 0.6 * (rs.rand(n, 1, 1) - 0.5)
        dist = numpy.cos(angle) * xx + numpy.sin(angle) * yy - offset
        return numpy.exp(-0.5 * (dist / 0.1) ** 2).reshape(n, 784)

    return n_train, pictures(n_train), None, pictures(n_test), None


def save_images(images, filename, vmin=None, vmax=None):
    """A grid of the (N, 784) pictures, written to ``filename`` with matplotlib."""
    import matplotlib.pyplot as plt
    n = len(images)
    grid = numpy.ones((29 * ((n + 4) // 5) + 1, 29 * 5 + 1)) * vmin
    for i, image in enumerate(numpy.asarray(images)):
        r, c = 1 + 29 * (i // 5), 1 + 29 * (i % 5)
        grid[r:r + 28, c:c + 28] = image.reshape(28, 28)
    plt.imsave(filename, grid, vmin=vmin, vmax=vmax, cmap="binary")


# this file's import lines -> autograd's (the only lines of the program that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "from functrace import grad\n": "from autograd import grad\n",
    "from functrace.scipy.special import expit as sigmoid\n":
        "from autograd.scipy.special import expit as sigmoid\n",
    "from functrace.scipy.stats import norm\n": "from autograd.scipy.stats import norm\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--plot"]
    plot = "--plot" in sys.argv

    # Model hyper-parameters
    latent_dim = 10
    data_dim = 784  # How many pixels in each image (28x28).
    gen_layer_sizes = [latent_dim, 300, 200, data_dim]
    rec_layer_sizes = [data_dim, 200, 300, latent_dim * 2]

    # Training parameters
    param_scale = 0.01
    batch_size = 200
    num_epochs = 15
    step_size = 0.001

    print("Loading training data...")
    N, train_images, _, test_images, _ = load_mnist()

    def binarise(images):
        on = images > 0.5
        images = images * 0 - 1
        images[on] = 1.0
        return images

    print("Binarising training data...")
    train_images = binarise(train_images)
    test_images = binarise(test_images)

    init_gen_params = init_net_params(param_scale, gen_layer_sizes)
    init_rec_params = init_net_params(param_scale, rec_layer_sizes)
    combined_init_params = (init_gen_params, init_rec_params)

    num_batches = int(np.ceil(len(train_images) / batch_size))

    def batch_indices(iter):
        idx = iter % num_batches
        return slice(idx * batch_size, (idx + 1) * batch_size)

    # Define training objective
    seed = npr.RandomState(0)

    def objective(combined_params, iter):
        data_idx = batch_indices(iter)
        gen_params, rec_params = combined_params
        return -vae_lower_bound(gen_params, rec_params, train_images[data_idx], seed) / data_dim

    # Get gradients of objective using autograd.
    objective_grad = grad(objective)

    print("     Epoch     |    Objective       |    Test ELBO  ")
    bounds, test_bounds = [], []
    num_iters = int(args[0]) if args else num_epochs * num_batches

    def print_perf(combined_params, iter, grad):
        if iter % 10 == 0 or iter == num_iters - 1:
            gen_params, rec_params = combined_params
            bound = np.mean(objective(combined_params, iter))
            bounds.append(bound)
            message = f"{iter // num_batches:15}|{bound:20}|"
            if iter % 100 == 0 or iter == num_iters - 1:
                test_bound = -vae_lower_bound(gen_params, rec_params, test_images, seed) / data_dim
                test_bounds.append(test_bound)
                message += f"{test_bound:20}"
            print(message)

            fake_data = generate_from_prior(gen_params, 20, latent_dim, seed)
            if plot:
                save_images(fake_data, "vae_samples.png", vmin=0, vmax=1)

    # The optimizers provided can optimize lists, tuples, or dicts of parameters.
    optimized_params = adam(
        objective_grad,
        combined_init_params,
        step_size=step_size,
        num_iters=num_iters,
        callback=print_perf,
    )

    # ---- not autograd's: the checks --------------------------------------------------------
    print(f"objective {bounds[0]:.4f} -> {bounds[-1]:.4f}, "
          f"test set {test_bounds[0]:.4f} -> {test_bounds[-1]:.4f}")
    assert abs(bounds[0] - numpy.log(2)) < 1e-3, bounds      # the untrained decoder: p = 1/2
    assert bounds[-1] < 0.9 * bounds[0] and test_bounds[-1] < 0.9 * test_bounds[0]

    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side gradient")
    else:
        batch = train_images[:batch_size]

        def bound_of(lower_bound):
            return lambda params: lower_bound(*params, batch, npr.RandomState(7))

        from functrace.tree_util import tree_leaves
        ours = grad(bound_of(vae_lower_bound))(optimized_params)
        their = theirs["grad"](bound_of(theirs["vae_lower_bound"]))(optimized_params)
        numpy.testing.assert_allclose(numpy.concatenate([x.ravel() for x in tree_leaves(ours)]),
                                      numpy.concatenate([x.ravel() for x in tree_leaves(their)]),
                                      rtol=1e-9, atol=1e-12)
        print("autograd's gradient of the same program, same draws, agrees to 1e-9")
