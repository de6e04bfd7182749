"""Topic graphs: trigger parsing, validation errors naming where, classification, limits, paths."""

from __future__ import annotations

import pytest

from fabtest.conversation import AgentResponse, ToolCall, Turn
from fabtest.engine.judge import Judge
from fabtest.engine.topics import (
    Topic,
    TopicGraph,
    TopicGraphError,
    TopicTracker,
    Trigger,
    TriggerError,
    follows,
    parse_triggers,
    reached,
    table_rows,
)

from .fake_llm import FakeLLM

WHERE = "features/venues.feature:12"

VENUES = [
    {"topic": "greeting", "characteristic": "The agent greets", "triggers": "", "next": "gathering"},
    {"topic": "gathering", "characteristic": "The agent asks for details", "triggers": "agent:/how many/i",
     "next": "presenting", "max turns": "2"},
    {"topic": "presenting", "characteristic": "The agent presents venues", "triggers": "tool:search_venues",
     "next": "booking, gathering"},
    {"topic": "booking", "characteristic": "The agent books", "triggers": "tool:book_venue", "next": ""},
]


def _graph(rows: list[dict] | None = None) -> TopicGraph:
    return TopicGraph.from_table(rows or VENUES, where=WHERE)


def _turn(agent: str = "ok", user: str = "hi", tools: list[str] | None = None, number: int = 1) -> Turn:
    return Turn(number, user, AgentResponse(agent, [ToolCall(name) for name in tools or []]))


# --- triggers ------------------------------------------------------------------------------


def test_parse_triggers_kinds() -> None:
    assert parse_triggers("") == []
    assert parse_triggers("tool:search_venues, agent:/how many/, user:/book/i") == [
        Trigger("tool", "search_venues"),
        Trigger("agent", "how many"),
        Trigger("user", "book", ignore_case=True),
    ]


def test_regex_may_contain_commas_and_slashes() -> None:
    triggers = parse_triggers(r"agent:/\d{1,3}, \w+/, tool:x, user:/a/b, c/")
    assert [str(t) for t in triggers] == [r"agent:/\d{1,3}, \w+/", "tool:x", "user:/a/b, c/"]
    assert triggers[0].fires(_turn(agent="We have 12, rooms"))
    assert parse_triggers(r"agent:/a\/b/")[0].fires(_turn(agent="a/b"))


@pytest.mark.parametrize(
    "text, message",
    [
        ("tool:", "tool trigger needs a tool name"),
        ("agent:how many", "needs a regex between slashes"),
        ("agent:/how many", "not closed"),
        ("agent:/(unclosed/", "invalid regex"),
        ("agent://", "empty regex"),
        ("bot:/x/", "cannot parse trigger"),
        ("tool:a b", "invalid tool name"),
        ("tool:a,", "empty trigger"),
        ("agent:/x/ tool:y", "not closed"),
    ],
)
def test_invalid_triggers(text: str, message: str) -> None:
    with pytest.raises(TriggerError, match=message):
        parse_triggers(text)


def test_trigger_fires() -> None:
    turn = _turn(agent="How many people?", user="I want to BOOK", tools=["search_venues"])
    assert Trigger("tool", "search_venues").fires(turn)
    assert not Trigger("tool", "book_venue").fires(turn)
    assert Trigger("agent", "How many").fires(turn)
    assert not Trigger("user", "book").fires(turn)
    assert Trigger("user", "book", ignore_case=True).fires(turn)


# --- the graph -----------------------------------------------------------------------------


def test_from_table() -> None:
    graph = _graph()
    assert graph.initial == "greeting" and graph.names == ["greeting", "gathering", "presenting", "booking"]
    assert graph["presenting"].successors == ["booking", "gathering"]
    assert graph["gathering"].max_turns == 2 and graph["greeting"].max_turns is None
    assert [t.name for t in graph.successors("presenting")] == ["booking", "gathering"]


def test_table_rows_from_datatable() -> None:
    table = [["topic", "characteristic", "triggers", "next"], ["a", "A", "", "b"], ["b", "B", "tool:x", ""]]
    graph = TopicGraph.from_table(table_rows(table), where=WHERE)
    assert graph.names == ["a", "b"]


