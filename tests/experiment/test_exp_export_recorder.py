import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.experiments import check, make_doc, make_info, make_result
from fabtest.experiment import export
from fabtest.experiment.export import build_document, new_experiment_id, write_document
from fabtest.experiment.reader import ExperimentFileError, load_document, read_document
from fabtest.experiment.recorder import Recorder, journal_path, pending_journals, recover


def test_document_has_every_contract_key():
    doc = make_doc("exp_111111", [make_result("a"), make_result("b", passed=False, failure_type="max_turns")])
    assert set(doc) >= {"experiment", "summary", "criteria_results", "scenario_results"}
    assert set(doc["experiment"]) >= {
        "id", "timestamp", "name", "tags", "git_commit", "git_branch", "git_dirty", "config_hash",
        "criteria_hash", "topic_graph_hash", "judge", "simulator", "iterations", "interrupted",
    }
    assert doc["experiment"]["judge"] == {"provider": "gemini", "model": "gemini-2.0-flash"}
    assert doc["experiment"]["config_hash"].startswith("sha256:")
    assert set(doc["summary"]) >= {
        "total_scenarios", "passed", "failed", "skipped", "completion_rate", "evaluation_rate", "avg_turns",
        "avg_topics", "failure_types", "backtracking_rate", "tokens", "duration_s",
    }
    assert doc["summary"]["completion_rate"] == 0.5
    assert doc["summary"]["failure_types"]["max_turns"] == 1
    assert doc["criteria_results"]["friendly"] == {"evaluated": 2, "passed": 2, "failed": 0, "inconclusive": 0, "not_applicable": 0, "rate": 1.0}
    s = doc["scenario_results"][1]
    assert list(s)[:9] == ["id", "name", "passed", "turns", "topics_visited", "failure_type", "failure_message", "evaluations", "expectations"]
    assert s["id"].startswith("example:") and s["failure_type"] == "max_turns"
    assert set(s["evaluations"]) >= {"total", "passed", "rate", "by_criterion", "details"}
    assert set(s["expectations"]) >= {"total", "passed", "details"}
    assert s["evaluations"]["by_criterion"]["friendly"] == {"evaluated": 1, "passed": 1}
    assert "variance" not in doc
    json.dumps(doc)  # JSON-ready


def test_rates_are_fractions_or_null():
    doc = make_doc("exp_1", [make_result("a", evals=[("friendly", "skipped")], expects=[])])
    assert doc["summary"]["evaluation_rate"] is None
    assert doc["scenario_results"][0]["evaluations"]["rate"] is None
    doc = make_doc("exp_2", [make_result("a", evals=[("f", "passed"), ("f", "failed"), ("f", "failed")])])
    assert doc["summary"]["evaluation_rate"] == 0.3333


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    doc = make_doc("exp_abcdef", [make_result("a")])
    path = write_document(doc, tmp_path)
    assert path == tmp_path / "exp_abcdef.json"
    assert [p.name for p in tmp_path.iterdir()] == ["exp_abcdef.json"]
    before = path.read_text()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(export.os, "replace", boom)
    doc2 = make_doc("exp_abcdef", [make_result("a"), make_result("b")])
    with pytest.raises(OSError):
        write_document(doc2, tmp_path)
    assert path.read_text() == before  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["exp_abcdef.json"]


def test_round_trip_is_lossless(tmp_path):
    results = [
        make_result("a", rule="R", record_id="rec-1", extra_checks=[check("search_venues", "failed", type_="grounded_in", source="search_venues", claims_total=3, claims_unsupported=1)]),
        make_result("b", passed=False, failure_type="timeout", evals=[("friendly", "inconclusive")]),
        make_result("c", skipped=True),
    ]
    info = make_info("exp_roundt", git_commit="abc", git_branch="main", git_dirty=True, config_hash="sha256:1", criteria_hash="sha256:2", topic_graph_hash="sha256:3")
    path = write_document(build_document(info, results), tmp_path)
    info2, results2, raw = load_document(path, tmp_path)
    assert info2 == info
    assert results2 == results
    assert raw["experiment"]["id"] == "exp_roundt"


_text = st.text(max_size=15)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=_text.filter(lambda s: s.strip() != ""),
    passed=st.booleans(),
    turns=st.integers(0, 6),
    statuses=st.lists(st.sampled_from(["passed", "failed", "inconclusive", "skipped"]), max_size=5),
    data=st.dictionaries(_text, st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), _text, st.none()), max_size=3),
)
def test_round_trip_property(tmp_path, name, passed, turns, statuses, data):
    result = make_result(name, passed=passed, turns=turns, evals=[("c", s) for s in statuses])
    result = result.model_copy(update={"agent_metadata": data, "duration_s": 0.1 + turns / 3})
    path = write_document(build_document(make_info("exp_prop01"), [result]), tmp_path)
    _, loaded, _ = load_document(path)
    assert loaded == [result]


def test_new_experiment_id_format():
    ids = {new_experiment_id() for _ in range(50)}
    assert all(len(i) == 10 and i.startswith("exp_") and int(i[4:], 16) >= 0 for i in ids)
    assert len(ids) > 45


