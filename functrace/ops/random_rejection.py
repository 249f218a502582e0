"""Rejection samplers as ops: gamma (Marsaglia and Tsang) and Poisson (Knuth; Hormann's
transformed rejection), JAX's algorithms.

Owns ``random_gamma_p``, ``random_gamma_grad_p`` and ``random_poisson_p``. A rejection sampler
loops until every element is accepted; no generated kernel expresses that, so each is one op
whose numpy impl runs the loops vectorised over the elements still drawing (an op step on every
backend, hence the same numbers everywhere). Their draws come from ``ops.random``'s recipes
(the Threefry hash, JAX's uniform, ``ops.xla_math``'s normal), keyed as JAX keys them: gamma
splits the key into one key per element (``split(key, a.size)[i]`` draws element i), Poisson
splits one key per round for the whole array. Their transcendental functions are numpy's, not
XLA's, so the samples follow JAX's distribution and structure but not its bits.

Both take keys with leading batch axes (``key[..., 2]``, each batch key drawing the matching
slice of ``a``/``lam``), which is their batch rule (``batch_family="leading"``). Gradients:
Poisson counts are integers (no derivative); a gamma sample's derivative in its shape
parameter is JAX's implicit reparameterisation gradient (``random_gamma_grad_p``: the sample
moves with ``a`` at a fixed value of its CDF), first order only (the gradient op itself has no
derivative: a MissingRuleError, never a silent zero). Imports core, tracing and the sibling op
modules.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import AVal, Op
from ..tracing import bind
from ._base import as_array, dtype_of, lit
from .elementwise import div, elementwise_op, eq, exp, mul, select
from .random import threefry2x32_p, unit_float_p
from .scalar_recipe import fma
from .xla_math import erf_inv_xla_p

__all__ = ["random_gamma", "random_poisson", "random_gamma_grad", "random_gamma_p",
           "random_poisson_p", "random_gamma_grad_p", "split_keys", "uniform_scalars",
           "normal_scalars"]

_U32 = np.dtype(np.uint32)


# --------------------------------------------------------------------------------------------
# JAX's scalar draws, vectorised over a batch of keys (numpy; the ops' impls)
# --------------------------------------------------------------------------------------------

def split_keys(keys, n: int):
    """``split(key, n)`` for each key of ``keys`` (N, 2) -> (N, n, 2)."""
    lo = np.arange(n, dtype=_U32)[None, :]
    k0, k1 = keys[:, :1], keys[:, 1:]
    hi = threefry2x32_p.impl(k0, k1, np.uint32(0), lo, out="high")
    low = threefry2x32_p.impl(k0, k1, np.uint32(0), lo, out="low")
    return np.stack([hi, low], axis=-1)


def uniform_scalars(keys, dtype):
    """``uniform(key, (), dtype)`` for each key (N, 2) -> (N,) in [0, 1)."""
    dt = np.dtype(dtype)
    zero = np.zeros(len(keys), _U32)
    out = "xor" if dt.itemsize == 4 else "concat"
    bits = threefry2x32_p.impl(keys[:, 0], keys[:, 1], zero, zero, out=out)
    return unit_float_p.impl(bits)


def normal_scalars(keys, dtype):
    """``normal(key, (), dtype)`` for each key (N, 2) -> (N,), bit for bit as JAX."""
    dt = np.dtype(dtype)
    lo = np.nextafter(dt.type(-1), dt.type(0))
    f = uniform_scalars(keys, dt)
    u = np.maximum(lo, fma(f, np.full_like(f, 2.0), np.full_like(f, lo)))
    return erf_inv_xla_p.impl(u) * dt.type(math.sqrt(2))


_math_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _lgamma(x):
    """log|Gamma(x)| elementwise (inf at the poles, nan for nan)."""
    x = np.asarray(x, np.float64)
    out = np.where(np.isnan(x), np.nan, np.inf)
    ok = np.isfinite(x) & ~((x <= 0) & (x == np.floor(x)))
    out[ok] = _math_lgamma(x[ok]).astype(np.float64)
    return out


def _flat_keys(key, shape):
    """The key batch axes of ``key`` (..., 2) against the sample ``shape``: (keys (B, 2),
    elements per key)."""
    key = np.asarray(key)
    lead = key.shape[:-1]
    if tuple(shape[:len(lead)]) != tuple(lead):
        raise ValueError(f"key batch shape {lead} is not a prefix of the sample shape {shape}")
    return key.reshape(-1, 2), math.prod(shape[len(lead):])


# --------------------------------------------------------------------------------------------
# gamma: Marsaglia and Tsang, "A simple method for generating gamma variables" (2000)
# --------------------------------------------------------------------------------------------

def _gamma_one(keys, alpha, log_space: bool):
    """JAX's ``_gamma_one`` for N (key, alpha) pairs at once."""
    dt = alpha.dtype
    one, third = dt.type(1), dt.type(1.0 / 3.0)
    boost = alpha >= one
    a = np.where(boost, alpha, alpha + one)
    d = a - third
    c = third / np.sqrt(d)
    sub = split_keys(keys, 2)
    keys, subkey = sub[:, 0].copy(), sub[:, 1]
    X, V = np.zeros_like(alpha), np.ones_like(alpha)
    active = ~np.isnan(alpha) & (alpha >= 0)
    for _ in range(10_000):                     # acceptance is >= 95% per round
        if not active.any():
            break
        idx = np.flatnonzero(active)
        ks = split_keys(keys[idx], 3)
        keys[idx], x_key, u_key = ks[:, 0], ks[:, 1], ks[:, 2]
        x, v = np.zeros(len(idx), dt), np.full(len(idx), -one)
        pending = np.ones(len(idx), bool)
        while pending.any():                    # v = (1 + x c)^3 needs 1 + x c > 0
            p = np.flatnonzero(pending)
            kk = split_keys(x_key[p], 2)
            x_key[p] = kk[:, 0]
            x[p] = normal_scalars(kk[:, 1], dt)
            v[p] = one + x[p] * c[idx][p]
            pending[p] = v[p] <= 0
        X[idx], V[idx] = x * x, v * v * v
        U = uniform_scalars(u_key, dt)
        with np.errstate(divide="ignore", invalid="ignore"):
            again = (U >= one - dt.type(0.0331) * X[idx] * X[idx]) & (
                np.log(U) >= X[idx] * dt.type(0.5) + d[idx] * (one - V[idx] + np.log(V[idx])))
        active[idx] = again
    with np.errstate(divide="ignore", invalid="ignore"):
        if log_space:
            log_u = np.log1p(-uniform_scalars(subkey, dt))       # -exponential(subkey)
            log_boost = np.where(boost | (log_u == 0), dt.type(0), log_u * (one / alpha))
            out = np.log(d) + np.log(V) + log_boost
        else:
            u = one - uniform_scalars(subkey, dt)
            out = d * V * np.where(boost, one, u ** (one / alpha))
    return np.where(np.isnan(alpha) | (alpha < 0), dt.type(np.nan), out).astype(dt)


