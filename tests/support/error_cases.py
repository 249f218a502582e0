"""The catalogue of bad inputs: what a user gets for each, and what they should get.

Each case is a function that makes one mistake a real user makes; its decorator says which
exception it should raise (a name from ``EXPECTED``), phrases the message must contain, and
whether the message must name the user's line (this file, at a line inside the case).

``tests/api/test_errors.py`` runs every case; the table in ``docs/errors.md`` is generated from
this file (``python tests/support/error_cases.py --docs``). Run
``python tests/support/error_cases.py`` to print
which cases give a wrong exception type or an unclear message (a count that should be 0).
The checks here need no functrace class that did not exist when the catalogue was written: a
case's class is judged by its builtin type and whether it is a FunctraceError.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import warnings

import numpy as np

if __name__ == "__main__":     # run as a script: import this checkout's functrace
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import functrace as ft
import functrace.numpy as fnp
from functrace import autograd
from functrace.errors import FunctraceError

# label -> (the class test_errors.py asserts, by name in functrace / numpy; the builtin
# types a numpy user expects; whether it must be a FunctraceError)
EXPECTED = {
    "ShapeError": ("ShapeError", (ValueError,), True),
    "AxisError": ("AxisError", (ValueError, IndexError), True),
    # a bad index: numpy raises IndexError; functrace's AxisError is one
    "AxisError(index)": ("AxisError", (IndexError,), True),
    "FunctraceTypeError": ("FunctraceTypeError", (TypeError,), True),
    "FunctraceValueError": ("FunctraceValueError", (ValueError,), True),
    "ConcretizationError": ("ConcretizationError", (TypeError,), True),
    "TracerConversionError": ("TracerConversionError", (TypeError,), True),
    "TracerLeakError": ("TracerLeakError", (RuntimeError,), True),
    "MissingRuleError": ("MissingRuleError", (NotImplementedError,), True),
    "GuardError": ("GuardError", (ValueError,), True),
    # malformed graph and Symbol documents
    "GraphFormatError": ("GraphFormatError", (ValueError,), True),
    # numpy's own errors: outside transforms fnp.f *is* numpy's function
    "ValueError": ("ValueError", (ValueError,), False),
    "numpy.AxisError": ("numpy.exceptions.AxisError", (np.exceptions.AxisError,), False),
    "LinAlgError": ("numpy.linalg.LinAlgError", (np.linalg.LinAlgError,), False),
}


class Case:
    __slots__ = ("name", "fn", "expected", "phrases", "line", "note", "pending", "first",
                 "last")

    def __init__(self, fn, expected, phrases, line, note, pending):
        self.name = fn.__name__
        self.fn = fn
        self.expected = expected
        self.phrases = tuple(phrases)
        self.line = line
        self.note = note
        self.pending = pending      # why the expectation is not met yet (test: xfail)
        lines, self.first = inspect.getsourcelines(fn)
        self.last = self.first + len(lines) - 1

    @property
    def code(self) -> str:
        """The case's body: what the user wrote."""
        lines = inspect.getsourcelines(self.fn)[0]
        body = [ln for ln in lines if not ln.lstrip().startswith(("@case", "def "))]
        return "\n".join(ln.strip() for ln in body if ln.strip())

    def check(self, exc: BaseException | None) -> list[str]:
        """Problems with the exception this case raised (empty: as expected)."""
        if exc is None:
            return ["no error"]
        _, builtins, needs_ft = EXPECTED[self.expected]
        problems = []
        if not all(isinstance(exc, b) for b in builtins):
            problems.append("type")
        elif needs_ft and not isinstance(exc, FunctraceError):
            problems.append("not a FunctraceError")
        msg = str(exc)
        missing = [p for p in self.phrases if p not in msg]
        if missing:
            problems.append(f"missing {missing}")
        if self.line and not self.names_line(msg):
            problems.append("no line")
        return problems

    def names_line(self, msg: str) -> bool:
        """The message names a line of this file that belongs to this case or to a helper
        the case calls (not to another case)."""
        import re
        for m in re.finditer(r"error_cases\.py:(\d+)", msg):
            n = int(m.group(1))
            if self.first <= n <= self.last or not any(
                    c.first <= n <= c.last for c in CASES if c is not self):
                return True
        return False

    def run(self) -> BaseException | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.fn()
            except Exception as e:     # the point is to see what comes out
                return e
        return None


CASES: list[Case] = []


def case(expected: str, *phrases: str, line: bool = False, note: str = "",
         pending: str = ""):
    def deco(fn):
        CASES.append(Case(fn, expected, phrases, line, note, pending))
        return fn
    return deco


X = np.ones((2, 3))
W = np.ones((2, 3))
V4 = np.ones(4)
I3 = np.arange(3)


def total(x):
    return fnp.sum(x)


# ============================================================================================
# Shapes and axes in operators and functions, traced or not
# ============================================================================================

@case("ShapeError", "matmul", "(2, 3)", line=True)
def matmul_under_grad():
    ft.grad(lambda x: fnp.sum(x @ W))(X)


@case("ShapeError", "matmul", "(2, 3)", line=True)
def matmul_under_jit():
    ft.jit(lambda x: x @ W)(X)


@case("ShapeError", "matmul", "(2, 3)", line=True)
def matmul_under_trace():
    ft.trace(lambda x, w: x @ w)(X, W)


@case("ShapeError", "matmul", "(2, 3)", "(3,)", line=True)
def matmul_under_vmap():
    ft.vmap(lambda x: x @ W)(X)


@case("ShapeError", "matmul", "(2, 3)", line=True)
def matmul_under_jvp():
    ft.jvp(lambda x: x @ W, (X,), (X,))


@case("ShapeError", "matmul", "(2, 3)", line=True)
def matmul_under_grad_of_jit():
    ft.grad(ft.jit(lambda x: fnp.sum(x @ W)))(X)


