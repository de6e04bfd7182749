"""``fabtest recover`` and a run's own journal against journals fabtest did not write (issue 30): random
bytes or a link (to /etc/passwd) are one line and exit 2, never an empty experiment with exit 0, and
a journal name that is a link is never written through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabtest.cli import main
from fabtest.experiment.model import ScenarioResult
from fabtest.experiment.recorder import Recorder, journal_path


def _experiments(results: Path) -> list[str]:
    return sorted(p.name for p in results.glob("*.json"))


@pytest.mark.parametrize("content", [os.urandom(4096).replace(b"\n", b"\x00") + b"\n" + os.urandom(64) + b"\n",
                                     b"root:x:0:0:root:/root:/bin/bash\n", b'{"kind": "nothing"}\n', b"[1, 2]\n"])
def test_a_journal_of_garbage_is_refused_and_left_as_it_is(tmp_path: Path, capsys, content: bytes) -> None:
    results = tmp_path / "results"
    results.mkdir()
    journal = journal_path(results, "exp_garbage")
    journal.write_bytes(content)
    assert main(["recover", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert "not one journal line could be read" in err and len(err.strip().splitlines()) == 1
    assert _experiments(results) == [] and journal.read_bytes() == content


def test_a_journal_that_is_a_link_is_refused_and_its_target_untouched(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    results.mkdir()
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    journal_path(results, "exp_link").symlink_to(target)
    assert main(["recover", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert "is a link" in err and "Traceback" not in err
    assert _experiments(results) == [] and journal_path(results, "exp_link").is_symlink()
    with pytest.raises(OSError, match="is a link"):  # a run with that id does not append to the target either
        Recorder(results_dir=results, experiment_id="exp_link", cwd=str(tmp_path))
    assert target.read_text(encoding="utf-8") == "root:x:0:0:root:/root:/bin/bash\n"


def test_a_valid_journal_is_still_recovered(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    recorder = Recorder(results_dir=results, experiment_id="exp_ok", cwd=str(tmp_path))
    recorder.add(ScenarioResult(id="f:000000000001", name="n", passed=True))
    recorder._journal.close()  # killed: the journal stays behind
    assert main(["recover", "--results-dir", str(results)]) == 0
    assert _experiments(results) == ["exp_ok.json"]


@pytest.mark.parametrize("header", [True, False])
def test_a_journal_with_no_result_is_nothing_to_recover_and_is_kept(tmp_path: Path, capsys, header: bool) -> None:
    """A run killed before its first scenario finished left its header (or not even that): an empty
    experiment was written and listed with the real ones."""
    results = tmp_path / "results"
    recorder = Recorder(results_dir=results, experiment_id="exp_none", cwd=str(tmp_path))
    recorder._journal.close()  # killed before any result
    journal = journal_path(results, "exp_none")
    if not header:
        journal.write_bytes(b"")
    before = journal.read_bytes()
    assert main(["recover", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert "nothing to recover: its run stopped before any scenario finished" in err, err
    assert len(err.strip().splitlines()) == 1 and ("only its header" in err) == header
    assert _experiments(results) == [] and journal.read_bytes() == before
    # a run that takes the id over starts a journal of its own, and finishes as usual
    again = Recorder(results_dir=results, experiment_id="exp_none", cwd=str(tmp_path))
    again.add(ScenarioResult(id="f:000000000001", name="n", passed=True))
    again.finalise()
    assert _experiments(results) == ["exp_none.json"] and not journal.exists()
