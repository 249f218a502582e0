"""Static instruction counts of the generated CUDA kernels, without a GPU.

Lowers the gpu_check.py workloads for ``backend="cuda"`` (no GPU needed), compiles each
kernel to PTX with numba (libNVVM) and to an sm_90 (H100/H200) cubin with ``ptxas``, and
prints per kernel: the SASS instruction count of the whole kernel and of its innermost loop
loop (the outermost backward branch: an elementwise kernel's grid-stride loop), registers per
thread, and the 64-bit integer divisions/remainders left in the PTX (each a subroutine of
tens of instructions on the GPU). A proxy for compute cost, not a timing: speed is
measured by benchmarks/gpu_check.py on a GPU.

Needs the CUDA toolkit's ``ptxas`` and ``cuobjdump`` on PATH (``pip download
nvidia-cuda-cuobjdump`` has the latter) and numba with CUDA support.

    python benchmarks/cuda_sass.py [--show NAME]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np


def workloads():
    import functrace as ft
    import functrace.numpy as fnp
    rng = np.random.default_rng(1)

    def chain(x):
        return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)

    def mlp(w1, b1, w2, x, labels):
        h = fnp.tanh(x @ w1 + b1)
        logits = h @ w2
        return fnp.mean(fnp.logsumexp(logits, axis=1)
                        - fnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0])

    def steps(x):
        for _ in range(10):
            x = fnp.exp(x - fnp.max(x))
        return x

    mlp_args = [rng.standard_normal((784, 2048)).astype(np.float32), np.zeros(2048, np.float32),
                rng.standard_normal((2048, 10)).astype(np.float32),
                rng.standard_normal((4096, 784)).astype(np.float32),
                rng.integers(0, 10, 4096).astype(np.int64)]
    return {
        "chain": (ft.grad(chain), [ft.ShapeDtype((10**8,), np.float32)]),
        "mlp": (ft.value_and_grad(mlp, argnums=(0, 1, 2)), mlp_args),
        "launch": (steps, [np.ones(1024, np.float32)]),
    }


def kernel_signature(ks):
    """numba argument types of a kernel step, as the executor passes them."""
    from numba import typeof, types
    spec = ks.spec
    args: list = [types.int64] * spec.ndim
    red = spec.reduction
    if red is not None:
        args.append(types.int64)
    for op in spec.operands:
        args.append(typeof(np.zeros((1,) * max(len(op.axes), 1), op.dtype)))
    for _, dt in spec.outputs:
        args.append(typeof(np.zeros((1,) * max(spec.ndim, 1), dt)))
    if red is not None:
        p = typeof(np.zeros((1, 1), ks.acc))
        args += [typeof(np.zeros((1,), red.dtype)), p, p]
    return tuple(args)


def finish_signature(ks):
    """numba argument types of a reduction's finish kernel: nk, nseg, p0, p1, r."""
    from numba import typeof, types
    p = typeof(np.zeros((1, 1), ks.acc))
    return (types.int64, types.int64, p, p, typeof(np.zeros((1,), ks.spec.reduction.dtype)))


def op_kernel_signature(e, ok):
    """numba argument types of a gather / scatter-add kernel."""
    from numba import typeof, types

    def arr(av):
        return typeof(np.zeros((1,) * max(len(av.shape), 1), av.dtype))
    ins = [a.aval for a in e.inputs]
    if ok.kind == "gather":
        arrays = [arr(ins[0]), *[arr(a) for a in ins[1:]], arr(e.outputs[0].aval)]
    else:
        arrays = [arr(ins[0]), *[arr(a) for a in ins[2:]], arr(ins[1])]
    if ok.kind == "scatter_set":
        arrays.append(typeof(np.zeros((1,) * max(len(ins[0].shape), 1), np.int64)))
    return (types.int64,) * len(ok.n) + tuple(arrays)


