"""Interrupted runs keep every finished scenario: SIGINT, a killed xdist worker, a killed run.

Each test starts ``python -m pytest features`` on a throwaway project in its own process group
(an agent that sleeps 0.3 s per turn, 10 scenarios), watches the journal
``results/.<id>.journal.jsonl`` until some scenarios have finished, interrupts, and checks the
experiment file. Every wait is bounded; the fixture kills whatever is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.child import child_env

SCENARIOS = 10
EXP = "exp_interrupt"

AGENT = '''
import os
import time


def build(context):
    def chat(messages):
        later = float(os.environ.get("SLEEPY_LATER_S", "0.3"))  # the scenarios after "hi 3", when a test slows them
        time.sleep(0.3 if int(messages[-1].content.split()[-1]) <= 3 else later)
        return "hello"
    return chat
'''

PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "sleepy:build"
results_dir = "results"
'''


def _feature() -> str:
    body = "Feature: Slow\n"
    for i in range(SCENARIOS):
        body += f'\n  Scenario: Slow {i}\n    When the user says "hi {i}"\n    Then the response must match "hello"\n'
    return body


def _env() -> dict[str, str]:
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.results = root / "results"
        self.procs: list[subprocess.Popen[bytes]] = []
        (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT), encoding="utf-8")
        (root / "sleepy.py").write_text(textwrap.dedent(AGENT), encoding="utf-8")
        (root / "features").mkdir()
        (root / "features" / "slow.feature").write_text(_feature(), encoding="utf-8")

    @property
    def journal(self) -> Path:
        return self.results / f".{EXP}.journal.jsonl"

    @property
    def experiment(self) -> Path:
        return self.results / f"{EXP}.json"

    def start(self, *args: str, later_s: float | None = None) -> subprocess.Popen[bytes]:
        env = _env() if later_s is None else {**_env(), "SLEEPY_LATER_S": str(later_s)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "features",
             "--fabtest-experiment-id", EXP, *args],
            cwd=self.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a background job may inherit SIG_IGN
        self.procs.append(proc)
        return proc

    def journaled(self) -> list[str]:
        """Names of the scenarios in the journal now (complete lines only)."""
        try:
            text = self.journal.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        names = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("kind") == "result":
                names.append(record["result"]["name"])
        return names

    def wait_for_results(self, proc: subprocess.Popen[bytes], count: int, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            names = self.journaled()
            if len(names) >= count:
                return names
            if proc.poll() is not None:
                raise AssertionError(f"the run ended early:\n{proc.stdout.read().decode() if proc.stdout else ''}")
            time.sleep(0.02)
        raise AssertionError(f"fewer than {count} scenarios finished within {timeout}s")

    def compare(self, a: str, b: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "import sys; from fabtest.cli import compare_main; sys.exit(compare_main())",
                               a, b, "--results-dir", str(self.results)],
                              cwd=self.root, env=_env(), capture_output=True, text=True, timeout=60)

    def doc(self) -> dict[str, Any]:
        return json.loads(self.experiment.read_text(encoding="utf-8"))


def _wait(proc: subprocess.Popen[bytes], timeout: float = 60) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"pytest did not end within {timeout}s") from None
    return out.decode(errors="replace")


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    proj = Project(tmp_path)
    yield proj
    for proc in proj.procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (from /proc; psutil is not a dependency)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def test_sigint_half_way_writes_an_interrupted_experiment_with_every_finished_scenario(project: Project) -> None:
    proc = project.start(later_s=3.0)  # the signal lands while a later scenario runs, however loaded the machine
    finished = project.wait_for_results(proc, 3)
    proc.send_signal(signal.SIGINT)
    output = _wait(proc)
    assert proc.returncode == 2, output  # pytest's "interrupted"
    doc = project.doc()
    names = [s["name"] for s in doc["scenario_results"]]
    assert doc["experiment"]["interrupted"] is True
    assert set(finished) <= set(names)
    assert 3 <= len(names) < SCENARIOS
    assert all(s["passed"] for s in doc["scenario_results"])
    assert not project.journal.exists()
    compared = project.compare(str(project.experiment), EXP)
    assert compared.returncode == 0, compared.stderr
    assert "Traceback" not in output + compared.stderr


def test_sigkill_of_one_xdist_worker_keeps_every_finished_scenario(project: Project) -> None:
    proc = project.start("-n", "2")
    finished = project.wait_for_results(proc, 3)
    workers = _children(proc.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    output = _wait(proc, timeout=90)
    doc = project.doc()
    names = [s["name"] for s in doc["scenario_results"]]
    assert set(finished) <= set(names), output
    assert len(names) == len(set(names))
    # the crashed worker's scenario is the only one that may be missing; the others ran elsewhere
    assert len(names) >= SCENARIOS - 1, output
    assert "crashed" in output
    compared = project.compare(EXP, EXP)
    assert compared.returncode == 0, compared.stderr


def _killed_run(project: Project) -> list[str]:
    proc = project.start()
    finished = project.wait_for_results(proc, 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert project.journal.exists() and not project.experiment.exists()
    return finished


def test_sigkill_of_the_run_is_recovered_by_fabtest_recover(project: Project) -> None:
    finished = _killed_run(project)
    recovered = subprocess.run([sys.executable, "-c", "import sys; from fabtest.cli import main; sys.exit(main())",
                                "recover", "--results-dir", str(project.results)],
                               cwd=project.root, env=_env(), capture_output=True, text=True, timeout=60)
    assert recovered.returncode == 0, recovered.stderr
    assert f"{EXP}.json" in recovered.stdout
    doc = project.doc()
    assert doc["experiment"]["interrupted"] is True
    assert set(finished) <= {s["name"] for s in doc["scenario_results"]}
    assert not project.journal.exists()
    assert project.compare(EXP, EXP).returncode == 0


def test_sigkill_of_the_run_is_recovered_by_the_next_run(project: Project) -> None:
    finished = _killed_run(project)
    nxt = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "features", "-k", "Slow_0",
                          "--fabtest-experiment-id", "exp_next"],
                         cwd=project.root, env=_env(), capture_output=True, text=True, timeout=60)
    assert nxt.returncode == 0, nxt.stdout
    assert "recovered an interrupted run" in nxt.stdout
    doc = project.doc()
    assert doc["experiment"]["interrupted"] is True
    assert set(finished) <= {s["name"] for s in doc["scenario_results"]}
    assert project.compare(EXP, "exp_next").returncode == 0


def test_the_scenario_of_a_crashed_worker_is_recorded_as_an_error(project: Project) -> None:
    proc = project.start("-n", "2")
    project.wait_for_results(proc, 3)
    os.kill(_children(proc.pid)[0], signal.SIGKILL)
    output = _wait(proc, timeout=90)
    summary = project.doc()["summary"]
    assert summary["total_scenarios"] == SCENARIOS, output
    assert summary["failure_types"]["error"] == 1


def test_a_worker_killed_during_a_scenarios_setup_still_records_that_scenario(project: Project) -> None:
    """The worker dies before its setup report (which names the scenario) leaves it: known by node id."""
    (project.root / "conftest.py").write_text(textwrap.dedent('''
        import os, signal
        import pytest

        @pytest.fixture(autouse=True)
        def die_in_setup(request):
            if request.node.name == "test_slow_4" and os.environ.get("PYTEST_XDIST_WORKER"):
                os.kill(os.getpid(), signal.SIGKILL)
    '''), encoding="utf-8")
    proc = project.start("-n", "2")
    output = _wait(proc, timeout=90)
    doc = project.doc()
    assert doc["summary"]["total_scenarios"] == SCENARIOS, output
    crashed = [s for s in doc["scenario_results"] if s["failure_type"] == "error"]
    assert [s["nodeid"] for s in crashed] == ["features/slow.feature::test_slow_4"], output
    assert "never finished (its worker crashed)" in crashed[0]["failure_message"]


def test_sigterm_half_way_is_handled_like_sigint(project: Project) -> None:
    proc = project.start()
    finished = project.wait_for_results(proc, 3)
    proc.send_signal(signal.SIGTERM)
    output = _wait(proc)
    assert proc.returncode == 2, output  # pytest's "interrupted", not -15
    doc = project.doc()
    names = [s["name"] for s in doc["scenario_results"]]
    assert doc["experiment"]["interrupted"] is True
    assert set(finished) <= set(names)
    assert not project.journal.exists()
    assert "Traceback" not in output


def test_a_second_run_with_the_same_experiment_id_is_refused_before_any_scenario(project: Project) -> None:
    import fcntl

    project.results.mkdir()
    with open(project.journal, "a", encoding="utf-8") as live:  # what a run in progress holds
        fcntl.flock(live.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        second = project.start()
        output = _wait(second)
    assert second.returncode == 4, output  # usage error, before any scenario
    assert f"experiment id '{EXP}' is in use by another run" in output
    assert "Traceback" not in output and "BlockingIOError" not in output
    assert "passed" not in output and not project.experiment.exists()


def test_a_crash_report_for_a_scenario_already_recorded_adds_nothing() -> None:
    """xdist names the item a worker was on when it died; if that item's result had already arrived
    (killed between its last report and the next item), it is not recorded a second time as crashed
    (the SIGKILL test above once read 11 scenarios of 10 under load)."""
    from types import SimpleNamespace

    from fabtest.pytest_plugin.recording import ExperimentRecording
    from fabtest.pytest_plugin.results import RESULT_PROPERTY

    saved: list[object] = []
    recording = ExperimentRecording.__new__(ExperimentRecording)
    recording._pending, recording._finished = {}, set()
    recording.save = lambda method, *args: saved.append(args[0])  # type: ignore[method-assign]
    nodeid = "features/slow.feature::test_slow_1"
    done = {"id": "example:000000000001", "name": "slow 1", "passed": True}
    recording.add_report(SimpleNamespace(nodeid=nodeid, user_properties=[(RESULT_PROPERTY, done)],
                                         failed=False, when="teardown"))
    crash = SimpleNamespace(nodeid=nodeid, user_properties=[], failed=True, when="???",
                            longrepr="worker 'gw0' crashed while running 'features/slow.feature::test_slow_1'")
    recording.add_report(crash)
    assert [r.name for r in saved] == ["slow 1"]
    recording.add_report(SimpleNamespace(**{**vars(crash), "nodeid": "features/slow.feature::test_slow_2"}))
    assert len(saved) == 2 and saved[1].failure_type == "error"  # one never recorded is still a crash
