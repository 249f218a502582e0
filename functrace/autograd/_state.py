"""The recording and training switches of functrace.autograd.

Owns two context variables and their getters/setters. They are ``contextvars.ContextVar``s, so
each thread (and each asyncio task) has its own: one thread recording never makes another
thread record (MXNet kept them ``thread_local``). Imports nothing from functrace.
"""

from __future__ import annotations

import contextvars

__all__ = ["is_recording", "is_training", "set_recording", "set_training"]

RECORDING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "functrace_autograd_recording", default=False)
TRAINING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "functrace_autograd_training", default=False)


def is_recording() -> bool:
    """Whether operations on autograd arrays are being recorded in this thread/context.

    Example:
        >>> from functrace import autograd
        >>> autograd.is_recording()
        False
        >>> with autograd.record():
        ...     autograd.is_recording()
        True
    """
    return RECORDING.get()


def is_training() -> bool:
    """Whether this thread/context is in training mode (``record(train_mode=True)``).

    functrace's ops behave the same in both modes; the flag is there for user code (dropout,
    batch statistics) that wants to branch on it, as in MXNet.
    """
    return TRAINING.get()


def set_recording(is_recording: bool) -> bool:
    """Turn recording on or off in this thread/context; returns the previous state.

    Prefer ``with autograd.record():`` / ``with autograd.pause():``, which also restore the
    state and make functrace.numpy functions record too (see the package docstring).
    """
    prev = RECORDING.get()
    RECORDING.set(bool(is_recording))
    return prev


def set_training(train_mode: bool) -> bool:
    """Turn training mode on or off in this thread/context; returns the previous state."""
    prev = TRAINING.get()
    TRAINING.set(bool(train_mode))
    return prev
