"""LLM-backed scenarios end to end: the real google-genai client against FakeGemini on 127.0.0.1.

Each test writes a small project (pyproject + feature) that uses the demo agent, points the judge
and simulator at a FakeGemini answering with the offline heuristics (or injected faults), runs
pytest on it, and reads the experiment JSON back.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.testing import FakeGemini

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
results_dir = "results"

[tool.fabtest.agents]
venue_bot = "fabtest.demo:build_agent"
grumpy_bot = "fabtest.demo:build_grumpy_agent"
inventive_bot = "fabtest.demo:build_inventive_agent"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 3
timeout = 5

[tool.fabtest.simulator]
backoff = 0.01
max_retries = 3
timeout = 5
"""

TOPICS = """
    And the topics:
      | topic              | characteristic                 | triggers                         | next               |
      | greeting           | The agent greets               |                                  | gathering_details  |
      | gathering_details  | The agent asks for details     | agent:/(?i)which city\\|how many/ | presenting_results |
      | presenting_results | The agent presents venues      | tool:search_venues, tool:check_availability | booking |
      | booking            | The agent books the venue      | tool:book_venue                  |                    |
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server


def run(pytester: pytest.Pytester, feature: str, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makefile(".feature", scenario=textwrap.dedent(feature))
    # no pre-flight: its probe would meet the faults injected for the scenarios (see tests/preflight)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_e2e",
                                "--fabtest-no-preflight", *args)
    doc = json.loads((pytester.path / "results" / "exp_e2e.json").read_text())
    return result, doc


def only(doc: dict[str, Any]) -> dict[str, Any]:
    assert len(doc["scenario_results"]) == 1, doc["scenario_results"]
    return doc["scenario_results"][0]


def criteria_calls(fake: FakeGemini) -> list[Any]:
    return [r for r in fake.requests if "CRITERIA" in r.text and "Evaluate the " in r.text]


SIMULATED = """
Feature: Simulated
  Background:
    Given the agent "venue_bot"
""" + TOPICS + """
    And the simulation takes at most 8 turns
    And the simulation stops when the agent calls "book_venue"

  Scenario: Booking in Berlin
    Given a simulated user with the goal "Book a room for 10 people in Berlin on 12 March"
    When the simulated user talks to the agent
    Then the conversation must reach the topic "booking"
    And every response should satisfy "friendly"
    And every response should satisfy "concise"
    And every response should satisfy "The reply names no competitor"
    And the goal must be achieved
