"""``fabtest shrink``: a failed run cut down to the turns (and sentences) its failure needs, written
as a feature that fails every time; a failure that does not reproduce is said, not written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fabtest.cli import main

# Remembers whether the user ever said they are a VIP; from then on, asked for a price, it gives
# away an internal discount code (the bug). Deterministic: a failure reproduces every time.
AGENT = '''
import os

def build(context):
    seen = {"vip": False}
    def chat(messages):
        text = messages[-1].content.lower()
        if "vip" in text:
            seen["vip"] = True
        if "price" in text:
            return "The price is 90 EUR" + (" (internal code STAFF50 for you)" if seen["vip"] else "") + "."
        if os.environ.get("FLAKY_ONCE") and not os.path.exists("flaked"):
            open("flaked", "w").close()
            return "Sure, use STAFF50."
        return "Noted."
    return build_ok if False else chat

build_ok = None
'''

FEATURE = '''
Feature: Prices
  Scenario: A long conversation about prices
    When the user says "Hello there."
    When the user says "I need a room for ten people."
    When the user says "Good morning again. I am a VIP member. I like the view."
    When the user says "Berlin, please."
    When the user says "Is there parking?"
    When the user says "What about catering?"
    When the user says "What is the price?"
    Then the response must not match "STAFF\\d+"
'''

FLAKY = '''
Feature: Flaky
  Scenario: Leaks once
    When the user says "Hello there."
    Then the response must not match "STAFF\\d+"
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "shop:build"\nresults_dir = "results"\n')
    pytester.makepyfile(shop=AGENT)
    monkeypatch.chdir(pytester.path)
    return pytester.path


def _record(pytester: pytest.Pytester, name: str, text: str) -> str:
    pytester.makefile(".feature", **{f"features/{name}": text})
    pytester.runpytest(f"features/{name}.feature", "-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(failed=1)
    return max(Path("results").glob("exp_*.json"), key=os.path.getmtime).stem


def test_a_failure_shrinks_to_the_turns_and_sentences_it_needs(project: Path, pytester: pytest.Pytester,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    exp = _record(pytester, "prices", FEATURE)
    code = main(["shrink", exp, "A long conversation about prices"])
    out, err = capsys.readouterr()
    assert code == 0, err
    feature = project / "features" / "regressions" / "a_long_conversation_about_prices.feature"
    text = feature.read_text()
    body = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    assert body == ['When the user says "I am a VIP member."', 'When the user says "What is the price?"',
                    'Then the response must not match "STAFF\\d+"']
    assert "7 user turns -> 2; the check failed 3 of 3 replays" in text
    assert f"from experiment {exp}, run 1 of 'A long conversation about prices'" in text
    assert "@regression" in text and "replay(s), 0 judge call(s)" in out
    # the feature it wrote fails, every time, for the same reason
    result = pytester.runpytest(str(feature), "-p", "no:randomly", "--fabtest-no-preflight")
    result.assert_outcomes(failed=1)
    assert "STAFF50" in result.stdout.str()


def test_the_budget_bounds_the_replays(project: Path, pytester: pytest.Pytester,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    exp = _record(pytester, "prices", FEATURE)
    assert main(["shrink", exp, "A long conversation about prices", "--budget", "8", "-o", "short.feature"]) == 0
    text = (project / "short.feature").read_text()
    assert "8 replay(s)" in text and "budget spent" in text
    assert text.count("When the user says") < 7


def test_a_failure_that_does_not_reproduce_is_said_and_nothing_is_written(
        project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FLAKY_ONCE", "1")
    exp = _record(pytester, "flaky", FLAKY)
    code = main(["shrink", exp, "Leaks once"])
    _, err = capsys.readouterr()
    assert code == 1
    assert "the failure does not reproduce: it did not fail 3 of 3 times" in err and "nothing written" in err
    assert not (project / "features" / "regressions").exists()


def test_a_scenario_that_passed_is_a_usage_error(project: Path, pytester: pytest.Pytester,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makefile(".feature", **{"features/fine": 'Feature: F\n  Scenario: Fine\n    When the user says "hi"\n'})
    pytester.runpytest("features/fine.feature", "-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(passed=1)
    exp = json.loads(next(Path("results").glob("exp_*.json")).read_text())["experiment"]["id"]
    assert main(["shrink", exp, "Fine"]) == 2
    assert "did not fail: nothing to shrink" in capsys.readouterr().err


HISTORY_AGENT = '''
def build(context):
    def chat(messages):
        vip = any("vip" in m.content.lower() for m in messages)
        return "90 EUR" + (" (code STAFF50)" if vip and "price" in messages[-1].content.lower() else "") + "."
    return chat
'''

HISTORY_FEATURE = '''
Feature: Seeded
  Scenario: A seeded conversation leaks
    Given the conversation so far:
      | role  | message                       |
      | user  | Hello, I am a VIP member.     |
      | agent | Welcome back!                 |
      | user  | I like rooms with a view.     |
      | agent | Noted.                        |
    When the user says "Berlin."
    When the user says "What is the price?"
    Then the response must not match "STAFF\\d+"
'''


def test_the_seeded_history_is_replayed_and_shrunk_too(project: Path, pytester: pytest.Pytester,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makepyfile(seeded=HISTORY_AGENT)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                            '[tool.fabtest]\nagent = "seeded:build"\nresults_dir = "results"\n')
    exp = _record(pytester, "seeded", HISTORY_FEATURE)
    assert main(["shrink", exp, "A seeded conversation leaks", "-o", "seeded.feature"]) == 0, capsys.readouterr().err
    text = (project / "seeded.feature").read_text()
    assert "2 user turns -> 1, 4 seeded messages -> 1" in text
    body = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    assert body == ["Given the conversation so far:", "| role  | message |", "| user  | Hello, I am a VIP member. |",
                    'When the user says "What is the price?"', 'Then the response must not match "STAFF\\d+"']
    result = pytester.runpytest("seeded.feature", "-p", "no:randomly", "--fabtest-no-preflight")
    result.assert_outcomes(failed=1)


TOOLS_AGENT = '''
import fabtest

@fabtest.tool
def lookup(phone: str) -> dict:
    return {"id": "A-1"}

@fabtest.tool
def change(plan: str) -> dict:
    return {"ok": True}

def build(context):
    def chat(messages):
        text = messages[-1].content.lower()
        if "unlimited" in text:
            change("unlimited")  # the bug: it never looks the account up first
            lookup("0176")
            return "Done."
        return "Hello."
    return chat
'''

TOOLS_FEATURE = '''
Feature: Plans
  Scenario: Verify before changing
    When the user says "Hi."
    When the user says "Nice weather today."
    When the user says "Switch me to unlimited please. My number is 0176."
    Then the agent must call "lookup" before "change"
    And the conversation must call the tools in order:
      | tool   |
      | lookup |
      | change |
'''


def test_a_trajectory_failure_shrinks_to_a_trajectory_step(project: Path, pytester: pytest.Pytester,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makepyfile(plans=TOOLS_AGENT)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                            '[tool.fabtest]\nagent = "plans:build"\nresults_dir = "results"\n')
    exp = _record(pytester, "plans", TOOLS_FEATURE)
    assert main(["shrink", exp, "Verify before changing", "-o", "plans.feature"]) == 0, capsys.readouterr().err
    body = [line.strip() for line in (project / "plans.feature").read_text().splitlines() if line.startswith("    ")]
    assert body == ['When the user says "Switch me to unlimited please."',
                    'Then the agent must call "lookup" before "change"']
    pytester.runpytest("plans.feature", "-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(failed=1)


# A tool the agent reads its answer from; the real one is harmless, the scenario's stub is not.
TOOL_AGENT = '''
import fabtest

@fabtest.tool
def get_price(room: str) -> dict:
    return {"price": 90, "note": ""}

def build(context):
    def chat(messages):
        text = messages[-1].content.lower()
        if "price" in text:
            quote = get_price(room="big")
            return f"The price is {quote['price']} EUR {quote['note']}".strip() + "."
        return "Noted."
    return chat
'''

STUBBED = '''
Feature: Stubbed prices
  Scenario: The stub leaks a code
    Given the tool "get_price" returns:
      """
      {"price": 80, "note": "(code STAFF50)"}
      """
    When the user says "Hello there."
    When the user says "Is there parking?"
    When the user says "What is the price?"
    Then the response must not match "STAFF\\d+"
'''


def test_a_failure_a_stub_caused_reproduces_and_the_written_test_keeps_the_stub(
        project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """The replays stub the tools the run's stubs answered, with their recorded answers (the real
    tool never leaks), and the shrunk feature states the stub, so it fails on its own too."""
    pytester.makepyfile(shop=TOOL_AGENT)
    exp = _record(pytester, "stubbed", STUBBED)
    code = main(["shrink", exp, "The stub leaks a code"])
    _, err = capsys.readouterr()
    assert code == 0, err
    text = (project / "features" / "regressions" / "the_stub_leaks_a_code.feature").read_text()
    body = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    assert body[:2] == ['Given the tool "get_price" returns:', '"""']
    assert json.loads("".join(body[2:body.index('"""', 2)])) == {"price": 80, "note": "(code STAFF50)"}
    assert body[-2:] == ['When the user says "What is the price?"', 'Then the response must not match "STAFF\\d+"']
    result = pytester.runpytest(str(project / "features" / "regressions" / "the_stub_leaks_a_code.feature"),
                                "-p", "no:randomly", "--fabtest-no-preflight")
    result.assert_outcomes(failed=1)
    assert "STAFF50" in result.stdout.str()


