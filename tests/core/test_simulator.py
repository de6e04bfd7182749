"""The simulated user: prompt, retries on empty or agent-voiced replies, inheritance, stop conditions."""

from __future__ import annotations

import pytest

from fabtest.conversation import AgentResponse, Conversation, ToolCall, Turn
from fabtest.llm.base import LLMBadOutput, LLMNotConfigured
from fabtest.engine.simulator import Simulator, SimulatorConfig, UserAnswer
from fabtest.engine.topics import TopicGraph

from .fake_llm import FakeLLM

CONFIG = SimulatorConfig(
    goal="Book a room for 10 people in Berlin",
    persona="A busy office manager",
    facts={"date": "12 March", "city": "Berlin"},
    rules_should=["answer in one sentence"],
    rules_should_not=["mention a budget unless asked"],
)


def _msg(text: str, done: bool = False) -> dict:
    return {"message": text, "goal_complete": done}


def _conv() -> Conversation:
    conv = Conversation()
    conv.turns.append(Turn(1, "Hi, I need a room", AgentResponse("Happy to help. For how many people?")))
    return conv


def test_prompt_has_goal_persona_facts_rules_and_user_side_transcript() -> None:
    llm = FakeLLM([_msg("For 10 people, please.")])
    result = Simulator(llm, CONFIG).next_message(_conv())
    assert result.text == "For 10 people, please." and not result.goal_complete
    assert result.usage.calls == 1 and result.attempts == 1
    call = llm.calls[0]
    assert call.schema is UserAnswer and "USER" in (call.system or "")
    for text in (
        "Book a room for 10 people in Berlin",
        "A busy office manager",
        "- date: 12 March",
        "You should answer in one sentence",
        "You should not mention a budget unless asked",
        "You: Hi, I need a room",
        "Agent: Happy to help. For how many people?",
    ):
        assert text in call.prompt


def test_opening_message_prompt() -> None:
    llm = FakeLLM([_msg("Hello")])
    Simulator(llm, CONFIG).next_message(Conversation())
    assert "opening message" in llm.prompts[0]


def test_user_prefix_and_quotes_stripped_goal_complete_kept() -> None:
    llm = FakeLLM([_msg('User: "Thanks, that is all!"', done=True)])
    result = Simulator(llm, CONFIG).next_message(_conv())
    assert result.text == "Thanks, that is all!" and result.goal_complete


def test_empty_then_good_reply_is_retried() -> None:
    llm = FakeLLM([_msg("   "), _msg("10 people.")])
    result = Simulator(llm, CONFIG).next_message(_conv())
    assert result.text == "10 people." and result.attempts == 2 and result.usage.calls == 2
    assert "empty" in llm.prompts[1]


def test_empty_three_times_raises() -> None:
    llm = FakeLLM([_msg(""), _msg("User:"), _msg("  ")])
    with pytest.raises(LLMBadOutput, match="simulator returned an empty message 3 times"):
        Simulator(llm, CONFIG).next_message(_conv())
    assert len(llm.calls) == 3


@pytest.mark.parametrize("reply", ["Agent: How many people?", "Assistant: Sure!", "AI: ok", "**Assistant:** hi"])
def test_role_inverted_reply_is_retried(reply: str) -> None:
    llm = FakeLLM([_msg(reply), _msg("Ten people.")])
    assert Simulator(llm, CONFIG).next_message(_conv()).text == "Ten people."
    assert "written as the agent" in llm.prompts[1]


def test_role_inverted_three_times_raises() -> None:
    llm = FakeLLM([_msg("Agent: hi")] * 3)
    with pytest.raises(LLMBadOutput, match="replied as the agent instead of the user 3 times"):
        Simulator(llm, CONFIG).next_message(_conv())


def test_mixed_problems_raise_with_all_reasons() -> None:
    llm = FakeLLM([_msg(""), _msg("Agent: hi"), _msg("")])
    with pytest.raises(LLMBadOutput, match="no usable user message in 3 attempts"):
        Simulator(llm, CONFIG).next_message(_conv())


