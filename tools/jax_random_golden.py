"""Generate ``tests/support/random_golden.py``: jax.random's outputs that functrace.random must
reproduce bit for bit.

Run with a Python that has jax (never a functrace dependency; here jax 0.10.2, CPU):

    /work/venv-jax/bin/python tools/jax_random_golden.py

JAX configuration matched: ``jax_enable_x64=True`` (functrace's dtypes are numpy's 64-bit
defaults; float32 results are the same either way) and JAX's default
``jax_threefry_partitionable=True`` and ``jax_default_prng_impl="threefry2x32"``. The float
goldens were made on an x86-64 CPU with FMA3: XLA's CPU code contracts multiply-adds into FMAs
there, which functrace's recipes write explicitly (functrace/ops/xla_math.py).

Each case is ``(function, seed, args, kwargs, dtype, shape, words)``: ``function`` is a
``functrace.random`` name called as ``f(PRNGKey(seed), *args, **kwargs)`` (``PRNGKey`` and
``key``: ``f(seed)``), and ``words`` the result's bits (floats viewed as unsigned integers of
their width; complex as their float pairs). ``DIGESTS`` hold the sha256 of large results.
"""

from __future__ import annotations

import hashlib
import os
import platform
import pprint

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "support", "random_golden.py")
SEEDS = (0, 1, 42, 2**32 + 7, -1, 123456789)
SHAPES = ((), (1,), (7,), (3, 5))
P5 = [0.1, 0.2, 0.3, 0.2, 0.2]


def words(x) -> tuple[str, tuple, list]:
    x = np.asarray(x)
    flat = x.reshape(-1)
    if x.dtype.kind == "c":
        flat = flat.view(np.dtype(f"float{x.dtype.itemsize * 4}"))
    if flat.dtype.kind in "fc":
        flat = flat.view(np.dtype(f"uint{flat.dtype.itemsize * 8}"))
    if flat.dtype.kind == "b":
        flat = flat.astype(np.uint8)
    return x.dtype.name, x.shape, [int(v) for v in flat]


def jax_call(name, seed, args, kwargs):
    if name in ("PRNGKey", "key"):
        return jax.random.PRNGKey(seed) if name == "PRNGKey" else \
            jax.random.key_data(jax.random.key(seed))
    kw = {k: (jnp.dtype(v) if k == "dtype" else np.asarray(v) if isinstance(v, list) else v)
          for k, v in kwargs.items()}
    args = tuple(np.asarray(a) if isinstance(a, list) else a for a in args)
    return getattr(jax.random, name)(jax.random.PRNGKey(seed), *args, **kw)


def cases():
    out = []
    for seed in SEEDS:
        out.append(("PRNGKey", seed, (), {}))
        out.append(("key", seed, (), {}))
        for num in (2, 3, (2, 3)):
            out.append(("split", seed, (num,), {}))
        for d in (0, 1, 7, 2**31, 2**32 - 1):
            out.append(("fold_in", seed, (d,), {}))
    for seed in (0, 42, -1):
        for shape in SHAPES:
            for dt in ("uint8", "uint16", "uint32", "uint64"):
                out.append(("bits", seed, (shape,), {"dtype": dt}))
            for dt in ("float32", "float64"):
                out.append(("uniform", seed, (shape,), {"dtype": dt}))
                out.append(("uniform", seed, (shape,), {"dtype": dt, "minval": -2.5,
                                                        "maxval": 7.25}))
                out.append(("normal", seed, (shape,), {"dtype": dt}))
            out.append(("normal", seed, (shape,), {"dtype": "complex64"}))
    # beyond the bit-exact contract, functions whose algorithm is pure bits and float32
    # arithmetic that functrace reproduces exactly too
    for seed in (0, 5):
        out += [("randint", seed, ((20,), 0, 10), {}),
                ("randint", seed, ((20,), -5, 1000), {"dtype": "int32"}),
                ("randint", seed, ((20,), 0, 256), {"dtype": "uint8"}),
                ("permutation", seed, (20,), {}),
                ("choice", seed, (10, (5,)), {"replace": False}),
                ("choice", seed, (5, (7,)), {"p": P5}),
                ("bernoulli", seed, (0.3, (20,)), {}),
                ("categorical", seed, ([-1.0, 0.5, 2.0],), {"shape": (20,)}),
                ("poisson", seed, (4.0, (20,)), {}),
                ("poisson", seed, (40.0, (20,)), {}),
                ("truncated_normal", seed, (-1.0, 2.0, (20,)), {"dtype": "float32"})]
    return out


def digests():
    out = {}
    for seed in (0, 1):
        k = jax.random.PRNGKey(seed)
        for dt in (jnp.float32, jnp.float64):
            name = np.dtype(dt).name
            out[f"normal_{seed}_{name}_100000"] = jax.random.normal(k, (100000,), dt)
            out[f"uniform_{seed}_{name}_100000_-3_5"] = jax.random.uniform(k, (100000,), dt,
                                                                           -3.0, 5.0)
    for dt in (jnp.float32, jnp.float64):
        x = jnp.asarray(np.concatenate([np.linspace(-1, 1, 20001), [0.5, 1e-30, -1e-30]]), dt)
        out[f"erf_inv_{np.dtype(dt).name}_grid"] = jax.lax.erf_inv(x)
    return {k: hashlib.sha256(np.asarray(v).tobytes()).hexdigest() for k, v in out.items()}


def main():
    rows = []
    for name, seed, args, kwargs in cases():
        dt, shape, ws = words(jax_call(name, seed, args, kwargs))
        rows.append((name, seed, args, kwargs, dt, shape, ws))
    cfg = {k: getattr(jax.config, k) for k in ("jax_enable_x64", "jax_threefry_partitionable",
                                                "jax_default_prng_impl")}
    head = (f'"""Golden values of jax.random (jax {jax.__version__}, {platform.machine()}), '
            "written by tools/jax_random_golden.py\n(run: /work/venv-jax/bin/python "
            "tools/jax_random_golden.py). Do not edit.\n\nJAX config: "
            f'{cfg}.\n"""\n\n')
    body = ("JAX_VERSION = " + repr(jax.__version__) + "\nJAX_CONFIG = " + repr(cfg) +
            "\n\n# (function, seed, args, kwargs, dtype, shape, words)\nCASES = " +
            pprint.pformat(rows, width=100, compact=True) +
            "\n\n# sha256 of the bytes of large results\nDIGESTS = " +
            pprint.pformat(digests(), width=100) + "\n")
    with open(OUT, "w") as f:
        f.write(head + body)
    print(f"wrote {len(rows)} cases to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
