"""Experiment: table-driven float64 exp for the numba CPU backend (kept to rerun). A negative
result on Zen 5; on a Sapphire Rapids-class Xeon (2026-12-03) gather128 ran 1.35x vexp's speed,
and it became ``vecmath.vexp_table``, chosen where gathers are fast (``numba_target.exp_variant``).

``vecmath._exp64`` (range reduction by ln2, a degree-11 polynomial, compensated sum, two
``2**k`` factors) runs at ~0.65-0.85 ns/element in cache on the Zen 5 development machine at
<= 0.67 ulp. This script measures the alternatives tried to make it >= 1.3x faster at the same
accuracy, against ``vm.vexp`` in the same process (interleaved rounds, pinned to one core):

* ``gather128``   the standard libm design: x = k ln2/128 + r, exp(x) = 2**(k/128) exp(r), a
                  degree-5 polynomial, a 128-entry table read by one ``vpgatherqq``. Each entry
                  packs the bits of 2**(j/128) (minus j << 45, so that adding k << 45 adds the
                  exponent) in its low 53 bits and the rounding error of that double, in units of
                  2**-62, in its top 11 bits (the entry's exponent bits are redundant), so one
                  gather serves both. 2**(k//128) is added to the exponent as an integer once per
                  sign: S = 2**(k/128) / 2 for x >= 0, 2**(k/128) * 2**128 for x < 0, result =
                  fma(S, tmp, S) * (2 or 2**-128): one multiply gives the exact overflow threshold
                  and one rounding into subnormals, no select between a fast and a careful path.
* ``gather512``   the same with 512 entries and a degree-4 polynomial.
* ``gather128x2`` 128 entries as two tables (bits, tail): two gathers.
* ``select4``     N = 4: the table is a tree of selects on two bits of k (8 constants, 6 blends),
                  a degree-9 polynomial by Estrin's scheme.
* ``estrin1``     no table (N = 1): vexp's own scheme with Estrin instead of Horner, k from the
                  shifter's bits without a subtraction, the one-multiply scaling above.
* ``ceiling``     ``gather128`` with the table read replaced by integer arithmetic on the index
                  (wrong values; it times the rest of the loop, i.e. what a free lookup would give).

Polynomials: ``python tools/fit_exp.py N DEGREE`` (own fits, mpmath). Tables: computed at import
from ``decimal`` (2**(j/N) at 50 digits, rounded to double; the tail is the rounding error).

Usage (from the repository root; pin to one core, run on a quiet machine)::

    PYTHONPATH=$PWD taskset -c 1 python tools/exp_table_experiment.py bench   # old vs variants
    PYTHONPATH=$PWD taskset -c 1 python tools/exp_table_experiment.py acc     # ulp vs long double
    PYTHONPATH=$PWD python tools/exp_table_experiment.py asm                  # zmm? gathers?

Findings (Zen 5 EPYC, numba 0.68 / LLVM 22; medians of 15 interleaved rounds, two runs;
old = vm.vexp at 0.65 ns/element; ulp = max on 2e6 points of [-20, 20], normal results):

    variant       old/variant   max ulp   > 0.5 ulp
    old               1.00       0.664     2.4e-2
    gather128         0.95       0.505     5.5e-4
    gather512         0.98       0.502     3.5e-4
    gather128x2       0.69       0.505     4.7e-4
    select4           1.16       0.641     2.1e-2
    estrin1           1.11       0.701     2.4e-2
    ceiling           1.81       (wrong values)

All vectorise to zmm code (``asm``); special values and the overflow threshold match vexp; on
subnormal results (double rounding, as in vexp) the max is 0.75 ulp (gathers), 0.80 (select4),
0.78 (estrin1), 0.77 (vexp). The table designs are as accurate as libm's, but a zmm
``vpgatherqq`` of 8 doubles costs ~5.5 cycles alone and ~10 inside the exp loop (it sits on the
dependency chain), as much as the polynomial terms it saves; ``ceiling`` shows the rest of
gather128 would be 1.8x faster than vexp. LLVM lowers neither a gather from a small constant
table nor a select tree to ``vpermt2pd``. select4 with its two select trees replaced by
constants runs 1.46x: its 6 blends + 2 bit tests (and 8 more loop constants) cost ~0.12 ns.
"""

from __future__ import annotations

import re
import sys
import time
from decimal import Decimal, localcontext

import numba
import numpy as np

from functrace.backends.cpu import vecmath as vm
from functrace.backends.cpu.vecmath_llvm import f2i as _f2i
from functrace.backends.cpu.vecmath_llvm import fma as _fma
from functrace.backends.cpu.vecmath_llvm import i2f as _i2f

