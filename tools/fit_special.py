"""Generate ``functrace/backends/cpu/vecmath_special_tables.py``: the coefficient tables of
the special-function kernels in ``vecmath_special.py`` and ``vecmath_incomplete.py``.

Run ``python tools/fit_special.py`` (needs mpmath; a few seconds). Every table is computed here
from mpmath at 40 significant digits, never copied from another library:

* piecewise Chebyshev interpolants (Trefethen, *Approximation Theory and Approximation
  Practice*, ch. 3 and 8: interpolation in Chebyshev points of the first kind is near-minimax;
  the degree is the first at which the tail coefficients fall below 2**-60 of the largest).
  Evaluated by Clenshaw's recurrence in the kernels.
* Taylor coefficients of log-gamma about 2 ((-1)**k (zeta(k) - 1) / k; Abramowitz & Stegun
  6.1.33) and of digamma about its positive root (psi^(k)(x0) / k!).
* Bernoulli-number coefficients of the Stirling and Euler-Maclaurin series (A&S 6.1.40, 6.3.18,
  23.2.3).
* the coefficients d[k][n] of Temme's uniform expansion of the incomplete gamma function
  (DLMF 8.12.8-8.12.12): C_k(eta) = sum_n d[k][n] eta**n, from power-series arithmetic on
  eta(sigma) (sigma = lambda - 1, reverted by Lagrange inversion) and the coefficients g_k of
  Stirling's series for Gamma*(a) (DLMF 5.11.3).
"""

from __future__ import annotations

import os

import mpmath as mp

mp.mp.dps = 40
OUT = os.path.join(os.path.dirname(__file__), "..", "functrace", "backends", "cpu",
                   "vecmath_special_tables.py")


def cheb_fit(f, a, b, max_deg=60, tol=2.0 ** -60):
    """Chebyshev coefficients of f on [a, b] (first-kind points), truncated."""
    a, b = mp.mpf(a), mp.mpf(b)
    for n in (16, 24, 32, 40, 48, 56, 64, 80):
        xs = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
        fs = [f((b - a) / 2 * x + (a + b) / 2) for x in xs]
        c = []
        for j in range(n):
            s = mp.fsum(fs[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n))
            c.append(2 * s / n)
        c[0] /= 2
        big = max(abs(v) for v in c)
        keep = [j for j in range(n) if abs(c[j]) > tol * big]
        deg = max(keep) + 1
        if deg < n - 4:
            return [float(v) for v in c[:deg]]
    raise RuntimeError(f"no convergence on [{a}, {b}]")


