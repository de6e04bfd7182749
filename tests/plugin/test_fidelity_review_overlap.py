"""The simulator-fidelity review runs beside the scenario, like a soft verdict (issue 42, item 2): the
next scenario does not wait for it, and a run it voids late runs again at the end of the run, its
result taking the voided one's place; a failing run waits for its review, so an invalid
conversation never fails the run."""

from __future__ import annotations

from typing import Any

AGENT = '''
import threading, time

from fabtest import AgentResponse, ToolCall
from fabtest.testing import FakeLLM

EVENTS = []  # what happened, in order: the second scenario starts before the first one's review ends
_seen = set()
_lock = threading.Lock()


def build(context):
    EVENTS.append("start " + context["scenario"])
    def chat(messages):
        if "elm" in messages[-1].content.lower():
            return AgentResponse("Done: order P-7 is placed.", [ToolCall("place_order", {})])
        return AgentResponse("Sure! Where should we deliver? (" + context["scenario"] + ")")
    return chat


def review(call):
    """The first review of a conversation finds an invented fact, slowly; the same conversation again is fine."""
    with _lock:
        first = call.subject not in _seen
        _seen.add(call.subject)
    if first:
        time.sleep(0.5)
    EVENTS.append("reviewed " + ("invalid" if first else "valid"))
    return {"reasoning": "r", "invented": ["order number 42"] if first else [], "spoke_as_agent": False}


llm = FakeLLM().simulated_user(["Hi, a large pepperoni please", "12 Elm Street"]).simulator_fidelity(review)
'''

CONFTEST = '''
import json, os, mybot

def pytest_sessionfinish(session):
    with open("events.json", "w") as out:
        json.dump(mybot.EVENTS, out)
'''

FEATURE = '''
Feature: Pizza
  Background:
    Given a simulated user with the goal "Order a pepperoni pizza"
    And the simulated user knows:
      | fact    | value         |
      | address | 12 Elm Street |
    And the simulation stops when the agent calls "place_order"

  Scenario: Ordering
    When the simulated user talks to the agent

  Scenario: Ordering, checked
    When the simulated user talks to the agent
    Then the transcript must contain "a receipt"
'''


def test_a_late_review_voids_the_run_which_runs_again_and_a_failure_waits_for_it(project: Any) -> None:
    project.pyproject('agent = "mybot:build"\nsimulator_retries = 1')
    project.agent(AGENT)
    project.write("conftest.py", CONFTEST)
    project.feature("features/pizza.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm", "mybot:llm", "-p", "no:randomly")
    out = project.output(result)
    # "Ordering" passed, its review voided it late, it ran again and passed; "checked" failed its must,
    # waited for its review (invalid: a skip, not a failure), ran again and failed for real
    result.assert_outcomes(passed=2, skipped=1, failed=1)
    import json

    events = json.loads((project.pytester.path / "events.json").read_text())
    assert events[:2] == ["start Ordering", "start Ordering, checked"], events  # not waited for
    results = project.experiment()["scenario_results"]
    assert [r["name"] for r in results] == ["Ordering", "Ordering, checked"], out  # one result each, in place
    for entry in results:
        tries = entry["simulation"]["tries"]
        assert [(t["attempt"], t["valid"], t["judged"]) for t in tries] == [(1, False, True), (2, True, True)], tries
        assert "invented facts it was not given: order number 42" in tries[0]["problems"][0]
        assert entry["usage"]["judge"]["calls"] >= 1
    ordering, checked = results
    assert ordering["passed"] and not ordering["skipped"]
    assert not checked["passed"] and not checked["skipped"] and "a receipt" in checked["failure_message"]
