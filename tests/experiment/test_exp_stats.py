import math

import pytest

from support.experiments import check, make_result
from fabtest.experiment import stats


def test_completion_excludes_skipped_and_breaks_down_failures():
    results = [make_result("a"), make_result("b", passed=False, failure_type="max_turns"), make_result("c", passed=False, failure_type="error"), make_result("d", skipped=True)]
    comp = stats.completion(results)
    assert (comp["total"], comp["skipped"], comp["counted"], comp["passed"], comp["failed"]) == (4, 1, 3, 1, 2)
    assert comp["rate"] == pytest.approx(1 / 3)
    assert comp["failure_types"] == {"assertion": 0, "max_turns": 1, "timeout": 0, "error": 1}
    assert stats.completion([make_result("x", skipped=True)])["rate"] is None


def test_evaluation_rate_excludes_skipped_inconclusive_and_not_applicable():
    r = make_result("a", evals=[("f", "passed"), ("f", "failed"), ("f", "inconclusive"), ("f", "not_applicable"),
                                ("f", "not_applicable"), ("g", "skipped")], expects=[("e", "failed")])
    ev = stats.evaluation([r])
    assert (ev["evaluated"], ev["passed"], ev["inconclusive"], ev["skipped"], ev["rate"]) == (2, 1, 1, 1, 0.5)
    assert ev["not_applicable"] == 2  # counted apart (issue 27 point 5), never in the rate
    crit = stats.criteria_performance([r])
    assert set(crit) == {"f"}  # g only skipped: left out; e is a deterministic check (call_tool)
    assert crit["f"] == {"evaluated": 2, "passed": 1, "failed": 1, "inconclusive": 1, "not_applicable": 2, "rate": 0.5}
    assert stats.checks_performance([r])["e"]["rate"] == 0.0
    assert stats.skipped_checks([r]) == 1


def test_efficiency_and_backtracking():
    a = make_result("a", turns=2)
    b = make_result("b", turns=6).model_copy(update={"backtracked": True})
    eff = stats.efficiency([a, b, make_result("c", skipped=True)])
    assert eff["turns"] == {"mean": 4.0, "median": 4.0, "min": 2.0, "max": 6.0}
    assert eff["topics"]["max"] == 3.0
    assert eff["backtracking_rate"] == 0.5


def test_grounding_by_source_and_worst_scenarios():
    g1 = check("venues", "passed", type_="grounded_in", source="search_venues", claims_total=10, claims_unsupported=0)
    g2 = check("venues", "failed", type_="grounded_in", source="search_venues", claims_total=4, claims_unsupported=2)
    g3 = check("pricing", "failed", type_="grounded_in", source="get_price")
    out = stats.grounding([make_result("a", extra_checks=[g1]), make_result("b", extra_checks=[g2, g3])])
    assert out["by_source"]["search_venues"]["evaluated"] == 2
    assert out["by_source"]["search_venues"]["rate"] == 0.5
    assert out["by_source"]["search_venues"]["claim_rate"] == pytest.approx(1 - 2 / 14)
    assert out["by_source"]["get_price"]["claim_rate"] is None
    assert [s["name"] for s in out["worst_scenarios"]] == ["b"]
    assert out["worst_scenarios"][0]["ungrounded_rate"] == 1.0  # falls back to failed share


def test_tokens_per_role():
    assert stats.tokens([make_result("a"), make_result("b")]) == {"judge": {"calls": 4, "input_tokens": 600, "output_tokens": 80}}


def test_pass_at_k_estimators():
    assert stats.pass_at_k(5, 0, 5) == 0.0
    assert stats.pass_at_k(5, 1, 5) == 1.0
    assert stats.pass_at_k(4, 2, 2) == pytest.approx(1 - math.comb(2, 2) / math.comb(4, 2))
    assert stats.pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert stats.pass_hat_k(3, 3, 3) == 1.0


def test_run_rates_use_sample_std():
    results = [make_result("a", iteration=i, passed=p) for i, p in ((1, True), (2, False), (3, True))]
    rr = stats.run_rates(results)
    assert [r["completion_rate"] for r in rr["runs"]] == [1.0, 0.0, 1.0]
    assert rr["completion_rate"]["mean"] == pytest.approx(2 / 3)
    assert rr["completion_rate"]["std"] == pytest.approx(0.57735, abs=1e-5)
    assert rr["std_kind"] == "sample"
