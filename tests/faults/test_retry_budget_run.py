"""A 429 storm against a whole pytest run: once the suite's retry budget is spent, the next
transient failures end their scenario at once (as ``judge``: the judge failed for good on a ``must``, not the agent), the healthy scenarios still pass, and
the summary says the budget ran out and how many scenarios it cost.

The judge allows 2 retries per call (fault_helpers' pyproject); the budget's floor is 10 retries,
so five storm scenarios spend it and the sixth and seventh are not retried at all. The storms are
``must`` checks: a soft check's judge failure only skips that check (tests/faults/test_llm_faults.py).
"""

from __future__ import annotations

import textwrap

import pytest

from fault_helpers import AGENTS, BASE_ARGS, pyproject, run_project  # type: ignore[import-not-found]
from fabtest.llm.retry_budget import BUDGET_SPENT_MARKER
from fabtest.testing import FakeGemini

STORMS = 7


def _feature() -> str:
    scenarios = [f'\n  Scenario: Storm {i}\n    When the user says "storm-{i}"\n'
                 '    Then the response must satisfy "The agent is polite"\n' for i in range(1, STORMS + 1)]
    healthy = '\n  Scenario: Healthy\n    When the user says "calm"\n    Then the response should satisfy "polite"\n'
    return "Feature: Storm\n" + "".join(scenarios) + healthy


def _requests(fake: FakeGemini, needle: str) -> int:
    return sum(1 for r in fake.requests if needle in r.text)


def test_spent_budget_ends_the_remaining_storm_scenarios_at_once(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(429, times=None, pattern="storm-")
    run = run_project(pytester, _feature())
    run.result.assert_outcomes(passed=1, failed=STORMS)
    for i in range(1, 6):
        run.failed(f"Storm {i}", "judge", "429", "gave up after 3 attempt(s)")
        assert _requests(fake, f"storm-{i}") == 3
    for i in (6, 7):
        scenario = run.failed(f"Storm {i}", "judge", "429", BUDGET_SPENT_MARKER)
        assert _requests(fake, f"storm-{i}") == 1  # not retried
        assert "gave up" not in scenario["failure_message"]
    run.healthy("Healthy")
    assert "Retry budget:     ran out; 2 scenario(s) ended as error without retrying" in run.output


def test_a_larger_budget_lets_every_scenario_retry(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(429, times=None, pattern="storm-")
    run = run_project(pytester, _feature(), "--fabtest-retry-budget", "5")
    run.result.assert_outcomes(passed=1, failed=STORMS)
    for i in range(1, STORMS + 1):
        run.failed(f"Storm {i}", "judge", "gave up after 3 attempt(s)")
        assert _requests(fake, f"storm-{i}") == 3
    assert "Retry budget" not in run.output


def _write_project(pytester: pytest.Pytester, extra: str = "") -> None:
    pytester.makefile(".toml", pyproject=textwrap.dedent(pyproject()).replace(
        'results_dir = "results"', f'results_dir = "results"\n{extra}'))
    (pytester.path / "faultbots.py").write_text(textwrap.dedent(AGENTS), encoding="utf-8")
    (pytester.path / "features").mkdir(exist_ok=True)
    (pytester.path / "features" / "storm.feature").write_text(_feature(), encoding="utf-8")


@pytest.mark.parametrize("value", ["-1", "inf", "nan"])
def test_a_bad_budget_is_a_one_line_usage_error(pytester: pytest.Pytester, fake: FakeGemini, value: str) -> None:
    _write_project(pytester)
    result = pytester.runpytest(*BASE_ARGS, "features", f"--fabtest-retry-budget={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--fabtest-retry-budget:" in result.stderr.str() and "Traceback" not in result.stderr.str()
    assert fake.request_count == 0


def test_retry_budget_in_pyproject(pytester: pytest.Pytester, fake: FakeGemini) -> None:
    fake.add_fault(429, times=None, pattern="storm-")
    _write_project(pytester, "retry_budget = 0")
    result = pytester.runpytest(*BASE_ARGS, "features", "--fabtest-no-results")
    result.assert_outcomes(passed=1, failed=STORMS)
    assert f"{BUDGET_SPENT_MARKER} (10 retries" in result.stdout.str() and "retry_budget = 0 " in result.stdout.str()
