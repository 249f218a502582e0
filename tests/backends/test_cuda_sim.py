"""The CUDA backend without a GPU.

* In this process (numba is imported normally by other test files, so numba.cuda must not be
  imported here): code generation, launch configuration, device helpers, packaging, and the
  error raised when no GPU can be used.
* ``tests/support/cuda_sim_cases.py`` in its **own pytest process** with ``NUMBA_ENABLE_CUDASIM=1``
  (it must be set before numba is first imported): every generated kernel template, the
  executor's dispatch over the fusion plan, and ``ft.jit(backend="cuda")`` end to end
  (including the OpCase table), run by numba's CUDA simulator against the reference
  interpreter. About 3 minutes of CPU, in ``SIM_SHARDS`` processes.

Real-GPU checks are in tests/backends/test_gpu.py (marked ``gpu``) and benchmarks/gpu_check.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.backends.cuda import codegen as cuda_codegen
from functrace.backends.cuda import executor as numba_cuda
from functrace.core import AVal, registry
from functrace.tracing import trace_to_graph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.cuda


def _env(**kw):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(kw)
    return env


#: the simulator cases run as this many pytest processes (``FUNCTRACE_TEST_SHARD``), so that
#: xdist can spread the ~3 minutes they take over its workers
SIM_SHARDS = 4


@pytest.mark.parametrize("shard", range(SIM_SHARDS))
def test_simulator_cases_pass_in_their_own_process(tmp_path, shard):
    pytest.importorskip("numba")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
           str(tmp_path / "sim"), os.path.join("tests", "support", "cuda_sim_cases.py")]
    out = subprocess.run(cmd, cwd=ROOT, env=_env(NUMBA_ENABLE_CUDASIM="1",
                                                 FUNCTRACE_TEST_SHARD=f"{shard}/{SIM_SHARDS}"),
                         capture_output=True, text=True, timeout=600)
    tail = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, tail
    assert " passed" in out.stdout and "skipped" not in out.stdout.split("\n")[-2], tail


def test_no_gpu_is_a_clear_error_and_lowering_needs_neither_numba_nor_cupy(tmp_path):
    code = textwrap.dedent("""
        import sys
        import numpy as np, functrace as ft, functrace.numpy as fnp
        f = ft.jit(lambda x: fnp.sum(fnp.tanh(x), axis=1), backend="cuda")
        src = f.lower(np.ones((3, 40), np.float32)).source
        assert "@cuda.jit" in src
        print("numba" in sys.modules, "cupy" in sys.modules)
        try:
            import cupy
            if cupy.is_available():
                print("GPU")
                raise SystemExit
        except ImportError:
            pass
        try:
            f(np.ones((3, 40), np.float32))
        except ft.BackendError as e:
            print("ERROR", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300,
                         env=_env(FUNCTRACE_CACHE_DIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "False False"        # lowering imported neither numba nor cupy
    if lines[1] == "GPU":
        pytest.skip("this machine has a GPU")
    msg = lines[1]
    assert msg.startswith("ERROR backend='cuda' cannot be used")
    assert "functrace[cuda13]" in msg and "functrace[cuda12]" in msg
    assert "cupy" in msg and "driver" in msg and "NUMBA_ENABLE_CUDASIM" in msg


# --------------------------------------------------------------------------------------------
# code generation and launch configuration (pure Python)
# --------------------------------------------------------------------------------------------

def graph_of(fn, *avals):
    return trace_to_graph(lambda *xs: list(fn(*xs)), list(avals)).graph


def test_cuda_kernels_come_from_the_same_fusion_groups_as_the_cpu():
    from functrace.backends.cpu import executor as numba_cpu

    def f(x, w):
        h = fnp.tanh(x @ w)
        return [fnp.sum(h * h, axis=1), fnp.exp(-h) * 0.5]

    g = graph_of(f, AVal((64, 32), "float32"), AVal((32, 256), "float32"))
    cpu = numba_cpu.lower(g)
    gpu = numba_cuda.lower(g)
    groups = lambda p: [tuple(s.eqns) for s in p.plan.steps if hasattr(s, "eqns")]  # noqa: E731
    assert groups(cpu) == groups(gpu) and len(gpu.kernels) == 1
    src = gpu.source
    assert "cuda.shared.array(256, np.float64)" in src      # block reduction, f64 accumulator
    assert "math.tanh(" in src and "np.float32(" in src
    assert "# dot_general  (cupy)" in src


def test_a_group_whose_values_are_all_recomputed_is_dropped():
    # found by the fuzzer: gt(x, x) got a kernel of its own (the CUDA target gives lone cheap
    # ops one), then the later kernel recomputed it; the first kernel wrote nothing and its
    # generated source (an empty loop) did not compile
    def f(x):
        y = fnp.min(fnp.where(x > x, x, x), keepdims=True)
        return [y, ft.grad(lambda x: fnp.sum(fnp.min(fnp.where(x > x, x, x)) * 1.3))(x)]

    g = ft.jit(f).lower(np.array(0.7)).graph
    prog = numba_cuda.lower(g)
    for ks in prog.kernels.values():
        assert ks.group.outputs or ks.group.reduction is not None
        compile(ks.source, "kernel", "exec")           # valid Python
    assert len(prog.kernels) == 1


def test_float32_kernels_never_compute_in_float64_by_accident():
    # op-declared templates have untyped constants (1.0); the CUDA table types every one
    g = graph_of(lambda x: [fnp.exp2(x) + 1.0 / fnp.sqrt(x) + 1 / (1 + fnp.exp(-x))],
                 AVal((100,), "float32"))
    src = numba_cuda.lower(g).source
    body = src.split("def kernel")[1]
    assert not re.search(r"(?<!np\.float32\()\b[12]\.0\b", body), body
    assert "np.float32(1.0)" in body and "math.pow(np.float32(2.0)" in body


def test_reduction_templates_and_finish_kernel_render():
    g = graph_of(lambda x: [fnp.max(fnp.sin(x), axis=1), fnp.logsumexp(x, axis=1)],
                 AVal((4, 100_000), "float64"))
    prog = numba_cuda.lower(g, config=numba_cuda.LaunchConfig(sm_count=80))
    for ks in prog.kernels.values():
        assert ks.launch.strategy == "block" and ks.launch.nseg > 1 and ks.finish_key
        assert "cuda.syncthreads()" in ks.source and "p0[k, s]" in ks.source
        assert "def finish(nk, nseg, p0, p1, r):" in ks.finish_source
    lse = next(ks for ks in prog.kernels.values() if ks.spec.reduction.kind == "logsumexp")
    assert "p1[k, s] = acc" in lse.source and "math.exp(" in lse.finish_source


def test_launch_config_validates_block_size():
    with pytest.raises(ValueError, match="power of two"):
        numba_cuda.LaunchConfig(threads=100)


def test_fusible_uses_only_the_cuda_code():
    # ops whose declarations give the CUDA target no code, and say why
    for name in ("floor", "cbrt", "sinc", "round", "floordiv", "rem", "real"):
        assert isinstance(registry[name].code.get("cuda"), str), name
        assert isinstance(cuda_codegen.supports(registry[name]), str), name
    # integer division and bool arithmetic are left to cupy
    g = graph_of(lambda x, b: [x // 3, b + b, fnp.exp(x * 1.0)],
                 AVal((10,), "int64"), AVal((10,), "bool"))
    names = {g.eqns[i].op.name for ks in numba_cuda.lower(g).kernels.values()
             for i in ks.group.eqns}
    assert "floordiv" not in names and "add" not in names and "exp" in names


# --------------------------------------------------------------------------------------------
# device helpers and packaging
# --------------------------------------------------------------------------------------------

def test_device_helpers_on_the_host():
    x = {"a": np.arange(3.0), "b": [np.ones(2)]}
    assert ft.device_get(x)["a"] is x["a"]
    assert ft.device_put(x, "cpu")["b"][0] is x["b"][0]
    assert ft.device.array_module(x["a"]) is np
    assert not ft.device.is_device_array(x["a"])
    with pytest.raises(ValueError, match="unknown device"):
        ft.device_put(x, "tpu")


def test_pyproject_cuda_extras():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for major in ("12", "13"):
        deps = extras[f"cuda{major}"]
        cupy = [d for d in deps if d.startswith("cupy")]
        assert len(cupy) == 1 and cupy[0].startswith(f"cupy-cuda{major}x"), deps
        assert any(d.startswith(f"numba-cuda[cu{major}]") for d in deps), deps
    for name, deps in extras.items():
        assert sum(d.startswith("cupy") for d in deps) <= 1, name


def test_gpu_check_and_jit_say_no_gpu_when_cupy_finds_none(tmp_path):
    # a stand-in cupy that imports but sees no GPU (what cupy does on a machine without one)
    fake = tmp_path / "fake" / "cupy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(textwrap.dedent("""
        def is_available():
            return False
        class _Runtime:
            @staticmethod
            def driverGetVersion():
                raise RuntimeError("cudaErrorInsufficientDriver")
        class cuda:
            runtime = _Runtime
    """))
    env = _env(PYTHONPATH=str(tmp_path / "fake") + os.pathsep + ROOT,
               FUNCTRACE_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, os.path.join("benchmarks", "gpu_check.py")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no GPU found: cupy.is_available() is False" in out.stdout
    code = ("import numpy as np, functrace as ft, functrace.numpy as fnp\n"
            "try:\n    ft.jit(fnp.sin, backend='cuda')(np.ones(3))\n"
            "except ft.BackendError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert "no GPU found: cupy.is_available() is False" in out.stdout, out.stderr
    assert "functrace[cuda13]" in out.stdout
