"""Experiments from real pytest runs: two runs compared, -n 2 equals sequential, stable ids survive moves."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

PYPROJECT = """
[tool.fabtest]
results_dir = "results"

[tool.fabtest.agents]
venue_bot = "{agent}"
"""

FEATURE = """
Feature: Venue bot
  Background:
    Given the agent "venue_bot"
    And the criterion "{criterion}" means "The agent is warm and polite"

  Scenario: Greeting
    When the user says "Hello!"
    Then the response must match "(?i)which city"
    And the response should match "(?i)hello"

  Scenario: Search
    When the user says "A room in Berlin for 10 people on 12 March"
    Then the agent must call "search_venues"
    And the response should match "(?i)€450"

  Scenario: Polite greeting
    When the user says "Hi!"
    Then the response must match "^Hello"
    And the response should not match "^Which"
"""


def project(root: Path, *, agent: str = "fabtest.demo:build_agent", criterion: str = "friendly",
            feature: str = FEATURE, feature_path: str = "features/venues.feature") -> None:
    (root / "pyproject.toml").write_text(PYPROJECT.format(agent=agent))
    path = root / feature_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(feature.format(criterion=criterion)))


def run(root: Path, exp_id: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--fabtest-experiment-id", exp_id, *args], cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((root / "results" / f"{exp_id}.json").read_text())


def compare(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabtest.cli", "compare", *args, "--results-dir", "results"],
                          cwd=root, capture_output=True, text=True, timeout=60)


DESIGN_KEYS = {
    "experiment": {"id", "timestamp", "name", "tags", "git_commit", "git_branch", "git_dirty", "config_hash",
                   "criteria_hash", "topic_graph_hash"},
    "summary": {"total_scenarios", "passed", "failed", "completion_rate", "evaluation_rate", "avg_turns",
                "avg_topics"},
    "scenario": {"id", "name", "passed", "turns", "topics_visited", "failure_type", "failure_message",
                 "evaluations", "expectations"},
}


def test_two_runs_and_a_comparison(tmp_path: Path) -> None:
    project(tmp_path)
    base = run(tmp_path, "exp_aaaaaa", "--fabtest-experiment", "friendly bot")
    project(tmp_path, agent="fabtest.demo:build_grumpy_agent")
    cur = run(tmp_path, "exp_bbbbbb", "--fabtest-experiment", "curt bot")
    for doc in (base, cur):
        assert DESIGN_KEYS["experiment"] <= set(doc["experiment"])
        assert DESIGN_KEYS["summary"] <= set(doc["summary"])
        for scenario in doc["scenario_results"]:
            assert DESIGN_KEYS["scenario"] <= set(scenario)
            assert scenario["id"].startswith("example:") and len(scenario["id"]) == len("example:") + 12
    assert base["summary"]["passed"] == 3
    # seed 10.1: the "must call" step's detail names its tool beside its type
    calls = [d for e in base["scenario_results"] for d in e["expectations"]["details"] if d["type"] == "call_tool"]
    assert calls and all(d["tool"] == "search_venues" and "data" not in d for d in calls)
    assert "call_tool:search_venues" in base["checks_results"] and "call_tool:search_venues" not in base["criteria_results"]
    assert cur["summary"]["passed"] == 2  # the curt bot no longer opens with "Hello"
    text = compare(tmp_path, "exp_aaaaaa", "exp_bbbbbb")
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "Comparison validity: HIGH" in out
    assert "Newly failing (1)" in out and "Polite greeting" in out
    assert "100.0% → 66.7%" in out
    as_json = json.loads(compare(tmp_path, "exp_aaaaaa", "exp_bbbbbb", "--format", "json").stdout)
    assert [s["name"] for s in as_json["newly_failing"]] == ["Polite greeting"]
    # one scenario failing once (3 runs a side) is no evidence of a drop, nor of none: undecided (exit 3), never a pass ...
    gate = compare(tmp_path, "exp_aaaaaa", "exp_bbbbbb", "--fail-on-regression")
    assert gate.returncode == 3, gate.stderr
    assert "UNDECIDED completion: 3/3 → 2/3 runs passed" in gate.stderr and "PASS" not in gate.stderr
    # ... and so is 2 of 3 against a 90% floor (a floor is a test too: it says so), while a 100% floor catches it
    floor = compare(tmp_path, "exp_aaaaaa", "exp_bbbbbb", "--min-completion", "0.9")
    assert floor.returncode == 3, floor.stderr
    assert "UNDECIDED completion floor: 2/3 runs passed (66.7%), floor 90.0%" in floor.stderr
    assert "too few runs to show it is above it" in floor.stderr
    floor = compare(tmp_path, "exp_aaaaaa", "exp_bbbbbb", "--min-completion", "100%")
    assert floor.returncode == 1
    assert "FAIL completion floor: 2/3 runs passed (66.7%), floor 100.0%" in floor.stderr
    # deterministic checks have their own table, never rows of the criteria table
    before, checks = out.split("Checks (deterministic)")
    tables = before.split("Comparability Assessment")[1]  # "What moved" above names failed checks of any kind
    assert "match:/" not in tables, tables
    assert "match:/^Hello/" in checks and "3 checks unchanged" in checks, checks
    # the must that stopped "Polite greeting" early: its later check is not reached, not removed
    assert "not_match:/^Which/" in checks and "not reached (not run in the current experiment" in checks
    assert "Criteria: identical" in before


def test_renaming_a_criterion_changes_the_hash_and_is_flagged(tmp_path: Path) -> None:
    project(tmp_path)
    base = run(tmp_path, "exp_cccccc")
    project(tmp_path, criterion="polite")
    cur = run(tmp_path, "exp_dddddd")
    assert base["experiment"]["criteria_hash"] != cur["experiment"]["criteria_hash"]
    assert base["experiment"]["topic_graph_hash"] == cur["experiment"]["topic_graph_hash"]
    out = compare(tmp_path, "exp_cccccc", "exp_dddddd").stdout
    assert "Criteria" in out and "friendly" in out and "polite" in out
    assert "Comparison validity: HIGH" not in out


def test_moving_the_file_and_reordering_scenarios_keeps_ids_and_fingerprints(tmp_path: Path) -> None:
    project(tmp_path)
    base = run(tmp_path, "exp_eeeeee")
    shutil.rmtree(tmp_path / "features")
    head, *scenarios = FEATURE.split("\n  Scenario: ")
    reordered = head + "".join("\n  Scenario: " + s for s in reversed(scenarios))
    project(tmp_path, feature=reordered, feature_path="moved/deeper/venues.feature")
    cur = run(tmp_path, "exp_ffffff")
    ids = lambda doc: {s["name"]: s["id"] for s in doc["scenario_results"]}  # noqa: E731
    assert ids(base) == ids(cur)
    for key in ("config_hash", "criteria_hash", "topic_graph_hash"):
        assert base["experiment"][key] == cur["experiment"][key]


def test_xdist_gives_the_same_summary_as_a_sequential_run(tmp_path: Path) -> None:
    project(tmp_path)
    sequential = run(tmp_path, "exp_111111")
    parallel = run(tmp_path, "exp_222222", "-n", "2")
    keys = ["total_scenarios", "passed", "failed", "completion_rate", "evaluation_rate", "avg_turns", "avg_topics"]
    assert {k: sequential["summary"][k] for k in keys} == {k: parallel["summary"][k] for k in keys}
    assert sequential["criteria_results"] == parallel["criteria_results"]
    assert sorted(s["id"] for s in sequential["scenario_results"]) == sorted(s["id"] for s in parallel["scenario_results"])


def test_iterations_record_variance(tmp_path: Path) -> None:
    project(tmp_path)
    doc = run(tmp_path, "exp_333333", "--fabtest-iterations", "3")
    assert doc["summary"]["total_scenarios"] == 9
    assert doc["experiment"]["iterations"] == 3
    assert doc["variance"]["completion_rate"]["mean"] == 1.0
    assert {s["iteration"] for s in doc["scenario_results"]} == {1, 2, 3}


@pytest.mark.parametrize("ref", ["exp_missing", "garbage.json"])
def test_compare_with_a_bad_experiment_is_a_one_line_error(tmp_path: Path, ref: str) -> None:
    project(tmp_path)
    run(tmp_path, "exp_444444")
    (tmp_path / "garbage.json").write_text("{not json")
    proc = compare(tmp_path, "exp_444444", ref)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert ref in proc.stderr
