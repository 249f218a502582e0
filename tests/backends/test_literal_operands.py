"""Array literals a kernel computes instead of reading (``codegen.literal_kind``).

A *uniform* literal (every element bitwise equal) is a scalar constant in the kernel body; a
*single-diagonal* literal (``eye(n, m, k) * v``, possibly a slice of that diagonal, possibly
broadcast along other axes) is ``(v if i<q> - i<p> == k else 0)`` computed from the loop
indices. Anything else stays an operand read. ``jacfwd``'s identity basis folds into such
literals (``jit(hessian(rosen))`` read four 200x199 float64 matrices before).

Every case runs ``ft.jit(f, eager=True)`` (numba CPU) against the reference interpreter
(``backend="numpy"``) and inspects the lowered ``Program``. Tolerances as
tests/backends/test_pad_fusion.py:
float64 rtol 1e-14 (1e-12 with a reduction), float32 2e-6 (2e-5), NaN positions and signed
zeros exactly, integers and booleans exactly. The CUDA target's code generation is checked as
text and run under numba's CUDA simulator in a subprocess.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
import warnings

import numpy as np
import pytest
from backend_checks import assert_same, kernel_cache_dir, run_under_cuda_simulator

import functrace as ft
from functrace import ops
from functrace.backends import reference as numpy_ref
from functrace.backends.cpu import executor as numba_cpu
from functrace.backends.cuda import executor as numba_cuda
from functrace.backends.lowering import spec as codegen
from functrace.core import AVal, Lit
from functrace.passes.fusion import Group
from functrace.tracing import trace_to_graph

pytest.importorskip("numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-literal-kernels") as d:
        yield d


RNG = np.random.default_rng(0)


def rand(*shape, dtype="float64"):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return RNG.normal(size=shape).astype(dt)
    if dt.kind == "b":
        return RNG.random(shape) < 0.5
    if dt.kind == "u":
        return RNG.integers(0, 10, size=shape).astype(dt)
    return RNG.integers(-50, 50, size=shape).astype(dt)


def literal_reads(prog) -> list[tuple]:
    """Shapes of the array literals the kernels of ``prog`` read."""
    return [atom.val.shape for ks in prog.kernels.values() for atom, _ in ks.binding.operands
            if isinstance(atom, Lit) and atom.val.ndim >= 1]


def check(fn, *args, rtol=None, literals=0):
    """jit (CPU, eager) == reference interpreter (also on the graph run directly, every kernel
    compiled); ``literals`` array literals still read by kernels. Returns the Program."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        graph = ft.jit(fn).lower(*args).graph
        ex = numba_cpu.Executable(graph, eager=True)
        got = ft.jit(fn, eager=True)(*args)
        want = ft.jit(fn, backend="numpy")(*args)
        direct = ex(*args)
        ref = numpy_ref.run(graph, list(args))
    assert not ex.compile_failures, ex.compile_failures
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want) == len(ref)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        f32 = w.dtype == np.float32
        tol = rtol if rtol is not None else (2e-6 if f32 else 1e-14)
        atol = 1e-6 if f32 else 1e-15
        assert_same(np.asarray(g), w, tol, name=f"output {k}", atol=atol)
        assert_same(np.asarray(direct[k]), w, tol, name=f"output {k}", atol=atol)
        assert_same(np.asarray(ref[k]), w, 0, name=f"output {k}")
    prog = ex.lower()
    groups = [s for s in prog.plan.steps if isinstance(s, Group)]
    assert groups and len(groups) == len(prog.kernels) and not prog.no_fuse, prog.unsupported
    assert len(literal_reads(prog)) == literals, (literal_reads(prog), prog.source)
    return prog


def diag(n, m, k, v, dtype="float64"):
    """``eye(n, m, k) * v`` with ``v`` exactly on the diagonal (NaN and -0.0 included) and +0
    elsewhere."""
    return np.where(np.eye(n, m, k, dtype=bool), np.asarray(v, dtype), np.zeros((), dtype))


# --------------------------------------------------------------------------------------------
# the classifier
# --------------------------------------------------------------------------------------------

