"""Testing helpers: ``check_grads`` compares transforms against central differences.

Owns numerical gradient checking for users and for functrace's own tests. Imports the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import tree_util

__all__ = ["check_grads", "numerical_jvp"]

_DEFAULT = {np.dtype(np.float64): (1e-6, 1e-5, 1e-5), np.dtype(np.float32): (3e-3, 3e-2, 3e-2),
            np.dtype(np.complex128): (1e-6, 1e-5, 1e-5),
            np.dtype(np.complex64): (3e-3, 3e-2, 3e-2),
            np.dtype(np.float16): (1e-1, 2e-1, 2e-1)}


def _tol(dtypes, atol, rtol):
    worst = max((_DEFAULT.get(np.dtype(d), _DEFAULT[np.dtype(np.float64)]) for d in dtypes),
                key=lambda t: t[0])
    return worst[0], worst[1] if atol is None else atol, worst[2] if rtol is None else rtol


def _leaves(x):
    return [np.asarray(v) for v in tree_util.tree_leaves(x)]


def _inner(a, b):
    return sum(np.sum(np.real(np.conj(x) * y)) for x, y in zip(_leaves(a), _leaves(b)))


def _random_like(x, rng):
    def one(v):
        v = np.asarray(v)
        r = rng.standard_normal(v.shape)
        if v.dtype.kind == "c":
            r = r + 1j * rng.standard_normal(v.shape)
        return r.astype(v.dtype)
    return tree_util.tree_map(one, x)


def _axpy(a, x, y):
    return tree_util.tree_map(lambda u, v: (np.asarray(v) + a * np.asarray(u)).astype(
        np.asarray(v).dtype), x, y)


def numerical_jvp(f: Callable, args: Sequence, tangents: Sequence, eps: float):
    """Central difference ``(f(x + eps t) - f(x - eps t)) / (2 eps)``, leafwise in float64."""
    plus = f(*_axpy(eps, tuple(tangents), tuple(args)))
    minus = f(*_axpy(-eps, tuple(tangents), tuple(args)))
    return tree_util.tree_map(
        lambda p, m: (np.asarray(p, dtype=np.complex128 if np.iscomplexobj(p) else np.float64)
                      - np.asarray(m)) / (2 * eps), plus, minus)


def check_grads(f: Callable, args: Sequence, order: int = 2,
                modes: Sequence[str] = ("rev",), atol: float | None = None,
                rtol: float | None = None, eps: float | None = None, seed: int = 0) -> None:
    """Check ``f``'s derivatives up to ``order`` against central differences.

    For reverse mode, a random input direction ``v`` and output cotangent ``u`` are drawn and
    ``<u, J v>`` from ``ft.vjp`` is compared with ``<u, (f(x+eps v)-f(x-eps v))/2eps>``; for
    higher orders the same check recurses into the function ``x -> vjp(f, x)(u)``. Forward
    mode ("fwd") checks ``ft.jvp`` the same way. Raises AssertionError with the numbers.

    Example:
        >>> import numpy as np, functrace.numpy as fnp
        >>> from functrace.test_util import check_grads
        >>> check_grads(lambda x: fnp.sin(x) * x, (np.array([0.3, 1.2]),), order=2)
    """
    from . import api
    rng = np.random.default_rng(seed)
    args = tuple(args)
    dtypes = [np.asarray(v).dtype for v in tree_util.tree_leaves(args)]
    d_eps, d_atol, d_rtol = _tol(dtypes, atol, rtol)
    eps = d_eps if eps is None else eps
    atol_, rtol_ = d_atol, d_rtol
    if order < 1:
        return
    for mode in modes:
        if mode == "rev":
            out, pullback = api.vjp(f, *args)
            u = _random_like(out, rng)
            v = _random_like(args, rng)
            ct = pullback(u)
            analytic = _inner(ct, v)
            numeric = _inner(u, numerical_jvp(f, args, v, eps))
            _compare(analytic, numeric, atol_, rtol_, f"rev-mode order-1 check of {f!r}")
            if order > 1:
                def g(*xs, _u=u):
                    return api.vjp(f, *xs)[1](_u)
                check_grads(g, args, order - 1, ("rev",), atol, rtol, eps, seed + 1)
        elif mode == "fwd":
            from .forward import jvp
            v = _random_like(args, rng)
            out, tout = jvp(f, args, v)
            numeric = numerical_jvp(f, args, v, eps)
            u = _random_like(out, rng)
            _compare(_inner(u, tout), _inner(u, numeric), atol_, rtol_,
                     f"fwd-mode order-1 check of {f!r}")
            if order > 1:
                def h(*xs, _v=v):
                    return jvp(f, xs, _v)[1]
                check_grads(h, args, order - 1, ("fwd",), atol, rtol, eps, seed + 1)
        else:
            raise ValueError(f"unknown mode {mode!r} (use 'fwd' and/or 'rev')")


def _compare(a, b, atol, rtol, what):
    a, b = float(np.real(a)), float(np.real(b))
    if not (abs(a - b) <= atol + rtol * max(abs(a), abs(b))):
        raise AssertionError(f"{what}: analytic {a!r} vs numerical {b!r} "
                             f"(|diff| {abs(a - b):.3g} > atol {atol} + rtol {rtol} * scale)")
