"""Fused ``pad``: a pad with no interior padding and a constant fill is a *guarded shifted read*
inside a generated elementwise kernel (``x = a[i - lo] if lo <= i < n - hi else fill``), not a
numpy ``np.full`` + slice assignment followed by separate kernels.

Every case runs ``ft.jit(f, eager=True)`` (numba CPU) against the reference interpreter
(``backend="numpy"``) and checks from the lowered ``Program`` that the pad really is in a
kernel. Tolerances: float64 rtol 1e-14 (elementwise; 1e-12 with a reduction), float32 2e-6
(2e-5), plus atol 1e-15 (float32: 1e-6) for kernels' fused multiply-adds near cancellation
(data are O(1)); NaN positions and signed zeros exactly; integers and booleans exactly. The CUDA
target's code generation is checked as text here and run under numba's CUDA simulator in a
subprocess (``NUMBA_ENABLE_CUDASIM=1`` must be set before numba is imported).
"""

from __future__ import annotations

import os
import sys
import textwrap
import warnings

import numpy as np
import pytest
from backend_checks import assert_same, kernel_cache_dir, run_under_cuda_simulator

import functrace as ft
import functrace.numpy as fnp
from functrace import ops
from functrace.backends.cpu import executor as numba_cpu
from functrace.backends.cpu import target as cpu_target
from functrace.backends.cuda import codegen as cuda_codegen
from functrace.backends.cuda import executor as numba_cuda
from functrace.backends.lowering import spec as codegen
from functrace.core import AVal
from functrace.passes.fusion import Group
from functrace.tracing import trace_to_graph

pytest.importorskip("numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-pad-kernels") as d:
        yield d


def program(fn, *args, threads=False):
    """The lowered CPU Program of ``ft.jit(fn)`` at ``args`` (nothing compiled)."""
    return numba_cpu.lower(ft.jit(fn).lower(*args).graph, parallel=threads)


def fused_pads(prog) -> int:
    """How many pad equations are inside a kernel."""
    return sum(prog.graph.eqns[i].op.name == "pad"
               for ks in prog.kernels.values() for i in ks.group.eqns)


def check(fn, *args, rtol=None, threads=False, pads=1):
    """jit (CPU, eager) == reference interpreter, with ``pads`` pads inside kernels."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        graph = ft.jit(fn).lower(*args).graph
        ex = numba_cpu.Executable(graph, parallel=threads, eager=True)
        got = ft.jit(fn, eager=True, threads=threads)(*args)
        want = ft.jit(fn, backend="numpy")(*args)
        # the same graph run directly: every kernel compiled (no silent numpy fallback)
        direct = ex(*args)
    assert not ex.compile_failures, ex.compile_failures
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        f32 = w.dtype == np.float32
        tol = rtol if rtol is not None else (2e-6 if f32 else 1e-14)
        assert_same(np.asarray(g), w, tol, name=f"output {k}", atol=1e-6 if f32 else 1e-15)
        assert_same(np.asarray(direct[k]), w, tol, name=f"output {k}",
                    atol=1e-6 if f32 else 1e-15)
    prog = ex.lower()
    groups = [s for s in prog.plan.steps if isinstance(s, Group)]
    assert len(groups) == len(prog.kernels) and not prog.no_fuse, prog.unsupported
    assert fused_pads(prog) == pads, str(prog.plan)
    return prog


def pad(x, cfg, fill=0):
    """ops.pad with (lo, hi) per axis and a fill of x's dtype."""
    return ops.pad(x, np.asarray(fill, x.dtype), tuple((lo, hi, 0) for lo, hi in cfg))


RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws the same inputs whichever tests its xdist worker ran before it (one
    module-wide generator made ``sin(exp(a * a))`` below land on an ill-conditioned input
    in one CI run and not in others)."""
    global RNG
    RNG = np.random.default_rng(0)


def rand(*shape, dtype="float64"):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return RNG.normal(size=shape).astype(dt)
    if dt.kind == "b":
        return RNG.random(shape) < 0.5
    return RNG.integers(-50, 50, size=shape).astype(dt)


# --------------------------------------------------------------------------------------------
# every axis, lo/hi combinations including 0, ranks 1-3
# --------------------------------------------------------------------------------------------

LOHI = [(0, 2), (3, 0), (1, 1), (2, 5)]


@pytest.mark.parametrize("lohi", LOHI)
def test_pad_1d_plus_array(lohi):
    a = rand(7)
    c = rand(7 + sum(lohi))
    prog = check(lambda c, a: ops.add(c, pad(a, [lohi])), c, a)
    assert len(prog.kernels) == 1
    assert "if (i0" in prog.source and "else np.float64(0.0)" in prog.source


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("lohi", LOHI)
def test_pad_2d_each_axis(axis, lohi):
    a = rand(5, 6)
    cfg = [(0, 0), (0, 0)]
    cfg[axis] = lohi
    shape = [5, 6]
    shape[axis] += sum(lohi)
    c = rand(*shape)
    check(lambda c, a: ops.mul(ops.add(c, pad(a, cfg)), c), c, a)


def test_pad_2d_both_axes_and_two_pads_of_one_root():
    a = rand(5, 6)
    c = rand(8, 8)
    # the Hessian's shape: two differently shifted reads of one root, plus an array
    prog = check(lambda c, a: ops.add(ops.add(c, pad(a, [(1, 2), (0, 2)])),
                                      pad(a, [(3, 0), (2, 0)])), c, a, pads=2)
    (ks,) = prog.kernels.values()
    assert sum(o.shifted for o in ks.spec.operands) == 2
    assert ks.binding.extents == (8, 8)        # guarded axes are never merged


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_pad_3d(axis):
    a = rand(3, 4, 5)
    cfg = [(0, 0)] * 3
    cfg[axis] = (1, 2)
    shape = [3, 4, 5]
    shape[axis] += 3
    c = rand(*shape)
    prog = check(lambda c, a: ops.sub(pad(a, cfg), c), c, a)
    (ks,) = prog.kernels.values()
    # the unguarded axes around the guarded one still merge where they can
    assert len(ks.binding.extents) == (2 if axis in (0, 2) else 3)


def test_pad_3d_every_axis():
    a = rand(3, 4, 5)
    c = rand(4, 7, 6)
    check(lambda c, a: ops.mul(c, pad(a, [(1, 0), (2, 1), (0, 1)], 2.5)), c, a)


# --------------------------------------------------------------------------------------------
# views in front of the pad, values of earlier groups, reductions
# --------------------------------------------------------------------------------------------

def test_pad_of_broadcast_view():
    a = rand(6)
    c = rand(6, 8)
    # a broadcast along axis 0 (row vector), padded on both axes
    fn = lambda c, a: ops.add(c, pad(ops.broadcast_in_dim(a, (4, 6), (1,)),  # noqa: E731
                                     [(1, 1), (0, 2)]))
    prog = check(fn, c, a)
    (ks,) = prog.kernels.values()
    (op,) = [o for o in ks.spec.operands if o.shifted]
    assert len(op.axes) == 1 and op.offsets == () and len(op.guards) == 2
    b = rand(5)
    c = rand(7, 8)
    # a column broadcast, shifted along the axis it is read on
    check(lambda c, b: ops.add(c, pad(ops.broadcast_in_dim(b, (5, 6), (0,)),
                                      [(2, 0), (1, 1)], -1.0)), c, b)


def test_pad_of_transposed_view():
    a = rand(6, 4)
    c = rand(7, 9)
    prog = check(lambda c, a: ops.add(c, pad(ops.transpose(a, (1, 0)), [(2, 1), (0, 3)])),
                 c, a)
    (ks,) = prog.kernels.values()
    (op,) = [o for o in ks.spec.operands if o.shifted]
    assert op.axes == (1, 0) and op.offsets == (0, 2)
    # the runtime shape of a padded operand is its root's own (6, 4), not the loop's
    assert ks.binding.operands[ks.spec.operands.index(op)][1] == (6, 4)


def test_pad_of_unit_axis_reshape_and_scalar_broadcast():
    a = rand(5)
    s = np.asarray(1.5)
    c = rand(3, 7)
    check(lambda c, a: ops.add(c, pad(ops.reshape(a, (1, 5)), [(1, 1), (1, 1)])), c, a)
    # a pad of a broadcast 0-d value: a guarded scalar read
    check(lambda c, s: ops.mul(c, pad(ops.broadcast_in_dim(s, (2, 5), ()), [(0, 1), (2, 0)])),
          c, s)


def test_pad_of_a_value_computed_by_an_earlier_group():
    a = rand(4, 5)
    c = rand(6, 5)

    def fn(c, a):
        t = ops.exp(ops.mul(a, a))              # its own kernel over (4, 5)
        return [ops.add(c, pad(t, [(1, 1), (0, 0)])), ops.sin(t)]
    prog = check(fn, c, a)
    pad_group = next(ks for ks in prog.kernels.values()
                     if any(prog.graph.eqns[i].op.name == "pad" for i in ks.group.eqns))
    assert pad_group.binding.extents == (6, 5)
    # the pad's input is read, never recomputed into the pad's group
    assert not pad_group.group.recomputed


def test_pad_input_of_the_same_loop_shape_is_never_read_from_its_own_group():
    # pad(u)[1:] has u's shape: a later equation over that shape must not pull the pad into
    # the group that computes u (a shifted read of a member value)
    a = rand(8)

    def fn(a):
        u = ops.mul(ops.exp(a), 2.0)
        p = pad(ops.slice_op(u, (0,), (6,)), [(2, 0)])
        return ops.add(ops.mul(p, u), ops.neg(p))
    check(fn, a)


def test_pad_of_a_cheap_value_is_not_recomputed():
    a = rand(6)

    def fn(a):
        u = ops.add(ops.mul(a, 3.0), 1.0)        # cheap: recomputed where read elementwise
        w = ops.slice_op(u, (1,), (6,))
        return [ops.add(pad(w, [(0, 1)]), u), ops.exp(u)]
    prog = check(fn, a)
    for ks in prog.kernels.values():
        for i in ks.group.eqns:
            e = prog.graph.eqns[i]
            if e.op.name == "pad":     # its input is read by the kernel, never computed in it
                root = prog.plan.resolve(e.inputs[0], ks.group.shape)[0]
                assert root in ks.group.roots
                assert all(root not in prog.graph.eqns[j].outputs for j in ks.group.eqns)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_pad_followed_by_a_reduction(axes):
    a = rand(5, 3000)          # inner axis > CHUNK: the chunked path with a guarded inner axis
    c = rand(7, 3004)
    prog = check(lambda c, a: ops.reduce_sum(ops.mul(c, pad(a, [(2, 0), (1, 3)])), axes),
                 c, a, rtol=1e-12)
    src = prog.source
    if 1 in axes:   # the chunked inner index is unsigned: so are its guard constants
        assert "np.uint64(1)" in src
    a = rand(5, 6)
    check(lambda a: ops.reduce_max(pad(a, [(1, 1), (0, 2)], -np.inf), axes), a)


def test_pad_then_reduction_of_every_element():
    a = rand(40)
    check(lambda a: ops.reduce_sum(ops.integer_pow(pad(a, [(3, 2)], 1.0), 2), (0,)), a,
          rtol=1e-12)


# --------------------------------------------------------------------------------------------
# dtypes and fill values
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool"])
def test_pad_dtypes(dtype):
    a = rand(4, 5, dtype=dtype)
    c = rand(6, 8, dtype=dtype)
    fill = {"b": True, "u": 7, "i": -3}.get(np.dtype(dtype).kind, 0.5)
    if np.dtype(dtype).kind == "b":
        fn = lambda c, a: ops.logical_xor(c, pad(a, [(1, 1), (2, 1)], fill))  # noqa: E731
    else:
        fn = lambda c, a: ops.sub(ops.add(c, pad(a, [(1, 1), (2, 1)], fill)), c)  # noqa: E731
    check(fn, c, a)


def test_nan_and_inf_fill():
    a = rand(4, 5)
    c = rand(5, 9)
    prog = check(lambda c, a: ops.mul(c, pad(a, [(0, 1), (2, 2)], np.nan)), c, a)
    assert "np.nan" in prog.source
    check(lambda c, a: ops.add(c, pad(a, [(1, 0), (1, 3)], -np.inf)), c, a)
    a32 = rand(4, 5, dtype="float32")
    c32 = rand(5, 9, dtype="float32")
    check(lambda c, a: ops.mul(c, pad(a, [(0, 1), (2, 2)], np.nan)), c32, a32)


def test_pad_output_is_also_a_kernel_output():
    a = rand(3, 4)
    c = rand(5, 4)

    def fn(c, a):
        p = pad(a, [(1, 1), (0, 0)], 9.0)
        return [p, ops.add(c, p)]
    check(fn, c, a)


def test_fnp_pad_and_threads():
    a = rand(30, 40)
    c = rand(34, 41)
    check(lambda c, a: c * fnp.pad(a, ((2, 2), (0, 1))) + 1.0, c, a, threads=True)


# --------------------------------------------------------------------------------------------
# interior padding: a strided read (the transpose of a strided slice, x[0::2])
# --------------------------------------------------------------------------------------------

def ipad(x, cfg, fill=0):
    """ops.pad with (lo, hi, interior) per axis and a fill of x's dtype."""
    return ops.pad(x, np.asarray(fill, x.dtype), tuple(cfg))


