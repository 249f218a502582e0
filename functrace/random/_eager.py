"""Eager draws through cached compiled graphs: what makes ``random.normal(key, (10**6,))``
outside any transform cost a kernel, not ~30 numpy operations per emulated FMA.

Owns ``call(body, static, arrays, size)``: run ``body(*static, *arrays)``, where ``static``
are hashable Python values (shapes, dtypes) and ``arrays`` the key and array parameters.

* Inside a trace (``ft.grad``, ``ft.vmap``, ``ft.jit``), with a tracer among ``arrays``, under
  ``ft.disable_jit()`` / ``ft.config.disable_jit``, with ``ft.config.debug_nans`` or
  ``ft.config.eager_at`` on: ``body`` runs as it is (its ops join the user's graph, or run
  one by one on numpy: the behaviour before this module existed).
* Otherwise ``body`` runs as an ``ft.jit`` function (CPU backend) of ``arrays`` with
  ``static`` baked in, one per (body, static values), kept in a bounded cache
  ("random.eager" in ``functrace.caches``; ``ft.clear_caches()`` empties it). A later call
  with the same static values and array types costs two dictionary look-ups and the run.

What is compiled: only the bit-exact part of a sampler (the Threefry hash, the float
construction, the FMAs, ``erf_inv_xla``, integer arithmetic, comparisons, clips): compiled
kernels give those numpy's bits exactly. Transcendental tails (``log``, ``log1p``, ``tan``,
``exp``, softmax, factorisations) stay numpy's, eagerly, because the CPU kernels compute them
with their own polynomials, a few ulp from numpy's: compiling whole samplers changed the last
bits of exponential, laplace, logistic, gumbel, cauchy, beta, dirichlet and
multivariate_normal draws.

When it compiles (the executor's tiers, ``ft.jit``'s ``eager=False``): a graph runs on the
reference interpreter until it is hot, then its kernels compile (seconds when numba has never
seen them, milliseconds from the disk cache, plus numba's import once per process). Draws of
at least ``LARGE`` elements use ``ft.jit``'s default tiers (compiled at the first call when
the disk cache has the kernels, else at the second). Smaller draws run their first call op by op
(tracing costs more than a small draw that is never repeated), are traced at the second and
compiled at ``SMALL_TIERS`` calls of the traced graph (hot after 16, or after 4 when the
kernels are in the disk cache), so a script that draws a few small arrays never imports
numba for them.

Imports numpy, caches, config, jit and tracing (a library module, layer of ``random``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from .. import caches
from ..config import DISABLE_JIT, config
from ..jit import Jitted
from ..tracing import Tracer, current_trace

__all__ = ["call", "tiers_for", "compiled_functions", "LARGE", "SMALL_TIERS"]

LARGE = 2 ** 14
SMALL_TIERS = (True, 16, 4)  # tiers_for a draw of fewer than LARGE elements

# (body, static values, tiers) -> Jitted
# (body, static values, tiers) -> Jitted, or None after a small draw's first call
_jitted = caches.LRU("random.eager", scale=1)
_UNSEEN = object()


def tiers_for(size: int) -> tuple[bool, int | None, int | None]:
    """How a draw of ``size`` elements runs: (whether its first call runs op by op, untraced;
    then the executor's ``hot_after`` and ``cached_after``, None for their defaults)."""
    return (False, None, None) if size >= LARGE else SMALL_TIERS


def _direct() -> bool:
    return (current_trace() is not None or DISABLE_JIT.get() or config.debug_nans
            or config.eager_at)


def call(body: Callable, static: tuple[Hashable, ...], arrays: Sequence, size: int,
         scalar: bool = True):
    """``body(*static, *arrays)``: compiled and cached outside transforms (see the module
    docstring), traced or run op by op inside them. ``size``: the elements drawn (it picks
    the tiers). ``scalar``: a compiled 0-d result is returned as a numpy scalar, as numpy's
    ufuncs (which end most bodies) return it op by op; False keeps a 0-d array (``bits``).

    Example:
        >>> import numpy as np, functrace.numpy as fnp
        >>> def scaled(n, x): return x * fnp.float64(n)
        >>> call(scaled, (3,), (np.arange(2.0),), 2)
        array([0., 3.])
    """
    if _direct() or any(isinstance(a, Tracer) for a in arrays):
        return body(*static, *arrays)
    tiers = tiers_for(size)
    key = (body, static, tiers)
    f = _jitted.get(key, _UNSEEN)
    if f is _UNSEEN and tiers[0]:
        # a small draw's first call runs op by op, as before: tracing it (~1-3 ms) costs
        # more than the draw when it is never repeated
        _jitted[key] = None
        return body(*static, *arrays)
    if f is None or f is _UNSEEN:
        _, hot, cached = tiers
        # no guarded variants: a body never branches on values (max_variants=0 makes one
        # that did a ConcretizationError, not a silent second path)
        f = Jitted(functools.partial(body, *static), "cpu", (), (), False, False,
                   max_variants=0, hot_after=hot, cached_after=cached)
        _jitted[key] = f
    out = f(*[a if type(a) is np.ndarray else np.asarray(a) for a in arrays])
    return out[()] if scalar and type(out) is np.ndarray and not out.ndim else out


def compiled_functions() -> list[tuple[str, tuple, Jitted]]:
    """The cached compiled functions: (body name, static values, the ``ft.jit`` function),
    least recently used first (for tests and benchmarks: ``jitted.variants(*arrays)`` gives
    each signature's graph, and ``.compile()`` compiles it now)."""
    return [(k[0].__name__, k[1], f) for k, f in _jitted.items() if f is not None]
