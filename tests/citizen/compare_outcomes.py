"""Compare two pytest runs' per-test outcomes (``-rA`` output): ``compare_outcomes.py WITHOUT WITH``.

Used by ``.ci/run`` to run pytest-bdd's own test suite in an environment without fabtest and in
one with fabtest installed (dormant): every test must end the same way. Exit 0 when identical,
1 with the differing tests listed otherwise.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?:\[\d+\] )?(\S+)")


def outcomes(log: Path) -> dict[str, str]:
    """Node id (or skip location) -> outcome word, from the run's own short test summary (lines
    above it may be the output of the suite's inner pytest runs)."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if "short test summary info" in line]
    found: dict[str, str] = {}
    for line in lines[starts[-1] + 1:] if starts else []:
        match = _LINE.match(line)
        if match:
            found[match.group(2)] = match.group(1)
    return found


def main(argv: list[str]) -> int:
    without, with_fabtest = outcomes(Path(argv[0])), outcomes(Path(argv[1]))
    if not without:
        print(f"compare_outcomes: no test outcomes in {argv[0]}")
        return 1
    differing = sorted(n for n in without.keys() | with_fabtest.keys() if without.get(n) != with_fabtest.get(n))
    counts = {o: list(without.values()).count(o) for o in sorted(set(without.values()))}
    if not differing:
        print(f"pytest-bdd's suite ends the same with and without fabtest: {counts}")
        return 0
    print(f"pytest-bdd's suite differs with fabtest installed ({len(differing)} tests):")
    for node in differing:
        print(f"  {node}: without {without.get(node, '-')}, with {with_fabtest.get(node, '-')}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
