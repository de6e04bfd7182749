"""The CI gates of fabtest-compare, each in both directions (must fail / must not fail).

Exit codes (issue 28): 0 not worse, 1 worse, 3 undecided, 2 usage or bad input. "Never fails" is
asserted as "never worse" (exit != 1); few runs cannot show "not worse", so those are undecided.
"""

import json
import random

import pytest

from support.experiments import make_doc, make_result
from fabtest.cli import compare_main
from fabtest.compare.compute import compare, drop_p_value
from fabtest.compare.gate import gate_failures, regressed
from fabtest.experiment.export import write_document

N = 10  # iterations


def _runs(name: str, passes: int, *, evals: list[tuple[str, str]] | None = None, n: int = N, **kw):
    """``n`` runs of one scenario, the first ``passes`` of them passing."""
    return [make_result(name, iteration=i + 1, passed=i < passes, evals=evals, **kw) for i in range(n)]


def _write(tmp_path, baseline, current, iterations=N):
    write_document(make_doc("exp_base00", baseline, iterations=iterations), tmp_path)
    write_document(make_doc("exp_curr00", current, iterations=iterations), tmp_path)
    return ["exp_base00", "exp_curr00", "--results-dir", str(tmp_path)]


def _err(capsys) -> str:
    return capsys.readouterr().err


# --- --fail-on-regression: completion ---------------------------------------------------------


def test_completion_collapse_over_ten_iterations_fails(tmp_path, capsys):
    args = _write(tmp_path, _runs("booking", N), _runs("booking", 0))
    assert compare_main(args + ["--fail-on-regression"]) == 1
    err = _err(capsys)
    assert "FAIL completion: 10/10 → 0/10 runs passed (100.0% → 0.0%)" in err
    # one scenario: the stratified test is Fisher's exact test
    assert "stratified by scenario (Cochran-Mantel-Haenszel) on scenario runs: p = 5.413e-06" in err
    assert "larger than chance" in err


def test_identical_rerun_never_fails(tmp_path, capsys):
    rng = random.Random(7)
    for trial in range(5):  # whatever the outcomes, equal counts give p >= 0.5: never below any alpha < 0.5
        results = [make_result(f"s{k}", iteration=i + 1, passed=rng.random() < 0.5,
                               evals=[("friendly", rng.choice(["passed", "failed"]))])
                   for k in range(4) for i in range(3)]
        doc = make_doc(f"exp_same{trial}", results, iterations=3)
        c = compare(doc, doc)
        assert not regressed(c) and gate_failures(c, fail_on_regression=True) == []
        assert all(r.p_value is None or r.p_value >= 0.5 for r in c.criteria)
    args = _write(tmp_path, _runs("booking", 5), _runs("booking", 5))
    assert compare_main(args + ["--fail-on-regression"]) == 3  # never worse; 10 runs cannot show "not worse"


def test_a_small_drop_within_chance_passes(tmp_path):
    args = _write(tmp_path, _runs("booking", 10), _runs("booking", 8))
    assert compare_main(args + ["--fail-on-regression"]) == 3


def test_an_improvement_never_fails(tmp_path, capsys):
    args = _write(tmp_path, _runs("booking", 0), _runs("booking", N))
    assert compare_main(args + ["--fail-on-regression"]) == 3  # completion is shown not worse; the criteria, 10/10 each, are not
    err = _err(capsys)
    assert "PASS completion: 0/10 → 10/10" in err and "UNDECIDED criterion 'friendly': 10/10 → 10/10" in err


# --- --fail-on-regression: criteria (soft included) -------------------------------------------


def test_soft_criterion_collapse_fails_while_completion_holds(tmp_path, capsys):
    good = [("friendly", "passed"), ("concise", "passed")]
    bad = [("friendly", "failed"), ("concise", "passed")]
    args = _write(tmp_path, _runs("booking", N, evals=good), _runs("booking", N, evals=bad))
    assert compare_main(args + ["--fail-on-regression"]) == 1
    err = _err(capsys)
    assert "FAIL criterion 'friendly': 10/10 → 0/10 runs with every rating passed (100.0% → 0.0%)" in err
    assert "UNDECIDED completion:" in err and "UNDECIDED criterion 'concise'" in err


