"""Accuracy, special values and vectorisation of functrace.backends.cpu.vecmath.

Errors are measured in ulp of the float64 result: |got - ref| / np.spacing(ref)
with ``ref`` computed in 80-bit long double (numpy's ``np.longdouble`` ufuncs
call the C ``*l`` functions), or with mpmath for erf.  Where long double is
not wider than double (e.g. some ARM/Windows builds) the float64 numpy result
is used as reference and the bounds are loosened by 1 ulp.  No timing
assertions here: see benchmarks/bench_vecmath.py.
"""
import importlib.util
import math
import os
import re
import zlib

import numba
import numpy as np
import pytest

try:
    from functrace.backends.cpu import vecmath as vm
except ImportError:  # standalone run before the package __init__ files exist
    _p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "functrace", "backends", "vecmath.py")
    _spec = importlib.util.spec_from_file_location("vecmath", _p)
    vm = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(vm)

try:
    import mpmath
except ImportError:  # pragma: no cover
    mpmath = None

LD = np.longdouble
WIDE = np.finfo(LD).nmant >= 63
SLACK = 0.0 if WIDE else 1.0
N = 200_000
INF, NAN = math.inf, math.nan

_LOOPS = {}
#: both float64 exps, whichever ``vm.vexp`` is in this process (numba_target.exp_variant):
#: tested like "exp" under these names
EXP_VARIANTS = {"exp_table": vm.vexp_table, "exp_poly": vm.vexp_poly}


def _base(name):
    return "exp" if name in EXP_VARIANTS else name


