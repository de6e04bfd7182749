"""``env`` secrets never reach what the run writes; ``fabtest run`` exit codes, progress and summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.experiment.stable_id import stable_id
from fabtest.playbook import PlaybookError, run_playbook

from .helpers import PYPROJECT, Recording, files_under, write_playbook

SECRET = "Hamburg"
SECRET_PLAYBOOK = {
    "name": "secret_city",
    "env": ["VENUE_CITY"],
    "steps": [
        {"user_input": "Hello, I need a room in ${VENUE_CITY} for 12 people on 20 June.",
         "expected_outcome": "The agent lists venues in ${VENUE_CITY} with a price per day"},
        {"user_input": "The first one, please.", "expected_outcome": "The agent quotes a price per day"},
        # the confirmation quotes no price: the offline judge fails this step
        {"user_input": "Yes, book it in ${VENUE_CITY}.", "expected_outcome": "The agent quotes a price for ${VENUE_CITY}"},
    ],
}
PASSING = {"name": "passing", "steps": [
    {"user_input": "Hi, I need a meeting room.", "expected_outcome": "The agent is friendly"}]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Any) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FABTEST_PLAYBOOK_AGENT", "fabtest.demo:build_agent")
    monkeypatch.delenv("FABTEST_RESULTS_DIR", raising=False)
    return tmp_path


def test_a_missing_env_variable_fails_before_any_call(tmp_path: Path, llm: Any, fake: Any) -> None:
    path = write_playbook(tmp_path, SECRET_PLAYBOOK)
    agents = Recording()
    with pytest.raises(PlaybookError, match=r"env: variable VENUE_CITY not set"):
        run_playbook(path, agent_factory=agents, judge_llm=llm, simulator_llm=llm, repo_root=tmp_path, environ={})
    assert agents.agents == [] and fake.requests == []


def test_env_values_are_absent_from_everything_the_run_writes(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str], fake: Any,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")  # the conversation log (INFO) is on, as with --log-cli-level=INFO
    monkeypatch.setenv("VENUE_CITY", SECRET)
    write_playbook(project / "pb", SECRET_PLAYBOOK)
    code = main(["run", "pb/secret_city.playbook.json", "--experiment-id", "exp_secret"])
    out, err = capfd.readouterr()
    assert code == 1
    # the agent and the judge did see the value (that is the point) ...
    assert any(SECRET in r.prompt for r in fake.requests)
    # ... but nothing written shows it
    written = files_under(project / "results")
    names = sorted(p.name for p in written)
    assert names == ["exp_secret.json", "exp_secret.secret_city.trace.json"]
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert SECRET not in text, path
        assert "***" in text
    assert SECRET not in out and SECRET not in err
    turns = [r.getMessage() for r in caplog.records if r.name == "fabtest.conversation"]
    assert len(turns) == 6 and "turn 1 user: Hello, I need a room in *** for 12 people" in turns[0]
    assert not [r for r in caplog.records if SECRET in r.getMessage()]
    assert "FAILED [assertion]: step 3 of 3 failed" in out and "***" in out
    trace = json.loads((project / "results" / "traces" / "exp_secret.secret_city.trace.json").read_text())
    assert trace["steps"][0]["input"] == "Hello, I need a room in *** for 12 people on 20 June."


def test_fabtest_run_passes_with_summary_and_experiment(project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    write_playbook(project / "pb", PASSING)
    code = main(["run", "pb/passing.playbook.json", "--experiment-id", "exp_ok"])
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert "[1/1] passing (pb/passing.playbook.json) ..." in out and "PASSED (1 turns" in out
    assert "fabtest: Experiment Summary" in out and "exp_ok" in out
    assert "fabtest run: 1 passed, 0 failed, 0 skipped" in out
    doc = json.loads((project / "results" / "exp_ok.json").read_text())
    (result,) = doc["scenario_results"]
    assert result["id"] == stable_id("playbook", None, "passing") and result["passed"] is True
    assert doc["summary"]["total_scenarios"] == 1 and doc["summary"]["passed"] == 1


def test_fabtest_run_exits_1_when_a_playbook_fails(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VENUE_CITY", SECRET)
    write_playbook(project / "pb", PASSING)
    write_playbook(project / "pb", SECRET_PLAYBOOK)
    code = main(["run", "pb/passing.playbook.json", "pb/secret_city.playbook.json", "--experiment-id", "exp_mix"])
    out, _ = capfd.readouterr()
    assert code == 1
    assert "[2/2] secret_city" in out and "1 passed, 1 failed" in out
    doc = json.loads((project / "results" / "exp_mix.json").read_text())
    assert [r["failure_type"] for r in doc["scenario_results"]] == [None, "assertion"]


@pytest.mark.parametrize("content, message", [
    ('{"name": "x"}', "needs 'steps' or 'persona'"),
    ('{"name": "x", "steps": [{"user_input": "hi"}]}', "steps[0].expected_outcome: required"),
    ("{not json", "invalid JSON"),
])
def test_fabtest_run_exits_2_on_a_bad_playbook(project: Path, capfd: pytest.CaptureFixture[str], fake: Any,
                                              content: str, message: str) -> None:
    write_playbook(project / "pb", PASSING)
    (project / "pb" / "bad.playbook.json").write_text(content, encoding="utf-8")
    code = main(["run", "pb/passing.playbook.json", "pb/bad.playbook.json"])
    out, err = capfd.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fabtest run: error: pb/bad.playbook.json: ") and message in err
    assert "[1/" not in out and fake.requests == []  # nothing ran
    assert not (project / "results").exists()


def test_fabtest_run_exits_2_on_a_missing_env_variable(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("VENUE_CITY", raising=False)
    write_playbook(project / "pb", SECRET_PLAYBOOK)
    assert main(["run", "pb/secret_city.playbook.json"]) == 2
    assert "VENUE_CITY not set" in capfd.readouterr().err


def test_fabtest_run_without_a_key_skips_and_exits_1(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    write_playbook(project / "pb", PASSING)
    code = main(["run", "pb/passing.playbook.json", "--no-results"])
    out, _ = capfd.readouterr()
    assert code == 1 and "SKIPPED: judging the steps needs the judge LLM" in out and "GEMINI_API_KEY" in out
    assert not (project / "results").exists()


def test_fabtest_run_exits_2_on_an_agent_that_does_not_import(project: Path, capfd: pytest.CaptureFixture[str],
                                                               fake: Any) -> None:
    write_playbook(project / "pb", PASSING)
    code = main(["run", "pb/passing.playbook.json", "--agent", "no_such_module:build"])
    out, err = capfd.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and "no_such_module" in err and "does not import" in err
    assert fake.requests == [] and not (project / "results").exists()  # nothing ran, nothing written