_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
_BRA = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def sass_stats(sass: str, ptx: str) -> dict:
    """Instruction count, the span of the outermost loop (the grid-stride loop of an
    elementwise kernel: its per-element cost, slow paths included), and the 64-bit integer
    divisions/remainders in the PTX (each a subroutine of ~70 instructions in SASS)."""
    insns = []
    for m in _INSN.finditer(sass):
        insns.append((int(m.group(1), 16), m.group(2)))
    body = [t for _, t in insns if not t.startswith("NOP")]
    loops = []     # (start, end) of backward branches
    for off, text in insns:
        b = _BRA.search(text)
        if b and int(b.group(1), 16) < off:
            loops.append((int(b.group(1), 16), off))
    outer = max(loops, key=lambda r: r[1] - r[0]) if loops else None
    n_outer = sum(1 for off, t in insns if outer and outer[0] <= off <= outer[1]
                  and not t.startswith("NOP"))
    return {"total": len(body), "loop": n_outer,
            "div64": len(re.findall(r"\b(?:div|rem)\.[su]64\b", ptx))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", help="print the SASS of kernels whose label contains this")
    opts = ap.parse_args()
    ptxas, cuobjdump = shutil.which("ptxas"), shutil.which("cuobjdump")
    if not (ptxas and cuobjdump):
        print("needs ptxas and cuobjdump on PATH (see the docstring)", file=sys.stderr)
        return 2
    import functrace as ft
    from functrace.backends.cuda import executor as numba_cuda
    from functrace.backends.cuda.device import _cuda
    cuda = _cuda()       # numba-cuda, imported with the project's numpy-compat shim
    from numba.cuda import dispatcher

    class _H200:            # device functions ask the current device for its capability
        compute_capability = (9, 0)
    dispatcher.get_current_device = lambda: _H200
    tmp = tempfile.mkdtemp()
    print(f"{'kernel':58s} {'SASS':>6s} {'loop':>5s} {'regs':>5s}  div/rem.s64 in PTX")
    for name, (fn, args) in workloads().items():
        lo = ft.jit(fn, backend="cuda").lower(*args)
        prog = lo._entry.run.lower()
        items = [(f"g{gid} {ks.launch.strategy} [" + " ".join(
            prog.graph.eqns[i].op.name for i in ks.group.eqns) + "]", ks.key, ks.source,
            kernel_signature(ks)) for gid, ks in prog.kernels.items()]
        items += [(f"g{gid} finish ({ks.launch.finish} per output)", ks.finish_key,
                   ks.finish_source, finish_signature(ks), "finish")
                  for gid, ks in prog.kernels.items() if ks.finish_key]
        items += [(f"e{i} {ok.kind}", ok.key, ok.source,
                   op_kernel_signature(prog.graph.eqns[i], ok))
                  for i, ok in prog.op_kernels.items()]
        for what, key, source, sig, *fn_name in items:
            mod = numba_cuda.load_module(key, source)
            try:
                kernel = getattr(mod, fn_name[0] if fn_name else "kernel")
                ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
            except Exception as exc:
                print(f"{name} {what}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            p = os.path.join(tmp, f"{key}.ptx")
            with open(p, "w") as f:
                f.write(ptx)
            cub = p.replace(".ptx", ".cubin")
            res = subprocess.run([ptxas, "-arch=sm_90", "-v", "-o", cub, p],
                                 capture_output=True, text=True, check=True)
            regs = re.search(r"Used (\d+) registers", res.stderr)
            sass = subprocess.run([cuobjdump, "-sass", cub], capture_output=True, text=True,
                                  check=True).stdout
            st = sass_stats(sass, ptx)
            label = f"{name} {what}"
            print(f"{label[:58]:58s} {st['total']:6d} {st['loop']:5d} "
                  f"{regs.group(1) if regs else '?':>5s}  {st['div64']}")
            if opts.show and opts.show in label:
                print(source)
                print(sass)
    return 0


if __name__ == "__main__":
    sys.exit(main())