@pytest.mark.parametrize("cfg", [(0, 0, 1), (0, 1, 1), (1, 0, 1), (2, 3, 2), (0, 0, 3),
                                 (1, 1, 4)])
def test_interior_pad_1d(cfg):
    a = rand(7)
    lo, hi, it = cfg
    c = rand(lo + 7 + 6 * it + hi)
    prog = check(lambda c, a: ops.add(c, ipad(a, [cfg], 1.5)), c, a)
    assert f"% {it + 1} == 0)" in prog.source and f"// {it + 1}" in prog.source


@pytest.mark.parametrize("axis", [0, 1])
def test_interior_pad_2d_each_axis_and_both(axis):
    a = rand(4, 5)
    cfg = [(0, 0, 0), (0, 0, 0)]
    cfg[axis] = (1, 2, 1)
    shape = [4, 5]
    shape[axis] = 1 + 4 + 3 * (axis == 0) + 2 if axis == 0 else 1 + 5 + 4 + 2
    c = rand(*shape)
    check(lambda c, a: ops.mul(ops.add(c, ipad(a, cfg)), c), c, a)
    c2 = rand(1 + 7 + 0, 2 + 9 + 1)
    prog = check(lambda c, a: ops.sub(ipad(a, [(1, 0, 1), (2, 1, 1)], -2.0), c), c2, a)
    (ks,) = prog.kernels.values()
    (op,) = [o for o in ks.spec.operands if o.shifted]
    assert op.steps == (2, 2) and ks.binding.extents == (8, 12)


