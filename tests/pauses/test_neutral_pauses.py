"""Pauses in the neutral form (issue 40 items 4, 7, 8): a Python agent returns ``AgentResponse(pauses=...)``,
the decision reaches it on the next user message, each pause is recorded on its turn with what the user
decided, and a scenario that ends with a pause undecided, or decides when nothing waits, fails in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import fabtest
from fabtest.agents.boundary import AgentDataError, coerce_response
from fabtest.config.settings import Settings
from fabtest.engine.pauses import NothingPending
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import ExpectationFailed
from fabtest.experiment.model import ScenarioResult, conversation_of, turn_records


class RefundDesk:
    """Asks before every refund; refunds on approval (with the approved or edited arguments)."""

    def __init__(self) -> None:
        self.seen: list[fabtest.Message] = []

    def chat(self, messages: list[fabtest.Message]) -> fabtest.AgentResponse:
        last = messages[-1]
        self.seen.append(last)
        for decision in last.decisions:
            asked = next(p for m in messages if m.role == "agent" for p in m.pauses if p.id == decision.pause_id)
            if decision.decision == "answered":
                return fabtest.AgentResponse(f"Noted: {decision.answer}.")
            if decision.approved:
                args = decision.arguments or asked.arguments
                return fabtest.AgentResponse("Refunded.", tool_calls=[fabtest.ToolCall("refund", args)])
            return fabtest.AgentResponse(f"No refund: {decision.reason}.")
        if "size" in last.content:
            return fabtest.AgentResponse("Which size?", pauses=[fabtest.Pause(question="Which size?")])
        if "refund" in last.content:
            return fabtest.AgentResponse("I need approval.", pauses=[
                fabtest.Pause(tool="refund", arguments={"order": "A1", "amount": 30})])
        return fabtest.AgentResponse("Hello.")


def _state(tmp_path: Path, agent: Any) -> ScenarioState:
    return ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                         where="f.feature:3", default_agent=agent)


def _json(state: ScenarioState) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in turn_records(state.conversation)]


def test_an_approval_reaches_the_agent_and_is_recorded_on_the_turn_that_asked(tmp_path: Path) -> None:
    agent = RefundDesk()
    state = _state(tmp_path, agent)
    state.user_says("refund my order")
    state.asked_approval("refund", "must", [fabtest_arg("order", "A1"), fabtest_arg("amount", ">= 20")])
    state.user_decides("approved", reason="receipt attached")
    [decision] = agent.seen[-1].decisions
    assert (decision.pause_id, decision.decision, decision.reason) == ("pause-1", "approved", "receipt attached")
    assert agent.seen[-1].content == "receipt attached"
    assert state.last_turn.tool_calls[0].name == "refund"
    state.finish()
    first, second = _json(state)
    assert first["pauses"] == [{"id": "pause-1", "kind": "approval", "tool": "refund",
                                "arguments": {"order": "A1", "amount": 30}, "question": None,
                                "decision": "approved", "reason": "receipt attached", "decided_in_turn": 2}]
    assert "pauses" not in second  # written only where the agent paused
    assert [c.type for c in state.conversation.expectations] == ["ask_approval"]


def test_reject_answer_and_edit_each_reach_the_agent(tmp_path: Path) -> None:
    agent = RefundDesk()
    state = _state(tmp_path, agent)
    state.user_says("refund my order")
    state.user_decides("rejected", reason="no receipt")
    assert state.last_turn.response.text == "No refund: no receipt."
    state.user_says("refund again")
    state.user_decides("edited", arguments={"amount": 20})
    assert state.last_turn.tool_calls[0].arguments == {"order": "A1", "amount": 20}
    state.user_says("what size?")
    state.user_decides("answered", answer="M")
    assert state.last_turn.response.text == "Noted: M."
    state.finish()
    decided = [p for t in _json(state) for p in t.get("pauses", [])]
    assert [(p["decision"], p.get("reason"), p.get("answer"), p.get("edited_arguments")) for p in decided] == [
        ("rejected", "no receipt", None, None), ("approved" if False else "edited", None, None,
                                                {"order": "A1", "amount": 20}),
        ("answered", None, "M", None)]
    assert "[asks approval of refund(order='A1', amount=30)]" in state.conversation.transcript()
    assert "[rejects: no receipt]" in state.conversation.transcript()


def test_a_record_read_back_gives_the_agent_the_same_pauses_and_decisions(tmp_path: Path) -> None:
    state = _state(tmp_path, RefundDesk())
    state.user_says("refund my order")
    state.user_decides("rejected", reason="no receipt")
    state.finish()
    result = ScenarioResult(id="example:000000000000", name="s", passed=True, turns=2,
                            transcript=turn_records(state.conversation))
    again = conversation_of(ScenarioResult.model_validate(json.loads(result.model_dump_json())))
    assert again.messages == state.conversation.messages


def test_a_scenario_ending_with_a_pause_undecided_fails_naming_it(tmp_path: Path) -> None:
    state = _state(tmp_path, RefundDesk())
    state.user_says("refund my order")
    with pytest.raises(ExpectationFailed) as failed:
        state.finish()
    assert str(failed.value) == ("Turn 1: the scenario ended with a pause unanswered: the pending approval of "
                                 "refund(order='A1', amount=30) (asked in turn 1): decide it with When the user "
                                 "approves / rejects with \"...\" / answers \"...\"")
    [check] = state.conversation.expectations
    assert (check.type, check.status) == ("pauses_decided", "failed")
    assert _json(state)[0]["pauses"][0]["decision"] == "unanswered"


def test_deciding_when_nothing_waits_says_what_the_agent_did(tmp_path: Path) -> None:
    state = _state(tmp_path, RefundDesk())
    with pytest.raises(NothingPending, match="nothing is pending: the agent has not answered yet"):
        state.user_decides("approved")
    state.user_says("hi")
    with pytest.raises(NothingPending, match=r"f.feature:3: When the user rejects: nothing is pending: the agent "
                                             r"asked for no approval in turn 1 \(it said 'Hello.'\)"):
        state.user_decides("rejected")
    state.user_says("what size?")
    with pytest.raises(NothingPending, match=r"is not an approval \(asks: Which size\?\): decide it with When the "
                                             r"user answers"):
        state.user_decides("approved")
    assert NothingPending.failure_type == "assertion"


def test_must_not_ask_for_approval_fails_when_the_agent_asked(tmp_path: Path) -> None:
    state = _state(tmp_path, RefundDesk())
    state.user_says("refund my order")
    with pytest.raises(ExpectationFailed, match="asked: refund"):
        state.asked_approval(None, "must", negated=True)
    with pytest.raises(ExpectationFailed, match="did not ask for approval of cancel; asked: refund"):
        state.asked_approval("cancel", "must")


@pytest.mark.parametrize(("pauses", "error"), [
    ("refund", "pauses: expected a list"),
    ([{"tool": "refund", "amount": 3}], "pauses[0]: unknown key 'amount'"),
    ([{"tool": 3}], "pauses[0].tool: expected a string, got int"),
    ([{"arguments": {}}], "pauses[0]: a question Pause needs its question"),
    ([{"tool": "a", "id": "x"}, {"tool": "b", "id": "x"}], "two pauses share the id 'x'"),
])
def test_bad_pauses_from_an_agent_are_one_line_naming_the_field(pauses: Any, error: str) -> None:
    with pytest.raises(AgentDataError) as failed:
        coerce_response({"text": "", "pauses": pauses})
    assert error in str(failed.value)


def fabtest_arg(name: str, value: str) -> Any:
    from fabtest.engine.checks import ArgExpectation

    return ArgExpectation.parse(name, value, where="t")


def test_an_approval_step_on_an_agent_that_cannot_pause_is_one_line(tmp_path: Path) -> None:
    from fabtest.agents.cli_agent import CliAgent
    from fabtest.errors import UsageError

    class Cli(CliAgent):
        def __init__(self) -> None:  # only the class matters: no process is started
            pass

        def chat(self, messages: Any, on_tool_call: Any = None) -> fabtest.AgentResponse:
            return fabtest.AgentResponse("done")

    state = _state(tmp_path, Cli())
    state.user_says("refund A1")
    with pytest.raises(UsageError, match=r"^f.feature:3: When the user approves: this agent cannot pause for a "
                                         r"decision \(a CLI agent answers each turn"):
        state.user_decides("approved")
    with pytest.raises(UsageError, match="ask for approval: this agent cannot pause"):
        state.asked_approval("refund", "must")


def test_the_view_and_the_diffs_show_each_pause_with_its_decision(tmp_path: Path) -> None:
    from fabtest.compare.render import _side_lines
    from fabtest.experiment.pauses import pause_line

    state = _state(tmp_path, RefundDesk())
    state.user_says("refund my order")
    state.user_decides("rejected", reason="no receipt")
    state.finish()
    turn = _json(state)[0]
    line = 'asked approval of refund {"amount": 30, "order": "A1"}: rejected (no receipt) in turn 2'
    assert pause_line(turn["pauses"][0]) == line
    assert _side_lines(turn, 200)[-1] == f"|| {line}"
    from fabtest.view.scenarios import conversation_parts

    entry = {"name": "s", "transcript": _json(state), "evaluations": {}, "expectations": {}}
    head = {"experiment": {"id": "exp_1"}}
    assert "rejected (no receipt) in turn 2" in "".join(map(str, conversation_parts(head, entry)))


def test_an_http_agent_pauses_and_gets_the_decision_in_the_documented_json(tmp_path: Path) -> None:
    import httpx

    from fabtest.agents.http import HttpAgent

    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if body["messages"][-1].get("decisions"):
            return httpx.Response(200, json={"text": "Not refunded."})
        return httpx.Response(200, json={"text": "I need approval.", "pauses": [
            {"id": "p1", "tool": "refund", "arguments": '{"order": "A1"}'}]})

    agent = HttpAgent("http://agent.test/chat")
    agent._client = httpx.Client(transport=httpx.MockTransport(handle))  # in-process, no socket
    state = _state(tmp_path, agent)
    state.user_says("refund A1")
    state.user_decides("rejected", reason="no receipt")
    assert bodies[1]["messages"][1:] == [
        {"role": "agent", "content": "I need approval.",
         "pauses": [{"id": "p1", "kind": "approval", "tool": "refund", "arguments": {"order": "A1"},
                     "question": None}]},
        {"role": "user", "content": "no receipt",
         "decisions": [{"pause_id": "p1", "decision": "rejected", "reason": "no receipt", "answer": None,
                        "arguments": None}]}]
    assert "pauses" not in bodies[0]["messages"][0] and state.last_turn.response.text == "Not refunded."


def test_messages_with_pauses_and_decisions_stay_hashable_and_comparable() -> None:
    asked = fabtest.Pause(tool="refund", arguments={"order": "A1"}, metadata={"framework": "x"})
    same = fabtest.Pause(tool="refund", arguments={"order": "A1"})  # metadata is not part of equality
    decided = fabtest.Decision("pause-1", "edited", arguments={"amount": 20})
    assert asked == same and hash(asked) == hash(same)
    assert len({fabtest.Message("agent", "x", pauses=(asked,)), fabtest.Message("agent", "x", pauses=(same,)),
                fabtest.Message("user", "", decisions=(decided,))}) == 2
