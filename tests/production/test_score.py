"""``fabtest score``: logged conversations judged by @production features into an experiment like any
other (one run per conversation, a failed must fails its run and the command), incrementally, with a
reproducible sample, a time filter, one-line errors for what a production feature cannot hold, and
personal data masked before the judge or the results see it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabtest.cli import compare_main, main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "production"

FEATURE = """@production
Feature: Live venue bot

  Background:
    Given the criterion "polite" means "The agent is polite"

  Scenario: Safe and polite
    Then the conversation should satisfy "polite"
    And every response should satisfy "concise"
    And the conversation must not include a call to "delete_account"
    And every response should take less than 5 seconds
    And the conversation should take at most 3 turns
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest]\noffline_llm = "judge.yaml"\nmax_concurrency = 2\n')
    (tmp_path / "judge.yaml").write_text("verdicts: {default: passed, concise: failed}\n")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "live.feature").write_text(FEATURE)
    shutil.copytree(FIXTURES, tmp_path / "logs")
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "FABTEST_RESULTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["score", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _doc(project: Path, experiment: str) -> dict:
    return json.loads((project / "results" / f"{experiment}.json").read_text())


def test_one_run_per_conversation_and_a_failed_must_fails_the_command(project: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _score(capsys, "logs", "features/live.feature", "--experiment-id", "week1", "--format", "json")
    assert code == 1, err
    summary = json.loads(out)
    assert summary["experiment"] == "week1" and summary["conversations_scored"] == 9
    assert [f["conversation"] for f in summary["failing"]] == ["conv-91bc"]
    assert summary["formats"] == {"langfuse": 1, "mlflow": 1, "openai": 1, "otlp": 1, "phoenix": 1}
    doc = _doc(project, "week1")
    assert doc["experiment"]["source"] == "production" and "production" in doc["experiment"]["tags"]
    runs = doc["scenario_results"]
    assert len(runs) == 9 and len({r["id"] for r in runs}) == 1  # one scenario, a run per conversation
    assert sorted(r["iteration"] for r in runs) == list(range(1, 10))
    failed = next(r for r in runs if not r["passed"])
    assert failed["production"]["conversation"] == "conv-91bc"
    assert failed["production"]["source"].endswith("otlp_genai.jsonl:3")
    assert failed["production"]["timestamp"] == "2026-01-01T07:05:00Z"
    assert failed["failure_type"] == "assertion" and "features/live.feature:10" in failed["failure_message"]
    booking = next(r for r in runs if r["production"]["conversation"] == "conv-7f3a")
    judged = {(d["criterion"], d["status"]) for d in booking["evaluations"]["details"]}
    assert ("polite", "passed") in judged and ("concise", "failed") in judged  # every response: one per turn
    assert sum(d["criterion"] == "concise" for d in booking["evaluations"]["details"]) == 2
    assert {d["type"] for d in booking["evaluations"]["details"]} >= {"latency", "turn_count"}
    assert doc["production"]["features"] == ["features/live.feature"]


def test_scoring_again_judges_nothing_already_scored(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _score(capsys, "logs", "features/live.feature", "--experiment-id", "first")
    code, out, _ = _score(capsys, "logs", "features/live.feature", "--experiment-id", "second")
    assert code == 0 and "9 already scored" in out and "Nothing new to score" in out
    assert not (project / "results" / "second.json").exists()
    more = json.loads((project / "logs" / "openai_chat.jsonl").read_text().splitlines()[0])
    more["id"], more["messages"][1]["content"] = "chat-new", "Is there a projector?"
    with (project / "logs" / "openai_chat.jsonl").open("a") as handle:
        handle.write(json.dumps(more) + "\n")
    code, out, _ = _score(capsys, "logs", "features/live.feature", "--experiment-id", "third")
    assert code == 0 and "Judged 1 conversation(s)" in out
    assert "Compare with the score before it: fabtest-compare first third" in out
    assert [r["production"]["conversation"] for r in _doc(project, "third")["scenario_results"]] == ["chat-new"]
    code, out, _ = _score(capsys, "logs", "features/live.feature", "--experiment-id", "again", "--all")
    assert code == 1 and "Judged 10 conversation(s)" in out


def test_a_changed_feature_scores_everything_again(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _score(capsys, "logs", "features/live.feature", "--experiment-id", "before")
    (project / "features" / "live.feature").write_text(FEATURE.replace("at most 3 turns", "at most 2 turns"))
    code, out, _ = _score(capsys, "logs", "features/live.feature", "--experiment-id", "after")
    assert "Judged 9 conversation(s)" in out


def test_a_sample_is_reproducible_and_since_filters(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    picked = []
    for n in range(2):
        _score(capsys, "logs", "features/live.feature", "--experiment-id", f"s{n}", "--sample", "3", "--seed", "7",
               "--all")
        picked.append(sorted(r["production"]["conversation"] for r in _doc(project, f"s{n}")["scenario_results"]))
    assert picked[0] == picked[1] and len(picked[0]) == 3
    _score(capsys, "logs", "features/live.feature", "--experiment-id", "other", "--sample", "3", "--seed", "8", "--all")
    share = [r["production"]["conversation"] for r in _doc(project, "other")["scenario_results"]]
    assert len(share) == 3
    code, out, _ = _score(capsys, "logs", "features/live.feature", "--experiment-id", "late", "--all",
                          "--since", "2026-01-03T13:30:00Z", "--format", "json")
    summary = json.loads(out)
    assert summary["before_since"] == 5 and summary["conversations_scored"] == 4
    assert {r["production"]["conversation"] for r in _doc(project, "late")["scenario_results"]} == {
        "phx-session-12", "chat-001", "chat-002", "chat-003"}


@pytest.mark.parametrize("step, said", [
    ('When the user says "hi"', "features/bad.feature:4: a @production scenario has only Then steps"),
    ('Given a simulated user with the goal "x"', "features/bad.feature:4: a @production scenario has only Then"),
    ("Then the goal should be achieved", "features/bad.feature:4: not a step fabtest score can check"),
])
def test_a_step_a_production_scenario_cannot_hold_is_one_line(project: Path, capsys: pytest.CaptureFixture[str],
                                                               step: str, said: str) -> None:
    (project / "features" / "bad.feature").write_text(f"@production\nFeature: Bad\n  Scenario: S\n    {step}\n")
    code, out, err = _score(capsys, "logs", "features/bad.feature")
    assert code == 2 and out == ""
    assert err.startswith(f"fabtest score: error: {said}") and err.count("\n") == 1


def test_a_feature_without_production_scenarios_and_a_log_no_format_fits(project: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (project / "features" / "test.feature").write_text(
        "Feature: T\n  Scenario: S\n    Then the goal should be achieved\n")
    code, _, err = _score(capsys, "logs", "features/test.feature")
    assert code == 2 and "no @production scenario" in err
    (project / "mystery.json").write_text("[1, 2]")
    code, _, err = _score(capsys, "mystery.json", "features/live.feature")
    assert code == 2 and "not a log format fabtest reads; tried otlp" in err and err.count("\n") == 1


def test_production_weeks_compare_like_test_runs(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _score(capsys, "logs", "features/live.feature", "--experiment-id", "w1")
    _score(capsys, "logs", "features/live.feature", "--experiment-id", "w2", "--all")
    code = compare_main(["w1", "w2", "--format", "json", "--fail-on-regression"])
    out, err = capsys.readouterr()
    compared = json.loads(out)
    assert code in (0, 3), err  # the same verdicts: never "worse"
    assert compared["gate"]["verdict"] != "worse" and compared["baseline"]["id"] == "w1"


def test_personal_data_never_reaches_the_judge_nor_the_results(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from fabtest.demo.offline_llm import offline_gemini

    (project / "pyproject.toml").write_text('[tool.fabtest]\n[tool.fabtest.redact]\npatterns = ["BK-\\\\d+"]\n')
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        code, _, err = _score(capsys, "logs", "features/live.feature", "--experiment-id", "masked")
        seen = "\n".join(r.text for r in server.requests)
        key = server.env()["GEMINI_API_KEY"]
    assert code == 1, err
    assert "Spree Loft" in seen  # the judge saw the conversations (the real google-genai client, a fake server)
    written = (project / "results" / "masked.json").read_text()
    for secret in ("anna.meyer@example.com", "+49 151 2345 6789", "0176 98765432", "4111 1111 1111 1111", "BK-1042",
                   key):
        assert secret not in seen and secret not in written
    assert "[email]" in written and "[phone]" in written and "[card]" in written and "[redacted]" in written


def test_a_dollar_budget_stops_starting_conversations(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from fabtest.demo.offline_llm import offline_gemini

    (project / "pyproject.toml").write_text("[tool.fabtest]\nmax_concurrency = 1\n")
    with offline_gemini() as server:  # a priced model (gemini-2.5-flash) reporting its tokens
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        code, out, err = _score(capsys, "logs", "features/live.feature", "--budget", "$0.0001", "--format", "json")
        summary = json.loads(out)
        assert summary["budget_spent"] and 0 < summary["conversations_scored"] < 9 and summary["judge_cost_usd"] > 0
        code, out, err = _score(capsys, "logs", "features/live.feature", "--budget", "1usd")
    assert "Judged" in out and "already scored" in out  # the next run goes on where the budget stopped
    with pytest.raises(SystemExit) as bad:
        main(["score", "logs", "features/live.feature", "--budget", "five"])
    assert bad.value.code == 2 and "expected dollars" in capsys.readouterr().err


def test_ctrl_c_keeps_what_was_judged(project: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from fabtest.production import scoring

    real, calls = scoring.score_conversation, []

    def interrupted_at_the_fourth(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(scoring, "score_conversation", interrupted_at_the_fourth)
    code, out, err = _score(capsys, "logs", "features/live.feature", "--experiment-id", "cut", "--format", "json")
    assert code == 130 and "interrupted" in err
    doc = _doc(project, "cut")
    judged = {r["production"]["conversation"] for r in doc["scenario_results"]}
    assert doc["experiment"]["interrupted"] and 0 < len(judged) < 9
    monkeypatch.setattr(scoring, "score_conversation", real)
    code, out, _ = _score(capsys, "logs", "features/live.feature", "--experiment-id", "rest", "--format", "json")
    summary = json.loads(out)
    assert summary["already_scored"] == len(judged) and summary["conversations_scored"] == 9 - len(judged)


def test_progress_lines_go_to_stderr(project: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from fabtest.cli import score

    monkeypatch.setattr(score, "PROGRESS_EVERY_S", 0.0)
    code, out, err = _score(capsys, "logs", "features/live.feature", "--format", "json")
    lines = [line for line in err.splitlines() if line.startswith("fabtest score: ")]
    assert len(lines) == 9 and lines[-1] == "fabtest score: 9 conversation(s) judged, 1 failed a must"
    assert json.loads(out)["conversations_scored"] == 9  # stdout stays the JSON alone
