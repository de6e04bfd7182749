"""fabtest generate (issue 21): drafts aimed at coverage gaps, deduplicated, written to a new file, then run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fabtest.authoring.generate import Declared, build_prompt, draft_records, write_records
from fabtest.errors import UsageError
from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.testing import FakeLLM


def test_the_prompt_is_the_same_for_the_same_declarations_in_any_order() -> None:
    a = Declared(topics={"b": ("B", ("a",)), "a": ("A", ())}, tools=["z", "y"], criteria={"x": "X", "w": "W"},
                 gaps={"tools": ["z", "y"]})
    b = Declared(topics={"a": ("A", ()), "b": ("B", ("a",))}, tools=["y", "z"], criteria={"w": "W", "x": "X"},
                 gaps={"tools": ["y", "z"]})
    assert build_prompt(a, "venues", 3) == build_prompt(b, "venues", 3)
    assert "- tools: y, z" in build_prompt(a, "venues", 3)


def test_duplicates_and_undeclared_targets_are_dropped_with_a_reason() -> None:
    existing = [ScenarioRecord(id="berlin", name="b", goal="Book a room for 10 people in Berlin")]
    declared = Declared(topics={"booking": ("", ())}, tools=["book_venue"], existing=existing)
    fake = FakeLLM().scenarios([
        {"id": "berlin", "goal": "Something else"},
        {"id": "again", "goal": "Book a room for ten people in Berlin!"},  # close to the existing goal
        {"id": "Munich Trip", "goal": "Find a venue in Munich", "expected_tool": "cancel", "topic": "booking"},
    ])
    kept, dropped, notes = draft_records(fake, declared, count=3)
    assert [r["id"] for r in kept] == ["munich-trip"]
    assert kept[0]["verification"] == {"reached_topic": "booking"}
    assert dropped[0] == "berlin: an existing record has this id"
    assert dropped[1].startswith("again: its goal repeats an existing one") and len(dropped) == 2
    assert notes == ["munich-trip: expected tool 'cancel' is not declared; left out of verification"]
    assert fake.calls[-1].purpose == "scenarios"


def test_unknown_keys_in_a_draft_are_reported_not_dropped_silently() -> None:
    """A key the draft schema has no field for (docs/coverage.md, "The draft schema") is named with
    its record; the record is still written from the keys it knows (issue 31)."""
    fake = FakeLLM().scenarios([
        {"id": "late-refund", "goal": "Get a refund for a late delivery", "tags": ["refund"], "verification": {"x": 1}},
        {"id": "plain", "goal": "Ask for opening hours"},
    ])
    kept, dropped, notes = draft_records(fake, Declared(), count=2)
    assert [r["id"] for r in kept] == ["late-refund", "plain"]
    assert "tags" not in kept[0] and "verification" not in kept[0] and not dropped
    assert notes == ["late-refund: unknown key(s) 'tags', 'verification' in the draft (not in the draft schema); "
                       "left out"]


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "scenarios" / "generated.yaml"
    write_records([{"id": "a", "goal": "g"}], path)
    before = path.read_text()
    with pytest.raises(UsageError, match="exists: fabtest generate never overwrites"):
        write_records([{"id": "b", "goal": "h"}], path)
    assert path.read_text() == before


FEATURE = """
Feature: Venues
  Background:
    Given the agent "venue_bot"
    And the topics:
      | topic     | characteristic          | triggers               | next    |
      | details   | The agent asks details  | agent:/(?i)which city/ | results |
      | results   | The agent shows venues  | tool:search_venues     | booking |
      | booking   | The agent books         | tool:book_venue        |         |

  Scenario: Browsing
    When the user says "Hello!"
    And the user says "Berlin, 12 March, 10 people"
    Then the agent must call "search_venues"
"""

GENERATED = """
  @scenario_set:generated
  Scenario: Generated cases
    Given a simulated user from the scenario
    When the simulated user talks to the agent
