"""Issue 44, point 7: the simulated user's and the judge's failures are theirs, never the agent's.

On main a simulated user that wrote the agent's lines on every try ended the run as failure type
``error`` (the gate then called an unchanged agent "worse"); a judge outage on a ``must`` check
was the agent's ``error`` too; and the requests of a judge whose answers were all unusable were not
counted ("judge calls 0" after 60 requests).
"""

from __future__ import annotations

import fabtest
from fabtest import AgentResponse, Message
from fabtest.config.settings import Settings
from fabtest.conversation import TokenUsage
from fabtest.llm.base import LLMBadOutput, LLMTimeout
from fabtest.testing import FakeLLM


def _agent(messages: list[Message]) -> AgentResponse:
    return AgentResponse("Hello! Where is your event?")


def test_a_simulated_user_writing_the_agents_lines_is_a_simulator_failure() -> None:
    sim = FakeLLM().simulated_user(lambda call: {"message": "Agent: Happy to help, where is it?", "goal_complete": False})
    result = fabtest.run(_agent, user=fabtest.SimulatedUser(goal="Book a room", max_turns=3), simulator=sim,
                         settings=Settings())
    assert not result.passed and result.failure_type == "simulator"
    assert "the simulated user failed: " in (result.failure_message or "")
    assert "replied as the agent instead of the user 3 times" in (result.failure_message or "")
    assert result.usage["simulator"].calls == 3  # every request it made is counted


def test_a_judge_outage_on_a_must_check_is_the_judges_failure() -> None:
    def down(call):
        raise LLMTimeout("judge: timed out on every attempt")

    result = fabtest.run(_agent, user=["Hi"], must=["The agent greets"], judge=FakeLLM().verdicts(default=down),
                         settings=Settings())
    assert not result.passed and result.failure_type == "judge"
    assert "the judge failed for good on a must check: judge: timed out" in (result.failure_message or "")


def test_unusable_judge_answers_are_skipped_checks_and_their_requests_are_counted() -> None:
    def garbage(call):  # as the provider raises it (llm/limits.py): with what its requests cost
        exc = LLMBadOutput("judge (criteria): no usable answer after 3 attempt(s)")
        exc.usage = TokenUsage(calls=1, input_tokens=100, output_tokens=5)
        raise exc

    result = fabtest.run(_agent, user=["Hi"], should=["The agent greets", "The agent is brief"],
                         judge=FakeLLM().verdicts(default=garbage), settings=Settings())
    assert result.passed  # the soft checks are skipped; the run's own exit status is the plugin's matter
    assert {e.status for e in result.evaluations} == {"skipped"}
    assert all(e.details.startswith("judge failed: ") for e in result.evaluations)
    assert result.usage["judge"].calls == 1  # main: 0, though the batch of both criteria made its request