def test_interior_pads_of_one_root_views_and_reductions():
    a = rand(6, 4)
    c = rand(9, 11)
    # the strided Hessian's shape: two interleaved strided reads of one root
    check(lambda c, a: ops.add(ops.add(c, ipad(ops.transpose(a, (1, 0)),
                                               [(0, 1, 1), (0, 0, 1)])),
                               ipad(ops.transpose(a, (1, 0)), [(1, 0, 1), (0, 0, 1)])),
          rand(8, 11), a, pads=2)
    b = rand(5)
    check(lambda c, b: ops.mul(c, ipad(ops.broadcast_in_dim(b, (4, 5), (1,)),
                                       [(1, 1, 1), (0, 2, 1)], 0.5)), c, b)
    for axes in [(0,), (1,), (0, 1)]:
        check(lambda c, a, axes=axes: ops.reduce_sum(
            ops.mul(c, ipad(a, [(0, 3, 0), (1, 0, 2)])), axes), c, a, rtol=1e-12)
        check(lambda c, a, axes=axes: ops.reduce_max(
            ipad(a, [(1, 2, 0), (0, 1, 2)], -np.inf), axes), c, a, pads=1)


def test_interior_pad_chunked_inner_axis():
    a = rand(3, 1600)          # padded inner axis 1 + 1600 + 1599 + 2 > CHUNK: unsigned index
    c = rand(3, 3202)
    prog = check(lambda c, a: ops.reduce_sum(ops.mul(c, ipad(a, [(0, 0, 0), (1, 2, 1)])),
                                             (1,)), c, a, rtol=1e-12)
    assert "% np.uint64(2) == 0)" in prog.source


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "bool"])
def test_interior_pad_dtypes(dtype):
    a = rand(4, 5, dtype=dtype)
    c = rand(7, 11, dtype=dtype)
    fill = {"b": True, "u": 7, "i": -3}.get(np.dtype(dtype).kind, 0.5)
    cfg = [(0, 0, 1), (1, 1, 1)]
    if np.dtype(dtype).kind == "b":
        fn = lambda c, a: ops.logical_xor(c, ipad(a, cfg, fill))  # noqa: E731
    else:
        fn = lambda c, a: ops.sub(ops.add(c, ipad(a, cfg, fill)), c)  # noqa: E731
    check(fn, c, a)