def loop_for(name, flags="vm", f32=False):
    key = (name, flags, f32)
    if key not in _LOOPS:
        # as the code generator does: a native float32 variant for float32 operands
        fn = (EXP_VARIANTS[name] if name in EXP_VARIANTS
              else vm.VECMATH_F32[name] if f32 else vm.VECMATH[name])
        opts = vm.JIT_OPTIONS if flags == "vm" else {}

        @numba.njit(**opts)
        def loop(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        _LOOPS[key] = loop
    return _LOOPS[key]


def run(name, x, flags="vm"):
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    loop_for(name, flags, x.dtype == np.float32 and name in vm.VECMATH_F32)(x, out)
    return out


def logu(rng, lo, hi, n=N):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def _ref_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _ref_erf(x):
    """erf in long double: mpmath at 40 digits, except for |x| < 1e-3 (the tiny band's
    100,000 points), where the Maclaurin series to x**7 is exact to ~1e-24 relative, far
    below long double's rounding (mpmath costs ~0.1 ms a point)."""
    if mpmath is None:
        pytest.skip("mpmath not installed")
    x = np.asarray(x)
    out = np.empty(x.shape, LD)
    small = np.abs(x) < 1e-3
    with mpmath.workdps(40):
        two_over_sqrt_pi = LD(mpmath.nstr(2 / mpmath.sqrt(mpmath.pi), 30))
        out[~small] = [LD(mpmath.nstr(mpmath.erf(mpmath.mpf(float(v))), 30))
                       for v in x[~small]]
    t = x[small].astype(LD)
    t2 = t * t
    out[small] = two_over_sqrt_pi * t * (1 - t2 * (LD(1) / 3 - t2 * (LD(1) / 10 - t2 / 42)))
    return out


def reference(name, x):
    name = _base(name)
    if name == "erf":
        return _ref_erf(x)
    npf = {"exp": np.exp, "expm1": np.expm1, "exp2": np.exp2, "log": np.log,
           "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
           "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh,
           "sigmoid": _ref_sigmoid}[name]
    with np.errstate(all="ignore"):
        return npf(x.astype(LD) if WIDE else x).astype(LD)


def ulp_errors(got, ref):
    """ulp errors (float64 ulp of the reference) where the reference is finite."""
    with np.errstate(all="ignore"):
        r64 = ref.astype(np.float64)
        fin = np.isfinite(r64)
        err = np.abs(got.astype(LD) - ref) / np.spacing(np.abs(r64)).astype(LD)
    return err[fin].astype(np.float64), fin


def domain(name, rng):
    name = _base(name)
    d = {
        "exp": lambda: rng.uniform(-745, 710, N),
        "expm1": lambda: np.concatenate([rng.uniform(-40, 710, N),
                                         rng.uniform(-1e-3, 1e-3, N // 4),
                                         rng.uniform(-2, 2, N // 4)]),
        "exp2": lambda: rng.uniform(-1075, 1024, N),
        "log": lambda: np.concatenate([logu(rng, 1e-310, 1e308),
                                       rng.uniform(0.5, 2, N // 4)]),
        "log2": lambda: logu(rng, 1e-310, 1e308),
        "log10": lambda: logu(rng, 1e-310, 1e308),
        "log1p": lambda: np.concatenate([logu(rng, 1e-300, 1e308, N // 2),
                                         -logu(rng, 1e-300, 1, N // 2),
                                         rng.uniform(-1e-3, 1e-3, N // 4)]),
        "sin": lambda: rng.uniform(-1e4, 1e4, N),
        "cos": lambda: rng.uniform(-1e4, 1e4, N),
        "tan": lambda: rng.uniform(-1e4, 1e4, N),
        "tanh": lambda: np.concatenate([rng.uniform(-30, 30, N),
                                        rng.uniform(-1, 1, N // 4)]),
        "sigmoid": lambda: rng.uniform(-745, 40, N),
        "erf": lambda: rng.uniform(-6, 6, 20_000),
    }
    return d[name]()


def tiny_band(rng, n=N // 8):
    """Arguments of magnitude 1e-300..1e-3, both signs: where shortcuts like expm1(x) = x
    must not be taken too early (a 2^-30 cut-off gave 2.4 million ulp at 7e-10)."""
    return np.concatenate([logu(rng, 1e-300, 1e-3, n), -logu(rng, 1e-300, 1e-3, n)])


# bound in ulp asserted by the tests (also in the module docstring)
BOUNDS = {"exp": 1.0, "expm1": 2.0, "exp2": 2.0, "log": 1.0, "log2": 2.0,
          "log10": 2.0, "log1p": 2.0, "sin": 2.0, "cos": 2.0, "tan": 3.0,
          "tanh": 3.0, "sigmoid": 3.0, "erf": 3.0}
TRIG_ABS = 4e-16
#: float32 ulp bounds of the native float32 variants (vm.VECMATH_F32)
F32_NATIVE_BOUNDS = {"exp": 1.0, "log": 1.0, "tanh": 2.0, "sigmoid": 3.0}


@pytest.mark.parametrize("name", sorted(BOUNDS) + sorted(EXP_VARIANTS))
def test_accuracy_float64(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))   # the same points every run
    x = np.concatenate([domain(name, rng), tiny_band(rng)])
    got = run(name, x)
    ref = reference(name, x)
    err, fin = ulp_errors(got, ref)
    bound = BOUNDS[_base(name)] + SLACK
    bad = err > bound
    if name in ("sin", "cos", "tan"):
        # near-zero results: absolute error of a few eps is acceptable
        with np.errstate(all="ignore"):
            abserr = np.abs(got.astype(LD) - ref)[fin].astype(np.float64)
        bad &= abserr > TRIG_ABS
    assert not bad.any(), (name, x[fin][bad][:5], err[bad][:5], err.max())
    # non-finite references (exp overflow) must be matched exactly
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[~fin], ref[~fin].astype(np.float64))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_huge_arguments(name):
    rng = np.random.default_rng(7)
    x = np.concatenate([logu(rng, 1e5, 1e300, 20_000),
                        -logu(rng, 1e5, 1e300, 20_000),
                        [1e6, 1e6 * (1 - 2**-52), 2**20, 1e22, 1e300,
                         1.7976931348623157e308, 5.0e15]])
    rng.shuffle(x)
    # mixed with ordinary values in the same vectorised loop
    x = np.concatenate([x, rng.uniform(-10, 10, x.size)])
    got = run(name, x)
    ref = reference(name, x)
    err, fin = ulp_errors(got, ref)
    with np.errstate(all="ignore"):
        abserr = np.abs(got.astype(LD) - ref)[fin].astype(np.float64)
    assert fin.all()
    assert np.all((err <= 2 + SLACK) | (abserr <= TRIG_ABS)), err.max()


@pytest.mark.parametrize("exp", ["exp", *sorted(EXP_VARIANTS)])
def test_log_subnormals_and_exp_underflow(exp):
    rng = np.random.default_rng(3)
    sub = rng.integers(1, 2**52, 50_000).astype(np.float64) * 5e-324
    err, _ = ulp_errors(run("log", sub), reference("log", sub))
    assert err.max() <= 1 + SLACK
    x = rng.uniform(-745.2, -707, 50_000)      # subnormal / tiny results
    got = run(exp, x)
    err, _ = ulp_errors(got, reference("exp", x))
    assert err.max() <= 1 + SLACK
    assert run(exp, np.array([-745.2, -746.0, -800.0]))[1:].tolist() == [0, 0]
    assert run(exp, np.array([-745.13]))[0] == 5e-324


def _same(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_array_equal(got, want)
    # signs of zeros and infinities too (not of NaNs)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))


SPECIALS = {
    "exp": ([INF, -INF, NAN, 0.0, -0.0, 709.782712893384, 709.7827128933841,
             710.0, 1e308, -1e308, -745.2, 5e-324],
            [INF, 0.0, NAN, 1.0, 1.0, 1.7976931348622732e308, INF, INF, INF,
             0.0, 0.0, 1.0]),
    "expm1": ([INF, -INF, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300, 710.0,
               -40.0, -1e308],
              [INF, -1.0, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300, INF, -1.0,
               -1.0]),
    "exp2": ([INF, -INF, NAN, 0.0, 1024.0, -1074.0, -1075.0, 10.0, -1.0],
             [INF, 0.0, NAN, 1.0, INF, 5e-324, 0.0, 1024.0, 0.5]),
    "log": ([0.0, -0.0, -1.0, -INF, INF, NAN, 1.0, 5e-324, 2.0],
            [-INF, -INF, NAN, NAN, INF, NAN, 0.0, -744.4400719213812,
             0.6931471805599453]),
    "log2": ([0.0, -1.0, INF, NAN, 1.0, 5e-324, 1024.0, 0.125],
             [-INF, NAN, INF, NAN, 0.0, -1074.0, 10.0, -3.0]),
    "log10": ([0.0, -1.0, INF, NAN, 1.0, 1000.0, 1e-300],
              [-INF, NAN, INF, NAN, 0.0, 3.0, -300.0]),
    "log1p": ([-1.0, -2.0, -INF, INF, NAN, 0.0, -0.0, 5e-324, -5e-324,
               1e-300],
              [-INF, NAN, NAN, INF, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300]),
    "sin": ([INF, -INF, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300],
            [NAN, NAN, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300]),
    "cos": ([INF, -INF, NAN, 0.0, -0.0, 5e-324],
            [NAN, NAN, NAN, 1.0, 1.0, 1.0]),
    "tan": ([INF, -INF, NAN, 0.0, -0.0, 5e-324, -1e-300],
            [NAN, NAN, NAN, 0.0, -0.0, 5e-324, -1e-300]),
    "tanh": ([INF, -INF, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300, 40.0,
              -1e308],
             [1.0, -1.0, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300, 1.0, -1.0]),
    "sigmoid": ([INF, -INF, NAN, 0.0, -0.0, 800.0, -800.0, -745.0],
                [1.0, 0.0, NAN, 0.5, 0.5, 1.0, 0.0, 5e-324]),
    "erf": ([INF, -INF, NAN, 0.0, -0.0, 5e-324, -5e-324, 6.0, -10.0, 1e308],
            [1.0, -1.0, NAN, 0.0, -0.0, 5e-324, -5e-324, 1.0, -1.0, 1.0]),
}


@pytest.mark.parametrize("name", sorted(SPECIALS) + sorted(EXP_VARIANTS))
def test_special_values(name):
    x, want = SPECIALS[_base(name)]
    x = np.array(x * 4)  # length > vector width: exercises the vector body
    _same(run(name, x), np.array(want * 4))


@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "tanh", "expm1",
                                  "log1p", *sorted(EXP_VARIANTS)])
def test_special_values_match_numpy(name):
    x = np.array([INF, -INF, NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-310, -1.0,
                  1e308, -1e308, 710.0, -746.0] * 3)
    with np.errstate(all="ignore"):
        want = getattr(np, _base(name))(x)
    got = run(name, x)
    fin = np.isfinite(want) & (want != 0)
    _same(got[~fin], want[~fin])
    err, _ = ulp_errors(got[fin], want[fin].astype(LD))
    assert err.max() <= 1


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_float32(name):
    rng = np.random.default_rng(11)
    lo, hi = {"exp": (-100, 88), "expm1": (-20, 88), "exp2": (-140, 127),
              "log": (0, 1e30), "log2": (0, 1e30), "log10": (0, 1e30),
              "log1p": (-1, 1e30), "sigmoid": (-100, 40), "erf": (-5, 5),
              "tanh": (-12, 12)}.get(name, (-1e4, 1e4))
    x = rng.uniform(lo, hi, 20_000).astype(np.float32)
    got = run(name, x)
    assert got.dtype == np.float32
    ref = reference(name, x.astype(np.float64)).astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - ref) / np.spacing(
            np.abs(ref).astype(np.float32)).astype(np.float64)
    fin = np.isfinite(ref) & (np.abs(ref) >= np.finfo(np.float32).tiny)
    # float32 is computed in float64 and rounded once, except by the native float32 variants
    assert err[fin].max() <= F32_NATIVE_BOUNDS.get(name, 1.0)
    # and NaN/inf behave
    s = np.array([NAN, INF, -INF], dtype=np.float32)
    _same(np.isnan(run(name, s)), np.isnan(run(name, s.astype(np.float64))))


@pytest.mark.parametrize("name", ["exp", "sin", "log", "tanh", "erf"])
def test_plain_njit_caller_still_accurate(name):
    """inline="always" applies the caller's flags: a default njit caller (no
    contraction, python error model) must still meet the bounds."""
    rng = np.random.default_rng(5)
    x = domain(name, rng)[:20_000]
    got = run(name, x, flags="plain")
    err, _ = ulp_errors(got, reference(name, x))
    assert err.max() <= BOUNDS[name] + SLACK


_PACKED = re.compile(r"\bv\w*p[sd]\s+[^\n]*%([xyz])mm")
_LIBM = re.compile(r"call [^@\n]*@(llvm\.)?(exp|exp2|expm1|log|log2|log10|log1p|"
                   r"sin|cos|tan|tanh|erf|pow)(\.[\w.]+)?\(")


@pytest.mark.parametrize("name", sorted(BOUNDS) + sorted(EXP_VARIANTS))
def test_loops_vectorise(name):
    loop = loop_for(name)
    if not loop.signatures:
        run(name, np.linspace(0.5, 1.5, 64))
    sig = loop.signatures[0]
    asm = loop.inspect_asm(sig)
    if not re.search(r"%ymm", asm):
        pytest.skip("CPU without AVX: xmm-only code")
    regs = set(_PACKED.findall(asm))
    assert regs & {"y", "z"}, "no packed ymm/zmm arithmetic in %s loop" % name
    # no libm call in the loop; sin/cos/tan reach libm only through the
    # masked (predicated) vector variant of their slow-path wrapper
    ir = loop.inspect_llvm(sig)
    body = ir.split("define ")[1]  # the loop function itself
    assert not _LIBM.search(body), _LIBM.search(body).group(0)
    if name in ("sin", "cos", "tan"):
        assert re.search(r"@__functrace_vm_%s_slow_m\d+\(" % name, body)


def test_sin_slow_lanes_are_predicated():
    """Huge-argument lanes go to libm only for those lanes; the result is
    exact libm sin/cos and the vector path is still used for the others."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-10, 10, 4096)
    x[::97] = 1e10 + np.arange(x[::97].size)
    for name in ("sin", "cos", "tan"):
        got = run(name, x)
        big = np.abs(x) >= 1e6
        libm = np.array([getattr(math, name)(v) for v in x[big]])
        np.testing.assert_array_equal(got[big], libm)


def test_table_and_attributes():
    names = {"exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin",
             "cos", "tan", "tanh", "sigmoid", "erf"}
    assert names <= set(vm.VECMATH)
    for n in names:
        assert getattr(vm, "v" + n) is vm.VECMATH[n]
    assert vm.VECMATH["logistic"] is vm.vsigmoid
    # callable from Python too (compiles a standalone version)
    assert vm.vexp(0.0) == 1.0
    assert vm.vlog(1.0) == 0.0
    assert isinstance(vm.vsin(np.float32(1.0)), float)
    # native float32 variants: the ops' CPU code names the same functions
    from functrace.core import registry
    from functrace.ops.scalar_code import VECMATH_F32
    used = {c.expr.vecmath for op in registry.values() for c in [op.code.get("cpu")]
            if c is not None and not isinstance(c, str) and hasattr(c.expr, "vecmath")}
    assert {"exp", "log", "tanh", "sigmoid", "sin", "cos"} <= used
    assert all(hasattr(vm, "v" + f) for f in used)
    assert VECMATH_F32 == {"sigmoid" if n == "logistic" else n for n in vm.VECMATH_F32} & used
    assert all(getattr(vm, f"v{n}_f32") is vm.VECMATH_F32["logistic" if n == "sigmoid" else n]
               for n in VECMATH_F32)


def test_native_float32_tanh():
    """vtanh_f32 computes float32 in float32 arithmetic: accuracy on both sides of the switch
    between its polynomial and exp branches, tiny and huge arguments, and the special values
    (the sign of zero, +-inf, NaN); and it stays float32 (no float64 widening)."""
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.uniform(-1.2, 1.2, 300_000), rng.uniform(-12, 12, 300_000),
                        np.float32(0.875) + np.arange(-2000, 2000) * np.float32(2 ** -20),
                        np.exp(rng.uniform(-100, 0, 50_000)) * rng.choice([-1, 1], 50_000)]
                       ).astype(np.float32)
    got = run("tanh", x)
    assert got.dtype == np.float32
    ref = np.tanh(x.astype(LD))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(LD)
    fin = np.abs(ref) >= np.finfo(np.float32).tiny
    assert float((np.abs(got.astype(LD) - ref) / ulp)[fin].max()) <= 2.0
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 9.0, 9.5, 88.0, -1e-40], np.float32)
    out = run("tanh", s)
    np.testing.assert_array_equal(out[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(out[1]) and not np.signbit(out[0]) and np.isnan(out[4])
    # correctly rounded near the last float32 below 1 (tanh(x) rounds to 1.0f past 9.01)
    np.testing.assert_array_equal(out[5:8], np.tanh(s[5:8].astype(LD)).astype(np.float32))
    assert out[8] == s[8] and np.signbit(out[8])


def test_native_float32_exp_and_sigmoid():
    """vexp_f32 / vsigmoid_f32: dense accuracy, overflow exactly past 88.72, gradual
    underflow to the last subnormal and to zero, and the special values."""
    rng = np.random.default_rng(13)
    x = np.concatenate([rng.uniform(-110, 90, 400_000), rng.uniform(-2, 2, 200_000)]
                       ).astype(np.float32)
    xl = x.astype(LD)
    for name, ref, bound in (("exp", np.exp(xl), 1.0), ("sigmoid", 1 / (1 + np.exp(-xl)), 3.0)):
        got = run(name, x)
        assert got.dtype == np.float32
        with np.errstate(over="ignore"):
            r32 = ref.astype(np.float32)
        ok = np.isfinite(r32) & (ref > 0)
        ulp = np.spacing(np.abs(r32[ok])).astype(LD)     # subnormal results: subnormal ulps
        assert float((np.abs(got[ok].astype(LD) - ref[ok]) / ulp).max()) <= bound, name
    s = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, -103.9, -104.0, -87.5,
                  -200.0], np.float32)
    with np.errstate(over="ignore"):
        want = np.exp(s.astype(LD)).astype(np.float32)
    np.testing.assert_array_equal(run("exp", s), want)
    np.testing.assert_array_equal(run("sigmoid", np.array([np.nan, np.inf, -np.inf, -0.0, 200.0,
                                                           -200.0], np.float32)),
                                  np.array([np.nan, 1.0, 0.0, 0.5, 1.0, 0.0], np.float32))


def test_native_float32_log():
    """vlog_f32: dense accuracy over the whole float32 range (subnormals included), near 1,
    and the special values (log(0) = -inf, log(x < 0) = NaN, log(inf) = inf)."""
    rng = np.random.default_rng(14)
    x = np.concatenate([np.exp(rng.uniform(-103, 88.7, 400_000)), rng.uniform(0.5, 2, 200_000),
                        1 + rng.uniform(-1e-3, 1e-3, 50_000)]).astype(np.float32)
    x = x[x > 0]
    got = run("log", x)
    assert got.dtype == np.float32
    ref = np.log(x.astype(LD))
    ok = ref != 0
    ulp = np.spacing(np.abs(ref[ok]).astype(np.float32)).astype(LD)
    assert float((np.abs(got[ok].astype(LD) - ref[ok]) / ulp).max()) <= 1.0
    s = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0, 1e-45, 3.4e38], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run("log", s), np.log(s.astype(LD)).astype(np.float32))


# --------------------------------------------------------------------------------------------
# the split trig functions: vsin_fast & co. where trig_big is 0, vsin_scalar & co. everywhere
# --------------------------------------------------------------------------------------------

_SPLIT_LOOPS = {}


def _split_loop(fname):
    if fname not in _SPLIT_LOOPS:
        fn = getattr(vm, fname)

        @numba.njit(**vm.JIT_OPTIONS)
        def loop(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        _SPLIT_LOOPS[fname] = loop
    return _SPLIT_LOOPS[fname]


def _split_run(fname, x, out_dtype=None):
    out = np.empty(x.shape, out_dtype or x.dtype)
    _split_loop(fname)(x, out)
    return out


def _trig_points(rng):
    edge = 1e6 * (1 - 2**-52)
    return np.concatenate([
        rng.uniform(-1e6, 1e6, 20_000), rng.uniform(-10, 10, 20_000),
        logu(rng, 1e5, 1e300, 5_000), -logu(rng, 1e5, 1e300, 5_000),
        [INF, -INF, NAN, -NAN, 0.0, -0.0, 5e-324, -5e-324, 1e-300, edge, -edge, 1e6, -1e6,
         1e22, 1.7976931348623157e308, -1.7976931348623157e308]])


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_split_trig_is_the_trig_function_bit_for_bit(name):
    """``v<fn>_fast`` equals ``v<fn>`` bit for bit (NaNs included) wherever ``trig_big`` is
    0, which is exactly where |x| < 1e6 or x is not finite; ``v<fn>_scalar`` everywhere."""
    rng = np.random.default_rng(zlib.crc32(b"split" + name.encode()))
    x = _trig_points(rng)
    rng.shuffle(x)
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)         # |x| > 3.4e38 -> inf
    for xs in (x, x32):
        full = run(name, xs)
        big = _split_run("trig_big", xs, np.int64)
        ax = np.abs(xs.astype(np.float64))
        np.testing.assert_array_equal(big, ((ax >= 1e6) & np.isfinite(ax)).astype(np.int64))
        bits = np.int64 if xs.dtype == np.float64 else np.int32
        ok = big == 0
        assert ok.sum() > 40_000 and (~ok).sum() > 1_000
        fast = _split_run(f"v{name}_fast", xs)
        np.testing.assert_array_equal(fast[ok].view(bits), full[ok].view(bits))
        scalar = _split_run(f"v{name}_scalar", xs)
        np.testing.assert_array_equal(scalar.view(bits), full.view(bits))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_split_trig_loops_vectorise_or_stay_scalar(name):
    """The fast loop is packed code with no call at all (no libm, no masked variant); the
    scalar one calls libm through a wrapper with no vector variant, so it is not vectorised."""
    x = np.linspace(-3, 3, 64)
    for fname in (f"v{name}_fast", f"v{name}_scalar"):
        _split_run(fname, x)
    fast = _split_loop(f"v{name}_fast")
    asm = fast.inspect_asm(fast.signatures[0])
    if not re.search(r"%ymm", asm):
        pytest.skip("CPU without AVX: xmm-only code")
    assert set(_PACKED.findall(asm)) & {"y", "z"}
    body = fast.inspect_llvm(fast.signatures[0]).split("define ")[1]
    assert not re.search(r"\bcall [^\n]*@(__functrace|sin|cos|tan)", body)
    scalar = _split_loop(f"v{name}_scalar")
    ir = scalar.inspect_llvm(scalar.signatures[0])
    assert re.search(r"@__functrace_vm_%s_scalar\(" % name, ir)
    assert "_slow_m" not in ir and "vector-function-abi-variant" not in ir.split(
        "__functrace_vm_%s_scalar" % name, 1)[1].split("\n", 1)[0]


def test_exp_table_is_2_to_the_j_over_128_with_its_rounding_error():
    """vecmath_exp_table.PACKED recomputed from decimal at 50 digits (module doc)."""
    from decimal import Decimal, localcontext

    from functrace.backends.cpu import vecmath_exp_table as T
    with localcontext() as ctx:
        ctx.prec = 50
        ln2 = Decimal(2).ln()
        assert T.INV_LN2_128 == float(128 / ln2)
        assert abs(Decimal(T.LN2_128_HI) + Decimal(T.LN2_128_LO) - ln2 / 128) < Decimal(2) ** -95
        assert float.hex(T.LN2_128_HI).split("p")[0].endswith("0000")   # 37 bits
        for j in range(128):
            t = Decimal(2) ** (Decimal(j) / 128)
            th = float(t)
            b = int(np.float64(th).view(np.int64))
            tail = round(float(t / Decimal(th) - 1) * 2.0 ** 62)
            low = (b & ((1 << 52) - 1)) - (j << 45) + (1 << 52)
            assert int(T.PACKED[j]) == (tail << 53) + low, j


def test_exp_variant_is_read_once_and_names_vexp():
    from functrace.backends.cpu import numba_target
    assert vm.EXP_VARIANT == numba_target.exp_variant() in ("table", "poly")
    assert vm.vexp is EXP_VARIANTS[f"exp_{vm.EXP_VARIANT}"]
    # the variants round differently in the last bit for a few arguments: the choice is seen
    x = np.random.default_rng(0).uniform(-700, 700, 10_000)
    a, b = run("exp_table", x), run("exp_poly", x)
    assert (a != b).any() and (np.abs(a - b) <= np.spacing(np.maximum(a, b))).all()
