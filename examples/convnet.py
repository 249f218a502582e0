"""A convolutional net trained by stochastic gradient descent with momentum.

The net follows LeNet-5 (LeCun et al. 1998): two convolution + max-pooling stages, then
three fully connected layers.

Ported from autograd's examples/convnet.py (HIPS/autograd, MIT licence). The network, down
to ``softmax_layer``, is autograd's, unchanged but for its imports:

* ``functrace.numpy`` for ``autograd.numpy``, ``functrace.grad``, and
  ``functrace.scipy.signal.convolve`` for ``autograd.scipy.signal.convolve``. The conv layer
  calls it with autograd's ``axes``/``dot_axes`` extension of scipy's signature (convolve
  the image axes, sum over the input channels, keep the batch and the filters), which
  functrace's ``convolve`` takes too;
* ``numpy.random`` for ``autograd.numpy.random`` (the initial weights);
* there is no MNIST download here: ``mnist`` below (for ``data_mnist.mnist``, with MNIST's
  layout and dtypes) makes 28x28 pictures of a blurred stroke whose angle is the label, ten
  classes, 1,024 for training and 256 for testing.

In the ``__main__`` block: ``data_mnist.mnist()`` is ``mnist()``, the initial weights are
seeded (``RandomState(0)``; autograd's draws are unseeded), the number of epochs is a
command-line argument (default 8; autograd's runs 50 epochs of MNIST; CI runs 3), the
errors are printed once more after the last epoch, and the script checks that:

* the training error falls from chance (about 0.9) below 0.6 in 3 epochs (0.42 after 3,
  0.23 after 8), and the test error with it;
* the gradient matches central differences in a random direction, and, with autograd
  installed, this file with autograd's imports put back (``IMPORTS``) computes the same
  gradient on a batch.

The gradient is a pure function of the weights and the batch, so ``ft.jit(grad(loss_fun))``
works too, and takes 0.35 s a step instead of 0.39 s un-jitted (batch of 256, one core);
but compiling it costs 8-18 s with a cold kernel cache, more than a short run saves, so this
script stays un-jitted. Wrap it for a long run.

Run:  python examples/convnet.py [epochs]
"""

# ruff: noqa: E501, E731  (autograd's lines as they are: its line length is 120, and lambdas)

import sys

import numpy
import numpy.random as npr

import functrace.numpy as np
import functrace.scipy.signal
from functrace import grad

convolve = functrace.scipy.signal.convolve


class WeightsParser:
    """A helper class to index into a parameter vector."""

    def __init__(self):
        self.idxs_and_shapes = {}
        self.N = 0

    def add_weights(self, name, shape):
        start = self.N
        self.N += np.prod(shape)
        self.idxs_and_shapes[name] = (slice(start, self.N), shape)

    def get(self, vect, name):
        idxs, shape = self.idxs_and_shapes[name]
        return np.reshape(vect[idxs], shape)


def make_batches(N_total, N_batch):
    start = 0
    batches = []
    while start < N_total:
        batches.append(slice(start, start + N_batch))
        start += N_batch
    return batches


def logsumexp(X, axis, keepdims=False):
    max_X = np.max(X)
    return max_X + np.log(np.sum(np.exp(X - max_X), axis=axis, keepdims=keepdims))


def make_nn_funs(input_shape, layer_specs, L2_reg):
    parser = WeightsParser()
    cur_shape = input_shape
    for layer in layer_specs:
        N_weights, cur_shape = layer.build_weights_dict(cur_shape)
        parser.add_weights(layer, (N_weights,))

    def predictions(W_vect, inputs):
        """Outputs normalized log-probabilities.
        shape of inputs : [data, color, y, x]"""
        cur_units = inputs
        for layer in layer_specs:
            cur_weights = parser.get(W_vect, layer)
            cur_units = layer.forward_pass(cur_units, cur_weights)
        return cur_units

    def loss(W_vect, X, T):
        log_prior = -L2_reg * np.dot(W_vect, W_vect)
        log_lik = np.sum(predictions(W_vect, X) * T)
        return -log_prior - log_lik

    def frac_err(W_vect, X, T):
        return np.mean(np.argmax(T, axis=1) != np.argmax(pred_fun(W_vect, X), axis=1))

    return parser.N, predictions, loss, frac_err