def test_literal_kind():
    kind = codegen.literal_kind
    assert kind(np.eye(4, 5, 1) * 3) == ("diag", 0, 1, 1, 3.0, 0, 0)
    assert kind(np.eye(4, 5, -2) * 3) == ("diag", 0, 1, -2, 3.0, 0, 0)
    assert kind(np.eye(4, 5, 1).T)[:4] == ("diag", 0, 1, -1)
    assert kind(np.eye(4, 5, 7)) == ("uniform", 0.0)              # |k| >= size: all zero
    assert kind(np.full((3, 2), 2.5)) == ("uniform", 2.5)
    assert kind(np.eye(4, 5, 1)[:, None, :]) == ("diag", 0, 2, 1, 1.0, 0, 0)
    # a folded broadcast along another axis
    assert kind(np.broadcast_to(np.eye(4, 5), (3, 4, 5)).copy()) == ("diag", 1, 2, 0, 1.0, 0, 0)
    # a padded slice of a diagonal: rows 1..3 of the k=1 diagonal of a 6x6
    a = np.zeros((6, 6))
    a[1:4, 2:5] = 2 * np.eye(3)
    assert kind(a) == ("diag", 0, 1, 1, 2.0, 1, 2)
    assert kind(np.eye(3, dtype=bool)) == ("diag", 0, 1, 0, True, 0, 0)
    k = kind(diag(3, 3, 0, -0.0))
    assert k[:4] == ("diag", 0, 1, 0) and np.signbit(k[4])
    assert np.isnan(kind(diag(3, 4, 1, np.nan))[4])
    # bitwise: -0.0 off the diagonal, two values, a hole in the diagonal, a vector, others
    e = np.eye(4)
    e[0, 1] = -0.0
    assert kind(e) is None
    e = np.eye(4)
    e[2, 2] = 2
    assert kind(e) is None
    e = np.eye(4)
    e[1, 1] = 0
    assert kind(e) is None
    assert kind(np.array([[1.0, -0.0], [-0.0, -0.0]])) is None
    assert kind(np.arange(4.0)) is None
    assert kind(rand(3, 4)) is None
    assert kind(np.eye(3, dtype=complex)) is None
    assert kind(np.full(3, -0.0))[0] == "uniform" and kind(np.array([0.0, -0.0])) is None


def test_literal_kind_strided_diagonal():
    kind = codegen.literal_kind
    # eye(6)[:, 0::2]: ones at (2t, t), i.e. 2*i1 - i0 == 0; [:, 1::2]: 2*i1 - i0 == -1
    assert kind(np.eye(6)[:, 0::2] * 3) == ("diag", 0, 1, 0, 3.0, 0, 0, 2, 1)
    assert kind(np.eye(6)[:, 1::2]) == ("diag", 0, 1, -1, 1.0, 0, 0, 2, 1)
    assert kind(np.eye(6)[0::2, :]) == ("diag", 0, 1, 0, 1.0, 0, 0, 1, 2)
    assert kind(np.eye(9)[:, 1::3]) == ("diag", 0, 1, -1, 1.0, 0, 0, 3, 1)
    # a run that stops short of the box's edge: lo/hi bound the row index
    a = np.zeros((9, 4))
    a[2, 1] = a[4, 2] = 5.0                       # (0, 0) and (6, 3) are on the line too
    assert kind(a) == ("diag", 0, 1, -2 * 1 + 2, 5.0, 2, 4, 2, 1)
    # not one strided line of one value: a hole, a second value, uneven steps, steps with a
    # common factor (the lattice points in between would be zero), an anti-diagonal
    a = np.eye(8)[:, 0::2].copy()
    a[4, 2] = 0
    assert kind(a) is None
    a = np.eye(8)[:, 0::2].copy()
    a[4, 2] = 2
    assert kind(a) is None
    a = np.zeros((6, 6))
    a[0, 0] = a[2, 1] = a[3, 2] = 1
    assert kind(a) is None
    a = np.zeros((6, 6))
    a[0, 0] = a[2, 2] = a[4, 4] = 1
    assert kind(a) is None
    assert kind(np.eye(6)[::-1, 0::2].copy()) is None


