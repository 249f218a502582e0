"""The optimizer and schedule cases that ``functrace.optim`` is compared with optax on.

One table serves both sides: each case is a function of the library module (``optax`` or
``functrace.optim``: the names and arguments are the same), so ``tools/optax_reference.py``
builds the optax optimizer from the very line the test builds ours from. The stored results
are in ``optax_reference.json`` next to this file; ``tests/api/test_optim.py`` reads them
(and, where optax is importable, also compares live).

The problem: parameters ``{"b": (2,), "pair": ((), (4,)), "w": (3, 2)}`` (a dict of arrays
and a tuple, 13 numbers), ``STEPS`` steps with stored gradients (not computed, so only the
optimizer is compared). ``b[0]`` never gets a gradient (the zero-gradient paths), and the
gradients' size changes by step so that ``clip_by_global_norm`` clips on some steps only.
"""

from __future__ import annotations

import json
import os

import numpy as np

STEPS = 6
SCHEDULE_COUNTS = tuple(range(13))
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optax_reference.json")

# the global-norm scale of each step's gradients (clip_by_global_norm(2.0) clips steps 1, 3)
GRAD_SCALES = (0.3, 3.0, 0.5, 5.0, 1.0, 0.1)


def build(leaves):
    """The parameter pytree from its leaves in flattening order (dict keys sorted)."""
    b, p0, p1, w = leaves
    return {"b": b, "pair": (p0, p1), "w": w}


def flat(tree):
    """The leaves of a parameter pytree in flattening order (for either library)."""
    return [tree["b"], tree["pair"][0], tree["pair"][1], tree["w"]]


SHAPES = ((2,), (), (4,), (3, 2))


def make_problem(seed=18):
    """(params0 leaves, one list of gradient leaves per step), float64: used once, by the
    tool, and stored; the test reads the stored numbers."""
    rng = np.random.default_rng(seed)
    params0 = [rng.normal(size=s) for s in SHAPES]
    grads = []
    for k in range(STEPS):
        g = [rng.normal(size=s) for s in SHAPES]
        g[0][0] = 0.0
        norm = np.sqrt(sum(np.sum(x * x) for x in g))
        grads.append([x * (GRAD_SCALES[k] * 4.0 / norm) for x in g])
    return params0, grads


def _mask(params):
    return {"b": False, "pair": (False, params["pair"][1].ndim == 1), "w": params["w"].ndim == 2}


# name -> function of the library module returning a GradientTransformation
CASES = {
    "sgd": lambda o: o.sgd(0.1),
    "sgd_momentum": lambda o: o.sgd(0.1, momentum=0.9),
    "sgd_nesterov": lambda o: o.sgd(0.1, momentum=0.9, nesterov=True),
    "sgd_warmup_cosine": lambda o: o.sgd(
        o.warmup_cosine_decay_schedule(0.0, 0.5, 2, 5, end_value=0.05), momentum=0.5),
    "sgd_piecewise": lambda o: o.sgd(o.piecewise_constant_schedule(0.2, {2: 0.5, 4: 0.1})),
    "adam": lambda o: o.adam(1e-2),
    "adam_args": lambda o: o.adam(0.05, b1=0.8, b2=0.99, eps=1e-6, eps_root=1e-8),
    "adam_exponential_decay": lambda o: o.adam(o.exponential_decay(0.05, 2, 0.5)),
    "adam_staircase": lambda o: o.adam(o.exponential_decay(
        0.05, 2, 0.5, transition_begin=1, staircase=True, end_value=0.02)),
    "nadam": lambda o: o.adam(0.02, nesterov=True),
    "adamw": lambda o: o.adamw(0.02, weight_decay=0.1),
    "adamw_mask": lambda o: o.adamw(
        0.02, weight_decay=0.1, mask={"b": False, "pair": (False, True), "w": True}),
    "adamw_mask_fn": lambda o: o.adamw(0.02, weight_decay=0.1, mask=_mask),
    "adamw_schedules": lambda o: o.adamw(o.linear_schedule(0.05, 0.01, 4),
                                         weight_decay=o.linear_schedule(0.1, 0.0, 5)),
    "rmsprop": lambda o: o.rmsprop(0.01),
    "rmsprop_centered_momentum": lambda o: o.rmsprop(0.01, centered=True, momentum=0.9),
    "rmsprop_nesterov": lambda o: o.rmsprop(0.01, decay=0.8, initial_scale=0.1, momentum=0.5,
                                            nesterov=True),
    "rmsprop_bias_correction": lambda o: o.rmsprop(0.01, eps_in_sqrt=False,
                                                   bias_correction=True),
    # initial_scale > 0: with 0, the first corrected variance is 0 up to rounding (NaN)
    "rmsprop_centered_bias_correction": lambda o: o.rmsprop(
        0.01, centered=True, initial_scale=0.1, eps_in_sqrt=False, bias_correction=True),
    "adagrad": lambda o: o.adagrad(0.1),
    "adagrad_zero_init": lambda o: o.adagrad(0.1, initial_accumulator_value=0.0, eps=0.0),
    "adagrad_cosine": lambda o: o.adagrad(o.cosine_decay_schedule(0.2, 4, alpha=0.1,
                                                                  exponent=2.0)),
    "clip_adam_cosine": lambda o: o.chain(o.clip_by_global_norm(2.0),
                                          o.adam(o.cosine_decay_schedule(0.05, 5))),
    "chain_blocks": lambda o: o.chain(o.clip(0.5), o.add_decayed_weights(1e-2), o.trace(0.9),
                                      o.scale_by_learning_rate(0.1)),
    "rms_stddev_blocks": lambda o: o.chain(o.scale_by_stddev(decay=0.7),
                                           o.scale_by_schedule(o.linear_schedule(0.1, 0.0, 8)),
                                           o.scale_by_rms(decay=0.5, bias_correction=True),
                                           o.scale(-0.01)),
}

