"""Bad ``.feature`` files (malformed Gherkin, steps, tables, topics, tags, criteria, outlines): each
gives ONE line naming the file and its line, and never a Python traceback.

The cases are written inline (not as corpus files) so this module owns them entirely: the shared
corpus checker in ``test_bad_inputs.py`` lists the files under ``corpus/`` as its own.
"""

from __future__ import annotations

import pytest
from support.bad_inputs import assert_one_line_holds, run_inline_feature

HI = '    When the user says "hi"\n    Then the response must match "hello"\n'

# case -> (feature text, texts the one error line must hold). The file is written as "bad.feature".
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    # -- Gherkin structure ---------------------------------------------------------------------
    "scenario_without_colon": ("Feature: F\n  Scenario Hi\n" + HI,
                               ("bad.feature:2", '"Scenario" needs a colon')),
    "outline_without_colon": ("Feature: F\n  Scenario Outline Hi <x>\n" + HI,
                              ("bad.feature:2", '"Scenario Outline" needs a colon')),
    "background_without_colon": ("Feature: F\n  Background\n\n  Scenario: S\n" + HI,
                                 ("bad.feature:2", '"Background" needs a colon')),
    "rule_without_colon": ("Feature: F\n  Rule Greetings\n\n  Scenario: S\n" + HI,
                           ("bad.feature:2", '"Rule" needs a colon')),
    "example_without_colon": ("Feature: F\n  Example Hi\n" + HI, ("bad.feature:2", '"Example" needs a colon')),
    "examples_without_colon": ("Feature: F\n  Scenario Outline: S\n" + HI + "    Examples\n      | x |\n      | 1 |\n",
                               ("bad.feature", "Line number: 5")),
    "two_features": ("Feature: F\n  Scenario: S\n" + HI + "Feature: G\n", ("bad.feature", "Line number: 5")),
    "background_after_scenario": ("Feature: F\n  Scenario: S\n" + HI + "  Background:\n    Given the agent \"x\"\n",
                                  ("bad.feature", "Line number: 5")),
    "unclosed_docstring": ('Feature: F\n  Scenario: S\n    When the user says:\n      """\n      hi\n',
                           ("bad.feature", "Line number: ")),
    "uneven_table": ("Feature: F\n  Scenario: S\n    Given the criteria:\n      | criterion | description |\n"
                     "      | friendly |\n" + HI, ("bad.feature", "Line number: 5")),
    "unknown_language": ("# language: xx-nowhere\nFeature: F\n  Scenario: S\n" + HI, ("bad.feature", "xx-nowhere")),
    "comments_only": ("# just a comment\n# and another\n", ("bad.feature", 'no "Feature:" found')),
    "given_after_then": ("Feature: F\n  Scenario: S\n" + HI + "    Given the agent \"x\"\n",
                         ("bad.feature:5", "comes after")),
    # -- same names ------------------------------------------------------------------------------
    "duplicate_scenario": ("Feature: F\n  Scenario: S\n" + HI + "\n  Scenario: S\n" + HI,
                           ("bad.feature:6", "bad.feature:2", "rename one of them")),
    "duplicate_scenario_in_rule": ("Feature: F\n  Rule: R\n  Scenario: S\n" + HI + "  Scenario: S\n" + HI,
                                   ("bad.feature:6", "bad.feature:3", "same Rule and name")),
    "duplicate_outline": ("Feature: F\n  Scenario Outline: S\n" + HI + "    Examples:\n      | x |\n      | 1 |\n"
                          "  Scenario: S\n" + HI, ("bad.feature:8", "bad.feature:2", "same Feature and name")),
    # -- outlines --------------------------------------------------------------------------------
    "outline_without_examples": ("Feature: F\n  Scenario Outline: S <x>\n" + HI,
                                 ("bad.feature:2", "no Examples")),
    "outline_empty_examples": ("Feature: F\n  Scenario Outline: S <x>\n" + HI + "    Examples:\n",
                               ("bad.feature:2", "no Examples")),
    # -- steps -----------------------------------------------------------------------------------
    "unknown_step": ("Feature: F\n  Scenario: S\n    When the user shouts \"hi\"\n",
                     ("bad.feature:3", "no step definition matches")),
    "single_quotes": ("Feature: F\n  Scenario: S\n    When the user says 'hi'\n",
                      ("bad.feature:3", "no step definition matches")),
    "then_typo": ("Feature: F\n  Scenario: S\n    When the user says \"hi\"\n    Then the respons must match \"x\"\n",
                  ("bad.feature:4", "no step definition matches")),
    "regex_unbalanced": ("Feature: F\n  Scenario: S\n    When the user says \"hi\"\n"
                         "    Then the response must match \"(hello\"\n", ("bad.feature:4", "(hello")),
    "turns_not_a_number": ("Feature: F\n  Scenario: S\n    When the user says \"hi\"\n"
                           "    Then the conversation must take at most many turns\n",
                           ("bad.feature:4", "no step definition matches")),
    "unknown_agent": ("Feature: F\n  Scenario: S\n    Given the agent \"nobody\"\n" + HI,
                      ("bad.feature:3", "nobody")),
    # -- criteria --------------------------------------------------------------------------------
    "criterion_twice_in_background": ("Feature: F\n  Background:\n    Given the criterion \"kind\" means \"warm\"\n"
                                      "    Given the criterion \"kind\" means \"polite\"\n\n  Scenario: S\n" + HI,
                                      ("bad.feature:4", "bad.feature:3", '"kind" is already defined')),
    "criterion_twice_in_scenario": ("Feature: F\n  Scenario: S\n    Given the criterion \"kind\" means \"warm\"\n"
                                    "    Given the criterion \"kind\" means:\n      \"\"\"\n      polite\n      \"\"\"\n"
                                    + HI, ("bad.feature:4", "bad.feature:3", "Scenario")),
    "criteria_duplicate_rows": ("Feature: F\n  Scenario: S\n    Given the criteria:\n"
                                "      | criterion | description |\n      | kind | warm |\n      | kind | polite |\n" + HI,
                                ("bad.feature:6", "bad.feature:5", '"kind" is already defined')),
    "criteria_wrong_header": ("Feature: F\n  Scenario: S\n    Given the criteria:\n      | name | text |\n"
                              "      | kind | warm |\n" + HI, ("bad.feature:3", "| criterion | description |")),
    "criteria_without_table": ("Feature: F\n  Scenario: S\n    Given the criteria:\n" + HI,
                               ("bad.feature:3", "needs a data table")),
    "criterion_empty_description": ("Feature: F\n  Scenario: S\n    Given the criterion \"kind\" means \"\"\n" + HI,
                                    ("bad.feature:3", "needs a description")),
    "criterion_bad_verdict": ("Feature: F\n  Scenario: S\n    Given the criterion \"kind\" means \"warm\" with examples:\n"
                              "      | example | verdict |\n      | hi there | maybe |\n" + HI,
                              ("bad.feature:3", "verdict must be 'good' or 'bad'")),
    # -- topics ----------------------------------------------------------------------------------
    "topics_without_table": ("Feature: F\n  Scenario: S\n    Given the topics:\n" + HI,
                             ("bad.feature:3", "needs a data table")),
    "topics_bad_trigger": ("Feature: F\n  Scenario: S\n    Given the topics:\n"
                                 "      | topic | characteristic | triggers | next |\n"
                                 "      | greeting | says hi | hi | nowhere |\n" + HI, ("bad.feature:3", 'topic "greeting"')),
    # -- tags ------------------------------------------------------------------------------------
    "scenario_set_missing": ("Feature: F\n  @scenario_set:absent\n  Scenario: S\n" + HI, ("bad.feature", "absent")),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_feature_gives_one_line_naming_file_and_line(case: str, pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text, expected = CASES[case]
    assert_one_line_holds(run_inline_feature(pytester, monkeypatch, text), expected)
