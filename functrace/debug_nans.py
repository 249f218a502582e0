"""``ft.config.debug_nans``: find the first operation that produces a NaN.

Owns the check the op-by-op paths run on each result while the switch is on (the eager
transforms' ``apply_op``, the reference interpreter, the tape's backward pass) and the
error it raises. A NaN is *produced* by an op whose result has a NaN while none of its
operands had one; NaNs that merely flow on are not reported again. So that a message can say
where an ``inf`` operand came from (``0 * inf``, the classic ``where``-gradient trap), the
last op that made an inf from finite operands is remembered. Imports config, core and errors
only, so the lowest layers can call it.
"""

from __future__ import annotations

import contextvars
import linecache

import numpy as np

from .core import SourceInfo, on_device, to_host
from .errors import NaNError

__all__ = ["check", "RULE"]


# While the tape's backward pass runs a rule at top level (where no source override marks
# the equations it computes): (the op whose rule runs, where that op was called)
RULE: contextvars.ContextVar[tuple[str, SourceInfo | None] | None] = contextvars.ContextVar(
    "functrace_nan_rule", default=None)

_last_inf: list = [None]      # (op name, rule, source) of the latest op that made an inf


def _host(x):
    return to_host(x) if on_device(x) else x


def _is_float(x) -> bool:
    dt = getattr(x, "dtype", None)
    return dt is not None and np.dtype(dt).kind in "fc"


def _any(pred, args) -> bool:
    for a in args:
        a = getattr(a, "val", a)                   # a literal
        if _is_float(a) and bool(pred(_host(a)).any()):
            return True
    return False


def _line(src: SourceInfo | None) -> str:
    if src is None:
        return "<unknown location>"
    code = src.line.strip() if src.line else linecache.getline(src.filename, src.lineno).strip()
    return f"{src.filename}:{src.lineno}" + (f": {code}" if code else "")


def _where(src: SourceInfo | None, rule: str) -> str:
    if rule:
        return f"in the derivative rule of {rule} (differentiating the {rule} at {_line(src)})"
    return f"at {_line(src)}"


def _operands_at(args, out, flat: int) -> str:
    """The operands' values where ``out`` first has a NaN (for elementwise-shaped operands),
    else their shapes."""
    shape = np.shape(out)
    idx = np.unravel_index(flat, shape) if shape else ()
    shown = []
    for a in args:
        a = _host(getattr(a, "val", a))
        s = np.shape(a)
        if s == () or s == shape:
            shown.append(repr(np.asarray(a)[idx if s else ()].item()))
        else:
            shown.append(f"<array of shape {s}>")
    at = f" at index {tuple(int(i) for i in idx)}" if shape else ""
    return f"({', '.join(shown)}){at}"


def check(name: str, args, out, src: SourceInfo | None) -> None:
    """Raise NaNError if ``out`` (one result or a tuple) has a NaN and no operand had one;
    remember it if it made an inf from finite operands. ``src``: where the op was recorded
    (its ``rule`` marks an equation a derivative rule emitted)."""
    outs = out if isinstance(out, tuple | list) else (out,)
    rule = src.rule if src is not None else ""
    ctx = RULE.get()
    if ctx is not None and not rule:
        rule, src = ctx[0], ctx[1] if ctx[1] is not None else src
    for o in outs:
        if not _is_float(o):
            continue
        h = _host(o)
        nan = np.isnan(h)
        if nan.any():
            if _any(np.isnan, args):
                return                              # a NaN operand: not this op's doing
            msg = (f"ft.config.debug_nans: {name}{_operands_at(args, h, int(np.argmax(nan)))} "
                   f"produced a NaN {_where(src, rule)}")
            last = _last_inf[0]
            if last is not None and _any(np.isinf, args):
                iname, irule, isrc = last
                msg += (f"; the latest inf made from finite values came from {iname} "
                        f"{_where(isrc, irule)}")
            _last_inf[0] = None
            raise NaNError(msg + ". (Set ft.config.debug_nans = False to run on.)")
        if np.isinf(h).any() and not _any(np.isinf, args):
            _last_inf[0] = (name, rule, src)
