"""Why did a scenario flake? Attribute a flaky scenario to the simulator, the agent or the judge.

Iterations of one scenario differ for one of three reasons, and the recorded transcripts tell them
apart (docs/how-to/flaky.md): each run is compared with the first, turn by turn
(:func:`fabtest.experiment.diff.first_difference`), and the earliest divergence decides:

* the user turns differ first: the simulated user took another path, ``simulator``;
* the user turns are the same but the agent's response or tool calls differ: ``agent``;
* the transcripts are the same but verdicts differ: the judge changed its mind, ``judge``;
* anything else (a run ended in an error or timeout, one run only stopped earlier, different
  causes at the same turn, or identical transcripts and verdicts): ``undetermined``.

Only the first cause is named: an agent that answered differently at turn 2 also changes what the
simulated user says at turn 3, and the verdicts after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from fabtest.experiment.diff import first_difference
from fabtest.experiment.model import ScenarioResult

__all__ = ["Attribution", "attribute_flakiness"]

Cause = Literal["simulator", "agent", "judge", "undetermined"]


@dataclass(frozen=True)
class Attribution:
    """The main cause of one flaky scenario, the turn where its runs diverge, and the evidence."""

    id: str
    name: str
    cause: Cause
    turn: int | None
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def attribute_flakiness(results: Sequence[ScenarioResult]) -> list[Attribution]:
    """One attribution per scenario whose counted (not skipped) runs both passed and failed."""
    groups: dict[str, list[ScenarioResult]] = {}
    for result in results:
        if not result.skipped:
            groups.setdefault(result.id, []).append(result)
    out = []
    for sid, runs in groups.items():
        if len({r.passed for r in runs}) > 1:
            out.append(_attribute(sid, sorted(runs, key=lambda r: r.iteration)))
    return out


def _transcript(result: ScenarioResult) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in result.transcript]


def _attribute(sid: str, runs: list[ScenarioResult]) -> Attribution:
    name = runs[0].name
    broken = [r for r in runs if r.failure_type in ("error", "timeout")]
    if broken:
        r = broken[0]
        return Attribution(sid, name, "undetermined", None,
                           f"iteration {r.iteration} ended with {r.failure_type}: {(r.failure_message or '')[:120]}")
    first = runs[0]
    divergences = []
    for run in runs[1:]:
        found = first_difference(_transcript(first), _transcript(run))
        if found:
            divergences.append((found[0], found[1], run.iteration))
    if divergences:
        turn = min(d[0] for d in divergences)
        at_turn = [d for d in divergences if d[0] == turn]
        parts = {"user" if d[1] == "user" else "agent" if d[1] in ("agent", "tools") else "length" for d in at_turn}
        pair = f"iterations {first.iteration} and {at_turn[0][2]}"
        if parts == {"user"}:
            return Attribution(sid, name, "simulator", turn, f"the user turns diverge at turn {turn} ({pair})")
        if parts == {"agent"}:
            what = "tool calls" if at_turn[0][1] == "tools" else "response"
            return Attribution(sid, name, "agent", turn,
                               f"same user turns, the agent's {what} differs at turn {turn} ({pair})")
        if parts == {"length"}:
            return Attribution(sid, name, "undetermined", turn,
                               f"same turns until one run stops before turn {turn} ({pair})")
        return Attribution(sid, name, "undetermined", turn, f"user and agent turns both differ at turn {turn}")
    changed = _changed_verdicts(runs)
    if changed:
        return Attribution(sid, name, "judge", None, "same transcript in every run; verdicts differ: " + "; ".join(changed[:3]))
    return Attribution(sid, name, "undetermined", None, "same transcript and verdicts in every run")


def _changed_verdicts(runs: list[ScenarioResult]) -> list[str]:
    """``criterion (turn N): passed in 1, failed in 2`` for each check whose status varies."""
    seen: dict[tuple[str, str, int | None], dict[int, str]] = {}
    for run in runs:
        for check in [*run.expectations, *run.evaluations]:
            seen.setdefault((check.type, check.criterion, check.turn), {})[run.iteration] = check.status
    out = []
    for (_kind, criterion, turn), by_run in seen.items():
        if len(set(by_run.values())) > 1 or len(by_run) < len(runs):
            where = f" (turn {turn})" if turn is not None else ""
            statuses = ", ".join(f"{status} in {iteration}" for iteration, status in sorted(by_run.items()))
            out.append(f"{criterion}{where}: {statuses}")
    return out