def rosen_strided(x):
    a, b = x[0::2], x[1::2]
    return fnp.sum(100.0 * (b - a ** 2) ** 2 + (1.0 - a) ** 2)


@pytest.mark.parametrize("n", [6, 200, 201])
def test_strided_rosenbrock_hessian(n):
    x = np.random.default_rng(2).uniform(-1, 1, n)
    if n % 2:
        fn = lambda x: rosen_strided(x[:-1]) + fnp.sum(x ** 3)  # noqa: E731
    else:
        fn = rosen_strided
    want = ft.jit(ft.hessian(fn), backend="numpy")(x)
    ex = numba_cpu.Executable(ft.jit(ft.hessian(fn)).lower(x).graph, eager=True)
    assert_same(ex(x)[0], want, 1e-14, name="hessian", atol=1e-12)
    assert_same(ft.jit(ft.hessian(fn), eager=True)(x), want, 1e-14, name="hessian",
                atol=1e-12)
    assert not ex.compile_failures, ex.compile_failures
    prog = ex.lower()
    assert fused_pads(prog) >= 2, str(prog.plan)
    assert "# pad" not in prog.driver_source
    # the strided slices of jacfwd's eye basis are computed from the indices, never read
    assert not [a for ks in prog.kernels.values() for a, _ in ks.binding.operands
                if getattr(a, "val", np.zeros(())).ndim >= 2]


# --------------------------------------------------------------------------------------------
# what is not fused
# --------------------------------------------------------------------------------------------

def graph_of(fn, *avals):
    return trace_to_graph(lambda *xs: list(fn(*xs)), list(avals)).graph


def test_what_fusible_pad_accepts():
    f64 = AVal((4, 5), "float64")

    def pad_eqn(fn, *avals):
        g = graph_of(fn, *avals)
        return next(e for e in g.eqns if e.op.name == "pad")

    ok = pad_eqn(lambda a: [pad(a, [(1, 0), (0, 2)])], f64)
    assert codegen.fusible_pad(ok) and cpu_target.fusible(ok) and cuda_codegen.fusible(ok)
    assert not cpu_target.prefer_kernel(ok) and not cuda_codegen.prefer_kernel(ok)
    interior = pad_eqn(lambda a: [ops.pad(a, np.float64(0), ((1, 0, 1), (0, 0, 0)))], f64)
    assert codegen.fusible_pad(interior) and cpu_target.fusible(interior)
    computed = pad_eqn(lambda a, v: [ops.pad(a, v, ((1, 0, 0), (0, 0, 0)))], f64,
                       AVal((), "float64"))
    assert not cpu_target.fusible(computed) and not cuda_codegen.fusible(computed)
    cplx = pad_eqn(lambda a: [pad(a, [(1, 0), (0, 0)])], AVal((4, 5), "complex128"))
    assert not cpu_target.fusible(cplx) and not cuda_codegen.fusible(cplx)
    empty = pad_eqn(lambda a: [pad(a, [(1, 0), (0, 0)])], AVal((0, 5), "float64"))
    assert not codegen.fusible_pad(empty)


def test_a_lone_pad_stays_a_numpy_step():
    a = rand(4, 5)
    prog = check(lambda a: pad(a, [(1, 1), (2, 0)]), a, pads=0)
    assert not prog.kernels
    prog = check(lambda a: ops.pad(a, np.float64(0), ((0, 0, 1), (0, 0, 0))), a, pads=0)
    assert not prog.kernels


def test_donated_input_is_never_overwritten_through_a_shifted_read():
    # x (f64, 4x5: 160 bytes) padded to 8x5 and cast to int32 (160 bytes): the output could
    # take the donated input's buffer if the shifted read were treated as elementwise
    x = rand(4, 5)
    fn = lambda x: ops.convert_element_type(ops.mul(pad(x, [(2, 2), (0, 0)], 1.0), 10.0),  # noqa: E731
                                            np.int32)
    want = ft.jit(fn, backend="numpy")(x.copy())
    prog = numba_cpu.lower(ft.jit(fn).lower(x).graph, donate=(0,))
    assert fused_pads(prog) == 1 and not prog.buffers.donated_slot
    got = ft.jit(fn, eager=True, donate_argnums=0)(x.copy())
    assert_same(got, want, 0)


