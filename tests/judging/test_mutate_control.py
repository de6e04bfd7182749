"""Issue 44, point 7: ``fabtest mutate`` counts only catches beyond the judge's own noise.

On main a criterion whose judge tossed a coin "caught" about half the mutants it saw (6 points of
score from noise in a measured case). Now the judged checks are asked again on the unmutated runs
(the control): a check that fails its own unchanged run is noisy, and its failures on mutants are
not catches. In process: a scripted judge, no agent, no network.
"""

from __future__ import annotations

import itertools

from fabtest.engine.judge import Judge
from fabtest.experiment.model import CheckRecord, ScenarioResult, TurnRecord
from fabtest.replay.mutation import discount_noise, mutation_table, plan_controls, plan_mutants, run_controls, run_mutants
from fabtest.replay.mutation_report import render_mutation_text
from fabtest.testing import FakeLLM

PRICE, COIN = "The reply states the total price", "The reply sparks joy"


def _runs() -> list[ScenarioResult]:
    checks = [CheckRecord(type="satisfy", mode="should", criterion=name, status="passed", turn=1,
                          data={"scope": "response"}) for name in (PRICE, COIN)]
    turns = [TurnRecord(number=1, user="book the loft",
                        agent="Booked the Loft for Friday evening. It fits 12 people. The total is 480 euros.")]
    return [ScenarioResult(id="example:3", name="Book", feature="Booking", passed=True, iteration=it, transcript=turns,
                           evaluations=[c.model_copy() for c in checks]) for it in (1, 2)]


def _judge() -> Judge:
    toss = itertools.cycle(["failed", "passed", "passed"])  # a coin: fails one ask in three, whatever it reads
    return Judge(FakeLLM().verdicts({PRICE: lambda call: "passed" if "480 euros" in call.subject else "failed",
                                     COIN: lambda call: next(toss)}))


def _scored(samples: int) -> dict:
    results = _runs()
    planned = plan_mutants(results, seed=0)
    judge = _judge()
    outcomes = run_mutants(planned, judge)
    controls = run_controls(plan_controls(planned), judge, samples)
    discount_noise(outcomes, controls)
    return mutation_table(outcomes, results, controls)


def test_a_coin_tossing_criterion_catches_nothing_once_the_control_sees_it_fail_unmutated() -> None:
    without = _scored(0)  # what main counted: the coin's failures are catches
    coin_row = next(r for r in without["checks"] if r["criterion"] == COIN)
    assert coin_row["caught"] > 0 and coin_row["status"] == "caught"
    table = _scored(2)
    control = table["control"]
    assert control["runs"] == 2 and control["samples"] == 2 and control["flipped"] >= 1
    assert [r["check"] for r in control["noisy"]] == [f"Book: should {COIN} (turn 1)"]
    coin_row = next(r for r in table["checks"] if r["criterion"] == COIN)
    assert coin_row["caught"] == 0 and coin_row["status"] == "noisy"
    price_row = next(r for r in table["checks"] if r["criterion"] == PRICE)
    assert price_row["caught"] > 0 and price_row["status"] == "caught"  # the real criterion keeps its catches
    assert table["overall"]["caught"] < without["overall"]["caught"]  # the noise no longer scores
    assert table["overall"]["caught"] == price_row["caught"]
    assert control["failures_not_counted"] > 0
    text = render_mutation_text(table, source="exp_x", path=None)
    assert "Control: the judge re-judged the 2 mutated run(s) unmutated, 2 time(s) each" in text
    assert f"  - Book: should {COIN} (turn 1) (failed " in text


def test_a_steady_judge_loses_no_catch_to_the_control() -> None:
    results = _runs()
    planned = plan_mutants(results, seed=0)
    judge = Judge(FakeLLM().verdicts({PRICE: lambda call: "passed" if "480 euros" in call.subject else "failed",
                                      COIN: "passed"}))
    outcomes = run_mutants(planned, judge)
    before = sum(o.caught for o in outcomes)
    controls = run_controls(plan_controls(planned), judge, 2)
    assert discount_noise(outcomes, controls) == set()
    assert sum(o.caught for o in outcomes) == before > 0
