"""Scalar helpers with numpy's exact semantics, for numba CPU kernels (imported by them only).

Owns the few float operations whose numba scalar versions differ from numpy's ufunc loops in
corner cases: ``floor_divide`` and ``remainder`` (numpy's ``npy_divmod``: infinities, signed
zeros, rounding of the quotient in float32). One variant per float dtype, so every constant
has the operand's type and nothing is silently computed in float64. Imports numba and numpy
only; nothing in functrace imports it except generated kernel modules.
"""

import numba
import numpy as np

from .numba_target import configure as _configure_numba

_configure_numba()   # numba's CPU features for our kernels, before the first @njit here

__all__ = ["floordiv_f64", "floordiv_f32", "remainder_f64", "remainder_f32"]

#: no fastmath (as the kernels: inline="always" applies the caller's flags anyway)
_JIT = dict(inline="always", error_model="numpy")


def _make(dt):
    zero, one, half = dt(0), dt(1), dt(0.5)

    @numba.njit(**_JIT)
    def floordiv(a, b):
        if b == zero:
            return a / b
        mod = np.fmod(a, b)
        div = (a - mod) / b
        if mod != zero and (b < zero) != (mod < zero):
            div = div - one
        if div != zero:
            fd = np.floor(div)
            if div - fd > half:
                fd = fd + one
            return fd
        return np.copysign(zero, a / b)

    @numba.njit(**_JIT)
    def remainder(a, b):
        mod = np.fmod(a, b)
        if b == zero:
            return mod
        if mod != zero:
            if (b < zero) != (mod < zero):
                mod = mod + b
            return mod
        return np.copysign(zero, b)

    return floordiv, remainder


floordiv_f64, remainder_f64 = _make(np.float64)
floordiv_f32, remainder_f32 = _make(np.float32)
