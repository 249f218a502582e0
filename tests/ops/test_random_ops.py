"""The primitives behind functrace.random: ``fma``, ``erf_inv_xla`` (ops/xla_math.py), the
Threefry hash and the bits-to-float map (ops/random.py), the rejection samplers
(ops/random_rejection.py), and the recipe machinery that gives each recipe op its numpy impl
and its CPU and CUDA helpers (ops/scalar_recipe.py).

Known answers come from outside: Random123's published Threefry-2x32-20 vectors, exact
rational arithmetic for the FMA, jax's erf_inv (digests in support/random_golden.py).
"""

from __future__ import annotations

import hashlib
import re
from fractions import Fraction

import numpy as np
import pytest
from random_golden import DIGESTS

import functrace as ft
from functrace import ops
from functrace.ops import scalar_recipe as sr
from functrace.ops.random import threefry2x32, threefry2x32_words, unit_float
from functrace.ops.random_rejection import random_gamma, random_gamma_grad, random_poisson
from functrace.ops.xla_math import erf_inv_f32, erf_inv_xla, fma

# --------------------------------------------------------------------------------------------
# fma: exactly rounded
# --------------------------------------------------------------------------------------------

def _correctly_rounded(r, exact: Fraction) -> bool:
    """Whether float ``r`` is ``exact`` rounded to nearest, ties to even, in r's dtype."""
    dt = r.dtype.type
    lo, hi = np.nextafter(r, dt(-np.inf)), np.nextafter(r, dt(np.inf))
    fr = Fraction(float(r))
    below, above = (fr + Fraction(float(lo))) / 2, (fr + Fraction(float(hi))) / 2
    if below < exact < above:
        return True
    even = int(r.view(np.dtype(f"uint{r.dtype.itemsize * 8}"))) % 2 == 0
    return exact in (below, above) and even


