"""The judge: one call per batch, only the subject it is given, strict verdict validation."""

from __future__ import annotations

import pytest

from fabtest.conversation import AgentResponse, Conversation, ToolCall, Turn
from fabtest.config.criteria import Criterion
from fabtest.engine.judge import (
    CriteriaAnswer,
    GroundingAnswer,
    Judge,
    TopicAnswer,
    VerdictAnswer,
    format_exchange,
    tool_not_called,
)
from fabtest.llm.base import LLMBadOutput, LLMNotConfigured, LLMTimeout
from fabtest.engine.topics import Topic

from .fake_llm import FakeLLM

FRIENDLY = Criterion("friendly", "The agent is warm and polite", ["Hi! Happy to help."], ["What do you want?"])
CONCISE = Criterion("concise", "Each reply has at most 3 sentences")


def _verdicts(*items: tuple[str, str]) -> dict:
    return {"verdicts": [{"criterion": c, "verdict": v, "reasoning": f"because {c}"} for c, v in items]}


def _conversation() -> Conversation:
    conv = Conversation()
    conv.turns.append(Turn(1, "EARLIER-USER-LINE hello", AgentResponse("EARLIER-AGENT-LINE hi, how can I help?")))
    conv.turns.append(Turn(2, "I need a room for 10", AgentResponse("Sure! Which city?")))
    return conv


def test_all_criteria_in_one_call_with_usage_and_temperature_zero() -> None:
    llm = FakeLLM([_verdicts(("friendly", "passed"), ("concise", "failed"))])
    result = Judge(llm).evaluate_criteria([FRIENDLY, CONCISE], subject="User: hi\nAgent: hello", scope="response")
    assert len(llm.calls) == 1
    call = llm.calls[0]
    assert call.schema is not None and issubclass(call.schema, CriteriaAnswer)
    assert call.temperature == 0.0 and call.system
    assert [(v.criterion, v.verdict) for v in result.value] == [("friendly", "passed"), ("concise", "failed")]
    assert result.value[0].passed is True and result.value[1].passed is False
    assert result.usage.calls == 1 and result.usage.input_tokens == 10 and result.attempts == 1


def test_verdicts_returned_in_requested_order() -> None:
    llm = FakeLLM([_verdicts(("concise", "passed"), ("friendly", "failed"))])
    result = Judge(llm).evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    assert [v.criterion for v in result.value] == ["friendly", "concise"]


def test_judge_sees_only_the_latest_exchange() -> None:
    conv = _conversation()
    llm = FakeLLM([_verdicts(("friendly", "passed"))])
    Judge(llm).evaluate_criteria([FRIENDLY], subject=format_exchange(conv.last_turn), scope="response")
    prompt = llm.prompts[0]
    assert "I need a room for 10" in prompt and "Sure! Which city?" in prompt
    assert "EARLIER-USER-LINE" not in prompt and "EARLIER-AGENT-LINE" not in prompt
    assert "EARLIER" not in (llm.calls[0].system or "")


def test_conversation_scope_gets_the_transcript() -> None:
    conv = _conversation()
    llm = FakeLLM([_verdicts(("No repeated questions", "passed"))])
    criterion = Criterion("No repeated questions", "No repeated questions")
    Judge(llm).evaluate_criteria([criterion], subject=conv.transcript(), scope="conversation")
    assert "EARLIER-USER-LINE" in llm.prompts[0] and "CONVERSATION TRANSCRIPT" in llm.prompts[0]


def test_calibration_examples_and_descriptions_in_prompt() -> None:
    llm = FakeLLM([_verdicts(("friendly", "passed"), ("concise", "passed"))])
    Judge(llm).evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    prompt = llm.prompts[0]
    for text in ("The agent is warm and polite", "Hi! Happy to help.", "What do you want?", "at most 3 sentences"):
        assert text in prompt
    assert prompt.index("Hi! Happy to help.") < prompt.index("What do you want?")
    assert "PASSES: Hi! Happy to help." in prompt and "FAILS: What do you want?" in prompt


def test_missing_verdict_is_retried_with_the_problem_then_used() -> None:
    llm = FakeLLM([_verdicts(("friendly", "passed")), _verdicts(("friendly", "passed"), ("concise", "passed"))])
    result = Judge(llm).evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    assert len(llm.calls) == 2 and result.attempts == 2
    assert "no verdict for 'concise'" in llm.prompts[1]
    assert result.usage.calls == 2 and result.usage.input_tokens == 20


@pytest.mark.parametrize(
    "answer, problem",
    [
        (_verdicts(("friendly", "passed")), "no verdict for 'concise'"),
        (_verdicts(("friendly", "passed"), ("friendly", "failed"), ("concise", "passed")), "more than one verdict"),
    ],
)
def test_unusable_verdicts_raise_after_three_attempts(answer: dict, problem: str) -> None:
    llm = FakeLLM([answer, answer, answer])
    with pytest.raises(LLMBadOutput, match="unusable answer 3 times") as info:
        Judge(llm).evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    assert problem in str(info.value)
    assert len(llm.calls) == 3


def test_inconclusive_passes_through() -> None:
    llm = FakeLLM([_verdicts(("friendly", "inconclusive"))])
    (verdict,) = Judge(llm).evaluate_criteria([FRIENDLY], subject="x", scope="response").value
    assert verdict.verdict == "inconclusive" and verdict.passed is None