def _rows_with(**changes: dict) -> list[dict]:
    rows = [dict(row) for row in VENUES]
    for name, change in changes.items():
        for row in rows:
            if row["topic"] == name:
                row.update(change)
    return rows


@pytest.mark.parametrize(
    "rows, message",
    [
        (_rows_with(booking={"next": "payment"}), 'topic "booking" has unknown next topic "payment"'),
        (_rows_with(gathering={"next": "gathering, presenting"}), 'topic "gathering" lists itself as next'),
        (_rows_with(greeting={"next": "booking"}), 'topic "gathering", "presenting" cannot be reached'),
        (VENUES + [dict(VENUES[3])], 'duplicate topic "booking"'),
        (_rows_with(presenting={"triggers": "tool:"}), 'topic "presenting": tool trigger needs a tool name'),
        (_rows_with(gathering={"triggers": "agent:/(how/"}), 'topic "gathering": invalid regex'),
        ([{k: v for k, v in VENUES[0].items() if k != "next"}], "missing column\\(s\\): next"),
        (_rows_with(gathering={"max turns": "two"}), "max turns must be a whole number, got 'two'"),
        (_rows_with(gathering={"max turns": "0"}), "max turns must be at least 1"),
        ([{**VENUES[0], "charcteristic": "x"}], "unknown column\\(s\\): charcteristic"),
        ([{**VENUES[0], "topic": " "}], "empty topic name"),
        ([], "no rows"),
    ],
)
def test_graph_validation_errors_name_where(rows: list[dict], message: str) -> None:
    with pytest.raises(TopicGraphError, match=message) as info:
        TopicGraph.from_table(rows, where=WHERE)
    text = str(info.value)
    assert text.startswith(WHERE + ": ") and "\n" not in text
    assert isinstance(info.value, ValueError)


def test_column_names_are_forgiving_about_case_and_underscores() -> None:
    rows = [{"Topic": "a", "Characteristic": "A", "Triggers": "", "Next": "", "max_turns": "3"}]
    assert TopicGraph.from_table(rows, where=WHERE)["a"].max_turns == 3


def test_merged_accumulates_and_replaces_then_validates() -> None:
    parent = _graph()
    child = TopicGraph.from_table(
        [
            {"topic": "booking", "characteristic": "Books and confirms", "triggers": "tool:book_venue", "next": "payment"},
            {"topic": "payment", "characteristic": "Takes payment", "triggers": "tool:pay", "next": ""},
        ],
        where="features/venues.feature:40",
        validate=False,
    )
    merged = TopicGraph.merged(parent, child)
    assert merged.names == ["greeting", "gathering", "presenting", "booking", "payment"]
    assert merged["booking"].characteristic == "Books and confirms" and merged.initial == "greeting"
    orphan = TopicGraph.from_table(
        [{"topic": "orphan", "characteristic": "", "triggers": "", "next": ""}], where="f.feature:50", validate=False
    )
    with pytest.raises(TopicGraphError, match='f.feature:50: topic "orphan" cannot be reached'):
        TopicGraph.merged(parent, orphan)


def test_topic_records_canonical_order() -> None:
    records = _graph().topic_records()
    assert [r["name"] for r in records] == ["greeting", "gathering", "presenting", "booking"]
    assert records[2] == {"name": "presenting", "characteristic": "The agent presents venues",
                          "successors": ["booking", "gathering"]}
    shuffled = TopicGraph([_graph()[n] for n in ["greeting", "presenting", "booking", "gathering"]], where=WHERE)
    assert shuffled.topic_records() == records
    a, b, c = (Topic("a", successors=["c", "b"]), Topic("b"), Topic("c"))
    assert [r["name"] for r in TopicGraph([a, c, b]).topic_records()] == ["a", "b", "c"]
    assert _graph().to_fingerprint()["initial"] == "greeting"
    loop = TopicGraph([Topic("start", successors=["b"]), Topic("b", successors=["a"]), Topic("a", successors=["start"])])
    assert [r["name"] for r in loop.topic_records()] == ["start", "b", "a"]


