"""Fuzzing the files fabtest reads (issue 10): whatever a playbook, a scenario set, an experiment
file or a journal holds, the answer is the model or ONE line naming the file, never an exception
of another kind (which would be a traceback or an INTERNALERROR for the user)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabtest.cli import main
from fabtest.experiment.reader import ExperimentFileError, read_document
from fabtest.playbook.load import PlaybookError, load_playbook
from fabtest.config.scenario_sets import ScenarioSetError, parse_scenario_set

KEYS = ["name", "steps", "persona", "tmpdir", "link_paths", "env", "timeout", "user_input", "expected_outcome",
        "context", "success_criteria", "files_exist", "files_contain", "max_turns", "initial_user_input",
        "experiment", "id", "summary", "scenario_results", "passed", "criteria_results", "variance", "runs",
        "iteration", "format_version", "transcript", "evaluations", "details", "goal", "verification"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False),
                    st.text(max_size=20), st.sampled_from(["../../etc/shadow", "/etc/hostname", "<script>", "${X}"]))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), inner, max_size=5)),
    max_leaves=25)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _one_line(message: str) -> None:
    assert "\n" not in message and message


@FAST
@given(data=JSONISH, fmt=st.sampled_from(["json", "yaml"]))
def test_any_playbook_data_is_a_playbook_or_one_line(data: Any, fmt: str) -> None:
    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"pb.{fmt}"
        path.write_text(json.dumps(data) if fmt == "json" else yaml.safe_dump(data), encoding="utf-8")
        try:
            load_playbook(path)
        except PlaybookError as exc:
            _one_line(str(exc))
            assert str(path) in str(exc)


@FAST
@given(raw=st.binary(max_size=200))
def test_any_bytes_as_a_yaml_playbook_or_scenario_set_is_one_line(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.yaml"
        path.write_bytes(raw)
        for call, error in ((load_playbook, PlaybookError), (parse_scenario_set, ScenarioSetError)):
            try:
                call(path)
            except error as exc:
                _one_line(str(exc))


@FAST
@given(data=JSONISH)
def test_any_scenario_set_data_is_records_or_one_line(data: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "set.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        try:
            parse_scenario_set(path)
        except ScenarioSetError as exc:
            _one_line(str(exc))


@FAST
@given(data=JSONISH, base=st.booleans())
def test_any_experiment_file_is_read_or_one_line(data: Any, base: bool) -> None:
    if base and isinstance(data, dict):  # often a near-valid document with one odd part
        data = {"experiment": {"id": "exp_f"}, "summary": {}, "scenario_results": [], **data}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "exp_f.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        for lean in (False, True):
            try:
                read_document(path, tmp, lean=lean)
            except ExperimentFileError as exc:
                _one_line(str(exc))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.one_of(JSONISH.map(json.dumps), st.binary(max_size=30).map(lambda b: b.decode("latin-1"))),
                      max_size=5),
       tail=st.binary(max_size=20))
def test_any_journal_is_recovered_or_one_line(lines: list[str], tail: bytes) -> None:
    import contextlib
    import io

    with tempfile.TemporaryDirectory() as tmp:
        journal = Path(tmp) / ".exp_j.journal.jsonl"
        journal.write_bytes("\n".join(lines).encode("utf-8", "replace") + b"\n" + tail)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["recover", "--results-dir", tmp])
        assert code in (0, 2)
        assert err.getvalue().count("\n") == (1 if code == 2 else 0)
        assert all(p.parent == Path(tmp) for p in Path(tmp).rglob("*.json"))