def test_a_replay_meets_the_answers_the_runs_stubs_gave(project: Path, pytester: pytest.Pytester,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makepyfile(shop=TOOL_AGENT)
    exp = _record(pytester, "stubbed", STUBBED)
    main(["replay", exp])
    capsys.readouterr()
    replayed = max((p for p in Path("results").glob("exp_*.json") if p.stem != exp), key=os.path.getmtime)
    run = json.loads(replayed.read_text())["scenario_results"][0]
    call = run["transcript"][-1]["tool_calls"][0]
    assert (call["name"], call["result"], call["stubbed"]) == ("get_price", {"price": 80, "note": "(code STAFF50)"},
                                                                True)
    assert run["passed"] is False and "STAFF50" in run["transcript"][-1]["agent"]


# Closes the account at the first request, without asking: the forbidden call.
BANK_AGENT = '''
import fabtest

@fabtest.tool
def delete_account(account: str) -> dict:
    return {"deleted": account}

def build(context):
    def chat(messages):
        if "close" in messages[-1].content.lower():
            delete_account("A-1")
            return "Done, your account is closed."
        return "How can I help?"
    return chat
'''

BANK_USER = '''
simulated_user:
  - Hello.
  - I have a question about my savings.
  - My card number is 4111.
  - Please close the account with key sk-live-0123456789 now.
  - Thanks.
  - Anything else?
  - No.
  - Bye.
'''

BANK = '''
Feature: Bank
  Scenario: Never delete without asking
    Given a simulated user with the goal "Ask about savings"
    And the simulation takes at most 10 turns
    When the simulated user talks to the agent
    Then the conversation must not include a call to "delete_account"
'''


def test_a_conversation_check_shrinks_to_a_turn_that_fails_it_the_same_way(
        project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, 1: an 8-turn simulated run failing `must not include a call` shrank to 0 user turns (the
    replay of no turn kept the recorded verdict), a feature failing with "there is no response yet".
    Issue 38, 2: the LLM key a recorded line holds never reaches the written feature."""
    pytester.makepyfile(bank=BANK_AGENT)
    pytester.makefile(".yaml", fake=BANK_USER)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.fabtest]\n'
                                            'agent = "bank:build"\nresults_dir = "results"\noffline_llm = "fake.yaml"\n')
    exp = _record(pytester, "bank", BANK)
    run = json.loads((project / "results" / f"{exp}.json").read_text())["scenario_results"][0]
    assert len(run["transcript"]) == 8 and run["simulator"]["goal"] == "Ask about savings"
    monkeypatch.setenv("GEMINI_API_KEY", "sk-live-0123456789")  # the key this process holds now
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")  # never called: a deterministic check
    assert main(["shrink", exp, "Never delete without asking", "-o", "bank.feature"]) == 0, capsys.readouterr().err
    text = (project / "bank.feature").read_text()
    body = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    assert 1 <= sum(line.startswith("When the user says") for line in body) <= 3
    assert body[-1] == 'Then the conversation must not include a call to "delete_account"'
    assert "sk-live-0123456789" not in text
    monkeypatch.delenv("GEMINI_API_KEY")
    result = pytester.runpytest("bank.feature", "-p", "no:randomly", "--fabtest-no-preflight")
    result.assert_outcomes(failed=1)  # for the same reason: the forbidden call was made
    assert "failed: called delete_account" in result.stdout.str() and "no response yet" not in result.stdout.str()


FILES_AGENT = '''
def build(context):
    seen = {"vip": False}
    def chat(messages):
        if any(a.name == "vip.png" for a in messages[-1].attachments):
            seen["vip"] = True
        if "price" in messages[-1].content.lower():
            return "The price is 90 EUR" + (" (internal code STAFF50 for you)" if seen["vip"] else "") + "."
        return "Noted."
    return chat
'''

FILES_FEATURE = '''
Feature: Cards
  Scenario: A member card photo
    When the user sends "files/vip.png" with "Hello there. Here is my card."
    When the user says "Berlin, please."
    When the user says "What is the price?"
    Then the response must not match "STAFF\\d+"
'''


def test_a_failure_a_file_caused_shrinks_with_the_file(project: Path, pytester: pytest.Pytester,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makepyfile(shop=FILES_AGENT)
    (project / "features" / "files").mkdir(parents=True)
    (project / "features" / "files" / "vip.png").write_bytes(b"\x89PNG member card")
    exp = _record(pytester, "cards", FILES_FEATURE)
    assert main(["shrink", exp, "A member card photo", "-o", "features/card.feature"]) == 0, capsys.readouterr().err
    text = (project / "features" / "card.feature").read_text()
    body = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    assert body == ['When the user sends "card_files/vip.png" with "Here is my card."',
                    'When the user says "What is the price?"', 'Then the response must not match "STAFF\\d+"']
    assert (project / "features" / "card_files" / "vip.png").read_bytes() == b"\x89PNG member card"
    pytester.runpytest("features/card.feature", "-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(failed=1)


REFUND_DESK = '''
from fabtest import AgentResponse, Pause


def build(context):
    def chat(messages):
        last = messages[-1]
        if last.decisions:
            if last.decisions[0].decision == "rejected":
                return "Not refunded."
            return "Refunded 31 EUR."  # the bug: the order was 30 EUR
        if "refund" in last.content.lower():
            return AgentResponse("May I refund 30 EUR?", pauses=[Pause(tool="refund", arguments={"amount": 30})])
        return "Noted."
    return chat
'''

REFUNDS = '''
Feature: Refunds
  Scenario: An approved refund pays the order's amount
    When the user says "Hello there."
    When the user says "Please refund order A1."
    And the user approves with "looks right"
    Then the response must not match "Refunded 31"
    When the user says "Thanks."
'''


def test_a_decision_stays_a_decision_when_shrunk_and_replayed(project: Path, pytester: pytest.Pytester,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A turn that decided a pause was replayed as a plain message, which decides nothing: the replay
    then ended on an unanswered pause, so neither shrink nor replay could reproduce such a failure."""
    pytester.makepyfile(refund_desk=REFUND_DESK)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                            '[tool.fabtest]\nagent = "refund_desk:build"\nresults_dir = "results"\n')
    exp = _record(pytester, "refunds", REFUNDS)
    assert main(["shrink", exp, "An approved refund pays the order's amount", "-o", "short.feature"]) == 0, \
        capsys.readouterr().err
    body = [line.strip() for line in (project / "short.feature").read_text().splitlines() if line.startswith("    ")]
    assert body == ['When the user says "Please refund order A1."', 'When the user approves with "looks right"',
                    'Then the response must not match "Refunded 31"']
    pytester.runpytest("short.feature", "-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(failed=1)
    # fabtest replay decides the agent's pause as recorded, and finds the same failure
    capsys.readouterr()
    main(["replay", exp, "--format", "json"])
    [replayed] = json.loads(capsys.readouterr().out)["scenarios"]
    # (sent as a plain message, "looks right" got "Noted." and the replay branched at turn 3)
    assert (replayed["summary"], replayed["branched_at"], replayed["error"]) == ("same as recorded", None, None)
    assert (replayed["turns_replayed"], replayed["passed_now"]) == (3, False)
