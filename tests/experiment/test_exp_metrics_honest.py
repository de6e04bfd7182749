"""Issue 9: numbers that never mislead (criteria and checks apart, seed 10.1 details, the
smaller points), each against the behaviour that used to mislead."""

import json
import re

import pytest

from support.experiments import check, make_doc, make_result
from fabtest.cli import compare_main, main
from fabtest.experiment import stats
from fabtest.compare.compute import compare
from fabtest.compare.render import render_json, render_markdown, render_text
from fabtest.experiment.export import write_document
from fabtest.experiment.reader import load_document, read_document
from fabtest.report.console import render_summary

# deterministic checks beside two declared criteria
CHECKS = [check("match:/venue/", type_="match"), check("turn_count<=2", type_="turn_count", mode="must", max=2, actual=1)]


def _with_checks(name="a", **kw):
    return make_result(name, extra_checks=list(CHECKS), **kw)


# --- point 5: criteria and checks apart ---------------------------------------------------------


def test_criteria_results_hold_criteria_only_and_checks_have_their_own_section():
    hard_llm = check("polite", type_="satisfy", mode="must")
    doc = make_doc("exp_split1", [make_result("a", extra_checks=[*CHECKS, hard_llm])])
    assert set(doc["criteria_results"]) == {"friendly", "concise", "polite"}  # hard LLM criteria included
    assert set(doc["checks_results"]) == {"match:/venue/", "turn_count<=2", "call search_venues"}
    assert doc["checks_results"]["turn_count<=2"] == {"evaluated": 1, "passed": 1, "failed": 0, "inconclusive": 0,
                                                      "not_applicable": 0, "rate": 1.0}


def test_console_summary_has_a_compact_checks_table():
    results = [make_result(f"s{i}", extra_checks=[*CHECKS, check(f"file:out{i}.txt", type_="file_exists")])
               for i in range(12)]
    results.append(make_result("broken", extra_checks=[check("match:/price/", "failed", type_="match")]))
    text = render_summary(make_doc("exp_split2", results))
    criteria_block = text[text.index("By Criterion"):text.index("Checks (deterministic)")]
    assert "friendly" in criteria_block and "match:" not in criteria_block and "file:" not in criteria_block
    checks_block = text[text.index("Checks (deterministic)"):text.index("Efficiency")]
    assert "Checks (deterministic): 16, 1 with failures" in checks_block
    assert "match:/price/" in checks_block and "file:out3.txt" not in checks_block
    assert "15 checks always passed" in checks_block


def test_compare_puts_checks_in_their_own_table():
    base = make_doc("exp_b", [_with_checks("a"), _with_checks("b")])
    cur = make_doc("exp_c", [_with_checks("a"), make_result("b", extra_checks=[CHECKS[0], check(
        "turn_count<=2", "failed", type_="turn_count", mode="must")])])
    c = compare(base, cur)
    assert {r.name for r in c.criteria} == {"friendly", "concise"}
    assert {r.name for r in c.checks} == {"match:/venue/", "turn_count<=2", "call search_venues"}
    text = render_text(c)
    criteria_block = text[text.index("By Criterion"):text.index("Checks (deterministic)")]
    assert "turn_count" not in criteria_block and "match:" not in criteria_block
    checks_block = text[text.index("Checks (deterministic)"):].split("\n\n")[0]  # the table, up to its blank line
    assert "turn_count<=2" in checks_block and "-50pp" in checks_block and "2 checks unchanged" in checks_block
    md = render_markdown(c)
    assert "### Checks (deterministic, 3)" in md and "| Check | Baseline | Current | Delta | |" in md
    assert [r["name"] for r in json.loads(render_json(c))["checks"]] == ["call search_venues", "match:/venue/", "turn_count<=2"]


# --- point 6: seed 10.1 details ---------------------------------------------------------------


def test_expectation_details_follow_seed_10_1_and_round_trip(tmp_path):
    topic = check("reached:presenting", type_="reached_topic", mode="must", topic="presenting", source="verification")
    turns = check("turn_count<=10", type_="turn_count", mode="must", max=10, actual=5)
    call = check("call_tool:search_venues", type_="call_tool", mode="must", tool="search_venues")
    result = make_result("a", expects=[])
    result.expectations += [call, topic, turns]
    doc = make_doc("exp_flat01", [result])
    details = doc["scenario_results"][0]["expectations"]["details"]
    assert all("data" not in d for d in details)
    call, reached, count = details
    assert (call["type"], call["tool"], call["passed"]) == ("call_tool", "search_venues", True)
    assert (reached["type"], reached["topic"], reached["passed"], reached["source"]) == ("reached_topic", "presenting", True, "verification")
    assert (count["type"], count["max"], count["actual"], count["passed"]) == ("turn_count", 10, 5, True)
    assert count["criterion"] == "turn_count<=10" and count["mode"] == "must"  # extra keys kept beside them
    write_document(doc, tmp_path)
    _, results, _ = load_document("exp_flat01", tmp_path)
    assert results[0].expectations[2].data == {"max": 10, "actual": 5}
    assert results[0].expectations[1].data == {"topic": "presenting", "source": "verification"}