def test_no_llm_means_not_configured() -> None:
    with pytest.raises(LLMNotConfigured):
        Simulator(None, CONFIG).next_message(_conv())


# --- configuration inheritance -------------------------------------------------------------


def test_merge_accumulates_rules_and_facts_child_fact_wins() -> None:
    parent = SimulatorConfig(
        goal="G1", persona="P1", facts={"city": "Berlin", "size": "10"}, rules_should=["be brief"],
        rules_should_not=["swear"], max_turns=10, stop_on_tool="book_venue",
    )
    child = SimulatorConfig(facts={"city": "Hamburg"}, rules_should=["be polite", "be brief"], rules_should_not=["lie"])
    merged = parent.merge(child)
    assert merged.goal == "G1" and merged.persona == "P1"
    assert merged.facts == {"city": "Hamburg", "size": "10"}
    assert merged.rules_should == ["be brief", "be polite"]
    assert merged.rules_should_not == ["swear", "lie"]
    assert merged.max_turns == 10 and merged.stop_on_tool == "book_venue"
    assert parent.facts == {"city": "Berlin", "size": "10"}


def test_merge_child_replaces_goal_persona_max_turns_and_stop() -> None:
    parent = SimulatorConfig(goal="G1", persona="P1", max_turns=10, stop_on_tool="book_venue")
    child = SimulatorConfig(goal="G2", persona="P2", max_turns=5, stop_on_topic="booking")
    merged = parent.merge(child)
    assert (merged.goal, merged.persona, merged.max_turns) == ("G2", "P2", 5)
    assert merged.stop_on_topic == "booking" and merged.stop_on_tool is None


def test_merge_three_levels() -> None:
    project = SimulatorConfig(rules_should=["a"], max_turns=15)
    feature = SimulatorConfig(rules_should=["b"], max_turns=8)
    scenario = SimulatorConfig(goal="G", rules_should=["c"])
    merged = project.merge(feature).merge(scenario)
    assert merged.rules_should == ["a", "b", "c"] and merged.max_turns == 8 and merged.goal == "G"


def test_fingerprint_is_canonical() -> None:
    a = SimulatorConfig(goal="G", facts={"b": "2", "a": "1"}, rules_should=["y", "x"])
    b = SimulatorConfig(goal="G", facts={"a": "1", "b": "2"}, rules_should=["x", "y"])
    assert a.to_fingerprint() == b.to_fingerprint()
    assert list(a.to_fingerprint()["facts"]) == ["a", "b"]
    assert a.to_fingerprint() != a.with_changes(goal="H").to_fingerprint()


def test_max_turns_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SimulatorConfig(max_turns=0)


# --- stop conditions -----------------------------------------------------------------------


def test_stops_when_the_agent_called_the_tool_in_any_turn() -> None:
    sim = Simulator(FakeLLM(), SimulatorConfig(stop_on_tool="book_venue"))
    conv = _conv()
    assert sim.should_stop(conv) is None
    conv.turns.append(Turn(2, "Book it", AgentResponse("Booked!", [ToolCall("book_venue", {"id": 1})])))
    assert sim.should_stop(conv) == 'the agent called "book_venue" (turn 2)'
    conv.turns.append(Turn(3, "Thanks", AgentResponse("Bye")))
    assert sim.should_stop(conv) is not None


def test_stops_when_topic_reached() -> None:
    sim = Simulator(FakeLLM(), SimulatorConfig(stop_on_topic="booking"))
    conv = _conv()
    conv.turns[0].topic = "greeting"
    assert sim.should_stop(conv) is None
    conv.turns.append(Turn(2, "Book it", AgentResponse("Booked!"), topic="booking"))
    assert "reached the topic \"booking\"" in (sim.should_stop(conv) or "")


def test_stop_topic_must_exist_in_graph() -> None:
    graph = TopicGraph.from_table(
        [{"topic": "greeting", "characteristic": "", "triggers": "", "next": ""}], where="f.feature:3"
    )
    sim = Simulator(FakeLLM(), SimulatorConfig(stop_on_topic="booking"))
    with pytest.raises(ValueError, match="booking"):
        sim.should_stop(_conv(), graph)
