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
    from functrace.backends import reference as numpy_ref
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
    # only rewrites exact for every input, signed zeros and overflow included
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


def test_simplify_sees_through_a_chain_of_broadcasts_of_a_scalar():
    # a cotangent seed 1.0 broadcast over a row, then over a matrix, times a value: the value
    # itself (grad(sum(logsumexp(X, 1))) is then softmax(X) alone, with no multiply)
    def fn(x):
        one = ops.broadcast_in_dim(ops.broadcast_in_dim(np.asarray(1.0), (3,), ()), (3, 4), (0,))
        two = ops.broadcast_in_dim(ops.broadcast_in_dim(np.asarray(2.0), (3,), ()), (3, 4), (0,))
        return [ops.mul(one, ops.exp(x)), ops.mul(two, x)]
    x = np.array([[-0.0, 1.0, np.nan, -np.inf]] * 3)
    g = trace_to_graph(fn, [x]).graph
    o = optimize(g)
    assert [e.op.name for e in o.eqns] == ["exp", "mul"]
    assert o.outputs[0] is o.eqns[0].outputs[0]
    two, xin = o.eqns[1].inputs
    assert two.aval.shape == () and float(two.val) == 2.0 and xin is o.inputs[0]
    for a, b in zip(_run(o, [x]), _run(g, [x]), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


# --------------------------------------------------------------------------------------------
# Layering: imports point down, and no module imports itself through others
# --------------------------------------------------------------------------------------------

def _module_name(path: pathlib.Path, root: pathlib.Path = PKG) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(path, root=PKG, modules=MODULES):
    """Every functrace module ``path`` imports, with the line: ``from .x import y`` (``y`` when
    it is a module), ``from . import x``, ``from .. import x``, ``import functrace.x``, at the
    top or inside a function (a lazy import is still an import)."""
    me = _module_name(path, root)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "functrace":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in modules else target, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names
                      if a.name.split(".")[0] == "functrace"]
    return found


def _private_imports(path):
    """(line, module, name) of each underscore name ``path`` imports from another module."""
    me = _module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if alias.name.startswith("_") and f"{target}.{alias.name}" not in MODULES:
                    found.append((node.lineno, target, alias.name))
    return found


# layer rank of each package part (imports may only point to lower-or-equal ranks):
# core, printing <- tracing <- ops <- autodiff/batching/passes <- backends <- api <- numpy <-
# autograd; see docs/architecture.md
RANK = {"errors": 0, "caches": 0, "config": 0, "debug_nans": 0, "core": 0, "printing": 0,
        "graph_json": 0, "tree_util": 0,
        "tracing": 1, "ops": 2, "autodiff": 3, "batching": 3, "passes": 3, "control_rules": 3,
        "backends": 4, "control": 5,
        "symbol": 5, "arguments": 5, "tape": 5, "running": 5, "signature": 5, "api": 5,
        "forward": 5, "jit": 5, "device": 5, "custom_rules": 5, "debug": 5, "numpy": 6, "nn": 7,
        "extend": 7, "test_util": 7,
        "autograd": 8, "scipy": 7, "random": 7, "optim": 9, "distributed": 9,
        "flatten_util": 7}


def _rank_of(module: str):
    parts = module.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


def test_every_module_has_a_layer():
    unranked = sorted(m for m in MODULES if m != "functrace" and _rank_of(m) is None)
    assert not unranked, f"add these modules to RANK: {unranked}"


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=str)
def test_imports_point_down(path):
    me = _module_name(path)
    if me == "functrace":
        return   # the package root re-exports everything
    mine = _rank_of(me)
    for target, line in _imports(path):
        other = _rank_of(target)
        # numpy/ may be imported lazily by nothing below it; lower layers must not import up
        assert other is None or other <= mine, (
            f"{me}:{line} imports {target} (layer {other} > {mine})")


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=str)
def test_no_module_imports_another_modules_private_names(path):
    assert not _private_imports(path)


# Import circles known today, each one a single strongly connected group of modules; any other
# circle fails (none is known today).
KNOWN_CIRCLES: list[set] = [
]

# The op families in import order: each imports only families before it, lazily or not. A rule
# that needs a later family's op is attached by that family's module, next to the op it uses
# (reduce.py attaches broadcast_in_dim's and pad's vjp, indexing.py sort's rules), and the
# transforms find family batch rules through ops.batch_rules.rule_for.
OP_FAMILY_ORDER = ["_base", "scalar_code", "scalar_recipe", "control", "elementwise", "shape",
                   "batch_rules", "reduce", "indexing", "dot", "linalg", "decomp", "fft",
                   "matfuncs", "incomplete", "special", "xla_math", "random", "random_rejection"]


def test_op_families_import_in_order():
    ops_modules = {m for m in MODULES if m.startswith("functrace.ops.")}
    assert ops_modules == {f"functrace.ops.{n}" for n in OP_FAMILY_ORDER}, (
        "add the new module to OP_FAMILY_ORDER")
    for i, name in enumerate(OP_FAMILY_ORDER):
        for target, line in _imports(MODULES[f"functrace.ops.{name}"]):
            if target.startswith("functrace.ops."):
                other = target.split(".")[2]
                assert OP_FAMILY_ORDER.index(other) < i, (
                    f"ops/{name}.py:{line} imports ops.{other}, which comes after it")


def test_every_batch_family_gives_a_rule():
    # family rules are built on first use (rule_for), so a misspelt batch_family would
    # surface only under vmap: ask for every declared op's rule here
    from functrace.core import registry
    from functrace.ops.batch_rules import rule_for
    for op in list(registry.values()):
        if op.batch_family is not None:
            assert callable(rule_for(op)), op.name


def _circles(graph: dict) -> list[set]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    groups = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_no_import_circles():
    # the package root is left out: it imports everything, and nothing imports it
    graph = {m: {t for t, _ in _imports(p) if t in MODULES and t != "functrace"}
             for m, p in MODULES.items() if m != "functrace"}
    found = _circles(graph)
    assert sorted(map(sorted, found)) == sorted(map(sorted, KNOWN_CIRCLES)), found


def test_the_import_checks_see_lazy_and_package_imports(tmp_path):
    # the checks above are only as good as _imports and _circles: show them what they must see
    root = tmp_path / "functrace"
    (root / "sub").mkdir(parents=True)
    for name in ("__init__.py", "ops.py", "tracing.py", "jit.py", "sub/__init__.py",
                 "sub/other.py"):
        (root / name).write_text("")
    mod = root / "sub" / "m.py"
    mod.write_text("from .. import ops\nfrom . import other\nfrom .other import thing\n"
                   "def f():\n    from ..tracing import bind\n    import functrace.jit\n")
    modules = {_module_name(p, root) for p in root.rglob("*.py")}
    got = {t for t, _ in _imports(mod, root, modules)}
    assert got == {"functrace.ops", "functrace.sub.other", "functrace.tracing", "functrace.jit"}
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