SCHEDULES = {
    "constant": lambda o: o.constant_schedule(0.3),
    "linear": lambda o: o.linear_schedule(1.0, 0.1, 5, transition_begin=2),
    "polynomial": lambda o: o.polynomial_schedule(1.0, 0.1, 2.5, 6),
    "exponential": lambda o: o.exponential_decay(1.0, 3, 0.7),
    "exponential_staircase": lambda o: o.exponential_decay(
        1.0, 2, 0.5, transition_begin=3, staircase=True, end_value=0.2),
    "exponential_growth": lambda o: o.exponential_decay(0.1, 2, 2.0, end_value=0.5),
    "cosine": lambda o: o.cosine_decay_schedule(1.0, 7, alpha=0.2, exponent=1.5),
    "warmup_cosine": lambda o: o.warmup_cosine_decay_schedule(0.0, 1.0, 3, 10, end_value=0.1),
    "piecewise": lambda o: o.piecewise_constant_schedule(0.5, {3: 0.5, 6: 0.2, 9: 2.0}),
    "join": lambda o: o.join_schedules([o.constant_schedule(1.0),
                                        o.linear_schedule(1.0, 0.0, 4)], [3]),
}


SCHEDULE_NAMES = ("constant_schedule", "linear_schedule", "polynomial_schedule",
                  "exponential_decay", "cosine_decay_schedule", "warmup_cosine_decay_schedule",
                  "piecewise_constant_schedule", "join_schedules")


class Replay:
    """A library module whose schedule constructors return stored tables instead.

    optax evaluates most schedules on its int32 step count in float32 (in JAX an int32 array
    divided by a Python int is float32, even with ``jax_enable_x64``); functrace.optim, with
    numpy's rules, in float64. To compare the optimizers' own arithmetic to the last bit, the
    tool records the values optax's schedules gave at counts ``0..STEPS`` (one table per
    schedule the case builds, in the order the case builds them) and the test plays them back
    through ``Replay(functrace.optim, tables)``; the schedules themselves are compared
    separately.
    """

    def __init__(self, module, tables):
        self._module = module
        self._tables = list(tables)

    def __getattr__(self, name):
        if name not in SCHEDULE_NAMES:
            return getattr(self._module, name)

        def make(*args, **kwargs):
            table = self._tables.pop(0)
            return lambda count: table[int(count)]

        return make


class Recorder:
    """A library module that notes each schedule its schedule constructors build (the
    tool's side of ``Replay``)."""

    def __init__(self, module):
        self._module = module
        self.schedules = []

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if name not in SCHEDULE_NAMES:
            return attr

        def make(*args, **kwargs):
            schedule = attr(*args, **kwargs)
            self.schedules.append(schedule)
            return schedule

        return make


def run(opt, params, grads, apply_updates):
    """Steps ``opt`` through ``grads`` from ``params``: (params after each step, final
    state). The same code drives either library."""
    state = opt.init(params)
    history = []
    for g in grads:
        updates, state = opt.update(g, state, params)
        params = apply_updates(params, updates)
        history.append(params)
    return history, state


def load_reference():
    with open(REFERENCE) as f:
        return json.load(f)
