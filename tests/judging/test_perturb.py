"""``fabtest rejudge EXP --perturb`` end to end: a run through the real google-genai client against
FakeGemini, then the audit, with every request the judge received captured so each perturbation's
prompt (what the model is shown) is checked, and the flag, the file, ``fabtest show`` and ``fabtest
view`` read back (issue 27, point 12)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.demo.offline_llm import offline_gemini
from fabtest.judging.perturb import model_family, self_preference
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
"""

FEATURE = '''
Feature: Greeting
  Scenario: Friendly greeting
    Given the agent "venue_bot"
    And the criterion "friendly" means "The reply is warm and polite" with examples:
      | example                     | verdict |
      | A warm welcome!             | good    |
      | Hello there, happy to help. | good    |
      | Go away.                    | bad     |
    When the user says "Hello!"
    Then the response should satisfy "friendly"
    And the response should satisfy "The reply is short"
'''

OTHER = "gemini-2.5-pro"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server


def judge_by_what_it_sees(fake: FakeGemini) -> None:
    """"friendly" passes unless the user's message is hidden or another model is asked (so it
    moves under 2 of its 5 perturbations); every other criterion always passes."""

    def answer(request: Any) -> dict[str, Any]:
        names = [line.split("name: ", 1)[1].strip() for line in request.text.splitlines() if ". name: " in line]
        fragile = "(not shown)" in request.text or request.model == OTHER
        return {"verdicts": [{"criterion": n, "verdict": "failed" if fragile and n == "friendly" else "passed",
                              "reasoning": "scripted"} for n in names]}

    fake.add_rule(r"Evaluate the ", callback=answer)


def criteria_requests(fake: FakeGemini) -> list[Any]:
    return [r for r in fake.requests if "Evaluate the " in r.text]


@pytest.fixture
def project(pytester: pytest.Pytester, fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    judge_by_what_it_sees(fake)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makefile(".feature", scenario=textwrap.dedent(FEATURE))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_p",
                                "--fabtest-no-preflight")
    result.assert_outcomes(passed=1)
    monkeypatch.chdir(pytester.path)
    return pytester