_h = float.fromhex
_njit = numba.njit(inline="always", error_model="numpy")
SHIFT = _h("0x1.8p52")
LOW53 = (1 << 53) - 1
# one-multiply scaling: S = 2**(k/N) * 2**-c, result = fma(S, tmp, S) * 2**c, c = 1 or -128
K_POS = (0x3FF - 1 - 1) << 52        # added to (low 53 bits of a packed entry) + (k << 52-log2 N)
K_NEG = (0x3FF - 1 + 128) << 52
KB_POS = 1 << 52                     # subtracted from a plain bits table (exponent 0x3FF)
KB_NEG = -128 << 52
C_POS = 2.0
C_NEG = 2.0 ** -128


def tables(n):
    """1/(ln2/n), ln2/n as hi (trailing zeros) + lo, bits table, tail table, packed table."""
    sh = 52 - (n.bit_length() - 1)
    with localcontext() as ctx:
        ctx.prec = 50
        ln2 = Decimal(2).ln()
        hi = float(ln2 / n)
        hi = _h(hi.hex()[:13] + "p" + hi.hex().split("p")[1])   # 37 bits: k * hi exact
        lo = float(ln2 / n - Decimal(hi))
        bits = np.empty(n, np.int64)
        tail = np.empty(n)
        packed = np.empty(n, np.int64)
        for j in range(n):
            t = Decimal(2) ** (Decimal(j) / n)
            th = float(t)
            b = int(np.float64(th).view(np.int64))
            bits[j] = b - (j << sh)
            tail[j] = float(t / Decimal(th) - 1)
            ti = round(tail[j] * 2.0 ** 62)
            low = (b & ((1 << 52) - 1)) - (j << sh) + (1 << 52)
            assert -1024 <= ti < 1024 and 0 < low <= LOW53
            packed[j] = (ti << 53) + low
        return float(n / ln2), hi, lo, bits, tail, packed


INV128, L128HI, L128LO, B128, T128, P128 = tables(128)
INV512, L512HI, L512LO, _, _, P512 = tables(512)
INV4, L4HI, L4LO, B4, T4, _ = tables(4)
# tools/fit_exp.py 128 5 (2**-65.4), 512 4 (2**-62.5), 4 9 (2**-65.8), 1 11 (2**-58.0)
A = [_h(v) for v in ("0x1.ffffffffffdbdp-2", "0x1.5555555555464p-3", "0x1.55555cf16d5c7p-5",
                     "0x1.1111161e991ffp-7")]
D = [_h(v) for v in ("0x1.ffffffffffffdp-2", "0x1.555555c75b3d5p-3", "0x1.555555df54f25p-5")]
Q = [_h(v) for v in ("0x1.fffffffffffffp-2", "0x1.5555555555555p-3", "0x1.5555555557fc0p-5",
                     "0x1.1111111112779p-7", "0x1.6c16c0e387c49p-10", "0x1.a01a01252b45bp-13",
                     "0x1.a02f74f81ce3ep-16", "0x1.71ef5ca09c0ccp-19")]
E = [_h(v) for v in ("0x1.000000000000cp-1", "0x1.5555555555556p-3", "0x1.555555554fdb2p-5",
                     "0x1.1111111110732p-7", "0x1.6c16c186245ddp-10", "0x1.a01a01a8a5ceap-13",
                     "0x1.a01995569f397p-16", "0x1.71de0c371c2f4p-19", "0x1.28b161bcee752p-22",
                     "0x1.af3970576277ep-26")]
A2, A3, A4, A5 = A
D2, D3, D4 = D
Q2, Q3, Q4, Q5, Q6, Q7, Q8, Q9 = Q
E2, E3, E4, E5, E6, E7, E8, E9, E10, E11 = E
B4_0, B4_1, B4_2, B4_3 = (int(v) for v in B4)
T4_0, T4_1, T4_2, T4_3 = (float(v) for v in T4)
LN2HI = _h("0x1.62e42ff000000p-1")
LN2LO = _h("-0x1.718432a1b0e26p-35")
INVLN2 = _h("0x1.71547652b82fep+0")


@_njit
def _poly5(r, t):
    """t + r**2 (A2 + A3 r + A4 r**2 + A5 r**3), Estrin."""
    r2 = r * r
    return _fma(r2, _fma(r2, _fma(r, A5, A4), _fma(r, A3, A2)), t)


