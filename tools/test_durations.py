"""Write ``tests/support/test_durations.txt`` from a pytest ``--durations=0`` report.

The file lists the tests that take longest (setup + call + teardown, seconds, rounded) so
that ``tests/conftest.py`` can hand them to pytest-xdist's workers first: with
``--dist loadgroup`` a worker asks for one test at a time, and a long test started last keeps
one worker busy while the other idles (a cold run measured here: 2,547 s of wall time for
3,284 s of tests on two workers). The numbers only order the run; a stale file costs time,
never a result.

Usage::

    python -m pytest -q -n 2 --durations=0 > /tmp/durations.txt
    python tools/test_durations.py /tmp/durations.txt
"""

from __future__ import annotations

import collections
import os
import re
import sys

#: tests shorter than this keep their collection order
THRESHOLD_S = 4.0
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "tests", "support", "test_durations.txt")


def parse(lines) -> dict[str, float]:
    """Seconds per test node id, summed over setup, call and teardown."""
    per: dict[str, float] = collections.defaultdict(float)
    for line in lines:
        m = re.match(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)", line)
        if m:
            # pytest-xdist's loadgroup reports a grouped test as "<node id>@<group>"
            per[re.sub(r"@[\w.-]+$", "", m.group(2))] += float(m.group(1))
    return per


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        per = parse(f)
    if not per:
        print("no --durations lines found", file=sys.stderr)
        return 1
    rows = sorted(((t, n) for n, t in per.items() if t >= THRESHOLD_S), reverse=True)
    with open(OUT, "w") as f:
        f.write("# seconds  test (written by tools/test_durations.py; orders the run only)\n")
        for t, n in rows:
            f.write(f"{t:8.1f}  {n}\n")
    total = sum(t for t, _ in rows)
    print(f"{len(rows)} tests over {THRESHOLD_S} s, {total:.0f} s in all -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
