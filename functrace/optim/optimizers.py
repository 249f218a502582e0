"""functrace.optim.optimizers: the common optimizers, each a chain of transformations.

Owns ``sgd``, ``adam``, ``adamw``, ``rmsprop`` and ``adagrad``. Each is the same chain of
building blocks (``optim.transforms``) as its optax namesake, with the same arguments and
defaults, so its state has the same structure as optax's and its numbers agree with optax's
to rounding (tests/api/test_optim.py).

Layer: optim (imports optim.transforms; imported by nothing in functrace).
"""

from __future__ import annotations

from .transforms import (
    GradientTransformation,
    add_decayed_weights,
    chain,
    identity,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_rms,
    scale_by_rss,
    scale_by_stddev,
    trace,
)

__all__ = ["sgd", "adam", "adamw", "rmsprop", "adagrad"]


def sgd(learning_rate, momentum=None, nesterov: bool = False,
        accumulator_dtype=None) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum.

    The update is ``-lr * g``; with ``momentum`` it is ``-lr * m`` where
    ``m = g + momentum * m`` (``-lr * (g + momentum * m)`` with ``nesterov=True``).

    Args:
        learning_rate: a number, or a schedule (a function of the step count, such as
            ``optim.exponential_decay(...)``).
        momentum: the momentum coefficient, or None for none.
        nesterov: use Nesterov momentum.
        accumulator_dtype: dtype of the momentum in the state (default: the parameters').

    Returns:
        A ``GradientTransformation``: ``chain(trace(momentum) or identity(),
        scale_by_learning_rate(learning_rate))``, as ``optax.sgd``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.sgd(0.1, momentum=0.9)
        >>> params = {"w": np.array([1.0, -1.0])}
        >>> state = opt.init(params)
        >>> for _ in range(2):
        ...     updates, state = opt.update({"w": np.array([1.0, 2.0])}, state)
        ...     params = optim.apply_updates(params, updates)
        >>> params
        {'w': array([ 0.71, -1.58])}
    """
    head = identity() if momentum is None else trace(momentum, nesterov, accumulator_dtype)
    return chain(head, scale_by_learning_rate(learning_rate))


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
         nesterov: bool = False) -> GradientTransformation:
    """Adam (Kingma & Ba 2015): ``-lr * m_hat / (sqrt(v_hat + eps_root) + eps)`` from
    bias-corrected moving averages of the gradients and of their squares.

    Args:
        learning_rate: a number or a schedule.
        b1, b2: decay rates of the first and second moment averages.
        eps: added to the denominator outside the square root.
        eps_root: added inside the square root.
        mu_dtype: dtype of the first moment in the state (default: the parameters').
        nesterov: NAdam's Nesterov form of the first moment.

    Returns:
        A ``GradientTransformation``: ``chain(scale_by_adam(...),
        scale_by_learning_rate(learning_rate))``; its state is
        ``(ScaleByAdamState(count, mu, nu), ...)``, with ``count`` a 0-d int32 array.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.adam(0.1)
        >>> params = np.array([1.0, 2.0])
        >>> state = opt.init(params)
        >>> updates, state = opt.update(np.array([0.5, -3.0]), state)
        >>> np.round(optim.apply_updates(params, updates), 6), state[0].count
        (array([0.9, 2.1]), array(1, dtype=int32))
    """
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
          weight_decay=1e-4, mask=None, *, nesterov: bool = False) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019): the Adam direction plus
    ``weight_decay * params``, all scaled by ``-learning_rate``.

    Args:
        learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov: as :func:`adam`.
        weight_decay: the decay coefficient (a number or a schedule).
        mask: optional pytree of bools (or a function of the parameters returning one)
            choosing the leaves that decay (biases and norms are often left out).

    Returns:
        A ``GradientTransformation``: ``chain(scale_by_adam(...),
        add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))``.
        Its ``update`` needs ``params``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.adamw(0.1, weight_decay=0.5, mask={"w": True, "b": False})
        >>> params = {"w": np.array([2.0]), "b": np.array([2.0])}
        >>> grads = {"w": np.array([1.0]), "b": np.array([1.0])}
        >>> updates, state = opt.update(grads, opt.init(params), params)
        >>> {k: np.round(v, 6) for k, v in updates.items()}
        {'b': array([-0.1]), 'w': array([-0.2])}
    """
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt: bool = True,
            centered: bool = False, momentum=None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (Tieleman & Hinton 2012): gradients divided by the root of a moving average
    of their squares (of their variance, with ``centered=True``), optionally with momentum.

    Args:
        learning_rate: a number or a schedule.
        decay: decay rate of the moving averages.
        eps: keeps the denominator away from zero (added inside the square root unless
            ``eps_in_sqrt=False``).
        initial_scale: the initial value of the average of squares.
        eps_in_sqrt: where ``eps`` is added.
        centered: divide by an estimate of the standard deviation instead of the root mean
            square.
        momentum: momentum applied after the learning rate, or None.
        nesterov: use Nesterov momentum.
        bias_correction: correct the averages for their initialisation, as Adam does.

    Returns:
        A ``GradientTransformation``: ``chain(scale_by_rms(...) or scale_by_stddev(...),
        scale_by_learning_rate(learning_rate), trace(momentum) or identity())``, as
        ``optax.rmsprop``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.rmsprop(0.1, decay=0.75, eps=0.0)
        >>> opt.update(np.array([1.0, -4.0]), opt.init(np.zeros(2)))[0]
        array([-0.2,  0.2])
    """
    if centered:
        head = scale_by_stddev(decay, eps, initial_scale, eps_in_sqrt, bias_correction)
    else:
        head = scale_by_rms(decay, eps, initial_scale, eps_in_sqrt, bias_correction)
    tail = identity() if momentum is None else trace(momentum, nesterov)
    return chain(head, scale_by_learning_rate(learning_rate), tail)


def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7) -> GradientTransformation:
    """Adagrad (Duchi et al. 2011): gradients divided by the root of the sum of all their
    squares so far.

    Args:
        learning_rate: a number or a schedule.
        initial_accumulator_value: the initial value of the sum of squares.
        eps: keeps the denominator away from zero.

    Returns:
        A ``GradientTransformation``: ``chain(scale_by_rss(initial_accumulator_value, eps),
        scale_by_learning_rate(learning_rate))``.

    Example:
        >>> import numpy as np
        >>> from functrace import optim
        >>> opt = optim.adagrad(1.0, initial_accumulator_value=0.0, eps=0.0)
        >>> opt.update(np.array([3.0, -0.5]), opt.init(np.zeros(2)))[0]
        array([-1.,  1.])
    """
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))
