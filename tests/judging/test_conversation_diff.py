"""Turn-by-turn conversation diffs in ``fabtest-compare`` (computing in experiment/diff.py,
rendering in experiment/compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabtest.cli import compare_main
from fabtest.experiment.diff import first_difference
from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.model import ExperimentInfo, ScenarioResult, ToolCallRecord, TurnRecord


def turn(number: int, user: str, agent: str, *tools: str) -> dict[str, object]:
    return {"number": number, "user": user, "agent": agent,
            "tool_calls": [{"name": t, "arguments": {"city": "Berlin"}} for t in tools]}


def test_first_difference_names_the_part() -> None:
    a = [turn(1, "hi", "hello"), turn(2, "Berlin", "Found 2", "search")]
    assert first_difference(a, a) is None
    assert first_difference(a, [turn(1, "hi ", " hello"), turn(2, "Berlin", "Found 2", "search")]) is None
    assert first_difference(a, [turn(1, "hey", "hello")]) == (1, "user")
    assert first_difference(a, [a[0], turn(2, "Berlin", "Nothing")]) == (2, "agent")
    assert first_difference(a, [a[0], turn(2, "Berlin", "Found 2", "book")]) == (2, "tools")
    assert first_difference(a, a[:1]) == (2, "length")


def _write(results: Path, exp_id: str, passed: bool, transcript: list[TurnRecord]) -> None:
    result = ScenarioResult(id="example:abc123", name="Booking", passed=passed, turns=len(transcript),
                            transcript=transcript, failure_type=None if passed else "assertion")
    other = ScenarioResult(id="example:def456", name="Greeting", passed=True, turns=1,
                           transcript=[TurnRecord(number=1, user="hi", agent="hello")])
    write_document(build_document(ExperimentInfo(id=exp_id, timestamp="2026-01-01T00:00:00Z"), [result, other]), results)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    same = TurnRecord(number=1, user="Book a room in Berlin", agent="Which date?")
    _write(tmp_path, "exp_a", True, [same, TurnRecord(number=2, user="12 March", agent="Booked!",
                                                      tool_calls=[ToolCallRecord(name="book_venue")])])
    _write(tmp_path, "exp_b", False, [same, TurnRecord(number=2, user="12 March", agent="Sorry, I cannot."),
                                      TurnRecord(number=3, user="Why?", agent="No rooms.")])
    return tmp_path


def test_compare_shows_the_changed_scenario_side_by_side(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare_main(["exp_a", "exp_b", "--results-dir", str(results)])
    out = capsys.readouterr().out
    assert "Conversation diff: Booking (example:abc123): baseline passed, current failed" in out
    assert "first difference at turn 2: the agent's response differs" in out
    assert "-- turn 2  <- first difference" in out
    row = next(line for line in out.splitlines() if "Agent: Booked!" in line)
    assert row.split("|")[1].strip() == "Agent: Sorry, I cannot."  # side by side
    assert "-> book_venue()" in out and "(no turn)" in out  # baseline has no turn 3
    assert "Greeting" not in out.split("Conversation diff")[1]  # unchanged scenarios are not diffed


def test_compare_markdown_and_json_diffs(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare_main(["exp_a", "exp_b", "--results-dir", str(results), "--format", "markdown"])
    md = capsys.readouterr().out
    assert "| **2** | User: 12 March / Agent: Booked! / -&gt; book_venue() | User: 12 March / Agent: Sorry, I cannot. |" \
        in md
    assert "| 3 | (no turn) | User: Why? / Agent: No rooms. |" in md
    assert "First difference at turn 2: the agent's response differs." in md
    compare_main(["exp_a", "exp_b", "--results-dir", str(results), "--format", "json"])
    [diff] = json.loads(capsys.readouterr().out)["conversation_diffs"]
    assert diff["first"] == 2 and diff["part"] == "agent" and len(diff["pairs"]) == 3


def test_compare_html_has_the_diff(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = results / "c.html"
    assert compare_main(["exp_a", "exp_b", "--results-dir", str(results), "--html", str(out)]) == 0
    html = out.read_text()
    assert "<h2>Conversation diffs</h2>" in html and "first difference at turn 2: the agent&#x27;s response differs" in html
    assert "Agent: Sorry, I cannot." in html and "-&gt; book_venue()" in html


def test_compare_scenario_option(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare_main(["exp_a", "exp_b", "--results-dir", str(results), "--scenario", "Greeting"])
    assert "Greeting (example:def456): baseline passed, current passed" in capsys.readouterr().out
    assert compare_main(["exp_a", "exp_b", "--results-dir", str(results), "--scenario", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--scenario 'nope': no scenario both experiments ran matches it" in err and len(err.splitlines()) == 1


def test_a_newly_failing_scenario_diffs_a_passing_baseline_run_against_a_failing_current_run(tmp_path: Path, capsys) -> None:
    """Issue 28 point 8: "Newly failing (7/10 runs failed)" used to diff iteration 1 with iteration 1
    (both passing) and print "the recorded conversations are the same"."""
    good = [TurnRecord(number=1, user="Book Berlin", agent="Booked!", tool_calls=[ToolCallRecord(name="book_venue")])]
    bad = [TurnRecord(number=1, user="Book Berlin", agent="Sorry, I cannot.")]

    def run(exp_id: str, failing: set[int]) -> None:
        results = [ScenarioResult(id="example:abc123", name="Booking", iteration=i, passed=i not in failing, turns=1,
                                  transcript=bad if i in failing else good,
                                  failure_type="assertion" if i in failing else None) for i in range(1, 11)]
        info = ExperimentInfo(id=exp_id, timestamp="2026-01-01T00:00:00Z", iterations=10)
        write_document(build_document(info, results), tmp_path)

    run("exp_old", set())
    run("exp_new", {3, 4, 5, 6, 7, 8, 9})
    for fmt in ("text", "markdown", "json"):
        compare_main(["exp_old", "exp_new", "--results-dir", str(tmp_path), "--format", fmt])
        out = capsys.readouterr().out
        assert "conversations are the same" not in out.lower()
        if fmt == "text":
            assert "Conversation diff: Booking (example:abc123): baseline passed (iteration 1), current failed (iteration 3)" in out
            assert "first difference at turn 1: the agent's response differs" in out
        elif fmt == "markdown":
            assert "### Conversation diff: Booking (baseline passed (iteration 1), current failed (iteration 3))" in out
        else:
            (diff,) = json.loads(out)["conversation_diffs"]
            assert (diff["baseline_iteration"], diff["current_iteration"], diff["first"]) == (1, 3, 1)
            assert diff["baseline_passed"] is True and diff["current_passed"] is False


def test_the_diffs_name_each_file_where_it_is_kept_and_markdown_links_it(tmp_path: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39: a file is named with its kept bytes' path, relative to the working directory (where a
    printed report is written); in Markdown a link, the name escaped, a record whose hash is no sha256 not linked."""
    from fabtest.experiment.model import FileRecord

    lamp = FileRecord(name="lamp [1].png", mime_type="image/png", size=70, sha256="a" * 64)
    other = FileRecord(name="lamp [1].png", mime_type="image/png", size=70, sha256="b" * 64)
    odd = FileRecord(name="x.png", mime_type="image/png", size=1, sha256="../../etc/passwd")
    _write(tmp_path / "results", "exp_a", True, [TurnRecord(number=1, user="Covered?", agent="Yes.",
                                                            user_files=[lamp])])
    _write(tmp_path / "results", "exp_b", False, [TurnRecord(number=1, user="Covered?", agent="No.",
                                                             user_files=[other], agent_files=[odd])])
    monkeypatch.chdir(tmp_path)
    compare_main(["exp_a", "exp_b", "--format", "markdown"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| **1** |"))
    assert row == (f"| **1** | User: Covered? / file [lamp \\[1\\].png](results/files/{'a' * 64}) image/png 70 B "
                   f"/ Agent: Yes. | User: Covered? / file [lamp \\[1\\].png](results/files/{'b' * 64}) image/png 70 B "
                   "/ Agent: No. / file x.png image/png 1 B |")
    monkeypatch.chdir(tmp_path / "results")  # the report written elsewhere: the links follow
    compare_main(["exp_a", "exp_b", "--format", "markdown", "--results-dir", "."])
    assert f"(files/{'a' * 64})" in capsys.readouterr().out
    compare_main(["exp_a", "exp_b", "--results-dir", "."])
    text = capsys.readouterr().out  # the text diff names the same path (wrapped to its column)
    assert "[file lamp [1].png image/png 70 B:" in text and f" files/{'b' * 64}]" in text
