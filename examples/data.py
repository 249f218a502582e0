"""autograd's ``examples/data.py``: the data sets its examples load, for the ported examples.

Ported from autograd's examples/data.py (HIPS/autograd, MIT licence). ``load_mnist`` and
``make_pinwheel`` are autograd's, unchanged but for imports:

* ``functrace.numpy`` and ``functrace.numpy.random`` for ``autograd.numpy`` and
  ``autograd.numpy.random`` (these functions only compute data: numpy arrays);
* ``from datasets import mnist_raw as mnist`` stands for ``import data_mnist`` (no MNIST
  download here: ``examples/datasets.py`` draws made-up digits in MNIST's layout), so the line
  ``data_mnist.mnist()`` in ``load_mnist`` reads ``mnist()``;
* ``plot_images`` and ``save_images`` (matplotlib) are left out: none of the ported programs
  plots.

Run:  python examples/data.py     (checks the shapes and dtypes the ported programs expect)
"""

# ruff: noqa: E731, I001  (autograd's lambdas; its import order)

import functrace.numpy as np
import functrace.numpy.random as npr
from datasets import mnist_raw as mnist


def load_mnist():
    partial_flatten = lambda x: np.reshape(x, (x.shape[0], np.prod(x.shape[1:])))
    one_hot = lambda x, k: np.array(x[:, None] == np.arange(k)[None, :], dtype=int)
    train_images, train_labels, test_images, test_labels = mnist()
    train_images = partial_flatten(train_images) / 255.0
    test_images = partial_flatten(test_images) / 255.0
    train_labels = one_hot(train_labels, 10)
    test_labels = one_hot(test_labels, 10)
    N_data = train_images.shape[0]

    return N_data, train_images, train_labels, test_images, test_labels


def make_pinwheel(radial_std, tangential_std, num_classes, num_per_class, rate, rs=None):
    """Based on code by Ryan P. Adams."""
    rs = rs if rs is not None else npr.RandomState(0)
    rads = np.linspace(0, 2 * np.pi, num_classes, endpoint=False)

    features = rs.randn(num_classes * num_per_class, 2) * np.array([radial_std, tangential_std])
    features[:, 0] += 1
    labels = np.repeat(np.arange(num_classes), num_per_class)

    angles = rads[labels] + rate * np.exp(features[:, 0])
    rotations = np.stack([np.cos(angles), -np.sin(angles), np.sin(angles), np.cos(angles)])
    rotations = np.reshape(rotations.T, (-1, 2, 2))

    return np.einsum("ti,tij->tj", features, rotations)


if __name__ == "__main__":
    import numpy

    N, train_images, train_labels, test_images, test_labels = load_mnist()
    assert train_images.shape == (N, 784) and train_images.dtype == numpy.float64
    assert train_labels.shape == (N, 10) and (train_labels.sum(1) == 1).all()
    assert 0 <= train_images.min() and train_images.max() <= 1
    pinwheel = make_pinwheel(0.3, 0.05, 3, 100, 0.4)
    assert pinwheel.shape == (300, 2) and isinstance(pinwheel, numpy.ndarray)
    print(f"load_mnist: {N} training and {len(test_images)} test digits; pinwheel: 300 points")