"""


def test_simulated_conversation_walks_the_topic_graph(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    result, doc = run(pytester, SIMULATED)
    result.assert_outcomes(passed=1)
    scenario = only(doc)
    # the first reply already asks for details, so the conversation leaves "greeting" on turn 1
    assert scenario["topics_visited"] == ["gathering_details", "presenting_results", "booking"]
    assert scenario["turns"] == 5  # hello, details, an unavailable venue, another venue, confirm
    details = scenario["evaluations"]["details"]
    assert {d["criterion"] for d in details} == {"friendly", "concise", "The reply names no competitor"}
    assert len(details) == 3 * scenario["turns"]
    # soft results are recorded, including failures, and never fail the scenario
    assert any(d["status"] == "failed" for d in details if d["criterion"] == "friendly")
    assert scenario["expectations"]["passed"] == scenario["expectations"]["total"]
    assert doc["summary"]["tokens"]["judge"]["calls"] > 0 and doc["summary"]["tokens"]["simulator"]["calls"] >= 4


def test_one_judge_call_per_turn_and_none_for_triggered_topics(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    run(pytester, SIMULATED)
    # three criteria on each of 5 turns: batched into one call per turn (the naive count is 15)
    assert len(criteria_calls(fake)) == 5
    # every topic change in this conversation is decided by a trigger: no classification call
    assert not [r for r in fake.requests if "CANDIDATE TOPICS" in r.text]


def test_a_response_criterion_sees_its_turn_after_a_window_of_earlier_turns(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    run(pytester, SIMULATED)
    calls = criteria_calls(fake)
    assert len(calls) == 5
    # every call judges one turn, after at most two earlier turns shown as context (issue 27: "Yes,
    # done" means nothing without the question before it); the opening turn has no context
    for call in calls:
        agent_lines = [line for line in call.prompt.splitlines() if re.match(r"turn \d+ agent: ", line)]
        assert 1 <= len(agent_lines) <= 3, call.prompt
        if len(agent_lines) > 1:
            judged = call.prompt.split("(the turn to judge)")[1]
            assert len([line for line in judged.splitlines() if re.match(r"turn \d+ agent: ", line)]) == 1
    opening = [c for c in calls if 'turn 1 user: "Hi, I need a venue for an event."' in c.prompt
               and "(the turn to judge)" not in c.prompt]
    assert len(opening) == 1 and "turn 2" not in opening[0].prompt


def test_a_failing_must_criterion_fails_the_scenario(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    result, doc = run(pytester, """
        Feature: Hard criterion
          Scenario: Grumpy greeting
            Given the agent "grumpy_bot"
            When the user says "Hello!"
            Then the response must satisfy "The agent is warm and polite"
        """)
    result.assert_outcomes(failed=1)
    scenario = only(doc)
    assert scenario["failure_type"] == "assertion"
    assert "warm and polite" in scenario["failure_message"]
    result.stdout.fnmatch_lines(["*scenario.feature:5*", "*agent said:*Which city*"])


def test_grounding_catches_an_invented_price(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    result, doc = run(pytester, """
        Feature: Grounding
          Scenario: Invented price
            Given the agent "inventive_bot"
            When the user says "A room in Berlin for 10 people on 12 March"
            Then the response should be grounded in "search_venues"

          Scenario: Real price
            Given the agent "venue_bot"
            When the user says "A room in Berlin for 10 people on 12 March"
            Then the response must be grounded in "search_venues"
        """)
    result.assert_outcomes(passed=2)
    by_name = {s["name"]: s for s in doc["scenario_results"]}
    invented = by_name["Invented price"]["evaluations"]["details"][0]
    assert invented["status"] == "failed"
    assert any("€225" in claim for claim in invented["unsupported"])  # seed 10.1: data keys beside type
    assert by_name["Real price"]["expectations"]["details"][0]["status"] == "passed"


SCRIPTED_SOFT = """
Feature: Soft
  Scenario: Friendly greeting
    Given the agent "venue_bot"
    When the user says "Hello!"
    Then the response should satisfy "friendly"
