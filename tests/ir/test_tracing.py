"""Tracing: graphs, errors with the user's line, concretization, thread safety, constants."""

import threading

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.errors import ConcretizationError, TracerLeakError


def test_user_story_of_issue_2(tmp_path):
    def f(x, w):
        h = fnp.tanh(x @ w + 1.0)
        return fnp.sum(h ** 2) / h.shape[0]
    rng = np.random.default_rng(0)
    x, w = rng.random((8, 3)), rng.random((3, 4))
    sym = ft.trace(f)(x, w)
    text = str(sym)
    assert "def f(a: f64[8,3], b: f64[3,4]):" in text and "tanh" in text
    assert "test_tracing.py" in text          # the user's source line as a comment
    np.testing.assert_allclose(sym(x, w), f(x, w), rtol=1e-14)
    assert isinstance(f(x, w), np.floating)   # eager: plain numpy
    assert ft.Symbol.from_json(sym.to_json()) == sym
    dot = sym.to_dot()
    assert dot.startswith("digraph") and "dot_general" in dot
    (tmp_path / "f.dot").write_text(dot)


def test_equal_graphs_compare_and_hash_equal():
    f = lambda x: fnp.sin(x) * 2.0 + x  # noqa: E731
    a = ft.trace(f)(np.ones(3))
    b = ft.trace(f)(np.zeros(3))
    assert a == b and hash(a) == hash(b)
    assert {a.graph: 1}[b.graph] == 1
    c = ft.trace(lambda x: fnp.sin(x) * 3.0 + x)(np.ones(3))
    assert a != c
    assert str(a) == str(b)


def test_abstract_inputs_and_concretization_error_names_line():
    def f(x):
        if x.sum() > 0:  # the offending line
            return x
        return -x
    with pytest.raises(ConcretizationError, match=r"test_tracing\.py:\d+: if x\.sum\(\) > 0"):
        ft.trace(f)(ft.ShapeDtype((3,), "float32"))
    sym = ft.trace(f)(np.ones(3))   # concrete example: the branch is taken, value on demand
    assert [e.op.name for e in sym.nodes][-1] == "gt"


def test_abstract_inputs_trace_fine_without_values():
    sym = ft.trace(lambda x: fnp.exp(x) + 1)(ft.ShapeDtype((2, 3), "float32"))
    assert sym.out_avals[0] == ft.AVal((2, 3), "float32")
    np.testing.assert_allclose(sym(np.zeros((2, 3), np.float32)), 2.0)


def test_inplace_assignment_points_to_at():
    def f(x):
        x[0] = 1.0
        return x
    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        ft.trace(f)(np.ones(3))


def test_at_updates():
    def f(x):
        y = x.at[0].set(5.0)
        y = y.at[np.array([1, 1])].add(1.0)
        return y.at[2].multiply(3.0)
    np.testing.assert_array_equal(ft.trace(f)(np.ones(3))(np.ones(3)), [5.0, 3.0, 3.0])


def test_shape_error_names_op_shapes_and_line():
    from functrace import ops

    def f(x, y):
        return ops.add(x, y)   # bad shapes reach the op
    with pytest.raises(ValueError, match=r"add: .*\(3,\).*\(4,\).*test_tracing\.py"):
        ft.trace(f)(np.ones(3), np.ones(4))


def test_bad_inputs_are_clear():
    with pytest.raises(TypeError, match="not an array"):
        ft.trace(lambda x: x)("text")
    with pytest.raises(TypeError, match="returned a str"):
        ft.trace(lambda x: "text")(np.ones(2))
    with pytest.raises(TypeError, match="dtype"):
        ft.trace(lambda x: x)(np.array(["a"]))
    with pytest.raises(TypeError, match="object"):
        ft.trace(lambda x: x)(np.array([1, None], dtype=object))
    sym = ft.trace(lambda x: x * 2)(np.ones(3))
    with pytest.raises(ValueError, match="expected shape"):
        sym(np.ones(4))
    with pytest.raises(TypeError, match="takes 1"):
        sym(np.ones(3), np.ones(3))
    with pytest.raises(ValueError):
        ft.Symbol.from_json('{"graph": 1}')


def test_closed_over_arrays_become_literals_not_inputs():
    W = np.arange(6.0).reshape(2, 3)
    sym = ft.trace(lambda x: x @ W)(np.ones(2))
    assert len(sym.inputs) == 1
    W[0, 0] = 100.0   # the graph holds a copy
    np.testing.assert_array_equal(sym(np.ones(2)), [3.0, 5.0, 7.0])


def test_pytree_arguments_and_outputs():
    def f(p, xs):
        return {"y": p["w"] * xs[0], "z": (fnp.sum(xs[1]), None)}
    sym = ft.trace(f)({"w": np.ones(2)}, [np.ones(2), np.ones(3)])
    out = sym({"w": np.full(2, 2.0)}, [np.ones(2), np.ones(3)])
    np.testing.assert_array_equal(out["y"], [2.0, 2.0])
    assert out["z"][0] == 3.0 and out["z"][1] is None


def test_leaked_tracer_is_an_error():
    box = []
    ft.trace(lambda x: box.append(x) or x)(np.ones(2))
    with pytest.raises(TracerLeakError):
        fnp.sin(box[0]) + 1


def test_tracing_is_thread_local():
    errors = []

    def work(i):
        try:
            for _ in range(30):
                sym = ft.trace(lambda x: fnp.sin(x) * i)(np.ones(3))
                assert len(sym.inputs) == 1 and len(sym.nodes) == 2
                np.testing.assert_allclose(sym(np.ones(3)), np.sin(1.0) * i)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_interpreter_frees_values_after_last_use():
    import tracemalloc

    def f(x):
        for _ in range(20):
            x = fnp.sin(x)
        return x
    x = np.random.default_rng(0).random(200_000)
    sym = ft.trace(f)(x[:3])
    sym2 = ft.trace(f)(x)
    sym2(x)
    tracemalloc.start()
    try:
        sym2(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * x.nbytes
    assert len(sym.nodes) == 20


def test_boolean_mask_needs_concrete_values():
    f = lambda x: x[x > 0]  # noqa: E731
    sym = ft.trace(f)(np.array([-1.0, 2.0, 3.0]))
    assert sym.out_avals[0].shape == (2,)
    with pytest.raises(ConcretizationError, match="where"):
        ft.trace(f)(ft.ShapeDtype((3,), "float64"))


def test_symbol_nodes_inputs_outputs():
    sym = ft.trace(lambda x, y: (x + y, x * y))(np.ones(2), np.ones(2))
    assert len(sym.inputs) == 2 and len(sym.outputs) == 2 and len(sym.nodes) == 2
    a, b = sym(np.ones(2), np.full(2, 3.0))
    np.testing.assert_array_equal(a, [4.0, 4.0])
    np.testing.assert_array_equal(b, [3.0, 3.0])