@pytest.mark.parametrize("rows, step, start", [(8, 2, 0), (8, 2, 1), (9, 3, 2), (7, 2, 1)])
def test_strided_diagonal_in_a_kernel(rows, step, start):
    # a strided slice of eye (jacfwd's basis after x[start::step]) computed from the indices,
    # on its own axes and transposed, with and without a reduction over each axis
    lit = np.eye(rows)[:, start::step] * 1.5
    cols = lit.shape[1]
    x = rand(rows, cols)
    prog = check(lambda x: ops.add(ops.mul(ops.sin(x), lit), x), x)
    assert f"{step} * i1 - i0 == {-start}" in prog.source
    xt = rand(cols, rows)
    prog = check(lambda x: ops.mul(ops.transpose(lit, (1, 0)), ops.exp(x)), xt)
    assert f"{step} * i0 == {start}" in prog.source
    for axes in [(0,), (1,), (0, 1)]:
        check(lambda x, axes=axes: ops.reduce_sum(ops.mul(ops.sin(x), lit), axes), x,
              rtol=1e-12)


def test_strided_diagonal_run_and_chunked_inner_axis():
    # a partial run (lo/hi guards), and a long inner reduced axis (unsigned chunk index)
    a = np.zeros((9, 4))
    a[2, 1] = a[4, 2] = 5.0
    x = rand(9, 4)
    check(lambda x: ops.add(ops.mul(x, a), ops.mul(x, x)), x)
    lit = np.eye(2 * 2500)[:, 1::2][:3000].T.copy()         # (2500, 3000): 2*i0 - i1 == -1
    y = rand(2500, 3000)
    prog = check(lambda y: ops.reduce_sum(ops.mul(ops.cos(y), lit), (1,)), y, rtol=1e-12)
    assert "np.int64(i1)" in prog.source


# --------------------------------------------------------------------------------------------
# diagonal literals: every k, dtypes, views
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [-4, -3, -1, 0, 2, 4, 5])
def test_diagonal_each_k(k):
    x = rand(4, 5)
    lit = np.eye(4, 5, k) * 2.5
    prog = check(lambda x: ops.add(ops.mul(ops.sin(x), lit), x), x)
    src = prog.source
    if -4 < k < 5:
        assert f"(i1 - i0 == {k})" in src and "np.float64(2.5) if" in src
    else:                # all zero: a uniform literal, a constant 0
        assert "i1 - i0" not in src and "np.float64(0.0))" in src


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "uint8", "int16"])
@pytest.mark.parametrize("k", [-1, 1])
def test_diagonal_dtypes(dtype, k):
    x = rand(5, 4, dtype=dtype)
    lit = (np.eye(5, 4, k) * 3).astype(dtype)
    prog = check(lambda x: ops.add(ops.mul(ops.mul(x, lit), x), x), x)
    assert f"(i1 - i0 == {k})" in prog.source
    assert f"np.{dtype}(3) if" in prog.source or f"np.{dtype}(3.0) if" in prog.source


def test_diagonal_nan_and_negative_zero():
    x = rand(4, 6)
    x[0, 0] = 0.0
    for v in (np.nan, -0.0, np.inf):
        lit = diag(4, 6, 1, v)
        check(lambda x, lit=lit: ops.add(ops.mul(x, lit), ops.mul(x, x)), x)
    x32 = x.astype(np.float32)
    check(lambda x: ops.sub(ops.mul(x, diag(4, 6, -2, -0.0, "float32")), x), x32)


def test_bool_diagonal_select():
    x, y = rand(5, 5), rand(5, 5)
    mask = np.eye(5, 5, 1, dtype=bool)
    prog = check(lambda x, y: ops.select(mask, ops.exp(x), y), x, y)
    assert "(i1 - i0 == 1)" in prog.source


