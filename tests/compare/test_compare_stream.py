"""The streamed comparison: index rows added up per scenario as they are parsed, in batches. It
must give what the whole documents give, and a bad row must still end in the one-line error."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from support.experiments import make_doc, make_result

from fabtest.cli import compare_main
from fabtest.compare.compute import compare
from fabtest.compare.read import read_experiment
from fabtest.experiment import reader, scenario_index
from fabtest.experiment.export import write_document
from fabtest.experiment.reader import read_entries


def _results(flip: int) -> list:
    """Iterated, skipped, failing and oddly named scenarios: every path of the adding up."""
    out = [make_result(f"s{i}", passed=(i + flip) % 4 != 0, iteration=it, failure_type="max_turns" if i % 3 else None,
                       evals=[("friendly", "passed" if (i + it + flip) % 3 else "failed"), ("concise", "passed")])
           for it in (1, 2) for i in range(12)]
    out.append(make_result("skipped one", skipped=True))
    # a name that holds a row separator: a batch cut there falls inside the string and must be extended
    out += [make_result("tricky true], [", passed=flip == 0), make_result("also], [", evals=[])]
    return out


def _written(tmp_path: Path) -> tuple[dict, dict]:
    base = make_doc("exp_str_a", _results(0), iterations=2)
    cur = make_doc("exp_str_b", _results(1), iterations=2)
    write_document(base, tmp_path)
    write_document(cur, tmp_path)
    return base, cur


@pytest.mark.parametrize("batch", [1, 40, 1 << 18])  # a row per batch, a few rows, everything at once
def test_streamed_comparison_equals_the_whole_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        batch: int) -> None:
    base, cur = _written(tmp_path)
    monkeypatch.setattr(scenario_index, "_BATCH", batch)
    _, b_exp = read_experiment("exp_str_a", tmp_path)
    _, c_exp = read_experiment("exp_str_b", tmp_path)
    assert b_exp.doc.get("lean") is True and b_exp.doc["scenario_results"] == []  # no entry was kept
    assert len(b_exp.scenarios) == len({e["id"] for e in base["scenario_results"]})
    streamed = compare(b_exp, c_exp).to_dict()
    assert streamed == compare(base, cur).to_dict()
    assert streamed["variance"] is not None and streamed["cost"] is not None and streamed["newly_failing"]
    assert gc.isenabled()  # paused while reading only


def test_a_bad_row_in_a_later_batch_falls_back_to_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base, cur = _written(tmp_path)
    path = tmp_path / "exp_str_a.json"
    text = path.read_text()
    last = text.index('"rows": [') + text[text.index('"rows": ['):].index("]},\n")  # the index line's end
    cut = text.rindex(', ["example:', 0, last) + 2  # the last row: some rows were added up before it is met
    path.write_text(text[:cut] + '["bad", ' + text[cut + 1:])
    monkeypatch.setattr(scenario_index, "_BATCH", 1)
    _, b_exp = read_experiment("exp_str_a", tmp_path)
    assert "lean" not in b_exp.doc  # read whole: the rows added before the bad one were dropped
    assert compare(b_exp, read_experiment("exp_str_b", tmp_path)[1]).to_dict() == compare(base, cur).to_dict()


def test_a_malformed_row_and_entry_give_the_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _written(tmp_path)
    path = tmp_path / "exp_str_a.json"
    lines = path.read_text().splitlines()
    broken = [line.replace('"passed": false', '"passed": "no"', 1) if line.startswith('{"id"') else line
              for line in lines]
    path.write_text("\n".join(broken).replace('"rows": [["', '"rows": [[1, "', 1) + "\n")
    code = compare_main(["exp_str_a", "exp_str_b", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1
    assert "exp_str_a.json" in err and "passed" in err and "Traceback" not in err


def test_read_entries_finds_lines_that_span_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base, _ = _written(tmp_path)
    entries = base["scenario_results"]
    wanted = {entries[0]["id"], entries[5]["id"], entries[-1]["id"]}
    expected = [e for e in entries if e["id"] in wanted]
    raw = (tmp_path / "exp_str_a.json").read_bytes()
    at_line = raw.index(b'\n{"id": "' + entries[5]["id"].encode()) + 1  # a block that ends just before a wanted line
    for block in (7, 300, at_line, 1 << 22):  # smaller than a line, about a line, on a line's start, the whole file
        monkeypatch.setattr(reader, "_BLOCK", block)
        assert read_entries(tmp_path / "exp_str_a.json", wanted) == expected
        assert read_entries(tmp_path / "exp_str_a.json", set()) == []
    truncated = tmp_path / "cut.json"
    truncated.write_text((tmp_path / "exp_str_a.json").read_text()[:-3])
    assert read_entries(truncated, wanted) is None