@case("ShapeError", "matmul", "(3,)", "(2, 3)", line=True)
def matmul_under_vmap_of_grad():
    ft.vmap(ft.grad(lambda x: fnp.sum(x @ W)))(X)


@case("FunctraceTypeError", "matmul", "str", line=True)
def matmul_with_string_operand():
    ft.grad(lambda x: fnp.sum(x @ "w"))(X)


@case("ValueError", "matmul", note="numpy's own error: outside transforms fnp is numpy")
def matmul_eager_numpy():
    fnp.matmul(X, W)


@case("ShapeError", "dot", "(2, 3)", line=True)
def dot_under_grad():
    ft.grad(lambda x: fnp.sum(fnp.dot(x, W)))(X)


@case("ShapeError", "broadcast", "(2, 3)", "(4,)", line=True)
def add_under_grad():
    ft.grad(lambda x: fnp.sum(x + V4))(X)


@case("ShapeError", "broadcast", "(2, 3)", "(4,)", line=True)
def mul_under_jit():
    ft.jit(lambda x, y: x * y)(X, V4)


@case("ShapeError", "broadcast", "(2, 3)", "(4,)", line=True)
def add_function_under_trace():
    ft.trace(lambda x, y: fnp.add(x, y))(X, V4)


@case("ShapeError", "broadcast", "(3,)", "(4,)", line=True)
def add_under_vmap():
    ft.vmap(lambda x: x + V4)(X)


@case("ValueError", "broadcast", note="numpy's own error")
def add_eager_numpy():
    fnp.add(X, V4)


@case("ShapeError", "reshape", "(4,)", "6", line=True)
def reshape_wrong_size_under_grad():
    ft.grad(lambda x: fnp.sum(fnp.reshape(x, (4,))))(X)


@case("ShapeError", "reshape", "(5,)", line=True)
def reshape_method_under_jit():
    ft.jit(lambda x: x.reshape(5))(X)


@case("ShapeError", "reshape", "unknown dimension", line=True)
def reshape_two_unknowns():
    ft.grad(lambda x: fnp.sum(x.reshape(-1, -1)))(X)


@case("AxisError", "sum", "axis 2", line=True)
def sum_bad_axis_under_grad():
    ft.grad(lambda x: fnp.sum(fnp.sum(x, axis=2)))(X)


@case("AxisError", "mean", "axis -3", line=True)
def mean_method_bad_axis_under_jit():
    ft.jit(lambda x: x.mean(axis=-3))(X)


@case("AxisError", "max", "axis 5", line=True)
def max_bad_axis_under_vmap():
    ft.vmap(lambda x: fnp.max(x, axis=5))(X)


@case("ShapeError", "sum", "duplicate", line=True)
def sum_duplicate_axes():
    ft.grad(lambda x: fnp.sum(fnp.sum(x, axis=(0, 0))))(X)


@case("numpy.AxisError", "axis 2", note="numpy's own error")
def sum_bad_axis_eager_numpy():
    fnp.sum(X, axis=2)


@case("AxisError", "concatenate", "axis 3", line=True)
def concatenate_bad_axis():
    ft.grad(lambda x: fnp.sum(fnp.concatenate([x, x], axis=3)))(X)


@case("ShapeError", "concatenate", "(2, 3)", "(2, 4)", line=True)
def concatenate_mismatched_shapes():
    ft.grad(lambda x: fnp.sum(fnp.concatenate([x, np.ones((2, 4))], axis=0)))(X)


@case("ShapeError", "concatenate", "zero-dimensional", line=True)
def concatenate_scalars():
    ft.grad(lambda x: fnp.sum(fnp.concatenate([fnp.sum(x), fnp.sum(x)])))(X)


@case("ShapeError", "stack", "(2, 3)", "(3, 2)", line=True)
def stack_mismatched_shapes():
    ft.grad(lambda x: fnp.sum(fnp.stack([x, x.T])))(X)


@case("AxisError", "stack", "axis 4", line=True)
def stack_bad_axis():
    ft.jit(lambda x: fnp.stack([x, x], axis=4))(X)


@case("AxisError", "moveaxis", "5", line=True)
def moveaxis_bad_axis():
    ft.grad(lambda x: fnp.sum(fnp.moveaxis(x, 0, 5)))(X)


@case("AxisError", "swapaxes", "3", line=True)
def swapaxes_bad_axis():
    ft.grad(lambda x: fnp.sum(fnp.swapaxes(x, 0, 3)))(X)


@case("ShapeError", "transpose", "(0, 2)", line=True)
def transpose_bad_permutation():
    ft.grad(lambda x: fnp.sum(fnp.transpose(x, (0, 2))))(X)


@case("AxisError", "expand_dims", "5", line=True)
def expand_dims_bad_axis():
    ft.jit(lambda x: fnp.expand_dims(x, 5))(X)


@case("ShapeError", "squeeze", "(2, 3)", line=True)
def squeeze_non_unit_axis():
    ft.grad(lambda x: fnp.sum(fnp.squeeze(x, axis=0)))(X)


@case("ShapeError", "broadcast_to", "(2, 3)", "(3, 3)", line=True)
def broadcast_to_wrong_shape():
    ft.grad(lambda x: fnp.sum(fnp.broadcast_to(x, (3, 3))))(X)


@case("ShapeError", "split", "equal division", line=True)
def split_unequal():
    ft.grad(lambda x: fnp.sum(fnp.split(x, 2, axis=1)[0]))(X)


@case("ShapeError", "where", "(2, 3)", "(4,)", line=True)
def where_incompatible_shapes():
    ft.grad(lambda x: fnp.sum(fnp.where(x > 0, x, V4)))(X)


@case("ShapeError", "where", "(2,)", "(2, 3)", line=True)
def where_condition_shape_under_jit():
    ft.jit(lambda x, c: fnp.where(c, x, 0.0))(X, np.ones(2) > 0)


