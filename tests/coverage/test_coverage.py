"""Coverage (issue 21): what a run exercised of the declared topics, transitions, tools, criteria and records."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fabtest.experiment.coverage import (
    CoverageFloorError,
    below_floors,
    changes,
    coverage_of,
    parse_floor,
    run_facts,
    summarise,
)
from fabtest.experiment.coverage_text import change_lines, coverage_lines
from fabtest.experiment.model import CheckRecord, ScenarioResult, ToolCallRecord, TopicRecord, TurnRecord

TOPICS = [TopicRecord(name="greeting", successors=["details"]), TopicRecord(name="details", successors=["booking"]),
          TopicRecord(name="booking"), TopicRecord(name="payment")]


def result(**kw: Any) -> ScenarioResult:
    base: dict[str, Any] = {"id": "example:1", "name": "s", "passed": True, "topics": TOPICS,
                            "criteria": {"friendly": "warm", "concise": "short"},
                            "agent_metadata": {"tools": ["search", {"name": "book"}, "cancel"]}}
    return ScenarioResult(**{**base, **kw})


def check(criterion: str, status: str = "passed") -> CheckRecord:
    return CheckRecord(type="criterion", mode="should", criterion=criterion, status=status)


def turn(*calls: tuple[str, dict[str, Any]]) -> TurnRecord:
    return TurnRecord(number=1, user="u", agent="a", tool_calls=[ToolCallRecord(name=n, arguments=a) for n, a in calls])


def test_every_kind_is_counted_from_what_ran() -> None:
    cov = coverage_of([
        result(topic_path=["greeting", "details"], transcript=[turn(("search", {"city": "Berlin", "people": 10}))],
               evaluations=[check("friendly", "failed")]),
        result(topic_path=["greeting", "booking"], off_graph_transitions=["greeting -> booking (turn 2)"],
               transcript=[turn(("search", {"city": "Munich", "people": 3}), ("refund", {}))]),
    ])
    assert cov["topics"] == {"declared": 4, "reached": {"booking": 1, "details": 1, "greeting": 2},
                             "never_reached": ["payment"], "rate": 0.75}
    assert cov["transitions"]["taken"] == {"greeting -> details": 1}
    assert cov["transitions"]["never_taken"] == ["details -> booking"]
    assert cov["transitions"]["off_graph"] == {"greeting -> booking": 1}
    assert cov["tools"]["called"] == {"search": 2} and cov["tools"]["never_called"] == ["book", "cancel"]
    assert cov["tools"]["undeclared_called"] == ["refund"]
    assert cov["tools"]["argument_shapes"]["search"] == ["{city: str, people: number}"]  # one shape, seen twice
    # a failed verdict still means the criterion was evaluated: coverage is about what was asked
    assert cov["criteria"]["evaluated"] == {"friendly": 1} and cov["criteria"]["never_evaluated"] == ["concise"]
    assert cov["criteria"]["rate"] == 0.5


def test_skipped_runs_and_skipped_checks_cover_nothing() -> None:
    cov = coverage_of([result(skipped=True, passed=False, topic_path=["greeting"]),
                       result(evaluations=[check("friendly", "skipped")])])
    assert cov["topics"]["reached"] == {} and cov["criteria"]["evaluated"] == {}


def test_records_by_category_and_nothing_declared() -> None:
    cov = coverage_of([
        result(record_id="a", record_category="injection", passed=True),
        result(record_id="a", record_category="injection", passed=False, iteration=2),
        result(record_id="b", record_category="injection", passed=True),
        result(record_id="c", passed=True),
    ])
    assert cov["records"] == {"injection": {"records": 2, "runs": 3, "passed": 2, "rate": 0.6667},
                              "uncategorised": {"records": 1, "runs": 1, "passed": 1, "rate": 1.0}}
    bare = coverage_of([ScenarioResult(id="x", name="x", passed=True)])
    assert bare["topics"] == {"declared": 0, "reached": {}, "never_reached": [], "rate": None}
    assert coverage_lines(bare) == []


def test_identical_runs_share_their_facts_and_add_up_the_same() -> None:
    runs = [result(topic_path=["greeting"], iteration=i) for i in (1, 2)]
    assert run_facts(runs[0]) == run_facts(runs[1])
    assert summarise(map(run_facts, runs)) == coverage_of(runs)


@pytest.mark.parametrize("text, expected", [("tools=0.8", ("tools", 0.8)), ("topics = 75%", ("topics", 0.75)),
                                            ("criteria=1", ("criteria", 1.0))])
def test_floor_parsing(text: str, expected: tuple[str, float]) -> None:
    assert parse_floor(text) == expected


@pytest.mark.parametrize("text, says", [("tool=0.8", "KIND one of topics"), ("tools", "expected KIND=RATE"),
                                        ("tools=1.5", "between 0 and 1"), ("tools=lots", "between 0 and 1")])
def test_bad_floors_say_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(CoverageFloorError, match=says):
        parse_floor(text)


def test_floors_and_changes() -> None:
    before = coverage_of([result(topic_path=["greeting", "details"])])
    after = coverage_of([result(topic_path=["greeting", "payment"])])
    assert below_floors(after, {"topics": 0.5, "tools": 0.1}) == [
        "tools coverage 0% is below the floor 10% (--fabtest-min-coverage tools=0.1)"]
    changed = changes(before, after)
    assert changed == {"topics": {"covered": ["payment"], "uncovered": ["details"]},
                       "transitions": {"covered": [], "uncovered": ["greeting -> details"]}}
    assert change_lines(changed) == ["", "Coverage Changes", "  Topics: newly covered: payment",
                                     "  Topics: no longer covered: details",
                                     "  Transitions: no longer covered: greeting -> details"]


# -- a real run ------------------------------------------------------------------------------------------
FEATURE = """
Feature: Venues
  Background:
    Given the agent "venue_bot"
    And the criterion "friendly" means "The agent is warm"
    And the criterion "concise" means "At most three sentences"
    And the topics:
      | topic     | characteristic          | triggers             | next      |
      | details   | The agent asks details  | agent:/(?i)which city/ | results |
      | results   | The agent shows venues  | tool:search_venues   | booking   |
      | booking   | The agent books         | tool:book_venue      |           |

  Scenario: Search only
    When the user says "Hello!"
    And the user says "Berlin, 12 March, 10 people"
    Then the agent must call "search_venues"
    And the response should match "(?i)loft"

  @scenario_set:coverage_cases:records
  Scenario: From a Python source
    When the user says "Hi"
    Then the response must match "(?i)which city"
