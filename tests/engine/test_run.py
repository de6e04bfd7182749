"""``fabtest.run``: one scenario without pytest or Gherkin, on the engine the features use.

End to end with the scripted ``FakeLLM`` (judge and simulated user), and once through the real
google-genai client against ``FakeGemini`` on 127.0.0.1 with the judge built from pyproject.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import fabtest
from fabtest import AgentResponse, Message, ToolCall
from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.testing import FakeGemini, FakeLLM


class BookingBot:
    """Answers by keyword; books (a tool call) when the user says so."""

    def __init__(self) -> None:
        self.exited = False

    def chat(self, messages: list[Message]) -> AgentResponse:
        last = messages[-1].content.lower()
        if "book" in last:
            return AgentResponse("Booked: reference B-42.", [ToolCall("book_venue", {"city": "Berlin"})])
        if "berlin" in last:
            return AgentResponse("I found Hall 7 in Berlin, 300 EUR per day.", [ToolCall("search_venues", {"city": "Berlin"})])
        return AgentResponse("Hello! Where is your event?")


def _settings() -> Settings:
    return Settings()  # no pyproject: every LLM is passed in


def test_scripted_user_with_criteria_and_tools_passes() -> None:
    judge = FakeLLM().verdicts({"The agent quotes a price": "passed", "The agent is rude": "failed"})
    result = fabtest.run(BookingBot(), user=["Hi", "A room in Berlin", "Book it"],
                         should=["The agent is rude"], must=["The agent quotes a price"],
                         must_call=["book_venue"], must_not_call=["cancel_booking"], judge=judge, settings=_settings())
    assert result.passed and not result.skipped and result.failure_type is None
    assert [t.user for t in result.transcript] == ["Hi", "A room in Berlin", "Book it"]
    assert result.transcript[2].tool_calls[0].name == "book_venue"
    assert [(e.type, e.criterion, e.status) for e in result.evaluations] == [("satisfy", "The agent is rude", "failed")]
    assert {(e.type, e.criterion, e.status) for e in result.expectations} == {
        ("include_call", "include_call:book_venue", "passed"),
        ("not_include_call", "not_include_call:cancel_booking", "passed"),
        ("satisfy", "The agent quotes a price", "passed"),
    }
    # the should and the must over the conversation: each must is judged alone (issue 27 point 7)
    assert [c.purpose for c in judge.calls] == ["criteria", "criteria"]
    assert sorted(c.criterion_names for c in judge.calls) == [["The agent is rude"], ["The agent quotes a price"]]
    assert all("Book it" in c.subject for c in judge.calls)


def test_a_failed_must_is_a_failed_result_not_an_exception() -> None:
    judge = FakeLLM().verdicts(default="failed")
    result = fabtest.run(BookingBot(), user=["Hi"], must=["The agent books a venue"], judge=judge, settings=_settings())
    assert not result.passed and result.failure_type == "assertion"
    assert "expectation satisfy 'The agent books a venue' (must) failed" in (result.failure_message or "")


def test_a_missing_tool_call_fails_before_the_judge_is_asked() -> None:
    judge = FakeLLM().verdicts(default="passed")
    result = fabtest.run(BookingBot(), user=["Hi"], must_call=["book_venue"], must=["polite"], judge=judge,
                         settings=_settings())
    assert result.failure_type == "assertion" and "include_call:book_venue" in (result.failure_message or "")
    assert list(judge.calls) == []


def test_simulated_user_until_the_agent_books() -> None:
    sim = FakeLLM().simulated_user(["I need a room in Berlin", "Book it please", "never sent"])
    result = fabtest.run(BookingBot(), user=fabtest.SimulatedUser(goal="Book a room in Berlin", persona="terse",
                                                                  max_turns=5, stop_on_tool="book_venue"),
                         simulator=sim, settings=_settings())
    assert result.passed, result.failure_message
    assert [t.user for t in result.transcript] == ["I need a room in Berlin", "Book it please"]
    assert result.simulator is not None and result.simulator["goal"] == "Book a room in Berlin"
    assert result.usage["simulator"].calls == 2


def test_simulated_user_out_of_turns_is_max_turns() -> None:
    sim = FakeLLM().simulated_user(lambda call: {"message": "hello?", "goal_complete": False})
    result = fabtest.run(BookingBot(), user=fabtest.SimulatedUser(goal="Book", max_turns=2, stop_on_tool="book_venue"),
                         simulator=sim, settings=_settings())
    assert result.failure_type == "max_turns" and len(result.transcript) == 2


def test_agent_failures_are_results_with_their_failure_type() -> None:
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("database down")

    result = fabtest.run(broken, user=["Hi"], settings=_settings())
    assert not result.passed and result.failure_type == "error"
    assert "database down" in (result.failure_message or "")


def test_a_missing_llm_is_a_skip_naming_the_reason() -> None:
    result = fabtest.run(BookingBot(), user=["Hi"], must=["polite"], settings=_settings(),
                         judge=None, root=Path("/nonexistent-root-for-fabtest"))
    assert result.skipped and not result.passed
    assert "judge LLM" in (result.skip_reason or "")


def test_agent_by_registry_target_and_by_configured_name(tmp_path: Path) -> None:
    settings = Settings(agents={"demo": "fabtest.demo:build_agent"})
    by_name = fabtest.run("demo", user=["Hello!"], settings=settings)
    by_target = fabtest.run("fabtest.demo:build_agent", user=["Hello!"], settings=settings)
    assert by_name.passed and by_target.passed
    assert by_name.transcript[0].agent == by_target.transcript[0].agent != ""


def test_project_criteria_resolve_by_name_and_criterion_objects_are_kept() -> None:
    settings = Settings(criteria={"friendly": "The reply is warm and polite"})
    judge = FakeLLM().verdicts(friendly="passed", concise="passed")
    result = fabtest.run(BookingBot(), user=["Hi"], should=["friendly", Criterion("concise", "Short replies")],
                         judge=judge, settings=settings)
    assert result.criteria == {"friendly": "The reply is warm and polite", "concise": "Short replies"}
    assert [e.status for e in result.evaluations] == ["passed", "passed"]


def test_the_around_hook_is_left_even_when_the_run_fails() -> None:
    import contextlib

    bot = BookingBot()

    @contextlib.contextmanager
    def around() -> Any:
        yield
        bot.exited = True

    bot.around = around  # type: ignore[attr-defined]
    result = fabtest.run(bot, user=["Hi"], must_call=["book_venue"], settings=_settings())
    assert result.failure_type == "assertion" and bot.exited


def test_the_result_is_the_experiment_json_shape() -> None:
    result = fabtest.run(BookingBot(), user=["Hi"], name="greeting", settings=_settings())
    data = json.loads(result.model_dump_json())
    assert data["name"] == "greeting" and data["id"].startswith("example:") and data["passed"] is True
    assert fabtest.run(BookingBot(), user=["Hi"], name="greeting", settings=_settings()).id == result.id


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"user": "Hi"}, "fabtest.run(user='Hi'): pass a list of messages (user=['Hi']) or a SimulatedUser"),
    ({"user": []}, "fabtest.run(user=...): expected a non-empty list of user messages"),
    ({"user": ["Hi"], "must": "polite"}, "fabtest.run(must=...): expected a list of criteria"),
    ({"user": ["Hi"], "must_call": [3]}, "fabtest.run(must_call=...): expected a list of tool names"),
])
def test_bad_arguments_are_one_line_usage_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(fabtest.UsageError) as info:
        fabtest.run(BookingBot(), settings=_settings(), **kwargs)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_bad_simulated_user_and_unknown_agent_are_usage_errors() -> None:
    with pytest.raises(fabtest.UsageError, match=r"SimulatedUser\(max_turns=0\): use a whole number >= 1"):
        fabtest.SimulatedUser(goal="x", max_turns=0)
    with pytest.raises(fabtest.UsageError, match="needs a goal"):
        fabtest.SimulatedUser(goal=" ")
    with pytest.raises(fabtest.UsageError, match="fabtest.run: no agent configured"):
        fabtest.run(user=["Hi"], settings=_settings())
    with pytest.raises(fabtest.UsageError, match="nosuchmodule"):
        fabtest.run("nosuchmodule:agent", user=["Hi"], settings=_settings())


def test_judge_from_pyproject_through_google_genai_against_fake_gemini(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.fabtest.judge]
        model = "gemini-2.5-flash"
        max_retries = 1
        timeout = 5
    """))

    def verdicts(request: Any) -> dict[str, Any] | None:
        names = [n for n in ("The agent quotes a price", "The agent is rude") if n in request.text]
        if not names:
            return None
        return {"verdicts": [{"criterion": n, "verdict": "passed" if "price" in n else "failed", "reasoning": "seen"}
                             for n in names]}

    with FakeGemini() as server:
        server.add_rule(r"quotes a price|is rude", callback=verdicts)
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        result = fabtest.run(BookingBot(), user=["A room in Berlin"], should=["The agent is rude"],
                             must=["The agent quotes a price"], root=tmp_path)
        requests = server.requests
    assert result.passed, result.failure_message
    assert [(e.criterion, e.status) for e in result.evaluations] == [("The agent is rude", "failed")]
    assert [(e.criterion, e.status) for e in result.expectations] == [("The agent quotes a price", "passed")]
    # the must in a call of its own, the should in another (issue 27 point 7)
    assert len(requests) == 2 and all("gemini-2.5-flash" in r.path for r in requests)
    assert result.usage["judge"].calls == 2