@case("ShapeError", "einsum", line=True)
def einsum_mismatched():
    ft.grad(lambda x: fnp.sum(fnp.einsum("ij,jk->ik", x, x)))(X)


@case("ShapeError", "tensordot", line=True)
def tensordot_mismatched():
    ft.grad(lambda x: fnp.sum(fnp.tensordot(x, x, axes=([1], [0]))))(X)


@case("AxisError(index)", "index 5", "size 2", line=True)
def index_out_of_bounds():
    ft.grad(lambda x: fnp.sum(x[5]))(X)


@case("AxisError(index)", "too many indices", line=True)
def too_many_indices():
    ft.grad(lambda x: x[0, 0, 0])(X)


@case("AxisError(index)", "take", "7", line=True)
def take_out_of_bounds():
    ft.grad(lambda x: fnp.sum(fnp.take(x, 7, axis=1)))(X)


@case("AxisError(index)", "integer", "float64", line=True)
def float_index():
    ft.grad(lambda x: fnp.sum(x[np.array([0.5])]))(X)


@case("ShapeError", "at", "(4,)", line=True)
def at_set_wrong_shape():
    ft.grad(lambda x: fnp.sum(x.at[0].set(V4)))(X)


@case("ShapeError", "solve", "(2, 2)", "(3,)", line=True)
def solve_mismatched():
    ft.grad(lambda a: fnp.sum(fnp.linalg.solve(a, np.ones(3))))(np.eye(2))


@case("LinAlgError", "square", line=True,
      note="numpy's LinAlgError kept (what numpy users catch), with the line added")
def inv_non_square():
    ft.grad(lambda a: fnp.sum(fnp.linalg.inv(a)))(X)


# ============================================================================================
# Wrong types (strings, objects, None) as arguments and operands
# ============================================================================================

@case("FunctraceTypeError", "str", "argument", line=True)
def grad_of_string_argument():
    ft.grad(total)("abc")


@case("FunctraceTypeError", "<U1", line=True)
def grad_of_string_array():
    ft.grad(total)(np.array(["a", "b"]))


@case("FunctraceTypeError", "object", line=True)
def grad_of_object_array():
    ft.grad(total)(np.array([object()]))


@case("FunctraceTypeError", "sum", "NoneType", line=True)
def grad_of_none_argument():
    ft.grad(total)(None)


@case("FunctraceTypeError", "str", line=True)
def jit_of_string_argument():
    ft.jit(total)("abc")


@case("FunctraceTypeError", "str", line=True)
def vmap_of_string_argument():
    ft.vmap(total)("abc")


@case("FunctraceTypeError", "str", line=True)
def vjp_of_string_argument():
    ft.vjp(total, "abc")


@case("FunctraceTypeError", "str", line=True)
def jvp_of_string_argument():
    ft.jvp(total, ("abc",), ("abc",))


@case("FunctraceTypeError", "str", line=True)
def trace_of_string_argument():
    ft.trace(total)("abc")


@case("FunctraceTypeError", "str", line=True)
def linearize_of_string_argument():
    ft.linearize(fnp.sin, "abc")


@case("FunctraceTypeError", "<U1", line=True)
def hessian_of_string_array():
    ft.hessian(total)(np.array(["a", "b"]))


@case("FunctraceTypeError", "object", line=True)
def value_and_grad_of_object_array():
    ft.value_and_grad(total)(np.array([None, 1.0]))


@case("FunctraceTypeError", "<U1", line=True)
def jit_lower_of_string_array():
    ft.jit(total).lower(np.array(["a"]))


@case("FunctraceTypeError", "<U1")
def shape_dtype_with_string_dtype():
    ft.trace(total)(ft.ShapeDtype((3,), "U1"))


@case("FunctraceTypeError", "set", line=True)
def jacrev_of_set_argument():
    ft.jacrev(total)({1.0, 2.0})


@case("FunctraceTypeError", "sin", "str", line=True)
def string_operand_under_grad():
    ft.grad(lambda x: fnp.sum(x * fnp.sin("a")))(X)


@case("FunctraceTypeError", "NoneType", line=True)
def none_operand_under_grad():
    ft.grad(lambda x: fnp.sum(x + None))(X)


@case("FunctraceTypeError", "str", line=True)
def string_operand_under_jit():
    ft.jit(lambda x: x * "a")(X)


@case("FunctraceTypeError", "sum", "axis", line=True)
def string_axis_under_grad():
    ft.grad(lambda x: fnp.sum(x, axis="rows"))(X)


@case("FunctraceTypeError", "returned a str", line=True)
def grad_of_function_returning_string():
    ft.grad(lambda x: "done")(X)


@case("FunctraceTypeError", "NoneType", line=True)
def grad_of_function_returning_none():
    ft.grad(lambda x: None)(X)


@case("FunctraceTypeError", "returned a str", line=True)
def trace_of_function_returning_string():
    ft.trace(lambda x: "done")(X)


@case("FunctraceTypeError", "not callable", "int", line=True)
def grad_of_non_callable():
    ft.grad(3)(X)


@case("FunctraceTypeError", "not callable", line=True)
def jit_of_non_callable():
    ft.jit("f")(X)


@case("FunctraceTypeError", "not callable", line=True)
def vmap_of_non_callable():
    ft.vmap(None)(X)


@case("FunctraceTypeError", "not callable", line=True)
def vjp_of_non_callable():
    ft.vjp(X, X)


@case("FunctraceTypeError", "not callable", line=True)
def custom_vjp_of_non_callable():
    ft.custom_vjp(np.sin(1.0))


# ============================================================================================
# argnums
# ============================================================================================

@case("FunctraceValueError", "argnums", "1", "out of range", line=True)
def argnums_out_of_range():
    ft.grad(total, argnums=1)(X)


@case("FunctraceValueError", "argnums", "-2", line=True)
def argnums_negative_out_of_range():
    ft.grad(total, argnums=-2)(X)


