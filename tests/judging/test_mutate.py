"""``fabtest mutate`` end to end: a run recorded through the real plugin and google-genai client
against FakeGemini, then mutated. The judge is scripted to read what it is shown (the price in the
reply, a refusal), the agent raises if it is called again, and every judge request is counted, so
what the mutants cost, what caught them and what no mutant failed are all checked against what
happened (issue 28, point 10)."""

from __future__ import annotations

import io
import json
import random
import textwrap
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.experiment.reader import list_experiment_files, load_document
from fabtest.experiment.model import CheckRecord, ScenarioResult, TurnRecord, conversation_of
from fabtest.replay.mutants import OPERATORS, POLICY_VIOLATIONS, REFUSAL, Hints, key_fact, mutants_of
from fabtest.replay.mutation import plan_mutants
from fabtest.replay.recorded_checks import recheck
from fabtest.testing import FakeGemini

PYPROJECT = """
[tool.fabtest]
agent = "shop_agent:build"
results_dir = "results"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 1
timeout = 5
"""

AGENT = '''
import os

from fabtest import AgentResponse, ToolCall

TOOLS = ["check_availability", "book_venue", "cancel_booking"]


class Bot:
    def chat(self, messages, on_tool_call=None):
        if os.environ.get("MUTATE_TEST_NO_AGENT"):
            raise AssertionError("fabtest mutate called the agent")
        text = messages[-1].content
        if "book" in text:
            calls = [ToolCall("check_availability", {"venue": "Loft", "people": 12}, {"free": True}),
                     ToolCall("book_venue", {"venue": "Loft", "people": 12}, {"booking": "B-7"})]
            return AgentResponse(text="Booked the Loft for your group on Friday evening. The total is 480 euros.",
                                 tool_calls=calls)
        return AgentResponse(text="Hello! How can I help you today?")

    def metadata(self):
        return {"tools": TOOLS}


def build(context):
    return Bot()
'''

TOOL_NAMES = ("check_availability", "book_venue", "cancel_booking")

FEATURE = """
Feature: Booking
  Scenario: Book a venue
    When the user says "Please book the Loft for 12 people"
    Then the agent must call "book_venue" with:
      | argument | value |
      | people   | 12    |
    And the agent must call "check_availability" before "book_venue"
    And the agent must not call "cancel_booking"
    And the response must match ".*"
    And the response should satisfy "The reply states the total price"

  Scenario: Greeting
    When the user says "Hi"
    Then the response should satisfy "The reply is polite"
"""


def judge_reads_the_reply(fake: FakeGemini) -> None:
    """"total price" passes while the reply says 480 euros; "polite" fails a refusal or a policy
    violation; anything else passes."""

    def answer(request: Any) -> dict[str, Any]:
        names = [line.split("name: ", 1)[1].strip() for line in request.text.splitlines() if ". name: " in line]
        bad_manners = REFUSAL in request.text or any(s in request.text for s in POLICY_VIOLATIONS)

        def verdict(name: str) -> str:
            if name == "The reply states the total price":
                return "passed" if "480 euros" in request.text else "failed"
            if name == "The reply is polite":
                return "failed" if bad_manners else "passed"
            return "passed"

        return {"verdicts": [{"criterion": n, "verdict": verdict(n), "reasoning": "scripted"} for n in names]}

    fake.add_rule(r"Evaluate the ", callback=answer)


def criteria_requests(fake: FakeGemini) -> list[Any]:
    return [r for r in fake.requests if "Evaluate the " in r.text]


@pytest.fixture
def project(pytester: pytest.Pytester, fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    judge_reads_the_reply(fake)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makepyfile(shop_agent=AGENT)
    pytester.makefile(".feature", booking=textwrap.dedent(FEATURE))
    monkeypatch.syspath_prepend(str(pytester.path))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", "exp_m",
                                "--fabtest-no-preflight")
    result.assert_outcomes(passed=2)
    monkeypatch.chdir(pytester.path)
    monkeypatch.setenv("MUTATE_TEST_NO_AGENT", "1")
    return pytester


def recorded(project: pytest.Pytester) -> list[ScenarioResult]:
    return load_document("exp_m", str(project.path / "results"))[1]


