"""functrace.optim.schedules: learning-rate schedules, functions of the step count.

Owns ``constant_schedule``, ``polynomial_schedule``, ``linear_schedule``,
``exponential_decay``, ``cosine_decay_schedule``, ``warmup_cosine_decay_schedule``,
``piecewise_constant_schedule`` and ``join_schedules``, with optax's formulas and arguments.

A schedule maps a step count to a value. It is called with a Python int by a user, and with
the 0-d int32 count of an optimizer's state by ``scale_by_schedule``, which is a traced value
under ``ft.jit``: every schedule here is written with ``functrace.numpy`` (``where``, not
``if``, on the count), so a jitted training step is traced once, whatever the step. Values
are float64 (numpy's rules for ``count / steps``); ``scale_by_schedule`` casts them to the
updates' dtype, as optax does.

Layer: optim (imports functrace.numpy and errors; imported by nothing in functrace).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import numpy as fnp
from ..errors import FunctraceValueError, where

__all__ = ["constant_schedule", "polynomial_schedule", "linear_schedule", "exponential_decay",
           "cosine_decay_schedule", "warmup_cosine_decay_schedule",
           "piecewise_constant_schedule", "join_schedules"]


def constant_schedule(value) -> Callable:
    """The schedule that is ``value`` at every step.

    Example:
        >>> from functrace import optim
        >>> optim.constant_schedule(0.1)(1000)
        0.1
    """
    return lambda count: value


def polynomial_schedule(init_value, end_value, power, transition_steps: int,
                        transition_begin: int = 0) -> Callable:
    """From ``init_value`` to ``end_value`` along ``(1 - t/T)**power`` over ``T`` steps.

    ``t`` counts from ``transition_begin`` (the value is ``init_value`` before it) and
    stops at ``T = transition_steps`` (``end_value`` after). A ``transition_steps <= 0``
    gives the constant ``init_value``; a negative ``transition_begin`` is taken as 0 (optax).

    Example:
        >>> from functrace import optim
        >>> sched = optim.polynomial_schedule(1.0, 0.0, power=2, transition_steps=4)
        >>> [float(sched(n)) for n in range(6)]
        [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    """
    if transition_steps <= 0:
        return constant_schedule(init_value)
    transition_begin = max(transition_begin, 0)

    def schedule(count):
        count = fnp.clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * frac ** power + end_value

    return schedule


def linear_schedule(init_value, end_value, transition_steps: int,
                    transition_begin: int = 0) -> Callable:
    """From ``init_value`` to ``end_value`` in a straight line over ``transition_steps``
    steps, starting at ``transition_begin`` (:func:`polynomial_schedule` with power 1).

    Example:
        >>> from functrace import optim
        >>> sched = optim.linear_schedule(0.0, 1.0, transition_steps=4)
        >>> [float(sched(n)) for n in (0, 1, 4, 9)]
        [0.0, 0.25, 1.0, 1.0]
    """
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def exponential_decay(init_value, transition_steps: int, decay_rate, transition_begin: int = 0,
                      staircase: bool = False, end_value=None) -> Callable:
    """``init_value * decay_rate ** ((count - transition_begin) / transition_steps)``.

    The value is ``init_value`` until ``transition_begin``; ``staircase=True`` floors the
    exponent (the value changes every ``transition_steps`` steps); ``end_value`` bounds it
    (below when decaying, above when ``decay_rate > 1``). ``transition_steps <= 0`` or
    ``decay_rate == 0`` give the constant ``init_value``, a negative ``transition_begin`` is
    taken as 0 (optax).

    Example:
        >>> from functrace import optim
        >>> sched = optim.exponential_decay(1.0, transition_steps=2, decay_rate=0.5)
        >>> [float(sched(n)) for n in range(5)]
        [1.0, 0.7071067811865476, 0.5, 0.3535533905932738, 0.25]
        >>> stairs = optim.exponential_decay(1.0, 2, 0.5, staircase=True, end_value=0.3)
        >>> [float(stairs(n)) for n in range(5)]
        [1.0, 1.0, 0.5, 0.5, 0.3]
    """
    if transition_steps <= 0 or decay_rate == 0:
        return constant_schedule(init_value)
    transition_begin = max(transition_begin, 0)
    bound = None
    if end_value is not None:
        bound = fnp.maximum if decay_rate < 1.0 else fnp.minimum

    def schedule(count):
        steps = count - transition_begin
        p = steps / transition_steps
        if staircase:
            p = fnp.floor(p)
        value = fnp.where(steps <= 0, init_value, init_value * fnp.power(decay_rate, p))
        if bound is not None:
            value = bound(value, end_value)
        return value

    return schedule


def cosine_decay_schedule(init_value, decay_steps: int, alpha=0.0, exponent=1.0) -> Callable:
    """Half a cosine from ``init_value`` down to ``alpha * init_value`` over ``decay_steps``
    steps (Loshchilov & Hutter, SGDR), then constant.

    The value is ``init_value * ((1 - alpha) * c**exponent + alpha)`` with
    ``c = (1 + cos(pi * min(count, decay_steps) / decay_steps)) / 2``.

    Raises:
        ValueError: if ``decay_steps`` is not positive.

    Example:
        >>> from functrace import optim
        >>> sched = optim.cosine_decay_schedule(1.0, decay_steps=4, alpha=0.1)
        >>> [round(float(sched(n)), 6) for n in range(6)]
        [1.0, 0.868198, 0.55, 0.231802, 0.1, 0.1]
    """
    if not decay_steps > 0:
        raise FunctraceValueError(
            f"optim.cosine_decay_schedule: decay_steps must be positive, got {decay_steps!r} "
            f"({where()})")
    decay_steps = float(decay_steps)

    def schedule(count):
        count = fnp.minimum(count, decay_steps)
        cosine = 0.5 * (1 + fnp.cos(np.pi * count / decay_steps))
        return init_value * ((1 - alpha) * cosine ** exponent + alpha)

    return schedule


def join_schedules(schedules: Sequence[Callable], boundaries: Sequence[int]) -> Callable:
    """Runs ``schedules[i+1]`` from step ``boundaries[i]`` on, counting its steps from there.

    Example:
        >>> from functrace import optim
        >>> sched = optim.join_schedules([optim.constant_schedule(1.0),
        ...                               optim.linear_schedule(1.0, 0.0, 2)], [3])
        >>> [float(sched(n)) for n in range(6)]
        [1.0, 1.0, 1.0, 1.0, 0.5, 0.0]
    """
    schedules = list(schedules)
    boundaries = list(boundaries)
    if len(boundaries) != len(schedules) - 1:
        raise FunctraceValueError(
            f"optim.join_schedules: {len(schedules)} schedules need {len(schedules) - 1} "
            f"boundaries, got {len(boundaries)} ({where()})")

    def schedule(count):
        value = schedules[0](count)
        for boundary, later in zip(boundaries, schedules[1:]):
            value = fnp.where(count < boundary, value, later(count - boundary))
        return value

    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps: int, decay_steps: int,
                                 end_value=0.0, exponent=1.0) -> Callable:
    """A linear warm-up from ``init_value`` to ``peak_value`` over ``warmup_steps`` steps,
    then a cosine decay to ``end_value``, reached at step ``decay_steps`` (which counts the
    warm-up: the cosine part lasts ``decay_steps - warmup_steps`` steps).

    Example:
        >>> from functrace import optim
        >>> sched = optim.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=2,
        ...                                            decay_steps=6, end_value=0.2)
        >>> [round(float(sched(n)), 6) for n in range(8)]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)],
        [warmup_steps])


