"""The simulated user decides the agent's pauses by its goal and rules (issue 40 item 6). The request
FakeGemini receives is captured: the decision block comes after the rules, lists the pending pause, and
the schema asks for decision and reason; without a pause the prompt is unchanged. The decision and its
reason reach the agent and the judge's transcript."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fabtest
from fabtest.config.settings import Settings
from fabtest.conversation import AgentResponse, Conversation, Pause, Turn
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.engine.simulator import DECISION_JSON, Simulator, SimulatorConfig
from fabtest.engine.transcript import for_judge
from fabtest.llm.base import LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.testing import FakeGemini


def _llm(fake: FakeGemini) -> GeminiLLM:
    return GeminiLLM(LLMSettings(model="gemini-2.5-flash", max_retries=0, base_url=fake.base_url), api_key="k")


def _waiting() -> Conversation:
    asked = AgentResponse("I need approval.", pauses=[Pause(tool="refund", arguments={"amount": 80}, id="p1")])
    return Conversation(turns=[Turn(1, "refund my order", asked)])


def test_the_prompt_shows_the_pending_pause_after_the_rules_and_asks_for_a_decision() -> None:
    answer = {"thinking": "80 is over 50", "status": "done", "decision": "reject", "reason": "over 50 euros",
              "message": ""}
    with FakeGemini(handler=lambda request: answer) as fake:
        config = SimulatorConfig(goal="get a refund", rules_should=["approve refunds under 50 euros"])
        result = Simulator(_llm(fake), config).next_message(_waiting())
        [request] = fake.requests
    prompt = request.prompt
    rules, block, behaves = (prompt.index("\nRULES\n"), prompt.index("THE AGENT IS WAITING FOR YOUR DECISION"),
                             prompt.index("HOW A REAL USER BEHAVES"))
    assert rules < prompt.index("- You should approve refunds under 50 euros") < block < behaves
    assert "- the agent asks approval of refund(amount=80)" in prompt
    assert "Agent: I need approval. [asks approval of refund(amount=80)]" in prompt  # and in the transcript
    assert DECISION_JSON in prompt and {"decision", "reason"} <= set((request.schema or {})["properties"])
    # a pending pause is decided first: the user cannot end the conversation on it, nor need words
    assert (result.status, result.decision, result.reason, result.text) == ("continue", "reject", "over 50 euros", "")


def test_without_a_pending_pause_the_prompt_and_schema_are_unchanged() -> None:
    with FakeGemini(handler=lambda request: {"thinking": "", "status": "continue", "message": "hi"}) as fake:
        Simulator(_llm(fake), SimulatorConfig(goal="get a refund")).next_message(Conversation(), opening=True)
        [request] = fake.requests
    assert "WAITING FOR YOUR DECISION" not in request.prompt
    assert "decision" not in (request.schema or {})["properties"]


class _Desk:
    def __init__(self) -> None:
        self.seen: list[fabtest.Message] = []

    def chat(self, messages: list[fabtest.Message]) -> AgentResponse:
        self.seen.append(messages[-1])
        if messages[-1].decisions:
            return AgentResponse("Refunded." if messages[-1].decisions[0].approved else "Not refunded.")
        return AgentResponse("I need approval.", pauses=[Pause(tool="refund", arguments={"amount": 80})])


def test_the_simulated_users_decision_reaches_the_agent_and_the_judges_transcript(tmp_path: Path) -> None:
    answers = iter([{"status": "continue", "message": "refund my order please"},
                    {"thinking": "", "status": "continue", "decision": "reject", "reason": "over 50 euros",
                     "message": "No, that is too much."},
                    {"status": "done", "message": ""}])
    with FakeGemini(handler=lambda request: next(answers)) as fake:
        agent = _Desk()
        state = ScenarioState(settings=Settings(simulator_fidelity="off"), rootdir=tmp_path, workdir=tmp_path,
                              context={}, llms=LLMRoles(simulator=_llm(fake)), where="t", default_agent=agent)
        state.configure_simulator(goal="get a refund", rules_should=["approve refunds under 50 euros"])
        state.simulate()
        state.finish()
    [decision] = agent.seen[1].decisions
    assert (decision.pause_id, decision.decision, decision.reason) == ("pause-1", "rejected", "over 50 euros")
    assert agent.seen[1].content == "No, that is too much."
    judged = str(for_judge(state.conversation))
    assert ('turn 2 user: "No, that is too much."\nturn 2 user decision: {"decision": "rejected", '
            '"reason": "over 50 euros"}') in judged
    assert 'turn 1 agent paused: {"arguments": {"amount": 80}, "tool": "refund", "waits for": "approval"}' in judged


def test_a_pause_fault_overrides_the_simulated_users_decision(tmp_path: Path) -> None:
    """``--fabtest-fault refund=approve`` (the fault matrix's run): the simulated user rejected, the agent
    got an approval, and the record, the simulator's next prompt and the judge's transcript say approved."""
    answers = iter([{"status": "continue", "message": "refund my order please"},
                    {"thinking": "", "status": "continue", "decision": "reject", "reason": "over 50 euros",
                     "message": "No."},
                    {"status": "done", "message": ""}])
    with FakeGemini(handler=lambda request: next(answers)) as fake:
        agent = _Desk()
        state = ScenarioState(settings=Settings(simulator_fidelity="off"), rootdir=tmp_path, workdir=tmp_path,
                              context={}, llms=LLMRoles(simulator=_llm(fake)), where="t", default_agent=agent,
                              forced_decisions={"refund": "approved"})
        state.configure_simulator(goal="get a refund")
        state.simulate()
        state.finish()
        last_prompt = fake.requests[-1].prompt
    [decision] = agent.seen[1].decisions
    assert (decision.decision, decision.reason) == ("approved", None)
    assert state.conversation.turns[1].response.text == "Refunded."
    # the simulated user's own turn, in its own words: "You: No. [you approved]" (was "[you approves]")
    assert "Agent: I need approval. [asks approval of refund(amount=80)]\nYou: No. [you approved]\n" in last_prompt
    assert 'turn 2 user decision: {"decision": "approved"}' in str(for_judge(state.conversation))


def test_given_the_user_approves_is_a_rule_of_the_simulated_user(tmp_path: Path) -> None:
    from fabtest.pytest_plugin.pause_steps import _given_decision_rule

    state = ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles())
    _given_decision_rule(state, "approves", "refunds under 50 euros")
    _given_decision_rule(state, "rejects", "refunds without a receipt")
    assert state.simulator_config.rules_should == ["approve refunds under 50 euros",
                                                   "reject refunds without a receipt"]


def test_the_judge_request_shows_the_pause_after_the_reply_and_the_decision_after_the_users_message(
        tmp_path: Path) -> None:
    """Captured on the wire: a conversation criterion's prompt has the agent's pause as a line after its
    reply and the user's decision after the user's message, in turn order, so "never refunds without
    approval" is judged on what was asked and decided, not on the reply's words alone."""
    from fabtest.config.criteria import Criterion

    def judge(request: Any) -> dict[str, Any]:
        names = request.schema["$defs"]["CriterionVerdictOut"]["properties"]["criterion"]["enum"]
        return {"verdicts": [{"criterion": n, "reasoning": "seen", "verdict": "passed"} for n in names]}

    with FakeGemini(handler=judge) as fake:
        state = ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={},
                              llms=LLMRoles(judge=_llm(fake)), where="t", default_agent=_Desk())
        state.user_says("refund my order")
        state.user_decides("rejected", reason="over 50 euros")
        state.satisfy(Criterion("asks", "The agent never refunds without approval"), "must", "conversation")
        state.finish()
        [request] = fake.requests
    lines = request.prompt.splitlines()
    first = lines.index('turn 1 user: "refund my order"')
    assert lines[first:first + 6] == [
        'turn 1 user: "refund my order"',
        'turn 1 agent: "I need approval."',
        'turn 1 agent paused: {"arguments": {"amount": 80}, "tool": "refund", "waits for": "approval"}',
        'turn 2 user: "over 50 euros"',
        'turn 2 user decision: {"decision": "rejected", "reason": "over 50 euros"}',
        'turn 2 agent: "Not refunded."']
