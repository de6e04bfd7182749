"""Synthetic scenario results and documents for the experiment tests (no pytest run needed)."""

from __future__ import annotations

from typing import Any

from fabtest.experiment.export import build_document
from fabtest.experiment.model import (
    CheckRecord,
    ExperimentInfo,
    ScenarioResult,
    ToolCallRecord,
    TopicRecord,
    TurnRecord,
    UsageRecord,
)
from fabtest.experiment.stable_id import stable_id

CRITERIA = {"friendly": "The agent is warm and polite", "concise": "At most 3 sentences"}
TOPICS = [
    TopicRecord(name="greeting", characteristic="greets", successors=["gathering"]),
    TopicRecord(name="gathering", characteristic="asks details", successors=["presenting"]),
    TopicRecord(name="presenting", characteristic="shows venues", successors=[]),
]


def check(criterion: str, status: str = "passed", mode: str = "should", type_: str = "satisfy", turn: int = 1, **data: Any) -> CheckRecord:
    passed = {"passed": True, "failed": False}.get(status)
    return CheckRecord(type=type_, mode=mode, criterion=criterion, status=status, passed=passed, turn=turn,
                       details=f"{criterion} {status}", data=dict(data))


def make_result(
    name: str = "booking",
    *,
    feature: str = "Venue booking",
    rule: str | None = None,
    record_id: str | None = None,
    passed: bool = True,
    iteration: int = 1,
    turns: int = 3,
    evals: list[tuple[str, str]] | None = None,
    expects: list[tuple[str, str]] | None = None,
    failure_type: str | None = None,
    skipped: bool = False,
    criteria: dict[str, str] | None = None,
    topics: list[TopicRecord] | None = None,
    simulator: dict[str, Any] | None = None,
    extra_checks: list[CheckRecord] | None = None,
) -> ScenarioResult:
    evals = [("friendly", "passed"), ("concise", "passed")] if evals is None else evals
    expects = [("call search_venues", "passed")] if expects is None else expects
    topic_names = ["greeting", "gathering", "presenting"][: max(1, min(3, turns))]
    transcript = [
        TurnRecord(
            number=i + 1,
            user=f"user line {i + 1} <b>&",
            agent=f"agent reply {i + 1}",
            tool_calls=[ToolCallRecord(name="search_venues", arguments={"city": "Berlin", "size": 10}, result=[{"name": "Loft"}])] if i == 1 else [],
            topic=topic_names[min(i, len(topic_names) - 1)],
            duration_s=0.5,
        )
        for i in range(turns)
    ]
    if failure_type is None and not passed and not skipped:
        failure_type = "assertion"
    return ScenarioResult(
        id=stable_id(feature, rule, name, record_id),
        name=name,
        nodeid=f"features/venue.feature::{name}",
        feature=feature,
        feature_file="features/venue.feature",
        rule=rule,
        record_id=record_id,
        iteration=iteration,
        passed=passed and not skipped,
        skipped=skipped,
        skip_reason="set GEMINI_API_KEY" if skipped else None,
        turns=0 if skipped else turns,
        topics_visited=[] if skipped else list(dict.fromkeys(t.topic for t in transcript)),
        topic_path=[] if skipped else [t.topic for t in transcript],
        failure_type=None if passed or skipped else failure_type,  # type: ignore[arg-type]
        failure_message=None if passed or skipped else f"{failure_type}: expectation failed at turn {turns}",
        evaluations=[check(c, s, turn=i + 1) for i, (c, s) in enumerate(evals)] + list(extra_checks or []),
        expectations=[check(c, s, mode="must", type_="call_tool") for c, s in expects],
        transcript=[] if skipped else transcript,
        usage={"judge": UsageRecord(calls=2, input_tokens=300, output_tokens=40)},
        duration_s=1.25,
        criteria=dict(CRITERIA if criteria is None else criteria),
        topics=list(TOPICS if topics is None else topics),
        simulator=simulator,
    )


def make_info(experiment_id: str = "exp_aaaaaa", **kw: Any) -> ExperimentInfo:
    data: dict[str, Any] = {"id": experiment_id, "timestamp": "2025-01-16T14:30:00Z", "name": "Prompt v2.3",
                            "tags": ["grounding"], "judge_provider": "gemini", "judge_model": "gemini-2.0-flash"}
    data.update(kw)
    return ExperimentInfo(**data)


def make_doc(experiment_id: str, results: list[ScenarioResult], **kw: Any) -> dict[str, Any]:
    return build_document(make_info(experiment_id, **kw), results)