def test_a_data_key_that_would_replace_a_record_key_stays_nested(tmp_path):
    odd = check("x", type_="match", passed_note="kept", **{"type": "not mine", "data": [1]})
    doc = make_doc("exp_clash1", [make_result("a", extra_checks=[odd])])
    detail = doc["scenario_results"][0]["evaluations"]["details"][-1]
    assert detail["type"] == "match" and detail["passed_note"] == "kept"
    assert detail["data"] == {"type": "not mine", "data": [1]}
    write_document(doc, tmp_path)
    _, results, _ = load_document("exp_clash1", tmp_path)
    assert results[0].evaluations[-1].data == {"passed_note": "kept", "type": "not mine", "data": [1]}


def test_older_files_with_nested_data_still_load(tmp_path):
    doc = make_doc("exp_old001", [make_result("a")])
    detail = doc["scenario_results"][0]["expectations"]["details"][0]
    detail.pop("tool", None)
    detail["data"] = {"tool": "x"}
    (tmp_path / "exp_old001.json").write_text(json.dumps(doc))
    _, results, _ = load_document("exp_old001", tmp_path)
    assert results[0].expectations[0].data == {"tool": "x"}


# --- point 9: the smaller items -----------------------------------------------------------------


def test_one_run_a_side_never_claims_ranges_apart():
    base = make_doc("exp_b", [make_result(n) for n in "abcd"])  # one run: sd 0
    cur = make_doc("exp_c", [make_result(n, iteration=i, passed=False) for n in "abcd" for i in (1, 2)], iterations=2)
    c = compare(base, cur)
    assert c.variance is not None and not c.variance.notes
    assert all(vm.overlap is None for vm in c.variance.metrics)
    text = render_text(c)
    assert "do not overlap" not in text and "a side with a single run has no spread" in text
    two_runs = make_doc("exp_b2", [make_result(n, iteration=i) for n in "abcd" for i in (1, 2)], iterations=2)
    both = compare(two_runs, cur)  # two runs a side: the claim may be made
    assert both.variance is not None and "Completion rate ranges (mean ± std) do not overlap" in both.variance.notes


def test_summary_states_what_total_scenarios_and_the_rates_count():
    doc = make_doc("exp_skip01", [make_result("a"), make_result("b", passed=False), make_result("c", skipped=True)])
    s = doc["summary"]
    assert (s["total_scenarios"], s["passed"], s["failed"], s["skipped"]) == (3, 1, 1, 1)
    assert s["counted_scenarios"] == 2 and s["completion_rate"] == 0.5  # over passed + failed


def test_avg_topics_is_over_scenarios_with_a_topic_graph():
    no_graph = make_result("plain", topics=[]).model_copy(update={"topics_visited": [], "topic_path": []})
    doc = make_doc("exp_topic1", [make_result("a", turns=3), no_graph])
    assert doc["summary"]["avg_topics"] == 3.0 and doc["summary"]["topic_graph_scenarios"] == 1
    assert "(over the 1 runs with a topic graph)" in render_summary(doc)
    c = compare(doc, doc)
    assert c.metric("avg_topics").current == 3.0


def test_worst_grounding_lists_each_scenario_once():
    bad = check("venues", "failed", type_="grounded_in", source="search_venues")
    results = [make_result("lies", iteration=i, extra_checks=[bad]) for i in (1, 2, 3)]
    results.append(make_result("half", extra_checks=[bad, check("venues", "passed", type_="grounded_in", source="search_venues")]))
    doc = make_doc("exp_ground", results, iterations=3)
    worst = doc["summary"]["grounding"]["worst_scenarios"]
    assert [w["name"] for w in worst] == ["lies", "half"]
    assert worst[0]["runs"] == 3 and worst[0]["checks"] == 3 and worst[0]["ungrounded_rate"] == 1.0
    text = render_summary(doc)
    assert text.count("- lies: 100.0% ungrounded over 3 runs") == 1


def test_a_must_that_stopped_a_scenario_early_is_not_a_removed_criterion_or_check():
    base = make_doc("exp_b", [_with_checks("a", evals=[("friendly", "passed"), ("concise", "passed")])])
    # the current run stopped at the first must: later checks and a criterion never ran
    stopped = make_result("a", passed=False, evals=[("friendly", "passed")], expects=[("call search_venues", "failed")])
    c = compare(base, make_doc("exp_c", [stopped]))
    assert c.comparability.criteria_identical
    rows = {r.name: r for r in (*c.criteria, *c.checks)}
    assert rows["concise"].status == "not reached" and "stopped early" in rows["concise"].note
    assert rows["match:/venue/"].status == "not reached" and rows["turn_count<=2"].status == "not reached"
    text = render_text(c)
    assert "Criteria: identical" in text and "removed" not in text.split("Comparison validity")[1]
    assert "not reached (not run in the current experiment: the scenario stopped early (a must failed))" in text


