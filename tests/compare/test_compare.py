import json

import pytest

from support.experiments import CRITERIA, TOPICS, make_doc, make_result
from fabtest.compare.compute import compare
from fabtest.compare.render import render_json, render_markdown, render_text
from fabtest.compare.gate import gate_failures, meets_min_completion, regressed
from fabtest.experiment.model import TopicRecord


def _docs():
    base = [
        make_result("stays_passing", turns=4),
        make_result("gets_fixed", passed=False, failure_type="max_turns", turns=8),
        make_result("breaks", turns=7),
        make_result("quality_drop", evals=[("friendly", "passed")] * 10),
        make_result("removed_one"),
    ]
    cur = [
        make_result("stays_passing", turns=3),
        make_result("gets_fixed", turns=5),
        make_result("breaks", passed=False, failure_type="max_turns", turns=10),
        make_result("quality_drop", evals=[("friendly", "passed")] * 8 + [("friendly", "failed")] * 2),
        make_result("added_one"),
    ]
    return make_doc("exp_base01", base, name="v1"), make_doc("exp_curr01", cur, name="v2")


def test_deltas_and_scenario_changes():
    base, cur = _docs()
    c = compare(base, cur)
    m = c.metric("completion_rate")  # over the 4 shared scenarios, not the whole experiments
    assert (m.baseline, m.current, m.delta, m.mark) == (0.75, 0.75, 0.0, "─")
    assert (m.baseline_counts, m.current_counts) == ((3, 4), (3, 4))
    turns = c.metric("avg_turns")
    assert turns.baseline == pytest.approx(5.5) and turns.current == pytest.approx(5.25)
    assert turns.delta == pytest.approx(-0.25) and turns.mark == "▲"  # fewer turns is better
    assert [o.name for o in c.added] == ["added_one"] and [o.name for o in c.removed] == ["removed_one"]
    whole = {w.name: (w.baseline, w.current) for w in c.whole}
    assert whole["completion_rate"] == (0.8, 0.8) and whole["total_scenarios"] == (5, 5)
    assert [s.name for s in c.newly_passing] == ["gets_fixed"]
    assert [s.name for s in c.newly_failing] == ["breaks"]
    assert c.newly_failing[0].failure_type == "max_turns"
    assert c.newly_failing[0].note == "was completing in 7 turns, now max_turns"
    assert [s.name for s in c.quality_regressed] == ["quality_drop"]
    assert c.quality_regressed[0].baseline == 1.0 and c.quality_regressed[0].current == pytest.approx(0.8)
    comp = c.comparability
    assert (comp.scenarios_shared, comp.scenarios_added, comp.scenarios_removed) == (4, 1, 1)
    assert comp.validity == "MEDIUM" and comp.topic_graph_identical and comp.criteria_identical
    assert c.variance is None
    text = render_text(c)
    assert "Newly failing (1):" in text and "breaks (was completing in 7 turns, now max_turns)" in text
    assert "Comparison validity: MEDIUM" in text
    assert "Newly passing (1)" in render_markdown(c)
    assert json.loads(render_json(c))["newly_failing"][0]["name"] == "breaks"


def test_identical_experiments_are_high_validity_and_not_regressed():
    base, _ = _docs()
    c = compare(base, base)
    assert c.comparability.validity == "HIGH"
    assert not regressed(c) and not c.newly_failing and not c.newly_passing
    assert all(m.mark == "─" for m in c.metrics)


def test_criterion_rename_and_rewording_are_flagged():
    base = make_doc("exp_b", [make_result("a")])
    renamed = {("warm" if k == "friendly" else k): v for k, v in CRITERIA.items()}
    cur = make_doc("exp_c", [make_result("a", criteria=renamed, evals=[("warm", "passed"), ("concise", "failed")])])
    assert base["experiment"]["criteria_hash"] != cur["experiment"]["criteria_hash"]
    c = compare(base, cur)
    assert c.comparability.criteria_added == ["warm"] and c.comparability.criteria_removed == ["friendly"]
    assert not c.comparability.criteria_identical and c.comparability.validity == "MEDIUM"
    reworded = make_doc("exp_d", [make_result("a", criteria={**CRITERIA, "concise": "Short"}, evals=[("friendly", "passed"), ("concise", "failed")])])
    c2 = compare(base, reworded)
    assert c2.comparability.criteria_modified == ["concise"]
    row = next(r for r in c2.criteria if r.name == "concise")
    assert row.status == "modified" and row.delta is None
    assert "modified (not compared)" in render_text(c2)
    friendly = next(r for r in c2.criteria if r.name == "friendly")
    assert friendly.status == "compared" and friendly.delta == 0.0


