"""``[tool.fabtest.judge.samples_per_criterion]``: sampling only the criteria that need it, through
the real google-genai client against FakeGemini (the project and scripts of tests/support/judging.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.judging import criteria_calls, friendly_checks, run, script_verdicts

from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.engine.judge import Judge
from fabtest.errors import UsageError
from fabtest.testing import FakeGemini

PER_CRITERION = 'samples_per_criterion = { friendly = 3 }'


def short_checks(doc: dict[str, object]) -> list[dict[str, object]]:
    return [d for s in doc["scenario_results"] for d in s["evaluations"]["details"]  # type: ignore[index, attr-defined]
            if d["criterion"] == "The reply is short"]


def test_only_the_named_criterion_is_sampled(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    script_verdicts(fake, ["passed", "failed", "passed"])
    doc = run(pytester, judge_extra=PER_CRITERION)
    [friendly] = friendly_checks(doc)
    assert friendly["status"] == "passed" and friendly["samples"] == {"passed": 2, "failed": 1}
    assert friendly["confidence"] == "low"
    [short] = short_checks(doc)
    assert "samples" not in short and "confidence" not in short  # judged once, as before
    # one batched call per sample, each its own cache entry: the cache keys the samples
    assert len(criteria_calls(fake)) == 3
    assert len(list((pytester.path / ".fabtest" / "cache").glob("*.json"))) == 3
    fake.reset()
    script_verdicts(fake, ["failed"])
    again = run(pytester, judge_extra=PER_CRITERION)
    assert friendly_checks(again)[0]["samples"] == {"passed": 2, "failed": 1} and criteria_calls(fake) == []


def test_the_criterion_count_wins_over_the_default(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    script_verdicts(fake, ["failed", "passed"])
    doc = run(pytester, judge_extra="samples = 2\n" + 'samples_per_criterion = { friendly = 1 }')
    [friendly] = friendly_checks(doc)
    assert "samples" not in friendly and friendly["status"] == "failed"  # sample 0 only
    [short] = short_checks(doc)
    assert short["samples"] == {"passed": 2}
    assert len(criteria_calls(fake)) == 2


def test_judge_samples_for() -> None:
    judge = Judge(None, samples=2, per_criterion={"hard": 5})
    assert judge.samples_for(Criterion("hard", "d")) == 5 and judge.samples_for(Criterion("soft", "d")) == 2
    with pytest.raises(ValueError, match="samples of 'hard' must be at least 1"):
        Judge(None, per_criterion={"hard": 0})


def test_a_bad_count_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest.judge.samples_per_criterion]\nfriendly = 0\n')
    with pytest.raises(UsageError) as caught:
        Settings.load(tmp_path, environ={})
    message = str(caught.value)
    assert "judge.samples_per_criterion.friendly" in message and "greater than or equal to 1" in message
    assert len(message.splitlines()) == 1