def test_the_criterion_name_is_an_enum_of_the_names_asked() -> None:
    """Issue 27 point 7: the judge picks a name from the schema's enum instead of echoing it, so a
    name it was not asked (or misspelt) is refused by the schema, not retried by fabtest."""
    llm = FakeLLM([_verdicts(("friendly", "passed"), ("concise", "passed"))])
    Judge(llm).evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    schema = llm.calls[0].schema
    assert schema is not None
    item = schema.model_json_schema()["$defs"]["CriterionVerdictOut"]["properties"]["criterion"]
    assert item["enum"] == ["friendly", "concise"]
    wrong = FakeLLM([_verdicts(("friendly", "passed"), ("helpful", "passed"))])
    with pytest.raises(LLMBadOutput, match="does not fit"):
        Judge(wrong).evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    assert len(wrong.calls) == 1


def test_no_criteria_no_call() -> None:
    llm = FakeLLM()
    assert Judge(llm).evaluate_criteria([], subject="x", scope="response").value == []
    assert llm.calls == []


def test_provider_errors_propagate_without_judge_retry() -> None:
    llm = FakeLLM([LLMTimeout("too slow")])
    with pytest.raises(LLMTimeout):
        Judge(llm).evaluate_criteria([FRIENDLY], subject="x", scope="response")
    assert len(llm.calls) == 1


def test_no_llm_means_not_configured() -> None:
    judge = Judge(None)
    assert not judge.available
    with pytest.raises(LLMNotConfigured):
        judge.intent("User: hi\nAgent: hello", "greet")


# --- grounding -----------------------------------------------------------------------------

SEARCH = ToolCall("search_venues", {"city": "Berlin", "size": 10}, [{"name": "Spreeblick", "price_per_day": 450}])


def test_grounding_catches_an_invented_price() -> None:
    answer = {
        "claims": [
            {"claim": "Spreeblick is available in Berlin", "supported": True, "evidence": "name: Spreeblick"},
            {"claim": "Spreeblick costs 300 EUR per day", "supported": False, "evidence": "results say 450"},
        ]
    }
    llm = FakeLLM([answer])
    response = "Spreeblick in Berlin is free and costs 300 EUR per day."
    other = ToolCall("book_venue", {"venue": "X"}, {"ok": True})
    result = Judge(llm).grounding(response, "search_venues", [other, SEARCH])
    verdict = result.value
    assert verdict.verdict == "failed" and not verdict.passed
    assert verdict.unsupported == ["Spreeblick costs 300 EUR per day"]
    assert len(verdict.claims) == 2 and "300 EUR" in verdict.reasoning
    assert verdict.to_data()["unsupported"] == ["Spreeblick costs 300 EUR per day"]
    prompt = llm.prompts[0]
    assert llm.calls[0].schema is GroundingAnswer and llm.calls[0].temperature == 0.0
    assert response in prompt
    assert '"city": "Berlin"' in prompt and '"size": 10' in prompt
    assert '"price_per_day": 450' in prompt and "Spreeblick" in prompt
    assert "book_venue" not in prompt


def test_grounding_all_supported_and_no_claims() -> None:
    llm = FakeLLM([{"claims": [{"claim": "Spreeblick costs 450", "supported": True}]}, {"claims": []}])
    judge = Judge(llm)
    assert judge.grounding("Spreeblick costs 450.", "search_venues", [SEARCH]).value.passed
    empty = judge.grounding("How can I help?", "search_venues", [SEARCH]).value
    # issue 27 point 13: no claim found is no evidence of grounding: inconclusive, not a pass
    assert empty.verdict == "inconclusive" and empty.passed is None and "no factual claims" in empty.reasoning


def test_grounding_without_the_tool_fails_without_a_call() -> None:
    llm = FakeLLM()
    result = Judge(llm).grounding("It costs 300.", "search_venues", [ToolCall("book_venue")])
    assert llm.calls == [] and result.usage.calls == 0
    assert result.value == tool_not_called("search_venues")
    assert result.value.verdict == "failed" and 'tool "search_venues" was not called' in result.value.reasoning


# --- intent, goal, topic -------------------------------------------------------------------


def test_intent_and_goal() -> None:
    llm = FakeLLM([{"verdict": "passed", "reasoning": "asks for size"}, {"verdict": "failed", "reasoning": "no booking"}])
    judge = Judge(llm)
    intent = judge.intent("User: hi\nAgent: How many people?", "gather requirements")
    assert intent.value.passed and intent.value.reasoning == "asks for size"
    goal = judge.goal_achieved("Book a room", "User: book\nAgent: ok")
    assert goal.value.verdict == "failed"
    assert all(c.schema is VerdictAnswer and c.temperature == 0.0 for c in llm.calls)
    assert "gather requirements" in llm.prompts[0] and "Book a room" in llm.prompts[1]


def test_choose_topic_among_current_and_successors() -> None:
    current = Topic("greeting", "The agent greets", successors=["gathering"])
    gathering = Topic("gathering", "The agent asks for details")
    llm = FakeLLM([{"topic": "gathering", "reasoning": "asks for size"}])
    result = Judge(llm).choose_topic(current, [gathering], "User: hi\nAgent: How many?")
    assert result.value == "gathering" and result.usage.calls == 1
    assert llm.calls[0].schema is TopicAnswer
    assert "The agent greets" in llm.prompts[0] and "The agent asks for details" in llm.prompts[0]


def test_choose_topic_outside_candidates_retried_then_error() -> None:
    current = Topic("greeting", "greets", successors=["gathering"])
    gathering = Topic("gathering", "asks")
    bad = {"topic": "booking", "reasoning": "?"}
    llm = FakeLLM([bad, {"topic": "greeting", "reasoning": "still greeting"}])
    assert Judge(llm).choose_topic(current, [gathering], "x").value == "greeting"
    assert "'booking' is not one of the candidate topics" in llm.prompts[1]
    llm = FakeLLM([bad, bad, bad])
    with pytest.raises(LLMBadOutput, match="topic choice"):
        Judge(llm).choose_topic(current, [gathering], "x")
