"""Nothing finished is lost (issue 22, reliability round 2, item 1): ``recover`` never overwrites an
experiment file that is already there, and a full disk is one line that keeps what was finished."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.bad_inputs import BASE_ARGS, GOOD_AGENT, GOOD_PYPROJECT, clean_env

from fabtest.cli import main
from fabtest.experiment.model import ScenarioResult
from fabtest.experiment.recorder import Recorder, journal_path


def _finished(results: Path, exp_id: str, n: int) -> Path:
    recorder = Recorder(results_dir=results, experiment_id=exp_id, cwd=str(results))
    for i in range(n):
        recorder.add(ScenarioResult(id=f"f:{i:012x}", name=f"done {i}", nodeid=f"f.feature::done {i}", passed=True))
    return recorder.finalise()


def _stray_journal(results: Path, exp_id: str, names: list[str]) -> Path:
    path = journal_path(results, exp_id)
    lines = [{"kind": "header", "format_version": 1, "info": {"id": exp_id, "timestamp": "2026-01-01T00:00:00Z"}}]
    lines += [{"kind": "result", "result": ScenarioResult(id=f"p:{i:012x}", name=n, passed=False).model_dump()}
              for i, n in enumerate(names)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _names(path: Path) -> list[str]:
    return [s["name"] for s in json.loads(path.read_text(encoding="utf-8"))["scenario_results"]]


@pytest.mark.parametrize("existing", [0, 1, 2, 3])
def test_recover_never_overwrites_a_finished_experiment(tmp_path: Path, existing: int,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    finished = _finished(results, "exp_same", 6)
    before = finished.read_bytes()
    for n in range(1, existing):  # earlier recoveries already took .recovered, .recovered-2, ...
        name = "exp_same.recovered" if n == 1 else f"exp_same.recovered-{n}"
        (results / f"{name}.json").write_text("{}", encoding="utf-8")
    _stray_journal(results, "exp_same", ["partial"])
    assert main(["recover", "--results-dir", str(results)]) == 0
    assert finished.read_bytes() == before  # the six finished scenarios are still there
    expected = "exp_same.recovered" if existing <= 1 else f"exp_same.recovered-{existing}"
    recovered = results / f"{expected}.json"
    doc = json.loads(recovered.read_text(encoding="utf-8"))
    assert doc["experiment"]["id"] == expected and doc["experiment"]["interrupted"] is True
    assert _names(recovered) == ["partial"]
    assert str(recovered) in capsys.readouterr().out


def test_a_killed_rerun_with_the_same_id_keeps_the_finished_experiment(tmp_path: Path) -> None:
    results = tmp_path / "results"
    finished = _finished(results, "exp_rerun", 6)
    _stray_journal(results, "exp_rerun", ["half"])  # the rerun with the same id was killed after one scenario
    rerun = Recorder(results_dir=results, experiment_id="exp_rerun", cwd=str(tmp_path))  # the next run recovers it
    assert len(_names(finished)) == 6
    assert _names(results / "exp_rerun.recovered.json") == ["half"]
    rerun.discard()


FULL_DISK_CONFTEST = '''
import errno, os
from fabtest.experiment import recorder, spool

WHERE = os.environ["FULL_DISK_AT"]
calls = {"n": 0}


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "results/x")


if WHERE == "start":
    recorder._append_line = _full
elif WHERE == "second":
    real = recorder._append_line

    def _append(handle, record):
        if record.get("kind") == "result":
            calls["n"] += 1
            if calls["n"] == 2:
                _full()
        return real(handle, record)

    recorder._append_line = _append
elif WHERE == "finish":
    spool.write_streamed = _full
'''

THREE_SCENARIOS = '''
Feature: Three
  Scenario: One
    When the user says "hi"
    Then the response must match "hello"
  Scenario: Two
    When the user says "hi"
    Then the response must match "hello"
  Scenario: Three
    When the user says "hi"
    Then the response must match "hello"
'''


@pytest.mark.parametrize(("where", "code", "kept"), [("start", 4, 0), ("second", 1, 1), ("finish", 1, 3)])
def test_a_full_disk_is_one_line_and_keeps_what_was_finished(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                            where: str, code: int, kept: int) -> None:
    monkeypatch.setenv("FULL_DISK_AT", where)
    pytester.makepyfile(goodbot=GOOD_AGENT, conftest=FULL_DISK_CONFTEST)
    pytester.makefile(".toml", pyproject=GOOD_PYPROJECT)
    pytester.makefile(".feature", three=THREE_SCENARIOS)
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_full")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == code, output
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    [line] = [x for x in output.splitlines() if "No space left on device" in x]
    assert "cannot save the experiment" in line
    results = pytester.path / "results"
    assert not (results / "exp_full.json").exists() and not list(results.glob("*.tmp"))
    if kept:  # the finished scenarios are in the journal, and `fabtest recover` turns them into the experiment
        assert "fabtest recover" in line
        assert main(["recover", "--results-dir", str(results)]) == 0
        assert len(_names(results / "exp_full.json")) == kept


HTML_UNDER_A_FILE_SIZE_LIMIT = '''
import resource, signal, sys
from fabtest.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
sys.exit(main(sys.argv[1:]))
'''


@pytest.mark.parametrize("command", ["report", "compare"])
def test_an_html_file_that_cannot_be_written_whole_is_not_left_half_written(tmp_path: Path, command: str) -> None:
    results = tmp_path / "results"
    _finished(results, "exp_html", 6)
    out = tmp_path / "out.html"
    args = (["report", "exp_html", "-o", str(out)] if command == "report" else
            ["compare", "exp_html", "exp_html", "--html", str(out)])
    proc = subprocess.run([sys.executable, "-c", HTML_UNDER_A_FILE_SIZE_LIMIT, *args, "--results-dir", str(results)],
                          capture_output=True, text=True, timeout=60, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert f"cannot write {out}" in proc.stderr
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


def test_a_very_long_playbook_name_makes_a_trace_file_name_the_file_system_accepts() -> None:
    from fabtest.playbook.record import trace_file_name

    long_a, long_b = "a" * 300 + " one", "a" * 300 + " two"
    name_a, name_b = trace_file_name(long_a, "x" * 128, 12), trace_file_name(long_b, "x" * 128, 12)
    assert len(name_a.encode()) < 255 and name_a != name_b
    assert name_a.endswith(".iter12.trace.json")
