"""``max_concurrency`` stays the one cap on LLM calls in flight while scenarios run concurrently:
six simulated scenarios in flight at once, the judge and the simulated user answered by FakeGemini
through the real google-genai client, at most two LLM calls at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from project import experiment, feature, make_project, run  # type: ignore[import-not-found]

from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

_CRITERION = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)


def _answer(request: FakeRequest) -> Any:
    """A user who is done after two agent replies; every criterion passes."""
    if "role-playing a HUMAN USER" in request.text:
        replies = request.prompt.count("\nAgent: ")
        return {"message": f"question {replies + 1}", "goal_complete": replies >= 2}
    if "Evaluate the " in request.text and "CRITERIA" in request.text:
        return {"verdicts": [{"criterion": n.strip(), "verdict": "passed", "reasoning": "fine"}
                             for n in _CRITERION.findall(request.prompt)]}
    return "OK"


@pytest.fixture
def gemini(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "FABTEST_LLM_CACHE", "FABTEST_MAX_CONCURRENCY"):
        monkeypatch.delenv(var, raising=False)
    with FakeGemini(handler=_answer, latency=0.05) as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server


def test_llm_calls_in_flight_never_exceed_max_concurrency(pytester: pytest.Pytester, gemini: FakeGemini,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BARRIER", "6")  # every agent turn waits until all six scenarios are at it
    simulated = '''
  Scenario: barrier sim {n}
    Given a simulated user with the goal "book a room"
    And the criterion "polite" means "The agent is polite"
    When the simulated user talks to the agent
    Then every response should satisfy "polite"
'''
    root = make_project(pytester, {"sim.feature": feature("Sim", *(simulated.format(n=i) for i in range(6)))},
                        concurrency=6)
    config = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(config.replace("agent_timeout = 0.5", "agent_timeout = 30\nmax_concurrency = 2"))
    result = run(pytester)
    result.assert_outcomes(passed=6)
    assert 1 <= gemini.max_in_flight <= 2
    doc = experiment(root)
    assert all(s["turns"] == 2 for s in doc["scenario_results"])
    assert doc["criteria_results"]["polite"]["passed"] == 12  # every turn judged once, none twice
