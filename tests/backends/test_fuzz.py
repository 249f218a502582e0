"""The differential fuzzer (docs/testing.md): random programs of 5-20 ops run compiled, on the
reference interpreter and as plain numpy; their gradients compiled and not; vmap against a
loop. Programs, checks and tolerances: ``tests/support/fuzz_programs.py``,
``tests/support/fuzz_check.py``.

* ``test_fuzz_batch[i]``: the default run, ``FUNCTRACE_FUZZ_PROGRAMS`` (200) programs in
  batches of 25. A batch is one jitted function (values and gradients of all its programs),
  so its kernels compile together. Batch 0 compiles transcendental math with the vecmath
  polynomials the executor really uses; the others with numba's libm calls (~10x cheaper to
  compile, see ``fuzz_check.kernel_variant``). Batch ``THREADS_BATCH`` (1) runs on parallel
  kernels (``threads=2``, every kernel that can be split, reductions over the outermost axis
  in blocks of 2 or more elements); the slow run does so every 10th batch. Kernels persist
  in pytest's cache directory (``.pytest_cache``), so a rerun with the same seed compiles
  nothing.
* ``test_fuzz_slow``: 20,000 programs (``-m slow``), in subprocesses, kernels in a
  temporary directory.
* ``test_fuzz_regression[name]``: every program the fuzzer ever failed on
  (``tests/support/fuzz_regressions.py``), on every run.
* ``test_fuzz_uncompiled_checks_shrink_with_hypothesis``: programs drawn by hypothesis, the
  checks that need no compiler, so hypothesis shrinks a failure.

Seeds: ``FUNCTRACE_FUZZ_SEED`` (default 0; ``random`` picks one and prints it): program ``j``
of batch ``i`` depends only on the seed and its place (``fuzz_programs.random_batch``). A
failure message names the seed and prints the program (and a shrunk one) as a literal to
paste into ``tests/support/fuzz_regressions.py``. Every mismatch fails the test: none is excused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from backend_checks import ROOT, kernel_cache_dir
from fuzz_check import check_batch, kernel_variant, triage
from fuzz_programs import fuzz_programs, fuzz_seed, programs, random_batch
from fuzz_regressions import REGRESSIONS
from hypothesis import HealthCheck, given, settings

pytest.importorskip("numba")

SEED = fuzz_seed()
N_PROGRAMS = fuzz_programs()
BATCH = 25
N_BATCHES = -(-N_PROGRAMS // BATCH)
SLOW_PROGRAMS = int(os.environ.get("FUNCTRACE_FUZZ_SLOW_PROGRAMS", "20000"))
#: this batch runs its compiled checks on parallel kernels (``kernel_variant(threads=2)``)
THREADS_BATCH = 1


def _source_hash() -> str:
    """Hash of the code kernels are generated from: a new one starts a new kernel cache."""
    root = os.path.join(ROOT, "functrace")
    h = hashlib.sha256()
    for sub in ("backends", "passes", "ops"):
        d = os.path.join(root, sub)
        for name in sorted(os.listdir(d)):
            if name.endswith(".py"):
                with open(os.path.join(d, name), "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def fuzz_cache(request, tmp_path_factory):
    """The kernel cache of the default run: pytest's cache directory when there is one (one
    subdirectory per version of the code generator, older ones removed), else a temporary
    directory."""
    cache = getattr(request.config, "cache", None)
    if cache is None:
        path = tmp_path_factory.mktemp("fuzz-kernels")
    else:
        parent = cache.mkdir("functrace-fuzz-kernels")
        path = parent / _source_hash()
        for old in parent.iterdir():
            if old.is_dir() and old.name != path.name:
                shutil.rmtree(old, ignore_errors=True)
        path.mkdir(mode=0o700, exist_ok=True)
    with kernel_cache_dir(path) as d:
        yield d


def _run_batch(progs, libm: bool, where: str, threads: int | bool = False):
    with kernel_variant(libm=libm, threads=threads):
        found = check_batch(progs)
    if not found:
        return
    reports = triage(progs, found, libm, threads=threads)
    pytest.fail(f"{where}: {len(reports)} program(s) failed\n"
                f"(reproduce: FUNCTRACE_FUZZ_SEED={SEED} FUNCTRACE_FUZZ_PROGRAMS="
                f"{N_PROGRAMS} python -m pytest 'tests/backends/test_fuzz.py::{where}')\n\n"
                + "\n\n".join(reports), pytrace=False)


@pytest.mark.parametrize("index", range(N_BATCHES))
def test_fuzz_batch(index, fuzz_cache):
    print(f"functrace fuzz: FUNCTRACE_FUZZ_SEED={SEED}, batch {index} of {N_BATCHES}")
    _run_batch(random_batch(SEED, index, BATCH), libm=index != 0,
               where=f"test_fuzz_batch[{index}]", threads=2 if index == THREADS_BATCH else False)


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regression(name, fuzz_cache):
    case = REGRESSIONS[name]
    with kernel_variant(libm=case.libm):
        found = check_batch(case.programs)
    assert not found, case.note + "\n" + "\n".join(repr(m) for m in found)


#: batches per subprocess of the slow run: numba keeps every kernel it compiled for the life
#: of the process (~80 MB per batch here), so the run is split into processes
SLOW_CHUNK = 20
_SLOW_SCRIPT = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.path.join("tests", "support"))
from fuzz_check import check_batch, kernel_variant, triage
from fuzz_programs import random_batch
seed, start, stop, size = map(int, sys.argv[1:5])
for index in range(start, stop):
    progs = random_batch(seed, index, size)
    libm = index % 20 != 0          # every 20th batch compiles the vecmath polynomials
    threads = 2 if index % 10 == 1 else False   # every 10th on parallel kernels
    with kernel_variant(libm=libm, threads=threads):
        found = check_batch(progs)
    reports, known = triage(progs, found, libm, threads=threads) if found else ([], [])
    print(json.dumps({"index": index, "reports": reports, "known": len(known)}), flush=True)
"""


