"""functrace.random: JAX-style counter-based pseudo-random numbers, bit-compatible with
``jax.random``.

A *key* is a uint32 array of shape ``(2,)`` (JAX's legacy ``PRNGKey`` representation): the
state is explicit, every draw is a pure function of a key, and fresh keys come from
``split`` and ``fold_in``, never from mutation. So draws work the same eagerly, traced,
under ``ft.jit`` (compiled once: the key is an input, not a frozen value), under ``ft.vmap``
over a batch of keys, and under ``ft.grad`` (a sample is a constant of its key; gradients flow
through what you compute from it: ``mu + sigma * normal(key, shape)``).

Bits come from the Threefry-2x32 hash (``ops.random.threefry2x32_p``, one declared op with a
numba CPU kernel and a CUDA lowering) of the key and a counter, the element's flat index:
JAX's default ``jax_threefry_partitionable=True`` scheme. Floats follow JAX's samplers op for
op; ``uniform`` and ``normal`` (``ops.xla_math``: ``fma`` and ``erf_inv_xla``) equal jax
0.10.2's bit for bit in float32 and float64, as do ``PRNGKey``/``key``, ``split``,
``fold_in`` and ``bits`` (tests/api/test_random.py; docs/random.md says what differs).

Defaults follow numpy's (and JAX's with ``jax_enable_x64=True``): float64, int64, uint64.
Layout: ``_keys`` (keys, bits, uniform, normal: the bit-exact core), ``_samplers`` (the
other distributions) and ``_eager`` (outside transforms, the bit-exact part of each call runs
as a cached ``ft.jit`` function: eager draws cost a kernel, docs/random.md "Eager calls").
A library above ``functrace.numpy`` (like ``functrace.scipy``).
"""

from ._keys import (
    PRNGKey,
    bits,
    fold_in,
    key,
    key_data,
    normal,
    split,
    uniform,
    wrap_key_data,
)
from ._samplers import (
    bernoulli,
    beta,
    categorical,
    cauchy,
    choice,
    dirichlet,
    exponential,
    gamma,
    gumbel,
    laplace,
    loggamma,
    logistic,
    multivariate_normal,
    permutation,
    poisson,
    randint,
    t,
    truncated_normal,
)

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits",
           "uniform", "normal", "truncated_normal", "bernoulli", "categorical", "randint",
           "permutation", "choice", "gamma", "loggamma", "beta", "dirichlet", "exponential",
           "laplace", "logistic", "multivariate_normal", "poisson", "gumbel", "t", "cauchy"]