def test_soft_criterion_small_drop_passes(tmp_path):
    good = [("friendly", "passed")]
    args = _write(tmp_path, _runs("booking", N, evals=good),
                  _runs("booking", N, evals=good)[:9] + [make_result("booking", iteration=10, evals=[("friendly", "failed")])])
    assert compare_main(args + ["--fail-on-regression"]) == 3


# --- --alpha ------------------------------------------------------------------------------------


def test_alpha_sets_the_level(tmp_path, capsys):
    assert drop_p_value(10, 10, 6, 10) == pytest.approx(0.0433, abs=1e-4)
    args = _write(tmp_path, _runs("booking", 10), _runs("booking", 6))
    assert compare_main(args + ["--fail-on-regression"]) == 1  # p 0.043 < 0.05
    assert compare_main(args + ["--fail-on-regression", "--alpha", "0.01"]) == 3
    _err(capsys)
    for bad in ("0", "1", "five"):
        with pytest.raises(SystemExit) as refused:
            compare_main(args + ["--fail-on-regression", "--alpha", bad])
        assert refused.value.code == 2


# --- absolute floors ----------------------------------------------------------------------------


def test_min_evaluation_floor_both_ways(tmp_path, capsys):
    evals = [("friendly", "passed"), ("concise", "failed")]
    args = _write(tmp_path, _runs("booking", N, evals=evals), _runs("booking", N, evals=evals))
    assert compare_main(args + ["--min-evaluation", "0.5"]) == 3  # not below, but 10 runs cannot show above 40%
    assert compare_main(args + ["--min-evaluation", "60%"]) == 3  # 50% over 10 runs: no evidence against 60%
    assert "UNDECIDED evaluation floor: 5/10 runs' evaluation rates summed (50.0%), floor 60.0%" in _err(capsys)
    assert compare_main(args + ["--min-evaluation", "0.1"]) == 0  # 5/10 is evidence of a rate above 0%
    assert "PASS evaluation floor: 5/10" in _err(capsys)
    assert compare_main(args + ["--min-evaluation", "90%"]) == 1  # but against 90% there is
    assert "FAIL evaluation floor: 5/10" in _err(capsys)


def test_min_evaluation_fails_when_nothing_was_evaluated(tmp_path, capsys):
    args = _write(tmp_path, _runs("booking", 2, evals=[], n=2), _runs("booking", 2, evals=[], n=2), iterations=2)
    assert compare_main(args + ["--min-evaluation", "0.1"]) == 1
    assert "FAIL evaluation floor: nothing rated on the shared scenarios" in _err(capsys)


def test_min_criterion_floor_both_ways_and_repeatable(tmp_path, capsys):
    evals = [("friendly", "passed"), ("concise", "failed")]
    args = _write(tmp_path, _runs("booking", N, evals=evals), _runs("booking", N, evals=evals))
    assert compare_main(args + ["--min-criterion", "friendly=0.9", "--min-criterion", "concise=0%"]) == 3
    assert compare_main(args + ["--min-criterion", "friendly=0.9", "--min-criterion", "concise=40%"]) == 1
    err = _err(capsys)
    assert "FAIL criterion 'concise' floor: 0/10 runs with every rating passed (0.0%), floor 40.0%" in err
    assert "UNDECIDED criterion 'friendly' floor" in err  # 10/10 cannot show a rate above 80%


def test_min_criterion_bad_input_is_a_usage_error(tmp_path, capsys):
    args = _write(tmp_path, _runs("booking", 2, n=2), _runs("booking", 2, n=2), iterations=2)
    assert compare_main(args + ["--min-criterion", "friendyl=0.8"]) == 2
    err = _err(capsys)
    assert err.count("\n") == 1 and "no criterion 'friendyl'" in err and "criteria: concise, friendly" in err
    for bad in ("friendly", "=0.8", "friendly=high"):
        with pytest.raises(SystemExit) as refused:
            compare_main(args + ["--min-criterion", bad])
        assert refused.value.code == 2


def test_min_completion_is_over_shared_scenarios(tmp_path):
    base = [make_result(n) for n in "abcd"]
    cur = [make_result(n) for n in "abcd"] + [make_result("new", passed=False)]
    args = _write(tmp_path, base, cur, iterations=1)
    assert compare_main(args + ["--min-completion", "1.0"]) == 3  # the new failing scenario is not shared: never worse
    broken = [make_result(n, passed=n != "a") for n in "abcd"]
    args = _write(tmp_path, base, broken, iterations=1)
    assert compare_main(args + ["--min-completion", "1.0"]) == 1


