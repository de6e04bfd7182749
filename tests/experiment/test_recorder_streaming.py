"""The Recorder spills entries as they arrive and keeps only briefs: the file and the console summary
must be exactly what building the document from the whole results gives (experiment/spool.py)."""

from __future__ import annotations

import json
from pathlib import Path

from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.model import CheckRecord, ScenarioResult, TopicRecord, TurnRecord, UsageRecord
from fabtest.experiment.recorder import Recorder, journal_path, recover
from fabtest.experiment.spool import spill_path
from fabtest.report.console import render_summary
from fabtest.llm.retry_budget import BUDGET_SPENT_MARKER


def _result(i: int, iteration: int = 1) -> ScenarioResult:
    """Varied on purpose: flaky scenarios whose runs differ in user turns, agent turns or only
    verdicts, low-confidence verdicts, grounding claims, off-graph jumps, agent usage per turn."""
    sid = i % 4  # four scenarios, each run several times
    flips = (sid == 1 and iteration == 2) or (sid == 2 and iteration == 3) or (sid == 3 and iteration == 2)
    low = {"confidence": "low", "samples": ["passed", "failed"]} if i == 5 else {}
    user = f"hello {sid}" + (" again" if sid == 1 and iteration == 2 else "")
    agent = f"reply {sid}" + (" differently" if sid == 2 and iteration == 3 else "")
    return ScenarioResult(
        id=f"example:{sid:012x}", name=f"S{sid}", nodeid=f"features/f.feature::S{sid}", iteration=iteration,
        passed=not flips, turns=2, topics_visited=["a"], topic_path=["a"],
        off_graph_transitions=["a -> b (turn 2)"] if i == 1 else [],
        failure_type="assertion" if flips and sid != 3 else "error" if flips else None,
        failure_message=(f"turn 2 failed ({BUDGET_SPENT_MARKER})" if sid == 3 else "turn 2 failed") if flips else None,
        evaluations=[CheckRecord(type="satisfy", mode="should", criterion="kind", status="failed" if flips else "passed",
                                 passed=not flips, turn=1, details=f"long explanation {i}", data={"k": i, **low})],
        expectations=[CheckRecord(type="grounded_in", mode="must", criterion="tool", status="failed", passed=False,
                                  turn=2, details="why", data={"source": "tool", "claims_total": 2, "claims_unsupported": 1})],
        transcript=[TurnRecord(number=1, user=user, agent=agent,
                               metadata={"model": "agent-m", "usage": {"input_tokens": 10 + i, "output_tokens": 5}}),
                    TurnRecord(number=2, user="bye", agent="ok")],
        usage={"judge": UsageRecord(calls=1, input_tokens=100, output_tokens=10)},
        criteria={"kind": "Be kind"}, topics=[TopicRecord(name="a", characteristic="greets", successors=["b"])],
        simulator={"persona": "p"}, agent_metadata={"model": "m"},
    )


def _results() -> list[ScenarioResult]:
    return [_result(i * 4 + sid, iteration=i + 1) for i in range(3) for sid in range(4)]


def _reference(recorder: Recorder, results: list[ScenarioResult], where: Path, interrupted: bool = False) -> dict:
    info = recorder.info.model_copy(update={"interrupted": interrupted})
    return json.loads(write_document(build_document(info, results), where).read_text())


def test_streamed_file_is_byte_for_byte_the_document_of_the_whole_results(tmp_path: Path) -> None:
    results = _results()
    recorder = Recorder(results_dir=tmp_path / "rec", experiment_id="exp_stream", iterations=3,
                        judge_model="gemini-2.5-flash", cwd=tmp_path)
    for r in results:
        recorder.add(r)
    assert spill_path(tmp_path / "rec", "exp_stream").exists()
    path = recorder.finalise()
    reference = write_document(build_document(recorder.info, results), tmp_path / "ref")
    assert path.read_bytes() == reference.read_bytes()
    doc = json.loads(path.read_text())
    causes = {c["name"]: c["cause"] for c in doc["variance"]["flaky_causes"]}
    assert causes == {"S1": "simulator", "S2": "agent", "S3": "undetermined"}  # read back from the spill
    assert doc["scenario_results"][0]["transcript"][0]["user"] == "hello 0"
    assert not spill_path(tmp_path / "rec", "exp_stream").exists() and not recorder.journal.exists()