def _gamma_abstract(key, a, *, log_space):
    if key.dtype != _U32 or not key.shape or key.shape[-1] != 2:
        raise TypeError(f"random_gamma: key must be uint32 of shape (..., 2), got {key}")
    if a.dtype.kind != "f":
        raise TypeError(f"random_gamma: a must be float, got {a.dtype}")
    if tuple(a.shape[:key.ndim - 1]) != tuple(key.shape[:-1]):
        raise ValueError(f"random_gamma: key batch shape {key.shape[:-1]} is not a prefix of "
                         f"the shape of a, {a.shape}")
    return AVal(a.shape, a.dtype)


def _gamma_impl(key, a, *, log_space):
    a = np.asarray(as_array(a))
    keys, per = _flat_keys(key, a.shape)
    elem_keys = split_keys(keys, per).reshape(-1, 2)
    return _gamma_one(elem_keys, a.reshape(-1).copy(), log_space).reshape(a.shape)


# ---- the implicit reparameterisation gradient (Figurnov et al., NeurIPS 2018), as JAX's ----
# d sample / d a = -(dF/da) / (dF/dz) at the sample z, F the regularised lower incomplete
# gamma function P(a, z): JAX's random_gamma_grad, a power series for z <= 1 or z <= a and
# a continued fraction for Q = 1 - P above, each differentiated in a alongside its terms.

