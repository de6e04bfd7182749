"""Late soft verdicts in the recorder: journalled as they arrive, merged into their results, and a
placeholder never given one is skipped with the reason, also in a journal recovered after a kill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabtest.experiment.late import INTERRUPTED, NEVER_ARRIVED, PENDING, PENDING_DETAILS, LateVerdict, merge, settle
from fabtest.experiment.model import CheckRecord, ScenarioResult, UsageRecord
from fabtest.experiment.recorder import Recorder, recover


def _waiting(criterion: str) -> CheckRecord:
    return CheckRecord(type="satisfy", mode="should", criterion=criterion, status="skipped", turn=1,
                       details=PENDING_DETAILS, data={PENDING: True})


def _result(nodeid: str) -> ScenarioResult:
    return ScenarioResult(id="example:00000000000a", name=nodeid, nodeid=nodeid, passed=True, turns=1,
                          evaluations=[_waiting("polite"), _waiting("concise")],
                          usage={"judge": UsageRecord(calls=1, input_tokens=10, output_tokens=2)})


def _late(nodeid: str) -> LateVerdict:
    verdict = CheckRecord(type="satisfy", mode="should", criterion="polite", status="passed", passed=True, turn=1,
                          details="fine", data={"scope": "response"})
    return LateVerdict.model_validate({"nodeid": nodeid, "checks": [{"index": 0, "check": verdict.model_dump()}],
                                       "usage": {"judge": {"calls": 1, "input_tokens": 100, "output_tokens": 5}}})


def _details(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["status"], d["details"]) for d in doc["scenario_results"][0]["evaluations"]["details"]]


def test_late_verdicts_are_merged_and_the_missing_one_says_why(tmp_path: Path) -> None:
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_late", cwd=tmp_path)
    recorder.add_late(_late("a.feature::test_a"))  # may arrive before its result
    recorder.add(_result("a.feature::test_a"))
    summary = recorder.document()["summary"]
    doc = json.loads(recorder.finalise().read_text())
    assert _details(doc) == [("passed", "fine"), ("skipped", NEVER_ARRIVED)]
    for counts in (summary, doc["summary"]):
        assert counts["tokens"]["judge"]["calls"] == 2  # the late call's tokens are counted
        assert counts["evaluations"]["evaluated"] == 1 and counts["skipped_checks"] == 1


def test_a_verdict_after_its_result_is_merged_and_an_interrupted_run_says_so(tmp_path: Path) -> None:
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_late_after", cwd=tmp_path)
    recorder.add(_result("a.feature::test_a"))
    recorder.add_late(_late("a.feature::test_a"))
    doc = json.loads(recorder.finalise(interrupted=True).read_text())
    assert _details(doc) == [("passed", "fine"), ("skipped", INTERRUPTED)]
    assert doc["summary"]["tokens"]["judge"]["calls"] == 2


def test_a_killed_run_recovers_its_late_verdicts_from_the_journal(tmp_path: Path) -> None:
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_killed", cwd=tmp_path)
    recorder.add(_result("a.feature::test_a"))
    recorder.add_late(_late("a.feature::test_a"))
    recorder.add_late(_late("other.feature::test_gone"))  # a verdict whose result never made it: ignored
    kinds = [json.loads(line)["kind"] for line in recorder.journal.read_text().splitlines()]
    assert kinds == ["header", "result", "late", "late"]
    recorder._journal.close()  # the process dies: the journal stays behind, unlocked
    doc = json.loads(recover(recorder.journal).read_text())
    assert doc["experiment"]["interrupted"] is True
    assert _details(doc) == [("passed", "fine"), ("skipped", INTERRUPTED)]
    assert all(PENDING not in d.get("data", {}) for d in doc["scenario_results"][0]["evaluations"]["details"])


def test_a_result_without_placeholders_is_left_as_it_is(tmp_path: Path) -> None:
    plain = ScenarioResult(id="example:00000000000b", name="plain", nodeid="p.feature::test_p", passed=True)
    assert settle(merge(plain, []), NEVER_ARRIVED) is plain


def test_a_late_verdict_brings_its_model_when_the_role_had_spent_nothing() -> None:
    """Whether the judge finished before or after its scenario, the result names the judge's model
    (it used to be None when every judge call was late: results differed from run to run)."""
    result = _result("n").model_copy(update={"usage": {}})
    late = _late("n").model_copy(update={"usage": {"judge": UsageRecord(calls=1, input_tokens=3, model="gemini-x")}})
    merged = merge(result, [late])
    assert merged.usage["judge"].model == "gemini-x"
    assert merged.usage["judge"].calls == 1
