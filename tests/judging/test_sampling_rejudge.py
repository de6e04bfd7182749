"""Judge sampling and ``fabtest rejudge`` end to end: the real google-genai client against FakeGemini.

A small project runs a scripted scenario with the demo agent; the judge's criteria calls are
scripted per test (steady, or flipping on purpose) so the split and the flip rate are known.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
from support.judging import FEATURE, PYPROJECT, criteria_calls, friendly_checks, run, script_verdicts

from fabtest.cli import compare_main, main
from fabtest.engine.judge import majority
from fabtest.report.console import render_summary
from fabtest.report.html import render_experiment_html
from fabtest.testing import FakeGemini


def test_majority_and_ties() -> None:
    assert majority(["passed", "failed", "passed"]) == ("passed", {"passed": 2, "failed": 1})
    assert majority(["failed", "failed", "failed"])[0] == "failed"
    assert majority(["passed", "failed"])[0] == "inconclusive"  # a tie is no pass
    assert majority(["passed", "failed", "inconclusive"])[0] == "inconclusive"


def test_samples_take_the_majority_and_record_the_split(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    script_verdicts(fake, ["passed", "failed", "passed"])
    doc = run(pytester, judge_extra="samples = 3")
    [check] = friendly_checks(doc)
    assert check["status"] == "passed"
    assert check["samples"] == {"passed": 2, "failed": 1} and check["confidence"] == "low"
    assert check["description"] == "The reply is warm and polite"  # recorded for rejudge
    short = [d for d in doc["scenario_results"][0]["evaluations"]["details"] if d["criterion"] == "The reply is short"]
    assert short[0]["samples"] == {"passed": 3} and short[0]["confidence"] == "high"
    # visible in the console summary and the HTML report
    assert "Low confidence:    1 verdict(s)" in render_summary(doc, pytester.path / "results" / "exp_e2e.json", None)
    assert "passed (low confidence: 2 passed, 1 failed)" in render_experiment_html(doc)
    # each sample is its own cache entry: three calls reached the judge, not one replayed thrice
    assert len(criteria_calls(fake)) == 3
    assert len(list((pytester.path / ".fabtest" / "cache").glob("*.json"))) == 3
    # a rerun replays all three samples from the cache
    fake.reset()
    script_verdicts(fake, ["failed"])
    again = run(pytester, judge_extra="samples = 3")
    assert friendly_checks(again)[0]["samples"] == {"passed": 2, "failed": 1}
    assert criteria_calls(fake) == []


def test_without_samples_nothing_is_recorded_about_splits(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    script_verdicts(fake, ["passed"])
    [check] = friendly_checks(run(pytester))
    assert "samples" not in check and "confidence" not in check
    assert len(criteria_calls(fake)) == 1


def rejudge(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["rejudge", "exp_e2e", "--format", "json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if code == 0 else out


def test_rejudge_sees_a_judge_that_flips(pytester: pytest.Pytester, fake: FakeGemini,
                                         capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    script_verdicts(fake, ["passed"])
    run(pytester)
    monkeypatch.chdir(pytester.path)
    fake.reset()
    script_verdicts(fake, ["failed", "passed", "failed"])  # the judge changes its mind on the same text
    code, report = rejudge(pytester, capsys, "--times", "3")
    assert code == 0
    # one call per repetition for the turn's two criteria (batched as the run did); no agent, no simulator
    calls = criteria_calls(fake)
    assert len(calls) == 3 and len(fake.requests) == 3
    assert "description: The reply is warm and polite" in calls[0].text
    assert 'turn 1 user: "Hello!"' in calls[0].text
    friendly = report["agreement"]["criteria"]["friendly"]
    assert friendly["flip_rate"] == pytest.approx(2 / 3, abs=1e-3)
    assert friendly["self_agreement"] == pytest.approx(2 / 3, abs=1e-3) and friendly["unanimous"] == 0
    assert friendly["majority_changed"] == 1
    assert report["agreement"]["criteria"]["The reply is short"]["flip_rate"] == 0
    # the new experiment holds the re-judged verdicts on the recorded transcripts
    new_id = report["rejudged_experiment"]
    new = json.loads((pytester.path / "results" / f"{new_id}.json").read_text())
    assert "rejudge-of:exp_e2e" in new["experiment"]["tags"]
    [check] = friendly_checks(new)
    assert check["status"] == "failed" and check["recorded"] == "passed"
    assert check["samples"] == {"failed": 2, "passed": 1} and check["confidence"] == "low"
    assert new["criteria_results"]["friendly"]["passed"] == 0
    assert new["scenario_results"][0]["transcript"] == json.loads(
        (pytester.path / "results" / "exp_e2e.json").read_text())["scenario_results"][0]["transcript"]
    assert compare_main(["exp_e2e", new_id]) == 0
    # re-judging again replays the cache: the same answers, no call
    fake.reset()
    code, again = rejudge(pytester, capsys, "--times", "3", "--no-save")
    assert again["agreement"] == report["agreement"] and fake.requests == []


def test_rejudge_narrows_and_tries_another_model(pytester: pytest.Pytester, fake: FakeGemini,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    script_verdicts(fake, ["passed"])
    run(pytester)
    monkeypatch.chdir(pytester.path)
    fake.reset()
    script_verdicts(fake, ["passed"])
    code, report = rejudge(pytester, capsys, "--times", "2", "--criterion", "friendly", "--judge-model", "judge-b")
    assert code == 0
    assert set(report["agreement"]["criteria"]) == {"friendly"}
    assert {r.model for r in fake.requests} == {"judge-b"}
    assert "The reply is short" not in criteria_calls(fake)[0].text
    new = json.loads((pytester.path / "results" / f"{report['rejudged_experiment']}.json").read_text())
    assert new["experiment"]["judge"]["model"] == "judge-b"


@pytest.mark.parametrize(("args", "message"), [
    (["rejudge", "exp_nope"], "exp_nope"),
    (["rejudge", "exp_e2e", "--scenario", "Nope"], "--scenario 'Nope'"),
    (["rejudge", "exp_e2e", "--criterion", "nope"], "--criterion 'nope'"),
])
def test_rejudge_bad_input_is_one_line(pytester: pytest.Pytester, fake: FakeGemini, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    script_verdicts(fake, ["passed"])
    run(pytester)
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


TWO_SCENARIOS = """
Feature: Greeting
  Scenario: Friendly greeting
    Given the agent "venue_bot"
    When the user says "Hello!"
    Then the response should satisfy "friendly"

  Scenario: Second greeting
    Given the agent "venue_bot"
    When the user says "Good morning!"
    Then the response should satisfy "friendly"
