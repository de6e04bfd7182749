"""``judge_max_file_bytes`` changes verdicts (over it the judge sees a file's name, type and size
only), so the experiment records it (``experiment.judge.settings.max_file_bytes``) and its
``config_hash`` covers it: two runs that differ only in it do not look like the same configuration."""

from __future__ import annotations

import json

import pytest

from fabtest.experiment.export import build_document
from fabtest.experiment.fingerprint import experiment_fingerprints
from fabtest.experiment.model import ExperimentInfo, ScenarioResult, TurnRecord
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
    assert doc["experiment"]["judge"]["settings"] == {"max_file_bytes": 1000}
    assert document_problem(doc) is None  # the published schema knows the key
    assert info_from_experiment(doc["experiment"]).judge_settings == {"max_file_bytes": 1000}  # read back


def test_the_config_hash_covers_the_judges_file_limit() -> None:
    results = [ScenarioResult(id="example:1", name="s", passed=True, transcript=[TurnRecord(number=1, user="a",
                                                                                            agent="b")])]

    def config_hash(settings: dict[str, int]) -> str:
        info = ExperimentInfo(id="exp", timestamp="2026-01-01T00:00:00Z", judge_settings=settings)
        return str(build_document(info, results)["experiment"]["config_hash"])

    small, large = config_hash({"max_file_bytes": 1000}), config_hash({"max_file_bytes": 2000})
    assert small != large and small == config_hash({"max_file_bytes": 1000})
    # an experiment that recorded no settings (an older file) keeps the hash it always had
    assert config_hash({}) == experiment_fingerprints(results)[0] not in (small, large)
