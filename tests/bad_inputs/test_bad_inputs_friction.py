"""Outline placeholders with no Examples column are collection errors: one line naming file:line,
the placeholder, the columns and the closest one (the cases are inline; see test_bad_inputs_features.py)."""

from __future__ import annotations

import textwrap

import pytest
from support.bad_inputs import (
    BASE_ARGS,
    GOOD_AGENT,
    GOOD_PYPROJECT,
    assert_one_line_holds,
    run_inline_feature,
)

OUTLINE = ("Feature: F\n  Scenario Outline: S\n    When the user says \"{step}\"\n"
           "    Then the response must match \"hello\"\n{extra}"
           "    Examples:\n      | author | title |\n      | Le Guin | Lathe |\n")

# case -> (feature text, texts the one error line must hold). The file is written as "bad.feature".
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "placeholder_typo": (OUTLINE.format(step="books by <autor>", extra=""),
                         ("bad.feature:3", "<autor>", "columns: author, title", "did you mean <author>?")),
    "placeholder_unknown": (OUTLINE.format(step="books from <year>", extra=""),
                            ("bad.feature:3", "<year>", "Examples table at line 5", "columns: author, title")),
    "placeholder_in_table": (OUTLINE.format(step="hi", extra="    And the agent must call \"search\" with:\n"
                                            "      | argument | value    |\n      | title    | <titel>  |\n"),
                             ("bad.feature:7", "<titel>", "did you mean <title>?")),
    "placeholder_in_name": ("Feature: F\n  Scenario Outline: S <autor>\n    When the user says \"<author>\"\n"
                            "    Examples:\n      | author |\n      | x |\n",
                            ("bad.feature:2", "<autor>", "did you mean <author>?")),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_outline_gives_one_line_naming_file_and_line(case: str, pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text, expected = CASES[case]
    assert_one_line_holds(run_inline_feature(pytester, monkeypatch, text), expected)


def test_outline_with_every_placeholder_known_still_runs(pytester: pytest.Pytester) -> None:
    """Known placeholders still collect (the check only refuses names no column has)."""
    root = pytester.path
    (root / "goodbot.py").write_text(textwrap.dedent(GOOD_AGENT), encoding="utf-8")
    (root / "pyproject.toml").write_text(textwrap.dedent(GOOD_PYPROJECT), encoding="utf-8")
    (root / "ok.feature").write_text(OUTLINE.format(step="books by <author> called <title>", extra=""),
                                     encoding="utf-8")
    result = pytester.runpytest(*BASE_ARGS, "-q", "--collect-only", str(root))
    assert result.ret == 0, result.stdout.str()
