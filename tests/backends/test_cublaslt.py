"""backends.cublaslt without a GPU: which dot_generals are one matrix product, and the
column-major description cuBLASLt gets for them (executed with numpy, reading the operands'
flat buffers as cuBLASLt would). The library calls themselves need a GPU
(tests/backends/test_gpu.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from functrace import ops
from functrace.backends import reference as numpy_ref
from functrace.backends.cuda.cublaslt import OP_N, OP_T, ColMajorGemm, GemmShape, gemm_shape_of
from functrace.core import AVal
from functrace.tracing import trace_to_graph

MM = (((1,), (0,)), ((), ()))

# (x shape, y shape, dimension numbers, (m, n, k, x_t, y_t) or None)
CASES = [
    ((6, 4), (4, 5), MM, (6, 5, 4, False, False)),
    ((4, 6), (4, 5), (((0,), (0,)), ((), ())), (6, 5, 4, True, False)),       # x.T @ y
    ((6, 4), (5, 4), (((1,), (1,)), ((), ())), (6, 5, 4, False, True)),       # x @ y.T
    ((4, 6), (5, 4), (((0,), (1,)), ((), ())), (6, 5, 4, True, True)),        # x.T @ y.T
    ((2, 3, 4), (4, 5), (((2,), (0,)), ((), ())), (6, 5, 4, False, False)),   # (B, T, D) @ W
    ((2, 3, 4), (3, 4, 5), (((1, 2), (0, 1)), ((), ())), (2, 5, 12, False, False)),
    ((4, 2, 3), (4, 5), (((0,), (0,)), ((), ())), (6, 5, 4, True, False)),
    ((7,), (7, 3), (((0,), (0,)), ((), ())), (1, 3, 7, False, False)),       # vector @ matrix
    ((6, 7), (7,), (((1,), (0,)), ((), ())), (6, 1, 7, False, False)),
    ((3, 5, 4), (3, 4, 2), (((2,), (1,)), ((0,), (0,))), None),               # batched
    ((2, 3, 4), (3, 5), (((1,), (0,)), ((), ())), None),                      # axes interleaved
    ((0, 4), (4, 5), MM, None),                                               # empty
]


def _eqn(xs, ys, dn, dtype="float64"):
    return trace_to_graph(lambda a, b: [ops.dot_general(a, b, dn)],
                          [AVal(xs, dtype), AVal(ys, dtype)]).graph


@pytest.mark.parametrize("xs,ys,dn,want", CASES)
def test_which_contractions_are_one_matrix_product(xs, ys, dn, want):
    shape = gemm_shape_of(_eqn(xs, ys, dn).eqns[0])
    if want is None:
        assert shape is None
    else:
        assert (shape.m, shape.n, shape.k, shape.x_t, shape.y_t) == want
        assert shape.dtype == "float64"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ys,dn,want", [c for c in CASES if c[3] is not None])
def test_the_column_major_description_computes_the_contraction(xs, ys, dn, want, dtype):
    # cuBLASLt reads the operands' flat C-contiguous buffers through the layouts of
    # GemmShape.colmajor(); ColMajorGemm reads them the same way with numpy
    g = _eqn(xs, ys, dn, dtype)
    shape = gemm_shape_of(g.eqns[0])
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ys).astype(dtype)
    out = np.full((shape.m, shape.n), np.nan, dtype)
    ColMajorGemm(shape)(x, y, out)
    want_val = numpy_ref.run(g, [x, y])[0]
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(out.reshape(want_val.shape), want_val, rtol=tol, atol=tol)


def test_colmajor_layouts_name_the_buffers_as_stored():
    # out (M, N) row-major is D (N, M) column-major = op(A) op(B), A the right buffer
    s = GemmShape(m=6, n=5, k=4, x_t=False, y_t=False, dtype="float32")
    assert s.colmajor() == (OP_N, OP_N, (5, 4, 5), (4, 6, 4), (5, 6, 5))
    t = GemmShape(m=6, n=5, k=4, x_t=True, y_t=True, dtype="float32")
    assert t.colmajor() == (OP_T, OP_T, (4, 5, 4), (6, 4, 6), (5, 6, 5))
    assert (t.x_shape, t.y_shape) == ((4, 6), (5, 4))


def test_strided_operands_are_refused():
    s = GemmShape(m=6, n=5, k=4, x_t=False, y_t=False, dtype="float64")
    with pytest.raises(ValueError, match="C-contiguous"):
        ColMajorGemm(s)(np.ones((4, 6)).T, np.ones((4, 5)), np.empty((6, 5)))


def test_only_float32_and_float64():
    for dt in ("float16", "int32", "complex64"):
        assert gemm_shape_of(_eqn((6, 4), (4, 5), MM, dt).eqns[0]) is None


def _real_library():
    """libcublasLt if this machine has one (no GPU needed for descriptors): the path in
    FUNCTRACE_TEST_CUBLASLT, an installed nvidia-cublas wheel, or the loader's search."""
    import ctypes
    import glob
    import os
    import site
    paths = [os.environ.get("FUNCTRACE_TEST_CUBLASLT", "")]
    for sp in site.getsitepackages():
        paths += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib", "libcublasLt.so*")))
    paths += ["libcublasLt.so.13", "libcublasLt.so.12"]
    for p in paths:
        if p:
            try:
                return ctypes.CDLL(p)
            except OSError:
                continue
    return None


def test_descriptors_with_the_real_library():
    # the host-only half of a plan against the real libcublasLt: the matmul descriptor with
    # its transpose attributes (int32), the three layouts, the workspace preference (uint64).
    # The library answers a wrongly sized attribute with CUBLAS_STATUS_INVALID_VALUE, so these
    # calls check the sizes and enum values of cublaslt.py. Skips without the library (CI has
    # none; `pip download nvidia-cublas` has it); heuristics and launches need a GPU.
    from functrace.backends.cuda.cublaslt import DESC_TRANSA, Lt, LtError
    lib = _real_library()
    if lib is None:
        pytest.skip("no libcublasLt on this machine")
    lt = Lt.with_library(lib)
    for dt in ("float32", "float64"):
        for x_t in (False, True):
            for y_t in (False, True):
                p = lt.describe(GemmShape(4096, 2048, 784, x_t, y_t, dt))
                assert p.desc.value and all(h.value for h in p.layouts) and p.pref.value
    import ctypes
    wrong = ctypes.c_int64(1)
    with pytest.raises(LtError, match="status 7"):
        lt._check(lib.cublasLtMatmulDescSetAttribute(p.desc, DESC_TRANSA, ctypes.byref(wrong),
                                                     8), "set")
