"""``judge_max_file_bytes`` changes verdicts (over it the judge sees a file's name, type and size
only), so the experiment records it (``experiment.judge.settings.max_file_bytes``) and its
``config_hash`` covers it (tests/compare/test_verdict_settings.py: the fingerprint and the comparison)."""

from __future__ import annotations

import json

import pytest

from fabtest.experiment.reader import info_from_experiment
from fabtest.experiment.validate import document_problem
from fabtest.testing import FakeGemini

FEATURE = """
Feature: Hello
  Scenario: Greeting
    When the user says "Hi"
    Then the response must match "Hello"
"""


def test_a_run_records_the_judges_file_limit(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    pytester.makefile(".toml", pyproject='[tool.fabtest]\nagent = "bot:build"\njudge_max_file_bytes = 1000\n')
    pytester.makepyfile(bot="def build(context):\n    return lambda messages: 'Hello!'\n")
    pytester.makefile(".feature", hello=FEATURE)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--fabtest-experiment-id", "exp_l",
                                "--fabtest-no-preflight")
    result.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "results" / "exp_l.json").read_text())
    assert doc["experiment"]["judge"]["settings"]["max_file_bytes"] == 1000
    assert document_problem(doc) is None  # the published schema knows the key
    assert info_from_experiment(doc["experiment"]).judge_settings["max_file_bytes"] == 1000  # read back

