"""The simulated user's seed (issue 44 item 2): the same scenario and iteration draw the same user on
both arms of ``fabtest ab`` (common random numbers for a paired comparison), through the real
google-genai client against the offline FakeGemini, two in-process pytest runs standing for the arms."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.engine.simulator import SYSTEM_PROMPT, simulation_seed
from fabtest.experiment.stable_id import stable_id
from fabtest.testing import FakeGemini

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
results_dir = "results"
llm_cache = "off"

[tool.fabtest.simulator]
backoff = 0.01
max_retries = 1
"""

FEATURE = """
Feature: Venues
  Scenario: Book a room
    Given a simulated user with the goal "Book a room for 10 people in Berlin"
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


def _arm(pytester: pytest.Pytester, fake: FakeGemini, name: str) -> tuple[list[Any], dict[str, Any]]:
    fake.reset()
    result = pytester.runpytest("-p", "no:randomly", "--fabtest-no-preflight", "--fabtest-iterations", "2",
                                "--fabtest-experiment-id", name)
    assert result.ret in (0, 1), result.stdout.str()[-2000:]  # the demo agent may run out of turns: no matter
    users = [r for r in fake.requests if r.system == SYSTEM_PROMPT]  # the simulated user's calls
    return users, json.loads((pytester.path / "results" / f"{name}.json").read_text())


def test_the_same_scenario_and_iteration_send_the_same_seed_on_both_arms(pytester: pytest.Pytester,
                                                                         fake: FakeGemini) -> None:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makefile(".feature", venues=textwrap.dedent(FEATURE))
    base_calls, base = _arm(pytester, fake, "baseline")
    cur_calls, cur = _arm(pytester, fake, "current")
    sid = stable_id("Venues", None, "Book a room")
    expected = {simulation_seed(sid, 1), simulation_seed(sid, 2)}
    assert len(expected) == 2  # each iteration its own user
    # every simulated-user request carries a seed, and only those of this scenario's two iterations
    assert base_calls and cur_calls
    assert {r.generation_config.get("seed") for r in base_calls} == expected
    assert {r.generation_config.get("seed") for r in cur_calls} == expected
    others = [r for r in fake.requests if r.system != SYSTEM_PROMPT]
    assert others  # the judge reviewed each simulated conversation (fidelity)
    assert all("seed" not in r.generation_config for r in others)  # other calls draw as they always did
    # the request as the model sees it: the seed beside the temperature in generationConfig, before the schema
    config = list(cur_calls[0].generation_config)
    assert config.index("seed") < config.index("responseMimeType")
    # recorded beside each try, the same for the same iteration on both arms
    seeds = [{s["iteration"]: s["simulation"]["tries"][0]["seed"] for s in doc["scenario_results"]}
             for doc in (base, cur)]
    assert seeds[0] == seeds[1] == {1: simulation_seed(sid, 1), 2: simulation_seed(sid, 2)}
