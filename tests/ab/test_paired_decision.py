"""The A/B decision (compare/paired.py) and its rounds loop (ab/rounds.py), in process and seeded."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from pathlib import Path

from fabtest.ab.rounds import DECIDED, EXCEEDED, run_rounds
from fabtest.compare.paired import Bet, Run, decide_paired


def _runs(rates: dict[str, float], iterations: range, rng: random.Random, criterion: float | None = None) -> list[Run]:
    out = []
    for it in iterations:
        for sid, rate in rates.items():
            crit = {"polite": rng.random() < criterion} if criterion is not None else {}
            out.append(Run(sid, it, rng.random() < rate, all(crit.values()) if crit else None, crit))
    return out


def _loop(base: dict[str, float], cur: dict[str, float], seed: int, budget: float = 240.0,
          criterion: tuple[float, float] | None = None) -> tuple[str, str, int]:
    rng = random.Random(seed)
    b: list[Run] = []
    c: list[Run] = []

    def run_round(scenarios: Sequence[str] | None, iterations: range) -> float:
        pick = list(scenarios or base)
        b.extend(_runs({s: base[s] for s in pick}, iterations, rng, criterion and criterion[0]))
        c.extend(_runs({s: cur[s] for s in pick}, iterations, rng, criterion and criterion[1]))
        return 2.0 * len(pick) * len(iterations)

    result = run_rounds(run_round, lambda plan: decide_paired(b, c, plan=plan), lambda s: 2.0 * len(s or base),
                        iterations=5, budget=budget)
    return result.decision.outcome, result.stopped, len(b) + len(c)


def test_a_bet_that_only_loses_never_bets_and_an_even_one_bets_little() -> None:
    bet = Bet(0.9, {-1.0: 0.5, 0.0: 3.0, 1.0: 0.5})
    assert bet.stake() == 0.0  # the prior's mean is 0: nothing to gain
    bet.add([1.0, 1.0, 0.0, 1.0])
    assert 0 < bet.stake() <= 0.9
    bet.add([-1.0] * 20)
    assert bet.stake() == 0.0 and bet.log_wealth < bet.peak


def test_an_identical_agent_is_not_worse_and_a_collapse_is_worse() -> None:
    same = [Run(f"s{s}", it, True, True, {"polite": True}) for s in range(8) for it in range(1, 9)]
    decision = decide_paired(same, same)
    assert decision.outcome == "not worse"
    assert {m.metric for m in decision.metrics if m.pooled} == {"completion", "evaluation", "criterion:polite"}
    collapsed = [Run(r.scenario, r.iteration, r.scenario != "s0" or r.iteration % 4 == 0, True, {"polite": True})
                 for r in same] + [Run("s0", it, it % 4 == 0, True, {"polite": True}) for it in range(9, 21)]
    base = same + [Run("s0", it, True, True, {"polite": True}) for it in range(9, 21)]
    worse = decide_paired(base, collapsed)
    assert worse.outcome == "worse"
    assert any(m.metric == "scenario:s0:completion" and m.outcome == "worse" for m in worse.metrics)


def test_untested_is_never_not_worse() -> None:
    base = [Run("s0", it, True, True, {"polite": True}) for it in range(1, 61)]
    outage = [Run("s0", it, True, None, {}) for it in range(1, 61)]  # the judge rated nothing now
    decision = decide_paired(base, outage)
    assert decision.outcome == "undecided"
    assert [m.metric for m in decision.undecided()] == ["evaluation", "criterion:polite"]
    assert decide_paired(base, base, problems=["a damaged index"]).outcome == "undecided"
    assert decide_paired(base, []).outcome == "undecided"


def test_an_incomplete_iteration_is_left_out_of_a_pooled_metric() -> None:
    base = [Run(s, 1, True) for s in ("a", "b")] + [Run("a", 2, True)]
    decision = decide_paired(base, base)
    completion = next(m for m in decision.metrics if m.metric == "completion")
    assert completion.baseline == [2, 2]  # iteration 2 lacks b: not a batch of the pooled metric
    assert next(m for m in decision.metrics if m.metric == "scenario:a:completion").baseline == [2, 2]


def test_the_loop_buys_only_what_undecided_metrics_need_and_keeps_its_budget() -> None:
    outcome, stopped, runs = _loop({f"s{i}": 1.0 for i in range(8)}, {f"s{i}": 1.0 for i in range(8)}, 1)
    assert (outcome, stopped) == ("not worse", DECIDED) and runs <= 160  # early looks spend little alpha
    outcome, stopped, runs = _loop({f"s{i}": 0.95 for i in range(8)}, {f"s{i}": 0.95 for i in range(8)}, 2, budget=16)
    assert stopped in (DECIDED, EXCEEDED) or stopped.startswith("the budget cannot decide")
    assert runs <= 80 + 16


def test_error_rates_hold_over_seeded_loops() -> None:
    """An unchanged agent is rarely worse, one worse by more than the margin rarely not worse, and a
    criterion 90 % -> 60 % is worse and never not worse."""
    rates = {f"s{i}": 0.5 + 0.05 * i for i in range(8)}
    unchanged = [_loop(rates, rates, seed)[0] for seed in range(12)]
    assert unchanged.count("worse") <= 2
    lower = {sid: rate - 0.15 for sid, rate in rates.items()}
    assert [_loop(rates, lower, 50 + seed)[0] for seed in range(20)].count("not worse") <= 2
    steady = {f"s{i}": 0.97 for i in range(8)}
    dropped = [_loop(steady, steady, 100 + seed, criterion=(0.9, 0.6))[0] for seed in range(12)]
    assert dropped.count("worse") >= 10 and "not worse" not in dropped


def test_futility_stops_an_unchanged_mid_rate_agent_early() -> None:
    rates = {f"s{i}": 0.6 for i in range(8)}
    outcome, stopped, runs = _loop(rates, rates, 7)
    assert outcome == "undecided" and stopped.startswith("the budget cannot decide: completion cannot be shown "
                                                         "within 10 points by the 160 paired runs the plan allows")
    assert runs < 320
    assert math.isfinite(runs)


def test_the_verdict_line_and_markdown_say_what_decided() -> None:
    from fabtest.compare.paired_text import combined_line, paired_markdown, paired_verdict

    same = [Run(f"s{s}", it, True) for s in range(4) for it in range(1, 13)]
    assert paired_verdict(decide_paired(same, same), "every metric decided").startswith(
        "not worse: every pooled metric shown within 10 points and no scenario worse (1 pooled metric(s), 48 paired")
    failing = [Run(r.scenario, r.iteration, r.scenario != "s0") for r in same]
    worse = decide_paired(same, failing)
    assert paired_verdict(worse, "x") == ("worse: completion 48/48 → 36/48 paired runs; completion of scenario 's0' "
                                         "12/12 → 0/12 paired runs")
    table = "\n".join(paired_markdown(worse, "every metric decided", 1, str))
    assert "### A/B decision: ❌ worse (exit 1)" in table and "| completion of scenario 's0' |" in table
    assert combined_line(worse).startswith("WORSE every metric together")
    undecided = decide_paired(same[:8], same[:8])
    assert paired_verdict(undecided, "the budget cannot decide").startswith(
        "undecided: completion not shown within 10 points (the budget cannot decide)")
    assert paired_verdict(undecided, "x", "Cart: 2/10 runs fail now (was 0/10)").startswith(
        "undecided: Cart: 2/10 runs fail now (was 0/10); completion not shown")


def test_free_runs_stop_after_the_most_rounds() -> None:
    def run_round(scenarios: Sequence[str] | None, iterations: range) -> float:
        return 0.0

    from fabtest.compare.paired import PairedDecision, Plan

    open_ = decide_paired([Run("s", 1, True)], [Run("s", 1, True)])
    assert open_.outcome == "undecided"
    looks: list[PairedDecision] = []

    def look(plan: Plan) -> PairedDecision:
        looks.append(open_)
        open_.metrics[0].not_worse.pairs = 0  # type: ignore[union-attr]  # nothing seen: never futile
        open_.metrics[0].not_worse.fractions.clear()  # type: ignore[union-attr]
        return open_

    result = run_rounds(run_round, look, lambda s: 0.0, iterations=1, budget=5.0, max_rounds=4)
    assert result.stopped == "4 rounds without a decision" and result.rounds == 4


def test_a_drop_shown_only_together_names_the_metrics_behind_it() -> None:
    from fabtest.compare.paired_text import paired_verdict

    base = [Run(s, i, True) for s in ("a", "b") for i in range(1, 8)]
    decision = decide_paired(base, [Run(r.scenario, r.iteration, r.scenario == "a") for r in base])
    assert decision.outcome == "worse" and not any(m.outcome == "worse" for m in decision.metrics)
    assert paired_verdict(decision, "x").endswith(
        "most of all completion 14/14 → 7/14 paired runs; completion of scenario 'b' 7/7 → 0/7 paired runs")


def test_an_arm_puts_its_own_source_first(tmp_path: Path) -> None:
    from fabtest.ab.arms import Arm, ArmSpec

    (tmp_path / "src").mkdir()
    arm = Arm(ArmSpec("baseline", "main", env={"SHOP_MODEL": "small"}), tmp_path, "abc", False)
    env = arm.environment({"PYTHONPATH": os.pathsep.join(["/elsewhere/src", ""]), "SHOP_MODEL": "big"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "src"), str(tmp_path), "/elsewhere/src"]
    assert env["SHOP_MODEL"] == "small"
    assert arm.record() == {"arm": "baseline", "ref": "main", "commit": "abc", "dirty": False, "env": ["SHOP_MODEL"]}


def test_a_run_whose_simulated_user_failed_is_no_run_of_the_agent() -> None:
    from fabtest.ab.session import _runs_of_entries

    entries = [{"id": "s", "name": "S", "iteration": 1, "passed": True, "nodeid": "f.feature::test_s[iter1]"},
               {"id": "s", "name": "S", "iteration": 2, "passed": False, "simulation": {"valid": False}},
               {"id": "s", "name": "S", "iteration": 3, "passed": False, "skipped": True}]
    runs, names, nodeids = _runs_of_entries(entries)
    assert [(r.iteration, r.passed) for r in runs] == [(1, True)]
    assert names == {"s": "S"} and nodeids == {"s": "f.feature::test_s"}


def test_a_collapse_the_pooled_margin_would_hide_holds_not_worse_back() -> None:
    """One scenario failing 6 of 20 runs now (all passed before) drops pooled completion by under 4
    points, within the margin; its own worse evidence (20.6) is short of the family's 200 but
    stands at SUSPECT or more, so "not worse" waits and its runs are bought."""
    from fabtest.compare.paired_text import paired_verdict

    base = [Run(f"s{s}", it, True) for s in range(8) for it in range(1, 21)]

    def current(fails: int) -> list[Run]:
        return [Run(f"s{s}", it, not (s == 0 and it <= fails)) for s in range(8) for it in range(1, 21)]

    assert decide_paired(base, current(5)).outcome == "not worse"
    held = decide_paired(base, current(6))
    assert (held.outcome, held.held, held.rerun) == ("undecided", ["scenario:s0:completion"], ["s0"])
    assert paired_verdict(held, "x").startswith("undecided: completion of scenario 's0' 20/20 → 14/20 paired runs "
                                                "falls (worse e-value 20.6, needs 200 to decide); every pooled metric is within 10 points, but not worse "
                                                "waits for this (x)")
    assert decide_paired(base, current(8)).outcome == "worse"
