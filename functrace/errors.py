"""The few error classes functrace raises, and the helpers that name the user's source line.

Owns FunctraceError and its subclasses, ``user_frame`` and ``where``. Imports nothing from
functrace (numpy only: ``AxisError`` is also numpy's).

Every error for bad input is a FunctraceError that is also the builtin type a numpy user
expects, so ``except ValueError`` (or ``except np.exceptions.AxisError``) keeps working:

    FunctraceError
    ├── FunctraceTypeError (TypeError): a wrong type, dtype or structure of an argument
    │   ├── ConcretizationError: a concrete value was needed from an abstract tracer
    │   └── TracerConversionError: a differentiated value converted to a number or array
    ├── FunctraceValueError (ValueError): a bad value of an argument (argnums, grad_req, ...)
    │   ├── ShapeError: operand shapes do not fit an op or function
    │   │   └── AxisError (numpy's AxisError: ValueError and IndexError): an axis or an index
    │   │       out of range for an array
    │   └── GuardError: a Symbol called on inputs that take another Python branch, or a
    │       jitted function taking more Python paths than its max_variants
    ├── MissingRuleError (NotImplementedError): no rule for a transform, or an fnp option that
    │   cannot be traced
    ├── TracerLeakError (RuntimeError): a tracer used after its transform finished
    ├── BackendError (RuntimeError): a backend cannot run a graph
    └── NaNError (FloatingPointError): with ``ft.config.debug_nans``, an op produced a NaN

Every message names the op or function, the shapes or values involved, the user's
file:line (``where()``, or ``tracing.source_line`` while tracing), and the fix. docs/errors.md
lists what each bad input raises.
"""

from __future__ import annotations

import linecache
import os
import sys

import numpy as np

PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_NUMPY_DIR = os.path.dirname(np.__file__)


class FunctraceError(Exception):
    """Base class of functrace's own errors."""


class FunctraceTypeError(FunctraceError, TypeError):
    """An argument of the wrong type, dtype or structure (a string where an array goes, an
    integer input to ``grad``, a cotangent shaped like another output, ``argnums="a"``)."""


class FunctraceValueError(FunctraceError, ValueError):
    """An argument with a bad value (``argnums`` out of range, an unknown ``grad_req``, a
    ``head`` with no recorded history)."""


class ShapeError(FunctraceValueError):
    """Operand shapes do not fit an op (raised at bind time, naming op, shapes and line)."""


class AxisError(ShapeError, np.exceptions.AxisError):
    """An axis or an index out of range for an array (or an index of the wrong kind): numpy's
    ``AxisError`` (a ValueError and an IndexError), so numpy's ``except`` clauses catch it."""


class ConcretizationError(FunctraceTypeError):
    """A concrete value was needed from a tracer whose inputs are abstract."""


class MissingRuleError(FunctraceError, NotImplementedError):
    """An op has no rule for the transform being applied (vjp, jvp, batch, kernel), or a
    ``functrace.numpy`` option has no traced version."""


class BackendError(FunctraceError, RuntimeError):
    """A backend cannot run a graph (missing dependency, unsupported op or device)."""


class TracerLeakError(FunctraceError, RuntimeError):
    """A tracer was used after the transform that made it had finished."""


class TracerConversionError(FunctraceTypeError):
    """A traced value that is being differentiated was converted to a Python number or a
    numpy array (``float(x)``, ``x.item()``, ``np.asarray(x)``): its derivative would be
    dropped silently. The message names the user's line and the fix (``ft.stop_gradient`` or
    the ``functrace.numpy`` function)."""


class GuardError(FunctraceValueError):
    """A Symbol traced on concrete inputs was called with inputs that take another Python
    path: a value-dependent decision recorded as a guard (``if x.sum() > 0:``) came out
    differently; or a jitted function met more paths than its ``max_variants``. The message
    names the decision's file:line."""


class GraphFormatError(FunctraceValueError):
    """A graph or Symbol document (JSON) is malformed, of another version, or does not
    type-check. Nothing a document names is ever imported or evaluated."""


class NaNError(FunctraceError, FloatingPointError):
    """``ft.config.debug_nans``: an op produced a NaN from operands that had none. The message
    names the op, the operand values at the first NaN, the user's source line, and for a
    backward pass the derivative rule that ran the op (and where an inf operand came from)."""


class FunctraceWarning(UserWarning):
    """A likely numerical problem in the user's function (e.g. the `where` trap)."""


def user_frame():
    """The innermost stack frame outside the functrace package and numpy (or None)."""
    f = sys._getframe(1)
    while f is not None:
        if not f.f_code.co_filename.startswith((PKG_DIR, _NUMPY_DIR)):
            return f
        f = f.f_back
    return None


def where() -> str:
    """'at file:line: code' for the user's current line (the innermost frame outside
    functrace), for the messages of errors raised at the API boundary."""
    f = user_frame()
    if f is None:
        return "at <unknown location>"
    code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"at {f.f_code.co_filename}:{f.f_lineno}" + (f": {code}" if code else "")
