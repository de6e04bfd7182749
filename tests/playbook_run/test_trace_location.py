"""Issue 9 point 10: traces go under results/traces/, never beside experiments; no-results writes none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.playbook import run_playbook

from .helpers import DEMO_CLI, PYPROJECT, BookingAgent, files_under, write_playbook

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception")
FAILS = {"name": "fails", "steps": [{"user_input": "Hi", "expected_outcome": "The agent quotes a price"}]}


def test_write_trace_false_writes_nothing(llm: Any, tmp_path: Path) -> None:
    path = write_playbook(tmp_path, FAILS)
    outcome = run_playbook(path, agent_factory=BookingAgent, judge_llm=llm, simulator_llm=None, repo_root=tmp_path,
                           experiment_id="exp_x", write_trace=False)
    assert outcome.failure_type == "assertion" and outcome.trace_path is None
    assert "trace:" not in (outcome.failure_message or "")
    assert files_under(tmp_path / "results") == []


def test_iterations_get_their_own_trace(llm: Any, tmp_path: Path) -> None:
    path = write_playbook(tmp_path, FAILS)
    paths = {run_playbook(path, agent_factory=BookingAgent, judge_llm=llm, simulator_llm=None, repo_root=tmp_path,
                          experiment_id="exp_x", iteration=i).trace_path for i in (1, 2)}
    traces = tmp_path / "results" / "traces"
    assert paths == {traces / "exp_x.fails.trace.json", traces / "exp_x.fails.iter2.trace.json"}


def test_fabtest_run_no_results_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Any,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FABTEST_PLAYBOOK_AGENT", "fabtest.demo:build_agent")
    monkeypatch.delenv("FABTEST_RESULTS_DIR", raising=False)
    write_playbook(tmp_path / "pb", FAILS)
    assert main(["run", "pb/fails.playbook.json", "--no-results", "--experiment", "dry run"]) == 1
    out = capfd.readouterr().out
    assert "FAILED [assertion]" in out
    assert files_under(tmp_path / "results") == []
    # issue 31: the summary is still printed, from the results kept in memory, and says nothing was saved
    summary = out.split("Experiment Summary", 1)[1]
    assert '"dry run"' in summary and "1 total, 0 passed, 1 failed" in summary
    assert "Results not saved (--no-results)" in summary and "fabtest-compare" not in summary


def test_pytest_no_results_writes_no_trace_and_traces_stay_out_of_listings(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake: Any) -> None:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    monkeypatch.setenv("FABTEST_PLAYBOOK_AGENT", DEMO_CLI)
    write_playbook(pytester.path / "scenarios" / "playbooks", FAILS)
    pytester.runpytest("scenarios/playbooks", "--fabtest-no-results", *ARGS).assert_outcomes(failed=1)
    assert files_under(pytester.path / "results") == []
    pytester.runpytest("scenarios/playbooks", "--fabtest-experiment-id", "exp_dc0aaa", *ARGS).assert_outcomes(failed=1)
    results = pytester.path / "results"
    assert sorted(p.name for p in results.glob("*.json")) == ["exp_dc0aaa.json"]
    assert (results / "traces" / "exp_dc0aaa.fails.trace.json").is_file()
    assert main(["show", "exp_dc0", "--results-dir", str(results)]) == 0
