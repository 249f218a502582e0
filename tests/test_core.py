"""The IR, verify, the simplification passes (hypothesis), and the layering rule."""

import ast
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functrace as ft
from functrace import ops
from functrace.core import AVal, Eqn, Graph, Lit, Var, verify
from functrace.errors import FunctraceError
from functrace.passes.simplify import cse, dce, fold_constants, optimize, simplify
from functrace.tracing import trace_to_graph

PKG = pathlib.Path(ft.__file__).parent


def test_types_are_immutable_and_hashable():
    a = AVal((2, 3), "float32")
    assert a == AVal((2, 3), np.float32) and hash(a) == hash(AVal((2, 3), "f4"))
    with pytest.raises(AttributeError):
        a.shape = (1,)
    assert Lit(np.float64(-0.0)) != Lit(np.float64(0.0))
    assert Lit(np.float64(np.nan)) == Lit(np.float64(np.nan))
    g = Graph([Var(a)], [], [])
    with pytest.raises(AttributeError):
        g.eqns = ()


def test_verify_catches_bad_graphs():
    x = Var(AVal((3,), "float64"))
    y = Var(AVal((3,), "float64"))
    bad_type = Graph([x], [Eqn(ops.elementwise.sin_p, [x], {}, [Var(AVal((4,), "float64"))])],
                     [])
    with pytest.raises(FunctraceError, match="type rule"):
        verify(bad_type)
    undefined = Graph([x], [Eqn(ops.elementwise.sin_p, [y], {}, [Var(x.aval)])], [])
    with pytest.raises(FunctraceError, match="before it is defined"):
        verify(undefined)
    out = Var(x.aval)
    twice = Graph([x], [Eqn(ops.elementwise.sin_p, [x], {}, [out]),
                        Eqn(ops.elementwise.cos_p, [x], {}, [out])], [out])
    with pytest.raises(FunctraceError, match="redefines"):
        verify(twice)


UNARY = ["sin", "cos", "tanh", "exp", "neg", "abs"]
BINARY = ["add", "sub", "mul", "max"]


@st.composite
def random_graphs(draw):
    """Random elementwise graphs over 1-3 inputs, with repeats (for CSE) and dead code."""
    n_in = draw(st.integers(1, 3))
    steps = draw(st.lists(st.tuples(st.sampled_from(UNARY + BINARY + ["lit1", "lit0"]),
                                    st.integers(0, 100), st.integers(0, 100)),
                          min_size=1, max_size=12))
    n_out = draw(st.integers(1, 2))

    def fn(*xs):
        vals = list(xs)
        for name, i, j in steps:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if name == "lit1":
                vals.append(ops.mul(a, 1.0))
            elif name == "lit0":
                vals.append(ops.add(a, 0.0))
            elif name in UNARY:
                vals.append(getattr(ops, name)(a))
            else:
                vals.append(getattr(ops, {"max": "maximum"}.get(name, name))(a, b))
        return vals[-n_out:]
    args = [np.linspace(-1.0, 1.0, 4) * (k + 1) for k in range(n_in)]
    return trace_to_graph(fn, args).graph, args


def _run(g, args):
    from functrace.backends import numpy_ref
    return numpy_ref.run(g, args)


@settings(max_examples=60, deadline=None)
@given(random_graphs())
def test_passes_preserve_outputs_and_are_idempotent(case):
    g, args = case
    ref = _run(g, args)
    for p in (dce, cse, fold_constants, simplify, optimize):
        h = p(g)
        verify(h)
        assert h.in_avals == g.in_avals and h.out_avals == g.out_avals
        for a, b in zip(_run(h, args), ref):
            np.testing.assert_array_equal(a, b)
    assert cse(cse(g)) == cse(g)
    assert dce(dce(g)) == dce(g)
    o = optimize(g)
    assert optimize(o) == o


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_json_roundtrip_random_graphs(case):
    g, _ = case
    sym = ft.Symbol(g)
    assert ft.Symbol.from_json(sym.to_json()) == sym


