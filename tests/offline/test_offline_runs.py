"""A user's own features and playbooks run offline; the demo LLM is labelled; a real key wins.

Each test writes a small project of its own (a pizza agent in the project root, a feature or a
playbook, a script for the fake) and runs pytest on it with pytester, then reads the experiment.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.testing import FakeGemini

PIZZA = '''
from fabtest import AgentResponse, ToolCall


def build(context):
    """A fresh pizza bot per scenario: greets, takes the order, places it."""

    def chat(messages, on_tool_call=None):
        said = messages[-1].content.lower()
        if "pepperoni" in said:
            return AgentResponse(text="One large pepperoni. Anything else?",
                                 tool_calls=[ToolCall("add_to_order", {"item": "pepperoni", "size": "large"}, {"ok": True})])
        if "that's all" in said:
            return AgentResponse(text="Your order is placed: number 42.", tool_calls=[ToolCall("place_order", {}, {"order": 42})])
        return AgentResponse(text="Hi! What would you like?")

    return chat
'''

PYPROJECT = """
[tool.fabtest]
agent = "pizza:build"
playbook_agent = "pizza:build"
results_dir = "results"
"""

FEATURE = """
Feature: Ordering pizza
  Background:
    Given the criterion "friendly" means "The agent is warm"
    And the topics:
      | topic    | characteristic         | triggers | next     |
      | greeting | The agent greets       |          | ordering |
      | ordering | The agent takes orders |          |          |

  Scenario: A simulated customer orders
    Given a simulated user with the goal "Order a large pepperoni"
    And the simulation stops when the agent calls "place_order"
    When the simulated user talks to the agent
    Then the conversation must include a call to "add_to_order"
    And the conversation must reach the topic "ordering"
    And the goal must be achieved
    And the response must have the intent "confirm the order"
    And every response should satisfy "friendly"
"""

SCRIPT = """
simulated_user: ["hi", "a large pepperoni", "that's all"]
verdicts: {default: passed, friendly: failed}
intents: {default: passed}
topic: ordering
goal_achieved: true
"""


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_PLAYBOOK_AGENT",
                 "FABTEST_RESULTS_DIR", "FABTEST_AGENT"):
        monkeypatch.delenv(name, raising=False)


def project(pytester: pytest.Pytester, pyproject: str = PYPROJECT, **files: str) -> Path:
    pytester.makefile(".toml", pyproject=pyproject)
    pytester.makepyfile(pizza=PIZZA)
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return pytester.path


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest("-p", "no:randomly", "--fabtest-experiment-id", "exp_off", *args)
    doc = json.loads((pytester.path / "results" / "exp_off.json").read_text())
    return result, doc


def only(doc: dict[str, Any]) -> dict[str, Any]:
    (scenario,) = doc["scenario_results"]
    return scenario


def test_a_users_own_feature_runs_offline_with_a_script(pytester: pytest.Pytester) -> None:
    project(pytester, **{"order.feature": FEATURE, "fake.yaml": SCRIPT})
    result, doc = run(pytester, "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=1)
    scenario = only(doc)
    assert scenario["turns"] == 3 and scenario["topics_visited"][-1] == "ordering"
    assert doc["criteria_results"]["friendly"]["passed"] == 0  # the scripted verdict reached the results
    assert doc["experiment"]["judge"]["provider"] == "fake"
    assert "not a real model" in doc["experiment"]["judge"]["note"]
    # what can change a verdict is recorded (issue 37): the defaults of [tool.fabtest.judge] / .simulator
    assert doc["experiment"]["judge"]["settings"] == {"temperature": 0.0, "samples": 1, "samples_per_criterion": {},
                                                      "max_file_bytes": 5_000_000,
                                                      "context_turns": 2}
    assert doc["experiment"]["simulator"]["settings"] == {"temperature": 0.7, "fidelity": "judge"}
    result.stdout.fnmatch_lines(["Judge:*fake / scripted (scripted fake LLM*"])


def test_a_scripted_verdict_can_fail_a_must(pytester: pytest.Pytester) -> None:
    project(pytester, **{"order.feature": FEATURE, "fake.yaml": SCRIPT.replace("goal_achieved: true",
                                                                                "goal_achieved: false")})
    result, doc = run(pytester, "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(failed=1)
    assert only(doc)["failure_type"] == "assertion"


def test_the_fixture_scripts_the_fake_in_python(pytester: pytest.Pytester) -> None:
    project(pytester, **{"order.feature": FEATURE, "conftest.py": """
        import pytest

        @pytest.fixture(autouse=True)
        def pizza_script(fabtest_fake_llm):
            (fabtest_fake_llm.simulated_user(["hi", "a large pepperoni", "that's all"])
             .verdicts(default="passed").intents(default="passed").topic("ordering").goal_achieved(True))
    """})
    result, doc = run(pytester, "--fabtest-fake-llm")
    result.assert_outcomes(passed=1)
    assert doc["criteria_results"]["friendly"]["passed"] == 3


def test_a_python_fake_named_module_attr(pytester: pytest.Pytester) -> None:
    project(pytester, **{"order.feature": FEATURE, "pizza_fake.py": """
        from fabtest.testing import FakeLLM

        def fake():
            return (FakeLLM().simulated_user(["hi", "a large pepperoni", "that's all"])
                    .verdicts(default="passed").intents(default="passed").topic("ordering").goal_achieved(True))
    """})
    result, _ = run(pytester, "--fabtest-fake-llm", "pizza_fake:fake")
    result.assert_outcomes(passed=1)


def test_a_bad_script_is_a_usage_error_before_anything_runs(pytester: pytest.Pytester) -> None:
    project(pytester, **{"order.feature": FEATURE, "fake.yaml": "verdicts: {friendly: maybe}\n"})
    result = pytester.runpytest("-p", "no:randomly", "--fabtest-fake-llm", "fake.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fake.yaml: *friendly*expected passed, failed*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


PLAYBOOKS = {
    "scenarios/playbooks/steps.playbook.yaml": """
        name: steps
        steps:
          - user_input: "a large pepperoni"
            expected_outcome: "The agent confirms the pizza"
    """,
    "scenarios/playbooks/persona.playbook.yaml": """
        name: persona
        persona:
          initial_user_input: "hi"
          context: "You want a large pepperoni"
          max_turns: 4
          success_criteria:
            flow_contains: ["number 42"]
            llm_checks: ["The agent confirms the order"]
    """,
}


def test_playbooks_use_the_fake_from_the_first_item(pytester: pytest.Pytester) -> None:
    project(pytester, **PLAYBOOKS, **{"fake.yaml": """
        simulated_user: ["a large pepperoni", "that's all"]
        verdicts: {"The agent confirms the pizza": passed, "The agent confirms the order": passed}
    """})
    result, doc = run(pytester, "scenarios/playbooks", "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=2)
    assert doc["experiment"]["simulator"]["provider"] == "fake"
    persona = next(s for s in doc["scenario_results"] if s["name"] == "persona")
    assert persona["turns"] == 3


def test_a_scripted_failing_verdict_fails_a_playbook(pytester: pytest.Pytester) -> None:
    project(pytester, **PLAYBOOKS, **{"fake.yaml": "verdicts: {default: failed}\n"})
    result, _ = run(pytester, "scenarios/playbooks/steps.playbook.yaml", "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*playbook 'steps' failed [[]assertion[]]*"])


# -- the demo LLM of [tool.fabtest] offline_llm ---------------------------------------------------------
DEMO_PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
results_dir = "results"
offline_llm = "fabtest.demo.offline_llm:demo_llm"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 1
timeout = 5
"""