def _digamma(x):
    """psi(x) for x > 0: the recurrence up to x >= 6, then the asymptotic series."""
    x = np.array(x, np.float64)
    acc = np.zeros_like(x)
    for _ in range(6):
        small = x < 6
        acc = np.where(small, acc - 1 / np.where(small, x, 1), acc)
        x = np.where(small, x + 1, x)
    r = 1 / (x * x)
    series = r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (1 / 240 - r * (1 / 132)))))
    return acc + np.log(x) - 0.5 / x - series


def _series_grad(x, a, eps):
    """-(dP/da)/(dP/dz) * ... from P's power series (JAX's _igamma_series, SAMPLE_DERIVATIVE)."""
    r, c, ans = a.copy(), np.ones_like(a), np.ones_like(a)
    dc_da, dans_da = np.zeros_like(a), np.zeros_like(a)
    on = np.ones(a.shape, bool)
    for _ in range(2000):
        if not on.any():
            break
        r1 = np.where(on, r + 1, r)
        dc1 = dc_da * (x / r1) - (c * x) / (r1 * r1)
        dans1 = dans_da + dc1
        c1 = c * (x / r1)
        ans1 = ans + c1
        r, c, ans = np.where(on, r1, r), np.where(on, c1, c), np.where(on, ans1, ans)
        dc_da, dans_da = np.where(on, dc1, dc_da), np.where(on, dans1, dans_da)
        with np.errstate(all="ignore"):
            on = on & (np.abs(dc1 / dans1) > eps)
    return -(dans_da + ans * (np.log(x) - _digamma(a + 1))) * x / a


def _fraction_grad(x, a, eps):
    """The same from Q's continued fraction (JAX's _igammac_continued_fraction), negated."""
    y = 1 - a
    z = x + y + 1
    pkm2, qkm2, pkm1, qkm1 = np.ones_like(x), x.copy(), x + 1, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (np.zeros_like(x), np.zeros_like(x), np.zeros_like(x), -x)
    dans = (dpkm1 - ans * dqkm1) / qkm1
    on = np.ones(x.shape, bool)
    big = 1 / eps
    with np.errstate(all="ignore"):
        for c in range(1, 2001):
            if not on.any():
                break
            y1, z1 = y + 1, z + 2
            yc = y1 * c
            pk, qk = pkm1 * z1 - pkm2 * yc, qkm1 * z1 - qkm2 * yc
            nz = qk != 0
            r = pk / qk
            ans1 = np.where(nz, r, ans)
            dpk = dpkm1 * z1 - pkm1 - dpkm2 * yc + pkm2 * c
            dqk = dqkm1 * z1 - qkm1 - dqkm2 * yc + qkm2 * c
            dans1 = np.where(nz, (dpk - ans1 * dqk) / qk, dans)
            moved = np.where(nz, np.abs(dans1 - dans), 1)
            resc = np.abs(pk) > big
            scale = np.where(resc, eps, 1)
            new = (pkm1 * scale, qkm1 * scale, pk * scale, qk * scale,
                   dpkm1 * scale, dqkm1 * scale, dpk * scale, dqk * scale)
            old = (pkm2, qkm2, pkm1, qkm1, dpkm2, dqkm2, dpkm1, dqkm1)
            (pkm2, qkm2, pkm1, qkm1, dpkm2, dqkm2, dpkm1, dqkm1) = (
                np.where(on, n, o) for n, o in zip(new, old))
            y, z = np.where(on, y1, y), np.where(on, z1, z)
            ans, dans = np.where(on, ans1, ans), np.where(on, dans1, dans)
            on = on & (moved > eps)
        return (dans + ans * (np.log(x) - _digamma(a))) * x