@pytest.mark.slow
def test_fuzz_slow(tmp_path):
    """``SLOW_PROGRAMS`` programs (docs/testing.md gives the time it takes), in subprocesses
    of ``SLOW_CHUNK`` batches, kernels in a temporary directory."""
    seed_ = SEED + 1_000_003
    n = SLOW_PROGRAMS // BATCH
    env = dict(os.environ, FUNCTRACE_CACHE_DIR=str(tmp_path / "kernels"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    failures, known, t0 = [], 0, time.time()
    for start in range(0, n, SLOW_CHUNK):
        stop = min(n, start + SLOW_CHUNK)
        out = subprocess.run([sys.executable, "-c", _SLOW_SCRIPT, str(seed_), str(start),
                              str(stop), str(BATCH)], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=6 * 3600)
        done = set()
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                done.add(r["index"])
                failures.extend(f"batch {r['index']}: {x}" for x in r["reports"])
                known += r["known"]
        if out.returncode != 0 or len(done) != stop - start:
            failures.append(f"batches {start}..{stop - 1} crashed:\n{out.stderr[-3000:]}")
        print(f"fuzz slow: {stop * BATCH} programs, {len(failures)} failures, {known} known, "
              f"{time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    assert not failures, f"FUNCTRACE_FUZZ_SEED={SEED} (slow run seed {seed_})\n\n" + \
        "\n\n".join(failures)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_fuzz_uncompiled_checks_shrink_with_hypothesis(prog):
    """The checks that need no compiler (interpreter vs numpy, vmap vs a loop) on programs
    drawn by hypothesis, so a failure is shrunk to a minimal program."""
    found = check_batch([prog], compiled=False)
    assert not found, "\n".join(repr(m) for m in found)
