"""Generate tests/support/optax_reference.json: optax's numbers for the cases of
tests/support/optim_cases.py, which tests/api/test_optim.py compares functrace.optim with.

optax and jax are needed only here, never by functrace or its tests. Run it in an
environment that has them (this repository used optax 0.2.8 on jax 0.10.2, CPU):

    pip install optax            # in a separate environment
    python tools/optax_reference.py            # writes the JSON file
    python tools/optax_reference.py --no-x64   # prints how far float32 results move when
                                               # JAX computes in float32 (writes nothing)

The reference runs with ``jax_enable_x64``: numpy's rules then hold on both sides (a Python
float times a float32 array is float32, ``b2 ** count`` is float64), so the float32 results
differ from ours by rounding only. optax runs eagerly (op by op, no jax.jit), so no XLA fusion
reorders its arithmetic. ``--no-x64`` shows the size of the difference JAX's default float32
arithmetic makes (``1 - 0.999 ** count`` computed in float32 loses about five digits).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))

import optim_cases as C  # noqa: E402


def _number(x, dtype):
    # the shortest text that reads back to the same value in its own dtype
    if np.issubdtype(dtype, np.floating):
        return float(str(dtype.type(x)))
    return int(x)


def compute(optax, jax, dtype):
    params0, grads = C.make_problem()

    def cast(leaves):
        return C.build([jax.numpy.asarray(x, dtype=dtype) for x in leaves])

    out = {}
    for name, make in C.CASES.items():
        recorder = C.Recorder(optax)
        history, state = C.run(make(recorder), cast(params0), [cast(g) for g in grads],
                               optax.apply_updates)
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]
        # what each schedule gave on optax's own int32 step count (C.Replay)
        count = jax.numpy.arange(C.STEPS + 1, dtype=jax.numpy.int32)
        tables = [[_number(np.float64(s(c)), np.dtype(np.float64)) for c in count]
                  for s in recorder.schedules]
        out[name] = {
            "schedule_tables": tables,
            # the 13 parameter numbers after each step, leaves in flattening order
            "params": [[_number(v, np.dtype(dtype)) for x in C.flat(p)
                        for v in np.asarray(x).ravel()] for p in history],
            # the final state's leaves in flattening order
            "state": {"dtypes": [str(x.dtype) for x in leaves],
                      "shapes": [list(x.shape) for x in leaves],
                      "values": [_number(v, x.dtype) for x in leaves for v in x.ravel()]},
        }
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-x64", action="store_true",
                        help="compare float32 under JAX's default config with the stored file")
    args = parser.parse_args()
    import jax
    if not args.no_x64:
        jax.config.update("jax_enable_x64", True)
    import optax

    if args.no_x64:
        stored = C.load_reference()["float32"]
        fresh = compute(optax, jax, np.float32)
        for name in C.CASES:
            worst = 0.0
            for got, want in zip(fresh[name]["params"], stored[name]["params"]):
                g, w = np.array(got), np.array(want)
                worst = max(worst, float(np.max(np.abs(g - w) / np.maximum(np.abs(w), 1e-3))))
            print(f"{name:34s} max relative difference {worst:.2e}")
        return

    params0, grads = C.make_problem()
    doc = {
        "generated_by": "tools/optax_reference.py",
        "optax": optax.__version__, "jax": jax.__version__, "jax_enable_x64": True,
        "steps": C.STEPS,
        "shapes": [list(s) for s in C.SHAPES],
        # float64 leaves, flattened and concatenated in flattening order
        "params0": [float(v) for x in params0 for v in x.ravel()],
        "grads": [[float(v) for x in g for v in x.ravel()] for g in grads],
        "schedules": {name: [_number(np.asarray(make(optax)(n)), np.dtype(np.float64))
                             for n in C.SCHEDULE_COUNTS]
                      for name, make in C.SCHEDULES.items()},
        "float64": compute(optax, jax, np.float64),
        "float32": compute(optax, jax, np.float32),
    }
    with open(C.REFERENCE, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {C.REFERENCE} ({os.path.getsize(C.REFERENCE)} bytes): optax "
          f"{optax.__version__}, jax {jax.__version__}, {len(C.CASES)} optimizer cases, "
          f"{len(C.SCHEDULES)} schedules")


if __name__ == "__main__":
    main()
