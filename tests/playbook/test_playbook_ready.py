"""``run_playbook(ready=...)``: what ``fabtest run`` waits for (the pre-flight's LLM probe, the
recorder) once the agent is built and starting, before the first step; when it fails, nothing of
the playbook is kept, as if it had failed before the call."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.conversation import AgentResponse, Message
from fabtest.demo.offline_llm import demo_llm
from fabtest.engine.preflight import PreflightFailed
from fabtest.playbook import run_playbook
from fabtest.playbook.load import validate_playbook

PLAYBOOK = {"name": "ready", "steps": [{"user_input": "Hello there", "expected_outcome": "The agent is friendly"},
                                       {"user_input": "Thanks", "expected_outcome": "The agent is friendly"}]}


class Agent:
    """Notes what happened to it, in order, in the shared ``events``."""

    def __init__(self, events: list[str], context: dict[str, Any]) -> None:
        self.events = events
        self.workspace = Path(context["workspace"])

    @contextlib.contextmanager
    def around(self) -> Iterator[None]:
        self.events.append("around entered")  # an ACP agent starts its process here
        try:
            yield
        finally:
            self.events.append("around exited")

    def chat(self, messages: list[Message]) -> AgentResponse:
        self.events.append(f"chat: {messages[-1].content}")
        return AgentResponse(text="Hello, happy to help!")


def _run(tmp_path: Path, events: list[str], ready: Any, agents: list[Agent] | None = None) -> Any:
    agents = [] if agents is None else agents

    def factory(context: dict[str, Any]) -> Agent:
        agents.append(Agent(events, context))
        return agents[-1]

    outcome = run_playbook(validate_playbook(PLAYBOOK, source=str(tmp_path / "pb.json")),
                           agent_factory=factory, judge_llm=demo_llm(), simulator_llm=demo_llm(), repo_root=tmp_path,
                           results_dir=tmp_path / "results", ready=ready)
    return outcome, agents


def test_ready_is_waited_for_after_the_agent_starts_and_before_the_first_step(tmp_path: Path) -> None:
    events: list[str] = []
    outcome, _ = _run(tmp_path, events, lambda: events.append("ready"))
    assert outcome.passed, outcome.failure_message
    assert events == ["around entered", "ready", "chat: Hello there", "chat: Thanks", "around exited"]


def test_a_failing_ready_propagates_and_keeps_nothing_of_the_playbook(tmp_path: Path) -> None:
    events: list[str] = []
    agents: list[Agent] = []

    def ready() -> None:
        events.append("ready")
        raise PreflightFailed(["the judge LLM did not answer a pre-flight call: HTTP 403"], skip_option="--no-preflight")

    with pytest.raises(PreflightFailed, match="HTTP 403"):
        _run(tmp_path, events, ready, agents)
    assert events == ["around entered", "ready", "around exited"]  # no step was sent; the agent was stopped
    (agent,) = agents
    assert not agent.workspace.exists()  # removed, not kept as after a failure
    assert not (tmp_path / "results").exists()  # no trace


def test_a_failing_ready_wins_over_an_agent_that_cannot_be_built(tmp_path: Path) -> None:
    """Before the probe overlapped the agent's start, a failed pre-flight came first: it still does."""
    def ready() -> None:
        raise PreflightFailed(["the judge LLM did not answer"])

    def broken(context: dict[str, Any]) -> Any:
        raise RuntimeError("no such agent")

    with pytest.raises(PreflightFailed):
        run_playbook(validate_playbook(PLAYBOOK, source="pb.json"), agent_factory=broken, judge_llm=demo_llm(),
                     simulator_llm=None, repo_root=tmp_path, ready=ready)
    assert not (tmp_path / "results").exists()


def test_ready_is_waited_for_when_the_playbook_is_skipped(tmp_path: Path) -> None:
    events: list[str] = []
    outcome = run_playbook(validate_playbook(PLAYBOOK, source="pb.json"), agent_factory=lambda c: Agent(events, c),
                           judge_llm=None, simulator_llm=None, repo_root=tmp_path, ready=lambda: events.append("ready"))
    assert outcome.skipped and events == ["ready"]  # no judge: skipped, no agent built
