"""Shared pytest setup. Tests are grouped by the layer they test (``ir/``, ``ops/``,
``transforms/``, ``backends/``, ``api/``); the tables and helpers they share live in
``support/`` (``op_cases``: the OpCase table, ``fuzz_*``, ``backend_checks``...), importable
by module name from every test file, whatever pytest's import mode."""

import os
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
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