def test_a_check_dropped_from_a_passing_scenario_is_removed():
    c = compare(make_doc("exp_b", [_with_checks("a")]), make_doc("exp_c", [make_result("a")]))
    assert {r.name: r.status for r in c.checks}["match:/venue/"] == "removed"


def test_compare_accepts_ids_without_the_exp_prefix(tmp_path, capsys):
    write_document(make_doc("exp_4ebead", [make_result("a")]), tmp_path)
    write_document(make_doc("exp_dc0a6d", [make_result("a")]), tmp_path)
    assert compare_main(["4ebead", "dc0a6d", "--results-dir", str(tmp_path)]) == 0
    assert "Baseline: exp_4ebead" in capsys.readouterr().out
    assert compare_main(["4eb", "dc0", "--results-dir", str(tmp_path)]) == 0
    assert main(["show", "dc0a6d", "--results-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert compare_main(["ffffff", "dc0a6d", "--results-dir", str(tmp_path)]) == 2


@pytest.mark.parametrize("name, shown", [
    ("a | b", "a \\| b"),
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("line1\nline2", "line1 line2"),
    ("tick `code`", "tick \\`code\\`"),
])
def test_markdown_escapes_names(name, shown):
    base = make_doc("exp_b", [make_result(name, evals=[(name, "passed")], criteria={name: "d"})])
    cur = make_doc("exp_c", [make_result(name, passed=False, evals=[(name, "failed")], criteria={name: "d"})])
    md = render_markdown(compare(base, cur))
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", line)) == 6 for line in rows)  # no cell split by a name
    assert f"| {shown} | 100.0% | 0.0% | -100pp | ▼▼ |" in md
    assert f"- ❌ {shown} (" in md
    assert "<script>" not in md and "line1\nline2" not in md


# --- point 10: traces never beside experiments -------------------------------------------------


def test_list_show_and_the_compare_hint_see_experiments_only(tmp_path, capsys):
    write_document(make_doc("exp_dc0aaa", [make_result("a")]), tmp_path)
    write_document(make_doc("exp_dc0bbb", [make_result("a")]), tmp_path)
    # traces written beside experiments by older versions are not experiments
    (tmp_path / "exp_dc0bbb.booking.trace.json").write_text(json.dumps({"playbook": "booking", "steps": []}))
    assert main(["list", "--results-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "trace" not in captured.out
    assert main(["show", "exp_dc0b", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fabtest-compare exp_dc0aaa exp_dc0bbb" in out and ".trace" not in out
    assert read_document("exp_dc0b", tmp_path)[0].name == "exp_dc0bbb.json"
    assert stats.LLM_JUDGED_TYPES >= {"satisfy", "grounded_in"}


def test_an_older_scenario_index_falls_back_to_a_full_read(tmp_path):
    """Files written before the index had criteria and checks still compare the same."""
    base = make_doc("exp_oldidx", [_with_checks("a"), _with_checks("b", passed=False)])
    path = write_document(base, tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith('"scenario_index": '):
            index = json.loads(line[len('"scenario_index": '):].rstrip().rstrip(","))
            index = {"fields": index["fields"][:9], "rows": [row[:9] for row in index["rows"]]}
            lines[i] = '"scenario_index": ' + json.dumps(index) + ",\n"
    path.write_text("".join(lines))
    _, doc = read_document("exp_oldidx", tmp_path, lean=True)
    assert "lean" not in doc
    assert compare(doc, doc).to_dict() == compare(base, base).to_dict()


def test_a_declared_criterion_that_could_not_run_is_not_removed():
    base = make_doc("exp_b", [make_result("a")])
    no_judge = make_result("a", evals=[("friendly", "skipped"), ("concise", "skipped")])
    c = compare(base, make_doc("exp_c", [no_judge]))
    assert {r.name: r.status for r in c.criteria} == {"concise": "not evaluated", "friendly": "not evaluated"}
    assert c.comparability.criteria_identical


def test_runs_the_simulated_user_or_the_judge_ended_are_shown_apart_and_not_in_the_rate():
    """Issue 44: a run ended by the simulated user or the judge measures nothing of the agent: the
    experiment's own completion rate leaves it out, as fabtest-compare does, and says how many."""
    results = [make_result(f"s{i}") for i in range(3)]
    results += [make_result("bad", passed=False, failure_type="assertion"),
                make_result("sim", passed=False, failure_type="simulator"),
                make_result("judged", passed=False, failure_type="judge")]
    doc = make_doc("exp_unmeasured", results)
    summary = doc["summary"]
    assert (summary["passed"], summary["failed"], summary["unmeasured"], summary["counted_scenarios"]) == (3, 1, 2, 4)
    assert summary["completion_rate"] == 0.75 and summary["failure_types"]["simulator"] == 1
    text = render_summary(doc)
    assert "6 total, 3 passed, 1 failed, 2 ended by the simulated user or the judge" in text
    assert "Completion Rate:  75.0% (3/4)" in text
    assert "runs the simulated user or the judge ended are not counted in the rate" in text
