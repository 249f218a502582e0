"""Every bad input in the catalogue raises the documented error.

One test per row of docs/errors.md: the case (tests/support/error_cases.py) raises its documented
class, which is also the builtin a numpy user expects and a FunctraceError where the doc says
so; the message holds the case's key phrases and, where the doc says the line is named, the
user's file and a line of the case.
"""

from __future__ import annotations

import builtins
import importlib
import os
import re

import numpy as np
import pytest
from error_cases import CASES, EXPECTED, markdown

import functrace as ft
from functrace.errors import FunctraceError

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "errors.md")


def _cls(name: str) -> type:
    if "." not in name:
        return getattr(ft, name, None) or getattr(builtins, name)
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _param(c):
    marks = pytest.mark.xfail(reason=c.pending, strict=False) if c.pending else ()
    return pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("c", [_param(c) for c in CASES])
def test_bad_input_raises_the_documented_error(c):
    exc = c.run()
    assert exc is not None, f"{c.name}: no error raised"
    name, builtins, needs_ft = EXPECTED[c.expected]
    assert isinstance(exc, _cls(name)), f"{c.name}: {type(exc).__mro__} ({exc})"
    for b in builtins:
        assert isinstance(exc, b), f"{c.name}: not a {b.__name__}"
    if needs_ft:
        assert isinstance(exc, FunctraceError)
    msg = str(exc)
    for phrase in c.phrases:
        assert phrase in msg, f"{c.name}: {phrase!r} not in {msg!r}"
    if c.line:
        assert c.names_line(msg), f"{c.name}: the message does not name the line: {msg!r}"


def test_the_catalogue_is_large_and_the_doc_lists_every_case():
    assert len(CASES) >= 100
    assert len({c.name for c in CASES}) == len(CASES)
    with open(DOC) as f:
        doc = f.read()
    rows = re.findall(r"^\| `(\w+)` \|.*\| `(\w+)`", doc, flags=re.M)
    documented = dict(rows)
    assert len(documented) >= 60
    for c in CASES:
        assert c.name in documented, f"docs/errors.md lacks {c.name} (python " \
                                     "tests/support/error_cases.py --docs)"
        assert documented[c.name] == EXPECTED[c.expected][0].rsplit(".", 1)[-1], c.name


def test_the_generated_table_has_one_row_per_case():
    table = markdown()
    assert table.count("\n| `") == len(CASES)


# --------------------------------------------------------------------------------------------
# The class set
# --------------------------------------------------------------------------------------------

def test_each_class_is_functrace_s_and_the_builtin_a_numpy_user_catches():
    assert issubclass(ft.ShapeError, ft.FunctraceValueError)
    assert issubclass(ft.FunctraceValueError, ValueError)
    assert issubclass(ft.FunctraceTypeError, TypeError)
    assert issubclass(ft.AxisError, ft.ShapeError)
    assert issubclass(ft.AxisError, np.exceptions.AxisError)
    assert issubclass(ft.AxisError, IndexError)
    assert issubclass(ft.ConcretizationError, ft.FunctraceTypeError)
    assert issubclass(ft.TracerConversionError, ft.FunctraceTypeError)
    assert issubclass(ft.GuardError, ft.FunctraceValueError)
    for cls in (ft.FunctraceTypeError, ft.FunctraceValueError, ft.ShapeError, ft.AxisError,
                ft.MissingRuleError, ft.TracerLeakError, ft.BackendError):
        assert issubclass(cls, FunctraceError)


def test_axis_error_is_caught_by_numpy_s_except_clause():
    import functrace.numpy as fnp
    with pytest.raises(np.exceptions.AxisError, match="axis 4"):
        ft.grad(lambda x: fnp.sum(fnp.sum(x, axis=4)))(np.ones(3))


def test_numpy_s_errors_pass_unchanged_outside_transforms():
    import functrace.numpy as fnp
    with pytest.raises(ValueError) as e:
        fnp.reshape(np.ones(6), (4,))
    assert not isinstance(e.value, FunctraceError)
    with pytest.raises(np.exceptions.AxisError) as e:
        fnp.sum(np.ones(3), axis=2)
    assert type(e.value) is np.exceptions.AxisError


def test_an_error_under_nested_transforms_is_prefixed_once():
    import functrace.numpy as fnp
    f = ft.grad(lambda x: fnp.sum(ft.vmap(lambda r: fnp.reshape(r, (4,)))(x)))
    with pytest.raises(ft.ShapeError) as e:
        f(np.ones((2, 3)))
    assert str(e.value).count("fnp.reshape:") == 1
    assert str(e.value).count("test_errors.py") == 1


# --------------------------------------------------------------------------------------------
# What the checks must not refuse
# --------------------------------------------------------------------------------------------

def test_valid_inputs_near_the_refused_ones_still_work():
    import functrace.numpy as fnp
    x = np.ones((2, 3))
    assert ft.grad(lambda a, b: fnp.sum(a * b), argnums=np.int64(1))(x, x).shape == (2, 3)
    assert len(ft.grad(lambda a, b: fnp.sum(a * b), argnums=[0, 1])(x, x)) == 2
    np.testing.assert_array_equal(ft.vmap(lambda r: r * 2.0, out_axes=-1)(x), (x * 2.0).T)
    # an integer tangent for a float primal is converted, as before
    _, t = ft.jvp(lambda a: a * 2.0, (x,), (np.ones((2, 3), int),))
    np.testing.assert_array_equal(t, np.full((2, 3), 2.0))
    # a real cotangent for a complex output is fine
    _, pull = ft.vjp(lambda a: a * 1j, x)
    assert pull(np.ones((2, 3)))[0].shape == (2, 3)
    # linearize's tangents are checked like jvp's, and still computed
    _, f_jvp = ft.linearize(fnp.sin, x)
    np.testing.assert_allclose(f_jvp(np.ones((2, 3))), np.cos(x))
    # a custom_vjp bwd returning a 0-d cotangent for a scalar argument
    @ft.custom_vjp
    def f(a, s):
        return a * s
    f.defvjp(lambda a, s: (a * s, (a, s)), lambda r, g: (g * r[1], fnp.sum(g * r[0])))
    assert ft.grad(lambda s: fnp.sum(f(x, s)))(2.0) == 6.0
    # sum over an axis given as a numpy integer or a list
    assert ft.grad(lambda a: fnp.sum(fnp.sum(a, axis=np.int64(1)) ** 2))(x).shape == (2, 3)
    assert ft.grad(lambda a: fnp.sum(a, axis=[0, 1]))(x).shape == (2, 3)


def test_jit_decorator_forms_still_work():
    @ft.jit(backend="numpy", static_argnums=1)
    def f(x, n):
        return x * n
    np.testing.assert_array_equal(f(np.ones(2), 3), np.full(2, 3.0))
