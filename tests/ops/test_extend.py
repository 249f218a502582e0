"""functrace.extend from outside the package: elementwise ops (unary, binary) and a general
op with vjp/jvp/batch rules work eagerly, traced, printed, through JSON, under grad to any
order, jvp, vmap, ft.jit (fused with their neighbours on the CPU, and under the CUDA
simulator), and a scalar function that cannot be inlined leaves its op unfused with the reason.
Also: every op in the registry is fused by each target or the target says why not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import extend_ops as X
import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.core import AVal, registry
from functrace.errors import FunctraceValueError, GraphFormatError
from functrace.tracing import trace_to_graph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "support")    # extend_ops, for the subprocess
x5 = np.linspace(-2.0, 2.0, 5)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_eager_values_and_promotion():
    np.testing.assert_allclose(X.softplus(x5), _softplus(x5), rtol=1e-15)
    assert X.softplus(np.arange(3)).dtype == np.float64          # ints become float
    assert X.softplus(np.ones(2, np.float32)).dtype == np.float32
    np.testing.assert_allclose(X.sqdiff(x5, 1.0), (x5 - 1.0) ** 2)
    np.testing.assert_allclose(X.sqdiff(x5[:, None], x5), (x5[:, None] - x5) ** 2)  # broadcast
    np.testing.assert_allclose(X.rcumsum(np.arange(4.0), axis=0), [6.0, 6.0, 5.0, 3.0])


def test_trace_print_and_json_round_trip():
    f = lambda x, y: [X.rcumsum(X.sqdiff(X.softplus(x), y), axis=0)]  # noqa: E731
    sym = ft.trace(f)(x5, x5)
    text = str(sym)
    assert "ext_softplus(" in text and "ext_sqdiff(" in text and "ext_rcumsum(" in text
    doc = sym.to_json()
    back = ft.Symbol.from_json(doc)
    np.testing.assert_allclose(back(x5, x5 + 1)[0], f(x5, x5 + 1)[0])
    rows = [e for e in json.loads(doc)["graph"]["eqns"]] if "graph" in json.loads(doc) else None
    assert '"module": "extend_ops"' in doc or rows


def test_json_naming_an_unknown_op_names_its_module():
    doc = ft.trace(lambda x: X.softplus(x))(x5).to_json()
    doc = doc.replace('"ext_softplus"', '"ext_never_defined"')
    with pytest.raises(GraphFormatError, match=r"ext_never_defined.*extend_ops.*import"):
        ft.Symbol.from_json(doc)


def test_defining_a_name_twice_is_an_error_naming_it():
    from functrace.extend import define_elementwise, define_op
    with pytest.raises(FunctraceValueError, match="ext_softplus"):
        define_elementwise("ext_softplus", np.exp, scalar=lambda x: x, derivative=None)
    with pytest.raises(FunctraceValueError, match="'sin'"):
        define_op("sin", np.sin, lambda x: (x.shape, x.dtype))


def test_grad_to_any_order():
    g1 = ft.grad(lambda x: X.softplus(x))
    g2 = ft.grad(g1)
    g3 = ft.grad(g2)
    s = _sigmoid(0.3)
    np.testing.assert_allclose(g1(0.3), s, rtol=1e-14)
    np.testing.assert_allclose(g2(0.3), s * (1 - s), rtol=1e-13)
    np.testing.assert_allclose(g3(0.3), s * (1 - s) * (1 - 2 * s), rtol=1e-12)
    gx, gy = ft.grad(lambda x, y: fnp.sum(X.sqdiff(x, y)), argnums=(0, 1))(x5, 0.5)
    np.testing.assert_allclose(gx, 2 * (x5 - 0.5))
    np.testing.assert_allclose(gy, -2 * np.sum(x5 - 0.5))        # summed back to 0-d
    h = ft.hessian(lambda x: fnp.sum(X.rcumsum(x * x, axis=0)))(x5)
    np.testing.assert_allclose(h, np.diag(2 * np.arange(1, 6.0)))
    ft.test_util.check_grads(lambda x: X.rcumsum(X.softplus(x) * x, axis=0), (x5,), order=2)


def test_jvp_and_vmap():
    p, t = ft.jvp(X.softplus, (x5,), (np.ones(5),))
    np.testing.assert_allclose(t, _sigmoid(x5), rtol=1e-14)
    p, t = ft.jvp(lambda x: X.rcumsum(x, axis=0), (x5,), (np.ones(5),))
    np.testing.assert_allclose(t, [5, 4, 3, 2, 1.0])
    m = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(ft.vmap(X.softplus)(m), _softplus(m))
    np.testing.assert_allclose(ft.vmap(lambda r: X.sqdiff(r, 1.0))(m), (m - 1) ** 2)
    np.testing.assert_allclose(ft.vmap(lambda r: X.rcumsum(r, axis=0), in_axes=1)(m),
                               X.rcumsum(m, axis=0).T)


def _cpu_executable(fn, *avals):
    from functrace.backends.cpu import executor as numba_cpu
    g = trace_to_graph(lambda *xs: list(fn(*xs)), list(avals)).graph
    ex = numba_cpu.Executable(g, eager=True)
    ex.compile()
    return ex


def _fused(prog) -> set[str]:
    from functrace.passes.fusion import Group
    return {prog.graph.eqns[i].op.name for s in prog.plan.steps if isinstance(s, Group)
            for i in s.eqns}


def test_jit_cpu_fuses_extension_ops_with_their_neighbours():
    f = lambda x, y: [X.sqdiff(X.softplus(fnp.sin(x)) * 2.0, y)]  # noqa: E731
    ex = _cpu_executable(f, AVal((64,), "float64"), AVal((64,), "float64"))
    x, y = np.linspace(-3, 3, 64), np.linspace(0, 1, 64)
    np.testing.assert_allclose(ex(x, y)[0], (_softplus(np.sin(x)) * 2.0 - y) ** 2, rtol=1e-13)
    prog = ex.lower()
    assert {"sin", "ext_softplus", "mul", "ext_sqdiff"} <= _fused(prog)
    assert len(prog.kernels) == 1                      # one kernel: no fusion barrier
    src = prog.source
    assert "log1p(math.exp(-abs(" in src and "def scalar_ext_sqdiff" in src
    # through ft.jit, and its interpreter tier
    jf = ft.jit(lambda x, y: X.sqdiff(X.softplus(fnp.sin(x)) * 2.0, y))
    np.testing.assert_allclose(jf(x, y), f(x, y)[0], rtol=1e-13)
    jn = ft.jit(lambda x, y: X.sqdiff(X.softplus(fnp.sin(x)) * 2.0, y), backend="numpy")
    np.testing.assert_allclose(jn(x, y), f(x, y)[0], rtol=1e-13)
    jg = ft.jit(ft.grad(lambda x: fnp.sum(X.rcumsum(X.softplus(x), axis=0))))
    np.testing.assert_allclose(jg(x), _sigmoid(x) * np.arange(1, 65), rtol=1e-12)


def test_an_op_with_an_expansion_fuses_its_expansion_under_jit():
    # rownorm: x / sum(x, 1); the impl runs on the interpreter, the expansion (a sum and a
    # divide) in compiled code, where its sum fuses with the exp before it
    from functrace.extend import define_op

    calls = []

    def impl(x):
        calls.append(1)
        return x / x.sum(axis=1, keepdims=True)

    def vjp(cts, ins, outs):
        y, ct = outs[0], cts[0]
        return ((ct - fnp.sum(ct * y, axis=1, keepdims=True)) / fnp.sum(ins[0], axis=1,
                                                                        keepdims=True),)
    rownorm = define_op("ext_rownorm", impl, lambda x: (x.shape, x.dtype), vjp=vjp,
                        expand=lambda x: x / fnp.sum(x, axis=1, keepdims=True))
    x = np.random.default_rng(3).uniform(0.5, 2, (4, 6))
    f = lambda x: fnp.sum(fnp.sin(rownorm(fnp.exp(x))))  # noqa: E731
    want, gwant = f(x), ft.grad(f)(x)
    assert calls
    calls.clear()
    jf = ft.jit(ft.value_and_grad(f), eager=True)
    got, g = jf(x)
    assert not calls                     # compiled code ran the expansion, not the impl
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(g, gwant, rtol=1e-12, atol=1e-15)
    src = jf.lower(x).source
    assert "ext_rownorm" not in src.split("# ---- driver")[1]
    e = np.exp(x)
    np.testing.assert_allclose(got, np.sum(np.sin(e / e.sum(axis=1, keepdims=True))),
                               rtol=1e-14)


def test_kernel_module_holds_the_scalar_source():
    """The module text (hence its content-hashed cache key) includes the scalar function's
    code: another definition of the same op name is another kernel, never a stale one."""
    from functrace.backends.lowering import scalar_fn
    inl = scalar_fn.inline(X.softplus.op, "cpu")
    assert "math.log1p(math.exp(-abs(x))) + max(x, 0.0)" in inl.source   # _SHIFT inlined
    ex = _cpu_executable(lambda x: [X.softplus(fnp.sin(x))], AVal((8,), "float64"))
    key_src = ex.lower().source
    assert inl.source in key_src


def test_a_scalar_that_cannot_be_inlined_runs_unfused_with_the_reason():
    from functrace.backends.cpu import target as cpu_target
    from functrace.backends.cuda import codegen as cuda_codegen
    f = lambda x: [X.bad(fnp.sin(x)) * 2.0]  # noqa: E731
    ex = _cpu_executable(f, AVal((16,), "float64"))
    x = np.linspace(-1, 1, 16)
    np.testing.assert_allclose(ex(x)[0], np.sin(x) * 6.0, rtol=1e-15)
    assert "ext_bad" not in _fused(ex.lower())
    g = trace_to_graph(lambda x: [X.bad(x)], [AVal((4,), "float64")]).graph
    reason = cpu_target.unfused_reason(g.eqns[0])
    assert "_helper" in reason and "inline" in reason
    assert isinstance(cuda_codegen.supports(X.bad.op), str)


def test_a_scalar_numba_cannot_compile_runs_unfused_with_the_reason():
    from functrace.backends.cpu import target as cpu_target
    from functrace.extend import define_elementwise
    op = define_elementwise("ext_uncompilable", lambda x: x + 1.0,
                            scalar=lambda x: float.hex(x) and x + 1.0,
                            derivative=lambda x, y: fnp.ones_like(x))
    g = trace_to_graph(lambda x: [op(x)], [AVal((4,), "float64")]).graph
    assert "numba cannot compile" in cpu_target.unfused_reason(g.eqns[0])
    np.testing.assert_allclose(ft.jit(op)(np.ones(4)), 2.0)


def test_every_op_is_fused_or_the_target_says_why():
    """For every op in the registry, each target fuses it or states why not; an elementwise
    op without code must say why on its declaration (``code[target] = "reason"``), so a new
    elementwise op can never again be silently left unfused."""
    from functrace.backends.cpu import target as cpu_target
    from functrace.backends.cuda import codegen as cuda_codegen
    for op in list(registry.values()):
        for target, mod in (("cpu", cpu_target), ("cuda", cuda_codegen)):
            got = mod.supports(op)
            assert got is True or (isinstance(got, str) and got), (op.name, target)
            if op.elementwise and got is not True:
                declared = op.code.get(target)
                assert isinstance(declared, str) or (
                    op.module and not op.module.startswith("functrace")), (op.name, target, got)
    # the built-in transcendental functions are fused on both targets
    for name in ("exp", "log", "tanh", "sin", "logistic", "add", "select", "max"):
        assert cpu_target.supports(registry[name]) is True
        assert cuda_codegen.supports(registry[name]) is True


_SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    import extend_ops as X
    import functrace.numpy as fnp
    from functrace.backends.cuda.executor import Executable, HostArrays, SIM_CONFIG
    from functrace.core import AVal
    from functrace.passes.fusion import Group
    from functrace.tracing import trace_to_graph

    f = lambda x, y: [X.sqdiff(X.softplus(fnp.sin(x)) * 2.0, y), X.bad(x)]
    g = trace_to_graph(lambda *xs: list(f(*xs)), [AVal((40,), "float64")] * 2).graph
    ex = Executable(g, eager=True, arrays=HostArrays(), config=SIM_CONFIG)
    x, y = np.linspace(-3, 3, 40), np.linspace(0, 1, 40)
    got = ex(x, y)
    want = (np.logaddexp(0, np.sin(x)) * 2.0 - y) ** 2
    np.testing.assert_allclose(got[0], want, rtol=1e-13)
    np.testing.assert_allclose(got[1], x * 3.0)
    prog = ex.lower()
    fused = {prog.graph.eqns[i].op.name for ks in prog.kernels.values() for i in ks.group.eqns}
    assert {"ext_softplus", "ext_sqdiff", "sin", "mul"} <= fused, fused
    assert "ext_bad" not in fused
    assert "@cuda.jit(device=True)" in prog.source and not ex.compile_failures
    print("OK")
""")


def test_cuda_simulator_runs_extension_ops_fused():
    env = {k: v for k, v in os.environ.items()}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _SIM_SCRIPT], capture_output=True, text=True,
                       timeout=300, env=env, cwd=HERE)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


def test_docstring_examples_run():
    import doctest

    import functrace.extend
    assert doctest.testmod(functrace.extend).failed == 0
