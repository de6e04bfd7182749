"""Every log format fabtest score reads, from a real-shaped export in tests/fixtures/production: told
from its content, its conversations put back together (turns, tool calls and their results, latency,
tokens), and a file no format fits refused in one line that says what was tried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabtest.errors import UsageError
from fabtest.production import records
from fabtest.production.logs import read_logs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "production"


def _read(*names: str) -> dict[str, object]:
    return {c.id: c for c in read_logs([str(FIXTURES / n) if "/" not in n else n for n in names])}


def _calls(conversation: object) -> list[list[tuple[str, object]]]:
    return [[(c.name, c.result) for c in t.tool_calls] for t in conversation.turns]  # type: ignore[attr-defined]


def test_otlp_genai_spans_group_by_conversation_id_and_tool_spans_join_through_their_trace() -> None:
    found = _read("otlp_genai.jsonl")
    assert set(found) == {"conv-7f3a", "conv-91bc"}
    booking = found["conv-7f3a"]
    assert [t.user for t in booking.turns] == ["I need a room for 10 people in Berlin on 12 March",
                                               "Yes, book it. Send the confirmation to anna.meyer@example.com"]
    assert booking.turns[0].agent == "Spree Loft (12 seats) is free on 12 March. Shall I book it?"
    assert _calls(booking) == [[("search_venues", [{"name": "Spree Loft", "capacity": 12}])],
                               [("book_venue", {"booking": "BK-1042"})]]
    assert booking.turns[0].duration_s == pytest.approx(2.9)  # first chat span's start to the reply's end
    assert booking.turns[1].metadata["usage"]["input_tokens"] == 2110
    assert booking.timestamp == "2026-01-01T07:00:00Z" and booking.format == "otlp"
    assert booking.source.endswith("otlp_genai.jsonl:1")


def test_a_conversation_spread_over_two_files_is_one(tmp_path: Path) -> None:
    lines = (FIXTURES / "otlp_genai.jsonl").read_text().splitlines()
    (tmp_path / "day1.jsonl").write_text(lines[0] + "\n")
    (tmp_path / "day2.jsonl").write_text(lines[1] + "\n")
    found = _read(str(tmp_path))
    assert list(found) == ["conv-7f3a"] and len(found["conv-7f3a"].turns) == 2  # type: ignore[attr-defined]


def test_langfuse_session_download_is_one_conversation_of_its_traces() -> None:
    session = _read("langfuse_session.json")["sess-munich-40"]
    assert [t.user for t in session.turns] == ["Is there a venue for 40 people in Munich next Friday?",
                                               "No thanks. Call me on 0176 98765432 if something frees up."]
    assert _calls(session) == [[("search_venues", [])], []]  # the TOOL observation answers the generation's call
    assert session.turns[1].agent == "I will. Have a good day!"
    tokens = {"input_tokens": 1340, "output_tokens": 47}
    assert session.turns[0].metadata["usage"] == {**tokens, "models": {"gpt-4o-mini": tokens}}


def test_phoenix_openinference_spans() -> None:
    conversation = _read("phoenix_spans.jsonl")["phx-session-12"]
    assert [(t.user, t.agent) for t in conversation.turns] == [
        ("Can I cancel booking BK-77?", "BK-77 is cancelled; no fee applies.")]  # the AGENT span is not repeated
    assert _calls(conversation) == [[("cancel_booking", {"cancelled": True})]]


def test_mlflow_traces_by_session_with_a_root_span_fallback() -> None:
    found = _read("mlflow_traces.json")
    assert _calls(found["mlf-session-3"]) == [[("get_price", {"eur_per_day": 900})]]
    assert found["mlf-session-3"].turns[0].agent == "Spree Loft costs 900 EUR per day."  # type: ignore[attr-defined]
    only_root = found["mlf-session-4"]
    assert [(t.user, t.agent) for t in only_root.turns] == [("Thanks, that's all", "You're welcome!")]


def test_openai_chat_jsonl_one_conversation_per_line() -> None:
    found = _read("openai_chat.jsonl")
    assert list(found) == ["chat-001", "chat-002", "chat-003"]
    assert _calls(found["chat-002"]) == [[("book_venue", {"booking": "BK-2001"})]]


def test_fabtest_experiments_are_logs_too(tmp_path: Path) -> None:
    from fabtest.experiment.export import build_document, write_document
    from fabtest.experiment.model import ExperimentInfo, ScenarioResult, ToolCallRecord, TurnRecord

    result = ScenarioResult(id="example:000000000001", name="Book", passed=True, iteration=2, transcript=[
        TurnRecord(number=1, user="Book Spree Loft", agent="Booked.", duration_s=1.5,
                   tool_calls=[ToolCallRecord(name="book_venue", arguments={"venue": "x"}, result={"ok": True})])])
    path = write_document(build_document(ExperimentInfo(id="exp_logs", timestamp="2026-01-05T10:00:00Z"), [result]),
                          tmp_path)
    (conversation,) = read_logs([str(path)])
    assert conversation.id == "exp_logs/example:000000000001/2" and conversation.format == "fabtest"
    assert _calls(conversation) == [[("book_venue", {"ok": True})]] and conversation.turns[0].duration_s == 1.5


def test_a_file_no_format_fits_says_what_was_tried(tmp_path: Path) -> None:
    (tmp_path / "mystery.json").write_text(json.dumps({"events": [1, 2]}))
    with pytest.raises(UsageError) as caught:
        list(read_logs([str(tmp_path / "mystery.json")]))
    message = str(caught.value)
    assert "\n" not in message and "mystery.json" in message
    for name in ("otlp (no 'resourceSpans' list)", "phoenix", "langfuse", "mlflow (no 'info' object)",
                 "openai (no 'messages' list)", "fabtest"):
        assert name in message


def test_a_bad_json_line_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "chat.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n{oops\n")
    with pytest.raises(UsageError, match=r"chat\.jsonl:2: not a JSON line"):
        list(read_logs([str(tmp_path / "chat.jsonl")]))


def test_a_json_array_is_read_item_by_item_with_a_growing_window(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_CHUNK", 16)  # every item is larger than one read: the window must grow
    items = [{"n": i, "text": "x" * (50 * i), "nested": [{"a": "]"}, "[,"]} for i in range(5)]
    (tmp_path / "array.json").write_text(" [\n" + ",\n".join(json.dumps(i) for i in items) + "\n]\n")
    read = list(records.records(tmp_path / "array.json"))
    assert [r.value for r in read] == items and read[3].where.endswith("array.json[3]")


def test_json_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsageError, match="nested too deeply"):
        list(read_logs([str(tmp_path / "deep.json")]))
    (tmp_path / "deep.jsonl").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(UsageError, match="nested too deeply"):
        list(read_logs([str(tmp_path / "deep.jsonl")]))