def test_transposed_and_broadcast_literal():
    # a transpose of a literal folds into a new (transposed) literal: k negates
    x = rand(5, 4)
    lit = np.eye(4, 5, 1) * 2.0
    prog = check(lambda x: ops.add(ops.mul(ops.sin(x), ops.transpose(lit, (1, 0))), x), x)
    assert "(i1 - i0 == -1)" in prog.source
    # broadcast along a third loop axis, at each position; the literal's axes are never
    # merged with their neighbours, the broadcast axis is read from no literal
    for shape, dims in [((3, 4, 5), (1, 2)), ((4, 3, 5), (0, 2)), ((4, 5, 3), (0, 1))]:
        x3 = rand(*shape)
        fn = lambda x, shape=shape, dims=dims: ops.add(  # noqa: E731
            ops.mul(ops.sin(x), ops.broadcast_in_dim(lit, shape, dims)), x)
        prog = check(fn, x3)
        (ks,) = prog.kernels.values()
        assert ks.binding.extents == shape
        p, q = dims
        assert f"(i{q} - i{p} == 1)" in prog.source
        # the value is computed at the depth of its deeper axis
        (line,) = [b for b in ks.spec.body if "==" in b[1]]
        assert line[3] == q + 1
    # a literal with a unit axis, broadcast (the unit axis is read at 0)
    lu = np.eye(4, 5, -1)[:, None, :] * 4.0
    x3 = rand(4, 3, 5)
    check(lambda x: ops.mul(ops.cos(x), ops.broadcast_in_dim(lu, (4, 3, 5), (0, 1, 2))), x3)


def test_truncated_diagonal():
    # a padded slice of eye: the non-zero run covers rows 1..3 of the k=1 diagonal
    lit = np.zeros((6, 6))
    lit[1:4, 2:5] = 2 * np.eye(3)
    x = rand(6, 6)
    prog = check(lambda x: ops.add(ops.mul(ops.sin(x), lit), x), x)
    assert "((i1 - i0 == 1) and (i0 >= 1) and (i0 < n0 - 2))" in prog.source
    # starting at the diagonal's first row, stopping before its last
    lit = np.zeros((5, 4))
    lit[2:4, 0:2] = diag(2, 2, 0, -1.0)          # (-np.eye(2) has -0.0 off the diagonal)
    prog = check(lambda x: ops.add(ops.mul(ops.sin(x), lit), x), rand(5, 4))
    assert "((i1 - i0 == -2) and (i0 < n0 - 1))" in prog.source


def test_diagonal_in_reductions():
    x = rand(6, 300)
    lit = np.eye(6, 300, 2) * 1.5
    # the inner axis reduced: chunked, its index unsigned and cast back for the comparison
    prog = check(lambda x: ops.reduce_sum(ops.mul(ops.exp(x), lit), (1,)), x, rtol=1e-12)
    assert "np.int64(i1) - i0 == 2" in prog.source
    prog = check(lambda x: ops.reduce_max(ops.mul(ops.exp(x), lit), (0,)), x, rtol=1e-12)
    assert "(i1 - i0 == 2)" in prog.source
    check(lambda x: ops.reduce_sum(ops.mul(ops.exp(x), lit), (0, 1)), x, rtol=1e-12)
    # the reduced value is the literal itself (a diagonal's sum)
    y = rand(6, 300)
    check(lambda y: [ops.reduce_sum(ops.add(y, lit), (1,)), ops.reduce_sum(
        ops.convert_element_type(lit, np.float32), (1,))], y, rtol=1e-12)
    # a truncated diagonal on the reduced inner axis
    t = np.zeros((4, 70))
    t[1:3, 3:5] = 2 * np.eye(2)
    prog = check(lambda x: ops.reduce_sum(ops.mul(ops.exp(x), t), (1,)), rand(4, 70),
                 rtol=1e-12)
    assert "(np.int64(i1) - i0 == 2) and (i0 >= 1) and (i0 < n0 - 1)" in prog.source


# --------------------------------------------------------------------------------------------
# uniform literals and literals that stay operands
# --------------------------------------------------------------------------------------------

def test_uniform_literals_are_constants():
    x = rand(4, 5)
    prog = check(lambda x: ops.add(ops.mul(ops.sin(x), np.full((4, 5), 2.5)), x), x)
    assert "np.float64(2.5)" in prog.source
    # a uniform row vector broadcast over the rows, -0.0 kept
    prog = check(lambda x: ops.mul(ops.exp(x), ops.broadcast_in_dim(np.full(5, -0.0), (4, 5),
                                                                    (1,))), x)
    assert "np.float64(-0.0)" in prog.source
    xi = rand(4, 5, dtype="int32")
    prog = check(lambda x: ops.mul(ops.add(x, np.full((4, 5), 7, np.int32)), x), xi)
    assert "np.int32(7)" in prog.source
    prog = check(lambda x: ops.add(ops.mul(x, np.full((4, 5), np.nan)), ops.sin(x)), x)
    assert "np.float64(np.nan)" in prog.source


