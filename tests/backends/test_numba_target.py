"""numba's CPU features for our kernels (``backends.cpu.numba_target``): on an AVX-512 host the
target machine prefers 512-bit vectors unless the user chose, and the wider code gives the
same bits as LLVM's default. Each case runs in a fresh process: numba makes its target
machine once per process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _host_has_avx512() -> bool:
    from numba.core.codegen import get_host_cpu_features
    return "+avx512f" in get_host_cpu_features().split(",")


def _run(code, tmp_path, **env):
    full = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1",
                FUNCTRACE_CACHE_DIR=str(tmp_path / "kernels"), **env)
    for name in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "FUNCTRACE_WIDE_VECTORS",
                 "FUNCTRACE_EXP"):
        if name not in env:
            full.pop(name, None)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_STATE = """
    import json
    {before}
    import numpy as np, functrace as ft, functrace.numpy as fnp
    ft.jit(lambda x: fnp.exp(x) * 2.0, eager=True)(np.ones(4))
    from functrace.backends.cpu import numba_target
    from numba.core.registry import cpu_target
    features = cpu_target.target_context.codegen().magic_tuple()[2]
    print(json.dumps([numba_target.configure(), features]))
"""


def test_default_prefers_wide_vectors_exactly_on_avx512_hosts(tmp_path):
    state, features = _run(_STATE.format(before=""), tmp_path)
    if _host_has_avx512():
        assert state == "wide"
        assert features.endswith(",-prefer-256-bit")
    else:
        assert state == "no-avx512"
        assert "prefer-256-bit" not in features


@pytest.mark.parametrize("env,before,want", [
    ({"FUNCTRACE_WIDE_VECTORS": "0"}, "", "off"),
    ({"NUMBA_CPU_FEATURES": "USER"}, "", "user"),
    ({}, "import numba\n    numba.njit(lambda x: x)", "late"),
])
def test_the_users_choice_and_an_earlier_numba_are_left_alone(tmp_path, env, before, want):
    if env.get("NUMBA_CPU_FEATURES") == "USER":
        from numba.core.codegen import get_host_cpu_features
        env = {"NUMBA_CPU_FEATURES": get_host_cpu_features()}   # a valid string of one's own
    state, features = _run(_STATE.format(before=before), tmp_path, **env)
    assert state == want
    assert "prefer-256-bit" not in features
    if want == "user":
        assert features == env["NUMBA_CPU_FEATURES"]


_BITS = """
    import json, numba, numpy as np
    import functrace as ft, functrace.numpy as fnp
    from functrace.backends.cpu import numba_target, vecmath as vm
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-30, 30, 4093), rng.normal(size=4093) * 1e-3,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 5e-324]])
    x32 = x.astype(np.float32)
    out = {}
    for name in ("vexp", "vlog", "vsin", "vtanh", "verf", "vexpm1", "vlog1p"):
        fn = getattr(vm, name)
        @numba.njit(**vm.JIT_OPTIONS)
        def loop(a, r, fn=fn):
            for i in range(a.shape[0]):
                r[i] = fn(a[i])
        for a in (x, x32):
            r = np.empty_like(a)
            loop(a, r)
            out[f"{name} {a.dtype}"] = r.tobytes().hex()
        if name == "vexp":
            asm = loop.inspect_asm(loop.signatures[0])
            out["zmm"] = "zmm" in asm
    X = rng.normal(size=(300, 257))
    fns = {"colsum": lambda X: fnp.sum(fnp.exp(-X * X) * X, axis=0),
           "rowsum": lambda X: fnp.sum(fnp.sin(X) * X, axis=1),
           "lse grad": ft.grad(lambda X: fnp.sum(fnp.logsumexp(X, axis=1))),
           "chain grad": ft.grad(lambda X: fnp.sum(fnp.tanh(fnp.sin(X) * X
                                                             + fnp.exp(-X ** 2))))}
    for k, f in fns.items():
        out[k] = np.asarray(ft.jit(f, eager=True, threads=1)(X)).tobytes().hex()
    out["state"] = numba_target.configure()
    print(json.dumps(out))
"""


@pytest.mark.skipif(not _host_has_avx512(),
                    reason="no AVX-512 here: both settings make the same code")
def test_wide_vectors_give_the_same_bits_as_llvms_default(tmp_path):
    wide = _run(_BITS, tmp_path / "wide")
    narrow = _run(_BITS, tmp_path / "narrow", FUNCTRACE_WIDE_VECTORS="0")
    assert (wide.pop("state"), narrow.pop("state")) == ("wide", "off")
    # the setting took effect: the exp loop uses 512-bit registers only when wide
    assert (wide.pop("zmm"), narrow.pop("zmm")) == (True, False)
    assert wide.keys() == narrow.keys()
    for k in wide:
        assert wide[k] == narrow[k], k


_EXP = """
    import json, numba, numpy as np
    import functrace as ft, functrace.numpy as fnp
    from functrace.backends.cpu import numba_target, target, vecmath as vm
    x = np.random.default_rng(3).uniform(-700, 700, 5000)
    got = ft.jit(lambda x: fnp.exp(x) * 1.0, eager=True)(x)
    @numba.njit(**vm.JIT_OPTIONS)
    def loop(a, r):
        for i in range(a.shape[0]):
            r[i] = vm.vexp(a[i])
    own = np.empty_like(x)
    loop(x, own)
    print(json.dumps([numba_target.exp_variant(), vm.EXP_VARIANT, target.vecmath_hash(),
                      got.tobytes().hex(), own.tobytes().hex()]))
"""


def test_the_exp_variant_is_chosen_per_process_and_keys_the_kernels(tmp_path):
    """FUNCTRACE_EXP picks vecmath.vexp; compiled kernels use that one (bit for bit) and are
    cached under a key that names it, so a kernel cached under one is never loaded under
    the other."""
    import numpy as np
    runs = {v: _run(_EXP, tmp_path, FUNCTRACE_EXP=v) for v in ("table", "poly")}
    for v, (chosen, vm_variant, _h, got, own) in runs.items():
        assert chosen == vm_variant == v
        assert got == own
    assert runs["table"][2] != runs["poly"][2]
    a, b = (np.frombuffer(bytes.fromhex(runs[v][3])) for v in ("table", "poly"))
    assert (a != b).any() and (np.abs(a - b) <= np.spacing(np.maximum(a, b))).all()


def test_a_misspelt_exp_choice_warns_and_takes_the_default(tmp_path):
    code = """
        import json, warnings
        warnings.simplefilter("error")
        from functrace.backends.cpu import numba_target
        try:
            numba_target.exp_variant()
        except RuntimeWarning as w:
            print(json.dumps(str(w)))
    """
    msg = _run(code, tmp_path, FUNCTRACE_EXP="tabel")
    assert "FUNCTRACE_EXP='tabel'" in msg