def test_low_validity_when_topic_graph_or_judge_differs():
    base = make_doc("exp_b", [make_result("a")])
    other_topics = TOPICS + [TopicRecord(name="booking", characteristic="books")]
    c = compare(base, make_doc("exp_c", [make_result("a", topics=other_topics)]))
    assert not c.comparability.topic_graph_identical and c.comparability.validity == "LOW"
    c = compare(base, make_doc("exp_c", [make_result("a")], judge_model="other-model"))
    assert not c.comparability.judge_identical and c.comparability.validity == "LOW"


def test_gates():
    base, cur = _docs()
    c = compare(base, cur)
    # one scenario flipping once is not evidence of a regression: the statistical gate passes
    assert c.newly_failing and not regressed(c)
    assert gate_failures(c) == [] and gate_failures(c, fail_on_regression=True) == []
    assert meets_min_completion(c, 0.75) and not meets_min_completion(c, 0.76)
    assert gate_failures(c, min_completion=0.9) == []  # 3 of 4 runs: no evidence of a rate below 90%
    assert "FAIL completion floor: 3/4 runs passed (75.0%), floor 100.0%" in gate_failures(c, min_completion=1.0)[0]
    assert not regressed(compare(cur, cur))


def test_variance_comparison_with_iterations():
    base = make_doc("exp_b", [make_result(n, iteration=i, passed=(n != "b" or i != 1)) for n in "abcd" for i in (1, 2, 3)], iterations=3)
    cur = make_doc("exp_c", [make_result(n, iteration=i, passed=n in "ab") for n in "abcd" for i in (1, 2, 3)], iterations=3)
    c = compare(base, cur)
    assert c.variance is not None
    comp = next(v for v in c.variance.metrics if v.name == "completion_rate")
    assert comp.baseline.runs == [0.75, 1.0, 1.0]
    assert comp.current.mean == 0.5 and comp.current.std == 0.0
    assert not comp.overlap and "Completion rate ranges (mean ± std) do not overlap" in c.variance.notes
    rates = {s.name: (s.baseline, s.current) for s in c.variance.scenario_pass_rates}
    assert rates["b"] == (pytest.approx(2 / 3), 1.0) and rates["c"] == (1.0, 0.0)
    assert {s.name for s in c.newly_failing} == {"c", "d"}
    assert {s.name for s in c.newly_passing} == {"b"}
    text = render_text(c)
    assert "Comparison (with variance)" in text and "± " in text and "do not overlap" in text


def test_lean_read_gives_the_same_comparison(tmp_path):
    from fabtest.experiment.export import write_document
    from fabtest.experiment.reader import read_document

    base, cur = _docs()
    write_document(base, tmp_path)
    write_document(cur, tmp_path)
    _, lean_b = read_document("exp_base01", tmp_path, lean=True)
    _, lean_c = read_document("exp_curr01", tmp_path, lean=True)
    assert lean_b.get("lean") is True and "transcript" not in lean_b["scenario_results"][0]
    _, full_b = read_document("exp_base01", tmp_path)
    _, full_c = read_document("exp_curr01", tmp_path)
    assert "lean" not in full_b and full_b["scenario_results"] == base["scenario_results"]
    def without_features(d):  # lean dicts carry no feature (read_experiment reads the added/removed entries for it)
        for o in (*d["added"], *d["removed"]):
            o["feature"] = None
        return d

    assert without_features(compare(lean_b, lean_c).to_dict()) == without_features(compare(full_b, full_c).to_dict())
    assert compare(full_b, full_c).to_dict() == compare(base, cur).to_dict()
    from fabtest.compare.read import read_experiment

    streamed = compare(read_experiment("exp_base01", tmp_path)[1], read_experiment("exp_curr01", tmp_path)[1])
    assert streamed.to_dict() == compare(base, cur).to_dict()
    assert streamed.added[0].feature == "Venue booking" and streamed.removed[0].feature == "Venue booking"
    # a file in another layout (pretty-printed by some other tool) falls back to a full parse
    other = tmp_path / "pretty.json"
    other.write_text(json.dumps(base, indent=2))
    _, doc = read_document(other, lean=True)
    assert doc["scenario_results"] == base["scenario_results"]