def piecewise_constant_schedule(init_value, boundaries_and_scales: dict | None = None
                                ) -> Callable:
    """``init_value``, multiplied by ``scale`` from each boundary step on.

    Args:
        init_value: the value before the first boundary.
        boundaries_and_scales: ``{step: scale}``; once ``count >= step`` the value is
            multiplied by ``scale`` (scales must be >= 0; the scales of several reached
            boundaries multiply).

    Example:
        >>> from functrace import optim
        >>> sched = optim.piecewise_constant_schedule(1.0, {2: 0.5, 4: 0.1})
        >>> [round(float(sched(n)), 6) for n in range(6)]
        [1.0, 1.0, 0.5, 0.5, 0.05, 0.05]
    """
    if boundaries_and_scales is not None and any(
            scale < 0.0 for scale in boundaries_and_scales.values()):
        raise FunctraceValueError(
            "optim.piecewise_constant_schedule: the scales must be >= 0, got "
            f"{boundaries_and_scales!r} ({where()})")
    pieces = sorted((boundaries_and_scales or {}).items())

    def schedule(count):
        value = init_value
        for boundary, scale in pieces:
            before = fnp.maximum(0.0, fnp.sign(boundary - count))   # 1 before, 0 from it on
            value = value * before + (1 - before) * scale * value
        return value

    return schedule
