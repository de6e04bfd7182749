"""An agent's token usage that cannot be read (issue 30): a cost budget is inconclusive, never passed at
$0.00, and infinite token counts keep the scenario's transcript, with a message naming the field."""

from __future__ import annotations

import json

import pytest

from fabtest.conversation import AgentResponse, Turn
from fabtest.engine import budget
from fabtest.experiment.cost import Price, agent_turn_usage

PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent = "counting:agent"

[tool.fabtest.prices]
m = {input = 1.0, output = 1.0}
'''

AGENT = '''
from fabtest import AgentResponse


def agent(messages):
    usage = {{"input_tokens": {usage}, "output_tokens": 10}}
    return AgentResponse(text="hello", metadata={{"model": "m", "usage": usage}})
'''

FEATURE = '''Feature: Budget
  Scenario: cheap
    When the user says "hi"
    Then the conversation must cost less than $0.05
'''


@pytest.mark.parametrize("usage", ["float('inf')", "float('nan')", "'lots'", "-5", "[1]"])
def test_an_unreadable_usage_never_passes_a_cost_budget_and_keeps_the_transcript(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, usage: str) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makepyfile(counting=AGENT.format(usage=usage))
    pytester.makefile(".feature", budget=FEATURE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "--fabtest-experiment-id", "exp_usage", "--fabtest-no-preflight")
    output = result.stdout.str() + result.stderr.str()
    assert "OverflowError" not in output and "Traceback" not in output, output
    doc = json.loads((pytester.path / "results" / "exp_usage.json").read_text(encoding="utf-8"))
    [scenario] = doc["scenario_results"]
    assert scenario["transcript"][0]["agent"] == "hello"  # the conversation is kept
    [check] = [c for c in scenario["expectations"]["details"] if c["type"] == "cost"]
    assert check["status"] == "inconclusive", check
    assert "usage" in check["details"] and "input_tokens" in check["details"]


def test_a_readable_usage_is_still_priced() -> None:
    turn = Turn(number=1, user="hi", response=AgentResponse(text="x", metadata={
        "model": "m", "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}))
    spent, unknown = budget.conversation_cost([turn], {}, {}, {"m": Price(input=2.0, output=0.0)})
    assert (spent, unknown) == (2.0, [])
    assert budget.cost_outcome(3.0, spent, unknown)[0] == "passed"
    assert agent_turn_usage({"usage": {"input_tokens": float("inf"), "output_tokens": 1}}) == (1, 0, 1)