def test_load_resolves_id_prefix_and_reports_errors(tmp_path):
    write_document(make_doc("exp_aaa111", [make_result("a")]), tmp_path)
    write_document(make_doc("exp_aab222", [make_result("a")]), tmp_path)
    assert load_document("exp_aaa111", tmp_path)[0].id == "exp_aaa111"
    assert load_document("exp_aab", tmp_path)[0].id == "exp_aab222"
    assert load_document(str(tmp_path / "exp_aaa111.json"))[0].id == "exp_aaa111"
    with pytest.raises(ExperimentFileError, match=r"ambiguous.*exp_aaa111, exp_aab222"):
        load_document("exp_aa", tmp_path)
    with pytest.raises(ExperimentFileError, match="no experiment"):
        load_document("exp_zzz", tmp_path)
    with pytest.raises(ExperimentFileError, match="no such file"):
        load_document(str(tmp_path / "nope.json"), tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"experiment": {"id": "x"},\n  "summary": ]')
    with pytest.raises(ExperimentFileError, match=r"bad\.json: not valid JSON \(line 2, column 14"):
        read_document(bad)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"experiment": {"id": "x"}, "scenario_results": []}))
    with pytest.raises(ExperimentFileError, match="missing key 'summary'") as info:
        read_document(partial)
    assert "\n" not in str(info.value)
    broken = tmp_path / "broken.json"
    doc = make_doc("exp_broken", [make_result("a")])
    del doc["scenario_results"][0]["passed"]
    broken.write_text(json.dumps(doc))
    with pytest.raises(ExperimentFileError, match=r"scenario_results\[0\].*passed"):
        load_document(broken)


def test_recorder_journals_and_finalises(tmp_path):
    rec = Recorder(tmp_path, name="run", tags=["t"], experiment_id="exp_rec001", judge_provider="gemini", judge_model="m", cwd=tmp_path)
    journal = journal_path(tmp_path, "exp_rec001")
    assert journal.name == ".exp_rec001.journal.jsonl"
    rec.add(make_result("a"))
    rec.add(make_result("b", passed=False))
    lines = journal.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["header", "result", "result"]
    path = rec.finalise()
    assert path == tmp_path / "exp_rec001.json" and not journal.exists()
    info, results, raw = load_document(path)
    assert info.name == "run" and info.judge_model == "m" and not info.interrupted
    assert [r.name for r in results] == ["a", "b"]
    assert raw["experiment"]["git_commit"] is None  # tmp_path is not a repository
    assert raw["experiment"]["criteria_hash"].startswith("sha256:")


def test_recover_from_journal_marks_interrupted(tmp_path):
    rec = Recorder(tmp_path, name="crashed", experiment_id="exp_crash1", cwd=tmp_path)
    rec.add(make_result("a"))
    rec.add(make_result("b"))
    journal = journal_path(tmp_path, "exp_crash1")
    with open(journal, "a") as handle:
        handle.write('{"kind": "result", "result": {"id": "exa')  # torn by the crash
    del rec  # the process "dies" without finalise
    assert pending_journals(tmp_path) == [journal]
    path = recover(journal)
    assert not journal.exists()
    raw = json.loads(path.read_text())
    assert raw["experiment"]["interrupted"] is True
    assert raw["experiment"]["name"] == "crashed"
    assert raw["summary"]["total_scenarios"] == 2


def test_variance_section_with_iterations():
    results = [make_result("a", iteration=i, passed=i != 2) for i in (1, 2, 3)]
    results += [make_result("b", iteration=i) for i in (1, 2, 3)]
    results += [make_result("c", iteration=i, passed=False) for i in (1, 2, 3)]
    doc = make_doc("exp_var", results, iterations=3)
    var = doc["variance"]
    assert [r["completion_rate"] for r in var["runs"]] == [0.6667, 0.3333, 0.6667]
    assert var["completion_rate"]["mean"] == 0.5556
    assert var["completion_rate"]["std"] == 0.1925  # sample std dev
    labels = {s["name"]: s["label"] for s in var["scenarios"]}
    assert labels == {"a": "flaky", "b": "stable-pass", "c": "stable-fail"}
    a = next(s for s in var["scenarios"] if s["name"] == "a")
    assert (a["runs"], a["passes"], a["pass_rate"], a["pass_at_k"], a["pass_hat_k"]) == (3, 2, 0.6667, 1.0, 0.0)
    assert var["flaky"] == [a["id"]]


def test_a_result_journaled_just_before_an_interrupt_still_reaches_the_experiment(tmp_path, monkeypatch):
    """Ctrl-C between a result's journal line and its spool entry: the file still has it (the journal
    is removed once the file is written, so leaving it out would lose a finished scenario)."""
    import json

    from support.experiments import make_result

    rec = Recorder(tmp_path, experiment_id="exp_intr01", cwd=tmp_path)
    rec.add(make_result("first"))
    spool_add = rec._late.add

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rec._late, "add", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rec.add(make_result("second"))
    monkeypatch.setattr(rec._late, "add", spool_add)
    path = rec.finalise(interrupted=True)
    doc = json.loads(path.read_text())
    assert [r["name"] for r in doc["scenario_results"]] == ["first", "second"]
    assert doc["experiment"]["interrupted"] is True and not rec.journal.exists()
