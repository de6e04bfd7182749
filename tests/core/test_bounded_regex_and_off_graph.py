"""User regexes run with a time limit (match, triggers, argument matchers); off-graph topic jumps
are recorded as such."""

from __future__ import annotations

import time

import pytest

from fabtest.engine import checks
from fabtest.engine import patterns
from fabtest.conversation import AgentResponse, Conversation, ToolCall, Turn
from fabtest.engine.topics import TopicGraph, TopicTracker, Trigger

#: catastrophic for a backtracking engine, including the ``regex`` package
EVIL = r"(a|aa)+$"
EVIL_TEXT = "a" * 60 + "!"


def test_a_catastrophic_match_is_stopped_and_names_the_pattern() -> None:
    compiled = checks.compile_regex(EVIL, where="f.feature:3")
    with pytest.raises(patterns.RegexTimeout) as info:
        checks.check_regex(EVIL_TEXT, compiled, where="f.feature:3")
    assert "f.feature:3: the pattern /(a|aa)+$/ took longer than" in str(info.value)


def test_the_issues_pattern_ends_with_a_verdict() -> None:
    """``^(e|c|h|o|:| |a+)+$`` hangs Python's re; the regex package decides it at once (no match)."""
    compiled = checks.compile_regex(r"^(e|c|h|o|:| |a+)+$", where="x")
    assert checks.check_regex("echo: " + "a" * 31 + "!", compiled)[0] is False


def test_the_scenario_deadline_bounds_a_match() -> None:
    patterns.scenario_deadline(time.monotonic() - 1)  # already past: the match gets the minimum slice
    try:
        with pytest.raises(patterns.RegexTimeout, match=r"took longer than 0.01s"):
            checks.check_regex(EVIL_TEXT, checks.compile_regex(EVIL, where="x"))
    finally:
        patterns.scenario_deadline(None)


def test_triggers_and_argument_matchers_are_bounded() -> None:
    turn = Turn(1, "hi", AgentResponse(EVIL_TEXT))
    with pytest.raises(patterns.RegexTimeout, match=r"topic trigger agent:/\(a\|aa\)\+\$/"):
        Trigger("agent", EVIL).fires(turn)
    matcher = checks.ArgExpectation.parse("city", f"/{EVIL}/", where="x")
    with pytest.raises(patterns.RegexTimeout, match="argument 'city'"):
        matcher.matches({"city": EVIL_TEXT})


def test_ordinary_patterns_keep_re_syntax() -> None:
    assert checks.check_regex("3:00 pm", checks.compile_regex(r"3:00\s*pm", where="x"))[0]
    assert Trigger("agent", "how many", ignore_case=True).fires(Turn(1, "u", AgentResponse("How MANY people?")))


GRAPH = [
    {"topic": "greeting", "characteristic": "greets", "triggers": "", "next": "gathering"},
    {"topic": "gathering", "characteristic": "asks", "triggers": "agent:/how many/", "next": "booking"},
    {"topic": "booking", "characteristic": "books", "triggers": "tool:book_venue", "next": ""},
]


def test_a_jump_to_a_non_successor_is_recorded_as_off_graph() -> None:
    tracker = TopicTracker(TopicGraph.from_table(GRAPH, where="f:1"))
    result = tracker.classify(Turn(1, "book it", AgentResponse("done", [ToolCall("book_venue")])))
    assert (result.topic, result.via, result.left) == ("booking", "off_graph", "greeting")
    assert tracker.path == ["booking"] and tracker.off_graph == ["greeting -> booking"]


def test_moves_along_the_graph_are_not_off_graph() -> None:
    tracker = TopicTracker(TopicGraph.from_table(GRAPH, where="f:1"))
    first = tracker.classify(Turn(1, "hi", AgentResponse("how many people?")))
    second = tracker.classify(Turn(2, "10", AgentResponse("booked", [ToolCall("book_venue")])))
    assert (first.via, second.via) == ("trigger", "trigger") and tracker.off_graph == []


def test_the_conversation_lists_off_graph_transitions() -> None:
    conv = Conversation(turns=[Turn(1, "hi", AgentResponse("hello"), topic="greeting"),
                               Turn(2, "book", AgentResponse("done"), topic="booking", off_graph_from="greeting")])
    assert conv.off_graph_transitions == ["greeting -> booking (turn 2)"]
