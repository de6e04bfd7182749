"""The fast paths of a comparison: pure-Python Fisher test, rows checked without the models, only
the diffed entries parsed. Each must give what the slow path gave."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fabtest.compare.compute import compare, drop_p_value
from fabtest.experiment.export import write_document
from fabtest.experiment.reader import ExperimentFileError, read_document, read_entries

from support.experiments import make_doc, make_result


def test_drop_p_value_is_scipys_one_sided_fisher_test() -> None:
    fisher_exact = pytest.importorskip("scipy.stats").fisher_exact
    rng = random.Random(7)
    tables = [(10, 10, 6, 10), (0, 5, 0, 5), (5, 5, 5, 5), (100_000, 100_000, 99_000, 100_000), (9, 10, 10, 10)]
    tables += [(rng.randint(0, bt), bt, rng.randint(0, ct), ct)
               for bt, ct in ((rng.randint(1, 400), rng.randint(1, 400)) for _ in range(300))]
    for bp, bt, cp, ct in tables:
        expected = fisher_exact([[bp, bt - bp], [cp, ct - cp]], alternative="greater").pvalue
        assert drop_p_value(bp, bt, cp, ct) == pytest.approx(min(1.0, max(0.0, float(expected))), rel=1e-9, abs=1e-12)


def test_read_entries_parses_only_the_wanted_lines_and_knows_other_layouts(tmp_path: Path) -> None:
    doc = make_doc("exp_many", [make_result(f"s{i}", passed=i % 2 == 0) for i in range(6)])
    path = write_document(doc, tmp_path)
    wanted = {doc["scenario_results"][1]["id"], doc["scenario_results"][4]["id"]}
    assert read_entries(path, wanted) == [doc["scenario_results"][1], doc["scenario_results"][4]]
    assert read_entries(path, {"example:nothing"}) == []
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(path.read_text()), indent=2))
    assert read_entries(pretty, wanted) is None


def test_a_bad_index_row_falls_back_to_the_full_read_and_its_one_line_error(tmp_path: Path) -> None:
    base = make_doc("exp_rows", [make_result("a"), make_result("b", passed=False)])
    path = write_document(base, tmp_path)
    text = path.read_text()
    path.write_text(text.replace('"rows": [["', '"rows": [[1, "', 1))
    _, doc = read_document(path, lean=True)  # the index is not ours: parsed whole, and still right
    assert "lean" not in doc and [e["name"] for e in doc["scenario_results"]] == ["a", "b"]
    lines = text.splitlines()
    broken = [line.replace('"passed": false', '"passed": "no"', 1) if line.startswith('{"id"') else line for line in lines]
    path.write_text("\n".join(broken).replace('"rows": [["', '"rows": [[1, "', 1) + "\n")
    with pytest.raises(ExperimentFileError, match=r"scenario_results\[1\]\.passed"):
        read_document(path, lean=True)


def test_lean_comparison_equals_the_full_one_with_rows_shared(tmp_path: Path) -> None:
    base = make_doc("exp_b", [make_result(f"s{i}", passed=i != 3) for i in range(8)])
    cur = make_doc("exp_c", [make_result(f"s{i}", passed=i != 5) for i in range(8)])
    write_document(base, tmp_path)
    write_document(cur, tmp_path)
    _, lean_b = read_document("exp_b", tmp_path, lean=True)
    _, lean_c = read_document("exp_c", tmp_path, lean=True)
    rows = lean_b["scenario_results"]
    assert rows[0]["criteria_counts"] is rows[1]["criteria_counts"]  # equal counts are one object
    assert compare(lean_b, lean_c).to_dict() == compare(base, cur).to_dict()
