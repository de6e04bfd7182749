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
from fabtest.experiment.attribution import attribute_flakiness, attribute_variance
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
         failure_type: str | None = None, turn: int = 1) -> ScenarioResult:
    return ScenarioResult(
        id="example:1", name="S", iteration=iteration, passed=passed, failure_type=failure_type,  # type: ignore[arg-type]
        transcript=[TurnRecord(number=i, user=u, agent=a) for i, (u, a) in enumerate(turns, 1)],
        expectations=[CheckRecord(type="satisfy", mode="must", criterion="c", status=status, turn=turn)])  # type: ignore[arg-type]


def test_agent_and_undetermined_causes() -> None:
    same_user = [_run(1, True, [("hi", "hello"), ("book", "booked")], turn=2),
                 _run(2, False, [("hi", "hello"), ("book", "cannot")], "failed", turn=2)]
    [agent] = attribute_flakiness(same_user)
    assert (agent.cause, agent.turn) == ("agent", 2)
    assert agent.evidence == "same user turns, the agent's response differs at turn 2 (iterations 1 and 2)"
    errored = [same_user[0], _run(2, False, [("hi", "hello")], "failed", failure_type="error")]
    assert attribute_flakiness(errored)[0].cause == "undetermined"
    identical = [_run(1, True, [("hi", "hello")]), _run(2, False, [("hi", "hello")])]
    assert attribute_flakiness(identical)[0].evidence == "same transcript and verdicts in every run"
    assert attribute_flakiness([same_user[0], _run(2, True, [("x", "y")])]) == []  # not flaky: both passed


# --- issue 27, point 11: the judge is questioned before the conversation is blamed -------------


def run_with(pytester: pytest.Pytester, feature: str, judge_extra: str = "", outcomes: dict[str, int] | None = None,
             experiment: str = "exp_flaky") -> dict[str, Any]:
    pytester.makefile(".toml", pyproject=PYPROJECT.replace("[tool.fabtest.judge]\n", "[tool.fabtest.judge]\n" + judge_extra))
    pytester.makefile(".feature", scenario=textwrap.dedent(feature))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", experiment,
                                "--fabtest-no-preflight", "--fabtest-iterations", "2")
    result.assert_outcomes(**(outcomes or {"passed": 1, "failed": 1}))
    return json.loads((pytester.path / "results" / f"{experiment}.json").read_text())


def criteria_requests(fake: FakeGemini) -> list[Any]:
    return [r for r in fake.requests if "Evaluate the " in r.text]