def pieces(f, edges):
    """Tables for a piecewise Chebyshev interpolant: (edges, mids, inverse half widths,
    coefficient rows padded with zeros to one length)."""
    rows = [cheb_fit(f, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    n = max(len(r) for r in rows)
    rows = [r + [0.0] * (n - len(r)) for r in rows]
    mids = [(edges[i] + edges[i + 1]) / 2 for i in range(len(edges) - 1)]
    inv = [2 / (edges[i + 1] - edges[i]) for i in range(len(edges) - 1)]
    return edges, mids, inv, rows


def erfcx(x):
    x = mp.mpf(x)
    return mp.exp(x * x) * mp.erfc(x)


def erfcx_asym(u):
    # g(u) = sqrt(pi) * x * erfcx(x) with u = 1/x**2 (-> 1 as x -> inf)
    if u == 0:
        return mp.mpf(1)
    x = 1 / mp.sqrt(u)
    return mp.sqrt(mp.pi) * x * erfcx(x)


def erfinv_ratio(w):
    # erfinv(y) / y as a function of w = y**2
    if w == 0:
        return mp.sqrt(mp.pi) / 2
    y = mp.sqrt(w)
    return mp.erfinv(y) / y


def ndtri_tail(r):
    # ndtri(p) for p = exp(-r**2): solve ncdf(x) = p
    guess = -mp.sqrt(2) * r
    return mp.findroot(lambda x: mp.log(mp.ncdf(x)) + r * r, guess, tol=mp.mpf(10) ** -35)


def i0e(x):
    return mp.exp(-x) * mp.besseli(0, x)


def i1e_over_x(x):
    if x == 0:
        return mp.mpf(1) / 2
    return mp.exp(-x) * mp.besseli(1, x) / x


def i_asym(nu):
    def g(t):   # sqrt(x) * e**-x * I_nu(x), x = 8 / t
        if t == 0:
            return 1 / mp.sqrt(2 * mp.pi)
        x = 8 / t
        return mp.sqrt(x) * mp.exp(-x) * mp.besseli(nu, x)
    return g


# ---- power series (lists of mpf coefficients, lowest first) for Temme's coefficients ----

def ser_mul(p, q, n):
    return [mp.fsum(p[i] * q[k - i] for i in range(k + 1) if i < len(p) and k - i < len(q))
            for k in range(n)]


def ser_inv(p, n):
    """1 / p (p[0] != 0)."""
    r = [1 / p[0]]
    for k in range(1, n):
        r.append(-mp.fsum(p[i] * r[k - i] for i in range(1, min(k, len(p) - 1) + 1)) / p[0])
    return r


def ser_sqrt(p, n):
    """sqrt(p) (p[0] > 0)."""
    r = [mp.sqrt(p[0])]
    for k in range(1, n):
        s = (p[k] if k < len(p) else 0) - mp.fsum(r[i] * r[k - i] for i in range(1, k))
        r.append(s / (2 * r[0]))
    return r


def temme_igam(K=25, N=25):
    """d[k][n] with C_k(eta) = sum_n d[k][n] eta**n (DLMF 8.12.8-8.12.12)."""
    with mp.workdps(60):
        M = N + 2 * K + 2
        # eta(sigma) = sigma h(sigma), h = sqrt(2 (sigma - log(1 + sigma)) / sigma**2)
        h = ser_sqrt([2 * mp.mpf(-1) ** m / (m + 2) for m in range(M)], M)
        # Lagrange inversion: [eta**n] sigma(eta) = [t**(n-1)] (1 / h(t))**n / n
        ih = ser_inv(h, M)
        sig, pw = [mp.mpf(0)], [mp.mpf(1)] + [mp.mpf(0)] * (M - 1)
        for n in range(1, M):
            pw = ser_mul(pw, ih, M)
            sig.append(pw[n - 1] / n)
        # C_0 = 1/sigma - 1/eta = (1/eta) (eta/sigma - 1)
        d0 = ser_inv(sig[1:], M - 1)[1:]
        # g_k: Gamma*(a) = exp(sum_j B_2j / (2j (2j - 1)) a**(1-2j)) ~ sum_k g_k a**-k
        st = [mp.mpf(0)] * (K + 1)
        for j in range(1, K // 2 + 2):
            if 2 * j - 1 <= K:
                st[2 * j - 1] = mp.bernoulli(2 * j) / (2 * j * (2 * j - 1))
        g = [mp.mpf(1)] + [mp.mpf(0)] * K
        for k in range(1, K + 1):
            g[k] = mp.fsum(j * st[j] * g[k - j] for j in range(1, k + 1)) / k
        # C_k = (1/eta) C_{k-1}' + (-1)**k g_k / sigma
        d = [d0[:N + 2 * K]]
        for k in range(1, K):
            d.append([(-1) ** k * g[k] * d[0][n] + (n + 2) * d[k - 1][n + 2]
                      for n in range(N + 2 * (K - k))])
        return [row[:N] for row in d]


def fmt(v) -> str:
    return f'_h("{float(v).hex()}")'


def table(name, data) -> str:
    edges, mids, inv, rows = data
    out = [f"{name}_EDGES = np.array([{', '.join(repr(float(e)) for e in edges)}])",
           vector(f"{name}_MID", mids), vector(f"{name}_INV", inv), f"{name}_C = np.array(["]
    for r in rows:
        out.append("    [" + _lines([fmt(v) for v in r], "     ") + "],")
    out.append("])")
    return "\n".join(out)


def _lines(items, indent) -> str:
    """Items joined by commas, three to a line."""
    chunks = [", ".join(items[i:i + 3]) for i in range(0, len(items), 3)]
    return (",\n" + indent).join(chunks)


def vector(name, vals) -> str:
    return f"{name} = np.array([\n    {_lines([fmt(v) for v in vals], '    ')},\n])"


def main():
    parts = []
    parts.append(table("ERFCX", pieces(erfcx, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.5, 7.5,
                                               10.0])))
    parts.append(table("ERFCX_ASYM", pieces(erfcx_asym, [0.0, 0.01])))
    parts.append(table("ERFINV", pieces(erfinv_ratio, [0.0, 0.25, 0.5, 0.7225])))
    r0 = float(mp.sqrt(-mp.log(mp.mpf("0.075"))))
    parts.append(table("NDTRI_TAIL", pieces(ndtri_tail, [r0, 2.2, 3.0, 4.0, 5.5, 8.0, 12.0,
                                                         18.0, 27.5])))
    parts.append(table("I0E", pieces(i0e, [0.0, 2.0, 4.0, 8.0])))
    parts.append(table("I0E_ASYM", pieces(i_asym(0), [0.0, 0.5, 1.0])))
    parts.append(table("I1E", pieces(i1e_over_x, [0.0, 2.0, 4.0, 8.0])))
    parts.append(table("I1E_ASYM", pieces(i_asym(1), [0.0, 0.5, 1.0])))
    # log-gamma about 2: lgamma(2 + z) = sum_k LGAMMA2[k] z**(k+1)
    lg = [1 - mp.euler] + [(-1) ** k * (mp.zeta(k) - 1) / k for k in range(2, 60)]
    parts.append(vector("LGAMMA2", lg))
    # Stirling: lgamma(x) = (x - 1/2) log x - x + log(2 pi)/2 + sum_k STIRLING[k] / x**(2k+1)
    st = [mp.bernoulli(2 * k) / (2 * k * (2 * k - 1)) for k in range(1, 12)]
    parts.append(vector("STIRLING", st))
    # digamma about its positive root x0: psi(x0 + z) = sum_k DIGAMMA0[k] z**(k+1)
    x0 = mp.findroot(mp.digamma, 1.46)
    dg = [mp.polygamma(k, x0) / mp.factorial(k) for k in range(1, 60)]
    parts.append(f"DIGAMMA_ROOT_HI = {fmt(x0)}\nDIGAMMA_ROOT_LO = {fmt(x0 - mp.mpf(float(x0)))}")
    parts.append(vector("DIGAMMA0", dg))
    # digamma asymptotic: psi(x) = log x - 1/(2x) - sum_k DIGAMMA_ASYM[k] / x**(2k)
    parts.append(vector("DIGAMMA_ASYM", [mp.bernoulli(2 * k) / (2 * k) for k in range(1, 12)]))
    # Euler-Maclaurin for Hurwitz zeta: B_{2j} / (2j)!
    parts.append(vector("ZETA_EM", [mp.bernoulli(2 * j) / mp.factorial(2 * j)
                                    for j in range(1, 16)]))
    # Temme's expansion of the incomplete gamma function (vecmath_incomplete)
    rows = temme_igam()
    parts.append("IGAM_TEMME = np.array([\n" + "\n".join(
        "    [" + _lines([fmt(v) for v in r], "     ") + "]," for r in rows) + "\n])")
    head = ('"""Coefficient tables of ``vecmath_special`` (generated by tools/fit_special.py from\n'
            'mpmath; do not edit by hand)."""\n\nimport numpy as np\n\n_h = float.fromhex\n\n')
    with open(OUT, "w") as f:
        f.write(head + "\n\n".join(parts) + "\n")
    print("wrote", os.path.abspath(OUT))


if __name__ == "__main__":
    main()
