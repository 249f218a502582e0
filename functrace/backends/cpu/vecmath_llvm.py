"""The LLVM-level pieces of ``vecmath``: intrinsics numba has no spelling for (``llvm.fma``,
bit casts between floats and integers, float32 exponent tricks) and libm calls that a
vectorised loop makes only on the lanes that need them (``slow_libm``, with masked vector
variants). Imports the standard library, numpy, numba and llvmlite only (and
``numba_target``, which sets numba up before the first ``@njit``); nothing from functrace
imports it except ``vecmath``."""

import llvmlite.ir as llir
from numba import types
from numba.extending import intrinsic

from .numba_target import configure as _configure_numba

_configure_numba()   # numba's CPU features for our kernels, before the first @njit here

__all__ = [
    "fma",
    "f2i",
    "i2f",
    "as_result",
    "slow_libm",
    "pow2_f32",
    "scale_f32",
    "log_m_f32",
    "log_k_f32",
    "copysign_f32",
]


# --------------------------------------------------------------------------
# intrinsics
# --------------------------------------------------------------------------

@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (``llvm.fma``; one ``vfmadd`` per vector). Used where a
    function here *chooses* a fused multiply-add (polynomial steps, reduction error terms):
    it is part of that function's definition, identical on every machine, and never leaks
    into the caller's arithmetic, which no fast-math flag lets LLVM contract. (On an x86 CPU
    without FMA3 -- before 2013 -- LLVM lowers it to a libm call: correct but slow.)"""
    if not (a == b == c and a in (types.float64, types.float32)):
        return None

    def codegen(context, builder, sig, args):
        ty = context.get_value_type(sig.return_type)
        return builder.call(builder.module.declare_intrinsic("llvm.fma", [ty, ty, ty]), args)
    return a(a, b, c), codegen


@intrinsic
def f2i(typingctx, x):
    """Bit pattern of a float64 (float32) as int64 (int32)."""
    if x == types.float64:
        rt = types.int64
    elif x == types.float32:
        rt = types.int32
    else:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(rt))
    return rt(x), codegen


@intrinsic
def i2f(typingctx, i):
    """float64 (float32) with the bit pattern of an int64 (int32)."""
    if isinstance(i, types.Integer) and i.bitwidth == 64:
        rt = types.float64
    elif isinstance(i, types.Integer) and i.bitwidth == 32:
        rt = types.float32
    else:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(rt))
    return rt(i), codegen


@intrinsic
def as_result(typingctx, r, x):
    """Cast float64 ``r`` to float32 if ``x`` is float32, else float64."""
    rt = types.float32 if x == types.float32 else types.float64

    def codegen(context, builder, sig, args):
        return context.cast(builder, args[0], sig.args[0], rt)
    return rt(r, x), codegen


_VFS = (2, 4, 8, 16)


def _masked_variant(module, name, scalar_fn, vf):
    """Define ``<vf x double> name(<vf x double>, <vf x i1>)`` that calls
    ``scalar_fn`` only on the active lanes (weak_odr: dedups across modules,
    and is not dropped before the final vectorisation pass)."""
    dbl = llir.DoubleType()
    vt = llir.VectorType(dbl, vf)
    mt = llir.VectorType(llir.IntType(1), vf)
    fn = llir.Function(module, llir.FunctionType(vt, [vt, mt]), name=name)
    fn.linkage = "weak_odr"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    x, m = fn.args
    cur = fn.append_basic_block("entry")
    b = llir.IRBuilder(cur)
    res = x
    for j in range(vf):
        idx = llir.Constant(llir.IntType(32), j)
        then = fn.append_basic_block("lane%d" % j)
        nxt = fn.append_basic_block("next%d" % j)
        b.cbranch(b.extract_element(m, idx), then, nxt)
        b.position_at_end(then)
        val = b.call(scalar_fn, [b.extract_element(x, idx)])
        res2 = b.insert_element(res, val, idx)
        b.branch(nxt)
        b.position_at_end(nxt)
        phi = b.phi(vt)
        phi.add_incoming(res, cur)
        phi.add_incoming(res2, then)
        res, cur = phi, nxt
    b.ret(res)


def slow_libm(cname, vector=True):
    """Intrinsic calling libm ``cname(double)`` so that, inside a branch of a
    vectorised loop, it is executed only for the lanes taking that branch.

    ``vector=False``: a call with no vector variant at all, which LLVM's loop vectoriser
    cannot vectorise: a loop calling it stays scalar (and is cheap to compile). For loops that
    run only in the rare case (``vecmath.vsin_scalar``)."""
    wname = "__functrace_vm_%s_%s" % (cname, "slow" if vector else "scalar")

    @intrinsic
    def slow(typingctx, x):
        if x != types.float64:
            return None

        def codegen(context, builder, sig, args):
            mod = builder.module
            wrapper = mod.globals.get(wname)
            if wrapper is None:
                dbl = llir.DoubleType()
                fnty = llir.FunctionType(dbl, [dbl])
                libm = mod.globals.get(cname)
                if libm is None:
                    libm = llir.Function(mod, fnty, name=cname)
                wrapper = llir.Function(mod, fnty, name=wname)
                wrapper.linkage = "weak_odr"
                for a in ("nounwind", "readnone", "noinline"):
                    wrapper.attributes.add(a)
                bb = llir.IRBuilder(wrapper.append_basic_block("entry"))
                bb.ret(bb.call(libm, wrapper.args))
                if not vector:
                    return builder.call(wrapper, args)
                variants = []
                for vf in _VFS:
                    vname = "%s_m%d" % (wname, vf)
                    _masked_variant(mod, vname, libm, vf)
                    variants.append("_ZGV_LLVM_M%dv_%s(%s)" % (vf, wname, vname))
                # llvmlite only validates well-known attribute names; this is
                # a string attribute, rendered verbatim.
                set.add(wrapper.attributes,
                        '"vector-function-abi-variant"="%s"' % ",".join(variants))
            return builder.call(wrapper, args)
        return types.float64(types.float64), codegen
    return slow


@intrinsic
def pow2_f32(typingctx, s):
    """2.0**k as float32 from ``s = 0x1.8p23 + k`` (the float32 shifter; -126 <= k <= 127),
    in 32-bit integer operations: ``s``'s low mantissa bits are ``k``, and shifting them into
    the exponent field drops the shifter's bits. (numba would widen int32 arithmetic to
    int64, halving the vector width.)"""
    if s != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32 = llir.IntType(32)
        b = builder.shl(builder.bitcast(args[0], i32), llir.Constant(i32, 23))
        b = builder.add(b, llir.Constant(i32, 127 << 23))
        return builder.bitcast(b, llir.FloatType())
    return types.float32(s), codegen


@intrinsic
def scale_f32(typingctx, p, s):
    """p * 2.0**k as float32 from ``s = 0x1.8p23 + k`` (-254 <= k <= 254), as two factors
    2**(k>>1) * 2**(k - (k>>1)), each a normal float32: overflow happens exactly where the
    product overflows, and gradual underflow rounds once (the second product)."""
    if p != types.float32 or s != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32, f32 = llir.IntType(32), llir.FloatType()
        k = builder.sub(builder.bitcast(args[1], i32), llir.Constant(i32, 0x4B400000))
        k1 = builder.ashr(k, llir.Constant(i32, 1))
        k2 = builder.sub(k, k1)
        bias = llir.Constant(i32, 127)
        sh = llir.Constant(i32, 23)
        f1 = builder.bitcast(builder.shl(builder.add(k1, bias), sh), f32)
        f2 = builder.bitcast(builder.shl(builder.add(k2, bias), sh), f32)
        return builder.fmul(builder.fmul(args[0], f1), f2)
    return types.float32(p, s), codegen


def _log_parts_ir(builder, x):
    """i32 parts of a positive normal float32 x = 2**k * m, sqrt(1/2) <= m < sqrt(2)."""
    i32 = llir.IntType(32)
    ix = builder.sub(builder.bitcast(x, i32), llir.Constant(i32, 0x3F3504F3))
    k = builder.ashr(ix, llir.Constant(i32, 23))
    mbits = builder.add(builder.and_(ix, llir.Constant(i32, 0x007FFFFF)),
                        llir.Constant(i32, 0x3F3504F3))
    return k, mbits


@intrinsic
def log_m_f32(typingctx, x):
    """m of a positive normal float32 x = 2**k * m, sqrt(1/2) <= m < sqrt(2)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(_log_parts_ir(builder, args[0])[1], llir.FloatType())
    return types.float32(x), codegen


@intrinsic
def log_k_f32(typingctx, x):
    """k (as a float32) of a positive normal float32 x = 2**k * m."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.sitofp(_log_parts_ir(builder, args[0])[0], llir.FloatType())
    return types.float32(x), codegen


@intrinsic
def copysign_f32(typingctx, r, x):
    """|r| with the sign of x, float32, in 32-bit integer operations."""
    if r != types.float32 or x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32 = llir.IntType(32)
        a = builder.and_(builder.bitcast(args[0], i32), llir.Constant(i32, 0x7FFFFFFF))
        sgn = builder.and_(builder.bitcast(args[1], i32), llir.Constant(i32, -0x80000000))
        return builder.bitcast(builder.or_(a, sgn), llir.FloatType())
    return types.float32(r, x), codegen
