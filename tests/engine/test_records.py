"""A scenario-set record in the engine: typed after loading, verified without pytest."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabtest import AgentResponse, ExpectationFailed, ToolCall
from fabtest.engine import LLMRoles, ScenarioState
from fabtest.engine.outcome import conclude, ended
from fabtest.errors import UsageError
from fabtest.config.scenario_sets import ScenarioRecord, Verification, parse_scenario_set
from fabtest.config.settings import Settings


def _record(tmp_path: Path, verification: str) -> ScenarioRecord:
    path = tmp_path / "set.json"
    path.write_text('[{"id": "b1", "goal": "Book Berlin", "persona": "terse", "context": {"city": "Berlin"}, '
                    f'"verification": {verification}}}]')
    return parse_scenario_set(path, "set")[0]


def test_verification_is_typed_after_loading(tmp_path: Path) -> None:
    record = _record(tmp_path, '{"call_tool": "book_venue", "max_turns": 3, "reached_topic": null}')
    assert record.checks == Verification(call_tool="book_venue", max_turns=3)
    assert record.to_dict()["verification"] == {"call_tool": "book_venue", "max_turns": 3, "reached_topic": None}


def _state(tmp_path: Path, record: ScenarioRecord | None, reply: AgentResponse) -> ScenarioState:
    return ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                         default_agent=lambda messages: reply, where="set.feature:3", record=record)


def test_use_record_configures_the_simulated_user(tmp_path: Path) -> None:
    state = _state(tmp_path, _record(tmp_path, '{"max_turns": 4}'), AgentResponse("ok"))
    state.use_record()
    config = state.simulator_config
    assert (config.goal, config.persona, config.facts, config.max_turns) == ("Book Berlin", "terse", {"city": "Berlin"}, 4)


def test_the_verification_is_checked_when_the_scenario_finishes(tmp_path: Path) -> None:
    booked = _state(tmp_path, _record(tmp_path, '{"call_tool": "book_venue", "max_turns": 2}'),
                    AgentResponse("Booked", [ToolCall("book_venue", {})]))
    booked.user_says("book it")
    booked.finish()
    assert [(c.kind, c.status) for c in booked.conversation.expectations] == [("call_tool", "passed"), ("turn_count", "passed")]

    chatty = _state(tmp_path, _record(tmp_path, '{"call_tool": "book_venue"}'), AgentResponse("Maybe later"))
    chatty.user_says("book it")
    with pytest.raises(ExpectationFailed, match="call_tool:book_venue"):
        chatty.finish()


def test_use_record_without_a_record_names_the_tag(tmp_path: Path) -> None:
    state = _state(tmp_path, None, AgentResponse("ok"))
    with pytest.raises(Exception, match=r"set.feature:3: 'a simulated user from the scenario' needs a scenario tagged"):
        state.use_record()


def test_a_verification_topic_the_feature_does_not_declare_is_a_usage_error_before_any_turn(tmp_path: Path) -> None:
    """`reached_topic: nowhere` could never pass: said at once, naming the record, not as a failed check."""
    state = _state(tmp_path, _record(tmp_path, '{"reached_topic": "bookng"}'), AgentResponse("ok"))
    state.define_topics([{"topic": "greeting", "characteristic": "hello", "triggers": "", "next": "booking"},
                         {"topic": "booking", "characteristic": "books", "triggers": "", "next": ""}])
    with pytest.raises(UsageError, match=r"set\.json: scenarios\[0\]\.verification\.reached_topic: unknown topic "
                                         r"'bookng'; declared: greeting, booking"):
        state.use_record()


def test_a_verification_topic_without_topics_ends_the_scenario_as_an_error_not_an_internal_error(tmp_path: Path) -> None:
    state = _state(tmp_path, _record(tmp_path, '{"reached_topic": "booking"}'), AgentResponse("ok"))
    state.use_record()
    state.user_says("hi")
    exc = conclude(state, None)  # the late verification raises; the scenario ends with it
    assert isinstance(exc, UsageError) and "needs topics: add a Given the topics: table" in str(exc)
    outcome = ended(exc)
    assert (outcome.ending, outcome.failure_type) == ("failed", "error")
