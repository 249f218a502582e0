"""functrace.random's bit-exact core: keys, ``split``, ``fold_in``, ``bits``, ``uniform`` and
``normal`` (jax 0.10.2's bits, float32 and float64), and the argument checks every sampler
shares (``key_arg``, ``shape_arg``, ...; public here for ``_samplers``, not exported by the
package).

Outside transforms, the bit-exact units (``split``, ``fold_in``, ``random_bits``/``bits``,
``uniform_draw``, the real ``normal`` draw) run as cached compiled functions (``_eager.call``:
the key and array parameters are their inputs, shapes and dtypes are baked in); inside
transforms, and under ``ft.disable_jit()``, they trace or run op by op as written here.

Imports numpy, ops, tracing, errors, ``functrace.numpy`` and ``_eager``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from .. import numpy as fnp
from .. import ops
from ..errors import FunctraceTypeError, FunctraceValueError
from ..ops.random import threefry2x32, unit_float
from ..ops.xla_math import erf_inv_xla, fma
from ..tracing import Tracer, current_trace
from . import _eager

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits",
           "uniform", "normal", "key_arg", "shape_arg", "float_dtype", "as_dtype",
           "elementwise_operand", "broadcast_full", "check_param_shape", "random_bits",
           "uniform_draw", "normal_real"]

_U32 = np.dtype(np.uint32)
_MASK32 = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------------

def key_arg(name: str, key, batched: bool = False):
    """``key`` as a uint32 array (or tracer) of shape (2,) (``batched``: (..., 2))."""
    if not isinstance(key, Tracer):
        key = np.asarray(key)
    shape, dtype = tuple(key.shape), key.dtype
    ok = dtype == _U32 and len(shape) >= 1 and shape[-1] == 2
    if not ok:
        raise FunctraceTypeError(
            f"random.{name}: a key is a uint32 array of shape (2,) (from random.key(seed), "
            f"split or fold_in); got {dtype}{list(shape)}")
    if len(shape) > 1 and not batched:
        raise FunctraceTypeError(
            f"random.{name} takes a single key, got a batch of keys of shape {shape}; map over "
            "them with ft.vmap (as in JAX)")
    return key


def shape_arg(name: str, shape) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise FunctraceTypeError(f"random.{name}: shape must be a tuple of ints, got "
                                 f"{shape!r}") from None
    if any(d < 0 for d in shape):
        raise FunctraceValueError(f"random.{name}: negative dimension in shape {shape}")
    return shape


def float_dtype(name: str, dtype, complex_ok: bool = False) -> np.dtype:
    dt = np.dtype(dtype)
    kinds = "fc" if complex_ok else "f"
    if dt.kind not in kinds or dt.itemsize < 4:
        what = "a float32/float64" + (" or complex" if complex_ok else "")
        raise FunctraceValueError(f"random.{name}: dtype must be {what} dtype, got {dt}")
    return dt


def as_dtype(x, dt):
    """``x`` (Python number, array or tracer) as an array of dtype ``dt``."""
    return fnp.asarray(x).astype(dt) if not isinstance(x, Tracer) else \
        (x if x.dtype == dt else x.astype(dt))


def elementwise_operand(x, shape):
    """``x`` as an operand of an elementwise op over ``shape``: 0-d values broadcast there."""
    return x if tuple(np.shape(x)) in ((), shape) else fnp.broadcast_to(x, shape)


def broadcast_full(x, shape):
    """``x`` broadcast to ``shape`` (0-d values too: for ops that are not elementwise)."""
    return x if tuple(np.shape(x)) == shape else fnp.broadcast_to(x, shape)


def check_param_shape(name: str, shape, *params):
    """JAX's rule: the parameters broadcast to ``shape`` and broadcasting gives ``shape``."""
    try:
        got = np.broadcast_shapes(shape, *[tuple(np.shape(p)) for p in params])
    except ValueError:
        got = None
    if got != shape:
        raise FunctraceValueError(
            f"random.{name}: parameter shapes {[tuple(np.shape(p)) for p in params]} must "
            f"broadcast to the shape argument {shape}")


# --------------------------------------------------------------------------------------------
# keys
# --------------------------------------------------------------------------------------------