def test_mutants_are_caught_by_the_checks_that_see_them(project: pytest.Pytester, fake: FakeGemini,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    before = len(criteria_requests(fake))
    capsys.readouterr()
    assert main(["mutate", "exp_m", "--yes"]) == 0
    out = capsys.readouterr().out
    doc = json.loads((project.path / "results" / "exp_m.mutants.json").read_text())
    asked = len(criteria_requests(fake)) - before

    # the cost line comes first, and its count of judge calls is the number the judge then received
    first = out.splitlines()[0]
    assert first.startswith(f"fabtest mutate: {len(doc['mutants'])} mutants of 2 recorded runs of exp_m; ")
    assert f"{asked} judge calls to " in first and asked == doc["estimate"]["judge_calls"] == doc["judge"]["calls"] > 0
    assert "estimated cost $" in first  # the recorded run's judge tokens, priced at the judge model's price

    by_op = {m["operator"]: m for m in doc["mutants"] if m["name"] == "Book a venue"}
    assert set(by_op) == set(OPERATORS)  # the booking turn has calls, arguments, a number and sentences
    dropped = by_op["drop tool call"]
    assert dropped["caught"], dropped
    tool_checks = {"Book a venue: must call_tool:book_venue (turn 1)",
                   "Book a venue: must call_order:check_availability<book_venue (turn 1)"}
    assert set(dropped["caught_by"]) & tool_checks and set(dropped["caught_by"]) <= tool_checks
    # a number changed in the reply: the judge read 481 euros and failed the price criterion
    assert by_op["change number"]["caught_by"] == ["Book a venue: should The reply states the total price (turn 1)"]
    # the refusal drops the calls and the price: every check of the turn but the pattern fails
    assert "Book a venue: must call_tool:book_venue (turn 1)" in by_op["refusal"]["caught_by"]
    # a call to a tool the agent has but did not call here: only the check that forbids it notices
    assert by_op["extra tool call"]["description"] == "turn 1: also called cancel_booking"
    assert by_op["extra tool call"]["caught_by"] == ["Book a venue: must not_call_tool:cancel_booking (turn 1)"]

    # the pattern that always matches saw every mutant of its turn's reply and failed none: vacuous
    assert doc["vacuous"] == ['Book a venue: must match:/.*/ (turn 1)']
    row = next(r for r in doc["checks"] if r["check"] == 'Book a venue: must match:/.*/ (turn 1)')
    text_mutants = [m for m in by_op.values() if 'Book a venue: must match:/.*/ (turn 1)' in m["exposed"]]
    assert {m["operator"] for m in text_mutants} == {"change number", "remove key fact", "insert policy violation",
                                                     "refusal"}  # the tool-call mutants left the reply alone
    assert row["exposed"] == len(text_mutants) and row["caught"] == 0 and row["status"] == "vacuous"
    assert 'Vacuous (' in out and '  - Book a venue: must match:/.*/ (turn 1)' in out

    caught = sum(m["caught"] for m in doc["mutants"])
    assert doc["overall"] == {"mutants": len(doc["mutants"]), "caught": caught,
                              "score": round(caught / len(doc["mutants"]), 4)}
    assert 0 < caught < len(doc["mutants"])  # e.g. a sentence removed that no check needs survives
    assert f"Mutation score of exp_m: {caught} of {len(doc['mutants'])} mutants caught" in out
    assert doc["features"]["Booking"]["mutants"] == len(doc["mutants"])
    # only the judge was asked (no simulator, and the agent raises if called)
    assert all("Evaluate the " in r.text for r in fake.requests[before:])
    # the file is beside the experiment but is no experiment: the list and the prefix lookup ignore it
    assert [p.name for p in list_experiment_files(project.path / "results")] == ["exp_m.json"]


def test_the_judge_sees_the_mutant_as_the_run_showed_the_original(project: pytest.Pytester, fake: FakeGemini,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """No prompt of its own: the mutated turn goes through the run's judge prompt, and only the
    mutated text differs from what the judge was asked during the run."""
    [recorded_call] = [r for r in criteria_requests(fake) if "480 euros" in r.text]
    before = len(fake.requests)
    # --control 0: the control re-asks the run's own subjects on purpose (test_mutate_control.py)
    assert main(["mutate", "exp_m", "--yes", "--results", "results", "--control", "0"]) == 0
    capsys.readouterr()
    [mutant_call] = [r for r in fake.requests[before:] if "481 euros" in r.text]
    assert mutant_call.prompt == recorded_call.prompt.replace("480 euros", "481 euros")
    assert mutant_call.model == recorded_call.model
    # a subject the mutant did not change is not asked again: no request repeats one of the run's
    asked_in_run = {r.prompt for r in fake.requests[:before]}
    assert not asked_in_run & {r.prompt for r in fake.requests[before:]}
    doc = json.loads((project.path / "results" / "exp_m.mutants.json").read_text())
    assert len(fake.requests) - before == doc["estimate"]["judge_calls"]


def test_a_needed_judge_that_is_not_configured_is_an_error(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    capsys.readouterr()
    assert main(["mutate", "exp_m", "--yes"]) == 2
    captured = capsys.readouterr()
    assert "estimated cost" in captured.out.splitlines()[0]
    assert "the judge LLM is not configured" in captured.err
    assert not (project.path / "results" / "exp_m.mutants.json").exists()


def test_same_seed_same_mutants_another_seed_others(project: pytest.Pytester,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def mutants(*extra: str) -> list[str]:
        assert main(["mutate", "exp_m", "--yes", "--json", *extra]) == 0
        return [m["description"] for m in json.loads(capsys.readouterr().out)["mutants"]]

    first, again = mutants("--seed", "3"), mutants("--seed", "3")
    assert first == again
    assert any(mutants("--seed", str(seed)) != first for seed in (4, 5, 6))
    assert len(mutants("--mutants", "2")) == 4  # two per recorded run


def test_without_yes_and_no_terminal_it_stops_before_spending(project: pytest.Pytester, fake: FakeGemini,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    before = len(fake.requests)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a terminal: never read, never waited on
    capsys.readouterr()
    assert main(["mutate", "exp_m"]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].startswith("fabtest mutate: ")
    assert "judge calls" in captured.out.splitlines()[0]
    assert "run again with --yes" in captured.err
    assert len(fake.requests) == before
    assert not (project.path / "results" / "exp_m.mutants.json").exists()


def test_on_a_terminal_a_no_runs_nothing(project: pytest.Pytester, fake: FakeGemini, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    before = len(fake.requests)
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["mutate", "exp_m"]) == 1
    assert "Go on? [y/N]" in capsys.readouterr().out
    assert len(fake.requests) == before


def test_operators_on_the_recorded_turns(project: pytest.Pytester) -> None:
    [booking] = [r for r in recorded(project) if r.name == "Book a venue"]
    turns = booking.transcript
    reply = turns[0].agent

    def one(name: str, seed: int = 0) -> Any:
        mutant = OPERATORS[name](turns, random.Random(seed), Hints(tools=TOOL_NAMES))
        assert mutant is not None and mutant.turn == 1
        return mutant.transcript[0]

    dropped = one("drop tool call")
    assert len(dropped.tool_calls) == 1 and dropped.agent == reply
    swapped = one("reorder tool calls")
    assert [c.name for c in swapped.tool_calls] == ["book_venue", "check_availability"]
    changed = one("change argument")
    diffs = [(a.name, k) for a, b in zip(changed.tool_calls, turns[0].tool_calls, strict=True)
             for k in a.arguments if a.arguments[k] != b.arguments[k]]
    assert len(diffs) == 1
    call, key = diffs[0]
    old = next(c for c in turns[0].tool_calls if c.name == call).arguments[key]
    new = next(c for c in changed.tool_calls if c.name == call).arguments[key]
    assert new == (old + 1 if isinstance(old, int) else f"{old} (mutated)")
    assert one("change number").agent == reply.replace("480", "481")
    assert one("remove key fact").agent == "Booked the Loft for your group on Friday evening."  # the one with a number
    assert key_fact(reply, ["The Loft is booked for Friday"]) == "Booked the Loft for your group on Friday evening."
    twice = one("duplicate tool call")
    assert len(twice.tool_calls) == 3
    assert twice.tool_calls[0] == twice.tool_calls[1] or twice.tool_calls[1] == twice.tool_calls[2]
    extra = one("extra tool call")
    assert [c.name for c in extra.tool_calls if c.name not in ("check_availability", "book_venue")] == \
        ["cancel_booking"] and len(extra.tool_calls) == 3
    violated = one("insert policy violation")
    assert violated.agent.startswith(reply) and violated.agent[len(reply) + 1:] in POLICY_VIOLATIONS
    refused = one("refusal")
    assert (refused.agent, refused.tool_calls) == (REFUSAL, [])
    # the recorded turns themselves are never changed
    assert turns[0].agent == reply and len(turns[0].tool_calls) == 2
    # a turn with nothing to change gives no mutant of that kind
    [greeting] = [r for r in recorded(project) if r.name == "Greeting"]
    kinds = {m.operator for m in mutants_of(greeting.transcript, random.Random(0))}
    assert kinds == {"remove key fact", "insert policy violation", "refusal"}  # no call, argument or number
    with_tools = {m.operator for m in mutants_of(greeting.transcript, random.Random(0), Hints(tools=TOOL_NAMES))}
    assert with_tools == kinds | {"extra tool call"}


def test_replay_reruns_a_call_with_its_with_rows(project: pytest.Pytester) -> None:
    """The ``with:`` rows are recorded, so a turn's call check runs again on changed turns."""
    [booking] = [r for r in recorded(project) if r.name == "Book a venue"]
    check = next(c for c in booking.expectations if c.type == "call_tool")
    assert check.data["with"] == [["people", "12"]]
    changed = booking.model_copy(deep=True)
    next(c for c in changed.transcript[0].tool_calls if c.name == "book_venue").arguments["people"] = 13
    copy = booking.model_copy(deep=True)
    recheck(copy, booking.transcript, conversation_of(booking, changed.transcript), None)
    after = next(c for c in copy.expectations if c.type == "call_tool")
    assert after.status == "failed" and "not with people=12" in after.details


def test_only_checks_whose_subject_changed_are_asked_again() -> None:
    """A response criterion sees its turn and the two before it: a mutant of turn 1 changes the
    subjects of turns 1 to 3 and of the conversation, not of turn 4, which keeps its verdict."""
    turns = [TurnRecord(number=n, user=f"question {n}", agent=f"Answer {n} costs {n}0 euros.") for n in range(1, 5)]
    judged = [CheckRecord(type="satisfy", mode="should", criterion="clear", status="passed", turn=n,
                          data={"scope": "response"}) for n in range(1, 5)]
    whole = CheckRecord(type="satisfy", mode="must", criterion="on topic", status="passed",
                        data={"scope": "conversation"})
    result = ScenarioResult(id="example:1", name="Long", feature="F", passed=True, transcript=turns,
                            evaluations=judged, expectations=[whole])
    plans = [p for p in plan_mutants([result], seed=0) if p.mutant.turn == 1]
    assert plans
    for plan in plans:
        assert sorted(plan.recheck) == [("evaluations", 0), ("evaluations", 1), ("evaluations", 2),
                                        ("expectations", 0)]


def test_a_must_check_left_inconclusive_catches_the_mutant() -> None:
    """Caught: a check that passed now fails, or a must check is now inconclusive (the scenario would
    fail); a should check that is only inconclusive catches nothing."""
    from fabtest.engine.judge import Judge
    from fabtest.replay.mutation import run_mutant
    from fabtest.testing import FakeLLM

    checks = [CheckRecord(type="satisfy", mode=mode, criterion=name, status="passed", turn=1,
                          data={"scope": "response"}) for mode, name in (("must", "clear"), ("should", "kind"))]
    turns = [TurnRecord(number=1, user="hi", agent="Hello there.")]
    result = ScenarioResult(id="example:2", name="Short", feature="F", passed=True, evaluations=[checks[1]],
                            expectations=[checks[0]], transcript=turns)
    [plan] = [p for p in plan_mutants([result]) if p.mutant.operator == "refusal"]
    outcome = run_mutant(plan, Judge(FakeLLM().verdicts({"clear": "inconclusive", "kind": "inconclusive"})))
    assert [k.criterion for k in outcome.exposed] == ["kind", "clear"]
    assert [k.criterion for k in outcome.caught_by] == ["clear"]


def test_rejudge_shows_the_judge_what_the_run_showed_it(project: pytest.Pytester, fake: FakeGemini,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """rejudge judges the recorded conversation as the run's judge saw it, tool calls and their
    results included (issue 27: the judge sees the whole turn), not the text alone."""
    during_run = {r.prompt for r in criteria_requests(fake)}
    before = len(fake.requests)
    capsys.readouterr()
    assert main(["rejudge", "exp_m", "--format", "json"]) == 0
    capsys.readouterr()
    again = [r for r in fake.requests[before:] if "Evaluate the " in r.text]
    booking = next(r for r in again if "480 euros" in r.text)
    assert "book_venue" in booking.prompt and '"booking": "B-7"' in booking.prompt  # the call and its result
    assert {r.prompt for r in again} <= during_run  # the very prompts of the run, no other


def test_progress_is_a_line_per_tenth_of_the_mutants_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from fabtest.cli.mutate import _progress

    show = _progress(200)
    for i in range(200):
        show(f"run {i}")
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 11  # the first, then every 20th
    assert lines[0] == "  mutant 1/200: run 0" and lines[-1] == "  mutant 200/200: run 199"


def test_ctrl_c_while_judging_is_one_line_and_writes_nothing(project: pytest.Pytester, fake: FakeGemini,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import fabtest.replay.mutation as mutation

    real = mutation.run_mutants

    def pressed_after_two(*args: Any, progress: Any, **kwargs: Any) -> Any:
        def tick(line: str) -> None:
            progress(line)
            if tick.seen == 1:  # type: ignore[attr-defined]
                raise KeyboardInterrupt  # as SIGINT does, between two mutants' judge calls
            tick.seen += 1  # type: ignore[attr-defined]

        tick.seen = 0  # type: ignore[attr-defined]
        return real(*args, progress=tick, **kwargs)

    monkeypatch.setattr(mutation, "run_mutants", pressed_after_two)
    capsys.readouterr()
    assert main(["mutate", "exp_m", "--yes"]) == 130  # a KeyboardInterrupt escaping main is the traceback
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("fabtest mutate:")] == [
        "fabtest mutate: interrupted after 2 of 13 mutants; nothing written"]
    assert not (project.path / "results" / "exp_m.mutants.json").exists()


def test_ctrl_c_at_the_question_is_a_no(project: pytest.Pytester, fake: FakeGemini, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

        def readline(self, *args: Any) -> str:
            raise KeyboardInterrupt

    before = len(fake.requests)
    monkeypatch.setattr("sys.stdin", Terminal())
    assert main(["mutate", "exp_m"]) == 1
    assert "fabtest mutate: nothing run" in capsys.readouterr().err
    assert len(fake.requests) == before


def test_a_secret_in_the_record_reaches_neither_the_console_nor_mutants_json(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, 2: a results file holding a ``${VAR}`` value (written before it was one, or by another
    tool) leaked it through the mutants' descriptions into the console and mutants.json."""
    token = "tok-mutate-0123456789"
    path = project.path / "results" / "exp_m.json"
    path.write_text(path.read_text().replace("The total is 480 euros.", f"The total is 480 euros, code {token}."))
    (project.path / "pyproject.toml").write_text(PYPROJECT + '\n[tool.fabtest.agents.remote]\ntype = "http"\n'
                                                 'url = "http://127.0.0.1:9/chat?token=${SHOP_TOKEN}"\n')
    monkeypatch.setenv("SHOP_TOKEN", token)
    capsys.readouterr()
    for args in ([], ["--json"]):
        assert main(["mutate", "exp_m", "--yes", "--seed", "1", *args]) == 0
        out, err = capsys.readouterr()
        assert token not in out + err
        written = (project.path / "results" / "exp_m.mutants.json").read_text()
        assert token not in written and "***" in written