"""

OFFLINE = '''
from fabtest.demo.offline_llm import demo_llm


def aimed(call):
    """Draft one record per gap the prompt lists (a stand-in for the real model)."""
    records = []
    if "book_venue" in call.subject.split("NEVER EXERCISED")[1]:
        records.append({"id": "book-berlin", "name": "Book in Berlin", "goal": "Book a room",
                        "persona": "An office manager", "facts": {"city": "Berlin", "date": "12 March", "people": "10 people"},
                        "expected_tool": "book_venue", "topic": "booking", "category": "booking",
                        "aims_at": ["tools: book_venue", "topics: booking"]})
    records.append({"id": "dup", "goal": "Browse venues in Berlin"})
    return records


def llm():
    return demo_llm().scenarios(aimed)
'''


def _pytest(root: Path, exp: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--fabtest-experiment-id", exp], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads((root / "results" / f"{exp}.json").read_text())


def test_generated_records_run_green_and_raise_the_coverage_they_aimed_at(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.fabtest]
        results_dir = "results"
        offline_llm = "offline:llm"
        [tool.fabtest.agents]
        venue_bot = "fabtest.demo:build_agent"
        """))
    (tmp_path / "offline.py").write_text(OFFLINE)
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "venues.feature").write_text(textwrap.dedent(FEATURE))
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "browse.yaml").write_text("- id: dup\n  goal: Browse venues in Berlin\n")
    before = _pytest(tmp_path, "exp_gen001")["coverage"]
    assert before["tools"]["never_called"] == ["book_venue", "check_availability"]
    assert "booking" in before["topics"]["never_reached"]

    gen = subprocess.run([sys.executable, "-m", "fabtest.cli", "generate", "--describe", "Books event venues",
                          "--count", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    assert "Wrote 1 scenario record(s) to" in gen.stdout and "aimed at: tools: book_venue, topics: booking" in gen.stdout
    assert "dropped dup: an existing record has this id" in gen.stdout
    written = (tmp_path / "scenarios" / "generated.yaml").read_text()
    assert "call_tool: book_venue" in written and "reached_topic: booking" in written
    again = subprocess.run([sys.executable, "-m", "fabtest.cli", "generate"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 2 and "never overwrites" in again.stderr

    (tmp_path / "features" / "venues.feature").write_text(textwrap.dedent(FEATURE) + textwrap.dedent(GENERATED))
    after = _pytest(tmp_path, "exp_gen002")
    generated = [e for e in after["scenario_results"] if e.get("record_id") == "book-berlin"]
    assert generated and generated[0]["passed"]  # its verification (book_venue, booking) held
    assert "book_venue" in after["coverage"]["tools"]["called"]
    assert "booking" in after["coverage"]["topics"]["reached"]
    assert after["coverage"]["tools"]["rate"] > before["tools"]["rate"]


def test_generate_sees_the_tools_the_agent_called_and_plans_before_it_writes(tmp_path: Path) -> None:
    """Issue 27 points 2 and 13: a tool the agent called but does not declare reaches the prompt,
    and a draft's plan (aims_at, category) comes before the scenario it plans in the schema."""
    from fabtest.authoring.generate import Drafts, declared_from
    from fabtest.llm.base import json_schema

    experiment = {"coverage": {"tools": {"called": {"search_venues": 2}, "never_called": ["book_venue"],
                                         "undeclared_called": ["check_availability"]}},
                  "scenario_results": [{"transcript": [{"tool_calls": [{"name": "send_invoice"}]}]}]}
    declared = declared_from({}, [], experiment, tmp_path)
    assert list(declared.tools) == ["book_venue", "check_availability", "search_venues", "send_invoice"]
    prompt = build_prompt(declared, "venues", 2)
    assert "- check_availability" in prompt and "- send_invoice" in prompt
    draft = json_schema(Drafts)["$defs"]["Draft"]
    assert draft["required"][:2] == ["aims_at", "category"] and draft["required"] == list(draft["properties"])