def PRNGKey(seed) -> np.ndarray:
    """A key from an integer seed: ``[seed >> 32, seed & 0xFFFFFFFF]`` as uint32 (a seed is
    taken modulo 2**64, as JAX does with 64-bit seeds).

    Args:
        seed: a Python or numpy integer (or an integer tracer).

    Returns:
        a uint32 array of shape (2,).

    Example:
        >>> import functrace.random as random
        >>> random.PRNGKey(42)
        array([ 0, 42], dtype=uint32)
    """
    if isinstance(seed, Tracer):
        if seed.ndim or seed.dtype.kind not in "iu":
            raise FunctraceTypeError(f"random.key: the seed is an integer scalar, got "
                                     f"{seed.dtype}{list(seed.shape)}")
        s = seed.astype(np.uint64)      # modulo 2**64, negative seeds as int64 (JAX's x64)
        hi = fnp.right_shift(s, np.uint64(32)).astype(_U32)
        return fnp.stack([hi, s.astype(_U32)])
    if isinstance(seed, bool | np.bool_) or np.ndim(seed) or \
            np.asarray(seed).dtype.kind not in "iu":
        raise FunctraceTypeError(f"random.key: the seed is an integer scalar (use ft.vmap for "
                                 f"a batch of seeds), got {seed!r:.60}")
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.array([s >> 32, s & _MASK32], dtype=_U32)


def key(seed) -> np.ndarray:
    """A key from an integer seed: the same uint32 ``(2,)`` array as ``PRNGKey``.

    ``jax.random.key`` returns a typed scalar key array; functrace keeps one representation
    (the raw key data, as ``jax.random.key_data(jax.random.key(seed))``), so a functrace key
    is an ordinary array that jit, vmap and pytrees handle like any other.

    Example:
        >>> import functrace.random as random
        >>> random.key(0)
        array([0, 0], dtype=uint32)
    """
    return PRNGKey(seed)


def key_data(keys):
    """The uint32 data of keys: the keys themselves (a functrace key is its data).

    Example:
        >>> import functrace.random as random
        >>> random.key_data(random.key(1))
        array([0, 1], dtype=uint32)
    """
    return key_arg("key_data", keys, batched=True)


def wrap_key_data(key_bits_array):
    """Keys from uint32 data of shape (..., 2) (checked, returned as they are): for keys
    made elsewhere, such as ``jax.random.key_data(k)``.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> random.wrap_key_data(np.array([0, 7], np.uint32))
        array([0, 7], dtype=uint32)
    """
    return key_arg("wrap_key_data", key_bits_array, batched=True)


def _counters(shape):
    """The (high, low) uint32 words of each element's flat index (JAX's iota_2x32_shape)."""
    n = math.prod(shape)
    if n <= _MASK32:
        if current_trace() is None:
            low = np.arange(n, dtype=_U32).reshape(shape)
        else:
            low = ops.reshape(ops.iota(_U32, (n,), 0), shape)
        return np.uint32(0), low
    idx = fnp.asarray(np.arange(n, dtype=np.uint64).reshape(shape))
    return fnp.right_shift(idx, np.uint64(32)).astype(_U32), idx.astype(_U32)


def _hash(key, x0, x1, out):
    """The Threefry hash of counter words (uint32, 0-d or of one shape) under ``key``."""
    return threefry2x32(key[0], key[1], x0, x1, out=out)


def split(key, num: int | Sequence[int] = 2):
    """New keys from a key, along a new leading axis (``num`` keys, or a shape of keys).

    Args:
        key: a key (uint32, shape (2,)).
        num: how many keys (an int), or the shape of the array of keys (a tuple).

    Returns:
        uint32 keys of shape ``(num, 2)`` (``(*num, 2)`` for a tuple).

    Example:
        >>> import functrace.random as random
        >>> k1, k2 = random.split(random.key(0))
        >>> k1
        array([1797259609, 2579123966], dtype=uint32)
    """
    key = key_arg("split", key)
    shape = shape_arg("split", num)
    return _eager.call(_split, (shape,), (key,), math.prod(shape))


def _split(shape, key):
    hi, lo = _counters(shape)
    return fnp.stack([_hash(key, hi, lo, "high"), _hash(key, hi, lo, "low")], axis=-1)


def fold_in(key, data):
    """A new key that is a deterministic function of ``key`` and 32 bits of ``data`` (an
    integer scalar, taken modulo 2**32): for a stream of keys indexed by a step number.

    Example:
        >>> import functrace.random as random
        >>> random.fold_in(random.key(0), 7)
        array([2716826189,  292468403], dtype=uint32)
    """
    key = key_arg("fold_in", key)
    if np.ndim(data):
        raise FunctraceTypeError(f"random.fold_in takes a scalar, got shape {np.shape(data)} "
                                 "(use ft.vmap for a batch)")
    if isinstance(data, Tracer):
        if data.dtype.kind not in "iu":
            raise FunctraceTypeError(f"random.fold_in: data must be an integer, got "
                                     f"{data.dtype}")
        d = data.astype(_U32)
    else:
        d = np.asarray(np.uint32(int(data) & _MASK32))
    return _eager.call(_fold_in, (), (key, d), 1)


def _fold_in(key, d):
    zero = np.uint32(0)
    return fnp.stack([_hash(key, zero, d, "high"), _hash(key, zero, d, "low")])


def random_bits(key, width: int, shape):
    """``width`` (32 or 64) random bits per element of ``shape``."""
    return _eager.call(_random_bits, (width, shape), (key,), math.prod(shape), scalar=False)