@case("FunctraceTypeError", "argnums", "'a'", line=True)
def argnums_string():
    ft.grad(total, argnums="a")(X)


@case("FunctraceTypeError", "argnums", "0.5", line=True)
def argnums_float():
    ft.grad(total, argnums=0.5)(X)


@case("FunctraceValueError", "argnums", "duplicate", line=True)
def argnums_duplicate():
    ft.grad(lambda x, y: fnp.sum(x * y), argnums=(0, 0))(X, X)


@case("FunctraceValueError", "argnums", "0 positional", line=True)
def grad_called_without_arguments():
    ft.grad(lambda: 1.0)()


@case("FunctraceValueError", "argnums", "2", line=True)
def jacrev_argnums_out_of_range():
    ft.jacrev(total, argnums=2)(X)


@case("FunctraceTypeError", "argnums", "'x'", line=True)
def jacfwd_argnums_string():
    ft.jacfwd(total, argnums="x")(X)


@case("FunctraceValueError", "argnums", "5", line=True)
def value_and_grad_argnums_tuple_out_of_range():
    ft.value_and_grad(lambda x, y: fnp.sum(x * y), argnums=(0, 5))(X, X)


@case("FunctraceValueError", "argnums", "1", line=True)
def hessian_argnums_out_of_range():
    ft.hessian(total, argnums=1)(X)


# ============================================================================================
# grad's output and inputs
# ============================================================================================

@case("FunctraceTypeError", "scalar output", "(2, 3)", "size 6", "fnp.sum", line=True)
def grad_of_non_scalar():
    ft.grad(lambda x: x * 2.0)(X)


@case("FunctraceTypeError", "float output", "int64", line=True)
def grad_of_integer_output():
    ft.grad(lambda x: fnp.sum(x > 0).astype(np.int64))(X)


@case("FunctraceTypeError", "holomorphic", line=True)
def grad_of_complex_output():
    ft.grad(lambda x: fnp.sum(x * 1j))(X)


@case("FunctraceTypeError", "int64", "float", line=True)
def grad_wrt_integer_input():
    ft.grad(total)(I3)


@case("FunctraceTypeError", "bool", "float", line=True)
def grad_wrt_bool_input():
    ft.grad(lambda x: fnp.sum(x * 1.0))(np.array([True, False]))


@case("FunctraceTypeError", "int", line=True)
def grad_wrt_python_int():
    ft.grad(lambda x: x * 2.0)(3)


@case("FunctraceTypeError", "has_aux", "tuple of 2", line=True)
def grad_of_tuple_without_has_aux():
    ft.grad(lambda x: (fnp.sum(x), x))(X)


@case("FunctraceTypeError", "has_aux", "pair", line=True)
def grad_has_aux_but_scalar():
    ft.grad(lambda x: fnp.sum(x), has_aux=True)(X)


@case("FunctraceTypeError", "has_aux", "tuple of 3", line=True)
def grad_has_aux_three_values():
    ft.grad(lambda x: (fnp.sum(x), x, x), has_aux=True)(X)


@case("FunctraceTypeError", "value_and_grad", "list of 2", line=True)
def value_and_grad_of_list():
    ft.value_and_grad(lambda x: [fnp.sum(x), fnp.sum(x)])(X)


@case("FunctraceTypeError", "hessian", "int64", line=True)
def hessian_wrt_integer_input():
    ft.hessian(total)(I3)


@case("FunctraceTypeError", "jacrev", "int64", line=True)
def jacrev_of_integer_output():
    ft.jacrev(lambda x: (x > 0).astype(np.int64))(X)


@case("FunctraceTypeError", "jacrev", "has_aux", "pair", line=True)
def jacrev_has_aux_mismatch():
    ft.jacrev(lambda x: x * 2.0, has_aux=True)(X)


@case("FunctraceTypeError", "jacfwd", "has_aux", "pair", line=True)
def jacfwd_has_aux_mismatch():
    ft.jacfwd(lambda x: x * 2.0, has_aux=True)(X)


# ============================================================================================
# vjp and its cotangents
# ============================================================================================

@case("FunctraceTypeError", "vjp", "has_aux", "pair", line=True)
def vjp_has_aux_but_one_output():
    ft.vjp(total, X, has_aux=True)


@case("FunctraceTypeError", "vjp", "has_aux", "tuple of 3", line=True)
def vjp_has_aux_three_outputs():
    ft.vjp(lambda x: (x, x, x), X, has_aux=True)


@case("ShapeError", "cotangent", "(3,)", "(2, 3)", line=True)
def vjp_fn_wrong_shape():
    _, pullback = ft.vjp(lambda x: x * 2.0, X)
    pullback(np.ones(3))


@case("FunctraceTypeError", "cotangent", "structure", line=True)
def vjp_fn_wrong_structure():
    _, pullback = ft.vjp(lambda x: x * 2.0, X)
    pullback((X, X))


@case("FunctraceTypeError", "cotangent", "str", line=True)
def vjp_fn_string_cotangent():
    _, pullback = ft.vjp(lambda x: fnp.sum(x), X)
    pullback("one")


@case("FunctraceTypeError", "cotangent", "complex128", "float64", line=True)
def vjp_fn_complex_cotangent_for_real_output():
    _, pullback = ft.vjp(lambda x: x * 2.0, X)
    pullback(X * 1j)


@case("FunctraceTypeError", "vjp_fn", "one cotangent", "2", line=True)
def vjp_fn_two_arguments():
    _, pullback = ft.vjp(lambda x, y: x * y, X, X)
    pullback(X, X)


@case("FunctraceTypeError", "structure", line=True)
def vjp_fn_none_cotangent():
    _, pullback = ft.vjp(lambda x: x * 2.0, X)
    pullback(None)


# ============================================================================================
# jvp and linearize
# ============================================================================================

@case("FunctraceTypeError", "tuples", "ft.jvp(f, (x,), (t,))", line=True)
def jvp_with_arrays_not_tuples():
    ft.jvp(lambda x: x, X, X)


