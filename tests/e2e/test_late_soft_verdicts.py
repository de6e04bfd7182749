"""Soft verdicts finish after their scenario's test and still reach the experiment and the summary.

The judge (a FakeGemini on 127.0.0.1, through the real google-genai client) holds every soft
criterion call until the project's conftest says that scenario's test is over (a file written
in ``pytest_runtest_logreport`` for its teardown). A run that waited for soft verdicts inside
the test would only get the answer "judged while its test was still running" once the hold
times out, so the assertions on the reasoning tell the order apart without measuring time.
"""

from __future__ import annotations

import json
import re
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-no-preflight", "--fabtest-experiment-id", "late")
AFTER = "judged after its test finished"
DURING = "judged while its test was still running"
HOLD_S = 20.0  # bounded: a run that blocks on soft verdicts gets DURING after this long
_NAME = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)
_WHO = re.compile(r"\b(alpha|bravo|charlie|delta|echo)\b")

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
results_dir = "results"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 1
timeout = 30
"""

# the test's teardown report is the last thing its process says about it: release its verdicts then
CONFTEST = """
import os
import re
from pathlib import Path


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        for name in re.findall(r"alpha|bravo|charlie|delta|echo", report.nodeid):
            (Path(os.environ["LATE_RELEASE_DIR"]) / name).touch()
    if os.environ.get("LATE_INTERRUPT_AFTER") and report.when == "teardown" \\
            and os.environ["LATE_INTERRUPT_AFTER"] in report.nodeid:
        raise KeyboardInterrupt
"""


def scenario(name: str, step: str = 'Then the response should satisfy "polite"') -> str:
    return f"""
  Scenario: Greeting {name}
    When the user says "Hello, this is {name}"
    {step}
"""


class Judge:
    """Answers criteria calls: soft ones once their scenario's test is over, ``must`` ones at once."""

    def __init__(self, release_dir: Path) -> None:
        self.release_dir = release_dir
        self.never = threading.Event()  # set: hold soft verdicts for good (until the test ends)

    def __call__(self, request: FakeRequest) -> Any:
        if "CRITERIA" not in request.text:
            return "OK"
        names = [n.strip() for n in _NAME.findall(request.prompt)]
        who = _WHO.search(request.text)
        if "no_competitor" in names:  # the must criterion: judged while its step waits
            return {"verdicts": [{"criterion": n, "verdict": "failed", "reasoning": "names a rival"} for n in names]}
        released = self._hold(who.group(1) if who else "")
        if who and who.group(1) == "charlie" and released:
            return "this is not JSON"  # the judge fails for good after the test finished
        reason = AFTER if released else DURING
        return {"verdicts": [{"criterion": n, "verdict": "passed", "reasoning": reason} for n in names]}

    def _hold(self, who: str) -> bool:
        deadline = time.monotonic() + HOLD_S
        while time.monotonic() < deadline and not self.never.is_set():
            if (self.release_dir / who).exists():
                return True
            time.sleep(0.01)
        return False


@pytest.fixture
def judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Judge, FakeGemini]]:
    release = tmp_path / "release"
    release.mkdir()
    gate = Judge(release)
    for var in ("GOOGLE_API_KEY", "FABTEST_LLM_CACHE", "FABTEST_RESULTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LATE_RELEASE_DIR", str(release))
    with FakeGemini(handler=gate) as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        try:
            yield gate, fake
        finally:
            gate.never.set()


def run(pytester: pytest.Pytester, feature: str, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".feature", late=textwrap.dedent(feature))
    result = pytester.runpytest(*ARGS, *args, no_reraise_ctrlc=True)  # the interrupt test's Ctrl-C stays inside
    doc = json.loads((pytester.path / "results" / "late.json").read_text())
    return result, doc


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"].removeprefix("Greeting "): s for s in doc["scenario_results"]}


FEATURE = "Feature: Late\n" + scenario("alpha") + scenario("bravo") + scenario("charlie") + scenario("echo")


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["sequential", "xdist"])
def test_soft_verdicts_arrive_after_their_test_and_reach_the_experiment(
        pytester: pytest.Pytester, judge: tuple[Judge, FakeGemini], workers: tuple[str, ...]) -> None:
    _, fake = judge
    result, doc = run(pytester, FEATURE, *workers)
    result.assert_outcomes(passed=4)
    scenarios = by_name(doc)
    for name in ("alpha", "bravo", "echo"):
        [check] = scenarios[name]["evaluations"]["details"]
        assert (check["status"], check["details"]) == ("passed", AFTER), (name, check)
        assert "pending" not in check.get("data", {})
    # a judge that fails after the test finished: the check is skipped with the reason, the test passed
    [failed] = scenarios["charlie"]["evaluations"]["details"]
    assert failed["status"] == "skipped" and failed["details"].startswith("judge failed:"), failed
    assert scenarios["charlie"]["passed"] is True
    summary = doc["summary"]
    assert summary["evaluations"]["evaluated"] == 3 and summary["evaluation_rate"] == 1.0
    assert summary["skipped_checks"] == 1
    # one judge call per turn, and its tokens, spent after the result left, are merged in
    calls = [_WHO.search(r.text).group(1) for r in fake.requests if "CRITERIA" in r.text]  # type: ignore[union-attr]
    assert [calls.count(name) for name in ("alpha", "bravo", "echo")] == [1, 1, 1]
    # charlie's failed call is counted too: a request made is a request counted (issue 44)
    assert summary["tokens"]["judge"]["calls"] == 4
    out = result.stdout.str()
    assert "Total Evaluations: 3" in out and "Evaluation Rate:   100.0%" in out
    assert "Skipped checks:    1" in out


def test_a_hard_llm_check_still_blocks_and_fails_its_test(pytester: pytest.Pytester,
                                                           judge: tuple[Judge, FakeGemini]) -> None:
    feature = ("Feature: Late\n" + scenario("delta", 'Then the response must satisfy "no_competitor"')
               + scenario("alpha"))
    result, doc = run(pytester, feature)
    result.assert_outcomes(passed=1, failed=1)
    # the verdict was in before the test ended: it is the test's failure, shown by pytest
    result.stdout.fnmatch_lines(["*expectation satisfy 'no_competitor' (must) failed: names a rival*"])
    delta = by_name(doc)["delta"]
    assert delta["failure_type"] == "assertion"
    assert delta["expectations"]["details"][0]["status"] == "failed"
    assert by_name(doc)["alpha"]["evaluations"]["details"][0]["details"] == AFTER


def test_an_interrupted_run_records_soft_verdicts_still_out_as_skipped(pytester: pytest.Pytester,
                                                                      judge: tuple[Judge, FakeGemini],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    gate, _ = judge
    gate.release_dir = gate.release_dir / "never"  # the judge holds every soft verdict
    monkeypatch.setenv("LATE_INTERRUPT_AFTER", "bravo")  # Ctrl-C once bravo's test is over
    result, doc = run(pytester, "Feature: Late\n" + scenario("alpha") + scenario("bravo") + scenario("echo"))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert doc["experiment"]["interrupted"] is True
    scenarios = by_name(doc)
    assert set(scenarios) == {"alpha", "bravo"}
    for name in ("alpha", "bravo"):
        assert scenarios[name]["passed"] is True
        [check] = scenarios[name]["evaluations"]["details"]
        assert check["status"] == "skipped", check
        assert check["details"] == "not judged: the run was interrupted before this soft verdict arrived"
        assert "pending" not in check.get("data", {})
    assert "2 scenario(s) still had soft verdicts with the judge" in result.stdout.str()