# --- issue 9 point 1: an added failing scenario is not a regression -----------------------------


def test_an_added_failing_scenario_is_not_a_regression(tmp_path, capsys):
    base = [make_result(n) for n in "abcd"]
    cur = [make_result(n) for n in "abcd"] + [make_result("new one", passed=False)]
    args = _write(tmp_path, base, cur, iterations=1)
    assert compare_main(args + ["--fail-on-regression"]) == 3  # never worse (4 single runs cannot show not worse)
    out = capsys.readouterr().out
    assert "Rate:           100.0% → 100.0%  (+0.0pp) ─  [4/4 → 4/4; 95% CI 51-100% → 51-100%]" in out
    assert "Added scenarios (1, only in current; not in the deltas above):" in out
    assert "- Venue booking / new one [" in out and "]: failed (assertion)" in out  # feature, name and id
    assert "Whole experiments (different scenario sets: for reference, not compared)" in out
    assert compare_main(args + ["--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    completion = next(m for m in data["metrics"] if m["name"] == "completion_rate")
    assert (completion["baseline"], completion["current"]) == (1.0, 1.0)
    assert [a["name"] for a in data["added"]] == ["new one"] and data["added"][0]["passes"] == 0
    whole = next(m for m in data["whole"] if m["name"] == "completion_rate")
    assert (whole["baseline"], whole["current"]) == (1.0, 0.8)
    assert compare_main(args + ["--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "| Completion rate | 100.0% | 100.0% | +0.0pp | ─ |" in md
    assert "### Added scenarios (only in current) (1)" in md and "- Venue booking / new one [" in md
    assert "### Whole experiments (different scenario sets, not compared)" in md
    assert "| Completion rate | 100.0% | 80.0% |" in md


# --- issue 22 point 2: no silent passes ------------------------------------------------------------


def test_a_drop_without_evidence_still_gets_a_line_saying_what_could_be_detected(tmp_path, capsys):
    args = _write(tmp_path, _runs("booking", 10), _runs("booking", 0, n=1))  # 10/10 -> 0/1: p = 0.091
    assert compare_main(args + ["--fail-on-regression"]) == 3
    err = _err(capsys)
    line = next(x for x in err.splitlines() if "UNDECIDED completion:" in x)
    assert "10/10 → 0/1 runs passed" in line and "p = 0.09091" in line and "adjusted p = " in line
    assert "no drop could have been detected with these counts" in line
    assert "iterations would detect a 20-point drop" in line
    assert "gate UNDECIDED (exit 3)" in err and "PASS" not in err


def test_the_overall_evaluation_rate_is_gated(tmp_path, capsys):
    names = ["friendly", "concise", "polite"]
    base = _runs("booking", N, evals=[(n, "passed") for n in names])
    # 30/30 -> 21/30 ratings, one failure in each of runs 1-9; no single criterion collapses (each 10/10 -> 7/10)
    cur = [make_result("booking", iteration=i + 1, evals=[(n, "failed" if i < 9 and i % 3 == k else "passed")
                                                          for k, n in enumerate(names)]) for i in range(N)]
    args = _write(tmp_path, base, cur)
    assert compare_main(args + ["--fail-on-regression"]) == 1
    err = _err(capsys)
    assert "FAIL overall evaluation (every soft check of a run): 10/10 → 1/10 runs with every soft check passed" in err
    assert "UNDECIDED criterion 'polite': 10/10 → 7/10" in err


def test_json_and_markdown_carry_the_gate(tmp_path, capsys):
    args = _write(tmp_path, _runs("booking", N), _runs("booking", 0))
    assert compare_main(args + ["--fail-on-regression", "--format", "json"]) == 1
    gate = json.loads(capsys.readouterr().out)["gate"]
    assert gate["requested"] and gate["decision"] == "fail" and gate["exit_code"] == 1 and gate["unit"] == "scenario run"
    by_metric = {m["metric"]: m for m in gate["metrics"]}
    assert set(by_metric) == {"completion", "evaluation", "criterion:friendly", "criterion:concise"}
    completion = by_metric["completion"]
    assert completion["decision"] == "fail" and completion["baseline"] == [10, 10] and completion["current"] == [0, 10]
    assert completion["p_raw"] == pytest.approx(drop_p_value(10, 10, 0, 10))
    assert completion["p_adjusted"] >= completion["p_raw"]
    friendly = by_metric["criterion:friendly"]
    assert friendly["decision"] == friendly["outcome"] == "undecided"  # 10/10 → 10/10: too few runs to show not worse
    assert gate["outcome"] == "worse" and gate["margin"] == 0.1 and gate["verdict"].startswith("worse: completion")
    assert completion["outcome"] == "worse" and completion["current_interval"] == [0.0, 0.2775]
    assert friendly["baseline_interval"] == [0.7225, 1.0] and friendly["difference_lower"] is not None
    assert compare_main(args + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gate"] == {"requested": False, "decision": "pass", "exit_code": 0,
                                                           "metrics": [], "warnings": []}
    assert compare_main(args + ["--fail-on-regression", "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("**Verdict: worse: completion 10/10 → 0/10 (-100 pp")  # the verdict line first
    assert "### Gate: ❌ worse (exit 1)" in out and "| completion | 10/10 → 0/10 runs passed" in out


# --- issue 22 point 3: a changed criterion is loud, and gated on request ---------------------------------


def test_a_modified_criterion_warns_and_is_gated_with_gate_modified(tmp_path, capsys):
    base = [make_result("booking", iteration=i + 1, evals=[("polite", "passed")], criteria={"polite": "Says please"})
            for i in range(N)]
    cur = [make_result("booking", iteration=i + 1, evals=[("polite", "failed")], criteria={"polite": "Says please twice"})
           for i in range(N)]
    args = _write(tmp_path, base, cur)
    assert compare_main(args + ["--fail-on-regression"]) == 1  # the overall evaluation rate holds every soft check
    err = _err(capsys)
    assert "criterion 'polite'" not in err.replace("WARNING: criterion 'polite'", "")
    assert ("WARNING: criterion 'polite' changed its definition between the experiments: 100.0% → 0.0% "
            "(10/10 → 0/10 ratings passed); NOT gated") in err
    assert compare_main(args) == 0  # the warning is printed without any gate too
    assert "WARNING: criterion 'polite' changed its definition" in _err(capsys)
    assert compare_main(args + ["--format", "json"]) == 0
    [warning] = json.loads(capsys.readouterr().out)["gate"]["warnings"]
    assert warning.startswith("WARNING: criterion 'polite' changed its definition")
    assert compare_main(args + ["--fail-on-regression", "--gate-modified"]) == 1
    err = _err(capsys)
    assert "FAIL criterion 'polite' (definition changed): 10/10 → 0/10" in err and "gated (--gate-modified)" in err


# --- cost and latency limits -------------------------------------------------------------------------------


def test_cost_and_latency_limits(tmp_path, capsys):
    from fabtest.compare.gate import GateOptions, evaluate, paired

    base = make_doc("exp_b", [make_result(f"s{k}") for k in range(8)])
    c = compare(base, base)
    cheap = {f"s{k}": 0.01 for k in range(8)}
    pricey = {f"s{k}": 0.02 for k in range(8)}
    gate = evaluate(c, GateOptions(max_cost_increase=0.5), cost=paired(cheap, pricey))
    (entry,) = gate.entries
    assert gate.failed and entry.metric == "cost" and entry.p_raw == 0.5 ** 8
    assert "$0.0100 → $0.0200 per scenario run (+100.0%, limit +50%)" in entry.observed
    assert not evaluate(c, GateOptions(max_cost_increase=1.5), cost=paired(cheap, pricey)).failed
    assert not evaluate(c, GateOptions(max_latency_increase=0.1), latency=paired(cheap, cheap)).failed
    args = _write(tmp_path, _runs("booking", 2, n=2), _runs("booking", 2, n=2), iterations=2)
    assert compare_main(args + ["--max-latency-increase", "20%"]) == 3  # one scenario cannot show it stays within
    assert "UNDECIDED response latency per scenario run: 0.50s → 0.50s" in _err(capsys)
    with pytest.raises(SystemExit) as refused:
        compare_main(args + ["--max-cost-increase", "lots"])
    assert refused.value.code == 2
