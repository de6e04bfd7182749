"""Trajectory steps: the order, count and set of tool calls, per turn and per conversation.

The agent calls the tools the user message names, in that order, so each scenario decides the
trajectory it checks; every check is recorded with its scope and what it saw.
"""

from __future__ import annotations

from fabtest.conversation import ToolCall
from fabtest.engine import trajectory

AGENT = '''
from fabtest import AgentResponse, ToolCall

TOOLS = ["lookup_account", "list_plans", "change_plan"]


class Bot:
    def chat(self, messages, on_tool_call=None):
        words = messages[-1].content.split()
        return AgentResponse(text="done", tool_calls=[ToolCall(w, {}) for w in words if w in TOOLS])

    def metadata(self):
        return {"tools": TOOLS}


def build(context):
    return Bot()
'''

FEATURE = '''
Feature: Trajectories
  Scenario: Policy kept
    When the user says "lookup_account list_plans change_plan"
    Then the agent must call "lookup_account" before "change_plan"
    And the agent must call the tools in order:
      | tool           |
      | lookup_account |
      | change_plan    |
    And the agent must call the tools in exact order:
      | tool           |
      | lookup_account |
      | list_plans     |
      | change_plan    |
    And the agent must call the tools in any order:
      | tool           |
      | change_plan    |
      | lookup_account |
    And the agent must call "change_plan" at most 1 time
    And the agent must only call tools from: "lookup_account, list_plans, change_plan"

  Scenario: Changed the plan first
    When the user says "change_plan lookup_account"
    Then the agent should call "lookup_account" before "change_plan"
    And the agent should call the tools in order:
      | tool           |
      | lookup_account |
      | change_plan    |
    And the agent should call the tools in exact order:
      | tool           |
      | change_plan    |
    And the agent should call the tools in any order:
      | tool        |
      | list_plans  |
    And the agent should only call tools from: "lookup_account"
    And the agent must call "lookup_account" before "change_plan"

  Scenario: Per conversation
    When the user says "lookup_account"
    And the user says "change_plan"
    And the user says "change_plan"
    Then the agent must call "change_plan" exactly 1 time
    And the conversation must call "lookup_account" before "change_plan"
    And the conversation should call "change_plan" at most 1 time
    And the conversation must call "change_plan" at least 2 times

  Scenario: Misspelt tool in a trajectory
    When the user says "lookup_account"
    Then the conversation must call "lookup_acount" before "change_plan"

  Scenario: Misspelt tool in a table
    When the user says "lookup_account"
    Then the agent must call the tools in any order:
      | tool        |
      | chnage_plan |
'''