class conv_layer:
    def __init__(self, kernel_shape, num_filters):
        self.kernel_shape = kernel_shape
        self.num_filters = num_filters

    def forward_pass(self, inputs, param_vector):
        # Input dimensions:  [data, color_in, y, x]
        # Params dimensions: [color_in, color_out, y, x]
        # Output dimensions: [data, color_out, y, x]
        params = self.parser.get(param_vector, "params")
        biases = self.parser.get(param_vector, "biases")
        conv = convolve(inputs, params, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid")
        return conv + biases

    def build_weights_dict(self, input_shape):
        # Input shape : [color, y, x] (don't need to know number of data yet)
        self.parser = WeightsParser()
        self.parser.add_weights("params", (input_shape[0], self.num_filters) + self.kernel_shape)
        self.parser.add_weights("biases", (1, self.num_filters, 1, 1))
        output_shape = (self.num_filters,) + self.conv_output_shape(input_shape[1:], self.kernel_shape)
        return self.parser.N, output_shape

    def conv_output_shape(self, A, B):
        return (A[0] - B[0] + 1, A[1] - B[1] + 1)


class maxpool_layer:
    def __init__(self, pool_shape):
        self.pool_shape = pool_shape

    def build_weights_dict(self, input_shape):
        # input_shape dimensions: [color, y, x]
        output_shape = list(input_shape)
        for i in [0, 1]:
            assert input_shape[i + 1] % self.pool_shape[i] == 0, "maxpool shape should tile input exactly"
            output_shape[i + 1] = input_shape[i + 1] / self.pool_shape[i]
        return 0, output_shape

    def forward_pass(self, inputs, param_vector):
        new_shape = inputs.shape[:2]
        for i in [0, 1]:
            pool_width = self.pool_shape[i]
            img_width = inputs.shape[i + 2]
            new_shape += (img_width // pool_width, pool_width)
        result = inputs.reshape(new_shape)
        return np.max(np.max(result, axis=3), axis=4)


class full_layer:
    def __init__(self, size):
        self.size = size

    def build_weights_dict(self, input_shape):
        # Input shape is anything (all flattened)
        input_size = np.prod(input_shape, dtype=int)
        self.parser = WeightsParser()
        self.parser.add_weights("params", (input_size, self.size))
        self.parser.add_weights("biases", (self.size,))
        return self.parser.N, (self.size,)

    def forward_pass(self, inputs, param_vector):
        params = self.parser.get(param_vector, "params")
        biases = self.parser.get(param_vector, "biases")
        if inputs.ndim > 2:
            inputs = inputs.reshape((inputs.shape[0], np.prod(inputs.shape[1:])))
        return self.nonlinearity(np.dot(inputs[:, :], params) + biases)


class tanh_layer(full_layer):
    def nonlinearity(self, x):
        return np.tanh(x)


class softmax_layer(full_layer):
    def nonlinearity(self, x):
        return x - logsumexp(x, axis=1, keepdims=True)


# ---- not autograd's: a stand-in for its data, and the checks --------------------------------

def mnist(n_train=1024, n_test=256, rs=None):
    """MNIST's layout: (train images, train labels, test images, test labels), uint8 images
    (N, 28, 28) and labels 0-9. Label k is a blurred stroke at an angle of about k * 18
    degrees (jittered, at a random offset)."""
    rs = rs if rs is not None else numpy.random.RandomState(1)
    yy, xx = numpy.mgrid[0:28, 0:28] / 27.0 - 0.5

    def pictures(n):
        labels = rs.randint(0, 10, n)
        angle = numpy.pi * (labels + 0.4 * rs.randn(n)).reshape(n, 1, 1) / 10
        offset = 0.3 * (rs.rand(n, 1, 1) - 0.5)
        dist = numpy.cos(angle) * xx + numpy.sin(angle) * yy - offset
        return (255 * numpy.exp(-0.5 * (dist / 0.08) ** 2)).astype(numpy.uint8), \
            labels.astype(numpy.uint8)

    return pictures(n_train) + pictures(n_test)


# this file's import lines -> autograd's (the only lines of the network that differ)
IMPORTS = {
    "import functrace.numpy as np\n": "import autograd.numpy as np\n",
    "import numpy.random as npr\n": "import autograd.numpy.random as npr\n",
    "import functrace.scipy.signal\n": "import autograd.scipy.signal\n",
    "from functrace import grad\n": "from autograd import grad\n",
    "convolve = functrace.scipy.signal.convolve\n": "convolve = autograd.scipy.signal.convolve\n",
}


def autograd_version():
    """This module's functions with autograd's imports put back, or None without autograd."""
    from autograd_port import with_imports
    return with_imports(__file__, IMPORTS)


if __name__ == "__main__":
    import functrace as ft

    # Network parameters
    L2_reg = 1.0
    input_shape = (1, 28, 28)
    layer_specs = [
        conv_layer((5, 5), 6),
        maxpool_layer((2, 2)),
        conv_layer((5, 5), 16),
        maxpool_layer((2, 2)),
        tanh_layer(120),
        tanh_layer(84),
        softmax_layer(10),
    ]

    # Training parameters
    param_scale = 0.1
    learning_rate = 1e-3
    momentum = 0.9
    batch_size = 256
    num_epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 8

    # Load and process MNIST data
    print("Loading training data...")
    add_color_channel = lambda x: x.reshape((x.shape[0], 1, x.shape[1], x.shape[2]))
    one_hot = lambda x, K: np.array(x[:, None] == np.arange(K)[None, :], dtype=int)
    train_images, train_labels, test_images, test_labels = mnist()
    train_images = add_color_channel(train_images) / 255.0
    test_images = add_color_channel(test_images) / 255.0
    train_labels = one_hot(train_labels, 10)
    test_labels = one_hot(test_labels, 10)
    N_data = train_images.shape[0]

    # Make neural net functions
    N_weights, pred_fun, loss_fun, frac_err = make_nn_funs(input_shape, layer_specs, L2_reg)
    loss_grad = grad(loss_fun)

    # Initialize weights
    rs = npr.RandomState(0)
    W = rs.randn(N_weights) * param_scale

    # Check the gradients numerically, just to be safe
    # quick_grad_check(loss_fun, W, (train_images[:50], train_labels[:50]))

    print("    Epoch      |    Train err  |   Test error  ")

    errors = []

    def print_perf(epoch, W):
        test_perf = frac_err(W, test_images, test_labels)
        train_perf = frac_err(W, train_images, train_labels)
        errors.append((train_perf, test_perf))
        print(f"{epoch:15}|{train_perf:15}|{test_perf:15}")

    # Train with sgd
    batch_idxs = make_batches(N_data, batch_size)
    cur_dir = np.zeros(N_weights)

    for epoch in range(num_epochs):
        print_perf(epoch, W)
        for idxs in batch_idxs:
            grad_W = loss_grad(W, train_images[idxs], train_labels[idxs])
            cur_dir = momentum * cur_dir + (1.0 - momentum) * grad_W
            W -= learning_rate * cur_dir

    # ---- not autograd's: the checks --------------------------------------------------------
    print_perf(num_epochs, W)
    (train0, test0), (train1, test1) = errors[0], errors[-1]
    print(f"training error {train0:.3f} -> {train1:.3f}, test error {test0:.3f} -> {test1:.3f}")
    assert train0 > 0.8 and train1 < 0.6 and test1 < 0.7, errors

    X, T = train_images[:16], train_labels[:16]
    ft.test_util.check_grads(lambda W: loss_fun(W, X, T), (W,), order=1)
    theirs = autograd_version()
    if theirs is None:
        print("autograd not installed: skipping the side-by-side gradient")
    else:
        *_, their_loss, _ = theirs["make_nn_funs"](input_shape, [
            theirs["conv_layer"]((5, 5), 6), theirs["maxpool_layer"]((2, 2)),
            theirs["conv_layer"]((5, 5), 16), theirs["maxpool_layer"]((2, 2)),
            theirs["tanh_layer"](120), theirs["tanh_layer"](84), theirs["softmax_layer"](10)],
            L2_reg)
        X, T = train_images[:batch_size], train_labels[:batch_size]
        numpy.testing.assert_allclose(loss_grad(W, X, T), theirs["grad"](their_loss)(W, X, T),
                                      rtol=1e-9, atol=1e-9)
        print("the gradient matches central differences and autograd's on the same program")