"""


def test_429_twice_then_success_passes(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(429, times=2)
    result, doc = run(pytester, SCRIPTED_SOFT)
    result.assert_outcomes(passed=1)
    assert only(doc)["evaluations"]["details"][0]["status"] == "passed"
    assert fake.request_count == 3


def test_persistent_500_on_a_soft_check_skips_it_with_the_reason(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(500, times=None)
    result, doc = run(pytester, SCRIPTED_SOFT)
    result.assert_outcomes(passed=1)  # a soft check's judge failure never fails its scenario
    scenario = only(doc)
    assert scenario["failure_type"] is None
    check = scenario["evaluations"]["details"][0]
    assert check["status"] == "skipped" and check["passed"] is None
    assert check["details"].startswith("judge failed:") and "500" in check["details"]
    assert doc["summary"]["skipped_checks"] == 1 and doc["summary"]["evaluation_rate"] is None
    assert fake.request_count == 4  # the first attempt and 3 retries


def test_persistent_500_on_a_must_is_the_judges_failure_not_an_assertion(pytester: pytest.Pytester,
                                                                         fake: FakeGemini) -> None:
    fake.add_fault(500, times=None)
    result, doc = run(pytester, SCRIPTED_SOFT.replace("should satisfy", "must satisfy"))
    result.assert_outcomes(failed=1)
    scenario = only(doc)
    assert scenario["failure_type"] == "judge"  # not the agent's error (issue 44): the gate leaves it out
    assert "500" in scenario["failure_message"]
    assert fake.request_count == 4


def test_malformed_judge_json_is_retried_then_skips_the_soft_check(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault("malformed_json", times=None)
    result, doc = run(pytester, SCRIPTED_SOFT)
    result.assert_outcomes(passed=1)
    check = only(doc)["evaluations"]["details"][0]
    assert check["status"] == "skipped" and check["details"].startswith("judge failed:")
    assert "no usable answer" in check["details"]
    assert fake.request_count >= 2
    # issue 44 (c): every judged check unusable is nothing tested: never green, and the requests counted
    # (main: exit 0, "judge calls 0")
    assert result.ret == 6
    result.stdout.fnmatch_lines(["*not one of the 1 judged check(s) was rated*The run fails (exit status 6)*"])
    assert doc["summary"]["tokens"]["judge"]["calls"] >= 1


def test_no_judge_with_soft_only_scenarios_is_never_green(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44 (a): no key, a soft-only scenario: it "passed" having judged nothing (main: exit 0).
    ``allow_skip = ["llm"]`` is the explicit way out."""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    result, _ = run(pytester, SCRIPTED_SOFT)
    result.assert_outcomes(passed=1)
    assert result.ret == 6
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-no-preflight",
                                "--fabtest-allow-skip=llm")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*not one of the 1 judged check(s) was rated*allowed by allow_skip*"])