@case("FunctraceTypeError", "2 primal", "1 tangent", line=True)
def jvp_tangent_count():
    ft.jvp(lambda x, y: x * y, (X, X), (X,))


@case("ShapeError", "tangent", "(3,)", "(2, 3)", line=True)
def jvp_tangent_wrong_shape():
    ft.jvp(lambda x: x, (X,), (np.ones(3),))


@case("FunctraceTypeError", "tangent", "complex128", "float64", line=True)
def jvp_complex_tangent_for_real_primal():
    ft.jvp(lambda x: x, (X,), (X * 1j,))


@case("FunctraceTypeError", "tangent", "structure", line=True)
def jvp_tangent_wrong_structure():
    ft.jvp(lambda p: p["a"], ({"a": X},), ([X],))


@case("FunctraceTypeError", "tangent", "str", line=True)
def jvp_string_tangent():
    ft.jvp(lambda x: x, (X,), ("t",))


@case("ShapeError", "tangent", "(3,)", "(2, 3)", line=True)
def linearize_tangent_wrong_shape():
    _, f_jvp = ft.linearize(lambda x: fnp.sin(x), X)
    f_jvp(np.ones(3))


@case("FunctraceTypeError", "tangent", "structure", line=True)
def linearize_tangent_count():
    _, f_jvp = ft.linearize(lambda x: fnp.sin(x), X)
    f_jvp(X, X)


@case("FunctraceTypeError", "tangent", "complex128", line=True)
def linearize_complex_tangent():
    _, f_jvp = ft.linearize(lambda x: fnp.sin(x), X)
    f_jvp(X * 1j)


# ============================================================================================
# vmap axes
# ============================================================================================

@case("AxisError", "out_axes", "5", line=True)
def vmap_out_axes_out_of_range():
    ft.vmap(lambda x: x * 2.0, out_axes=5)(X)


@case("AxisError", "in_axes", "2", "(2, 3)", line=True)
def vmap_in_axes_out_of_range():
    ft.vmap(lambda x: x, in_axes=2)(X)


@case("AxisError", "in_axes", "-5", line=True)
def vmap_negative_in_axes_out_of_range():
    ft.vmap(lambda x: x, in_axes=-5)(X)


@case("ShapeError", "inconsistent sizes", "2", "4", line=True)
def vmap_inconsistent_sizes():
    ft.vmap(lambda x, y: x + y[0])(X, np.ones((4, 3)))


@case("FunctraceValueError", "in_axes", "3 entries", "2", line=True)
def vmap_in_axes_wrong_length():
    ft.vmap(lambda x, y: x + y, in_axes=(0, 0, 0))(X, X)


@case("FunctraceTypeError", "in_axes", "str", line=True)
def vmap_in_axes_string():
    ft.vmap(lambda x: x, in_axes="rows")(X)


@case("FunctraceTypeError", "out_axes", "float", line=True)
def vmap_out_axes_float():
    ft.vmap(lambda x: x, out_axes=0.5)(X)


@case("FunctraceValueError", "axis_size", line=True)
def vmap_nothing_batched():
    ft.vmap(lambda x: x, in_axes=None)(X)


@case("FunctraceValueError", "out_axes=None", line=True)
def vmap_out_axes_none_for_batched_output():
    ft.vmap(lambda x: x * 2.0, out_axes=None)(X)


@case("FunctraceValueError", "in_axes", "keys", line=True)
def vmap_in_axes_dict_keys_differ():
    ft.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": X})


@case("ConcretizationError", "vmap", "fnp.where", line=True)
def vmap_python_if_on_batched_value():
    def f(x):
        if fnp.sum(x) > 0:
            return x
        return -x
    ft.vmap(f)(X)


# ============================================================================================
# custom_vjp and custom_jvp rules
# ============================================================================================

def _custom_vjp(bwd, fwd=None):
    @ft.custom_vjp
    def f(x):
        return x * 2.0
    f.defvjp(fwd or (lambda x: (x * 2.0, None)), bwd)
    return f


@case("ShapeError", "custom_vjp", "(5,)", "(2, 3)", line=True)
def custom_vjp_bwd_wrong_shape():
    f = _custom_vjp(lambda res, g: (np.ones(5),))
    ft.grad(lambda x: fnp.sum(f(x)))(X)


@case("FunctraceTypeError", "custom_vjp", "tuple", line=True)
def custom_vjp_bwd_returns_bare_array():
    f = _custom_vjp(lambda res, g: g * 2.0)
    ft.grad(lambda x: fnp.sum(f(x)))(X)


@case("FunctraceTypeError", "custom_vjp", "one cotangent per argument", line=True)
def custom_vjp_bwd_too_many_cotangents():
    f = _custom_vjp(lambda res, g: (g, g))
    ft.grad(lambda x: fnp.sum(f(x)))(X)


@case("FunctraceTypeError", "custom_vjp", "(output, residuals)", line=True)
def custom_vjp_fwd_not_a_pair():
    f = _custom_vjp(lambda res, g: (g,), fwd=lambda x: x * 2.0)
    ft.grad(lambda x: fnp.sum(f(x)))(X)


@case("FunctraceTypeError", "custom_vjp", "bwd", "(residuals, cotangent)", line=True)
def custom_vjp_bwd_wrong_arity():
    _custom_vjp(lambda g: (g,))


@case("FunctraceTypeError", "custom_vjp", "bwd", "str", line=True)
def custom_vjp_bwd_not_callable():
    _custom_vjp("bwd")


@case("MissingRuleError", "custom_vjp function f", "forward mode", "custom_jvp", line=True)
def custom_vjp_under_forward_mode():
    f = _custom_vjp(lambda res, g: (g * 2.0,))
    ft.jvp(lambda x: f(x), (X,), (X,))


