"""The small engine pieces playbooks run on: simulate(first=, until=), add_check, judge_criteria,
redacted turn logs, the one transcript renderer, and the playbook agent's target resolution."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from fabtest.agents.registry import DEFAULT_PLAYBOOK_AGENT, PLAYBOOK_AGENT_ENV, playbook_agent_target
from fabtest.conversation import AgentResponse, Check, Conversation, ToolCall, Turn
from fabtest.config.criteria import Criterion
from fabtest.engine import LLMRoles, ScenarioState, transcript
from fabtest.errors import NeedsLLM
from fabtest.config.settings import Settings
from fabtest.testing import FakeLLM


def _state(tmp_path: Path, llm: Any = None, **fields: Any) -> tuple[ScenarioState, list[str]]:
    received: list[str] = []

    def agent(messages: Any) -> str:
        received.append(messages[-1].content)
        return f"reply {len(received)}"

    state = ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={},
                          llms=LLMRoles(judge=llm, simulator=llm), default_agent=agent, **fields)
    state.configure_simulator(goal="book a room", max_turns=5)
    return state, received


def test_simulate_sends_first_verbatim_and_stops_when_until_says_so(tmp_path: Path) -> None:
    fake = FakeLLM().simulated_user(["second line", "third line", "fourth line"])
    state, received = _state(tmp_path, fake)
    reason = state.simulate(first="Hello, verbatim", until=lambda conv: "done" if len(conv.turns) == 3 else None)
    assert reason == "done"
    assert received == ["Hello, verbatim", "second line", "third line"]
    assert state.simulated_text == "third line"  # the latest simulated message, for a failed turn's trace


def test_simulate_without_first_asks_the_simulator_from_the_start(tmp_path: Path) -> None:
    state, received = _state(tmp_path, FakeLLM().simulated_user(["only line"]))
    reason = state.simulate()
    assert received == ["only line"] and "finished its goal" in reason
    assert state.simulated_text == "Thanks, that's all."  # the goal-complete message, never sent


def test_add_check_records_a_failed_must_without_raising(tmp_path: Path) -> None:
    state, _ = _state(tmp_path)
    state.add_check(Check("files_exist", "must", "files_exist:a.txt", "failed", None, "a.txt does not exist"))
    state.finish(verify=False)
    assert [(c.label, c.status) for c in state.conversation.expectations] == [("files_exist:a.txt", "failed")]


def test_judge_criteria_is_one_call_charged_to_the_conversation(tmp_path: Path) -> None:
    fake = FakeLLM().verdicts({"polite": "passed", "brief": "failed"})
    state, _ = _state(tmp_path, fake)
    state.user_says("hi")
    verdicts = state.judge_criteria([Criterion("polite", "polite"), Criterion("brief", "brief")],
                                    transcript.for_judge(state.conversation), "conversation")
    assert [(v.criterion, v.verdict) for v in verdicts] == [("polite", "passed"), ("brief", "failed")]
    assert len([c for c in fake.calls if c.purpose != "simulated_user"]) == 1
    assert state.conversation.usage["judge"].calls == 1
    without, _ = _state(tmp_path)
    with pytest.raises(NeedsLLM):
        without.judge_criteria([Criterion("polite", "polite")], "x", "conversation")


def test_logged_turns_go_through_the_redact_hook(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state, _ = _state(tmp_path, redact=lambda text: text.replace("s3cret", "***"))
    with caplog.at_level(logging.INFO, logger="fabtest.conversation"):
        state.user_says("my token is s3cret")
    assert "s3cret" not in caplog.text and "my token is ***" in caplog.text


def _conversation() -> Conversation:
    conv = Conversation()
    call = ToolCall(name="search_venues", arguments={"city": "Berlin"})
    conv.turns.append(Turn(number=1, user="Hi", response=AgentResponse("x" * 2100, tool_calls=[call]), topic="greeting"))
    return conv


def test_render_is_what_a_person_reads_under_a_failure() -> None:
    text = transcript.render(_conversation())
    lines = text.splitlines()
    assert lines[0] == "Turn 1  [topic: greeting]" and lines[1] == "  user:  Hi"
    assert lines[2].endswith("... [100 more characters]") and lines[3].startswith("  tools: search_venues")


def test_for_judge_shows_each_tool_call_with_its_arguments() -> None:
    assert transcript.for_judge(_conversation()).splitlines() == [
        'turn 1 user: "Hi"', 'turn 1 tool call: "search_venues" arguments {"city": "Berlin"} result null',
        'turn 1 agent: "' + "x" * 2100 + '"']


def test_playbook_agent_target_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PLAYBOOK_AGENT_ENV, raising=False)
    settings = Settings(playbook_agent="pkg.bot:from_settings")
    assert playbook_agent_target("pkg.bot:explicit", settings=settings) == "pkg.bot:explicit"
    assert playbook_agent_target(settings=settings, environ={PLAYBOOK_AGENT_ENV: "pkg.bot:env"}) == "pkg.bot:env"
    assert playbook_agent_target(settings=settings, environ={}) == "pkg.bot:from_settings"
    assert playbook_agent_target(environ={}) == DEFAULT_PLAYBOOK_AGENT
