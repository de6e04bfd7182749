"""The gate's plain data: one tested metric (:class:`GateEntry`) and the whole decision (:class:`Gate`).

:mod:`fabtest.compare.gate` fills it, :mod:`fabtest.compare.gate_text` words it; keeping the data
apart from both lets the words import it without the computing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_MARGIN", "Decision", "Gate", "GateEntry", "Kind", "Outcome"]

DEFAULT_MARGIN = 0.10  # "not worse": no gated metric dropped by more than 10 points

Kind = Literal["drop", "floor", "increase"]
Decision = Literal["fail", "pass", "undecided"]
Outcome = Literal["worse", "not worse", "undecided"]


@dataclass(slots=True)
class GateEntry:
    """One tested metric: its counts, the test, raw and family-adjusted p, and the decision."""

    #: "completion", "evaluation", "criterion:NAME", "floor:completion", "cost", "scenario:ID:completion" ...
    metric: str
    label: str
    kind: Kind
    test: str
    baseline: list[float] | None  # [passed, runs] (drops), None (floors), [units up, units down] (increases)
    current: list[float] | None
    observed: str  # the counts and rates in words
    p_raw: float | None
    p_min: float = 0.0  # the smallest p-value these margins could give (Tarone's rule)
    p_adjusted: float | None = None
    decision: Decision = "undecided"  # fail: worse; pass: not worse (shown non-inferior); undecided
    reason: str = ""
    #: when it passes: the smallest drop (drops), the highest rate below the floor (floors) these
    #: counts would have flagged, and the iterations at which a 20-point drop would be flagged
    detectable: float | None = None
    iterations_for_20pt: int | None = None
    modified: bool = False  # a criterion whose definition changed (gated with --gate-modified)
    within_limit: bool = False  # an increase whose mean over the shared scenarios stays within the limit
    #: the floor or the limit (a fraction) the metric is held to
    threshold: float | None = None
    #: runs per iteration behind the counts (for iterations_for_20pt)
    per_iteration: float = 1.0
    outcome: Outcome = "undecided"
    margin: float | None = None  # the non-inferiority margin (a fraction)
    #: 95 % Wilson intervals of the baseline and current rates (drops, floors)
    baseline_interval: tuple[float, float] | None = None
    current_interval: tuple[float, float] | None = None
    #: the one-sided (1 - alpha) lower bound of current - baseline (drops; Newcombe's hybrid score)
    difference_lower: float | None = None
    #: runs per side for 80 % power: to show "not worse" at the margin when nothing changed, and to
    #: flag a drop as large as the margin
    runs_to_decide: int | None = None
    runs_to_detect: int | None = None
    scenario: str | None = None  # the scenario id of a per-scenario hypothesis


@dataclass(slots=True)
class Gate:
    alpha: float
    method: str
    entries: list[GateEntry]
    warnings: list[str]
    failed: bool
    exit_code: int
    family_size: int  # hypotheses tested together (every one that could reach the level counts)
    outcome: Outcome = "undecided"
    margin: float = DEFAULT_MARGIN
    verdict: str = ""
    #: why the gate cannot be "not worse" whatever the metrics say (no shared scenario, ...)
    problems: list[str] = field(default_factory=list)
    #: per-scenario hypotheses built (those that could reach the level); the rejected ones are in ``entries``
    scenario_hypotheses: int = 0
    #: scenario runs compared, per side
    runs: dict[str, int] = field(default_factory=dict)

    def failures(self) -> list[GateEntry]:
        return [e for e in self.entries if e.decision == "fail"]
