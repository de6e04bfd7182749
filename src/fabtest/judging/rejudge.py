"""Re-judge the recorded transcripts of an experiment: is the judge consistent with itself?

A flaky verdict has three possible sources: the agent, the simulated user, or the judge. Only the
judge can be questioned again on exactly the same text, so ``fabtest rejudge`` asks it M more times
about every recorded ``satisfy`` check (same criterion, same exchange or transcript, same batching
per turn and scope), never calling the agent or the simulator. Each repetition is its own cache
entry (salt ``rejudge/K``), so a rerun replays and the original run's answers are never reused.

The result is plain data (:class:`Rejudged` per check, :func:`agreement_table` per criterion and
scenario) plus a new experiment document whose verdicts are the majority of the M re-judgements, so
``fabtest-compare OLD NEW`` compares judge A with judge B on the same transcripts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.config.criteria import Criterion
from fabtest.conversation import Conversation, TokenUsage
from fabtest.engine import transcript
from fabtest.engine.judge import CriterionLabel, Judge, Scope, criterion_from_data, majority
from fabtest.experiment.attribution import Rejudge
from fabtest.experiment.model import CheckRecord, ExperimentInfo, ScenarioResult, UsageRecord, conversation_of
from fabtest.llm.base import LLM, LLMError, LLMNotConfigured
from fabtest.llm.cache import salted

__all__ = ["Rejudged", "agreement_table", "attribution_rejudger", "check_subject", "judgeable", "recorded_criterion",
           "rejudge_experiment", "rejudged_info"]


@dataclass
class Rejudged:
    """One recorded ``satisfy`` check and the verdicts the judge gave when asked again."""

    scenario_id: str
    scenario_name: str
    iteration: int
    criterion: str
    turn: int | None
    scope: str
    mode: str
    recorded: str
    verdicts: list[CriterionLabel] = field(default_factory=list)

    @property
    def majority(self) -> str:
        return majority(self.verdicts)[0] if self.verdicts else self.recorded

    @property
    def split(self) -> dict[str, int]:
        return dict(Counter(self.verdicts))

    @property
    def self_agreement(self) -> float:
        """Share of the M verdicts equal to the most common one (1.0: the judge never wavered)."""
        return max(Counter(self.verdicts).values()) / len(self.verdicts) if self.verdicts else 1.0

    @property
    def flips(self) -> int:
        """Re-judgements that differ from the recorded verdict."""
        return sum(v != self.recorded for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario_id, "name": self.scenario_name, "iteration": self.iteration,
                "criterion": self.criterion, "turn": self.turn, "scope": self.scope, "recorded": self.recorded,
                "verdicts": list(self.verdicts), "majority": self.majority, "flips": self.flips,
                "self_agreement": round(self.self_agreement, 4)}


def recorded_criterion(result: ScenarioResult, check: CheckRecord) -> Criterion:
    """The criterion as the judge saw it: recorded on the check, else the scenario's declared
    criteria (older results), else the name itself (an ad-hoc criterion is its own description)."""
    recorded = criterion_from_data(check.criterion, check.data)
    if recorded is not None:
        return recorded
    return Criterion(check.criterion, result.criteria.get(check.criterion) or check.criterion)


def _judgeable(result: ScenarioResult, check: CheckRecord) -> bool:
    scope = check.data.get("scope")
    if check.type != "satisfy" or check.status == "skipped" or scope not in ("response", "conversation"):
        return False
    if scope == "response":
        return check.turn is not None and 1 <= check.turn <= len(result.transcript)
    return bool(result.transcript)


def rejudge_experiment(
    results: Sequence[ScenarioResult],
    llm: LLM,
    *,
    times: int = 3,
    criterion: str | None = None,
    scenario: str | None = None,
    progress: Callable[[str], None] | None = None,
    files_dir: Path | None = None,
    max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES,
) -> tuple[list[ScenarioResult], list[Rejudged]]:
    """Every judgeable check asked ``times`` times; returns re-judged copies of the results (each
    re-judged check holds the majority, its split and confidence) and one :class:`Rejudged` per check.
    ``criterion`` and ``scenario`` (id, id prefix or exact name) narrow what is re-judged; the judge
    sees the files kept in ``files_dir``, each inline up to ``max_file_bytes`` (``judge_max_file_bytes``)."""
    if times < 1:
        raise ValueError(f"--times must be at least 1, got {times}")
    # temperature None: the judge LLM's configured one ([tool.fabtest.judge] temperature), so --times
    # samples the judge as configured rather than at a hard-coded 0 (issue 27 point 6)
    judges = [Judge(salted(llm, f"rejudge/{k}"), temperature=None) for k in range(times)]
    new_results: list[ScenarioResult] = []
    rows: list[Rejudged] = []
    for result in results:
        if scenario is not None and not (result.id.startswith(scenario) or result.name == scenario):
            continue  # the new experiment holds only what was re-judged, under the judge that re-judged it
        copy = result.model_copy(deep=True)
        new_results.append(copy)
        spent = TokenUsage()
        groups: dict[tuple[str, int | None], list[CheckRecord]] = {}
        for check in [*copy.evaluations, *copy.expectations]:
            if _judgeable(copy, check) and (criterion is None or check.criterion == criterion):
                groups.setdefault((str(check.data["scope"]), check.turn), []).append(check)
        if progress and groups:
            progress(f"{result.id} iteration {result.iteration}: {sum(map(len, groups.values()))} checks")
        conversation = conversation_of(copy, files_dir=files_dir)  # the judge sees the run's files again
        for (scope, turn), checks in groups.items():
            rows.extend(_rejudge_group(copy, conversation, scope, turn, checks, judges, spent, max_file_bytes))
        # what this re-judgement spent, counted call by call and priced at the judge that made the calls:
        # not the recorded run's usage (its agent, simulator and judge calls were not made again)
        copy.usage = {"judge": UsageRecord(calls=spent.calls, input_tokens=spent.input_tokens,
                                           output_tokens=spent.output_tokens)}
        _refresh_outcome(copy)
    return new_results, rows


def _rejudge_group(
    result: ScenarioResult, conversation: Conversation, scope: str, turn: int | None,
    checks: list[CheckRecord], judges: list[Judge], spent: TokenUsage, max_file_bytes: int,
) -> list[Rejudged]:
    """One call per repetition for the criteria of one subject, as the original run batched them
    (each call's tokens added to ``spent``; a cached answer costs nothing)."""
    unique = {c.criterion: recorded_criterion(result, c) for c in checks}
    subject = check_subject(conversation, scope, turn, max_file_bytes)
    answers = []
    for judge in judges:
        judged = judge.evaluate_criteria(list(unique.values()), subject=subject, scope=_scope(scope))
        spent.add(judged.usage)
        answers.append(judged.value)
    rows = []
    for check in checks:
        verdicts = [next(v.verdict for v in answer if v.criterion == check.criterion) for answer in answers]
        row = Rejudged(result.id, result.name, result.iteration, check.criterion, turn, scope, check.mode,
                       check.status, list(verdicts))
        rows.append(row)
        label, split = majority(verdicts)
        check.status = label
        check.passed = None if label in ("inconclusive", "not_applicable") else label == "passed"
        check.data = {**check.data, "recorded": row.recorded, "samples": split,
                      "confidence": "high" if len(split) == 1 else "low"}
        reason = next((v.reasoning for a in answers for v in a if v.criterion == check.criterion
                       and v.verdict == label), "")
        check.details = reason or check.details
    return rows


def judgeable(result: ScenarioResult, check: CheckRecord) -> bool:
    """Whether a recorded check can be asked again: a judged ``satisfy`` check with its subject."""
    return _judgeable(result, check)


def check_subject(conversation: Conversation, scope: str, turn: int | None,
                  max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES) -> str:
    """What the judge reads for a recorded check: its turn's exchange (a response criterion) or
    the transcript (a conversation criterion), each file inline up to ``max_file_bytes``."""
    return (transcript.exchange_for_judge(conversation, turn, max_file_bytes=max_file_bytes)
            if scope == "response" and turn else transcript.for_judge(conversation, max_file_bytes=max_file_bytes))


def attribution_rejudger(llm: LLM, times: int, *, limit: int = 20) -> Rejudge:
    """For the flakiness attribution (experiment/attribution.py): ``times`` verdicts on a recorded
    ``satisfy`` check, asked on its own run's transcript with the criteria it was batched with, so
    the input is the one the judge already saw. Each repetition is its own cache entry (salt
    ``attribution/K``); a subject is asked once however often it is needed, at most ``limit``
    subjects (the bound on what attribution spends), and a judge failure gives no verdicts."""
    judges = [Judge(salted(llm, f"attribution/{k}")) for k in range(times)]
    asked: dict[tuple[str, int, str, int | None], dict[str, list[str]]] = {}

    def rejudge(result: ScenarioResult, check: CheckRecord) -> list[str]:
        if not _judgeable(result, check):
            return []
        scope = str(check.data["scope"])
        key = (result.id, result.iteration, scope, check.turn)
        if key not in asked:
            if len(asked) >= limit:
                return []
            batch = {c.criterion: recorded_criterion(result, c) for c in [*result.evaluations, *result.expectations]
                     if _judgeable(result, c) and c.data.get("scope") == scope and c.turn == check.turn}
            subject = check_subject(conversation_of(result), scope, check.turn)
            verdicts: dict[str, list[str]] = {name: [] for name in batch}
            try:
                for judge in judges:
                    for v in judge.evaluate_criteria(list(batch.values()), subject=subject, scope=_scope(scope)).value:
                        verdicts[v.criterion].append(v.verdict)
            except (LLMError, LLMNotConfigured):
                verdicts = {}
            asked[key] = verdicts
        return list(asked[key].get(check.criterion, []))

    return rejudge


def _scope(scope: str) -> Scope:
    return "response" if scope == "response" else "conversation"


def _refresh_outcome(result: ScenarioResult) -> None:
    """A passed scenario whose re-judged hard criterion no longer passes fails as an assertion. A
    recorded failure stays one: the run stopped there, so what would have followed is unknown."""
    if not result.passed or result.skipped:
        return
    broken = [c for c in result.expectations if c.type == "satisfy" and "recorded" in c.data and c.status != "passed"]
    if broken:
        result.passed = False
        result.failure_type = "assertion"
        result.failure_message = f're-judged: "{broken[0].criterion}" is {broken[0].status}'


def rejudged_info(info: ExperimentInfo, new_id: str, timestamp: str, judge: tuple[str | None, str | None],
                  times: int, temperature: float | None = None,
                  max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES) -> ExperimentInfo:
    """The new experiment's identity: named and tagged as a re-judgement of ``info``, with the
    settings the re-judging judge had (``times`` verdicts per check at the configured
    ``temperature``, each response check reading the default context window, each file shown
    inline up to ``max_file_bytes``)."""
    settings: dict[str, Any] = {"temperature": temperature, "samples": times, "samples_per_criterion": {},
                                "context_turns": transcript.CONTEXT_TURNS,
                                "max_file_bytes": max_file_bytes}
    return info.model_copy(update={
        "judge_settings": settings,
        "id": new_id, "timestamp": timestamp, "name": f"rejudge of {info.id} ({times}x)",
        "tags": [*[t for t in info.tags if not t.startswith("rejudge")], "rejudge", f"rejudge-of:{info.id}"],
        "judge_provider": judge[0], "judge_model": judge[1], "judge_note": None,
        "config_hash": "", "criteria_hash": "", "topic_graph_hash": "", "interrupted": False,
    })


def agreement_table(rows: Sequence[Rejudged]) -> dict[str, Any]:
    """Per criterion and per scenario: checks, self-agreement (mean share of the M verdicts equal to
    their mode), how often all M agreed, and the flip rate (re-judgements unlike the recorded one)."""

    def summarise(items: list[Rejudged]) -> dict[str, Any]:
        verdicts = sum(len(r.verdicts) for r in items)
        return {
            "checks": len(items),
            "self_agreement": round(sum(r.self_agreement for r in items) / len(items), 4),
            "unanimous": sum(len(r.split) == 1 for r in items),
            "flip_rate": round(sum(r.flips for r in items) / verdicts, 4) if verdicts else 0.0,
            "majority_changed": sum(r.majority != r.recorded for r in items),
        }

    by_criterion: dict[str, list[Rejudged]] = {}
    by_scenario: dict[str, list[Rejudged]] = {}
    for row in rows:
        by_criterion.setdefault(row.criterion, []).append(row)
        by_scenario.setdefault(f"{row.scenario_id}#{row.iteration}", []).append(row)
    return {
        "overall": summarise(list(rows)) if rows else None,
        "criteria": {name: summarise(items) for name, items in sorted(by_criterion.items())},
        "scenarios": {key: {"name": items[0].scenario_name, **summarise(items)} for key, items in by_scenario.items()},
    }