def test_scalar_broadcasts_folded_to_arrays_are_constants():
    # fold_constants_any_size (keep_scalar_broadcasts=False) folds grad's broadcast(1.0) * 3.0
    # into a full (4, 5) array literal: it is a constant in the kernel, not a (4, 5) read
    x = rand(4, 5)
    fn = ft.grad(lambda x: ops.reduce_sum(ops.mul(ops.sin(x), 3.0), (0, 1)))
    eqns = ft.jit(fn).lower(x).graph.eqns
    assert any(e.op.name == "broadcast_in_dim" and isinstance(e.inputs[0], Lit) for e in eqns)
    prog = check(fn, x)
    assert not any(e.op.name == "broadcast_in_dim" for e in prog.graph.eqns)
    assert "np.float64(3.0)" in prog.source


def test_other_literals_stay_operands():
    x = rand(4, 5)
    for lit in (rand(4, 5), np.eye(4, 5) + np.eye(4, 5, 1), np.eye(4, 5) * np.arange(5.0),
                np.where(np.eye(4, 5, dtype=bool), 1.0, -0.0)):
        prog = check(lambda x, lit=lit: ops.add(ops.mul(ops.sin(x), lit), x), x, literals=1)
        # no diagonal index test ("(i0 - i1 == 0)") replaced the literal's read
        assert not re.search(r"i\d+ == -?\d+\)", prog.source), prog.source
    # a diagonal literal next to an ordinary one in one kernel
    other = rand(4, 5)
    check(lambda x: ops.add(ops.mul(ops.sin(x), np.eye(4, 5, 2)), ops.mul(x, other)), x,
          literals=1)


def test_other_kernels_keep_their_keys(monkeypatch):
    """With the classifier off every literal is read again; kernels that read no uniform or
    diagonal literal have byte-identical sources (so their keys and disk cache are kept)."""
    from bench_cpu import rosen
    xs = [np.random.default_rng(1).uniform(-1, 1, 30)]
    graphs = [ft.jit(ft.hessian(rosen)).lower(*xs).graph,
              ft.jit(ft.grad(rosen)).lower(*xs).graph,
              ft.jit(lambda x: ops.add(ops.mul(ops.sin(x), rand(4, 5)), x)).lower(
                  rand(4, 5)).graph]

    kind = codegen.literal_kind

    def sources():
        out = []
        for g in graphs:
            prog = numba_cpu.Program(g)        # not numba_cpu.lower: that one is cached
            for ks in prog.kernels.values():
                special = any(isinstance(a, Lit) and a.val.ndim >= 1 and
                              kind(a.val) is not None
                              for a, _ in ks.binding.operands)
                out.append((ks.key, ks.source, special))
        return out
    new = {key: src for key, src, _ in sources()}
    monkeypatch.setattr(codegen, "literal_kind", lambda val: None)
    old = sources()
    assert any(special for *_, special in old)
    for key, src, special in old:
        if not special:
            assert new.get(key) == src


