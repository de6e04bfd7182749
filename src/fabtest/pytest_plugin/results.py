"""Turning a finished scenario's state into a ScenarioResult (plain data for the report)."""

from __future__ import annotations

from typing import Any

import pytest

from fabtest.conversation import jsonable
from fabtest.engine.scenario import ScenarioState
from fabtest.experiment.model import (
    CheckRecord,
    ScenarioResult,
    TopicRecord,
    turn_records,
    usage_records,
)
from fabtest.experiment.stable_id import stable_id
from fabtest.pytest_plugin.collect import template_of

#: the report's user property carrying a finished scenario's result (plain data, survives xdist)
RESULT_PROPERTY = "fabtest_result"
#: the user property saying which scenario a worker started, so a crash still records it
PENDING_PROPERTY = "fabtest_pending"


def build_result(item: pytest.Item, state: ScenarioState | None, *, passed: bool, skipped: bool, skip_reason: str | None,
                 failure_type: str | None, failure_message: str | None, duration_s: float) -> ScenarioResult:
    """The scenario's result; never raises, so no scenario can take the session down (INTERNALERROR)."""
    if state is None:  # skipped or failed before any fabtest step ran
        return _stateless_result(item, passed=passed, skipped=skipped, skip_reason=skip_reason,
                                 failure_type=failure_type, failure_message=failure_message, duration_s=duration_s)
    try:
        return _full_result(item, state, passed=passed, skipped=skipped, skip_reason=skip_reason,
                            failure_type=failure_type, failure_message=failure_message, duration_s=duration_s)
    except Exception as exc:  # noqa: BLE001 - the boundary validates agent data; this is the last guard
        message = f"fabtest could not record this scenario's conversation ({type(exc).__name__}: {exc})"
        return _stateless_result(item, passed=False, skipped=False, skip_reason=None, failure_type="error",
                                 failure_message="\n".join(m for m in (failure_message, message) if m),
                                 duration_s=duration_s)


def _full_result(item: pytest.Item, state: ScenarioState, *, passed: bool, skipped: bool, skip_reason: str | None,
                 failure_type: str | None, failure_message: str | None, duration_s: float) -> ScenarioResult:
    conv = state.conversation
    template = template_of(getattr(item, "obj", None))
    feature = template.feature.name if template else ""
    rule = template.rule.name if template is not None and template.rule is not None else None
    name = _scenario_name(item, template)
    record_id = str(state.record["id"]) if state.record else None
    return ScenarioResult(
        id=stable_id(feature, rule, name, record_id),
        name=_with_record(name, state.record),
        nodeid=item.nodeid,
        feature=feature,
        feature_file=_relative(item, state.context.get("feature_file", "")),
        rule=rule,
        record_id=record_id,
        iteration=int(state.context.get("iteration", 1)),
        passed=passed,
        skipped=skipped,
        skip_reason=skip_reason,
        turns=len(conv.turns),
        topics_visited=conv.topics_visited,
        topic_path=conv.topic_path,
        backtracked=conv.backtracked,
        off_graph_transitions=conv.off_graph_transitions,
        failure_type=failure_type,  # type: ignore[arg-type]
        failure_message=failure_message,
        evaluations=[CheckRecord.model_validate(c.to_dict()) for c in conv.evaluations],
        expectations=[CheckRecord.model_validate(c.to_dict()) for c in conv.expectations],
        transcript=turn_records(conv),
        usage=usage_records(conv),
        duration_s=round(duration_s, 4),
        criteria={c.name: c.description for c in state.criteria.values()},
        topics=[TopicRecord(**r) for r in state.topics.topic_records()] if state.topics else [],
        simulator=state.simulator_config.to_fingerprint() if state.simulator_config.goal else None,
        agent_metadata=jsonable(state.agent_metadata()),
    )


def _stateless_result(item: pytest.Item, *, passed: bool, skipped: bool, skip_reason: str | None,
                      failure_type: str | None, failure_message: str | None, duration_s: float) -> ScenarioResult:
    template = template_of(getattr(item, "obj", None))
    rule = template.rule.name if template is not None and template.rule is not None else None
    name = _scenario_name(item, template)
    callspec = getattr(item, "callspec", None)
    record = callspec.params.get("fabtest_record") if callspec else None
    record_id = str(record["id"]) if record else None
    iteration = int(callspec.params.get("fabtest_iteration", 1)) if callspec else 1
    return ScenarioResult(
        id=stable_id(template.feature.name, rule, name, record_id), name=_with_record(name, record),
        nodeid=item.nodeid, feature=template.feature.name, feature_file=_relative(item, template.feature.filename), rule=rule,
        record_id=record_id, iteration=iteration, passed=passed, skipped=skipped, skip_reason=skip_reason,
        failure_type=failure_type, failure_message=failure_message,  # type: ignore[arg-type]
        duration_s=round(duration_s, 4),
    )


def _with_record(name: str, record: dict[str, Any] | None) -> str:
    """A scenario-set run is shown by its record's name (its id when it has none)."""
    return f"{name} [{record.get('name') or record['id']}]" if record else name


def _scenario_name(item: pytest.Item, template: Any) -> str:
    if template is None:
        return item.name
    name = template.name
    callspec = getattr(item, "callspec", None)
    example = callspec.params.get("_pytest_bdd_example") if callspec else None
    if example:
        name += " (" + ", ".join(f"{k}={v}" for k, v in example.items()) + ")"
    return name


def _relative(item: pytest.Item, filename: str) -> str:
    """Paths relative to the project root, so results files match across machines."""
    import os

    try:
        return os.path.relpath(filename, str(item.config.rootpath)) if filename else filename
    except ValueError:
        return filename