def test_console_summary_from_the_briefs_matches_the_whole_document(tmp_path: Path) -> None:
    results = _results()
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_sum", iterations=3, cwd=tmp_path)
    for r in results:
        recorder.add(r)
    recorder.finalise(interrupted=True)
    streamed = render_summary(recorder.document(interrupted=True))
    whole = render_summary(_reference(recorder, results, tmp_path / "ref", interrupted=True))
    assert streamed == whole
    for seen in ("Low confidence:    1", "Off-graph jumps:   1", "Retry budget:     ran out; 1", "S1: 2/3 runs passed (flaky: simulator"):
        assert seen in streamed


def test_briefs_hold_no_transcript_and_share_what_repeats(tmp_path: Path) -> None:
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_slim", cwd=tmp_path)
    for r in _results():
        recorder.add(r)
    briefs = recorder.results
    assert all(not t.user and not t.agent for b in briefs for t in b.transcript)  # only the agent's usage stays
    assert all(not b.agent_metadata and not b.nodeid for b in briefs)
    assert all(c.details == "" for b in briefs for c in (*b.evaluations, *b.expectations))
    assert briefs[0].criteria is briefs[5].criteria and briefs[0].expectations is briefs[5].expectations
    assert briefs[0].expectations[0].data["source"] == "tool"  # the summary's grounding reads it
    recorder.discard()
    assert not spill_path(tmp_path, "exp_slim").exists()


def test_a_late_update_by_node_id_and_iteration_reaches_the_file_and_the_summary(tmp_path: Path) -> None:
    results = _results()
    recorder = Recorder(results_dir=tmp_path / "rec", experiment_id="exp_late", iterations=3, cwd=tmp_path)
    for r in results:
        recorder.add(r)
    verdict = CheckRecord(type="satisfy", mode="should", criterion="late", status="failed", passed=False, turn=2,
                          details="came after the scenario")

    def merge(result: ScenarioResult) -> ScenarioResult:
        assert result.transcript[0].user == "hello 2"  # the whole result, read back
        return result.model_copy(update={"evaluations": [*result.evaluations, verdict]})

    assert recorder.update_result(("features/f.feature::S2", 1), merge)
    assert not recorder.update_result(("features/f.feature::nope", 1), merge)
    path = recorder.finalise()
    results[2] = merge(results[2])
    reference = write_document(build_document(recorder.info, results), tmp_path / "ref")
    assert path.read_bytes() == reference.read_bytes()
    doc = json.loads(path.read_text())
    assert doc["criteria_results"]["late"] == {"evaluated": 1, "passed": 0, "failed": 1, "inconclusive": 0, "not_applicable": 0, "rate": 0.0}
    assert [e["name"] for e in doc["scenario_results"]][:4] == ["S0", "S1", "S2", "S3"]  # the update kept its place


def test_recover_streams_the_journal_through_the_same_spool(tmp_path: Path) -> None:
    results = _results()
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_crash", iterations=3, cwd=tmp_path)
    for r in results:
        recorder.add(r)
    recorder._journal.close()  # the run dies: journal and spill file stay  # noqa: SLF001
    recorder._spool._file.close()  # noqa: SLF001
    out = recover(journal_path(tmp_path, "exp_crash"))
    assert not spill_path(tmp_path, "exp_crash").exists()
    doc = json.loads(out.read_text())
    assert doc["experiment"]["interrupted"] is True
    reference = _reference(recorder, results, tmp_path / "ref", interrupted=True)
    assert doc == reference


def test_a_commands_results_are_written_by_the_same_path_as_a_run(tmp_path: Path) -> None:
    """rejudge and replay write through ``spool.write_experiment``: the file a document held in
    memory would give, with the command's own section after the others and no spill file left."""
    from fabtest.experiment.model import ExperimentInfo
    from fabtest.experiment.spool import write_experiment

    results = _results()
    info = ExperimentInfo(id="exp_cmd001", timestamp="2026-01-01T00:00:00Z", iterations=3,
                          judge_model="gemini-2.5-flash")
    section = {"of": "exp_source", "times": 2}
    path = write_experiment(info, results, tmp_path / "cmd", {"rejudge": section})
    doc = build_document(info, results)
    doc["rejudge"] = section
    reference = write_document(doc, tmp_path / "ref")
    assert path.read_bytes() == reference.read_bytes()
    assert list(json.loads(path.read_text()))[-4:] == ["variance", "rejudge", "scenario_index", "scenario_results"]
    assert not spill_path(tmp_path / "cmd", "exp_cmd001").exists()