class RefundDesk:
    """Asks approval before a refund; refunds what the approval allows."""

    def chat(self, messages: list[Message]) -> AgentResponse:
        decisions = messages[-1].decisions
        if not decisions:
            return AgentResponse("May I refund 30 EUR?", pauses=[fabtest.Pause(tool="refund", arguments={"amount": 30})])
        if decisions[0].decision == "rejected":
            return AgentResponse(f"Not refunded: {decisions[0].reason}")
        amount = (decisions[0].arguments or {}).get("amount", 30)
        return AgentResponse(f"Refunded {amount} EUR.", [ToolCall("refund", {"amount": amount})])


def test_a_scripted_user_decides_pauses_with_decide() -> None:
    approved = fabtest.run(RefundDesk(), user=["Refund A1", fabtest.Decide("approve", arguments={"amount": 20})],
                           must_call=["refund"], settings=_settings())
    assert approved.passed and approved.transcript[1].agent == "Refunded 20 EUR."
    [pause] = approved.transcript[0].pauses
    assert (pause.decision, pause.edited_arguments, pause.decided_in_turn) == ("edited", {"amount": 20}, 2)
    rejected = fabtest.run(RefundDesk(), user=["Refund A1", fabtest.Decide("reject", reason="no receipt")],
                           must_not_call=["refund"], settings=_settings())
    assert rejected.passed and rejected.transcript[1].user == "no receipt"
    assert rejected.transcript[0].pauses[0].reason == "no receipt"
    # deciding when nothing waits is the scenario's failure, naming what the agent did
    early = fabtest.run(RefundDesk(), user=[fabtest.Decide("approve")], settings=_settings())
    assert early.failure_type == "assertion" and "nothing is pending" in (early.failure_message or "")
    with pytest.raises(fabtest.UsageError, match="an answer needs answer="):
        fabtest.Decide("answer")
    with pytest.raises(fabtest.UsageError, match="only an approval edits"):
        fabtest.Decide("reject", arguments={"amount": 1})
