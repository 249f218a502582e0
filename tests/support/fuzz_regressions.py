"""Every program the differential fuzzer ever failed on (``tests/backends/test_fuzz.py`` runs each
entry on the CPU on every run, ``tests/support/cuda_sim_cases.py`` under the CUDA simulator;
docs/testing.md).

An entry is a batch of programs (usually one; several when a failure needs its neighbours)
with a note on what went wrong and what fixed it; every entry must pass on every backend
(the fast-math mismatches once marked as expected failures pass since the kernels lost their
fast-math flags). To add an entry, paste
the shrunk literal a fuzz failure prints (``P(...)`` with ``S(...)`` steps); ``values=``
gives hand-written inputs.
"""

from __future__ import annotations

import dataclasses

from fuzz_programs import P, S


@dataclasses.dataclass(frozen=True)
class Regression:
    programs: tuple
    note: str
    libm: bool = False          # transcendental math as libm calls (as most fuzz batches)


_VIEW_NOTE = ("passes.memory: a numpy view (reshape/transpose/slice/rev) of a pooled value "
              "was read after the value's last direct use, when its slot already held "
              "another value. Views now alias their base for liveness (view_bases).")

REGRESSIONS: dict[str, Regression] = {
    # jit(grad) differed from grad at 4 of 6 entries: a pooled buffer reused under a live view
    "planner_reshape_transpose_grad": Regression((
        P('float64', ((6,),), (
            S('sin', (0,), ()),
            S('reshape', (1,), ((2, 3),)),
            S('transpose', (2,), ((1, 0),)),
            S('sin', (3,), ()),
            S('reduce', (4,), ('sum', None, False)),
        ), outputs=(5,), seed=1, special=0.0),
    ), _VIEW_NOTE),
    # values all 0: the minimum's kernel wrote into the product's slot it read through views
    "planner_matmul_reshape_slice": Regression((
        P('float32', ((3, 1, 4), (3, 1, 1), (2, 3, 1, 4)), (
            S('matmul_const', (2,), ((-0.26292064785957336, -1.7720826864242554,
                                      -0.09583289921283722, -0.5487870573997498), 0)),
            S('reshape', (3,), ((3, 1, 1, 2),)),
            S('slice', (4,), (((None, None, None), (None, None, -1), -1,
                               (None, None, None)),)),
            S('minimum', (4, 5), ()),
        ), outputs=(6,), seed=1524653017, special=0.0),
    ), _VIEW_NOTE, libm=True),
    "planner_flip_moveaxis_matmul_grad": Regression((
        P('float32', ((6, 1), (6, 3)), (
            S('ipow', (1,), (-1,)),
            S('flip', (2,), (1,)),
            S('moveaxis', (3,), (0, 1)),
            S('matmul', (4, 0), ()),
        ), outputs=(5,), seed=1989386411, special=0.0),
    ), _VIEW_NOTE, libm=True),
    # found under the CUDA simulator (cupy views alias their base the same way)
    "planner_cuda_slice_minimum": Regression((
        P('float32', ((4,), (4,), (1,), (1, 4)), (
            S('reduce', (1,), ('sum', (0,), True)),
            S('where', (0, 2, 0, 1), ()),
            S('slice', (5,), ((-2,),)),
            S('minimum', (6, 3), ()),
            S('reduce', (4,), ('sum', -1, False)),
        ), outputs=(1, 7, 8), seed=225535137, special=0.0),
    ), _VIEW_NOTE, libm=True),
    "fusion_dead_group_cuda": Regression((
        P('float64', ((),), (
            S('where', (0, 0, 0, 0), ()),
            S('reduce', (1,), ('min', None, True)),
        ), outputs=(2,), seed=1075472406, special=0.0),
    ), "passes.fusion: the CUDA target gave gt(x, x) a kernel, a later kernel recomputed it, "
       "and the first kernel wrote nothing: its empty loop did not compile (numba fell back "
       "to cupy). Groups that write nothing are dropped now."),
    # seed 20261201, batch 1: a kernel of the libm variant did not compile (numba 0.68 gives
    # np.log2 and np.exp2 one LLVM declaration per function, so float32 and float64 uses
    # clash); it ran with numpy, which the fuzzer counts as a failure
    "libm_log2_exp2_of_two_dtypes_in_one_kernel": Regression((
        P('float32', ((3,),), (S('log2', (0,), ()), S('exp2', (1,), ())), outputs=(2,), seed=1,
          special=0.0),
        P('float64', ((3,),), (S('log2', (0,), ()), S('exp2', (1,), ())), outputs=(2,), seed=2,
          special=0.0),
    ), "tests/support/fuzz_check.kernel_variant: the libm variant computes log2 and exp2 in "
       "float64 (the executor's vecmath code never calls numba's np.log2/np.exp2).",
        libm=True),
    "sum_of_one_negative_zero": Regression((
        P('float64', ((6,), (1,), (6,)), (
            S('matmul', (2, 0), ()),
            S('divide', (1, 3), ()),
        ), outputs=(4,), seed=731534995, special=0.25),
    ), "codegen: a sum over extent-1 axes was the value itself, numpy adds it to +0.0 (the "
       "gradient's 1-element sum of -0.0 came out -0.0). Fixed in build_spec; on the CPU "
       "the nsz flag folded the + 0.0 until the kernels lost their fast-math flags.", libm=True),
    "sum_over_no_axes": Regression((
        P('float64', ((), ()), (
            S('reduce', (1,), ('sum', None, True)),
        ), outputs=(2,), seed=1424417240, special=0.5),
    ), "functrace.numpy: sum of a 0-d value returned the value (numpy: 0.0 + x, so +0.0 for "
       "-0.0; arctan2 of it gave -pi instead of 0). And passes.simplify folded x + 0.0."),
    "clip_keeps_x_at_a_bound": Regression((
        P('float64', ((3, 4),), (
            S('clip', (0,), (0.0, 0.5)),
        ), outputs=(1,), seed=1112214147, special=0.5),
    ), "ops.clip: the impl gave the bound where x equals it (clip(-0.0, 0.0, 1.0) was +0.0); "
       "numpy.clip keeps x."),
    "heaviside_of_nan": Regression((
        P('float32', ((4,), (4,)), (
            S('heaviside', (0, 1), ()),
            S('arcsin', (0,), ()),
            S('heaviside', (3, 1), ()),
        ), outputs=(2, 4), seed=741317218, special=0.0,
          values=((float("nan"), 0.0, -1.0, 2.0), (0.5, float("nan"), 0.5, 0.5))),
    ), "functrace.numpy: heaviside(nan, h0) gave h0 (numpy: nan); found as "
       "heaviside(arcsin(x) @ y, h0) with arguments out of arcsin's domain"),
    # false alarms of the fuzzer's tolerance model (numpy leaves these open)
    "tolerance_float32_product_overflow_in_batch": Regression((
        P('float64', ((1,), (4, 6), (4, 6)), (
            S('copysign_c', (2,), (0.001, 1)),
            S('where', (2, 0, 2, 3), ()),
            S('gather', (3,), ((2, 2, 3, 2), 0)),
            S('reduce', (5,), ('prod', -2, False)),
            S('power', (0, 6), ()),
            S('slice', (7,), (((None, None, None),),)),
            S('slice', (6,), (((-6, 1, 1),),)),
            S('negative', (0,), ()),
            S('reshape', (8,), ((1, 1, 1, 6),)),
            S('moveaxis', (9,), (0, 0)),
            S('reshape', (11,), ((2, 1, 1, 3),)),
            S('swapaxes', (12,), (0, 0)),
            S('rint', (12,), ()),
            S('cumsum', (15,), (0,)),
        ), outputs=(7, 11, 16), seed=1425390207, special=0.1),
        P('float32', ((4, 6), (1, 6), (6,)), (
            S('hypot', (2, 1), ()),
            S('where_const', (1, 1, 3), (0.0,)),
            S('reduce', (2,), ('prod', 0, True)),
            S('square', (3,), ()),
            S('reduce', (6,), ('max', -1, True)),
            S('squeeze', (5,), (0,)),
            S('reduce', (8,), ('sum', None, False)),
            S('subtract', (7, 8), ()),
            S('reduce', (8,), ('mean', None, True)),
            S('maximum_c', (9,), (2.0, 0)),
            S('transpose', (10,), ((1, 0),)),
            S('multiply_c', (13,), (1.5, 1)),
        ), outputs=(8, 13, 14), seed=129948090, special=0.25),
    ), 'fuzz model: a float32 product overflows in numpy (float32) but not in a fused kernel (float64), and inf - inf downstream hid it: order- or precision-dependent results now take nan, inf, 0 and -inf in the perturbed runs (the two programs fuse together)', libm=True),
    "tolerance_zero_product_sign": Regression((
        P('float64', ((3,), (1, 4), (1, 4)), (
            S('reduce', (1,), ('prod', -1, True)),
            S('cos', (2,), ()),
            S('matmul', (3, 1), ()),
            S('copysign', (3, 4), ()),
            S('slice', (4,), (((None, None, 2), (None, None, -1)),)),
            S('subtract_c', (6,), (2.0, 0)),
            S('add', (4, 8), ()),
            S('sign', (7,), ()),
            S('arcsinh', (10,), ()),
            S('expand_broadcast', (11,), (2, (1, 4, 2))),
            S('matmul_self_t', (5,), (1,)),
            S('reduce', (13,), ('mean', -1, True)),
            S('concat', (14, 13), (1,)),
        ), outputs=(15,), seed=1300887925, special=0.5),
    ), "fuzz model: np.matmul gives +0.0 for -1.0 * 0.0 where np.dot (and dot_general) give -0.0; vmap is compared with the unbatched program's tolerances", libm=True),
    "tolerance_copysign_of_nan": Regression((
        P('float64', ((5, 2), (5, 2), ()), (
            S('log', (2,), ()),
            S('ipow', (3,), (-1,)),
            S('copysign_c', (4,), (0.5, 1)),
        ), outputs=(5,), seed=765041120, special=0.5),
    ), "fuzz model: the sign of NaN is unspecified (numpy's reciprocal and power differ), copysign reads it", libm=True),
    "tolerance_power_half": Regression((
        P('float64', ((), (4, 6)), (
            S('negative', (1,), ()),
            S('power', (2, 0), ()),
        ), outputs=(3,), seed=1843764319, special=0.25),
    ), 'fuzz model: numpy computes power(x, 0.5) as sqrt for a scalar exponent (-inf -> nan) and as pow for an array one (-inf -> inf)', libm=True),
    "tolerance_max_of_signed_zeros": Regression((
        P('float64', ((4, 3, 2),), (
            S('maximum_c', (0,), ((0.07135926143244697, -1.8299057967957677), 1)),
            S('expm1', (0,), ()),
            S('ipow', (1,), (0,)),
            S('where_const', (1, 1, 0), (0.5,)),
            S('gather', (4,), ((-2,), 2)),
            S('power', (3, 2), ()),
            S('remainder', (0, 5), ()),
            S('gather', (6,), ((2, 0, 0, 2), 1)),
            S('flip', (8,), (2,)),
            S('floor', (6,), ()),
            S('reduce', (8,), ('sum', 1, True)),
            S('broadcast_to', (5,), ((1, 4, 3, 1),)),
            S('fmod', (12, 12), ()),
            S('hypot', (11, 9), ()),
            S('reduce', (13,), ('min', None, True)),
        ), outputs=(1, 7, 15), seed=1415815977, special=0.5),
    ), 'fuzz model: min over a +0.0/-0.0 tie depends on the order of the comparisons. '
       "Compiled, its gradient also differs with arcp (remainder's floor(x / y) near an "
       "integer)", libm=True),
    "tolerance_chaotic_tan": Regression((
        P('float32', ((), (6, 4)), (
            S('reduce', (0,), ('sum', None, False)),
            S('clip', (0,), (-1.0, 0.0)),
            S('einsum', (1, 1), ('ij,kj->ik',)),
            S('power', (2, 4), ()),
            S('fmod', (5, 0), ()),
            S('floor', (2,), ()),
            S('reduce', (7,), ('min', None, False)),
            S('tan', (4,), ()),
            S('sinh', (9,), ()),
            S('reduce', (4,), ('min', -2, True)),
            S('reduce', (9,), ('mean', 0, False)),
            S('slice', (12,), (((-6, -1, 2),),)),
            S('clip', (2,), (0.0, 2.0)),
            S('transpose', (12,), ((0,),)),
            S('reduce', (15,), ('prod', (0,), True)),
            S('reduce', (15,), ('mean', (0,), False)),
            S('clip', (10,), (0.0, 1.0)),
            S('square', (17,), ()),
            S('where_const', (10, 10, 4), (0.5,)),
        ), outputs=(6, 20), seed=198014611, special=0.25),
    ), 'fuzz model: tan(sinh) of a huge float32 einsum: ulp-sized changes move it anywhere; such elements are not compared', libm=True),
    "tolerance_blas_inf_times_zero": Regression((
        P('float32', ((4, 6), (), (4, 6)), (
            S('pad', (0,), (((0, 0), (0, 1)), 1.0)),
            S('matmul_self_t', (2,), (1,)),
            S('gather', (2,), ((-1,), 0)),
            S('fabs', (4,), ()),
            S('einsum', (6, 4), ('ij,jk->ik',)),
            S('multiply', (7, 6), ()),
            S('ravel', (8,), ()),
            S('clip', (8,), (0.0, 1.0)),
            S('gather', (9,), ((16, 22, 34, 31), 0)),
            S('add', (0, 0), ()),
            S('reduce', (8,), ('max', None, False)),
            S('ipow', (10,), (3,)),
            S('reduce', (1,), ('prod', None, True)),
            S('arcsinh', (13,), ()),
            S('copysign_c', (14,), (((1.774599552154541,),), 1)),
        ), outputs=(9, 17), seed=1569913322, special=0.1),
    ), "fuzz model: BLAS may skip a zero factor, so a product with inf is NaN in np.einsum and not in the interpreter's matmul; copysign then reads the sign of that NaN", libm=True),
    "tolerance_copysign_of_zero_product": Regression((
        P('float64', ((), (5, 3), ()), (
            S('pad', (1,), (((1, 2), (0, 2)), 0.0)),
            S('reduce', (3,), ('sum', (0,), True)),
            S('matmul_self_t', (4,), (1,)),
            S('gather', (5,), ((1,), 1)),
            S('copysign_c', (6,), (7.0, 1)),
        ), outputs=(7,), seed=68746709, special=0.0),
    ), 'fuzz model: copysign of a zero product (np.matmul +0.0, dot_general -0.0); a subnormal bound term had made the perturbed sign random', libm=True),
    # fastmath: until the flags go (branch ieee)
    "fastmath_arcp_x_over_x": Regression((
        P('float64', ((6, 4), (6,), (4, 1)), (
            S('broadcast_to', (2,), ((1, 4, 1),)),
            S('divide', (3, 3), ()),
        ), outputs=(4,), seed=1221477642, special=0.0),
    ), "x / x is x * (1 / x) = 0.9999999999999999 with arcp", libm=True),
    "fastmath_contract_overflow": Regression((
        P('float64', ((2,), (2,)), (
            S('multiply_c', (0,), (2.0, 0)),
            S('add', (2, 1), ()),
        ), outputs=(3,), seed=0, special=0.0,
          values=((1e308, 1e308), (-float("inf"), -1e308))),
    ), "a * 2.0 + b as one FMA: [-inf, 1e308] where numpy gives [nan, inf]"),
    # control flow (loops in the random programs): vmap of a loop whose trip ignores a
    # batched carry
    "vmap_loop_carry_unbatched_by_trip": Regression((
        P('float64', ((3,),), (
            S('fori', (0,), (((S('broadcast_to', (0,), ((3,),)),), (2,)), 0, 2)),
        ), outputs=(1,), seed=1, special=0.0),
        P('float64', ((2, 3), (3,)), (      # seed 5: the carry batched, the rows not
            S('scan', (1, 0), (((S('tanh', (1,), ()),), (2, 0)), False, 2)),
        ), outputs=(2,), seed=5, special=0.0),
    ), "control_rules._loop_batch: a batched carry whose new value does not depend on it "
       "(fori_loop(0, 2, lambda i, c: i + zeros, x), a scan body returning tanh(row)) came "
       "back unbatched: ShapeError 'carry f64[B,3] comes back as f64[3]'. Batched carries "
       "stay batched now.", libm=True),
    # not a fix: the reference the fuzzer's unrolled programs must match (fuzz_programs._tie)
    "control_flow_dense_reverse_pass": Regression((
        P('float64', ((2,), ()), (
            S('exp', (0,), ()),
            S('cond', (1, 1, 2), ((((), (0,)),
                                   ((S('reduce', (1,), ('sum', None, False)),), (2,))),
                                  (0.0,))),
        ), outputs=(3,), seed=0, special=0.0, values=((float("inf"), 2.0), -0.5)),
    ), "a construct's reverse pass gives every float operand a cotangent, zeros where it "
       "does not matter (here exp(x0), read only by the branch not taken), so d/dx0 is "
       "0 * exp(inf) = NaN where Python's if gives 0; the unrolled reference ties each "
       "trip's and branch's inputs to its outputs with a zero derivative to match",
       libm=True),
    # crash: IndexError in passes.simplify on a loop equation with no results
    "map_gradient_reaches_no_input": Regression((
        P('float64', ((3, 4),), (
            S('map', (0, 0), (((S('arctan', (1,), ()), S('sign', (2,), ())), (3,)),)),
        ), outputs=(1,), seed=1299392811, special=0.5),
    ), "control_rules._loop_vjp: ft.map of a body whose result reaches no input through "
       "differentiable ops (sign(arctan(x0)), the row unused) bound a backward loop with no "
       "results, and the optimizer's simplify crashed on it. The rule binds none now.",
       libm=True),
    # not a fix: the convention the unrolled model of while loops must match
    "while_zero_trips_closed_over_cotangent": Regression((
        P('float64', ((), ()), (
            S('sqrt', (1,), ()),
            S('while', (0, 2), (((S('exp', (1,), ()),), (2,)), 3, 'sum_lt', -1.0, 0)),
        ), outputs=(3,), seed=0, special=0.0, values=(1.0, 0.0)),
    ), "a while loop that runs no trip still gives the values its body closes over a zero "
       "cotangent (sqrt(x1) here, at 0: 0 * inf = NaN for d/dx1, where Python's loop gives "
       "0), so the unrolled model ties them too (fuzz_programs._while); "
       "docs/control_flow.md",
       libm=True),
    # found by review, not by a seed: sin of a softmax (with vecmath's trig, libm=False)
    "softmax_read_by_a_trig_function": Regression((
        P('float64', ((3, 5),), (
            S('softmax', (0,), (1,)),
            S('sin', (1,), ()),
            S('multiply', (2, 0), ()),
        ), outputs=(3,), seed=5, special=0.0),
    ), "render._trig_check counted sin(sm) before the softmax's last pass had computed sm "
       "(an undefined name: the kernel failed to compile and ran on numpy). Arguments that "
       "read the softmax are not checked now."),
}