@case("FunctraceTypeError", "custom_vjp", "defvjp", line=True)
def custom_vjp_without_rule():
    @ft.custom_vjp
    def f(x):
        return x
    ft.grad(lambda x: fnp.sum(f(x)))(X)


@case("FunctraceTypeError", "custom_vjp", "dtype", line=True)
def custom_vjp_bwd_string_cotangent():
    f = _custom_vjp(lambda res, g: ("zero",))
    ft.grad(lambda x: fnp.sum(f(x)))(X)


def _custom_jvp(rule):
    @ft.custom_jvp
    def f(x):
        return fnp.sin(x)
    f.defjvp(rule)
    return f


@case("FunctraceTypeError", "custom_jvp", "(primal_out, tangent_out)", line=True)
def custom_jvp_rule_not_a_pair():
    f = _custom_jvp(lambda p, t: fnp.sin(p[0]))
    ft.jvp(f, (X,), (X,))


@case("ShapeError", "custom_jvp", "(3,)", "(2, 3)", line=True)
def custom_jvp_tangent_wrong_shape():
    f = _custom_jvp(lambda p, t: (fnp.sin(p[0]), np.ones(3)))
    ft.jvp(f, (X,), (X,))


@case("FunctraceTypeError", "custom_jvp", "structure", line=True)
def custom_jvp_tangent_wrong_structure():
    f = _custom_jvp(lambda p, t: (fnp.sin(p[0]), (t[0], t[0])))
    ft.grad(lambda x: fnp.sum(f(x)))(X)


@case("FunctraceTypeError", "custom_jvp", "(primals, tangents)", line=True)
def custom_jvp_rule_wrong_arity():
    _custom_jvp(lambda p: p)


# ============================================================================================
# jit
# ============================================================================================

@case("FunctraceTypeError", "static", "hashable", "list", line=True)
def jit_unhashable_static_argument():
    ft.jit(lambda x, n: x * len(n), static_argnums=1)(X, [1, 2])


@case("FunctraceTypeError", "static", "hashable", "ndarray", line=True)
def jit_array_as_static_argument():
    ft.jit(lambda x, n: x, static_argnums=1)(X, X)


@case("FunctraceValueError", "static_argnums", "out of range", line=True)
def jit_static_argnums_out_of_range():
    ft.jit(lambda x: x, static_argnums=3)(X)


@case("FunctraceTypeError", "static_argnums", "'n'", line=True)
def jit_static_argnums_string():
    ft.jit(lambda x, n: x, static_argnums="n")


@case("FunctraceValueError", "static and donated", line=True)
def jit_donate_static_argument():
    ft.jit(lambda x, n: x, static_argnums=1, donate_argnums=1)


@case("FunctraceValueError", "donate_argnums", "out of range", line=True)
def jit_donate_argnums_out_of_range():
    ft.jit(lambda x: x * 2.0, donate_argnums=2, backend="numpy")(X)


@case("FunctraceValueError", "backend", "'gpu'", line=True)
def jit_unknown_backend():
    ft.jit(lambda x: x, backend="gpu")


@case("ConcretizationError", "bool()", "ft.cond", "ft.while_loop", "static_argnums", line=True)
def jit_python_if_on_abstract_value():
    def f(x):
        if fnp.sum(x) > 0:
            return x
        return -x
    ft.jit(f).lower(ft.ShapeDtype(X.shape, X.dtype))


@case("ConcretizationError", "float()", line=True)
def jit_float_of_abstract_value():
    ft.jit(lambda x: x * float(fnp.sum(x))).lower(ft.ShapeDtype(X.shape, X.dtype))


@case("ConcretizationError", "index", "ft.fori_loop", line=True)
def jit_python_range_of_abstract_value():
    ft.jit(lambda x, n: x * sum(range(n))).lower(X, ft.ShapeDtype((), np.int64))


@case("ConcretizationError", "bool()", "ft.while_loop", line=True, note="as in JAX")
def jit_python_while_with_no_variants_allowed():
    def f(x):
        while fnp.max(x) > 1.0:
            x = x / 2.0
        return x
    ft.jit(f, max_variants=0)(X * 5.0)


@case("GuardError", "max_variants=2", "ft.while_loop", "bool() was", line=True)
def jit_more_paths_than_max_variants():
    def f(x):
        while fnp.max(x) > 1.0:
            x = x / 2.0
        return x
    jf = ft.jit(f, backend="numpy", max_variants=2)
    for scale in (1.5, 3.0, 6.0):      # three trip counts: three paths
        jf(X * scale)


# ============================================================================================
# Tracers used wrongly
# ============================================================================================

_leaked = []


@case("TracerLeakError", "escaped", line=True)
def leaked_tracer_used_later():
    def f(x):
        _leaked.append(x)
        return fnp.sum(x)
    ft.grad(f)(X)
    ft.grad(lambda y: fnp.sum(y * _leaked[-1]))(X)


@case("TracerLeakError", "outside", line=True)
def leaked_tracer_in_numpy_function():
    def f(x):
        _leaked.append(x)
        return fnp.sum(x)
    ft.jit(f, backend="numpy")(X)
    fnp.sin(_leaked[-1])


@case("FunctraceTypeError", "immutable", ".at[", line=True)
def inplace_assignment_under_grad():
    def f(x):
        x[0] = 1.0
        return fnp.sum(x)
    ft.grad(f)(X)


@case("FunctraceTypeError", "immutable", ".at[", line=True)
def inplace_assignment_under_jit():
    def f(x):
        x[0, 0] = 1.0
        return x
    ft.jit(f)(X)


@case("FunctraceTypeError", "immutable", "fnp.sort", line=True)
def inplace_sort_method():
    def f(x):
        x.sort()
        return fnp.sum(x)
    ft.grad(f)(X)


@case("TracerConversionError", "float()", "stop_gradient", line=True)
def float_of_differentiated_value():
    ft.grad(lambda x: fnp.sum(x) * float(fnp.sum(x)))(X)


