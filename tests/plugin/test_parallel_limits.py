"""Under ``pytest -n N`` the workers share one ``max_concurrency`` instead of 1/N of it each.

Real runs in a subprocess (xdist), the real google-genai client against FakeGemini. The fake holds
every judge call until the number of calls in flight reaches a target (or a few seconds pass),
so what the fake saw at once is what fabtest allowed at once, whatever the machine's speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fabtest.demo.offline_llm import answer
from fabtest.llm import shared_limit
from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
max_concurrency = 4

[tool.fabtest.judge]
backoff = 0.01
"""

SCENARIO = """
  Scenario: Four turns {n}
    When the user says "Hello!"
    And the user says "Berlin, 12 March, 10 people"
    And the user says "Spreeblick Loft"
    And the user says "Thanks"
    Then every response should satisfy "friendly"
"""

# Records, when the controller hears of the first worker's collection (before its pre-flight
# probe), whether its LLM clients are already being built there (httpx is loaded for them).
CONFTEST = """
import sys, threading
import pytest

@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    warm = "httpx" in sys.modules or any(t.name == "fabtest-llm-warm-up" for t in threading.enumerate())
    with open("controller_warm.txt", "a") as fh:
        fh.write(f"{warm}\\n")
"""


def _holding_handler(fake: list[FakeGemini], target: int, patience_s: float) -> Any:
    def handle(request: FakeRequest) -> Any:
        if "CRITERIA" in request.text:
            deadline = time.monotonic() + patience_s
            while fake[0].in_flight < target and time.monotonic() < deadline:
                time.sleep(0.01)
        return answer(request)
    return handle


def run_suite(tmp_path: Path, scenarios: int, *, target: int, patience_s: float) -> tuple[int, Path]:
    """Run ``scenarios`` scenarios under ``-n 2``; the most judge calls in flight, and the TMPDIR used."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "c.feature").write_text("Feature: Parallel\n" + "".join(SCENARIO.format(n=n) for n in range(scenarios)))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    box: list[FakeGemini] = []
    with FakeGemini(handler=_holding_handler(box, target, patience_s)) as fake:
        box.append(fake)
        env = {**os.environ, **fake.env(), "TMPDIR": str(tmpdir)}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               "-p", "no:hypothesispytest", "--fabtest-no-results", "-n", "2"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert fake.request_count == scenarios * 4 + 1  # one judge call per turn, and the pre-flight probe
        return fake.max_in_flight, tmpdir


def test_one_workers_judge_batch_goes_out_in_one_round(tmp_path: Path) -> None:
    # 1/N of max_concurrency = 4 would be 2 per worker: the four turns' judge calls in two rounds
    in_flight, _ = run_suite(tmp_path, 1, target=4, patience_s=5)
    assert in_flight == 4


def test_workers_together_stay_within_the_suite_wide_limit(tmp_path: Path) -> None:
    # two workers each want 4 judge calls at once; the fake waits for a 5th that must never come
    in_flight, tmpdir = run_suite(tmp_path, 2, target=5, patience_s=2)
    assert in_flight == 4
    if shared_limit.available():
        assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("fabtest-llm-slots-")]  # cleaned up
    # the controller built its LLM clients for its pre-flight probe while the workers started
    assert (tmp_path / "controller_warm.txt").read_text().splitlines()[0] == "True"