def test_labels_a_skimming_reader_can_trust():
    """Issue 22 point 5: hard criteria apart from the soft ones, Overall says what it counts, the
    criterion rows carry counts and p, added/removed scenarios named with feature and id."""
    from support.experiments import check

    def results(hard_status):
        out = []
        for i in range(4):
            r = make_result("booking", iteration=i + 1, evals=[("friendly", "passed")])
            r.expectations.append(check("no_pii", hard_status, mode="must"))
            out.append(r)
        return out

    base = make_doc("exp_b", results("passed") + [make_result("gone", feature="Refunds")], iterations=4)
    cur = make_doc("exp_c", results("failed") + [make_result("gone", feature="Cancellations")], iterations=4)
    c = compare(base, cur)
    assert {r.name: r.hard for r in c.criteria} == {"friendly": False, "no_pii": True}
    text = render_text(c)
    soft_part, hard_part = text.split("Hard Criteria (`must`")
    assert "no_pii" in hard_part.split("Checks")[0] and "no_pii" not in soft_part.split("By Criterion")[1]
    assert "friendly" in soft_part.split("By Criterion (soft `should`")[1]
    assert "Overall counts every soft check rating" in text
    assert "[4/4 → 0/4, p 0.0143; 95% CI 51-100% → 0-49%]" in hard_part  # counts, the p of the drop, the intervals
    # the two "gone" scenarios share a name: feature and id tell them apart
    assert f"- Refunds / gone [{c.removed[0].id}]" in text and f"- Cancellations / gone [{c.added[0].id}]" in text
    md = render_markdown(c)
    assert "### Hard criteria (`must`)" in md and "### By criterion (soft `should`)" in md


def test_fewer_topics_is_a_direction_not_an_improvement():
    """Issue 31: fewer topics was always drawn as better; reaching more of the topic graph may be the
    point, so the topics' change is marked ↑/↓ (no colour, no verdict) while fewer turns stays ▲."""
    from fabtest.report.html import render_comparison_html

    base = make_doc("exp_base01", [make_result("a", turns=3), make_result("b", turns=3)])
    cur = make_doc("exp_curr01", [make_result("a", turns=1), make_result("b", turns=1)])
    c = compare(base, cur)
    turns, topics = c.metric("avg_turns"), c.metric("avg_topics")
    assert topics.delta is not None and topics.delta < 0 and topics.mark == "↓"
    assert turns.delta < 0 and turns.mark == "▲"
    assert compare(cur, base).metric("avg_topics").mark == "↑"
    line = next(x for x in render_text(c).splitlines() if x.strip().startswith("Avg Topics:"))
    assert "↓" in line and "▲" not in line and "▼" not in line
    html = render_comparison_html(base, cur, c, [])
    assert "a change in topics is shown" in html and "Fewer turns and topics count as better" not in html


def test_the_two_evaluation_rates_of_a_comparison_are_told_apart():
    """Issue 31: a comparison page showed two different evaluation rates (ratings in the metrics,
    runs in the gate's line) with nothing saying why; both the text and the HTML now say what each counts."""
    from fabtest.report.html import render_comparison_html

    base, cur = _docs()
    c = compare(base, cur)
    assert "the gate's overall evaluation counts runs with every soft check passed" in " ".join(render_text(c).split())
    html = render_comparison_html(base, cur, c, [])
    assert "overall evaluation counts scenario runs with every soft check passed" in html.replace("&#x27;", "'")
