"""Memory traffic of the CUDA plans, without a GPU: what each step of a gpu_check.py workload
reads and writes, by the plan.

Lowers the workloads of benchmarks/cuda_sass.py for ``backend="cuda"`` and prints, per step
of the plan, the bytes of the distinct arrays it reads and writes (an array read through a
broadcast or transpose counts once, at its own size; a view step moves nothing), the number
of launches, and the totals. A model of a lower bound, not a timing: a kernel may re-read
from L2 what it counts once here, and cuBLAS moves more than its operands and result.
Speed is measured by benchmarks/gpu_check.py on a GPU.

    python benchmarks/cuda_traffic.py [--workload mlp] [--steps]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def nbytes(v) -> int:
    return int(v.aval.size) * v.aval.dtype.itemsize


def traffic(prog):
    """[(label, bytes read, bytes written, launches)] per step of a lowered program."""
    from functrace.core import Var
    from functrace.passes.fusion import Group
    g, rows = prog.graph, []
    for s in prog.plan.steps:
        if isinstance(s, Group):
            ks = prog.kernels[s.id]
            b = ks.binding
            reads = {id(a): a for a, _ in b.operands if isinstance(a, Var)}
            writes = {id(v): v for v, _ in b.outputs}
            if b.reduction is not None:
                writes[id(b.reduction[0])] = b.reduction[0]
            launches = 1 + (ks.finish_key is not None)
            label = "[" + " ".join(g.eqns[i].op.name for i in s.eqns) + "]"
        else:
            e = g.eqns[s.eqn]
            if s.view:
                rows.append((e.op.name + " (view)", 0, 0, 0))
                continue
            reads = {id(a): a for a in e.inputs if isinstance(a, Var)}
            writes = {id(o): o for o in e.outputs}
            launches = 1
            label = e.op.name
        rows.append((label, sum(map(nbytes, reads.values())),
                     sum(map(nbytes, writes.values())), launches))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="", help="only this workload")
    ap.add_argument("--steps", action="store_true", help="print every step")
    opts = ap.parse_args()
    from cuda_sass import workloads

    import functrace as ft
    for name, (fn, args) in workloads().items():
        if opts.workload and name != opts.workload:
            continue
        prog = ft.jit(fn, backend="cuda").lower(*args)._entry.run.lower()
        rows = traffic(prog)
        if opts.steps:
            for label, r, w, n in rows:
                print(f"  {name:7s} {label[:60]:60s} read {r / 1e6:9.2f} MB  "
                      f"write {w / 1e6:9.2f} MB  launches {n}")
        r = sum(x[1] for x in rows)
        w = sum(x[2] for x in rows)
        n = sum(x[3] for x in rows)
        print(f"{name:7s} steps {len(rows):3d}  launches {n:3d}  read {r / 1e6:9.2f} MB  "
              f"write {w / 1e6:9.2f} MB  total {(r + w) / 1e6:9.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
