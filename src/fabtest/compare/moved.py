"""What moved between two experiments, scenario by scenario, in the words a reviewer reads first.

A gate that cannot decide must still say what it saw: "Checkout: 2/10 runs fail 'add_to_cart' now
(was 0/10)" is what a reviewer acts on, long before "about 40 more runs per side would decide it".
So every output opens with these lines (docs/gates.md, "Undecided"): per shared scenario, the share
of its runs that failed, failed a deterministic check or failed a criterion, wherever it changed,
the largest rise in failures first and improvements after. They describe, they do not test: the
gate's family says which of them is more than chance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fabtest.compare.read import ScenarioTally

__all__ = ["MOVED_KEPT", "Moved", "moves"]

#: the moves a comparison keeps (the JSON has them all up to this; the text shows fewer)
MOVED_KEPT = 100


@dataclass(slots=True)
class Moved:
    """One scenario's failures of one kind, before and after (counts of runs)."""

    scenario_id: str
    scenario: str
    #: "" for the scenario's runs failing, else the check or criterion they failed
    what: str
    kind: str  # "completion", "check" or "criterion"
    baseline: tuple[int, int]  # (runs that failed, runs)
    current: tuple[int, int]

    @property
    def change(self) -> float:
        """The rise in the share of failing runs (negative: fewer fail now)."""
        return self.current[0] / self.current[1] - self.baseline[0] / self.baseline[1]

    @property
    def line(self) -> str:
        failed = f" {self.what!r}" if self.what else ""
        return (f"{self.scenario}: {self.current[0]}/{self.current[1]} runs fail{failed} now "
                f"(was {self.baseline[0]}/{self.baseline[1]})")

    def to_dict(self) -> dict[str, object]:
        return {"scenario": self.scenario_id, "name": self.scenario, "kind": self.kind, "what": self.what,
                "baseline": list(self.baseline), "current": list(self.current), "line": self.line}


def _failing(counts: Mapping[str, list[int]]) -> dict[str, tuple[int, int]]:
    return {name: (rated - passed, rated) for name, (passed, rated) in counts.items() if rated}


def _scenario_moves(sid: str, b: ScenarioTally, c: ScenarioTally) -> list[Moved]:
    out = []
    if b.runs and c.runs and b.passes * c.runs != c.passes * b.runs:
        out.append(Moved(sid, c.name, "", "completion", (b.runs - b.passes, b.runs), (c.runs - c.passes, c.runs)))
    for kind, label in (("checks", "check"), ("criteria", "criterion")):
        if b.runs == c.runs == 1 and getattr(b, kind) == getattr(c, kind):
            continue  # the common single-run case: same counts, nothing moved (no run-level maps built)
        before, now = _failing(b.run_counts(kind)), _failing(c.run_counts(kind))
        for name in sorted(set(before) & set(now)):
            (bf, bn), (cf, cn) = before[name], now[name]
            if bf * cn != cf * bn:
                out.append(Moved(sid, c.name, name, label, (bf, bn), (cf, cn)))
    return out


def moves(b_shared: Mapping[str, ScenarioTally], c_shared: Mapping[str, ScenarioTally]) -> tuple[list[Moved], int]:
    """The moves of the shared scenarios, the largest rise in failures first, improvements after
    (at most :data:`MOVED_KEPT`), and how many there were in all."""
    found = [m for sid, b in b_shared.items() for m in _scenario_moves(sid, b, c_shared[sid])]
    # among equal moves, a check or criterion first: it says why the runs failed
    found.sort(key=lambda m: (m.change <= 0, -abs(m.change), m.scenario, m.kind == "completion", m.what))
    return found[:MOVED_KEPT], len(found)