@case("FunctraceTypeError", "hashable", line=True)
def tracer_as_dict_key():
    ft.grad(lambda x: fnp.sum({x: 1}[x]))(X)


@case("FunctraceTypeError", "len()", "0-d", line=True)
def len_of_scalar_tracer():
    ft.grad(lambda x: fnp.sum(x) * len(fnp.sum(x)))(X)


@case("FunctraceTypeError", "numpy.sin", "out", line=True)
def numpy_ufunc_with_out_on_tracer():
    ft.grad(lambda x: fnp.sum(np.sin(x, out=np.empty((2, 3)))))(X)


@case("FunctraceTypeError", "numpy.unwrap", "counterpart", line=True)
def numpy_function_without_counterpart():
    ft.grad(lambda x: fnp.sum(np.unwrap(x)))(X)


@case("FunctraceTypeError", "sin", "keyword", "casting", line=True)
def fnp_ufunc_unsupported_keyword():
    ft.grad(lambda x: fnp.sum(fnp.sin(x, casting="unsafe")))(X)


@case("FunctraceTypeError", "out=", line=True)
def fnp_reduction_out_under_transform():
    ft.grad(lambda x: fnp.sum(x, out=np.empty(())))(X)


@case("MissingRuleError", "reshape", "order", line=True)
def fnp_reshape_order_f_under_transform():
    ft.grad(lambda x: fnp.sum(fnp.reshape(x, (3, 2), order="F")))(X)


# ============================================================================================
# Symbols called wrongly
# ============================================================================================

SYM = ft.trace(lambda x: x * 2.0)(np.ones(3))
SYM2 = ft.trace(lambda x, y: x * y)(np.ones(3), np.ones(3))


@case("FunctraceTypeError", "<U1", "f64[3]", line=True)
def symbol_string_array():
    SYM(np.array(["a", "b", "c"]))


@case("FunctraceTypeError", "str", line=True)
def symbol_string():
    SYM("abc")


@case("FunctraceTypeError", "1 array argument", "got 2", line=True)
def symbol_too_many_arguments():
    SYM(np.ones(3), np.ones(3))


@case("FunctraceTypeError", "2 array argument", "got 1", line=True)
def symbol_too_few_arguments():
    SYM2(np.ones(3))


@case("ShapeError", "argument 0", "(3,)", "(4,)", line=True)
def symbol_wrong_shape():
    SYM(V4)


@case("FunctraceTypeError", "argument 0", "complex128", "float64", line=True)
def symbol_wrong_dtype():
    SYM(np.ones(3) * 1j)


@case("FunctraceTypeError", "structure", line=True)
def symbol_wrong_structure():
    SYM((np.ones(3),))


@case("FunctraceTypeError", "1 array argument", "None", line=True)
def symbol_none_argument():
    SYM(None)


@case("ShapeError", "argument 0", "(3,)", "(4,)", line=True)
def symbol_wrong_shape_under_grad():
    ft.grad(lambda x: fnp.sum(SYM(x)))(V4)


@case("FunctraceTypeError", "<U1", line=True)
def symbol_string_array_under_jit():
    ft.jit(lambda x: SYM(x))(np.array(["a", "b", "c"]))


@case("GuardError", "bool() was True", line=True)
def symbol_other_branch():
    def f(x):
        if fnp.sum(x) > 0:
            return x
        return -x
    sym = ft.trace(f)(np.ones(3))
    sym(-np.ones(3))


# ============================================================================================
# Symbol.from_json of garbage (hardened on the JSON-security branch: see docs/errors.md)
# ============================================================================================

@case("GraphFormatError", "Symbol JSON", "not valid JSON")
def from_json_not_json():
    ft.Symbol.from_json("this is not json")


@case("GraphFormatError", "graph JSON")
def from_json_wrong_document():
    ft.Symbol.from_json('{"graph": 1, "in_tree": {"tuple": []}, "out_tree": {"leaf": 0}}')


@case("GraphFormatError", "Symbol JSON", "lacks the field")
def from_json_missing_keys():
    ft.Symbol.from_json("{}")


@case("FunctraceTypeError", "from_json", "str", line=True)
def from_json_of_non_string():
    ft.Symbol.from_json(12)


@case("GraphFormatError", "nested too deeply")
def from_json_deeply_nested():
    ft.Symbol.from_json("[" * 100000 + "]" * 100000)


@case("GraphFormatError", "graph JSON")
def from_json_huge_number():
    doc = json.loads(SYM.to_json())
    doc["graph"]["eqns"][0]["inputs"][1]["lit"]["shape"] = [10 ** 400]
    ft.Symbol.from_json(json.dumps(doc))


# ============================================================================================
# functrace.autograd (the MXNet-style facade)
# ============================================================================================

@case("FunctraceTypeError", "attach_grad", "int64", "float", line=True)
def attach_grad_to_int_array():
    autograd.attach_grad(np.arange(3))


@case("FunctraceValueError", "grad_req", "'read'", line=True)
def attach_grad_bad_grad_req():
    autograd.attach_grad(np.ones(3), grad_req="read")


@case("FunctraceValueError", "grad_req", "'sum'", line=True)
def set_bad_grad_req_attribute():
    x = autograd.attach_grad(np.ones(3))
    x.grad_req = "sum"


@case("FunctraceValueError", "2 variables", "1 gradients", line=True)
def mark_variables_count_mismatch():
    autograd.mark_variables([autograd.array(np.ones(3)), autograd.array(np.ones(2))],
                            [autograd.array(np.zeros(3))])


@case("FunctraceValueError", "no heads", line=True)
def backward_of_no_heads():
    autograd.backward([])


@case("FunctraceValueError", "does not require a gradient", line=True)
def autograd_grad_wrt_unmarked_array():
    x = autograd.attach_grad(np.ones(3))
    w = autograd.array(np.ones(3))
    with autograd.record():
        y = (x * w).sum()
    autograd.grad(y, [w])