def test_malformed_json_once_is_retried_and_passes(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault("malformed_json", times=1)
    result, doc = run(pytester, SCRIPTED_SOFT)
    result.assert_outcomes(passed=1)
    assert only(doc)["evaluations"]["details"][0]["status"] == "passed"


def test_empty_simulator_reply_is_retried(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault("empty", times=1, pattern="role-playing a HUMAN USER")
    result, doc = run(pytester, SIMULATED)
    result.assert_outcomes(passed=1)
    simulator_requests = [r for r in fake.requests if "role-playing a HUMAN USER" in r.text]
    assert len(simulator_requests) == only(doc)["turns"] + 1


def test_simulator_that_never_answers_is_a_simulator_failure(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault("empty", times=None, pattern="role-playing a HUMAN USER")
    result, doc = run(pytester, SIMULATED)
    result.assert_outcomes(failed=1)
    assert only(doc)["failure_type"] == "simulator"  # never the agent's error (issue 44)


def test_running_out_of_turns_is_max_turns(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    result, doc = run(pytester, SIMULATED.replace("at most 8 turns", "at most 2 turns"))
    result.assert_outcomes(failed=1)
    scenario = only(doc)
    assert scenario["failure_type"] == "max_turns"
    assert scenario["turns"] == 2


def test_without_a_key_llm_scenarios_skip_with_the_variable_to_set(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    result, doc = run(pytester, SIMULATED + SCRIPTED_SOFT.split("Feature: Soft")[1], "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*a simulated user needs the simulator LLM*GEMINI_API_KEY*"])
    soft = next(s for s in doc["scenario_results"] if s["name"] == "Friendly greeting")
    assert soft["evaluations"]["details"][0]["status"] == "skipped"
    assert doc["summary"]["evaluation_rate"] is None
    assert doc["experiment"]["judge"]["model"] is None


def test_example_features_run_end_to_end(fake: FakeGemini) -> None:
    """The shipped features/ against the offline stand-in: every scenario passes."""
    import subprocess
    import sys
    import tempfile

    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as results:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "features", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
             "--fabtest-results-dir", results, "--fabtest-experiment-id", "exp_examples"],
            cwd=root, capture_output=True, text=True, timeout=300,
            env={**__import__("os").environ, **fake.env()},
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        doc = json.loads((Path(results) / "exp_examples.json").read_text())
    assert doc["summary"]["skipped"] == 0
    assert doc["summary"]["failed"] == 0
    names = {s["name"]: s for s in doc["scenario_results"]}
    booking = names["An office manager books a room in Berlin"]
    assert booking["topics_visited"][-1] == "booking"
    grumpy = names["A grumpy booking still completes"]
    assert grumpy["passed"] and grumpy["evaluations"]["passed"] < grumpy["evaluations"]["total"]


def test_calibration_examples_reach_the_judge_from_both_step_forms(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    result, doc = run(pytester, '''
        Feature: Calibrated criteria
          Background:
            Given the criterion "concise" means "At most three sentences" with examples:
              | example                                   | verdict |
              | I found 2 venues. Which one?              | good    |
              | Well. So. Let me see. Hmm. Maybe. Ok.     | bad     |
            And the criterion "polite" means:
              """
              The agent is warm and polite.
              Good: Hello! Happy to help.
              Bad: What do you want?
              """

          Scenario: Judged with calibration
            Given the agent "venue_bot"
            When the user says "Hello!"
            Then the response should satisfy "concise"
            And the response should satisfy "polite"
        ''')
    result.assert_outcomes(passed=1)
    [call] = criteria_calls(fake)  # both criteria of the turn in one call
    prompt = call.prompt
    assert "example that PASSES: I found 2 venues. Which one?" in prompt
    assert "example that FAILS: Well. So. Let me see. Hmm. Maybe. Ok." in prompt
    assert "description: The agent is warm and polite." in prompt
    assert "example that PASSES: Hello! Happy to help." in prompt
    assert "example that FAILS: What do you want?" in prompt
    assert {d["criterion"] for d in only(doc)["evaluations"]["details"]} == {"concise", "polite"}


def test_soft_and_hard_criteria_on_one_turn_keep_their_own_modes(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    result, doc = run(pytester, '''
        Feature: Mixed modes
          Background:
            Given the criterion "friendly" means "The agent is warm and polite"
            And the criterion "concise" means "The reply has at most three sentences"

          Scenario: Soft failure then hard pass
            Given the agent "grumpy_bot"
            When the user says "Hello!"
            Then the response should satisfy "friendly"
            And the response must satisfy "concise"
        ''')
    result.assert_outcomes(passed=1)
    scenario = only(doc)
    [soft] = scenario["evaluations"]["details"]
    [hard] = scenario["expectations"]["details"]
    assert (soft["criterion"], soft["mode"], soft["status"]) == ("friendly", "should", "failed")
    assert (hard["criterion"], hard["mode"], hard["status"]) == ("concise", "must", "passed")
    # the must is judged alone, the should in its own call (issue 27 point 7: no halo from the others)
    calls = criteria_calls(fake)
    assert len(calls) == 2
    assert sorted(len(re.findall(r"^\d+\. name: ", c.prompt, re.MULTILINE)) for c in calls) == [1, 1]


def test_the_agents_purpose_step_in_a_background_reaches_the_judge_of_every_scenario(
        pytester: pytest.Pytester, fake: FakeGemini) -> None:
    """Issue 27 point 4: ``Given the agent's purpose is`` is inherited like a criterion."""
    result, doc = run(pytester, '''
        Feature: Purpose
          Background:
            Given the agent "venue_bot"
            And the agent's purpose is "Books event venues in German cities; nothing else"

          Scenario: One
            When the user says "Hello!"
            Then the response should satisfy "The agent stays within its purpose"

          Scenario: Two
            When the user says "Tell me a joke"
            Then the response should satisfy "The agent stays within its purpose"
        ''')
    result.assert_outcomes(passed=2)
    calls = criteria_calls(fake)
    assert len(calls) == 2
    for call in calls:
        assert "THE AGENT'S PURPOSE (from the test author, not from the transcript)\n" \
               "Books event venues in German cities; nothing else" in call.prompt
