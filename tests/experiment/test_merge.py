"""``fabtest merge``: shards' parts of one run become one experiment; parts of other runs are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabtest.cli import main
from fabtest.experiment.export import build_document
from fabtest.experiment.merge import parse_shard, shard_from_options
from fabtest.experiment.model import CheckRecord, ScenarioResult, TurnRecord
from fabtest.experiment.recorder import Recorder


def _result(i: int, criteria: dict[str, str] | None = None) -> ScenarioResult:
    return ScenarioResult(
        id=f"example:{i:012x}", name=f"S{i}", passed=i % 2 == 0, turns=1,
        failure_type=None if i % 2 == 0 else "assertion",
        evaluations=[CheckRecord(type="satisfy", mode="should", criterion="kind", status="passed", passed=True, turn=1)],
        transcript=[TurnRecord(number=1, user=f"u{i}", agent=f"a{i}")],
        criteria=criteria or {"kind": "Be kind"},
    )


def _part(root: Path, shard: str, results: list[ScenarioResult], exp_id: str = "exp_ci", **info: object) -> Path:
    recorder = Recorder(results_dir=root / shard.replace("/", "of"), experiment_id=exp_id, shard=shard, name="nightly")
    if info:
        recorder.info = recorder.info.model_copy(update=info)
    for r in results:
        recorder.add(r)
    return recorder.finalise()


def test_parts_merge_into_one_experiment_with_a_recomputed_summary(tmp_path: Path, capsys) -> None:
    results = [_result(i) for i in range(6)]
    a = _part(tmp_path, "1/2", results[:4])
    b = _part(tmp_path, "2/2", results[4:])
    assert json.loads(a.read_text())["experiment"]["shard"] == "1/2"
    assert main(["merge", str(a), str(b), "-o", "exp_all", "--results-dir", str(tmp_path / "out")]) == 0
    merged = json.loads((tmp_path / "out" / "exp_all.json").read_text())
    assert "shard" not in merged["experiment"] and merged["experiment"]["id"] == "exp_all"
    assert [e["name"] for e in merged["scenario_results"]] == [f"S{i}" for i in range(6)]
    assert merged["scenario_results"][5]["transcript"][0]["user"] == "u5"
    expected = build_document(json_info(merged), results)
    assert merged["summary"] == json.loads(json.dumps(expected["summary"]))
    assert merged["summary"]["total_scenarios"] == 6 and merged["summary"]["passed"] == 3
    assert merged["experiment"]["criteria_hash"] == expected["experiment"]["criteria_hash"]


def json_info(doc: dict) -> object:
    from fabtest.experiment.reader import info_from_experiment

    return info_from_experiment(doc["experiment"]).model_copy(update={"config_hash": "", "criteria_hash": "", "topic_graph_hash": ""})


@pytest.mark.parametrize(("second", "field"), [
    ({"info": {"git_commit": "b" * 40}}, "experiment.git_commit"),
    ({"criteria": {"kind": "Be rude"}}, "experiment.criteria_hash"),
    ({"exp_id": "exp_other", "info": {"name": "weekly"}}, "experiment.id"),
    ({"shard": "1/2"}, "experiment.shard"),
])
def test_parts_of_different_runs_are_refused_with_one_line(tmp_path: Path, capsys, second: dict, field: str) -> None:
    a = _part(tmp_path, "1/2", [_result(0)], git_commit="a" * 40)
    info = {"git_commit": "a" * 40, **second.get("info", {})}
    b = _part(tmp_path / "b", second.get("shard", "2/2"), [_result(1, second.get("criteria"))],
              exp_id=second.get("exp_id", "exp_ci"), **info)
    assert main(["merge", str(a), str(b), "--results-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(b) in err and field in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.json"))


def test_shard_options() -> None:
    assert shard_from_options("2/4") == "2/4"
    assert shard_from_options(None, splits=4, group=3) == "3/4"
    assert shard_from_options(None) is None
    with pytest.raises(ValueError, match="i/n"):
        parse_shard("5/4")


def test_merged_file_is_the_document_of_all_parts_results_whatever_their_layout(tmp_path: Path) -> None:
    """Parts are streamed line by line (the written layout) or read whole (any other JSON layout)."""
    from fabtest.experiment.export import write_document

    results = [_result(i) for i in range(5)]
    a = _part(tmp_path, "1/2", results[:3])
    b = _part(tmp_path, "2/2", results[3:])
    b.write_text(json.dumps(json.loads(b.read_text()), indent=2))  # same document, another layout
    assert main(["merge", str(a), str(b), "--results-dir", str(tmp_path / "out")]) == 0
    merged = tmp_path / "out" / "exp_ci.json"
    reference = write_document(build_document(json_info(json.loads(merged.read_text())), results), tmp_path / "ref")
    assert merged.read_bytes() == reference.read_bytes()
    assert not list((tmp_path / "out").glob(".*"))  # no spill file left behind
