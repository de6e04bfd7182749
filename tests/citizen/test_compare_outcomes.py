"""The CI helper that compares pytest-bdd's suite run with and without fabtest."""

from __future__ import annotations

from pathlib import Path

from tests.citizen.compare_outcomes import main

SUMMARY = "=== short test summary info ===\n"
# an inner run's output (captured by the suite's own tests) comes before the summary and is ignored
WITHOUT = ("FAILED test_inner.py::test_x - inner\n" + SUMMARY
           + "PASSED tests/a.py::test_one\nFAILED tests/a.py::test_two - boom\n1 failed, 1 passed in 1.0s\n")


def test_identical_outcomes_pass(tmp_path: Path, capsys) -> None:
    (tmp_path / "without.log").write_text(WITHOUT)
    (tmp_path / "with.log").write_text(WITHOUT.replace("1.0s", "2.0s"))
    assert main([str(tmp_path / "without.log"), str(tmp_path / "with.log")]) == 0
    assert "ends the same" in capsys.readouterr().out


def test_a_changed_or_missing_outcome_fails_naming_the_test(tmp_path: Path, capsys) -> None:
    (tmp_path / "without.log").write_text(WITHOUT)
    (tmp_path / "with.log").write_text(SUMMARY + "FAILED tests/a.py::test_one - fabtest\n")
    assert main([str(tmp_path / "without.log"), str(tmp_path / "with.log")]) == 1
    out = capsys.readouterr().out
    assert "tests/a.py::test_one: without PASSED, with FAILED" in out
    assert "tests/a.py::test_two: without FAILED, with -" in out


def test_an_empty_baseline_is_not_a_pass(tmp_path: Path) -> None:
    (tmp_path / "without.log").write_text("ERROR: file or directory not found: tests\n")
    (tmp_path / "with.log").write_text("")
    assert main([str(tmp_path / "without.log"), str(tmp_path / "with.log")]) == 1