@_njit
def gather512(x):
    x = 710.0 if x > 710.0 else x
    x = -750.0 if x < -750.0 else x
    kd = _fma(x, INV512, SHIFT)
    bits = _f2i(kd)
    e = P512[bits & 511]
    kd = kd - SHIFT
    r = _fma(-kd, L512LO, _fma(-kd, L512HI, x))
    neg = x < 0.0
    s = _i2f((e & LOW53) + (bits << 43) + (K_NEG if neg else K_POS))
    r2 = r * r
    q = _fma(r2, _fma(r2, D4, _fma(r, D3, D2)), r)
    tmp = _fma(float(e >> 53), 2.0 ** -62, q)
    return _fma(s, tmp, s) * (C_NEG if neg else C_POS)


@_njit
def gather128x2(x):
    x = 710.0 if x > 710.0 else x
    x = -750.0 if x < -750.0 else x
    kd = _fma(x, INV128, SHIFT)
    bits = _f2i(kd)
    kd = kd - SHIFT
    r = _fma(-kd, L128LO, _fma(-kd, L128HI, x))
    j = bits & 127
    neg = x < 0.0
    s = _i2f(B128[j] + (bits << 45) - (KB_NEG if neg else KB_POS))
    tmp = _poly5(r, r + T128[j])
    return _fma(s, tmp, s) * (C_NEG if neg else C_POS)


@_njit
def select4(x):
    x = 710.0 if x > 710.0 else x
    x = -750.0 if x < -750.0 else x
    kd = _fma(x, INV4, SHIFT)
    bits = _f2i(kd)
    kd = kd - SHIFT
    r = _fma(-kd, L4LO, _fma(-kd, L4HI, x))
    m0 = (bits & 1) != 0
    m1 = (bits & 2) != 0
    b01 = B4_1 if m0 else B4_0
    b23 = B4_3 if m0 else B4_2
    t01 = T4_1 if m0 else T4_0
    t23 = T4_3 if m0 else T4_2
    neg = x < 0.0
    s = _i2f((b23 if m1 else b01) + (bits << 50) - (KB_NEG if neg else KB_POS))
    r2 = r * r
    r4 = r2 * r2
    p = _fma(r4, _fma(r2, _fma(r, Q9, Q8), _fma(r, Q7, Q6)),
             _fma(r2, _fma(r, Q5, Q4), _fma(r, Q3, Q2)))
    tmp = r + _fma(r2, p, t23 if m1 else t01)
    return _fma(s, tmp, s) * (C_NEG if neg else C_POS)


@_njit
def estrin1(x):
    x = 710.0 if x > 710.0 else x
    x = -750.0 if x < -750.0 else x
    kd = _fma(x, INVLN2, SHIFT)
    bits = _f2i(kd)
    kd = kd - SHIFT
    a = _fma(-kd, LN2HI, x)                  # exact
    r = _fma(-kd, LN2LO, a)
    c = _fma(-kd, LN2LO, a - r)              # rounding error of r
    r2 = r * r
    r4 = r2 * r2
    p = _fma(r4, _fma(r2, _fma(r, E9, E8), _fma(r, E7, E6)),
             _fma(r2, _fma(r, E5, E4), _fma(r, E3, E2)))
    p = _fma(r4 * r4, _fma(r, E11, E10), p)
    q = _fma(r2, p, c)
    hi = 1.0 + r
    y = hi + (((1.0 - hi) + r) + q)
    neg = x < 0.0
    s = _i2f((bits << 52) + (((0x3FF + 128) << 52) if neg else ((0x3FF - 1) << 52)))
    return (y * s) * (C_NEG if neg else C_POS)


@_njit
def ceiling(x):
    """gather128 with the table read replaced by arithmetic: wrong values, timing only."""
    x = 710.0 if x > 710.0 else x
    x = -750.0 if x < -750.0 else x
    kd = _fma(x, INV128, SHIFT)
    bits = _f2i(kd)
    kd = kd - SHIFT
    r = _fma(-kd, L128LO, _fma(-kd, L128HI, x))
    e = (bits & 127) * 0x123456789
    neg = x < 0.0
    s = _i2f((e & LOW53) + (bits << 45) + (K_NEG if neg else K_POS))
    tmp = _poly5(r, _fma(float(e >> 53), 2.0 ** -62, r))
    return _fma(s, tmp, s) * (C_NEG if neg else C_POS)


# "gather128" is the production table exp (vecmath.vexp_table, its table in
# vecmath_exp_table.py, made by tables(128) below); "old" the polynomial (vecmath.vexp_poly)
VARIANTS = {"old": vm.vexp_poly, "gather128": vm.vexp_table, "gather512": gather512,
            "gather128x2": gather128x2, "select4": select4, "estrin1": estrin1,
            "ceiling": ceiling}
