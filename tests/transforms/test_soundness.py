"""No silent wrong answers: guarded Symbols, tracer conversions, fresh Python per
un-jitted call. Each test here is a case that once returned a wrong number without an error.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.errors import ConcretizationError, FunctraceError, GuardError, TracerConversionError


def branchy(x):
    if fnp.sum(x) > 0:          # the decision line (named in GuardError)
        return fnp.sin(x)
    return fnp.cos(x) * 2.0


# --------------------------------------------------------------------------------------------
# Guarded Symbols
# --------------------------------------------------------------------------------------------

def test_symbol_refuses_inputs_that_take_the_other_branch():
    x = np.array([0.5, 1.0])
    sym = ft.trace(branchy)(x)
    np.testing.assert_array_equal(sym(x), np.sin(x))
    np.testing.assert_array_equal(sym(2 * x), np.sin(2 * x))     # same path: fine
    with pytest.raises(GuardError, match=r"test_soundness\.py:\d+") as e:
        sym(-x)
    assert "bool() was True" in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, FunctraceError)


def test_guards_survive_json_and_printing():
    x = np.array([0.5, 1.0])
    sym = ft.trace(branchy)(x)
    assert len(sym.guards) == 1
    text = sym.to_json()
    assert json.loads(text)["guards"][0]["kind"] == "truth"
    back = ft.Symbol.from_json(text)
    assert back == sym and len(back.guards) == 1
    with pytest.raises(GuardError):
        back(-x)
    np.testing.assert_array_equal(back(x), np.sin(x))
    assert "guard(" in str(sym) and "bool() was True" in str(sym)


def test_a_symbol_without_decisions_has_no_guards():
    sym = ft.trace(lambda x: fnp.sum(fnp.where(x > 0, x, -x)))(np.ones(2))
    assert sym.guards == ()
    assert "guards" not in json.loads(sym.to_json())
    assert float(sym(-np.ones(2))) == 2.0


@pytest.mark.parametrize("convert", [float, lambda t: np.asarray(t), lambda t: t.item(),
                                     lambda t: t.tolist()])
def test_value_conversions_while_tracing_are_value_guards(convert):
    def f(x):
        s = convert(fnp.sum(x))
        return x * s
    x = np.array([1.0, 2.0])
    sym = ft.trace(f)(x)
    np.testing.assert_array_equal(sym(x), x * 3.0)
    np.testing.assert_array_equal(sym(x[::-1]), x[::-1] * 3.0)   # same sum: same constant
    with pytest.raises(GuardError, match=r"read the value 3\.0"):
        sym(x + 1.0)


def test_an_index_read_while_tracing_is_a_guard():
    def f(x, i):
        return x[int(i)]
    sym = ft.trace(f)(np.arange(3.0), np.array(1))
    assert float(sym(np.arange(3.0), np.array(1))) == 1.0
    with pytest.raises(GuardError):
        sym(np.arange(3.0), np.array(2))


def test_guarded_symbol_composes_with_grad_and_jit():
    x = np.array([0.5, 1.0])
    sym = ft.trace(branchy)(x)
    np.testing.assert_allclose(ft.grad(lambda v: fnp.sum(sym(v)))(x), np.cos(x))
    with pytest.raises(GuardError):
        ft.grad(lambda v: fnp.sum(sym(v)))(-x)
    with pytest.raises(ConcretizationError, match="value-dependent"):
        ft.jit(sym).lower(ft.ShapeDtype(x.shape, x.dtype))
    # with concrete arrays jit compiles the Symbol's path as a guarded variant; the other
    # path is the Symbol's GuardError, never the other branch's value
    jsym = ft.jit(sym, backend="numpy")
    np.testing.assert_array_equal(jsym(x), np.sin(x))
    with pytest.raises(GuardError):
        jsym(-x)
    np.testing.assert_array_equal(jsym(x), np.sin(x))


def test_trace_of_grad_keeps_the_branch_as_a_guard():
    x = np.array([0.5, 1.0])
    gsym = ft.trace(ft.grad(lambda v: fnp.sum(branchy(v))))(x)
    np.testing.assert_allclose(gsym(x), np.cos(x))
    with pytest.raises(GuardError):
        gsym(-x)


def test_decision_inside_a_nested_transform_guards_the_outer_symbol():
    def f(x):
        return ft.jacrev(branchy)(x).sum(axis=0)
    x = np.array([0.5, 1.0])
    sym = ft.trace(f)(x)
    np.testing.assert_allclose(sym(x), np.cos(x))
    with pytest.raises(GuardError):
        sym(-x)


# --------------------------------------------------------------------------------------------
# Tracer conversions
# --------------------------------------------------------------------------------------------

CONVERSIONS = {
    "float": lambda t: float(fnp.sum(t)),
    "int": lambda t: int(fnp.sum(t)),
    "complex": lambda t: complex(fnp.sum(t)),
    "item": lambda t: fnp.sum(t).item(),
    "tolist": lambda t: t.tolist()[0],
    "np.asarray": lambda t: np.asarray(t)[0],
    "np.array": lambda t: np.array(t)[0],
    "np.r_": lambda t: np.r_[t, t][0],
}


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
                                       "linearize", "checkpoint"])
def test_converting_a_differentiated_value_raises(name, transform):
    conv = CONVERSIONS[name]

    def f(x):
        return fnp.sum(x * conv(x))
    x = np.array([1.0, 2.0])
    call = {"grad": lambda: ft.grad(f)(x),
            "vjp": lambda: ft.vjp(f, x),
            "jvp": lambda: ft.jvp(f, (x,), (x,)),
            "jacrev": lambda: ft.jacrev(f)(x),
            "jacfwd": lambda: ft.jacfwd(f)(x),
            "hessian": lambda: ft.hessian(f)(x),
            "linearize": lambda: ft.linearize(f, x),
            "checkpoint": lambda: ft.grad(ft.checkpoint(f))(x)}[transform]
    with pytest.raises(TracerConversionError, match=r"test_soundness\.py:\d+|stop_gradient") \
            as e:
        call()
    assert isinstance(e.value, TypeError)
    assert "stop_gradient" in str(e.value)


def test_conversion_error_names_the_users_line():
    def f(x):
        return x * float(fnp.sum(x))      # <- this line
    with pytest.raises(TracerConversionError) as e:
        ft.grad(lambda x: fnp.sum(f(x)))(np.ones(2))
    assert "return x * float(fnp.sum(x))" in str(e.value)


def test_allowed_conversions_under_grad():
    w = np.array([3.0, 4.0])

    def f(x):
        if fnp.sum(x) > 0:                         # bool: a decision, zero derivative
            x = x * 2.0
        k = int(fnp.argmax(x))                     # integer results are not differentiated
        s = float(ft.stop_gradient(fnp.sum(x)))    # stop_gradient: declared constant
        c = float(fnp.sum(w))                      # does not depend on x
        return fnp.sum(x) * s + x[k] * c
    x = np.array([1.0, 2.0])
    g = ft.grad(f)(x)
    s = 6.0
    np.testing.assert_allclose(g, [2.0 * s, 2.0 * s + 2.0 * 7.0])


def test_vmap_decision_on_a_batched_value_is_an_error():
    with pytest.raises(ConcretizationError, match="vmap"):
        ft.vmap(lambda x: x if fnp.sum(x) > 0 else -x)(np.ones((3, 2)))


def test_previously_silent_zero_gradient_of_asarray():
    # np.r_ called np.asarray on the tracer: the gradient silently became 0
    with pytest.raises(TracerConversionError):
        ft.grad(lambda x: fnp.sum(np.r_[x, x] ** 2))(np.ones(2))
    # the functrace.numpy way gives the right answer
    np.testing.assert_allclose(
        ft.grad(lambda x: fnp.sum(fnp.concatenate([x, x]) ** 2))(np.ones(2)), [4.0, 4.0])


def test_bit_operators_of_traced_integers_are_bitwise_like_numpy():
    # `x & 6` of a traced int array once traced as logical_and: booleans, silently
    f = lambda x: (x & 6) + (x | 1) + (x ^ 3) + (~x) + (x << 2) + (x >> 1)  # noqa: E731
    for dt in (np.int64, np.int32, np.uint8):
        x = np.array([3, 5, 12], dt)
        want = f(x)
        for got in (ft.jit(f)(x), ft.jit(f, backend="numpy")(x), ft.trace(f)(x)(x),
                    ft.vmap(f)(x[:, None])[:, 0]):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
