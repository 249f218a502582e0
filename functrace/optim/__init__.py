"""functrace.optim: optax-style optimizers, pure functions over pytrees.

An optimizer is a ``GradientTransformation``, a pair of pure functions:
``init(params) -> state`` and ``update(grads, state, params=None) -> (updates, state)``;
``apply_updates(params, updates)`` takes the step. States are pytrees of arrays
(NamedTuples such as ``ScaleByAdamState(count, mu, nu)``), so a whole training step, the
gradient and the optimizer update together, runs under ``ft.jit`` as one fused graph and is
traced once per signature. Names, arguments, defaults, state structures and formulas are
optax's (0.2.8); docs/optim.md lists them and the few differences.

- optimizers: ``sgd``, ``adam``, ``adamw``, ``rmsprop``, ``adagrad``;
- building blocks and combinators: ``chain``, ``masked``, ``identity``, ``scale``,
  ``scale_by_learning_rate``, ``scale_by_schedule``, ``scale_by_adam``, ``scale_by_rms``,
  ``scale_by_stddev``, ``scale_by_rss``, ``trace``, ``add_decayed_weights``, ``clip``,
  ``clip_by_global_norm``, ``apply_updates``, ``global_norm``, ``safe_increment``;
- schedules: ``constant_schedule``, ``linear_schedule``, ``polynomial_schedule``,
  ``exponential_decay``, ``cosine_decay_schedule``, ``warmup_cosine_decay_schedule``,
  ``piecewise_constant_schedule``, ``join_schedules``.

Example:
    >>> import numpy as np, functrace as ft, functrace.numpy as fnp
    >>> from functrace import optim
    >>> def loss(params, x):
    ...     return fnp.sum((params["w"] * x - 1.0) ** 2)
    >>> opt = optim.adam(0.1)
    >>> @ft.jit
    ... def step(params, state, x):
    ...     grads = ft.grad(loss)(params, x)
    ...     updates, state = opt.update(grads, state, params)
    ...     return optim.apply_updates(params, updates), state
    >>> params = {"w": np.zeros(2)}
    >>> state = opt.init(params)
    >>> for _ in range(200):
    ...     params, state = step(params, state, np.array([1.0, 2.0]))
    >>> np.round(params["w"], 3), state[0].count
    (array([1. , 0.5]), array(200, dtype=int32))

Layer: the top of the package: imports functrace.numpy, tree_util and errors; nothing in
functrace imports optim (``import functrace`` does not load it).
"""

from .optimizers import adagrad, adam, adamw, rmsprop, sgd
from .schedules import (
    constant_schedule,
    cosine_decay_schedule,
    exponential_decay,
    join_schedules,
    linear_schedule,
    piecewise_constant_schedule,
    polynomial_schedule,
    warmup_cosine_decay_schedule,
)
from .transforms import (
    EmptyState,
    GradientTransformation,
    MaskedNode,
    MaskedState,
    ScaleByAdamState,
    ScaleByRmsState,
    ScaleByRmsWithCountState,
    ScaleByRssState,
    ScaleByRStdDevState,
    ScaleByRStdDevWithCountState,
    ScaleByScheduleState,
    TraceState,
    WeightDecaySchedule,
    add_decayed_weights,
    apply_updates,
    chain,
    clip,
    clip_by_global_norm,
    global_norm,
    identity,
    masked,
    safe_increment,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_rms,
    scale_by_rss,
    scale_by_schedule,
    scale_by_stddev,
    trace,
)

__all__ = [
    # optimizers
    "sgd", "adam", "adamw", "rmsprop", "adagrad",
    # transformations and combinators
    "GradientTransformation", "chain", "masked", "identity", "apply_updates", "global_norm",
    "safe_increment", "scale", "scale_by_learning_rate", "scale_by_schedule", "scale_by_adam",
    "scale_by_rms", "scale_by_stddev", "scale_by_rss", "trace", "add_decayed_weights", "clip",
    "clip_by_global_norm",
    # states
    "EmptyState", "ScaleByAdamState", "ScaleByRmsState", "ScaleByRmsWithCountState",
    "ScaleByRStdDevState", "ScaleByRStdDevWithCountState", "ScaleByRssState",
    "ScaleByScheduleState", "TraceState", "WeightDecaySchedule", "MaskedState", "MaskedNode",
    # schedules
    "constant_schedule", "linear_schedule", "polynomial_schedule", "exponential_decay",
    "cosine_decay_schedule", "warmup_cosine_decay_schedule", "piecewise_constant_schedule",
    "join_schedules",
]
