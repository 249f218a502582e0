"""Made-up handwritten digits in MNIST's layout, for the ported examples (no download here).

JAX's ``examples/datasets.py`` and autograd's ``examples/data_mnist.py`` download MNIST; this
machine has no network and no installed package ships MNIST (scikit-learn's 8x8 ``digits``
would do, but scikit-learn is not a dependency), so ``mnist_raw`` draws digits instead: each
label 0-9 is its seven-segment glyph, drawn as blurred strokes on a 28x28 canvas with a
random slant, scale, offset, stroke width and pixel noise. The classes are not linearly
separable by a template (the jitter moves the strokes by several pixels) but a small MLP
learns them: chance is 10 %; with Adam a 784-200-100-10 tanh net reaches 83 % test accuracy
in 40 steps (neural_net.py), a 784-1024-1024-10 one 95 % in 80 (mnist_adam.py).

``mnist_raw()`` mirrors ``data_mnist.mnist()`` (uint8 images ``(N, 28, 28)``, uint8 labels);
``mnist()`` mirrors JAX's ``datasets.mnist()`` (float32 images ``(N, 784)`` in [0, 1],
one-hot float32 labels). Both take the sizes as arguments and are deterministic (seeded).

Run:  python examples/datasets.py      (prints the class balance and a picture of each digit)
"""

import numpy as np

# segments a..g of a seven-segment display as (x0, y0, x1, y1) in a unit box (y down)
_SEGMENTS = {"a": (0, 0, 1, 0), "b": (1, 0, 1, 0.5), "c": (1, 0.5, 1, 1), "d": (0, 1, 1, 1),
             "e": (0, 0.5, 0, 1), "f": (0, 0, 0, 0.5), "g": (0, 0.5, 1, 0.5)}
_DIGITS = ["abcdef", "bc", "abdeg", "abcdg", "bcfg", "acdfg", "acdefg", "abc", "abcdefg",
           "abcdfg"]


def _draw(label, rs):
    """One 28x28 picture in [0, 1] of ``label``."""
    yy, xx = np.mgrid[0:28, 0:28].astype(float)
    width, height = 9 + 3 * rs.rand(), 15 + 4 * rs.rand()
    slant = 0.15 * np.clip(rs.randn(), -2, 2)
    x_off, y_off = 14 - width / 2 + 2 * rs.randn(), 14 - height / 2 + 1.5 * rs.randn()
    thickness = 1.0 + 0.5 * rs.rand()
    image = np.zeros((28, 28))
    for seg in _DIGITS[label]:
        x0, y0, x1, y1 = _SEGMENTS[seg]
        p0 = np.array([x_off + width * x0 + slant * height * (0.5 - y0), y_off + height * y0])
        p1 = np.array([x_off + width * x1 + slant * height * (0.5 - y1), y_off + height * y1])
        d = p1 - p0
        t = np.clip(((xx - p0[0]) * d[0] + (yy - p0[1]) * d[1]) / (d @ d), 0, 1)
        dist2 = (xx - p0[0] - t * d[0]) ** 2 + (yy - p0[1] - t * d[1]) ** 2
        image = np.maximum(image, np.exp(-0.5 * dist2 / thickness**2))
    return np.clip(image + 0.1 * rs.randn(28, 28), 0, 1)


def mnist_raw(n_train=2560, n_test=512, seed=0):
    """(train images, train labels, test images, test labels): uint8 (N, 28, 28), uint8 labels."""
    rs = np.random.RandomState(seed)

    def pictures(n):
        labels = rs.randint(0, 10, n)
        images = np.stack([_draw(k, rs) for k in labels])
        return (255 * images).round().astype(np.uint8), labels.astype(np.uint8)

    return pictures(n_train) + pictures(n_test)


def mnist(n_train=2560, n_test=512, seed=0):
    """JAX's ``datasets.mnist()`` layout: float32 (N, 784) images in [0, 1], one-hot labels."""
    train_images, train_labels, test_images, test_labels = mnist_raw(n_train, n_test, seed)
    flat = lambda x: (x.reshape(len(x), 784) / np.float32(255)).astype(np.float32)  # noqa: E731
    one_hot = lambda y: (y[:, None] == np.arange(10)).astype(np.float32)  # noqa: E731
    return flat(train_images), one_hot(train_labels), flat(test_images), one_hot(test_labels)


if __name__ == "__main__":
    train_images, train_labels, test_images, test_labels = mnist(200, 50)
    assert train_images.shape == (200, 784) and train_labels.shape == (200, 10)
    assert train_images.dtype == np.float32 and 0 <= train_images.min() <= train_images.max() <= 1
    print("examples per class:", train_labels.sum(0).astype(int))
    for k in range(10):
        picture = train_images[np.argmax(train_labels[:, k])]
        print(f"label {k}:")
        print("\n".join("".join(" .:#"[min(3, int(v * 4))] for v in row[4:24:1])
                        for row in picture.reshape(28, 28)[3:25:2]))
