"""Flakiness attribution end to end: two iterations through the real google-genai client against
FakeGemini, with a judge that flips on purpose (cause "judge") and a simulated user that takes
another path (cause "simulator"); plus the agent and undetermined cases on recorded results."""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.experiment.attribution import attribute_flakiness
from fabtest.experiment.model import CheckRecord, ScenarioResult, TurnRecord
from fabtest.report.console import render_summary
from fabtest.report.html import render_experiment_html
from fabtest.testing import FakeGemini

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
results_dir = "results"

[tool.fabtest.agents]
venue_bot = "fabtest.demo:build_agent"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 1
timeout = 5

[tool.fabtest.simulator]
backoff = 0.01
max_retries = 1
timeout = 5
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server


def run(pytester: pytest.Pytester, feature: str) -> dict[str, Any]:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makefile(".feature", scenario=textwrap.dedent(feature))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_flaky",
                                "--fabtest-no-preflight", "--fabtest-iterations", "2")
    result.assert_outcomes(passed=1, failed=1)
    return json.loads((pytester.path / "results" / "exp_flaky.json").read_text())


def verdicts(fake: FakeGemini, decide: Any) -> None:
    def answer(request: Any) -> dict[str, Any]:
        subject = request.text.split("<<<", 1)[1].split(">>>", 1)[0]
        names = [line.split("name: ", 1)[1].strip() for line in request.text.splitlines() if ". name: " in line]
        return {"verdicts": [{"criterion": n, "verdict": decide(subject), "reasoning": "scripted"} for n in names]}

    fake.add_rule(r"Evaluate the ", callback=answer)


def test_a_judge_that_flips_is_named(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    flips = itertools.cycle(["passed", "failed"])
    verdicts(fake, lambda subject: next(flips))
    doc = run(pytester, """
        Feature: Greeting
          Scenario: Friendly greeting
            Given the agent "venue_bot"
            When the user says "Hello!"
            Then the response must satisfy "friendly"
    """)
    [cause] = doc["variance"]["flaky_causes"]
    assert cause["cause"] == "judge" and cause["turn"] is None
    assert "friendly (turn 1): passed in 1, failed in 2" in cause["evidence"]
    assert "(flaky: judge; same transcript in every run" in render_summary(doc)
    assert "flaky: judge (same transcript in every run" in render_experiment_html(doc)


def test_a_simulator_that_takes_another_path_is_named(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    said = itertools.cycle([{"message": "A room in Berlin for 10 people on 12 March", "goal_complete": False},
                            {"message": "Thanks, bye", "goal_complete": True},
                            {"message": "A room in Paris for 10 people on 12 March", "goal_complete": False},
                            {"message": "Thanks, bye", "goal_complete": True}])
    fake.add_rule(r"Write your next message to the agent", callback=lambda request: next(said))
    verdicts(fake, lambda subject: "passed" if "Berlin" in subject else "failed")
    doc = run(pytester, """
        Feature: Booking
          Scenario: Booking a room
            Given the agent "venue_bot"
            And a simulated user with the goal "Book a room for 10 people on 12 March"
            And the simulation takes at most 4 turns
            When the simulated user talks to the agent
            Then the conversation must satisfy "The user asked for Berlin"
    """)
    [cause] = doc["variance"]["flaky_causes"]
    assert cause["cause"] == "simulator" and cause["turn"] == 1
    assert cause["evidence"] == "the user turns diverge at turn 1 (iterations 1 and 2)"
    assert "(flaky: simulator; the user turns diverge at turn 1" in render_summary(doc)


def _run(iteration: int, passed: bool, turns: list[tuple[str, str]], status: str = "passed",
         failure_type: str | None = None) -> ScenarioResult:
    return ScenarioResult(
        id="example:1", name="S", iteration=iteration, passed=passed, failure_type=failure_type,  # type: ignore[arg-type]
        transcript=[TurnRecord(number=i, user=u, agent=a) for i, (u, a) in enumerate(turns, 1)],
        expectations=[CheckRecord(type="satisfy", mode="must", criterion="c", status=status, turn=1)])  # type: ignore[arg-type]


def test_agent_and_undetermined_causes() -> None:
    same_user = [_run(1, True, [("hi", "hello"), ("book", "booked")]),
                 _run(2, False, [("hi", "hello"), ("book", "cannot")], "failed")]
    [agent] = attribute_flakiness(same_user)
    assert (agent.cause, agent.turn) == ("agent", 2)
    assert agent.evidence == "same user turns, the agent's response differs at turn 2 (iterations 1 and 2)"
    errored = [same_user[0], _run(2, False, [("hi", "hello")], "failed", failure_type="error")]
    assert attribute_flakiness(errored)[0].cause == "undetermined"
    identical = [_run(1, True, [("hi", "hello")]), _run(2, False, [("hi", "hello")])]
    assert attribute_flakiness(identical)[0].evidence == "same transcript and verdicts in every run"
    assert attribute_flakiness([same_user[0], _run(2, True, [("x", "y")])]) == []  # not flaky: both passed
