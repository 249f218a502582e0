"""The MXNet-style imperative API: record, backward, .grad, next to the functional ft.grad.

Trains a small two-layer network with ``autograd.record()`` / ``loss.backward()`` / an SGD
step written in place, checks the gradients against ``ft.grad`` on the same loss, adds a
gradient penalty with ``create_graph=True``, and saves the recorded graph as a Symbol.
Run: python examples/imperative.py
"""

import numpy as np

import functrace as ft
import functrace.numpy as fnp
from functrace import autograd

rng = np.random.default_rng(0)
X = rng.normal(size=(64, 3))
Y = np.sin(X @ np.array([1.0, -2.0, 0.5]))[:, None]

# -- parameters are marked arrays: they carry .grad ------------------------------------------
W1 = autograd.attach_grad(rng.normal(size=(3, 16)) * 0.5)
b1 = autograd.attach_grad(np.zeros(16))
W2 = autograd.attach_grad(rng.normal(size=(16, 1)) * 0.5)
params = [W1, b1, W2]


def net(W1, b1, W2, x):
    return fnp.tanh(x @ W1 + b1) @ W2


def loss_fn(W1, b1, W2):
    return fnp.mean((net(W1, b1, W2, X) - Y) ** 2)


# -- the imperative idiom ----------------------------------------------------------------------
first = None
for step in range(200):
    with autograd.record():
        loss = loss_fn(W1, b1, W2)
    loss.backward()
    if step == 0:
        first = float(loss)
        # the same gradients as the functional idiom on the same function
        expected = ft.grad(loss_fn, argnums=(0, 1, 2))(*[p.asnumpy() for p in params])
        for p, g in zip(params, expected, strict=True):
            np.testing.assert_allclose(p.grad.asnumpy(), g, rtol=1e-10, atol=1e-12)
    for p in params:
        p[:] = p - 0.1 * p.grad        # in place, outside record(): allowed
print(f"loss {first:.4f} -> {float(loss):.4f}")
assert float(loss) < 0.5 * first

# -- a gradient penalty: differentiate a gradient (create_graph=True) -------------------------
with autograd.record():
    loss = loss_fn(W1, b1, W2)
    gW1, = autograd.grad(loss, [W1], create_graph=True)
    total = loss + 0.01 * (gW1 ** 2).sum()
total.backward()


def penalised(W1, b1, W2):
    return loss_fn(W1, b1, W2) + 0.01 * fnp.sum(ft.grad(loss_fn)(W1, b1, W2) ** 2)


np.testing.assert_allclose(W1.grad.asnumpy(),
                           ft.grad(penalised)(*[p.asnumpy() for p in params]), rtol=1e-9)

# -- the recorded graph as a Symbol ------------------------------------------------------------
x = autograd.array(X[:4])             # data: an unmarked array, so an input of the Symbol
with autograd.record():
    out = net(W1, b1, W2, x)
sym = autograd.get_symbol(out)        # inputs in the order they were first read: x, W1, b1, W2
print(sym)
again = ft.Symbol.from_json(sym.to_json())
np.testing.assert_allclose(again(X[:4], *[p.asnumpy() for p in params]), out.asnumpy())
print("ok")