# --------------------------------------------------------------------------------------------
# the motivating case: jit(hessian(rosenbrock)) reads no identity-basis matrix
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [5, 200])
def test_rosenbrock_hessian_reads_no_matrix_literal(n):
    from bench_cpu import rosen, rosen_hess
    x = np.random.default_rng(3).uniform(-1, 1, n)
    graph = ft.jit(ft.hessian(rosen)).lower(x).graph
    prog = numba_cpu.lower(graph)
    assert prog.kernels
    for ks in prog.kernels.values():
        for atom, _ in ks.binding.operands:
            assert not (isinstance(atom, Lit) and atom.val.ndim >= 2), prog.source
            assert not isinstance(atom, Lit), prog.source     # vectors of 100.0 are constants
    assert "== 0)" in prog.source and "== -1)" in prog.source
    ex = numba_cpu.Executable(graph, eager=True)
    np.testing.assert_allclose(ex(x)[0], rosen_hess(x), rtol=1e-12, atol=1e-12)
    assert not ex.compile_failures, ex.compile_failures
    got = ft.jit(ft.hessian(rosen), eager=True)(x)
    np.testing.assert_allclose(got, rosen_hess(x), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------
# the CUDA target: same specs (views of literals are not folded there: the index maps are)
# --------------------------------------------------------------------------------------------

def _cuda_graph():
    lit = np.eye(5, 4, -1) * 2.0

    def fn(x, y):
        lt = ops.transpose(lit, (1, 0))                                    # (4, 5), k = 1
        b = ops.broadcast_in_dim(lt, (3, 4, 5), (1, 2))
        return [ops.add(ops.mul(ops.sin(x), b), x),
                ops.reduce_sum(ops.mul(ops.exp(y), lt), (1,)),
                ops.reduce_max(ops.mul(ops.exp(y), np.full((4, 5), 0.5)), (0,))]
    return trace_to_graph(lambda *xs: list(fn(*xs)),
                          [AVal((3, 4, 5), "float64"), AVal((4, 5), "float64")]).graph


def test_cuda_source_computes_diagonals():
    prog = numba_cuda.lower(_cuda_graph())
    src = prog.source
    assert not any(isinstance(a, Lit) and a.val.ndim >= 1
                   for ks in prog.kernels.values() for a, _ in ks.binding.operands), src
    # the transposed map: literal axis 0 on loop axis 2, axis 1 on loop axis 1
    assert "(np.float64(2.0) if (i1 - i2 == -1) else np.float64(0.0))" in src
    assert "np.float64(0.5)" in src
    # computed inside the loop, after the indices it compares
    for text in src.split("# ---- kernel")[1:]:
        lines = text.splitlines()
        for j, line in enumerate(lines):
            if " == -1)" in line:   # (the unrolled thread loop renames i1 to i1_0, ...)
                prior = "\n".join(lines[:j])
                assert any(re.search(rf"\bi{d}(_\d+)? = ", prior) for d in (1, 2)), text


SIM_SCRIPT = textwrap.dedent("""
    import os, sys, warnings
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import numpy as np
    from functrace import ops
    from functrace.backends.cuda import executor as numba_cuda
    from functrace.backends import reference as numpy_ref
    from functrace.backends.cuda.executor import Executable, HostArrays
    from functrace.core import AVal, Lit
    from functrace.tracing import trace_to_graph
    sys.path.insert(0, "tests/support")
    from backend_checks import assert_same

    rng = np.random.default_rng(0)
    for dt in ("float64", "float32"):
        lit = (np.eye(5, 4, -1) * 2.0).astype(dt)
        band = np.zeros((4, 5), dt)
        band[1:3, 2:4] = np.where(np.eye(2, dtype=bool), np.asarray(-3.0, dt), band[:2, :2])

        def fn(x, y):
            lt = ops.transpose(lit, (1, 0))
            b = ops.broadcast_in_dim(lt, (3, 4, 5), (1, 2))
            return [ops.add(ops.mul(ops.sin(x), b), x),
                    ops.reduce_sum(ops.mul(ops.exp(y), lt), (1,)),
                    ops.reduce_max(ops.add(ops.exp(y), band), (0,)),
                    ops.mul(ops.cos(y), np.full((4, 5), 0.5, dt))]

        x = rng.normal(size=(3, 4, 5)).astype(dt)
        y = rng.normal(size=(4, 5)).astype(dt)
        g = trace_to_graph(lambda *xs: list(fn(*xs)),
                           [AVal(v.shape, v.dtype) for v in (x, y)]).graph
        ex = Executable(g, eager=True, arrays=HostArrays(), config=numba_cuda.SIM_CONFIG)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = ex(x, y)
            want = numpy_ref.run(g, [x, y])
        prog = ex.lower()
        assert not ex.compile_failures, ex.compile_failures
        assert not any(isinstance(a, Lit) and a.val.ndim >= 1 for ks in prog.kernels.values()
                       for a, _ in ks.binding.operands), prog.source
        tol = 2e-5 if dt == "float32" else 1e-12
        for k, (a, b) in enumerate(zip(got, want)):
            assert_same(np.asarray(a), b, tol, name=f"{dt} output {k}")
    print("SIM OK")
""")


@pytest.mark.cuda
def test_cuda_simulator_runs_computed_literals(tmp_path):
    run_under_cuda_simulator(SIM_SCRIPT, tmp_path)
