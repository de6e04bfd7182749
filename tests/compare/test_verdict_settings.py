"""Every setting that can change a verdict is in the experiment and its fingerprint (issue 37): the
judge's temperature, samples, samples_per_criterion and context_turns, the simulator's temperature
and the fidelity mode. ``fabtest-compare`` shows a changed one under comparability, and the gate
cannot call a run "not worse" when the instrument that measured it changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.experiments import make_doc, make_result
from fabtest.cli import compare_main
from fabtest.compare.compute import compare
from fabtest.compare.render import render_markdown, render_text
from fabtest.config.settings import Settings
from fabtest.experiment.export import write_document
from fabtest.experiment.reader import load_document

ITERATIONS = 10
GOOD = [("friendly", "passed"), ("concise", "passed")]


def _settings(**changes: Any) -> Settings:
    table: dict[str, Any] = {"judge": {"temperature": 0.0, "samples": 1, "context_turns": 2},
                             "simulator": {"temperature": 0.7}}
    for key, value in changes.items():
        role, _, name = key.partition("__")
        if name:
            table[role][name] = value
        else:
            table[role] = value
    return Settings.model_validate(table)


def _doc(experiment_id: str, settings: Settings | None, *, simulated: bool = False, **kw: Any) -> dict[str, Any]:
    recorded: dict[str, Any] = {}
    if settings is not None:
        judge, simulator = settings.verdict_settings()
        recorded = {"judge_settings": judge, "simulator_settings": simulator}
    runs = [make_result(f"scenario {s}", iteration=i + 1, evals=GOOD) for s in "abc" for i in range(ITERATIONS)]
    for run in runs if simulated else []:  # a simulated user talked (one valid try each)
        run.simulation = {"valid": True, "tries": [{"attempt": 1, "valid": True, "problems": []}]}
    return make_doc(experiment_id, runs, iterations=ITERATIONS, **recorded, **kw)


def test_the_settings_reach_the_file_and_come_back() -> None:
    settings = _settings(judge__temperature=0.7, judge__samples=3, judge__samples_per_criterion={"safe": 5},
                         judge__context_turns=4, simulator__temperature=0.2, simulator_fidelity="checks")
    doc = _doc("exp_settings", settings)
    assert doc["experiment"]["judge"]["settings"] == {"temperature": 0.7, "samples": 3,
                                                      "samples_per_criterion": {"safe": 5}, "context_turns": 4,
                                                      "max_file_bytes": 5_000_000}
    assert doc["experiment"]["simulator"]["settings"] == {"temperature": 0.2, "fidelity": "checks"}


def test_a_written_file_loads_back_with_its_settings(tmp_path: Path) -> None:
    settings = _settings(judge__samples=3)
    write_document(_doc("exp_roundtrip", settings), tmp_path)
    info, _, _ = load_document("exp_roundtrip", tmp_path)
    assert info.judge_settings["samples"] == 3 and info.simulator_settings["fidelity"] == "judge"


@pytest.mark.parametrize("change", [{"judge__temperature": 0.7}, {"judge__samples": 3},
                                    {"judge__samples_per_criterion": {"friendly": 3}}, {"judge__context_turns": 5},
                                    {"simulator__temperature": 0.0}, {"simulator_fidelity": "off"},
                                    {"judge_max_file_bytes": 1000}])
def test_each_setting_changes_the_configuration_fingerprint(change: dict[str, Any]) -> None:
    same = _doc("exp_one", _settings())["experiment"]
    assert _doc("exp_two", _settings())["experiment"]["config_hash"] == same["config_hash"]
    changed = _doc("exp_two", _settings(**change))["experiment"]
    assert changed["config_hash"] != same["config_hash"]
    assert changed["criteria_hash"] == same["criteria_hash"]  # only the configuration moved


def test_an_experiment_without_settings_keeps_the_fingerprint_it_always_had() -> None:
    """Older files recorded none: their hash is the one computed without settings."""
    from fabtest.experiment.fingerprint import experiment_fingerprints

    results = [make_result("scenario a")]
    assert make_doc("exp_old", results)["experiment"]["config_hash"] == experiment_fingerprints(results)[0]


def test_a_changed_judge_setting_is_shown_under_comparability() -> None:
    c = compare(_doc("exp_base", _settings()), _doc("exp_curr", _settings(judge__temperature=0.7)))
    comp = c.comparability
    assert comp.judge_settings_changed == ["temperature 0.0 → 0.7"] and comp.validity == "LOW"
    assert "judge settings differ (temperature 0.0 → 0.7)" in comp.reasons
    assert "✗ Judge settings: temperature 0.0 → 0.7" in render_text(c)
    assert "judge settings differ (temperature 0.0 → 0.7)" in render_markdown(c)


def test_a_changed_simulator_setting_lowers_validity_to_medium() -> None:
    c = compare(_doc("exp_base", _settings()), _doc("exp_curr", _settings(simulator_fidelity="off")))
    assert c.comparability.simulator_settings_changed == ["fidelity 'judge' → 'off'"]
    assert c.comparability.validity == "MEDIUM" and not c.comparability.judge_settings_changed
    assert "⚠ Simulator settings: fidelity 'judge' → 'off'" in render_text(c)


def test_settings_recorded_on_one_side_only_are_not_a_change() -> None:
    """An older baseline says nothing about its settings: nothing to flag (nor to claim identical)."""
    c = compare(_doc("exp_base", None), _doc("exp_curr", _settings(judge__samples=3)))
    assert c.comparability.judge_settings_changed == [] and c.comparability.validity == "HIGH"


def test_a_setting_one_side_did_not_record_yet_is_not_a_change() -> None:
    """A file written before max_file_bytes was recorded (issue 39) says nothing about it; the
    settings both sides recorded are still compared."""
    base = _doc("exp_base", _settings(judge__samples=3))
    del base["experiment"]["judge"]["settings"]["max_file_bytes"]
    c = compare(base, _doc("exp_curr", _settings(judge_max_file_bytes=1000)))
    assert c.comparability.judge_settings_changed == ["samples 3 → 1"]
    c = compare(base, _doc("exp_curr", _settings(judge__samples=3, judge_max_file_bytes=1000)))
    assert c.comparability.judge_settings_changed == [] and c.comparability.validity == "HIGH"
    both = compare(_doc("exp_base", _settings()), _doc("exp_curr", _settings(judge_max_file_bytes=1000)))
    assert both.comparability.judge_settings_changed == ["max_file_bytes 5000000 → 1000"]


def _gate(tmp_path: Path, capsys: pytest.CaptureFixture[str], current: Settings,
          simulated: bool = False) -> tuple[int, dict[str, Any]]:
    write_document(_doc("exp_base01", _settings(), simulated=simulated), tmp_path)
    write_document(_doc("exp_curr01", current, simulated=simulated), tmp_path)
    code = compare_main(["exp_base01", "exp_curr01", "--results-dir", str(tmp_path), "--fail-on-regression",
                         "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_gate_is_not_worse_with_the_same_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _gate(tmp_path, capsys, _settings())
    assert code == 0 and data["gate"]["outcome"] == "not worse"


def test_a_changed_judge_setting_makes_the_gate_undecided(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _gate(tmp_path, capsys, _settings(judge__samples=3))
    assert code == 3 and data["gate"]["outcome"] == "undecided"
    assert data["verdict"].startswith("undecided: the judge's settings changed (samples 1 → 3)")


def test_a_changed_simulator_setting_makes_the_gate_undecided_when_users_were_simulated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _gate(tmp_path, capsys, _settings(simulator__temperature=0.0), simulated=True)
    assert code == 3 and "the simulated user's settings changed (temperature 0.7 → 0.0)" in data["verdict"]


def test_a_changed_simulator_setting_does_not_matter_without_a_simulated_user(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Scripted conversations never met the simulator: where it does not matter, it is not a reason."""
    code, data = _gate(tmp_path, capsys, _settings(simulator__temperature=0.0))
    assert code == 0 and data["gate"]["outcome"] == "not worse"