def _fma_operands(dt, n, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(dt)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(dt)
    # half the c's nearly cancel a*b (the hard cases), half are unrelated
    near = -(a.astype(np.float64) * b) * (1 + rng.standard_normal(n) * 1e-6)
    far = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
    c = np.where(np.arange(n) % 2 == 0, near, far).astype(dt)
    return a, b, c


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_is_correctly_rounded(dt):
    a, b, c = _fma_operands(dt, 3000, 0)
    got = sr.fma(a, b, c)
    assert got.dtype == dt
    for i in range(len(a)):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert _correctly_rounded(got[i], exact), (a[i], b[i], c[i], got[i])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_ties_and_specials(dt):
    one, ulp = dt(1), np.finfo(dt).eps
    # (1 + ulp)(1 - ulp) - 1 = -ulp**2 only without rounding the product; (1 + ulp)**2 - 1 is
    # a tie between two floats, broken to even
    a = np.array([1 + ulp, 1 + ulp, 1.0, np.inf, 1.0, 0.0], dt)
    b = np.array([1 - ulp, 1 + ulp, np.nan, 1.0, 1.0, -1.0], dt)
    c = np.array([-one, -one, 1.0, -np.inf, dt(np.finfo(dt).max), 0.0], dt)
    got = sr.fma(a, b, c)
    assert got[0] == -(ulp * ulp)                   # exact where a*b - 1 would round to 0
    assert got[1] == dt(2 * ulp + ulp * ulp)
    assert np.isnan(got[2]) and np.isnan(got[3])
    assert got[4] == np.finfo(dt).max
    assert got[5] == 0 and not np.signbit(got[5])   # -0 + 0 = +0
    assert float(fma(dt(0.1), dt(10), dt(-1))) == float(
        Fraction(float(dt(0.1))) * 10 - 1)


def test_fma_float32_near_a_midpoint():
    """a*b + c just below a float32 midpoint whose float64 rounding is the midpoint itself:
    rounding the float64 sum to float32 would break the tie upward, the exact sum rounds down."""
    a = np.float32(2.0**-12 * (1 + 2.0**-23))
    b = np.float32(2.0**-12 * (1 - 2.0**-23))
    c = np.float32(1 + 2.0**-23)                     # a*b + c = c + 2**-24 - 2**-70
    assert np.float32(np.float64(a) * np.float64(b) + np.float64(c)) == np.float32(1 + 2.0**-22)
    assert sr.fma(a, b, c) == c
    assert sr.fma(np.full(3, a), b, c).tolist() == [float(c)] * 3


def test_fma_kernels_equal_the_emulation():
    """The CPU kernel (llvm.fma) and the numpy emulation agree, fused with neighbours."""
    for dt in (np.float32, np.float64):
        a, b, c = _fma_operands(dt, 4000, 1)
        f = ft.jit(lambda a, b, c: fma(a * 2, b, c) + 1, eager=True)
        assert f(a, b, c).tobytes() == (sr.fma(a * 2, b, c) + 1).tobytes()


def test_fma_gradients():
    x = (np.array([0.3, -1.2]), np.array([2.0, 0.5]), np.array([1.0, 4.0]))
    ft.test_util.check_grads(lambda a, b, c: fma(a, b, c), x, order=2)
    g = ft.grad(lambda a, b, c: fma(a, b, c).sum(), argnums=(0, 1, 2))(*x)
    np.testing.assert_array_equal(g[0], x[1])
    np.testing.assert_array_equal(g[1], x[0])
    np.testing.assert_array_equal(g[2], np.ones(2))


# --------------------------------------------------------------------------------------------
# erf_inv as XLA computes it
# --------------------------------------------------------------------------------------------

def _erf_inv_grid(dt):
    return np.concatenate([np.linspace(-1, 1, 20001), [0.5, 1e-30, -1e-30]]).astype(dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_erf_inv_xla_equals_jax(dt):
    got = erf_inv_xla(_erf_inv_grid(dt))
    assert got.dtype == dt
    digest = hashlib.sha256(got.tobytes()).hexdigest()
    assert digest == DIGESTS[f"erf_inv_{np.dtype(dt).name}_grid"]
    assert erf_inv_xla(dt(1)) == np.inf and erf_inv_xla(dt(-1)) == -np.inf
    assert np.isnan(erf_inv_xla(dt(1.5)))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_erf_inv_xla_kernel_equals_impl(dt):
    x = _erf_inv_grid(dt)
    f = ft.jit(lambda x: erf_inv_xla(x) * 3, eager=True)
    assert f(x).tobytes() == (erf_inv_xla(x) * 3).tobytes()


def test_erf_inv_xla_is_close_to_the_true_inverse_and_differentiates():
    sp = pytest.importorskip("scipy.special")
    x = np.linspace(-0.999, 0.999, 1001)
    np.testing.assert_allclose(erf_inv_xla(x), sp.erfinv(x), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(erf_inv_xla(x.astype(np.float32)), sp.erfinv(x), rtol=5e-6,
                               atol=1e-6)
    ft.test_util.check_grads(erf_inv_xla, (np.array([-0.7, 0.1, 0.5]),), order=2)


def test_recipe_renders_every_operation_for_both_targets():
    for target in ("cpu", "cuda"):
        src = sr.helper_source(erf_inv_f32, "erf_inv_xla", [np.float32], np.float32, target)
        compile(src, "<helper>", "exec")
        if target == "cuda":
            assert "libdevice.fmaf" in src and "libdevice.fmul_rn" in src
            assert " * " not in src          # every float product is a mul.rn: no contraction
        else:
            assert "_ftr_fma" in src and "@numba.njit" in src
            # constants are module-level names (numba would type each constructor call in
            # the body again at every kernel that inlines the helper)
            body = src.split("\ndef ", 1)[1]
            assert not re.search(r"np\.(u?int|float)\d+\((-?\d|np\.)", body), body
    def threefry_xor(m, *words):
        y0, y1 = threefry2x32_words(m, *words)
        return y0 ^ y1
    tf = sr.helper_source(threefry_xor, "threefry2x32_xor", [np.uint32] * 4, np.float64, "cpu")
    assert "np.uint64(" not in tf.split("\ndef ", 1)[1]   # numba widens uint32 steps itself


# --------------------------------------------------------------------------------------------
# threefry and bits -> floats
# --------------------------------------------------------------------------------------------

# Random123's known-answer vectors for threefry2x32_20 (kat_vectors): key, counter, result
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
       ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
       ((0x13198a2e, 0x03707344), (0x243f6a88, 0x85a308d3), (0xc4923a9c, 0x483df7a0))]


def test_threefry_known_answers():
    k0, k1, x0, x1 = (np.array([row[i][j] for row in KAT], np.uint32)
                      for i, j in ((0, 0), (0, 1), (1, 0), (1, 1)))
    hi = threefry2x32(k0, k1, x0, x1, out="high")
    lo = threefry2x32(k0, k1, x0, x1, out="low")
    assert [(int(h), int(l)) for h, l in zip(hi, lo)] == [row[2] for row in KAT]
    both = threefry2x32(k0, k1, x0, x1, out="concat")
    assert both.dtype == np.uint64
    np.testing.assert_array_equal(both, (hi.astype(np.uint64) << np.uint64(32)) | lo)
    np.testing.assert_array_equal(threefry2x32(k0, k1, x0, x1), hi ^ lo)


def test_threefry_kernel_broadcasts_scalars_and_equals_impl():
    rng = np.random.default_rng(0)
    x1 = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    k0, k1 = np.uint32(0xDEADBEEF), np.uint32(0xFFFFFFFF)
    for out in ("high", "low", "xor", "concat"):
        eager = threefry2x32(k0, k1, np.uint32(7), x1, out=out)
        jitted = ft.jit(lambda a, b, x: threefry2x32(a, b, np.uint32(7), x, out=out),
                        eager=True)(k0, k1, x1)
        assert eager.dtype == jitted.dtype and eager.tobytes() == jitted.tobytes(), out


def test_threefry_rejects_other_dtypes():
    with pytest.raises(TypeError, match="uint32"):
        threefry2x32(np.int32(0), np.int32(0), np.int32(0), np.int32(0))


def test_unit_float():
    b32 = np.array([0, 1 << 9, 0xFFFFFFFF, 1 << 31], np.uint32)
    np.testing.assert_array_equal(unit_float(b32), np.array(
        [0, 2.0**-23, 1 - 2.0**-23, 0.5], np.float32))
    b64 = np.array([0, 1 << 12, 0xFFFFFFFFFFFFFFFF], np.uint64)
    np.testing.assert_array_equal(unit_float(b64), [0, 2.0**-52, 1 - 2.0**-52])
    assert unit_float(b64).dtype == np.float64
    # JAX's construction: bitcast(bits >> (width - mantissa) | bits of 1.0) - 1
    jax_way = ((b32 >> 9) | np.float32(1).view(np.uint32)).view(np.float32) - np.float32(1)
    np.testing.assert_array_equal(unit_float(b32), jax_way)


# --------------------------------------------------------------------------------------------
# rejection samplers
# --------------------------------------------------------------------------------------------

KEY = np.array([0, 1], np.uint32)


def test_gamma_op_batches_over_keys_like_a_loop():
    keys = np.array([[0, 1], [0, 2], [7, 3]], np.uint32)
    a = np.array([[0.5, 2.0], [1.0, 1.0], [5.0, 0.1]])
    batched = random_gamma(keys, a)
    loop = np.stack([random_gamma(k, r) for k, r in zip(keys, a)])
    assert batched.tobytes() == loop.tobytes()
    mapped = ft.vmap(lambda k, r: random_gamma(k, r))(keys, a)
    assert mapped.tobytes() == loop.tobytes()
    # an unbatched key with batched shapes: each batch element splits the same key
    same = ft.vmap(lambda r: random_gamma(KEY, r))(a)
    assert same.tobytes() == np.stack([random_gamma(KEY, r) for r in a]).tobytes()


def test_gamma_grad_is_the_implicit_derivative():
    """dx/da = -(dP/da) / (dP/dx) with P = scipy's gammainc, dP/da by central differences."""
    sp = pytest.importorskip("scipy.special")
    a = np.array([0.05, 0.3, 1.0, 1.0, 2.5, 2.5, 10.0, 10.0, 100.0])
    x = np.array([1e-4, 0.2, 0.69, 3.0, 0.5, 6.0, 8.0, 14.0, 95.0])
    h = 1e-6 * a
    dp_da = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    pdf = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    np.testing.assert_allclose(random_gamma_grad(a, x), -dp_da / pdf, rtol=1e-6)
    assert random_gamma_grad(2.0, 0.0) == 0 and np.isnan(random_gamma_grad(-1.0, 1.0))
    got32 = random_gamma_grad(a.astype(np.float32), x.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, -dp_da / pdf, rtol=1e-5)


def test_gamma_op_gradient_uses_it():
    a = np.array([0.5, 2.0, 7.0])
    z = random_gamma(KEY, a)
    g = ft.grad(lambda a: random_gamma(KEY, a).sum())(a)
    np.testing.assert_allclose(g, random_gamma_grad(a, z), rtol=1e-15)
    lz = random_gamma(KEY, a, log_space=True)
    g = ft.grad(lambda a: random_gamma(KEY, a, log_space=True).sum())(a)
    np.testing.assert_allclose(g, random_gamma_grad(a, np.exp(lz)) / np.exp(lz), rtol=1e-12)


def test_poisson_op_is_integer_and_batches():
    keys = np.array([[0, 1], [0, 2]], np.uint32)
    lam = np.array([[0.5, 30.0, 0.0], [3.0, 3.0, 100.0]], np.float32)
    out = random_poisson(keys, lam)
    assert out.dtype == np.int64
    assert out.tobytes() == np.stack([random_poisson(k, r) for k, r in zip(keys, lam)]
                                     ).tobytes()
    assert out[0, 2] == 0
    assert ops.random_poisson_p.zero_grad