def test_each_perturbation_shows_the_judge_what_it_says(project: pytest.Pytester, fake: FakeGemini,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    [recorded] = criteria_requests(fake)
    capsys.readouterr()
    assert main(["rejudge", "exp_p", "--perturb", "--perturb-model", OTHER, "--format", "json"]) == 0
    audit = json.loads(capsys.readouterr().out)
    calls = criteria_requests(fake)[1:]
    assert len(calls) == 6  # one batch (turn 1), six ways to ask it, once each (--times defaults to 1)
    unchanged, requirement, plain, examples, no_context, other = calls

    # the control is the question the run asked, word for word
    assert unchanged.prompt == recorded.prompt and unchanged.model == recorded.model
    # reworded: every word of the criterion, in a fixed frame (an ad-hoc criterion's name is its text)
    assert "description: The following requirement must hold: The reply is warm and polite\n" in requirement.prompt
    assert "name: The following requirement must hold: The reply is short\n" in requirement.prompt
    assert "description: the reply is warm and polite\n" in plain.prompt
    assert "name: the reply is short\n" in plain.prompt
    # examples rotated: the second good example now comes first; the lone bad one stays
    good = [line for line in examples.prompt.splitlines() if "example that PASSES" in line]
    assert good == ["   example that PASSES: Hello there, happy to help.", "   example that PASSES: A warm welcome!"]
    swapped = recorded.prompt.replace("PASSES: A warm welcome!", "@").replace(
        "PASSES: Hello there, happy to help.", "PASSES: A warm welcome!").replace("@", "PASSES: Hello there, happy to help.")
    assert examples.prompt == swapped  # nothing else changed
    # context removed: the agent's reply alone ("Hello!" is both the user's message and how the reply opens)
    reply = json.loads((project.path / "results" / "exp_p.json").read_text())["scenario_results"][0]["transcript"][0]["agent"]
    assert reply.startswith("Hello!") and reply in no_context.prompt and "(not shown)" in no_context.prompt
    assert recorded.prompt.count("Hello!") == 2 and no_context.prompt.count("Hello!") == 1
    # another model, same question
    assert other.model == OTHER and other.prompt == recorded.prompt

    friendly, short = audit["criteria"]["friendly"], audit["criteria"]["The reply is short"]
    assert friendly["by_kind"] == {
        "unchanged": {"judgements": 1, "moved": 0, "rate": 0.0},
        "reworded": {"judgements": 2, "moved": 0, "rate": 0.0},
        "examples": {"judgements": 1, "moved": 0, "rate": 0.0},
        "no context": {"judgements": 1, "moved": 1, "rate": 1.0},
        "other model": {"judgements": 1, "moved": 1, "rate": 1.0},
    }
    assert (friendly["moved"], friendly["judgements"], friendly["move_rate"], friendly["flagged"]) == (2, 5, 0.4, True)
    assert "examples" not in short["by_kind"]  # no examples to rotate: not counted as a perturbation
    assert (short["move_rate"], short["flagged"]) == (0.0, False)
    assert audit["flagged"] == ["friendly"] and audit["max_move"] == 0.2
    assert audit["warnings"] == []  # the demo agent reports no model
    written = json.loads((project.path / "results" / "robustness" / "exp_p.json").read_text())
    assert written["flagged"] == ["friendly"] and written["experiment"] == "exp_p"


def test_the_flag_reaches_the_command_show_report_and_view(project: pytest.Pytester, fake: FakeGemini,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from fabtest.view.catalog import Catalog
    from fabtest.view.scenarios import experiment_page

    capsys.readouterr()
    assert main(["rejudge", "exp_p", "--perturb", "--max-move", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "FLAGGED" not in out  # 1 of 4 moved (no other model): 25%, under 50%
    assert main(["rejudge", "exp_p", "--perturb"]) == 0
    out = capsys.readouterr().out
    assert "FLAGGED: 'friendly' moved in 25% of its perturbed judgements (1/4), above 20%" in out
    assert "Written to results/robustness/exp_p.json" in out
    assert main(["list"]) == 0
    assert "robustness" not in capsys.readouterr().out  # the audit is not taken for an experiment
    assert main(["show", "exp_p"]) == 0
    shown = capsys.readouterr().out
    assert "Criterion robustness" in shown and "FLAGGED: 'friendly' moved in 25%" in shown
    assert main(["report", "exp_p", "-o", "report.html"]) == 0
    assert "1 flagged above 20% moved: friendly" in (project.path / "report.html").read_text()
    catalog = Catalog(project.path / "results")
    [row] = [r for r in catalog.rows() if r.id == "exp_p"]
    page = experiment_page(catalog.document(row))
    assert "Criterion robustness" in page and "1 flagged above 20% moved: friendly" in page


def test_the_next_runs_summary_names_a_criterion_an_earlier_audit_flagged(
        project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """The audit comes after a run, so the run that follows is the first to hear of it: its end-of-run
    summary names each criterion it used that the newest audit judging it flagged."""
    assert main(["rejudge", "exp_p", "--perturb"]) == 0
    capsys.readouterr()
    result = project.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_q",
                               "--fabtest-no-preflight")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "Criterion robustness (earlier audits, fabtest rejudge --perturb)" in out
    assert "NOT ROBUST: 'friendly' moved in 25.0% of its perturbed judgements (1/4) in the audit of exp_p" in out
    assert "'The reply is short'" not in out.split("Criterion robustness (earlier audits")[1].split("──")[0]  # not flagged


def test_self_preference_is_warned(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    path = project.path / "results" / "exp_p.json"
    doc = json.loads(path.read_text())
    doc["scenario_results"][0]["agent_metadata"] = {"model": "gemini-2.0-flash"}
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["rejudge", "exp_p", "--perturb", "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: the judge (gemini-2.5-flash) and the agent (gemini-2.0-flash) share the model family gemini" in out
    assert not (project.path / "results" / "robustness").exists()  # --no-save


def test_model_families() -> None:
    assert model_family("gemini-2.5-flash") == model_family("models/gemini-2.0-pro") == "gemini"
    assert model_family("openai/gpt-4o") == model_family("o3-mini") == "openai gpt"
    assert model_family("claude-3-5-sonnet") == "anthropic claude"
    assert model_family("my-own-model") is None and model_family(None) is None
    assert self_preference(["gpt-4o"], ["gemini-2.5-flash"]) == []
    assert self_preference([None], ["gemini-2.5-flash"]) == []


def test_bad_input(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["rejudge", "exp_p", "--max-move", "0.3"]) == 2
    assert "--perturb-model and --max-move go with --perturb" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["rejudge", "exp_p", "--perturb", "--max-move", "1.5"])
    assert exited.value.code == 2
    assert main(["rejudge", "exp_p", "--perturb", "--criterion", "nope"]) == 2
