"""Cost end to end: pytest runs a project whose built-in agent, judge and simulator all talk to
FakeGemini through the real google-genai client; FakeGemini reports usageMetadata per response."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import count_tokens

PYPROJECT = """
[tool.fabtest]
results_dir = "results"

[tool.fabtest.agents.helper]
gemini = "gemini-2.5-flash"
instructions = "You help people book venues. Be brief."

[tool.fabtest.judge]
model = "gemini-2.5-pro"
backoff = 0.01

[tool.fabtest.simulator]
model = "gemini-2.5-flash-lite"
backoff = 0.01

[tool.fabtest.prices]
"gemini-2.5-pro" = { input = 2.0, output = 20.0 }
"""

FEATURE = """
Feature: Costs
  Background:
    Given the agent "helper"

  Scenario: Judged
    When the user says "Hi, I need a room in Berlin"
    Then the response should satisfy "The agent is polite"

  Scenario: Simulated (may run out of turns: its tokens are counted all the same)
    Given a simulated user with the goal "Ask for a room in Berlin for 10 people"
    And the simulation takes at most 2 turns
    When the simulated user talks to the agent
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server


def test_every_role_is_costed_from_fake_gemini_usage(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makefile(".feature", costs=textwrap.dedent(FEATURE))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_cost",
                                "--fabtest-no-preflight")
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    doc = json.loads((pytester.path / "results" / "exp_cost.json").read_text())
    judged, simulated = doc["scenario_results"]
    # the simulated scenario's judge usage is the review of the simulated user (engine/fidelity.py)
    assert set(judged["usage"]) == {"agent", "judge"} and set(simulated["usage"]) == {"agent", "simulator", "judge"}
    usage = {**judged["usage"], "simulator": simulated["usage"]["simulator"]}
    usage["agent"] = doc["summary"]["tokens"]["agent"] | {"model": judged["usage"]["agent"]["model"]}
    usage["judge"] = doc["summary"]["tokens"]["judge"]
    # every prompt token FakeGemini reported in usageMetadata is charged to exactly one role
    assert sum(u["input_tokens"] for u in doc["summary"]["tokens"].values()) == sum(count_tokens(r.text) for r in fake.requests)
    assert all(usage[r]["input_tokens"] > 0 and usage[r]["output_tokens"] > 0 for r in usage)
    assert usage["agent"]["model"] == "gemini-2.5-flash"
    prices = {"agent": (0.30, 2.50), "judge": (2.0, 20.0), "simulator": (0.10, 0.40)}  # judge: the override
    expected = {r: (usage[r]["input_tokens"] * p[0] + usage[r]["output_tokens"] * p[1]) / 1e6 for r, p in prices.items()}
    spent = doc["summary"]["cost"]
    assert {r: spent["roles"][r]["usd"] for r in spent["roles"]} == pytest.approx(expected)
    own = judged["usage"]["judge"]
    assert judged["cost"]["roles"]["judge"] == {
        "model": "gemini-2.5-pro", "usd": pytest.approx((own["input_tokens"] * 2.0 + own["output_tokens"] * 20.0) / 1e6)}
    assert simulated["cost"]["roles"]["simulator"]["model"] == "gemini-2.5-flash-lite"
    assert judged["cost"]["usd"] + simulated["cost"]["usd"] == pytest.approx(spent["total_usd"])
    assert spent["complete"] is True and spent["total_usd"] == pytest.approx(sum(expected.values()))
    assert spent["prices"]["gemini-2.5-pro"] == {"input": 2.0, "output": 20.0, "source": "[tool.fabtest.prices]"}
    assert doc["summary"]["tokens"]["agent"]["input_tokens"] == usage["agent"]["input_tokens"]
    result.stdout.fnmatch_lines(["*LLM Usage*", "*Role*Model*Calls*Input tokens*Output tokens*Cost (USD)*",
                                 "*agent*gemini-2.5-flash*", "*Total cost: $*"])