def _gamma_grad_impl(a, x):
    a, x = np.broadcast_arrays(np.asarray(as_array(a)), np.asarray(as_array(x)))
    dt = a.dtype
    a64, x64 = a.astype(np.float64).ravel(), x.astype(np.float64).ravel()
    eps = float(np.finfo(dt).eps)
    out = np.zeros_like(a64)
    bad = np.isnan(a64) | np.isnan(x64) | (x64 < 0) | (a64 <= 0)
    with np.errstate(all="ignore"):
        ax = a64 * np.log(x64) - x64 - _lgamma(a64)
    live = ~bad & (x64 != 0) & ~(ax < -np.log(np.finfo(dt).max))
    frac = live & (x64 > 1) & (x64 > a64)
    ser = live & ~frac
    if ser.any():
        out[ser] = _series_grad(x64[ser], a64[ser], eps)
    if frac.any():
        out[frac] = _fraction_grad(x64[frac], a64[frac], eps)
    out[bad] = np.nan
    return out.reshape(a.shape).astype(dt)


random_gamma_grad_p = elementwise_op(
    "random_gamma_grad", _gamma_grad_impl, 2, kinds="f", differentiable=False,
    cpu="a convergence loop per element: runs its numpy impl",
    cuda="a convergence loop per element: runs its numpy impl")


def random_gamma_grad(a, x):
    """d x / d a for x a Gamma(a, 1) sample at fixed CDF value (JAX's random_gamma_grad):
    ``-(dP(a, x)/da) / (dP(a, x)/dx)``, P the regularised lower incomplete gamma function.

    >>> import numpy as np
    >>> round(float(random_gamma_grad(np.float64(1.0), np.float64(np.log(2.0)))), 6)
    0.968045
    """
    return bind(random_gamma_grad_p, a, x)


def _dsample_da(a, sample, log_space):
    if not log_space:
        return random_gamma_grad(a, sample)
    z = exp(sample)                 # d log z / da = (dz/da) / z; z may underflow to 0
    z = select(eq(z, lit(0, z)), lit(np.finfo(dtype_of(z)).tiny, z), z)
    return div(random_gamma_grad(a, z), z)


def _gamma_jvp(primals, tangents, outs, *, log_space):
    ta = tangents[1]
    if ta is None:
        return (None,)
    return (mul(ta, _dsample_da(primals[1], outs[0], log_space)),)


def _gamma_vjp(cts, ins, outs, *, log_space):
    ct = cts[0]
    if ct is None:
        return (None, None)
    return (None, mul(ct, _dsample_da(ins[1], outs[0], log_space)))


random_gamma_p = Op("random_gamma", _gamma_abstract, _gamma_impl, fresh=True,
                    batch_family="leading", vjp=_gamma_vjp, jvp=_gamma_jvp,
                    module=__name__)


def random_gamma(key, a, *, log_space: bool = False):
    """Gamma(a, 1) samples (``log_space``: their logs, accurate for tiny ``a``) for each
    element of ``a``; element i draws with ``split(key, a.size)[i]`` (per batch key).

    >>> import numpy as np
    >>> random_gamma(np.array([0, 1], np.uint32), np.ones(3)).shape
    (3,)
    """
    return bind(random_gamma_p, key, a, log_space=bool(log_space))


# --------------------------------------------------------------------------------------------
# Poisson: Knuth for lam < 10, Hormann's transformed rejection (PTRS) above
# --------------------------------------------------------------------------------------------


def _split1(key):
    k = split_keys(key[None, :], 2)[0]
    return k[0], k[1]


def _uniform_array(key, n, dt):
    """``uniform(key, (n,), dt)`` (JAX's counters: the flat index)."""
    lo = np.arange(n, dtype=_U32)
    out = "xor" if np.dtype(dt).itemsize == 4 else "concat"
    return unit_float_p.impl(threefry2x32_p.impl(key[0], key[1], np.uint32(0), lo, out=out))