def _random_bits(width, shape, key):
    hi, lo = _counters(shape)
    return _hash(key, hi, lo, "xor" if width == 32 else "concat")


# --------------------------------------------------------------------------------------------
# bits and uniform floats
# --------------------------------------------------------------------------------------------

def bits(key, shape=(), dtype=None):
    """Uniformly random unsigned integers (all bit patterns equally likely).

    Args:
        key: a key.
        shape: the result's shape.
        dtype: uint8, uint16, uint32 or uint64 (default uint64, JAX's default with 64-bit
            types enabled). 8 and 16 bits are the low bits of the 32-bit draw, as in JAX.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> random.bits(random.key(0), (3,), np.uint32)
        array([4070199207, 4202968722, 1427181096], dtype=uint32)
    """
    key = key_arg("bits", key)
    shape = shape_arg("bits", shape)
    dt = np.dtype(np.uint64 if dtype is None else dtype)
    if dt.kind != "u":
        raise FunctraceValueError(f"random.bits: dtype must be an unsigned integer dtype, got "
                                  f"{dt}")
    return _eager.call(_bits, (shape, dt), (key,), math.prod(shape), scalar=False)


def _bits(shape, dt, key):
    if dt.itemsize == 8:
        return _random_bits(64, shape, key)
    b = _random_bits(32, shape, key)
    return b if dt.itemsize == 4 else b.astype(dt)


def uniform_draw(key, shape, dt, minval, maxval):
    """Uniform floats of dtype ``dt`` in [minval, maxval) (the bounds are checked here)."""
    minval, maxval = as_dtype(minval, dt), as_dtype(maxval, dt)
    check_param_shape("uniform", shape, minval, maxval)
    return _eager.call(_uniform, (shape, dt), (key, minval, maxval), math.prod(shape))


def _uniform(shape, dt, key, minval, maxval):
    f = unit_float(_random_bits(8 * dt.itemsize, shape, key))
    lo = elementwise_operand(minval, shape)
    span = elementwise_operand(maxval - minval, shape)
    # XLA contracts `f * (maxval - minval) + minval` into one FMA: so do we
    return fnp.maximum(minval, fma(f, span, lo))


def uniform(key, shape=(), dtype=float, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval).

    ``floats = bits_to_[0, 1)``; ``max(minval, fma(floats, maxval - minval, minval))``,
    exactly as JAX computes it (XLA fuses the multiply and add into one FMA).

    Args:
        key: a key.
        shape: the result's shape.
        dtype: float32 or float64 (default float64).
        minval, maxval: bounds, broadcastable to ``shape``; differentiable.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> random.uniform(random.key(0), (3,), np.float32)
        array([0.947667  , 0.9785799 , 0.33229148], dtype=float32)
    """
    key = key_arg("uniform", key)
    return uniform_draw(key, shape_arg("uniform", shape), float_dtype("uniform", dtype),
                    minval, maxval)


def normal_real(key, shape, dt):
    """Standard normal floats of the real dtype ``dt`` (a checked key and shape)."""
    return _eager.call(_normal_real, (shape, dt), (key,), math.prod(shape))


def _normal_real(shape, dt, key):
    lo = np.nextafter(dt.type(-1), dt.type(0))
    u = _uniform(shape, dt, key, as_dtype(lo, dt), as_dtype(dt.type(1), dt))
    return erf_inv_xla(u) * dt.type(math.sqrt(2))


def normal(key, shape=(), dtype=float):
    """Standard normal samples: ``sqrt(2) * erf_inv(u)`` for ``u`` uniform in (-1, 1), JAX's
    inverse-CDF method, bit for bit (``ops.xla_math.erf_inv_xla``). Complex dtypes give
    independent real and imaginary parts of variance 1/2 each.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: float32, float64 (default), complex64 or complex128.

    Example:
        >>> import numpy as np, functrace as ft, functrace.random as random
        >>> random.normal(random.key(0), (3,), np.float32)
        array([ 1.6226422 ,  2.0252647 , -0.43359444], dtype=float32)
        >>> k = random.key(1)   # a reparameterised sample: d/dmu mean(mu + z) = 1
        >>> round(float(ft.grad(lambda mu: (mu + random.normal(k, (100,))).mean())(0.0)), 12)
        1.0
    """
    key = key_arg("normal", key)
    dt = float_dtype("normal", dtype, complex_ok=True)
    shape = shape_arg("normal", shape)
    if dt.kind == "c":
        real = np.dtype(f"float{dt.itemsize * 4}")
        k_re, k_im = split(key)
        re = normal_real(k_re, shape, real).astype(dt)
        im = normal_real(k_im, shape, real).astype(dt)
        return (re + dt.type(1j) * im) / dt.type(math.sqrt(2))
    return normal_real(key, shape, dt)