"""

SOURCE = """
def records():
    yield {"id": "one", "goal": "Say hello", "category": "greeting"}
    yield {"id": "two", "goal": "Say hi", "category": "greeting"}
"""


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--fabtest-experiment-id", "exp_cov001", *args], cwd=root, capture_output=True,
                          text=True, timeout=300)


def test_a_run_prints_and_records_its_coverage_and_a_floor_fails_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.fabtest]\nresults_dir = "results"\n[tool.fabtest.agents]\nvenue_bot = "fabtest.demo:build_agent"\n')
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "venues.feature").write_text(textwrap.dedent(FEATURE))
    (tmp_path / "coverage_cases.py").write_text(SOURCE)
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Coverage\n  Topics:      2/3 reached (67%); never reached: booking" in proc.stdout
    assert "Tools:       1/3 called (33%); never called: book_venue, check_availability" in proc.stdout
    assert "Criteria:    0/2 evaluated (0%); never evaluated: concise, friendly" in proc.stdout
    assert "Records:     greeting 2/2 passed" in proc.stdout
    doc = json.loads((tmp_path / "results" / "exp_cov001.json").read_text())
    assert doc["coverage"]["transitions"]["taken"] == {"details -> results": 1}
    assert doc["coverage"]["records"]["greeting"]["records"] == 2
    assert {e["record_category"] for e in doc["scenario_results"] if e.get("record_id")} == {"greeting"}
    assert doc["coverage"]["tools"]["argument_shapes"]["search_venues"] == ["{capacity: number, city: str}"]

    (tmp_path / "results" / "exp_cov001.json").unlink()
    failed = _run(tmp_path, "--fabtest-min-coverage", "tools=0.5", "--fabtest-min-coverage", "topics=0.5")
    assert failed.returncode == 1
    assert "FAILED: tools coverage 33% is below the floor 50% (--fabtest-min-coverage tools=0.5)" in failed.stdout
    assert "topics coverage" not in failed.stdout  # 67% clears its floor


def test_compare_lists_what_became_covered_and_uncovered() -> None:
    from fabtest.compare.compute import compare
    from fabtest.compare.render import render_markdown, render_text
    from fabtest.experiment.export import build_document
    from fabtest.experiment.model import ExperimentInfo

    def doc(exp_id: str, path: list[str]) -> dict[str, Any]:
        info = ExperimentInfo(id=exp_id, timestamp="2026-11-24T00:00:00Z")
        return build_document(info, [result(topic_path=path)])

    comparison = compare(doc("exp_a", ["greeting", "details"]), doc("exp_b", ["greeting", "booking"]))
    assert comparison.coverage["topics"] == {"covered": ["booking"], "uncovered": ["details"]}
    text = render_text(comparison)
    assert "Coverage Changes\n  Topics: newly covered: booking\n  Topics: no longer covered: details" in text
    assert "Topics: newly covered: booking" in render_markdown(comparison)