"""


def test_rejudge_counts_its_own_calls_prices_them_at_its_model_and_keeps_only_what_it_rejudged(
        pytester: pytest.Pytester, fake: FakeGemini, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22 point 4: the new experiment's usage is what the fake server saw, not the original run's."""
    from fabtest.experiment.cost import find_price, price_table
    from fabtest.testing.fake_gemini import count_tokens

    script_verdicts(fake, ["passed"])
    pytester.makefile(".toml", pyproject=PYPROJECT.format(judge_extra=""))
    pytester.makefile(".feature", scenario=textwrap.dedent(TWO_SCENARIOS))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_e2e",
                       "--fabtest-no-preflight").assert_outcomes(passed=2)
    monkeypatch.chdir(pytester.path)
    original = json.loads((pytester.path / "results" / "exp_e2e.json").read_text())
    fake.reset()
    script_verdicts(fake, ["passed"])
    code, report = rejudge(pytester, capsys, "--times", "3", "--scenario", "Friendly greeting",
                           "--judge-model", "gemini-2.5-flash-lite")
    assert code == 0
    new = json.loads((pytester.path / "results" / f"{report['rejudged_experiment']}.json").read_text())
    # only the re-judged scenario is in the new experiment (not the other under the new judge's name)
    assert [s["name"] for s in new["scenario_results"]] == ["Friendly greeting"]
    [entry] = new["scenario_results"]
    seen_in = sum(count_tokens(r.text) for r in fake.requests)
    assert entry["usage"] == {"judge": {"calls": len(fake.requests), "input_tokens": seen_in,
                                        "output_tokens": entry["usage"]["judge"]["output_tokens"], "model": None}}
    assert len(fake.requests) == 3 and seen_in > 0
    recorded = next(s for s in original["scenario_results"] if s["name"] == "Friendly greeting")
    assert set(recorded["usage"]) != {"judge"} or recorded["usage"]["judge"] != entry["usage"]["judge"]
    price = find_price(price_table(), "gemini-2.5-flash-lite")
    assert price is not None
    out_tokens = entry["usage"]["judge"]["output_tokens"]
    assert entry["cost"]["usd"] == pytest.approx(price.usd(seen_in, out_tokens), rel=1e-3)


def test_samples_and_rejudge_go_out_at_the_configured_temperature(pytester: pytest.Pytester, fake: FakeGemini,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27 point 6: with temperature = 0.7 and samples = 3 every judge request says 0.7 (it was
    0.0 whatever the configuration said), and so does every request of rejudge --times."""
    script_verdicts(fake, ["passed"])
    run(pytester, judge_extra="temperature = 0.7\nsamples = 3")
    assert [r.temperature for r in criteria_calls(fake)] == [0.7, 0.7, 0.7]
    monkeypatch.chdir(pytester.path)
    fake.reset()
    code, _ = rejudge(pytester, capsys, "--times", "2", "--no-save")
    assert code == 0 and [r.temperature for r in criteria_calls(fake)] == [0.7, 0.7]


def test_sampling_at_temperature_zero_is_warned_about(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    script_verdicts(fake, ["passed"])
    pytester.makefile(".toml", pyproject=PYPROJECT.format(judge_extra="samples = 3"))
    pytester.makefile(".feature", scenario=textwrap.dedent(FEATURE))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-no-preflight")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*PytestConfigWarning: fabtest: [[]tool.fabtest.judge[]] samples = 3 at temperature 0*"])
