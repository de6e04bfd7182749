"""A .feature run (pytest in process) against an A2A and an AG-UI agent named in pyproject.toml: the tool
calls, the state and the approval steps work on both, and each pause is recorded with its decision."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("a2a.server", reason="needs the a2a extra: pip install 'pytest-fabtest[a2a]'")
pytest.importorskip("ag_ui.core", reason="needs the ag-ui extra: pip install 'pytest-fabtest[ag-ui]'")

import a2a_weather
import ag_ui_shop
from support.asgi import serve

APPROVED = """
  Scenario: The weather, then a refund approved ({agent})
    Given the agent "{agent}"
    When the user says "weather in Paris"
    Then the agent must call "get_weather" with:
      | argument | value |
      | city     | Paris |
    And the response must match "Sunny in Paris"
    When the user says "refund 80"
    Then the agent must ask for approval of "refund" with:
      | argument | value |
      | amount   | 80    |
    And the agent must not call "refund"
    When the user approves
    Then the agent must call "refund"
    And the response must match "issued"
"""
# not a Scenario Outline: the pre-flight reads ``Given the agent "<agent>"`` literally (left as found)
FEATURE = "Feature: Agents behind protocols\n" + APPROVED.format(agent="weather") + APPROVED.format(agent="shop") + """
  Scenario: An AG-UI agent's state
    Given the agent "shop"
    When the user says "weather in Oslo"
    Then the state "city" must be "Oslo"

  Scenario: A refund left waiting
    Given the agent "weather"
    When the user says "refund 30"
"""


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with serve(lambda url: a2a_weather.app(url, a2a_weather.WeatherExecutor())) as a2a_url, \
            serve(lambda url: ag_ui_shop.app(ag_ui_shop.ShopAgent())) as ag_ui_url:
        yield a2a_url, ag_ui_url + "/agent"


def test_features_drive_both_protocols_with_pauses(pytester: pytest.Pytester, servers: Any) -> None:
    a2a_url, ag_ui_url = servers
    pytester.makefile(".toml", pyproject=(
        f'[tool.fabtest]\nresults_dir = "results"\n\n[tool.fabtest.agents]\nweather = {{ a2a = "{a2a_url}" }}\n'
        f'shop = {{ ag_ui = "{ag_ui_url}", tools = ["get_weather", "refund"] }}\n'))
    pytester.makefile(".feature", protocols=FEATURE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)
    experiment = json.loads(next((pytester.path / "results").glob("exp_*.json")).read_text())
    by_name = {r["name"]: r for r in experiment["scenario_results"]}
    waiting = by_name["A refund left waiting"]
    assert "unanswered: the pending approval of refund(amount=80)" not in waiting["failure_message"]
    assert "the pending approval of refund(amount=30) (asked in turn 1)" in waiting["failure_message"]
    approved = [r for r in experiment["scenario_results"] if r["name"].startswith("The weather")]
    for scenario in approved:
        (pause,) = scenario["transcript"][1]["pauses"]
        assert (pause["tool"], pause["arguments"], pause["decision"], pause["decided_in_turn"]) == (
            "refund", {"amount": 80}, "approved", 3)
