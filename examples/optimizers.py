"""autograd's ``autograd.misc.optimizers.adam``, on ``functrace.optim``: for the ported examples.

autograd's examples call ``adam(grad, x0, callback=None, num_iters=100, step_size=0.001,
b1=0.9, b2=0.999, eps=1e-8)`` with ``grad(x, i)`` a function of the parameters and the
iteration number and ``callback(x, i, g)``; functrace has no such driver (neither has JAX:
``jax.example_libraries.optimizers`` is a different API), so this is it, with the update
taken by ``functrace.optim.adam`` (optax's formula, which is autograd's: ``x - step_size *
mhat / (sqrt(vhat) + eps)`` with bias-corrected moments). autograd's runs on the flattened
parameter vector, this one on the pytree itself; the arithmetic is the same elementwise.

The ported files import it as ``from optimizers import adam`` in place of ``from
autograd.misc.optimizers import adam``.

Run:  python examples/optimizers.py      (checks it against autograd's, where installed)
"""

from functrace import optim


def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=10**-8):
    """Adam as described in http://arxiv.org/pdf/1412.6980.pdf (autograd's signature)."""
    opt = optim.adam(step_size, b1=b1, b2=b2, eps=eps)
    state = opt.init(x)
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        updates, state = opt.update(g, state, x)
        x = optim.apply_updates(x, updates)
    return x


if __name__ == "__main__":
    import numpy as np

    import functrace as ft
    import functrace.numpy as fnp

    target = {"a": np.arange(3.0), "b": [np.ones((2, 2))]}
    loss = lambda p, i: fnp.sum((p["a"] - target["a"]) ** 2) + \
        fnp.sum((p["b"][0] - target["b"][0]) ** 4) + 0.01 * i  # noqa: E731
    x0 = {"a": np.zeros(3), "b": [np.zeros((2, 2))]}
    seen = []
    ours = adam(ft.grad(loss), x0, callback=lambda x, i, g: seen.append(i), num_iters=50,
                step_size=0.1)
    assert seen == list(range(50))
    try:
        import autograd
        from autograd.misc.optimizers import adam as autograd_adam
    except ImportError:
        print("autograd not installed: skipping the comparison")
    else:
        import autograd.numpy as anp
        aloss = lambda p, i: anp.sum((p["a"] - target["a"]) ** 2) + \
            anp.sum((p["b"][0] - target["b"][0]) ** 4) + 0.01 * i  # noqa: E731
        theirs = autograd_adam(autograd.grad(aloss), x0, num_iters=50, step_size=0.1)
        for a, b in zip(ft.tree_util.tree_leaves(ours), ft.tree_util.tree_leaves(theirs)):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
        print("50 steps equal autograd.misc.optimizers.adam's to 1e-13")