def _poisson_knuth(key, lam, max_iters):
    k = np.zeros(lam.shape, np.int64)
    log_prod = np.zeros(lam.shape, np.float32)
    i = 0
    while (log_prod > -lam).any() and i < max_iters:
        key, sub = _split1(key)
        k = np.where(log_prod > -lam, k + 1, k)
        with np.errstate(divide="ignore"):
            log_prod = log_prod + np.log(_uniform_array(sub, lam.size, np.float32))
        i += 1
    return k - 1


def _poisson_rejection(key, lam, max_iters):
    dt = lam.dtype
    with np.errstate(all="ignore"):
        log_lam = np.log(lam)
        b = dt.type(0.931) + dt.type(2.53) * np.sqrt(lam)
        a = dt.type(-0.059) + dt.type(0.02483) * b
        inv_alpha = dt.type(1.1239) + dt.type(1.1328) / (b - dt.type(3.4))
        v_r = dt.type(0.9277) - dt.type(3.6224) / (b - dt.type(2))
    k_out = np.full(lam.shape, -1.0, dt)
    accepted = np.zeros(lam.shape, bool)
    i = 0
    while (~accepted).any() and i < max_iters:
        key, k0, k1 = split_keys(key[None, :], 3)[0]
        u = _uniform_array(k0, lam.size, dt).astype(dt) - dt.type(0.5)
        v = _uniform_array(k1, lam.size, dt).astype(dt)
        us = dt.type(0.5) - np.abs(u)
        with np.errstate(all="ignore"):
            k = np.floor((dt.type(2) * a / us + b) * u + lam + dt.type(0.43))
            s = np.log(v * inv_alpha / (a / (us * us) + b))
            t = -lam + k * log_lam - _lgamma(k + 1).astype(dt)
        accept = ((us >= 0.07) & (v <= v_r)) | (~((k < 0) | ((us < 0.013) & (v > us)))
                                                & (s <= t))
        k_out = np.where(accept, k, k_out)          # as JAX: a later acceptance wins
        accepted |= accept
        i += 1
    return k_out


def _poisson_one(key, lam, dtype):
    lam = lam.reshape(-1)
    with np.errstate(invalid="ignore"):
        use_knuth = np.isnan(lam) | (lam < 10)
    big = 1_000_000
    knuth = _poisson_knuth(key, np.where(use_knuth, lam, 0).astype(lam.dtype), big)
    rej = _poisson_rejection(key, np.where(use_knuth, 1e5, lam).astype(lam.dtype), big)
    out = np.where(use_knuth, knuth, rej)
    return np.where(lam == 0, 0, out).astype(dtype)


def _poisson_abstract(key, lam, *, dtype):
    if key.dtype != _U32 or not key.shape or key.shape[-1] != 2:
        raise TypeError(f"random_poisson: key must be uint32 of shape (..., 2), got {key}")
    if lam.dtype.kind != "f":
        raise TypeError(f"random_poisson: lam must be float, got {lam.dtype}")
    if np.dtype(dtype).kind not in "iu":
        raise TypeError(f"random_poisson: dtype must be an integer dtype, got {dtype}")
    return AVal(lam.shape, dtype)


def _poisson_impl(key, lam, *, dtype):
    lam = np.asarray(as_array(lam))
    keys, per = _flat_keys(key, lam.shape)
    parts = lam.reshape(len(keys), per)
    out = [_poisson_one(k, p, dtype) for k, p in zip(keys, parts)]
    return np.stack(out).reshape(lam.shape) if out else np.zeros(lam.shape, dtype)


random_poisson_p = Op("random_poisson", _poisson_abstract, _poisson_impl, fresh=True,
                      batch_family="leading", zero_grad=True, module=__name__)


def random_poisson(key, lam, *, dtype=np.int64):
    """Poisson(lam) counts, one per element of ``lam`` (per batch key: the matching slice).

    >>> import numpy as np
    >>> random_poisson(np.array([0, 1], np.uint32), np.full(4, 3.0)).dtype
    dtype('int64')
    """
    return bind(random_poisson_p, key, lam, dtype=np.dtype(dtype))