@case("FunctraceTypeError", "numpy.unwrap", "recorded", line=True)
def autograd_numpy_function_without_counterpart():
    x = autograd.attach_grad(np.ones(3))
    with autograd.record():
        np.unwrap(x * 2.0)


@case("FunctraceValueError", "not recorded", "record()", line=True)
def backward_of_unrecorded_head():
    x = autograd.attach_grad(np.ones(3))
    y = (x * x).sum()
    autograd.backward(y)


@case("FunctraceValueError", "freed", "retain_graph=True", line=True)
def backward_twice():
    x = autograd.attach_grad(np.ones(3))
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    y.backward()


@case("ShapeError", "head gradient", "(4,)", "(3,)", line=True)
def backward_head_grad_wrong_shape():
    x = autograd.attach_grad(np.ones(3))
    with autograd.record():
        y = x * 2.0
    autograd.backward(y, head_grads=np.ones(4))


@case("FunctraceValueError", "2 head gradients", "1 head", line=True)
def backward_head_grad_count():
    x = autograd.attach_grad(np.ones(3))
    with autograd.record():
        y = x * 2.0
    autograd.backward([y], head_grads=[np.ones(3), np.ones(3)])


@case("FunctraceTypeError", "mark_variables", "ndarray", line=True)
def mark_variables_numpy_arrays():
    autograd.mark_variables([np.ones(3)], [np.zeros(3)])


@case("FunctraceValueError", "already has a gradient", line=True)
def mark_variable_twice():
    x = autograd.attach_grad(np.ones(3))
    autograd.attach_grad(x)


@case("FunctraceValueError", "in-place", "record", line=True)
def inplace_update_while_recording():
    x = autograd.attach_grad(np.ones(3))
    with autograd.record():
        y = x * 2.0
        y[0] = 5.0


@case("ShapeError", "broadcast", "(3,)", "(4,)", line=True)
def autograd_add_incompatible_shapes():
    x = autograd.attach_grad(np.ones(3))
    with autograd.record():
        x + autograd.array(V4)


@case("FunctraceTypeError", "<U1", line=True)
def autograd_array_of_strings():
    autograd.array(np.array(["a"]))


# ============================================================================================
# The table
# ============================================================================================

def _excerpt(exc: BaseException | None, width: int = 170) -> str:
    """The message up to the user's location (which names this file's lines: they move),
    shortened; '(no error)' when nothing was raised."""
    import re
    if exc is None:
        return "(no error)"
    msg = " ".join(str(exc).split())
    cut = re.search(r"[;,.]? ?\(?\b[Aa]t \S*error_cases\.py:\d+", msg)
    if cut:
        msg = msg[:cut.start()].rstrip(" ;,(") + " … at «your file:line»"
    msg = re.sub(r"/\S*/(\w+\.py)", r"\1", msg)        # other paths: file names only
    return msg if len(msg) <= width else msg[:width - 1] + "…"


def judge(c: Case, exc) -> str:
    """'wrong' (no error, or not the builtin type a numpy user expects), 'unclear' (the
    message lacks a key phrase or the user's line), 'not-ft' (clear and of the right builtin
    type, but not a FunctraceError where one is required), or 'ok'."""
    problems = c.check(exc)
    if any(p in ("no error", "type") for p in problems):
        return "wrong"
    if any(p.startswith("missing") or p == "no line" for p in problems):
        return "unclear"
    return "not-ft" if problems else "ok"


def report(verbose: bool = True) -> dict:
    """Run every case; print one line per case and the counts."""
    counts = {"wrong": 0, "unclear": 0, "not-ft": 0, "ok": 0}
    unclear_line_only = not_ft_too = 0
    for c in CASES:
        exc = c.run()
        problems = c.check(exc)
        kind = judge(c, exc)
        counts[kind] += 1
        if kind == "unclear":
            unclear_line_only += all(p in ("no line", "not a FunctraceError") for p in problems)
            not_ft_too += "not a FunctraceError" in problems
        if verbose:
            got = "-" if exc is None else type(exc).__name__
            print(f"{kind:8} {c.name:45} expect {c.expected:20} got {got:22} "
                  f"{'; '.join(problems)}")
            if kind != "ok":
                print(f"{'':8} {_excerpt(exc)}")
    print(f"\n{len(CASES)} cases: {counts['wrong']} wrong (no error, or not the builtin type a "
          f"numpy user expects); {counts['unclear']} unclear message (of which "
          f"{unclear_line_only} lack only the user's line, {not_ft_too} are also not "
          f"FunctraceErrors); {counts['not-ft']} clear and of the right builtin type but not "
          f"a FunctraceError; {counts['ok']} as expected")
    return counts


def markdown() -> str:
    """docs/errors.md's catalogue table (regenerate: python tests/support/error_cases.py --docs)."""
    rows = ["| case | what the user wrote | raises | message (excerpt) |",
            "|---|---|---|---|"]
    for c in CASES:
        exc = c.run()
        code = c.code.replace("|", "\\|").replace("\n", "<br>")
        cls = f"`{EXPECTED[c.expected][0].rsplit('.', 1)[-1]}`"
        if c.note:
            cls += f" ({c.note})"
        if c.pending:
            cls += " *pending*"
        excerpt = _excerpt(exc).replace("|", "\\|").replace("`", "'")
        rows.append(f"| `{c.name}` | `{code}` | {cls} | {excerpt} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- catalogue: begin -->", "<!-- catalogue: end -->"


def write_docs(path: str) -> None:
    """Replace the table between the catalogue markers of ``path`` (docs/errors.md)."""
    with open(path) as f:
        text = f.read()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + markdown() + END + tail)


if __name__ == "__main__":
    if "--docs" in sys.argv:
        write_docs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                                "errors.md"))
    elif "--markdown" in sys.argv:
        print(markdown())
    else:
        report()
