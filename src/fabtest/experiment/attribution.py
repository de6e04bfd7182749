"""Why did a scenario flake? Attribute a flaky scenario to the simulator, the agent or the judge.

Iterations of one scenario differ for one of three reasons (docs/how-to/flaky.md). The judge is
questioned first, because its disagreement with itself on *identical input* is judge flakiness
whatever else differs between the runs (a simulated user that says "hello" instead of "hi" does
not make a judge that flips on one transcript any less flaky). For the checks that decided the
outcome (the hard LLM-judged checks that failed the failing run), the judge is named when:

* the check recorded a split of its ``samples`` (the judge disagreed with itself within one run);
* the check's subject is the same in a passing and a failing run (the turns up to its turn for a
  turn's check, the whole transcript for a conversation's) and its verdict differs (a ``must`` at
  turn 1 that failed one run, which therefore stopped early, and passed the other);
* with a ``rejudge`` function (opt-in, it costs judge calls: ``[tool.fabtest.judge]
  attribution_rejudge``), the judge asked again about the check on one run's own recorded
  transcript gives a verdict unlike the recorded one or unlike itself.

Otherwise each run is compared with the first, turn by turn
(:func:`fabtest.experiment.diff.first_difference`), and the earliest divergence decides:

* the user turns differ first: the simulated user took another path, ``simulator``;
* the user turns are the same but the agent's response or tool calls differ: ``agent``;
* the transcripts are the same but verdicts differ: the judge changed its mind, ``judge``;
* anything else (a run ended in an error or timeout, one run only stopped earlier, different
  causes at the same turn, or identical transcripts and verdicts): ``undetermined``.

Only the first cause is named: an agent that answered differently at turn 2 also changes what the
simulated user says at turn 3, and the verdicts after it.

Soft criteria (``should``) never fail a scenario, so a soft verdict can flip while every run
passes: :func:`flaky_criteria` reports each soft check whose verdict differs between runs, with a
cause found the same way (:class:`FlakyCriterion`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from fabtest.experiment.diff import first_difference
from fabtest.experiment.model import CheckRecord, ScenarioResult

__all__ = ["Attribution", "Attributions", "FlakyCriterion", "Rejudge", "attribute_flakiness", "attribute_variance",
           "flaky_criteria", "has_flaky_soft_check"]

Cause = Literal["simulator", "agent", "judge", "undetermined"]

#: The verdicts the judge gives when asked again about ``check`` on ``result``'s own recorded
#: transcript (``judging/rejudge.py`` builds one); an empty list when it cannot be asked.
Rejudge = Callable[[ScenarioResult, CheckRecord], Sequence[str]]

#: Check types whose verdict comes from the judge LLM (the others are deterministic).
JUDGED = frozenset({"satisfy", "intent", "grounded_in", "goal"})
#: Deciding checks questioned per flaky scenario (bounds what ``rejudge`` spends).
MAX_DECIDING = 3

_Key = tuple[str, str, int | None]


@dataclass(frozen=True)
class Attribution:
    """The main cause of one flaky scenario, the turn where its runs diverge, and the evidence;
    ``criterion``: the check that shows a judge flip, when the judge is the cause."""

    id: str
    name: str
    cause: Cause
    turn: int | None
    evidence: str
    criterion: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FlakyCriterion:
    """A soft criterion whose verdict differs between runs of one scenario (``verdicts``:
    ``passed in 1, failed in 2``), and why."""

    id: str
    name: str
    criterion: str
    turn: int | None
    verdicts: str
    cause: Cause
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Attributions:
    """Everything the variance section says about flakiness: flaky scenarios and flaky soft criteria."""

    scenarios: list[Attribution] = field(default_factory=list)
    criteria: list[FlakyCriterion] = field(default_factory=list)


def _groups(results: Sequence[ScenarioResult]) -> dict[str, list[ScenarioResult]]:
    groups: dict[str, list[ScenarioResult]] = {}
    for result in results:
        if not result.skipped:
            groups.setdefault(result.id, []).append(result)
    return {sid: sorted(runs, key=lambda r: r.iteration) for sid, runs in groups.items()}


def attribute_flakiness(results: Sequence[ScenarioResult], rejudge: Rejudge | None = None) -> list[Attribution]:
    """One attribution per scenario whose counted (not skipped) runs both passed and failed."""
    return [_attribute(sid, runs, rejudge) for sid, runs in _groups(results).items()
            if len({r.passed for r in runs}) > 1]


def attribute_variance(results: Sequence[ScenarioResult], rejudge: Rejudge | None = None) -> Attributions:
    """Flaky scenarios (:func:`attribute_flakiness`) and flaky soft criteria (:func:`flaky_criteria`)."""
    return Attributions(attribute_flakiness(results, rejudge), flaky_criteria(results, rejudge))


def _transcript(result: ScenarioResult, upto: int | None = None) -> list[dict[str, Any]]:
    turns = result.transcript if upto is None else result.transcript[:upto]
    return [t.model_dump(mode="json") for t in turns]


def _key(check: CheckRecord) -> _Key:
    return check.type, check.criterion, check.turn


def _find(run: ScenarioResult, key: _Key) -> CheckRecord | None:
    return next((c for c in [*run.expectations, *run.evaluations] if _key(c) == key and c.status != "skipped"), None)


def _attribute(sid: str, runs: list[ScenarioResult], rejudge: Rejudge | None) -> Attribution:
    name = runs[0].name
    broken = [r for r in runs if r.failure_type in ("error", "timeout", "simulator", "judge")]
    if broken:
        r = broken[0]
        return Attribution(sid, name, "undetermined", None,
                           f"iteration {r.iteration} ended with {r.failure_type}: {(r.failure_message or '')[:120]}")
    divergence = _divergence(runs)
    if divergence is None:
        changed = _changed_verdicts(runs)
        if changed:
            return Attribution(sid, name, "judge", None,
                               "same transcript in every run; verdicts differ: " + "; ".join(changed[:3]))
        return Attribution(sid, name, "undetermined", None, "same transcript and verdicts in every run")
    judged = _judge_flip(runs, rejudge)
    if judged is not None:
        check, evidence = judged
        also = f"; the transcripts also differ ({divergence[2]})" if divergence[1] != "length" else ""
        return Attribution(sid, name, "judge", check.turn, evidence + also, check.criterion)
    turn, cause, evidence = divergence
    return Attribution(sid, name, "undetermined" if cause == "length" else cause, turn, evidence)


def _divergence(runs: list[ScenarioResult]) -> tuple[int, Cause | Literal["length"], str] | None:
    """The earliest turn where a run's transcript parts from the first run's, the cause it points
    to (``length``: one run only stopped earlier) and the evidence; None when all are the same."""
    first = runs[0]
    divergences = []
    for run in runs[1:]:
        found = first_difference(_transcript(first), _transcript(run))
        if found:
            divergences.append((found[0], found[1], run.iteration))
    if not divergences:
        return None
    turn = min(d[0] for d in divergences)
    at_turn = [d for d in divergences if d[0] == turn]
    parts = {"user" if d[1] == "user" else "agent" if d[1] in ("agent", "tools") else "length" for d in at_turn}
    pair = f"iterations {first.iteration} and {at_turn[0][2]}"
    if parts == {"user"}:
        return turn, "simulator", f"the user turns diverge at turn {turn} ({pair})"
    if parts == {"agent"}:
        what = "tool calls" if at_turn[0][1] == "tools" else "response"
        return turn, "agent", f"same user turns, the agent's {what} differs at turn {turn} ({pair})"
    if parts == {"length"}:
        return turn, "length", f"same turns until one run stops before turn {turn} ({pair})"
    return turn, "undetermined", f"user and agent turns both differ at turn {turn}"


def _judge_flip(runs: list[ScenarioResult], rejudge: Rejudge | None) -> tuple[CheckRecord, str] | None:
    """A deciding check (a hard judged check that failed a failing run) on which the judge
    disagreed with itself, and the evidence. Only the first failing run is re-judged."""
    passing = next((r for r in runs if r.passed), None)
    for index, failing in enumerate(r for r in runs if not r.passed):
        deciding = [c for c in failing.expectations
                    if c.type in JUDGED and c.mode == "must" and c.status in ("failed", "inconclusive")]
        for check in deciding[:MAX_DECIDING]:
            other = _find(passing, _key(check)) if passing is not None else None
            evidence = _judge_evidence(failing, check, passing, other, rejudge if index == 0 else None)
            if evidence is not None:
                return check, evidence
    return None


def _same_subject(a: ScenarioResult, b: ScenarioResult, check: CheckRecord) -> bool:
    """Whether the judge saw the same text for ``check`` in runs ``a`` and ``b``: the turns up to
    the check's turn (a turn's check; the judge may read earlier turns as context), else the whole
    transcript (a conversation's check, the goal)."""
    whole = check.turn is None or check.data.get("scope") == "conversation"
    upto = None if whole else check.turn
    if upto is not None and (len(a.transcript) < upto or len(b.transcript) < upto):
        return False
    return first_difference(_transcript(a, upto), _transcript(b, upto)) is None


def _split(check: CheckRecord) -> dict[str, int] | None:
    samples = check.data.get("samples")
    if isinstance(samples, dict) and len([k for k, v in samples.items() if v]) > 1:
        return {str(k): int(v) for k, v in samples.items()}
    return None


def _counts(labels: Sequence[str]) -> str:
    return ", ".join(f"{label} {n}" for label, n in Counter(labels).most_common())


def _judge_evidence(a: ScenarioResult, check_a: CheckRecord, b: ScenarioResult | None, check_b: CheckRecord | None,
                    rejudge: Rejudge | None) -> str | None:
    """Why ``check_a`` (in run ``a``) is a judge flip, or None: a recorded split of samples, the
    same subject judged otherwise in run ``b``, or a re-judgement of ``a``'s own transcript."""
    what = f'"{check_a.criterion}"' + (f" (turn {check_a.turn})" if check_a.turn is not None else "")
    pairs = [(a, check_a)] + ([(b, check_b)] if b is not None and check_b is not None else [])
    for run, check in pairs:
        split = _split(check)
        if split:
            return (f"the judge split on {what} on iteration {run.iteration}'s own transcript "
                    f"({_counts([k for k, v in split.items() for _ in range(v)])} samples)")
    if b is not None and check_b is not None and check_b.status != check_a.status and _same_subject(a, b, check_a):
        seen = "the same transcript" if check_a.turn is None or check_a.data.get("scope") == "conversation" else (
            f"the same turns 1-{check_a.turn}" if check_a.turn > 1 else "the same turn 1")
        first, second = sorted([(a.iteration, check_a.status), (b.iteration, check_b.status)])
        return (f"{what} judged on {seen}: {first[1]} in iteration {first[0]}, "
                f"{second[1]} in iteration {second[0]}")
    if rejudge is not None and check_a.type == "satisfy":
        for run, check in pairs:
            verdicts = [str(v) for v in rejudge(run, check)]
            if verdicts and len({check.status, *verdicts}) > 1:
                return (f"{what} re-judged {len(verdicts)} times on iteration {run.iteration}'s own transcript: "
                        f"{_counts(verdicts)} (recorded: {check.status})")
    return None


def has_flaky_soft_check(runs: Sequence[ScenarioResult]) -> bool:
    """Whether some soft judged check has more than one verdict across ``runs`` (one scenario's;
    reads only what a brief keeps: type, mode, criterion, turn and status)."""
    return bool(_soft_flips(runs))


def _soft_flips(runs: Sequence[ScenarioResult]) -> dict[_Key, dict[int, tuple[ScenarioResult, CheckRecord]]]:
    seen: dict[_Key, dict[int, tuple[ScenarioResult, CheckRecord]]] = {}
    for run in runs:
        for check in [*run.evaluations, *run.expectations]:
            if check.mode == "should" and check.type in JUDGED and check.status != "skipped":
                seen.setdefault(_key(check), {})[run.iteration] = (run, check)
    return {k: by_run for k, by_run in seen.items() if len({c.status for _, c in by_run.values()}) > 1}


def flaky_criteria(results: Sequence[ScenarioResult], rejudge: Rejudge | None = None) -> list[FlakyCriterion]:
    """Each soft judged check whose verdict differs between runs of its scenario, with its cause:
    the judge when it disagreed with itself (as for a flaky scenario), else where the two runs'
    transcripts part before the check's subject ends (simulator or agent)."""
    out = []
    for sid, runs in _groups(results).items():
        for (_kind, criterion, turn), by_run in _soft_flips(runs).items():
            ordered = sorted(by_run.items())
            verdicts = ", ".join(f"{check.status} in {iteration}" for iteration, (_run, check) in ordered)
            a, check_a = ordered[0][1]
            b, check_b = next(pair for _, pair in ordered if pair[1].status != check_a.status)
            evidence = _judge_evidence(b, check_b, a, check_a, rejudge)
            if evidence is not None:
                out.append(FlakyCriterion(sid, runs[0].name, criterion, turn, verdicts, "judge", evidence))
                continue
            cause, why = _subject_divergence(a, b, check_a)
            out.append(FlakyCriterion(sid, runs[0].name, criterion, turn, verdicts, cause, why))
    return out


def _subject_divergence(a: ScenarioResult, b: ScenarioResult, check: CheckRecord) -> tuple[Cause, str]:
    """Where runs ``a`` and ``b`` part within what the judge read for ``check``."""
    whole = check.turn is None or check.data.get("scope") == "conversation"
    upto = None if whole else check.turn
    found = first_difference(_transcript(a, upto), _transcript(b, upto))
    pair = f"iterations {a.iteration} and {b.iteration}"
    if found is None:
        return "undetermined", f"same subject in {pair}; the verdict still differs"
    turn, part = found
    if part == "user":
        return "simulator", f"the user turns diverge at turn {turn} ({pair})"
    if part in ("agent", "tools"):
        what = "tool calls" if part == "tools" else "response"
        return "agent", f"same user turns, the agent's {what} differs at turn {turn} ({pair})"
    return "undetermined", f"one run stops before turn {turn} ({pair})"


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
