"""Random-bit primitives: the Threefry-2x32 counter hash and the bits-to-float map.

Owns ``threefry2x32_p`` (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11:
20 rounds of add, rotate, xor on two 32-bit words, keyed by two more) and ``unit_float_p``
(random bits to a float in [0, 1), JAX's mantissa construction). ``functrace.random`` builds
keys, ``split``, ``fold_in`` and every sampler on these two and ordinary ops; here is only
what a kernel needs.

``threefry2x32(k0, k1, x0, x1, out=...)`` is elementwise over uint32 operands (0-d operands
broadcast, like every elementwise op) and is a recipe (``ops.scalar_recipe``): one
branch-free function is the numpy impl (uint32 arrays, wrapping natively), the numba CPU
helper and the CUDA device helper (numba widens ``uint32 + uint32`` to 64 bits, so the
helpers compute each step 64 bits wide and wrap it back). The two output words are returned
as one value, chosen by ``out``: ``"high"`` (the first word), ``"low"`` (the second),
``"xor"`` (their xor: JAX's 32 random bits per counter) or ``"concat"`` (uint64 ``high << 32
| low``: JAX's 64 bits). One elementwise output keeps the op fusible; a key split asks for
``high`` and ``low`` separately (two hashes of two counters: nothing).

Both ops have integer operands, so they have no derivative to take (``zero_grad``: a
gradient never flows into a key); they batch as elementwise ops. Imports core, tracing and
the sibling op modules only.
"""

from __future__ import annotations

import numpy as np

from ..core import AVal, Op, ScalarCode
from ..tracing import bind
from ._base import as_array, same_dtype_shape
from .elementwise import elementwise_op
from .scalar_code import const_expr, dtype_ctor, product_cuda
from .xla_math import RecipeCode, run_recipe

__all__ = ["threefry2x32", "unit_float", "threefry2x32_p", "unit_float_p",
           "threefry2x32_words", "THREEFRY_OUTS"]

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA        # Threefish's key-schedule constant
#: what ``out`` may ask for, and the dtype it gives
THREEFRY_OUTS = {"high": _U32, "low": _U32, "xor": _U32, "concat": np.dtype(np.uint64)}


def threefry2x32_words(m, k0, k1, x0, x1):
    """The Threefry-2x32 hash of the counter words (x0, x1) under the key (k0, k1): 5 groups
    of 4 rounds (``x0 += x1; x1 = rotl(x1, r) ^ x0``), the key schedule injected after each
    group. The recipe behind ``threefry2x32_p`` (JAX's ``_threefry2x32_lowering``)."""
    u = np.uint32
    ks = (k0, k1, k0 ^ k1 ^ m.const(_PARITY, u))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = ((x1 << m.const(r, u)) | (x1 >> m.const(32 - r, u))) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + m.const(i + 1, u)
    return x0, x1


def _recipe(out: str):
    def recipe(m, k0, k1, x0, x1):
        y0, y1 = threefry2x32_words(m, k0, k1, x0, x1)
        if out == "high":
            return y0
        if out == "low":
            return y1
        if out == "xor":
            return y0 ^ y1
        u64 = np.uint64
        return (m.cast(y0, u64) << m.const(32, u64)) | m.cast(y1, u64)
    recipe.__name__ = f"threefry2x32_{out}"
    return recipe


_RECIPES = {out: _recipe(out) for out in THREEFRY_OUTS}


def _threefry_abstract(k0, k1, x0, x1, *, out):
    if out not in THREEFRY_OUTS:
        raise ValueError(f"out={out!r}: one of {sorted(THREEFRY_OUTS)}")
    shape, dtype = same_dtype_shape(k0, k1, x0, x1)
    if dtype != _U32:
        raise TypeError(f"threefry2x32 hashes uint32 words, got {dtype}")
    return AVal(shape, THREEFRY_OUTS[out])


def _threefry_impl(k0, k1, x0, x1, *, out):
    xs = [as_array(v) for v in (k0, k1, x0, x1)]
    return run_recipe(_RECIPES[out], np.float64, *xs).astype(THREEFRY_OUTS[out], copy=False)


def _threefry_pick(params, in_dtypes):
    return _RECIPES[params["out"]], np.float64, None, params["out"]


threefry2x32_p = Op(
    "threefry2x32", _threefry_abstract, _threefry_impl, elementwise=True, fresh=True,
    code={"cpu": ScalarCode(RecipeCode("threefry2x32", "cpu", _threefry_pick), "u", True),
          "cuda": ScalarCode(RecipeCode("threefry2x32", "cuda", _threefry_pick), "u", True)},
    batch_family="elementwise", zero_grad=True, module=__name__)


def threefry2x32(k0, k1, x0, x1, *, out: str = "xor"):
    """The Threefry-2x32 hash of counters ``(x0, x1)`` under key ``(k0, k1)``: uint32
    operands of one shape (0-d operands broadcast); ``out`` picks what is returned (see the
    module docstring). ``threefry2x32(0, 0, 0, 0, out="high")`` is Random123's known-answer
    ``0x6b200159``.

    >>> import numpy as np
    >>> z = np.uint32(0)
    >>> hex(int(threefry2x32(z, z, z, z, out="high"))), hex(int(threefry2x32(z, z, z, z,
    ...                                                                      out="low")))
    ('0x6b200159', '0x99ba4efe')
    """
    return bind(threefry2x32_p, k0, k1, x0, x1, out=out)


# --------------------------------------------------------------------------------------------
# bits -> [0, 1)
# --------------------------------------------------------------------------------------------

#: bits dtype -> (float dtype, shift that keeps the mantissa's worth of high bits)
_UNIT = {_U32: (np.dtype(np.float32), 9), np.dtype(np.uint64): (np.dtype(np.float64), 12)}


def _unit_impl(bits):
    bits = as_array(bits)
    fdt, shift = _UNIT[bits.dtype]
    nmant = np.finfo(fdt).nmant
    return (bits >> bits.dtype.type(shift)).astype(fdt) * fdt.type(2.0 ** -nmant)


def _unit_code(target: str):
    def expr(args, params, in_dts, out_dt):
        udt = np.dtype(in_dts[0])
        fdt, shift = _UNIT[udt]
        m = f"{dtype_ctor(fdt)}({args[0]} >> {const_expr(shift, udt)})"
        scale = const_expr(2.0 ** -np.finfo(fdt).nmant, fdt)
        return product_cuda(m, scale, fdt) if target == "cuda" else f"({m} * {scale})"
    return ScalarCode(expr, "u")


unit_float_p = elementwise_op(
    "unit_float", _unit_impl, cpu=_unit_code("cpu"), cuda=_unit_code("cuda"),
    out_dtype=lambda dt: _UNIT[np.dtype(dt)][0], kinds="u", zero_grad=True, cheap=True)


def unit_float(bits):
    """Random bits to a float in [0, 1): uint32 -> float32 from the top 23 bits, uint64 ->
    float64 from the top 52, exactly ``bitcast(bits >> (width - mantissa) | bits(1.0)) - 1``
    (JAX's ``uniform``).

    >>> import numpy as np
    >>> float(unit_float(np.uint32(0xFFFFFFFF))), float(unit_float(np.uint32(1 << 31)))
    (0.9999998807907104, 0.5)
    """
    return bind(unit_float_p, bits)
