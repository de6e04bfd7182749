"""Persona mode: a simulated user talks until every success criterion holds, or max_turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabtest.conversation import AgentResponse
from fabtest.playbook import run_playbook

from .helpers import EXAMPLES, REPO, DEMO_CLI, BookingAgent, Recording, write_playbook

INITIAL = "Hi, I need a venue for 10 people in Berlin on 12 March."


def persona(criteria: dict[str, Any], *, max_turns: int = 8, name: str = "persona") -> dict[str, Any]:
    return {"name": name, "persona": {"initial_user_input": INITIAL, "context": "An office manager who answers briefly.",
                                      "max_turns": max_turns, "success_criteria": criteria}}


def test_persona_example_passes_against_the_demo_cli(llm: Any, tmp_path: Path, fake: Any) -> None:
    outcome = run_playbook(EXAMPLES / "persona_booking.playbook.yaml", agent_factory=DEMO_CLI, judge_llm=llm,
                           simulator_llm=llm, repo_root=REPO, results_dir=tmp_path)
    assert outcome.passed, outcome.failure_message
    turns = outcome.conversation.turns
    assert turns[0].user == "Hi, I need a venue for 10 people in Berlin on 12 March."  # verbatim
    assert len(turns) == 4 and "confirmation number" in turns[-1].response.text  # stopped as soon as all held
    kinds = {c.kind for c in outcome.checks}
    assert kinds == {"flow_contains", "files_exist", "files_contain", "tool_calls_contain", "llm_check"}
    assert all(c.status == "passed" for c in outcome.checks)
    # the llm_checks are judged in one call over the transcript, once the cheap criteria held
    judged = [r for r in fake.requests if "CONVERSATION TRANSCRIPT" in r.prompt]
    assert len(judged) == 1 and "The agent stays polite" in judged[0].prompt
    assert outcome.result is not None and outcome.result.simulator is not None
    assert outcome.workspace_path is None


CASES = {
    "flow_contains": ({"flow_contains": ["confirmation number"]}, {"flow_contains": ["cancelled"]}),
    "files_exist": ({"files_exist": ["booking.txt"]}, {"files_exist": ["invoice.txt"]}),
    "files_contain": ({"files_contain": {"booking.txt": ["Booking confirmed", "people: 10"]}},
                      {"files_contain": {"booking.txt": ["Munich"]}}),
    "tool_calls_contain": ({"tool_calls_contain": {"book_venue": ["ber-spree", '"people": 10']}},
                           {"tool_calls_contain": {"book_venue": ["muc-isar"]}}),
    "llm_checks": ({"llm_checks": ["The agent stays polite"]},
                   # the offline judge looks at the latest reply: never friendly AND quoting a price at once
                   {"llm_checks": ["The agent is friendly", "The agent quotes a price"]}),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_success_criterion_passes_when_met_and_fails_when_not(kind: str, llm: Any, tmp_path: Path) -> None:
    met, unmet = CASES[kind]
    ok = run_playbook(write_playbook(tmp_path / "ok", persona(met)), agent_factory=BookingAgent, judge_llm=llm,
                      simulator_llm=llm, repo_root=tmp_path)
    assert ok.passed, ok.failure_message
    assert [c.status for c in ok.checks] and all(c.status == "passed" for c in ok.checks)

    bad = run_playbook(write_playbook(tmp_path / "bad", persona(unmet, max_turns=6)), agent_factory=BookingAgent,
                       judge_llm=llm, simulator_llm=llm, repo_root=tmp_path)
    assert not bad.passed
    # the booking went through, then the simulated user was done: criteria unmet is an assertion
    assert bad.failure_type == "assertion", bad.failure_message
    failed = [c for c in bad.checks if c.status != "passed"]
    assert failed and {c.kind for c in failed} == {"llm_check" if kind == "llm_checks" else kind}
    assert "success criteria are not met" in bad.failure_message and kind.rstrip("s") in bad.failure_message
    assert bad.trace_path is not None and json.loads(bad.trace_path.read_text())["success_criteria"]


def test_tool_calls_contain_fails_when_the_tool_was_never_called(llm: Any, tmp_path: Path) -> None:
    bad = run_playbook(write_playbook(tmp_path, persona({"tool_calls_contain": {"cancel_booking": ["x"]}})),
                       agent_factory=BookingAgent, judge_llm=llm, simulator_llm=llm, repo_root=tmp_path)
    assert not bad.passed and "cancel_booking was never called" in bad.failure_message


class Unhelpful:
    def __init__(self, context: dict[str, Any]) -> None:
        self.received: list[str] = []

    def chat(self, messages: Any, on_tool_call: Any = None) -> AgentResponse:
        self.received.append(messages[-1].content)
        return AgentResponse("Let me look into that.")


def test_criteria_unmet_after_max_turns(llm: Any, tmp_path: Path, fake: Any) -> None:
    agents = Recording(Unhelpful)
    path = write_playbook(tmp_path, persona({"files_exist": ["booking.txt"], "llm_checks": ["The agent stays polite"]},
                                            max_turns=3))
    outcome = run_playbook(path, agent_factory=agents, judge_llm=llm, simulator_llm=llm, repo_root=tmp_path,
                           results_dir=tmp_path / "results")
    assert outcome.failure_type == "max_turns"
    assert len(outcome.conversation.turns) == 3 and len(agents.received) == 3
    assert agents.received[0] == INITIAL
    assert "max_turns=3" in outcome.failure_message and "booking.txt" in outcome.failure_message
    # the LLM checks are judged once, at the end, so their verdict is in the result
    assert len([r for r in fake.requests if "CONVERSATION TRANSCRIPT" in r.prompt]) == 1
    assert {e.type for e in outcome.result.expectations} == {"files_exist", "llm_check"}
    assert outcome.workspace_path is not None and outcome.workspace_path.is_dir()


def test_a_failing_simulator_is_an_error(llm: Any, tmp_path: Path, fake: Any) -> None:
    fake.add_fault(500, pattern="role-playing a HUMAN USER", times=10)
    path = write_playbook(tmp_path, persona({"files_exist": ["booking.txt"]}))
    outcome = run_playbook(path, agent_factory=BookingAgent, judge_llm=llm, simulator_llm=llm, repo_root=tmp_path)
    assert outcome.failure_type == "error" and "simulated user failed" in outcome.failure_message


def test_persona_without_a_simulator_is_skipped(llm: Any, tmp_path: Path) -> None:
    path = write_playbook(tmp_path, persona({"files_exist": ["booking.txt"]}))
    outcome = run_playbook(path, agent_factory=BookingAgent, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    assert outcome.skipped and "simulator" in outcome.skip_reason
