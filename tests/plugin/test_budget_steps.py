"""The cost and latency steps (issue 22): recorded as deterministic checks, soft and hard.

No test here depends on how fast anything runs: a limit of 0 seconds fails every response and a
limit of an hour passes it; the cost comes from the token usage the agent reports."""

from __future__ import annotations

from fabtest.conversation import AgentResponse, TokenUsage, Turn
from fabtest.engine.budget import conversation_cost, cost_outcome, latency_outcome
from fabtest.experiment.cost import price_table

AGENT = '''
from fabtest import AgentResponse


def build(context):
    def reply(messages):
        # 100,000 input and 10,000 output tokens of gemini-2.5-flash: $0.03 + $0.025 = $0.055 a turn
        return AgentResponse(text="ok", metadata={"model": "gemini-2.5-flash",
                                                  "usage": {"input_tokens": 100000, "output_tokens": 10000}})

    return reply
'''

FEATURE = '''
Feature: Budgets
  Scenario: Within budget
    When the user says "hi"
    Then the conversation must cost less than $0.06
    And every response must take less than 3600 seconds
    And the response should take less than 3600 seconds

  Scenario: Soft budgets broken
    When the user says "hi"
    And the user says "again"
    Then the conversation should cost less than $0.10
    And every response should take less than 0 seconds
    And the response should take less than 0 seconds

  Scenario: Hard cost broken
    When the user says "hi"
    And the user says "again"
    Then the conversation must cost less than $0.10

  Scenario: Hard latency broken
    When the user says "hi"
    Then every response must take less than 0 seconds
'''


def test_cost_and_latency_steps_are_checks_in_both_forms(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/budget.feature", FEATURE)
    result = project.run("features")
    result.assert_outcomes(passed=2, failed=2)
    by_name = project.scenarios()

    within = by_name["Within budget"]
    [cost] = [d for d in within["expectations"]["details"] if d["type"] == "cost"]
    assert cost["status"] == "passed" and cost["criterion"] == "cost<$0.06" and abs(cost["usd"] - 0.055) < 1e-9
    assert [d["type"] for d in within["evaluations"]["details"]] == ["latency"]

    soft = by_name["Soft budgets broken"]
    assert soft["passed"] is True
    statuses = [(d["type"], d["status"], d["turn"]) for d in soft["evaluations"]["details"]]
    assert statuses == [("cost", "failed", None), ("latency", "failed", None), ("latency", "failed", 2)]
    assert "the conversation cost $0.110000 (not under $0.1)" in soft["evaluations"]["details"][0]["details"]

    hard = by_name["Hard cost broken"]
    assert hard["passed"] is False and hard["failure_type"] == "assertion"
    assert "expectation cost 'cost<$0.1' (must) failed" in hard["failure_message"]
    slow = by_name["Hard latency broken"]
    assert slow["passed"] is False and "1 response(s) took 0s or more (turn 1)" in slow["failure_message"]
    # deterministic checks, not criteria: counted under checks_results
    assert {"cost<$0.06", "latency<3600s", "latency<0s"} <= set(project.experiment()["checks_results"])


def test_unpriced_tokens_make_the_cost_unknown_not_zero():
    turns = [Turn(1, "hi", AgentResponse("ok", metadata={"model": "my-model", "usage": {"input_tokens": 10}}))]
    spent, unpriced = conversation_cost(turns, {"judge": TokenUsage(1, 100, 10)}, {"judge": "gemini-2.5-flash"},
                                        price_table())
    assert unpriced == ["agent model 'my-model'"] and spent == (100 * 0.30 + 10 * 2.50) / 1e6
    status, details, _ = cost_outcome(0.05, spent, unpriced)
    assert status == "inconclusive" and "[tool.fabtest.prices]" in details


def test_latency_names_the_slowest_turn():
    turns = [Turn(n, "u", AgentResponse("a"), duration_s=d) for n, d in ((1, 0.5), (2, 4.0), (3, 1.0))]
    status, details, data = latency_outcome(turns, 3.0)
    assert status == "failed" and "turn 2, 4.00s" in details and data["slowest_turn"] == 2
    assert latency_outcome(turns[:1], 3.0)[0] == "passed"
