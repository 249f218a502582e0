# A demo of gradients through scipy.integrate.odeint,
# estimating the dynamics of a system given a trajectory.
#
# Ported from autograd's examples/ode_net.py (HIPS/autograd) to functrace. What changed:
# * imports: functrace.numpy for autograd.numpy, numpy.random for autograd.numpy.random,
#   functrace.grad for autograd.grad, functrace.scipy.integrate.odeint; autograd.builtins.tuple
#   is not needed (a plain tuple or list is a pytree); functrace has no optimizer library, so
#   `adam` (autograd.misc.optimizers.adam, same arguments and update) is written out below;
# * odeint takes JAX's signature, extra arguments as positional `*args`, where autograd's
#   wraps scipy's (`args=(...)`): `odeint(func, y0, t, args=(A,))` becomes
#   `odeint(func, y0, t, A)`, and `odeint(nn_predict, y0, t, tuple((params,)), rtol=0.01)`
#   becomes `odeint(nn_predict, y0, t, params, rtol=0.01)`;
# * the gradient is wrapped in ft.jit (about 0.1-0.5 s per step instead of seconds eager);
# * the number of iterations is a command-line argument (default 60, so that the script runs
#   in CI; autograd's runs 1000), the callback prints every 10 iterations, plots only with
#   --plot (matplotlib), and the script checks that training lowered the loss.
#
# Run:  python examples/ode_net.py [iterations] [--plot]

import sys

import numpy as npo
import numpy.random as npr

import functrace as ft
import functrace.numpy as np
from functrace import grad
from functrace.scipy.integrate import odeint

N = 30  # Dataset size
D = 2  # Data dimension
max_T = 1.5


# Two-dimensional damped oscillator
def func(y, t0, A):
    return np.dot(y**3, A)


def nn_predict(inputs, t, params):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.maximum(0, outputs)
    return outputs


def init_nn_params(scale, layer_sizes, rs=npr.RandomState(0)):  # noqa: B008  (as autograd)
    """Build a list of (weights, biases) tuples, one for each layer."""
    return [
        (
            rs.randn(insize, outsize) * scale,  # weight matrix
            rs.randn(outsize) * scale,
        )  # bias vector
        for insize, outsize in zip(layer_sizes[:-1], layer_sizes[1:])
    ]


# Define neural ODE model.
def ode_pred(params, y0, t):
    return odeint(nn_predict, y0, t, params, rtol=0.01)


def L1_loss(pred, targets):
    return np.mean(np.abs(pred - targets))


def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=10**-8):
    """Adam as in autograd.misc.optimizers, on any pytree of arrays."""
    tree_map = ft.tree_util.tree_map
    m = tree_map(npo.zeros_like, x)
    v = tree_map(npo.zeros_like, x)
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = tree_map(lambda m, g: (1 - b1) * g + b1 * m, m, g)
        v = tree_map(lambda v, g: (1 - b2) * (g**2) + b2 * v, v, g)
        mhat = tree_map(lambda m: m / (1 - b1 ** (i + 1)), m)
        vhat = tree_map(lambda v: v / (1 - b2 ** (i + 1)), v)
        x = tree_map(lambda x, m, v: x - step_size * m / (npo.sqrt(v) + eps), x, mhat, vhat)
    return x


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--plot"]
    num_iters = int(args[0]) if args else 60
    plot = "--plot" in sys.argv

    # Generate data from true dynamics.
    true_y0 = np.array([2.0, 0.0]).T
    t = np.linspace(0.0, max_T, N)
    true_A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
    true_y = odeint(func, true_y0, t, true_A)

    def train_loss(params, iter):
        pred = ode_pred(params, true_y0, t)
        return L1_loss(pred, true_y)

    if plot:
        import matplotlib.pyplot as plt

        # Set up figure
        fig = plt.figure(figsize=(12, 4), facecolor="white")
        ax_traj = fig.add_subplot(131, frameon=False)
        ax_phase = fig.add_subplot(132, frameon=False)
        ax_vecfield = fig.add_subplot(133, frameon=False)
        plt.show(block=False)

    losses = []

    # Plots data and learned dynamics.
    def callback(params, iter, g):
        if iter % 10 and iter != num_iters - 1:
            return
        pred = ode_pred(params, true_y0, t)
        losses.append(L1_loss(pred, true_y))

        print(f"Iteration {iter:d} train loss {L1_loss(pred, true_y):.6f}")
        if not plot:
            return

        ax_traj.cla()
        ax_traj.set_title("Trajectories")
        ax_traj.set_xlabel("t")
        ax_traj.set_ylabel("x,y")
        ax_traj.plot(t, true_y[:, 0], "-", t, true_y[:, 1], "g-")
        ax_traj.plot(t, pred[:, 0], "--", t, pred[:, 1], "b--")
        ax_traj.set_xlim(t.min(), t.max())
        ax_traj.set_ylim(-2, 2)
        ax_traj.xaxis.set_ticklabels([])
        ax_traj.yaxis.set_ticklabels([])
        ax_traj.legend()

        ax_phase.cla()
        ax_phase.set_title("Phase Portrait")
        ax_phase.set_xlabel("x")
        ax_phase.set_ylabel("y")
        ax_phase.plot(true_y[:, 0], true_y[:, 1], "g-")
        ax_phase.plot(pred[:, 0], pred[:, 1], "b--")
        ax_phase.set_xlim(-2, 2)
        ax_phase.set_ylim(-2, 2)
        ax_phase.xaxis.set_ticklabels([])
        ax_phase.yaxis.set_ticklabels([])

        ax_vecfield.cla()
        ax_vecfield.set_title("Learned Vector Field")
        ax_vecfield.set_xlabel("x")
        ax_vecfield.set_ylabel("y")
        ax_vecfield.xaxis.set_ticklabels([])
        ax_vecfield.yaxis.set_ticklabels([])

        # vector field plot
        y, x = npo.mgrid[-2:2:21j, -2:2:21j]
        dydt = nn_predict(np.stack([x, y], -1).reshape(21 * 21, 2), 0, params).reshape(-1, 2)
        mag = np.sqrt(dydt[:, 0] ** 2 + dydt[:, 1] ** 2).reshape(-1, 1)
        dydt = dydt / mag
        dydt = dydt.reshape(21, 21, 2)

        ax_vecfield.streamplot(x, y, dydt[:, :, 0], dydt[:, :, 1], color="black")
        ax_vecfield.set_xlim(-2, 2)
        ax_vecfield.set_ylim(-2, 2)

        fig.tight_layout()
        plt.draw()
        plt.pause(0.001)

    # Train neural net dynamics to match data.
    init_params = init_nn_params(0.1, layer_sizes=[D, 150, D])
    optimized_params = adam(ft.jit(grad(train_loss)), init_params, num_iters=num_iters,
                            callback=callback)
    assert losses[-1] < 0.95 * losses[0], losses     # 60 small Adam steps: 1.355 -> 1.200
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
