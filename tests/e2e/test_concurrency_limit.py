"""`max_concurrency` bounds LLM calls in flight for the whole suite, also under pytest-xdist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fabtest.demo.offline_llm import offline_gemini

PYPROJECT = """
[tool.fabtest]
agent = "fabtest.demo:build_agent"
max_concurrency = {limit}

[tool.fabtest.judge]
backoff = 0.01
"""

SCENARIO = """
  Scenario: Conversation {n}
    When the user says "Hello!"
    And the user says "Berlin, 12 March, 10 people"
    And the user says "Spreeblick Loft"
    Then every response should satisfy "friendly"
    And every response should satisfy "concise"
"""


def run_suite(tmp_path: Path, limit: int, *args: str) -> int:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(limit=limit))
    (tmp_path / "c.feature").write_text("Feature: Concurrency\n" + "".join(SCENARIO.format(n=n) for n in range(6)))
    with offline_gemini(latency=0.3) as fake:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               "--fabtest-no-results", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, **fake.env()})
        assert proc.returncode == 0, proc.stdout[-2000:]
        assert fake.request_count == 6 * 3 + 1  # one judge call per turn, and the pre-flight probe
        return fake.max_in_flight


def test_limit_holds_across_xdist_workers(tmp_path: Path) -> None:
    # each scenario submits its 3 turn batches together at the end: 3 in flight per worker unbounded
    assert run_suite(tmp_path, 2, "-n", "2") <= 2


def test_limit_holds_in_one_process(tmp_path: Path) -> None:
    assert run_suite(tmp_path, 1) == 1
