"""``pytest scenarios/playbooks/``: one item per playbook, results recorded into the experiment."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fabtest.experiment.stable_id import stable_id
from fabtest.pytest_plugin.playbooks import expand_braces, matches

from .helpers import DEMO_CLI, EXAMPLES, PYPROJECT, write_playbook

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake: Any) -> Path:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    monkeypatch.setenv("FABTEST_PLAYBOOK_AGENT", DEMO_CLI)
    monkeypatch.setenv("VENUE_CITY", "Hamburg")
    return pytester.path


def experiment(path: Path, exp_id: str) -> dict[str, Any]:
    return json.loads((path / "results" / f"{exp_id}.json").read_text())


def test_the_examples_run_under_pytest_and_record_an_experiment(pytester: pytest.Pytester, project: Path) -> None:
    shutil.copytree(EXAMPLES, project / "scenarios" / "playbooks")
    result = pytester.runpytest("scenarios/playbooks", "-v", "--fabtest-experiment-id", "exp_pb", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*book_berlin.playbook.json::book_berlin PASSED*", "*fabtest experiment*"])
    doc = experiment(project, "exp_pb")
    by_name = {r["name"]: r for r in doc["scenario_results"]}
    assert set(by_name) == {"book_berlin", "persona_booking", "venue_city_secret"}
    assert all(r["passed"] for r in by_name.values())
    assert by_name["book_berlin"]["id"] == stable_id("playbook", None, "book_berlin")
    assert by_name["book_berlin"]["turns"] == 4 and doc["summary"]["total_scenarios"] == 3
    # a playbook's steps are recorded as the feature steps are (issue 31): the conversation page shows them
    steps = by_name["book_berlin"]["steps"]
    assert [s["keyword"] for s in steps] == ["Step 1", "Step 2", "Step 3", "Step 4"]
    assert steps[0] == {"keyword": "Step 1", "text": "Hi, I need a meeting room.",
                        "expected": "The agent is friendly and asks for the city, the date and the number of people"}
    assert "Hamburg" not in (project / "results" / "exp_pb.json").read_text()
    assert sorted(p.name for p in (project / "results").iterdir()) == ["exp_pb.json"]  # no traces after passes


def test_a_failing_playbook_shows_a_short_message_and_is_recorded_once(pytester: pytest.Pytester,
                                                                      project: Path) -> None:
    write_playbook(project / "scenarios" / "playbooks", {"name": "fails", "timeout": 30, "steps": [
        {"user_input": "Hi, I need a meeting room.", "expected_outcome": "The agent quotes a price per day"},
        {"user_input": "Berlin", "expected_outcome": "never sent"}]})
    result = pytester.runpytest("scenarios/playbooks", "--fabtest-experiment-id", "exp_f", *ARGS)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "fails.playbook.json: playbook 'fails' failed [assertion]: step 1 of 2 failed" in out
    assert "Traceback" not in out and "def runtest" not in out and "workspace kept at" in out
    (entry,) = experiment(project, "exp_f")["scenario_results"]
    assert entry["failure_type"] == "assertion" and entry["turns"] == 1
    # the trace goes under results/traces/, never beside the experiments
    assert (project / "results" / "traces" / "exp_f.fails.trace.json").is_file()
    assert sorted(p.name for p in (project / "results").glob("*.json")) == ["exp_f.json"]


def test_a_bad_playbook_is_a_one_line_collection_error(pytester: pytest.Pytester, project: Path) -> None:
    folder = project / "scenarios" / "playbooks"
    folder.mkdir(parents=True)
    (folder / "broken.playbook.yaml").write_text("name: broken\nsteps:\n  - user_input: hi\n", encoding="utf-8")
    result = pytester.runpytest("scenarios/playbooks", *ARGS)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*broken.playbook.yaml: steps[[]0[]].expected_outcome: required*"])
    assert "Traceback" not in result.stdout.str()


def test_only_files_matching_the_glob_are_collected_and_no_key_skips(pytester: pytest.Pytester, project: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    step = [{"user_input": "Hi", "expected_outcome": "x"}]
    write_playbook(project / "scenarios" / "playbooks", {"name": "one", "steps": step}, fmt="yml")
    write_playbook(project / "scenarios" / "playbooks" / "nested", {"name": "nested", "steps": step})
    write_playbook(project / "scenarios", {"name": "elsewhere", "steps": step})
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    result = pytester.runpytest("scenarios", "-rs", "--fabtest-experiment-id", "exp_s", *ARGS)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*judging the steps needs the judge LLM*GEMINI_API_KEY*"])
    (entry,) = experiment(project, "exp_s")["scenario_results"]
    assert entry["name"] == "one" and entry["skipped"] is True


def test_the_glob() -> None:
    assert expand_braces("a.{json,yaml,yml}") == ["a.json", "a.yaml", "a.yml"]
    root = Path("/repo")
    pattern = "scenarios/playbooks/*.playbook.{json,yaml,yml}"
    assert matches(pattern, root / "scenarios/playbooks/x.playbook.yml", root)
    assert not matches(pattern, root / "scenarios/playbooks/sub/x.playbook.yml", root)
    assert not matches(pattern, root / "scenarios/playbooks/x.json", root)
    assert matches("**/*.playbook.json", root / "a/b/x.playbook.json", root)
    assert matches("**/*.playbook.json", root / "x.playbook.json", root)
