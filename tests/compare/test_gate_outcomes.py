"""Issue 28: the gate's three outcomes, and every way of passing by accident closed.

Worse exits 1, not worse (every gated metric shown within the margin) exits 0, undecided exits 3
and is never printed as a pass. Each case the issue lists as "exit 0 today" is one test below.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.experiments import make_doc, make_result
from fabtest.cli import compare_main
from fabtest.experiment.export import write_document

SCENARIOS, ITERATIONS = 3, 10  # 30 runs a side: 30/30 → 30/30 is shown within 10 points (the bound is -8.3 pp)


def _runs(evals=None, *, n_scenarios: int = SCENARIOS, passed=lambda s, i: True, names="abcdefghijklmnopqrst",
          **kw) -> list:
    return [make_result(f"scenario {names[s]}", iteration=i + 1, passed=passed(s, i),
                        evals=evals(s, i) if callable(evals) else evals, **kw)
            for s in range(n_scenarios) for i in range(ITERATIONS)]


def _args(tmp_path: Path, base: list, cur: list, mutate=None) -> list[str]:
    b, c = make_doc("exp_base01", base, iterations=ITERATIONS), make_doc("exp_curr01", cur, iterations=ITERATIONS)
    if mutate is not None:
        mutate(c)
    write_document(b, tmp_path)
    write_document(c, tmp_path)
    return ["exp_base01", "exp_curr01", "--results-dir", str(tmp_path), "--fail-on-regression"]


def _gate(args: list[str], capsys) -> tuple[int, dict, str]:
    code = compare_main(args + ["--format", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


GOOD = [("friendly", "passed"), ("concise", "passed")]


# --- the three outcomes ---------------------------------------------------------------------------


def test_not_worse_needs_evidence_and_the_margin_sets_it(tmp_path, capsys):
    args = _args(tmp_path, _runs(GOOD), _runs(GOOD))
    code, data, err = _gate(args, capsys)
    assert code == 0 and data["gate"]["outcome"] == "not worse" and data["gate"]["exit_code"] == 0
    assert data["verdict"].startswith("not worse: no gated metric dropped by more than 10 points")
    assert list(data)[0] == "verdict"  # the JSON opens with it
    completion = next(m for m in data["gate"]["metrics"] if m["metric"] == "completion")
    assert completion["decision"] == "pass" and completion["difference_lower"] > -0.1
    assert "gate PASSED (exit 0): not worse" in err
    # a 5-point margin is more than 30 runs a side can show at 100 %: undecided, never a pass
    code, data, err = _gate(args + ["--gate-margin", "5"], capsys)
    assert code == 3 and data["gate"]["outcome"] == "undecided" and data["gate"]["margin"] == 0.05
    assert "gate UNDECIDED (exit 3)" in err and "PASSED" not in err
    assert data["verdict"].startswith("undecided: about ") and "more runs per side" in data["verdict"]
    code = compare_main(args)  # the console opens with the verdict line too
    assert code == 0 and capsys.readouterr().out.startswith("Verdict: not worse")


def test_few_runs_are_undecided_not_passed(tmp_path, capsys):
    args = _args(tmp_path, _runs(GOOD, n_scenarios=1)[:3], _runs(GOOD, n_scenarios=1)[:3])
    code, data, err = _gate(args, capsys)
    assert code == 3 and {m["decision"] for m in data["gate"]["metrics"]} == {"undecided"}
    assert "PASS " not in err and "runs per side would show 'not worse' with 80% power" in err


# --- untested is never a pass (point 3): each case of the issue ------------------------------------


def test_a_criterion_gone_all_inconclusive_is_undecided(tmp_path, capsys):
    inconclusive = [("friendly", "inconclusive"), ("concise", "passed")]
    code, data, err = _gate(_args(tmp_path, _runs(GOOD), _runs(inconclusive)), capsys)
    assert code == 3
    friendly = next(m for m in data["gate"]["metrics"] if m["metric"] == "criterion:friendly")
    assert friendly["decision"] == "undecided" and "untested is never a pass" in friendly["reason"]
    assert "UNDECIDED criterion 'friendly': 30/30 → 0/0" in err


def test_a_judge_outage_is_undecided(tmp_path, capsys):
    skipped = [("friendly", "skipped"), ("concise", "skipped")]
    code, data, _ = _gate(_args(tmp_path, _runs(GOOD), _runs(skipped)), capsys)
    assert code == 3
    by_metric = {m["metric"]: m for m in data["gate"]["metrics"]}
    assert by_metric["evaluation"]["decision"] == "undecided" and by_metric["completion"]["decision"] == "pass"
    assert by_metric["criterion:friendly"]["decision"] == by_metric["criterion:concise"]["decision"] == "undecided"


def test_no_shared_scenario_is_undecided(tmp_path, capsys):
    cur = _runs(GOOD, names="klm")
    code, data, _ = _gate(_args(tmp_path, _runs(GOOD), cur), capsys)
    assert code == 3 and any("no scenario both experiments ran" in p for p in data["gate"]["problems"])


def test_an_empty_current_experiment_is_undecided(tmp_path, capsys):
    code, data, _ = _gate(_args(tmp_path, _runs(GOOD), []), capsys)
    assert code == 3 and data["gate"]["outcome"] == "undecided" and data["gate"]["problems"]


def test_every_current_scenario_skipped_is_undecided(tmp_path, capsys):
    code, data, _ = _gate(_args(tmp_path, _runs(GOOD), _runs(GOOD, skipped=True)), capsys)
    assert code == 3 and data["verdict"] == ("undecided: every shared scenario was skipped in the current experiment: "
                                             "nothing ran")


def test_a_tampered_index_is_undecided(tmp_path, capsys):
    failing = _runs(GOOD, passed=lambda s, i: s != 0 or i >= 7)  # scenario a: 3/10
    args = _args(tmp_path, _runs(GOOD), failing)
    assert compare_main(args) == 1  # honest files: worse
    capsys.readouterr()
    path = tmp_path / "exp_curr01.json"
    lines = path.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith('"scenario_index"'))
    lines[k] = lines[k].replace('false, false, 3, "assertion"', 'true, false, 3, null')  # every run now "passed"
    path.write_text("\n".join(lines) + "\n")
    code, data, err = _gate(args, capsys)
    assert code == 3
    assert "its summary says 23, 7, 0 (an edited or damaged scenario index?)" in data["gate"]["problems"][0]
    assert "UNDECIDED: experiment exp_curr01: its scenario runs add up to 30 passed, 0 failed" in err


def test_a_budget_with_nothing_measured_is_undecided(tmp_path, capsys):
    def no_cost(doc: dict) -> None:
        for e in doc["scenario_results"]:
            e.pop("cost", None)

    args = _args(tmp_path, _runs(GOOD), _runs(GOOD), mutate=no_cost)[:-1] + ["--max-cost-increase", "20"]
    code, data, err = _gate(args, capsys)
    assert code == 3
    (cost,) = data["gate"]["metrics"]
    assert cost["metric"] == "cost" and cost["decision"] == "undecided" and "nothing to measure" in cost["reason"]
    assert data["verdict"].startswith("undecided: cost per scenario run: no shared scenario has a cost")
    assert "PASS" not in err


# --- point 2: a regression concentrated in one scenario ---------------------------------------------


def test_one_scenario_collapsing_among_steady_ones_is_worse(tmp_path, capsys):
    """20 scenarios x 10 runs, each steady one failing 1 run in 10 on both sides; scenario a falls
    from 10/10 to 3/10 with its must-check add_to_cart. Pooled, 181/200 → 174/200 is within chance
    and the old pooled family let it through (exit 0)."""
    def passed(side: int, s: int, i: int) -> bool:
        if s == 0:
            return side == 0 or i >= 7
        return i != (s + 3 * side) % ITERATIONS

    def runs(side: int) -> list:
        return [make_result(f"scenario {n}", iteration=i + 1, evals=[], passed=passed(side, s, i),
                            expects=[("call add_to_cart", "failed" if s == 0 and not passed(side, s, i) else "passed")])
                for s, n in enumerate("abcdefghijklmnopqrst") for i in range(ITERATIONS)]

    code, data, err = _gate(_args(tmp_path, runs(0), runs(1)), capsys)
    assert code == 1
    assert data["gate"]["outcome"] == "worse"
    failed = [m["label"] for m in data["gate"]["metrics"] if m["decision"] == "fail"]
    assert "completion of scenario 'scenario a'" in failed
    assert "check 'call add_to_cart' in scenario 'scenario a'" in failed
    assert data["verdict"].startswith("worse: ") and "10/10 → 3/10 (-70 pp" in data["verdict"]
    assert "FAIL completion of scenario 'scenario a': 10/10 → 3/10 runs" in err


# --- point 6: labels only for what the family found ------------------------------------------------


def _unchanged_pair(rng, k: int):
    from fabtest.compare.read import Experiment

    def one(exp_id: str) -> Experiment:
        exp = Experiment({"experiment": {"id": exp_id, "iterations": 5}, "summary": {}, "scenario_results": []})
        rows = []
        for s in range(5):
            for it in range(1, 6):
                counts = {f"c{j}": [int(rng.random() < 0.7), 1] for j in range(4)}
                ev_p = sum(p for p, _ in counts.values())
                rows.append((f"s{s}", f"s{s}", it, True, False, 3, None, ev_p, 4, None, counts, {}, None, True))
        exp.add_rows(rows)
        return exp

    return one(f"b{k}"), one(f"c{k}")


def test_an_unchanged_agent_is_not_called_regressed():
    """The issue: "Quality regressed" printed for some scenario in 30 of 40 comparisons of an
    unchanged agent. Labels now need the family; the raw 5-point rule still fires as often."""
    import random

    from fabtest.compare.compute import compare
    from fabtest.compare.gate import relabel

    rng = random.Random(28)
    raw = labelled = 0
    for k in range(40):
        c = compare(*_unchanged_pair(rng, k))
        raw += bool(c.quality_regressed)
        relabel(c)
        labelled += bool(c.quality_regressed)
        assert all(s.label == "changed, not significant" for s in c.changed_not_significant)
    assert raw >= 20 and labelled <= 2, (raw, labelled)


def test_a_scenario_whose_quality_collapses_keeps_its_label(tmp_path, capsys):
    bad = [("friendly", "failed"), ("concise", "passed")]
    cur = _runs(lambda s, i: bad if s == 0 else GOOD)
    code, data, _ = _gate(_args(tmp_path, _runs(GOOD), cur), capsys)
    assert code == 1
    assert [(s["name"], s["label"]) for s in data["quality_regressed"]] == [("scenario a", "regressed")]
    assert data["changed_not_significant"] == []
    out = (compare_main(_args(tmp_path, _runs(GOOD), cur)), capsys.readouterr().out)[1]
    assert "Quality regressed (significant in the gate's family) (1):" in out


# --- issue 30: a gate over 19,000+ single runs finishes --------------------------------------------


def test_the_gate_over_twenty_thousand_single_runs_finishes_and_its_hints_are_right():
    """At 19,000+ runs a p-value underflows to 0.0, which ``p or 1.0`` read as "nothing to test":
    the smallest attainable p became 1 and the hint search doubled the runs towards 10^9. A margin
    of 0.1 point keeps the metrics undecided, so the hints are computed."""
    from fabtest.compare.compute import compare
    from fabtest.compare.gate import GateOptions, evaluate
    from fabtest.compare.read import Experiment

    def one(exp_id: str) -> Experiment:
        exp = Experiment({"experiment": {"id": exp_id, "iterations": 1}, "summary": {}, "scenario_results": []})
        exp.add_rows((f"s{i}", f"s{i}", 1, i % 5 != 0, False, 3, None, int(i % 3 != 0), 1, None,
                      {"friendly": [int(i % 3 != 0), 1]}, {}, None, True) for i in range(20_000))
        return exp

    gate = evaluate(compare(one("a"), one("b")), GateOptions(fail_on_regression=True, margin=0.001))
    assert gate.outcome == "undecided"
    friendly = next(e for e in gate.entries if e.metric == "criterion:friendly")
    assert friendly.decision == "undecided" and friendly.p_min < 1e-300
    assert friendly.iterations_for_20pt == 1  # 20,000 runs detect 20 points at once


def test_the_html_comparison_opens_with_the_verdict(tmp_path, capsys):
    out = tmp_path / "cmp.html"
    failing = _runs(GOOD, passed=lambda s, i: s != 0 or i >= 7)
    assert compare_main(_args(tmp_path, _runs(GOOD), failing) + ["--html", str(out)]) == 1
    html = out.read_text()
    assert 'id="verdict"><b>Verdict: worse: ' in html and html.index('id="verdict"') < html.index("Metrics (shared")
    assert "95% intervals (Wilson)" in html
    capsys.readouterr()