DEMO_FEATURE = """
Feature: Demo
  Background:
    Given the criterion "friendly" means "The agent is warm and polite"

  Scenario: A simulated booking
    Given a simulated user with the goal "Book a room for 10 people in Berlin on 12 March"
    And the simulated user knows:
      | fact   | value     |
      | people | 10        |
      | city   | Berlin    |
      | date   | 12 March  |
    And the simulation stops when the agent calls "book_venue"
    And the simulation takes at most 8 turns
    When the simulated user talks to the agent
    Then the goal must be achieved
    And the response should satisfy "friendly"
"""


def test_without_a_key_the_configured_offline_llm_runs_and_is_labelled(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=DEMO_PYPROJECT)
    pytester.makefile(".feature", demo=DEMO_FEATURE)
    result, doc = run(pytester, "-rs")
    result.assert_outcomes(passed=1)  # not skipped
    for role in ("judge", "simulator"):
        entry = doc["experiment"][role]
        assert entry["provider"] == "demo" and "heuristic demo" in entry["note"] and "GEMINI_API_KEY" in entry["note"]
    result.stdout.fnmatch_lines(["Judge:*demo*heuristic demo judge/simulator*GEMINI_API_KEY*"])


def test_without_offline_llm_nothing_is_implicit(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=DEMO_PYPROJECT.replace('offline_llm = "fabtest.demo.offline_llm:demo_llm"', ""))
    pytester.makefile(".feature", demo=DEMO_FEATURE)
    result, doc = run(pytester, "-rs")
    result.assert_outcomes(skipped=1)
    assert doc["experiment"]["judge"] == {"provider": None, "model": None}


@pytest.fixture
def gemini(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server


def test_a_real_key_takes_precedence_over_offline_llm(pytester: pytest.Pytester, gemini: FakeGemini) -> None:
    pytester.makefile(".toml", pyproject=DEMO_PYPROJECT)
    pytester.makefile(".feature", demo=DEMO_FEATURE)
    result, doc = run(pytester)
    result.assert_outcomes(passed=1)
    judge = doc["experiment"]["judge"]
    assert (judge["provider"], judge["model"]) == ("gemini", "gemini-2.5-flash") and judge["settings"]["samples"] == 1
    assert gemini.request_count > 0  # the google-genai client did the judging, not the demo


def test_fake_llm_option_wins_over_a_key(pytester: pytest.Pytester, gemini: FakeGemini) -> None:
    project(pytester, **{"order.feature": FEATURE, "fake.yaml": SCRIPT})
    result, doc = run(pytester, "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=1)
    assert doc["experiment"]["judge"]["provider"] == "fake" and gemini.request_count == 0


def test_an_offline_llm_that_does_not_import_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=DEMO_PYPROJECT.replace("fabtest.demo.offline_llm:demo_llm", "no_such_mod:llm"))
    pytester.makefile(".feature", demo=DEMO_FEATURE)
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.fabtest[]] offline_llm: LLM 'no_such_mod:llm' does not import*"])


def test_this_repository_runs_its_examples_on_the_labelled_demo_llm_without_a_key() -> None:
    """`pytest features/` on a fresh machine: the demo LLM is named explicitly in this repo's pyproject."""
    from fabtest.llm.base import LLMSettings
    from fabtest.llm.factory import describe_llm, role_llm
    from fabtest.config.settings import Settings

    settings = Settings.load(Path(__file__).resolve().parents[2], environ={})
    assert settings.offline_llm == "fabtest.demo.offline_llm:demo_llm"
    provider, _, note = describe_llm(role_llm(LLMSettings(), offline_llm=settings.offline_llm))
    assert provider == "demo" and note is not None and "GEMINI_API_KEY" in note
