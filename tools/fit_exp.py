"""Fit the polynomial of a table-driven float64 ``exp`` (tools/exp_table_experiment.py).

Run ``python tools/fit_exp.py [N] [DEGREE]`` (needs mpmath; a few seconds); it prints the
coefficients as ``float.hex`` literals (``_EXPT_C2``...) and their absolute error.

The kernel writes ``exp(x) = 2**(k/N) * exp(r)``, ``|r| <= ln2/(2N)``, and approximates
``exp(r) = 1 + r + r**2 * P(r)`` with ``P`` of degree DEGREE-2 (defaults: N = 128, DEGREE = 5).
``P`` minimises the *absolute* error of ``exp(r) - 1 - r - r**2 P(r)`` (the kernel adds it to 1,
so absolute error in units of 2**-53 is what reaches the result). The fit is this repository's
own: a discrete minimax on 1000 Chebyshev points of the interval (slightly widened for the
rounding of ``k``), by Lawson's iteratively reweighted least squares in 50-digit mpmath, then
each coefficient rounded to double in turn with the later ones refitted (so the rounded
polynomial is still near-minimax). Nothing is copied from another library.
"""

from __future__ import annotations

import sys

import mpmath as mp

mp.mp.dps = 50


def lawson(f, basis, xs, w0, iters=40):
    """Coefficients c minimising max |w0(x) * (f(x) - sum c_i basis_i(x))| over xs."""
    m = len(basis)
    rows = [[w0(x) * bf(x) for bf in basis] for x in xs]
    fxs = [w0(x) * f(x) for x in xs]
    wts = [mp.mpf(1)] * len(xs)
    c = None
    for _ in range(iters):
        # weighted least squares: normal equations of sum wts * (w0 * (f - B c))**2
        a = mp.matrix([[mp.fsum(wt * row[i] * row[j] for wt, row in zip(wts, rows, strict=True))
                        for j in range(m)] for i in range(m)])
        b = mp.matrix([mp.fsum(wt * row[i] * fx for wt, row, fx in zip(wts, rows, fxs, strict=True))
                       for i in range(m)])
        c = mp.lu_solve(a, b)
        errs = [abs(fx - mp.fsum(c[i] * row[i] for i in range(m)))
                for row, fx in zip(rows, fxs, strict=True)]
        s = mp.fsum(wt * e for wt, e in zip(wts, errs, strict=True))
        wts = [wt * e / s for wt, e in zip(wts, errs, strict=True)]
    return [c[i] for i in range(m)]


def fit(n=128, degree=5, npts=1000):
    h = mp.log(2) / (2 * n) * (1 + mp.mpf(2) ** -20)
    xs = [h * mp.cos(mp.pi * (i + mp.mpf(1) / 2) / npts) for i in range(npts)]

    gval = {x: (mp.exp(x) - 1 - x) / (x * x) for x in xs}

    def g(r):            # (exp(r) - 1 - r) / r**2, the function P approximates
        return gval[r]

    def w0(r):           # absolute error of exp(r) - 1 - r - r**2 P(r)
        return r * r

    fixed = []           # coefficients already rounded to double
    for i in range(degree - 1):
        rest = [(lambda r, p=p: r ** p) for p in range(i, degree - 1)]

        def f(r, fixed=tuple(fixed)):
            return g(r) - mp.fsum(c * r ** p for p, c in enumerate(fixed))
        c = lawson(f, rest, xs, w0)
        fixed.append(mp.mpf(float(c[0])))
    err = max(abs(w0(x) * (g(x) - mp.fsum(c * x ** p for p, c in enumerate(fixed)))) for x in xs)
    return [float(c) for c in fixed], err


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    degree = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    coeffs, err = fit(n, degree)
    for i, c in enumerate(coeffs):
        print(f'_EXPT_C{i + 2} = _h("{c.hex()}")')
    print(f"# N = {n}, degree {degree}: max abs error {mp.nstr(err, 4)} "
          f"= 2**{mp.nstr(mp.log(err, 2), 5)}")


if __name__ == "__main__":
    main()
