"""SIGTERM during a concurrent run: nothing new starts and every scenario that finished is kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from project import BASE_ARGS, feature, make_project  # type: ignore[import-not-found]
from support.child import child_env

EXP = "exp_conc_term"
SLEEPY = '''
import time


def build(context):
    def chat(messages):
        time.sleep(0.3)
        return "hello from " + context["scenario"]
    return chat
'''


def _journaled(results: Path) -> list[str]:
    try:
        lines = (results / f".{EXP}.journal.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    names = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if record.get("kind") == "result":
            names.append(record["result"]["name"])
    return names


def test_sigterm_keeps_every_finished_scenario_and_starts_nothing_new(pytester: pytest.Pytester) -> None:
    scenarios = [f'  Scenario: slow {i}\n    When the user says "hi"\n    Then the response must match "hello"\n'
                 for i in range(24)]
    root = make_project(pytester, {"slow.feature": feature("Slow", *scenarios)}, concurrency=4, conftest="")
    (root / "sleepy.py").write_text(SLEEPY)
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    env["FABTEST_AGENT"] = "sleepy:build"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "features", "-q", *BASE_ARGS,
                             "--fabtest-experiment-id", EXP], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(finished := _journaled(root / "results")) < 5:
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended or stalled early"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 2, output  # pytest's "interrupted"
    doc = json.loads((root / "results" / f"{EXP}.json").read_text())
    names = [s["name"] for s in doc["scenario_results"]]
    assert doc["experiment"]["interrupted"] is True
    assert set(finished) <= set(names) and len(names) < len(scenarios), output
    assert all(s["passed"] for s in doc["scenario_results"])
    assert "Traceback" not in output and "INTERNALERROR" not in output


INTERRUPTING_SETUP = '''
import pytest


@pytest.fixture(autouse=True)
def interrupt_one_setup(request, tmp_path):
    if "stop_here" in request.node.name:
        raise KeyboardInterrupt
'''


def test_an_interrupt_during_a_scenarios_setup_ends_the_run_cleanly(pytester: pytest.Pytester) -> None:
    """The setup of a scenario (its fixtures, on the main thread) is where a signal lands most often."""
    scenarios = [f'  Scenario: {name}\n    When the user says "hi"\n    Then the response must match "hello"\n'
                 for name in ("first", "second", "stop here", "never")]
    root = make_project(pytester, {"stop.feature": feature("Stop", *scenarios)}, concurrency=2,
                        conftest=INTERRUPTING_SETUP)
    (root / "sleepy.py").write_text(SLEEPY)
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    env["FABTEST_AGENT"] = "sleepy:build"
    proc = subprocess.run([sys.executable, "-m", "pytest", "features", "-q", *BASE_ARGS,
                           "--fabtest-experiment-id", EXP], cwd=root, env=env, timeout=120,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = proc.stdout.decode(errors="replace")
    assert proc.returncode == 2, output
    assert "Traceback" not in output and "KeyError" not in output, output
    doc = json.loads((root / "results" / f"{EXP}.json").read_text())
    assert doc["experiment"]["interrupted"] is True
    assert "never" not in {s["name"] for s in doc["scenario_results"]}