def test_require_names() -> None:
    graph = _graph()
    graph.require(["booking"])
    with pytest.raises(TopicGraphError, match=f'{WHERE}: unknown topic "payment"'):
        graph.require(["payment"])


# --- classification ------------------------------------------------------------------------


def test_initial_topic_before_first_turn() -> None:
    assert TopicTracker(_graph()).current == "greeting"


def test_trigger_of_current_topic_keeps_it_without_llm() -> None:
    llm = FakeLLM()
    tracker = TopicTracker(_graph())
    tracker.current = "gathering"
    result = tracker.classify(_turn(agent="How many people, and which date?"), Judge(llm))
    assert (result.topic, result.via) == ("gathering", "trigger") and result.usage.calls == 0
    assert llm.calls == []


def test_successor_trigger_moves_without_llm() -> None:
    llm = FakeLLM()
    tracker = TopicTracker(_graph())
    first = tracker.classify(_turn(agent="Hello! How many people?"), Judge(llm))
    assert (first.topic, first.via) == ("gathering", "trigger")
    second = tracker.classify(_turn(agent="Here are venues", tools=["search_venues"]), Judge(llm))
    assert (second.topic, second.via) == ("presenting", "trigger")
    assert llm.calls == [] and tracker.path == ["gathering", "presenting"]


def test_first_successor_in_declared_order_wins() -> None:
    tracker = TopicTracker(_graph())
    tracker.current = "presenting"
    result = tracker.classify(_turn(agent="How many?", tools=["book_venue"]), Judge(FakeLLM()))
    assert result.topic == "booking"


def test_no_trigger_asks_the_judge_once_and_uses_its_choice() -> None:
    llm = FakeLLM([{"topic": "gathering", "reasoning": "asks for the date"}])
    tracker = TopicTracker(_graph())
    result = tracker.classify(_turn(agent="Which date would you like?"), Judge(llm))
    assert (result.topic, result.via) == ("gathering", "judge") and result.usage.calls == 1
    assert len(llm.calls) == 1 and tracker.current == "gathering"
    assert "Which date would you like?" in llm.prompts[0]
    assert '"greeting"' in llm.prompts[0] and "- gathering: The agent asks for details" in llm.prompts[0]
    assert "booking" not in llm.prompts[0]


def test_terminal_topic_stays_without_llm() -> None:
    llm = FakeLLM()
    tracker = TopicTracker(_graph())
    tracker.current = "booking"
    result = tracker.classify(_turn(agent="Anything else?"), Judge(llm))
    assert (result.topic, result.via) == ("booking", "stay") and llm.calls == []


@pytest.mark.parametrize("judge", [None, Judge(None)])
def test_no_judge_stays(judge: Judge | None) -> None:
    tracker = TopicTracker(_graph())
    result = tracker.classify(_turn(agent="Which date?"), judge)
    assert (result.topic, result.via) == ("greeting", "stay")


def test_max_turns_per_topic() -> None:
    tracker = TopicTracker(_graph())
    tracker.classify(_turn(agent="How many?"))
    tracker.classify(_turn(agent="How many exactly?"))
    assert tracker.exceeded_max_turns() is None
    tracker.classify(_turn(agent="And how many chairs?"))
    assert tracker.exceeded_max_turns() == 'the conversation spent 3 turns in topic "gathering" (max turns 2)'
    assert tracker.turns_in == {"gathering": 3}


# --- path checks ---------------------------------------------------------------------------


def test_reached_and_follows() -> None:
    path = ["greeting", "greeting", "gathering", "presenting", "gathering", "presenting", "booking"]
    assert reached("booking", path) and not reached("payment", path)
    assert follows(["greeting", "gathering", "presenting"], path)
    assert follows(["greeting", "presenting", "booking"], path)
    assert follows(["presenting", "gathering", "presenting"], path)
    assert not follows(["booking", "greeting"], path)
    assert not follows(["greeting", "greeting"], path)
    assert follows([], path)
    tracker = TopicTracker(_graph())
    tracker.classify(_turn(agent="How many?"))
    assert tracker.reached("gathering") and tracker.follows(["gathering"])