def test_simplify_does_not_drop_x_times_zero_for_traced_x():
    g = trace_to_graph(lambda x: [ops.mul(x, 0.0)], [np.array([np.inf])]).graph
    out = _run(optimize(g), [np.array([np.inf])])[0]
    assert np.isnan(out[0])   # inf * 0 stays nan: the rewrite is not applied to traced x


def test_simplify_keeps_every_result_bit_for_bit():
    # issue 14: only rewrites exact for every input, signed zeros and overflow included
    x = np.array([-0.0, 0.0, 1e308, -2.5, np.inf])
    cases = {
        "x + 0.0": (lambda x: [ops.add(x, 0.0)], False),      # -0.0 + 0.0 is +0.0
        "0.0 + x": (lambda x: [ops.add(0.0, x)], False),
        "x + -0.0": (lambda x: [ops.add(x, -0.0)], True),
        "x - 0.0": (lambda x: [ops.sub(x, 0.0)], True),
        "x - -0.0": (lambda x: [ops.sub(x, -0.0)], False),
        "0.0 - x": (lambda x: [ops.sub(0.0, x)], False),      # 0.0 - 0.0 is +0.0, -x is -0.0
        "-0.0 - x": (lambda x: [ops.sub(-0.0, x)], True),
        "0.5 * (2 * x)": (lambda x: [ops.mul(0.5, ops.mul(2.0, x))], False),   # 2e308 is inf
        "x * 1": (lambda x: [ops.mul(x, 1.0)], True),
    }
    for name, (fn, folded) in cases.items():
        g = trace_to_graph(fn, [x]).graph
        o = optimize(g)
        want = _run(g, [x])[0]
        got = _run(o, [x])[0]
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)
        np.testing.assert_array_equal(got, want, err_msg=name)
        ops_of = [[e.op.name for e in h.eqns] for h in (g, o)]
        assert (ops_of[0] != ops_of[1]) == folded, name
    # what the x + 0.0 rewrite did end to end (arctan2 tells the zeros apart)
    f = lambda x: ft.numpy.arctan2(x + 0.0, -1.0)  # noqa: E731
    np.testing.assert_array_equal(ft.jit(f, backend="numpy")(np.array([-0.0])), [np.pi])


def _imports(path):
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            names.append((node.level, node.module or ""))
    return names


# layer rank of each package part (imports may only point to lower-or-equal ranks,
# DESIGN.md: core <- tracing <- ops <- autodiff/passes <- backends <- api <- numpy <- autograd)
RANK = {"errors": 0, "caches": 0, "core": 0, "printing": 0, "tree_util": 0, "tracing": 1, "ops": 2,
        "autodiff": 3, "batching": 3, "passes": 3, "backends": 4, "symbol": 5, "api": 5,
        "forward": 5, "jit": 5, "device": 5, "numpy": 6, "nn": 7, "test_util": 7,
        "autograd": 8, "scipy": 7}


def _rank_of(rel):
    return RANK.get(rel.parts[0].removesuffix(".py"))


@pytest.mark.parametrize("path", sorted(p for p in PKG.rglob("*.py")), ids=str)
def test_imports_point_down(path):
    rel = path.relative_to(PKG)
    if rel.name == "__init__.py" and len(rel.parts) == 1:
        return   # the package root re-exports everything
    mine = _rank_of(rel)
    if mine is None:
        return
    for level, module in _imports(path):
        base = rel.parts[: len(rel.parts) - level]
        target = (list(base) + module.split(".")) if module else list(base)
        if not target:
            continue
        other = RANK.get(target[0].removesuffix(".py"))
        if other is None:
            continue
        # numpy/ may be imported lazily by nothing below it; lower layers must not import up
        assert other <= mine, f"{rel} imports {'.'.join(target)} (layer {other} > {mine})"
