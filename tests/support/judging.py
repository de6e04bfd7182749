"""The judge-sampling project of tests/judging: a scripted scenario with the demo agent, the
judge's criteria calls scripted on FakeGemini per test (steady, or flipping on purpose) so the
split and the flip rate are known. The ``fake`` server fixture is tests/judging/conftest.py's."""

from __future__ import annotations

import itertools
import json
import textwrap
from typing import Any

import pytest

from fabtest.testing import FakeGemini

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
results_dir = "results"
llm_cache = "on"

[tool.fabtest.agents]
venue_bot = "fabtest.demo:build_agent"

[tool.fabtest.criteria]
friendly = "The reply is warm and polite"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 1
timeout = 5
{judge_extra}
"""

FEATURE = """
Feature: Greeting
  Scenario: Friendly greeting
    Given the agent "venue_bot"
    When the user says "Hello!"
    Then the response should satisfy "friendly"
    And the response should satisfy "The reply is short"
"""


def criteria_calls(fake: FakeGemini) -> list[Any]:
    return [r for r in fake.requests if "CRITERIA" in r.text and "Evaluate the " in r.text]


def script_verdicts(fake: FakeGemini, friendly: list[str]) -> None:
    """Criteria calls answer "friendly" with the given verdicts in turn (cycling); the rest pass."""
    cycle = itertools.cycle(friendly)

    def answer(request: Any) -> dict[str, Any]:
        names = [line.split("name: ", 1)[1].strip() for line in request.text.splitlines() if ". name: " in line]
        return {"verdicts": [{"criterion": n, "verdict": next(cycle) if n == "friendly" else "passed",
                              "reasoning": f"scripted for {n}"} for n in names]}

    fake.add_rule(r"Evaluate the ", callback=answer)


def run(pytester: pytest.Pytester, *args: str, judge_extra: str = "") -> dict[str, Any]:
    pytester.makefile(".toml", pyproject=PYPROJECT.format(judge_extra=judge_extra))
    pytester.makefile(".feature", scenario=textwrap.dedent(FEATURE))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_e2e",
                                "--fabtest-no-preflight", *args)
    result.assert_outcomes(passed=1)
    return json.loads((pytester.path / "results" / "exp_e2e.json").read_text())


def friendly_checks(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for s in doc["scenario_results"] for d in s["evaluations"]["details"] if d["criterion"] == "friendly"]
