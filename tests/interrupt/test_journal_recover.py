"""``fabtest recover`` and the Recorder against damaged and forged journals (issue 10, items 4 and 9)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fabtest._internal.files import atomic_writer, remove_stale_temp_files
from fabtest.cli import main
from fabtest.experiment.model import ScenarioResult
from fabtest.experiment.recorder import ExperimentInUse, Recorder, journal_path, recover_pending


def _journal(results: Path, exp_id: str, names: list[str], header_id: str | None = None) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = journal_path(results, exp_id)
    lines = [{"kind": "header", "format_version": 1,
              "info": {"id": header_id or exp_id, "timestamp": "2026-01-01T00:00:00Z"}}]
    lines += [{"kind": "result", "result": ScenarioResult(id=f"example:{i:012x}", name=n, passed=True).model_dump()}
              for i, n in enumerate(names)]
    path.write_bytes(b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines))
    return path


def _names(path: Path) -> list[str]:
    return [s["name"] for s in json.loads(path.read_text(encoding="utf-8"))["scenario_results"]]


def test_a_tail_torn_inside_a_multibyte_character_is_dropped_and_the_rest_kept(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    torn = _journal(results, "exp_torn", ["Grüße 1", "Grüße 2"])
    whole = json.dumps({"kind": "result", "result": ScenarioResult(id="example:00000000000f", name="Grüße 3",
                                                                      passed=True).model_dump()}, ensure_ascii=False)
    data = whole.encode()
    cut = data.index("ü".encode()) + 1  # inside the two bytes of ü
    torn.write_bytes(torn.read_bytes() + data[:cut])
    other = _journal(results, "exp_other", ["fine"])
    assert main(["recover", "--results-dir", str(results)]) == 0
    out = capsys.readouterr()
    assert "UnicodeDecodeError" not in out.err and "Traceback" not in out.err
    assert _names(results / "exp_torn.json") == ["Grüße 1", "Grüße 2"]
    assert _names(results / "exp_other.json") == ["fine"]
    assert not torn.exists() and not other.exists()


def test_a_forged_header_id_never_writes_outside_the_results_directory(tmp_path: Path) -> None:
    results = tmp_path / "deep" / "results"
    _journal(results, "exp_forged", ["one"], header_id="../../X")
    assert main(["recover", "--results-dir", str(results)]) == 0
    assert not (tmp_path / "X.json").exists() and not (tmp_path / "deep" / "X.json").exists()
    doc = json.loads((results / "exp_forged.json").read_text(encoding="utf-8"))
    assert doc["experiment"]["id"] == "exp_forged" and doc["experiment"]["interrupted"] is True


def test_an_unknown_journal_version_is_one_line_and_the_other_journals_are_recovered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    future = journal_path(results, "exp_future")
    _journal(results, "exp_future", ["a"])
    future.write_text(future.read_text(encoding="utf-8").replace('"format_version": 1', '"format_version": 99'),
                      encoding="utf-8")
    _journal(results, "exp_fine", ["b"])
    assert main(["recover", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".exp_future.journal.jsonl: line 1: format_version: 99 is not supported" in err
    assert _names(results / "exp_fine.json") == ["b"]
    assert future.exists()  # kept for a fabtest that can read it


def test_garbage_lines_and_wrong_types_are_skipped_not_fatal(tmp_path: Path) -> None:
    results = tmp_path / "results"
    path = _journal(results, "exp_mixed", ["good"])
    path.write_bytes(path.read_bytes() + b'\xff\xfe garbage\n[1,2]\n{"kind": "result", "result": {"passed": "x"}}\n')
    [(journal, out, error)] = recover_pending(results)
    assert error == "" and out is not None and _names(out) == ["good"]


def test_stale_tmp_files_of_a_killed_writer_are_removed_but_not_live_ones(tmp_path: Path) -> None:
    stale = tmp_path / ".exp_big.json.abc123.tmp"
    stale.write_bytes(b"x" * 1000)
    old = time.time() - 3600
    os.utime(stale, (old, old))
    young = tmp_path / ".exp_young.json.def456.tmp"
    young.write_bytes(b"y")
    with atomic_writer(tmp_path / "exp_live.json") as handle:
        handle.write("{}")
        [live] = [p for p in tmp_path.glob(".exp_live.json.*.tmp")]
        os.utime(live, (old, old))
        assert remove_stale_temp_files(tmp_path) == [stale]
        assert live.exists()
    assert not stale.exists() and young.exists() and (tmp_path / "exp_live.json").read_text() == "{}"


def test_recover_removes_stale_tmp_files(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    stale = results / ".exp_x.json.zzz.tmp"
    stale.write_bytes(b"{")
    os.utime(stale, (time.time() - 3600,) * 2)
    assert main(["recover", "--results-dir", str(results)]) == 0
    assert not stale.exists()


def test_a_second_recorder_with_a_live_id_is_a_usage_error_not_blockingioerror(tmp_path: Path) -> None:
    first = Recorder(results_dir=tmp_path, experiment_id="exp_same", cwd=str(tmp_path))
    with pytest.raises(ExperimentInUse, match="'exp_same' is in use by another run"):
        Recorder(results_dir=tmp_path, experiment_id="exp_same", cwd=str(tmp_path))
    first.finalise()


@pytest.mark.parametrize("bad", ["../../X", "a/b", ".hidden", "", "x" * 200, "a b"])
def test_recorder_refuses_ids_that_are_not_plain_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(Exception, match="use letters, digits"):
        Recorder(results_dir=tmp_path / "r", experiment_id=bad or " ", cwd=str(tmp_path))
    assert not (tmp_path / "X.json").exists()