# --------------------------------------------------------------------------------------------
# the motivating case: jit(hessian(rosenbrock))
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [5, 200])
def test_rosenbrock_hessian(n):
    from bench_cpu import rosen, rosen_hess
    x = np.random.default_rng(2).uniform(-1, 1, n)
    got = ft.jit(ft.hessian(rosen), eager=True)(x)
    np.testing.assert_allclose(got, rosen_hess(x), rtol=1e-12, atol=1e-12)
    ex = numba_cpu.Executable(ft.jit(ft.hessian(rosen)).lower(x).graph, eager=True)
    np.testing.assert_allclose(ex(x)[0], rosen_hess(x), rtol=1e-12, atol=1e-12)
    assert not ex.compile_failures, ex.compile_failures
    prog = ex.lower()
    assert fused_pads(prog) == 2, str(prog.plan)
    # no pad runs as a numpy step
    assert all(prog.graph.eqns[s.eqn].op.name != "pad" for s in prog.plan.steps
               if not isinstance(s, Group)), str(prog.plan)
    assert "# pad" not in prog.driver_source


# --------------------------------------------------------------------------------------------
# the CUDA target: same specs, shared read renderer
# --------------------------------------------------------------------------------------------

def test_cuda_source_has_guarded_reads():
    g = graph_of(lambda c, a: [ops.add(c, pad(a, [(1, 2), (0, 3)])),
                               ops.reduce_sum(ops.mul(c, pad(a, [(1, 2), (0, 3)])), (1,))],
                 AVal((7, 9), "float32"), AVal((4, 6), "float32"))
    prog = numba_cuda.lower(g)
    assert sum(g.eqns[i].op.name == "pad" for ks in prog.kernels.values()
               for i in ks.group.eqns) == 2
    src = prog.source
    assert "if (i0 >= 1) and (i0 < n0 - 2) and (i1 < n1 - 3) else np.float32(0.0)" in src
    cpu = numba_cpu.lower(g)
    groups = lambda p: [tuple(s.eqns) for s in p.plan.steps if hasattr(s, "eqns")]  # noqa: E731
    assert groups(cpu) == groups(prog)


SIM_SCRIPT = textwrap.dedent("""
    import os, sys, warnings
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import numpy as np
    from functrace import ops
    from functrace.backends.cuda import executor as numba_cuda
    from functrace.backends import reference as numpy_ref
    from functrace.backends.cuda.executor import Executable, HostArrays
    from functrace.core import AVal
    from functrace.tracing import trace_to_graph
    sys.path.insert(0, "tests/support")
    from backend_checks import assert_same

    def pad(x, cfg, fill=0):
        return ops.pad(x, np.asarray(fill, x.dtype), tuple((lo, hi, 0) for lo, hi in cfg))

    def fn(c, a, b):
        p = pad(a, [(1, 2), (0, 3)], np.nan)
        q = pad(ops.transpose(b, (1, 0)), [(2, 0), (1, 1)], 0.5)
        s = ops.add(ops.mul(c, p), q)
        # interior padding: a strided read
        r = ops.pad(a[:, :5], np.asarray(-1.0, a.dtype), ((1, 2, 0), (0, 0, 1)))
        return [s, ops.reduce_sum(ops.mul(c, q), (1,)), ops.reduce_max(p, (0,)),
                ops.mul(c, r)]

    rng = np.random.default_rng(0)
    for dt in ("float64", "float32"):
        c = rng.normal(size=(7, 9)).astype(dt)
        a = rng.normal(size=(4, 6)).astype(dt)
        b = rng.normal(size=(7, 5)).astype(dt)
        g = trace_to_graph(lambda *xs: list(fn(*xs)),
                           [AVal(v.shape, v.dtype) for v in (c, a, b)]).graph
        ex = Executable(g, eager=True, arrays=HostArrays(), config=numba_cuda.SIM_CONFIG)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = ex(c, a, b)
            want = numpy_ref.run(g, [c, a, b])
        prog = ex.lower()
        fused = [g.eqns[i].op.name for ks in prog.kernels.values() for i in ks.group.eqns]
        assert fused.count("pad") >= 2, fused
        assert not ex.compile_failures, ex.compile_failures
        tol = 2e-5 if dt == "float32" else 1e-12
        for k, (x, y) in enumerate(zip(got, want)):
            assert_same(np.asarray(x), y, tol, name=f"{dt} output {k}")
    print("SIM OK")
""")


@pytest.mark.cuda
def test_cuda_simulator_runs_fused_pads(tmp_path):
    run_under_cuda_simulator(SIM_SCRIPT, tmp_path)
