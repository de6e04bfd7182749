"""The recipe of docs/how-to/ci-shards.md, for real: two shards run as two processes at once (each a
CI job or a Kubernetes Indexed Job pod), ``fabtest merge`` combines their parts, and the merged
experiment has the same scenarios with the same verdicts as one run of the whole suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.child import child_env

from fabtest.cli import main

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "fabtest.demo:build_agent"
"""

FEATURE = """Feature: Shards
  Scenario Outline: Greeting <n>
    When the user says "hello <n>"
    Then the response must match "<pattern>"

    Examples:
      | n | pattern |
      | 1 | .+      |
      | 2 | ^nope$  |
      | 3 | .+      |
      | 4 | .+      |
      | 5 | ^nope$  |
"""

# (hypothesis and langsmith load seconds of plugins this project does not use)
ARGS = ["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:langsmith_plugin",
        "--fabtest-progress", "off", "features"]


def _env() -> dict[str, str]:
    return child_env("FABTEST_", "GEMINI_", "GOOGLE_")


def _pytest(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", *ARGS, *args], cwd=root, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _verdicts(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {r["id"]: (r["name"], r["passed"], r["failure_type"], [e["status"] for e in r["expectations"]["details"]])
            for r in doc["scenario_results"]}


def test_two_shard_processes_merge_into_the_experiment_of_one_run(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "shards.feature").write_text(FEATURE, encoding="utf-8")
    # the two shards, each with its own results directory (its own machine), and the whole suite, at once
    runs = [_pytest(tmp_path, "--splits", "2", "--group", str(group), "--fabtest-experiment-id", "exp_ci",
                    "--fabtest-results-dir", f"part{group}") for group in (1, 2)]
    runs.append(_pytest(tmp_path, "--fabtest-experiment-id", "exp_single", "--fabtest-results-dir", "single"))
    outputs = [proc.communicate(timeout=300)[0] for proc in runs]
    assert [proc.returncode for proc in runs] == [1, 1, 1], outputs  # each has a failing scenario

    parts = [tmp_path / f"part{group}" / "exp_ci.json" for group in (1, 2)]
    assert [json.loads(p.read_text())["experiment"]["shard"] for p in parts] == ["1/2", "2/2"]
    assert all(_verdicts(p) for p in parts)  # pytest-split gave each shard some scenarios
    assert main(["merge", *map(str, parts), "-o", "exp_ci", "--results-dir", str(tmp_path / "merged")]) == 0

    merged, whole = tmp_path / "merged" / "exp_ci.json", tmp_path / "single" / "exp_single.json"
    assert _verdicts(merged) == _verdicts(whole)
    assert len(_verdicts(whole)) == 5
    summary = json.loads(merged.read_text())["summary"]
    assert (summary["total_scenarios"], summary["passed"]) == (5, 3)
