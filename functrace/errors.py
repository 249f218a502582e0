"""The few error classes functrace raises, and the helper that finds the user's source line.

Owns: FunctraceError and its subclasses, ``user_frame``. Imports nothing from functrace.
Every message names the op or value involved, the user's line where known, and the fix.
"""

from __future__ import annotations

import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class FunctraceError(Exception):
    """Base class of functrace's own errors."""


class ShapeError(FunctraceError, ValueError):
    """Operand shapes do not fit an op (raised at bind time, naming op, shapes and line)."""


class ConcretizationError(FunctraceError, TypeError):
    """A concrete value was needed from a tracer whose inputs are abstract."""


class MissingRuleError(FunctraceError, NotImplementedError):
    """An op has no rule for the transform being applied (vjp, jvp, batch, kernel)."""


class BackendError(FunctraceError, RuntimeError):
    """A backend cannot run a graph (missing dependency, unsupported op or device)."""


class TracerLeakError(FunctraceError, RuntimeError):
    """A tracer was used after the transform that made it had finished."""


class TracerConversionError(FunctraceError, TypeError):
    """A traced value that is being differentiated was converted to a Python number or a
    numpy array (``float(x)``, ``x.item()``, ``np.asarray(x)``): its derivative would be
    dropped silently. The message names the user's line and the fix (``ft.stop_gradient`` or
    the ``functrace.numpy`` function)."""


class GuardError(FunctraceError, ValueError):
    """A Symbol traced on concrete inputs was called with inputs that take another Python
    path: a value-dependent decision recorded as a guard (``if x.sum() > 0:``) came out
    differently. The message names the decision's file:line."""


class FunctraceWarning(UserWarning):
    """A likely numerical problem in the user's function (e.g. the `where` trap)."""


def user_frame():
    """The innermost stack frame outside the functrace package (or None)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR):
            return f
        f = f.f_back
    return None


def where() -> str:
    """' (at file:line)' for the user's current line, or '' if unknown."""
    f = user_frame()
    return f" (at {f.f_code.co_filename}:{f.f_lineno})" if f is not None else ""
