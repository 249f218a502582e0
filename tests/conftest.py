"""Shared pytest setup. Tests are grouped by the layer they test (``ir/``, ``ops/``,
``transforms/``, ``backends/``, ``api/``); the tables and helpers they share live in
``support/`` (``op_cases``: the OpCase table, ``fuzz_*``, ``backend_checks``...), importable
by module name from every test file, whatever pytest's import mode."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))

# CI runs the hypothesis tests with a fixed seed (a red CI must be reproducible); local runs
# keep exploring new examples.
if os.environ.get("CI"):
    from hypothesis import settings
    settings.register_profile("ci", derandomize=True)
    settings.load_profile("ci")


def pytest_configure(config):
    """Resolve ``FUNCTRACE_FUZZ_SEED=random`` once, here, so that pytest-xdist workers (which
    inherit this environment) and the simulator's subprocesses all fuzz the same programs."""
    from fuzz_programs import fuzz_seed
    fuzz_seed()
    # numba's CPU features as a user's process gets them (backends/cpu/numba_target.py), before
    # any test module's own @njit: otherwise workers would differ by which test ran first and
    # could not share compiled kernels through numba's cache, keyed by those features
    from functrace.backends.cpu import numba_target
    numba_target.configure()


def pytest_report_header(config):
    """The fuzzer's seed and program count head every run, so a red CI can be replayed."""
    from fuzz_programs import fuzz_programs
    seed = os.environ.get("FUNCTRACE_FUZZ_SEED", "0")
    n = fuzz_programs()
    return [f"functrace fuzz: FUNCTRACE_FUZZ_SEED={seed}, {n} programs "
            "(FUNCTRACE_FUZZ_SEED=random explores new ones)"]


def pytest_terminal_summary(terminalreporter):
    """The seed again at the end, where ``-q`` (which drops the header) still shows it."""
    terminalreporter.write_line(pytest_report_header(None)[0])


def _durations() -> dict[str, float]:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support",
                        "test_durations.txt")
    out = {}
    try:
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    t, nodeid = line.split(None, 1)
                    out[nodeid.strip()] = float(t)
    except FileNotFoundError:
        pass
    return out


def _longest_first(items) -> None:
    """Run the tests known to take longest first (``support/test_durations.txt``, written by
    ``tools/test_durations.py``): pytest-xdist's workers then finish together instead of one
    running a long test started last while the other idles. Tests marked ``early`` go before
    all of them: they scan the whole heap (``gc.collect``, ``gc.get_objects``), which takes
    ~0.1 s in a young worker and seconds in one that has compiled a thousand kernels (the
    memory tests took 193 s at the end of a run). The tests of an ``xdist_group`` (they share
    a module fixture set up once per worker: a Dask cluster, a subprocess) stay together and
    take the place of their longest member. Only the order changes."""
    known = _durations()

    def group(item):
        mark = item.get_closest_marker("xdist_group")
        return None if mark is None else (mark.args[0] if mark.args else mark.kwargs["name"])

    def known_cost(item):
        # pytest-xdist's loadgroup may have renamed a grouped test "<node id>@<group>"
        return known.get(re.sub(r"@[\w.-]+$", "", item.nodeid), 0.0)

    longest: dict = {}
    for item in items:
        g = group(item)
        if g is not None:
            longest[g] = max(longest.get(g, 0.0), known_cost(item))

    def cost(item):
        g = group(item)
        return longest[g] if g is not None else known_cost(item)

    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (item.get_closest_marker("early") is None, -cost(item),
                                 order[id(item)]))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` run only when asked for (``-m slow``, or any ``-m`` expression
    naming ``slow``); the default run skips them. ``FUNCTRACE_TEST_SHARD=i/n`` keeps every
    n-th collected test from the i-th on (the simulator's own pytest processes are split this
    way, so that xdist can spread one long file over its workers)."""
    import pytest
    shard = os.environ.get("FUNCTRACE_TEST_SHARD")
    if shard:
        i, n = map(int, shard.split("/"))
        items[:] = items[i::n]
    _longest_first(items)
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