def test_trajectory_checks_are_recorded_per_turn_and_conversation(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/t.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm")
    result.assert_outcomes(passed=2, failed=3)
    by_name = project.scenarios()

    kept = by_name["Policy kept"]["expectations"]["details"]
    assert [c["type"] for c in kept] == ["call_order", "tool_sequence", "tool_sequence", "tool_sequence",
                                        "call_count", "only_tools"]
    assert all(c["status"] == "passed" and c["turn"] == 1 and c["scope"] == "turn" for c in kept)
    assert (kept[2]["tools"], kept[2]["match"]) == (["lookup_account", "list_plans", "change_plan"], "exact")

    broken = by_name["Changed the plan first"]
    soft = {c["criterion"]: c for c in broken["evaluations"]["details"]}
    assert [c["status"] for c in broken["evaluations"]["details"]] == ["failed"] * 5
    assert "called change_plan (call 1) before lookup_account (call 2)" in soft["call_order:lookup_account<change_plan"]["details"]
    assert "missing change_plan after lookup_account" in soft["tool_sequence:in order:lookup_account,change_plan"]["details"]
    assert "did not call list_plans" in soft["tool_sequence:any order:list_plans"]["details"]
    assert "called change_plan, outside lookup_account" in soft["only_tools:lookup_account"]["details"]
    assert broken["failure_type"] == "assertion" and "call_order" in broken["failure_message"]

    conversation = by_name["Per conversation"]
    assert conversation["passed"] is True
    checks = conversation["expectations"]["details"] + conversation["evaluations"]["details"]
    count = {c["criterion"]: c for c in checks}
    assert count["call_count:change_plan==1"]["turn"] == 3 and count["call_count:change_plan==1"]["scope"] == "turn"
    assert count["call_count:change_plan<=1"]["status"] == "failed"
    assert count["call_count:change_plan<=1"]["details"] == "called change_plan 2 times (at most 1)"
    assert count["call_order:lookup_account<change_plan"]["turn"] is None
    assert count["call_order:lookup_account<change_plan"]["scope"] == "conversation"

    for name, needle, hint in (("Misspelt tool in a trajectory", "lookup_acount", "lookup_account"),
                               ("Misspelt tool in a table", "Then the agent must call the tools in any order", "change_plan")):
        message = by_name[name]["failure_message"]
        where = f"features/t.feature:{project.line_of(FEATURE, needle)}"
        assert message.startswith(f"{where}: unknown tool") and f'did you mean "{hint}"?' in message, message
        assert by_name[name]["failure_type"] == "error"


def _calls(*names: str) -> list[ToolCall]:
    return [ToolCall(n) for n in names]


def test_sequence_modes_follow_adk() -> None:
    calls = _calls("a", "x", "b", "a")
    assert trajectory.check_sequence(calls, ["a", "b"], "in order")[0]
    assert not trajectory.check_sequence(calls, ["b", "x"], "in order")[0]
    assert not trajectory.check_sequence(calls, ["a", "x", "b"], "exact")[0]
    assert trajectory.check_sequence(calls, ["a", "x", "b", "a"], "exact")[0]
    assert trajectory.check_sequence(calls, ["b", "a", "a"], "any order")[0]
    assert not trajectory.check_sequence(calls, ["b", "b"], "any order")[0]  # listed twice: called twice
    assert trajectory.check_only([], ["a"])[0]  # no calls break no allow-list


def test_recorded_data_is_enough_to_check_again() -> None:
    """Replay re-runs a trajectory check from its recorded data on a new conversation."""
    data: dict[str, object] = {"tools": ["a", "b"], "match": "in order"}
    assert trajectory.evaluate("tool_sequence", data, _calls("a", "b")) == (True, "called a -> b in order: a -> b")
    assert trajectory.evaluate("tool_sequence", data, _calls("b", "a"))[0] is False  # type: ignore[index]
    assert trajectory.evaluate("call_count", {"tools": ["a"], "bound": "at most", "limit": 1}, _calls("a", "a")) \
        == (False, "called a 2 times (at most 1)")
    assert trajectory.evaluate("match", {"tools": ["a"]}, []) is None


def test_replay_rechecks_a_trajectory_on_the_replayed_conversation() -> None:
    """A recorded check that passed is failed again when the replayed agent changed its order."""
    from fabtest.conversation import AgentResponse, Conversation, Turn
    from fabtest.experiment.model import CheckRecord
    from fabtest.replay.recorded_checks import _run_deterministic

    replayed = Conversation(turns=[Turn(1, "hi", AgentResponse("ok", _calls("change_plan", "lookup_account")))])
    per_turn = CheckRecord(type="call_order", mode="must", criterion="call_order:lookup_account<change_plan",
                           status="passed", passed=True, turn=1,
                           data={"scope": "turn", "tools": ["lookup_account", "change_plan"]})
    _run_deterministic(per_turn, replayed)
    assert (per_turn.status, per_turn.data["replay"]) == ("failed", "rechecked")
    assert "called change_plan (call 1) before lookup_account (call 2)" in per_turn.details
    whole = CheckRecord(type="call_count", mode="should", criterion="call_count:change_plan<=1", status="failed",
                        passed=False, data={"scope": "conversation", "tools": ["change_plan"], "bound": "at most",
                                            "limit": 1})
    _run_deterministic(whole, replayed)
    assert whole.status == "passed" and whole.details == "called change_plan 1 time (at most 1)"