_LOOPS: dict = {}


def loops(name):
    if name not in _LOOPS:
        fn = VARIANTS[name]

        @numba.njit(**vm.JIT_OPTIONS)
        def bench(x, buf, reps):
            for _ in range(reps):
                for i in range(x.shape[0]):
                    buf[i] = fn(x[i] - 0.5)

        @numba.njit(**vm.JIT_OPTIONS)
        def apply(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        _LOOPS[name] = bench, apply
    return _LOOPS[name]


def bench(names, rounds=15, n=2000, reps=2000):
    """In-cache throughput, rounds interleaved; ratios are old/variant (> 1: variant faster)."""
    x = np.random.default_rng(0).uniform(-20, 20, n)
    buf = np.empty_like(x)
    for name in names:
        loops(name)[0](x, buf, 1)
    t = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            t0 = time.perf_counter()
            loops(name)[0](x, buf, reps)
            t[name].append(time.perf_counter() - t0)
    ref = np.array(t["old"])
    for name in names:
        v = np.array(t[name])
        print(f"{name:12s} {np.median(v) / (n * reps) * 1e9:.3f} ns/element  old/this: "
              f"median {np.median(ref) / np.median(v):.2f}, paired {np.median(ref / v):.2f}, "
              f"min {ref.min() / v.min():.2f}")


def accuracy(names, m=2_000_000):
    """Max ulp and fraction > 0.5 ulp vs np.exp in long double; non-finite/zero results exact."""
    rng = np.random.default_rng(1)
    domains = {
        "[-20, 20]": rng.uniform(-20, 20, m),
        "[-745, 710]": rng.uniform(-745, 710, m),
        "[709, 709.79] (overflow edge)": rng.uniform(709.0, 709.79, m // 4),
        "[-745.2, -707] (subnormal)": rng.uniform(-745.2, -707, m // 4),
        "|x| in [1e-300, 1e-3]": np.concatenate(
            [s * np.exp(rng.uniform(np.log(1e-300), np.log(1e-3), m // 8)) for s in (1, -1)]),
    }
    for dom, x in domains.items():
        with np.errstate(all="ignore"):
            ref = np.exp(x.astype(np.longdouble))
            r64 = ref.astype(np.float64)
        normal = np.isfinite(r64) & (np.abs(r64) >= 2.0 ** -1022)
        sub = (r64 != 0) & ~normal & np.isfinite(r64)
        for name in names:
            out = np.empty_like(x)
            loops(name)[1](x, out)
            with np.errstate(all="ignore"):
                err = (np.abs(out.astype(np.longdouble) - ref)
                       / np.spacing(np.abs(r64)).astype(np.longdouble)).astype(np.float64)
            bad = int(np.sum((~np.isfinite(r64) | (r64 == 0)) & (out != r64)))
            line = (f"{dom:30s} {name:12s} normal: max {err[normal].max():.4f} ulp, "
                    f">0.5: {np.mean(err[normal] > 0.5):.2e}")
            if sub.any():
                line += f"; subnormal: max {err[sub].max():.4f}"
            print(line + f"; inf/0 mismatches {bad}")
    sp = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 709.782712893384, 709.7827128933841,
                   710.0, 1e308, -1e308, -745.2, 5e-324, -745.13, -746.0] * 3)
    want = loops("old")[1]
    ref = np.empty_like(sp)
    want(sp, ref)
    for name in names:
        out = np.empty_like(sp)
        loops(name)[1](sp, out)
        same = np.array_equal(out, ref, equal_nan=True) and np.array_equal(np.signbit(out),
                                                                          np.signbit(ref))
        print(f"special values {name:12s} {'same as vexp' if same else out[:14]}")


def asm(names):
    x = np.linspace(-1, 1, 64)
    for name in names:
        f = loops(name)[0]
        f(x, x.copy(), 1)
        code = f.inspect_asm(f.signatures[0])
        gathers = sorted(set(re.findall(r"v\w*gather\w*", code)))
        print(f"{name:12s} zmm instructions {sum('zmm' in ln for ln in code.splitlines()):3d}, "
              f"gathers {gathers}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "bench"
    names = sys.argv[2:] or [n for n in VARIANTS if what != "acc" or n != "ceiling"]
    if "old" not in names:
        names = ["old", *names]
    {"bench": bench, "acc": accuracy, "asm": asm}[what](names)