def test_a_must_that_flips_at_turn_1_is_the_judge_not_undetermined(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    """The failing run stops at turn 1, the passing one goes on: the transcripts differ only in
    length, which alone says "undetermined". Turn 1 is the same in both and was judged otherwise."""
    flips = itertools.cycle(["passed", "failed"])
    verdicts(fake, lambda subject: next(flips))
    doc = run_with(pytester, """
        Feature: Greeting
          Scenario: Friendly greeting, then a question
            Given the agent "venue_bot"
            When the user says "Hello!"
            Then the response must satisfy "friendly"
            When the user says "I need a room in Berlin"
    """)
    [cause] = doc["variance"]["flaky_causes"]
    assert (cause["cause"], cause["turn"], cause["criterion"]) == ("judge", 1, "friendly")
    assert cause["evidence"] == '"friendly" (turn 1) judged on the same turn 1: passed in iteration 1, failed in iteration 2'
    assert "(flaky: judge; \"friendly\" (turn 1) judged on the same turn 1" in render_summary(doc)
    assert len(criteria_requests(fake)) == 2  # free: the recorded verdicts suffice, no call is added


SIMULATED = """
    Feature: Greeting
      Scenario: Simulated greeting
        Given the agent "venue_bot"
        And a simulated user with the goal "Say hello"
        And the simulation takes at most 2 turns
        When the simulated user talks to the agent
        Then the conversation must satisfy "friendly"
"""


def greet(fake: FakeGemini) -> None:
    """The simulated user opens with "hi" in the first run and "hello" in the second, then leaves."""
    said = itertools.cycle([{"message": "hi", "goal_complete": False}, {"message": "Thanks, bye", "goal_complete": True},
                            {"message": "hello", "goal_complete": False}, {"message": "Thanks, bye", "goal_complete": True}])
    fake.add_rule(r"Write your next message to the agent", callback=lambda request: next(said))


def test_a_judge_flip_beside_harmless_user_wording_is_the_judge_when_re_judged(pytester: pytest.Pytester,
                                                                                fake: FakeGemini) -> None:
    """"hi" against "hello" makes the transcripts part at turn 1 (the simulator), but the judge,
    asked again about the failing run's own transcript, does not agree with itself: the judge."""
    greet(fake)
    flips = itertools.cycle(["passed", "failed"])
    verdicts(fake, lambda subject: next(flips))
    doc = run_with(pytester, SIMULATED, judge_extra="attribution_rejudge = 2\n")
    [cause] = doc["variance"]["flaky_causes"]
    assert (cause["cause"], cause["criterion"]) == ("judge", "friendly")
    assert cause["evidence"] == ('"friendly" re-judged 2 times on iteration 2\'s own transcript: passed 1, failed 1 '
                                 "(recorded: failed); the transcripts also differ (the user turns diverge at turn 1 "
                                 "(iterations 1 and 2))")
    calls = criteria_requests(fake)
    assert len(calls) == 4  # two runs, then two re-judgements of the failing run, nothing more
    first, second = calls[0].prompt, calls[1].prompt
    assert first != second and "hello" in second  # iteration 2's transcript: the user said "hello"
    for rejudged in calls[2:]:  # the failing run's own transcript, asked exactly as the judge saw it the first time
        assert rejudged.prompt == second


def test_without_re_judging_the_same_case_stays_on_the_transcripts(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    """The re-judgement is opt-in: by default no judge call is added and the divergence decides."""
    greet(fake)
    flips = itertools.cycle(["passed", "failed"])
    verdicts(fake, lambda subject: next(flips))
    doc = run_with(pytester, SIMULATED)
    [cause] = doc["variance"]["flaky_causes"]
    assert (cause["cause"], cause["turn"]) == ("simulator", 1)
    assert len(criteria_requests(fake)) == 2


def test_a_recorded_split_of_samples_names_the_judge_for_free() -> None:
    """``samples = 3`` that split 2-1 on the failing run: the judge disagreed with itself on one
    transcript, whatever the simulated user said in the other run."""
    passing = _run(1, True, [("hi", "Hello! How can I help?")])
    failing = _run(2, False, [("hello", "Hello! How can I help?")], "failed")
    failing.expectations[0].data = {"scope": "response", "samples": {"failed": 2, "passed": 1}}
    [cause] = attribute_flakiness([passing, failing])
    assert (cause.cause, cause.turn, cause.criterion) == ("judge", 1, "c")
    assert cause.evidence.startswith("the judge split on \"c\" (turn 1) on iteration 2's own transcript (failed 2, passed 1 samples)")


def test_re_judging_asks_about_the_failing_runs_check_and_trusts_a_steady_judge() -> None:
    asked: list[tuple[int, str]] = []

    def steady(result: ScenarioResult, check: CheckRecord) -> list[str]:
        asked.append((result.iteration, check.criterion))
        return [check.status] * 3  # the judge repeats itself: the conversation, not the judge

    runs = [_run(1, True, [("hi", "Hello!")]), _run(2, False, [("hello", "Hello!")], "failed")]
    for run in runs:
        run.expectations[0].data = {"scope": "response"}
    [cause] = attribute_flakiness(runs, rejudge=steady)
    assert cause.cause == "simulator"
    assert asked == [(2, "c"), (1, "c")]  # the failing run's own transcript first, then the passing one's


def _soft(iteration: int, turns: list[tuple[str, str]], status: str) -> ScenarioResult:
    return ScenarioResult(
        id="example:2", name="Soft", iteration=iteration, passed=True,
        transcript=[TurnRecord(number=i, user=u, agent=a) for i, (u, a) in enumerate(turns, 1)],
        evaluations=[CheckRecord(type="satisfy", mode="should", criterion="concise", status=status, turn=2,  # type: ignore[arg-type]
                                 data={"scope": "response"})])


def test_flaky_soft_criteria_are_reported_with_their_cause() -> None:
    """Every run passed, so no scenario is flaky; the soft verdict still flipped."""
    same = [_soft(1, [("hi", "Hello"), ("book", "Booked")], "passed"),
            _soft(2, [("hi", "Hello"), ("book", "Booked")], "failed")]
    found = attribute_variance(same)
    assert found.scenarios == []
    [soft] = found.criteria
    assert (soft.criterion, soft.turn, soft.verdicts, soft.cause) == ("concise", 2, "passed in 1, failed in 2", "judge")
    [agent] = attribute_variance([same[0], _soft(2, [("hi", "Hello"), ("book", "Sorry, no")], "failed")]).criteria
    assert (agent.cause, agent.evidence) == ("agent", "same user turns, the agent's response differs at turn 2 (iterations 1 and 2)")
    assert attribute_variance([same[0], _soft(2, [("hi", "Hello"), ("book", "Booked")], "passed")]).criteria == []


def test_a_flaky_soft_criterion_reaches_the_json_the_summary_and_the_view(pytester: pytest.Pytester,
                                                                           fake: FakeGemini) -> None:
    from fabtest.view.scenarios import experiment_page

    flips = itertools.cycle(["passed", "failed"])
    verdicts(fake, lambda subject: next(flips))
    doc = run_with(pytester, """
        Feature: Greeting
          Scenario: Friendly greeting
            Given the agent "venue_bot"
            When the user says "Hello!"
            Then the response should satisfy "friendly"
    """, outcomes={"passed": 2})
    assert doc["variance"]["flaky_causes"] == []
    # soft verdicts finish after their scenario, so which run got the failed one may vary
    recorded = {s["iteration"]: s["evaluations"]["details"][0]["status"] for s in doc["scenario_results"]}
    assert sorted(recorded.values()) == ["failed", "passed"]
    verdicts_text = f"{recorded[1]} in 1, {recorded[2]} in 2"
    [soft] = doc["variance"]["flaky_criteria"]
    assert {k: soft[k] for k in ("name", "criterion", "turn", "verdicts", "cause")} == {
        "name": "Friendly greeting", "criterion": "friendly", "turn": 1, "verdicts": verdicts_text, "cause": "judge"}
    summary = render_summary(doc)
    assert "Flaky soft criteria: 1" in summary
    assert f"- Friendly greeting: friendly (turn 1): {verdicts_text} (flaky: judge; " in summary
    page = experiment_page(doc)
    assert "Flaky soft criteria (1)" in page and verdicts_text in page
