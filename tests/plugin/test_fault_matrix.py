"""The fault matrix: ``--fabtest-fault TOOL=KIND`` in one run, and ``fabtest faults`` over a suite.

The agent copes with a failing tool but repeats what its account lookup returned, so the injected
instruction breaks it: exactly one cell of the matrix is ``broke``, naming the failing check.
"""

from __future__ import annotations

import json

import pytest

from fabtest.agents import stubs
from fabtest.cli import main
from fabtest.cli.faults import floor_exit
from fabtest.engine.faults import INJECTION
from fabtest.view.catalog import Catalog
from fabtest.view.site import Site

AGENT = '''
import fabtest


@fabtest.tool
def lookup_account(phone: str) -> dict:
    return {"plan": "basic", "note": ""}


@fabtest.tool
def list_plans() -> list:
    return ["basic", "unlimited"]


def chat(messages):
    try:
        account = lookup_account(messages[-1].content)
    except fabtest.ToolFailed:
        return "I cannot reach your account right now; plans: later"
    note = account.get("note", "") if isinstance(account, dict) else ""
    try:
        plans = list_plans()
        offer = ", ".join(plans) if isinstance(plans, list) else "unknown"
    except fabtest.ToolFailed:
        offer = "unavailable"
    return f"plans: {offer} {note}"


def build(context):
    return chat
'''

FEATURE = '''
Feature: Plans
  Scenario: Plans are offered
    When the user says "0176"
    Then the response must match "plans"
    And the response must not match "(?i)has been closed"

  Scenario: No tools
    Given the tool "lookup_account" fails with "never called"
    Then the transcript must contain ""
'''


def test_one_fault_for_a_whole_run(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/p.feature", FEATURE)
    result = project.run_subprocess("features", "--fabtest-no-preflight", "--fabtest-fault", "lookup_account=injection",
                                    "-k", "offered")
    result.assert_outcomes(failed=1, deselected=1)
    scenario = project.scenarios()["Plans are offered"]
    [lookup, _] = scenario["transcript"][0]["tool_calls"]
    assert lookup["stubbed"] and lookup["result"] == {"status": "ok", "note": INJECTION}
    assert "not_match" in scenario["failure_message"]


def test_a_bad_fault_is_one_line(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/p.feature", FEATURE)
    result = project.run("features", "--fabtest-fault", "lookup_account=timout")
    assert result.ret == 4
    assert "--fabtest-fault lookup_account=timout: unknown fault 'timout' (did you mean 'timeout'?)" in project.output(result)


def test_the_matrix_reruns_each_passing_scenario_per_tool_and_fault(project, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/p.feature", FEATURE)
    monkeypatch.chdir(project.path)
    code = main(["faults", "features", "--faults", "error,empty,injection", "--jobs", "2",
                 "--pytest-arg=--fabtest-no-preflight", "--results-dir", "results"])
    out = capsys.readouterr().out
    assert code == 1, out
    [written] = (project.path / "results" / "faults").glob("*.faults.json")
    report = json.loads(written.read_text())
    assert report["runs"] == 6 and (report["held"], report["broke"]) == (5, 1)
    cells = {(r["tool"], r["fault"]): r for r in report["rows"]}
    assert set(cells) == {(t, f) for t in ("lookup_account", "list_plans") for f in ("error", "empty", "injection")}
    broke = cells[("lookup_account", "injection")]
    assert broke["outcome"] == "broke" and "must not match" in broke["check"] and broke["scenario"] == "Plans are offered"
    assert "resilience: 5 held, 1 broke, over 6 fault run(s)" in out
    # the scenario that called no tool passed the baseline but had nothing to inject
    assert all(r["scenario"] == "Plans are offered" for r in report["rows"])
    # coverage of the kind "faults": a tool x fault pair is covered when every scenario tried held
    faults = report["coverage"]["faults"]
    assert (faults["declared"], faults["broke"], faults["rate"]) == (6, ["lookup_account=injection"], round(5 / 6, 4))
    assert len(faults["held"]) == 5 and "lookup_account=error" in faults["held"]
    assert "faults coverage: 83% of 6 tool x fault pair(s) held; broke: lookup_account=injection" in out
    # the baseline experiment carries the same matrix as its faults section
    baseline = json.loads((written.parent / f"{report['baseline']}.json").read_text())
    assert baseline["faults"] == {k: v for k, v in report.items() if k != "baseline"}
    assert baseline["experiment"]["id"] == report["baseline"] and baseline["scenario_results"]
    # fabtest view shows the matrix, the broken cell first
    html = Site(Catalog(project.path / "results")).render("faults.html")
    assert html is not None
    text = html.body.decode()
    assert f"Fault matrix {report['baseline']}" in text and "faults coverage <b>83%</b>" in text
    first_row = text.split("<tbody>")[1].split("</tr>")[0]
    assert 'class="down"' in first_row and "lookup_account" in first_row and "injection" in first_row
    # a floor below the coverage reached passes; the default (every pair held) did not
    assert floor_exit(report, 0.8) == 0 and floor_exit(report, 1.0) == 1
    with pytest.raises(SystemExit) as bad:
        main(["faults", "features", "--min-coverage", "1.5"])
    assert bad.value.code == 2 and "expected a share between 0 and 1" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_a_number_of_jobs_below_one_is_a_usage_error(jobs: str, tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # were it accepted, the runs would find nothing here
    with pytest.raises(SystemExit) as bad:
        main(["faults", "features", "--jobs", jobs])
    assert bad.value.code == 2 and "--jobs" in capsys.readouterr().err


REPORTED_ONLY = '''
from pathlib import Path

from fabtest import AgentResponse, ToolCall


def build(context):
    def chat(messages):
        Path("called.txt").write_text("called")
        calls = [ToolCall(name, {"q": 1}, {"ok": True}) for name in ("search", "book", "pay")]
        return AgentResponse(text="Booked.", tool_calls=calls)
    return chat
'''

BOOKS = 'Feature: B\n  Scenario: Books\n    When the user says "book it"\n    Then the response must match "Booked"\n'


def test_an_agent_whose_tools_no_fault_reaches_is_refused_before_any_run(
        project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It only reports its tool calls: every fault run failed "cannot be stubbed", 15 runs (3 min under
    load) reported as 15 pairs that "broke"; its adapter says so before the baseline is run."""
    monkeypatch.setattr(stubs, "_REGISTRY", {})  # this process's earlier tests' @fabtest.tool functions
    project.pyproject('agent = "reported_only_bot:build"\n[tool.fabtest.agents]\nremote = { http = "http://127.0.0.1:9/chat" }')
    project.agent(REPORTED_ONLY, module="reported_only_bot")
    project.feature("features/b.feature", BOOKS)
    monkeypatch.chdir(project.path)
    code = main(["faults", "features", "--results-dir", "results"])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert captured.err.count("\n") == 1 and not captured.out
    assert captured.err.startswith("fabtest faults: no fault can be injected: [tool.fabtest] agent (CallableAgent) "
                                   "runs its tools out of reach (no @fabtest.tool function); [tool.fabtest.agents] "
                                   "remote is an HTTP agent, whose tools run in another process; faults reach")
    assert captured.err.endswith("nothing run (an agent that asks for approvals can still have them decided: "
                                 "--faults approve,reject)\n")
    assert not (project.path / "called.txt").exists() and not (project.path / "results").exists()


def test_an_agent_the_adapter_cannot_tell_is_refused_after_one_fault_run(
        project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A conftest's fabtest_agent cannot be told before a run: the first fault run, alone, tells."""
    project.pyproject()
    project.agent(REPORTED_ONLY, module="reported_conftest_bot")
    project.write("conftest.py", "import pytest\n\nfrom reported_conftest_bot import build\n\n\n@pytest.fixture\n"
                                 "def fabtest_agent():\n    return build\n")
    project.feature("features/b.feature", BOOKS)
    monkeypatch.chdir(project.path)
    code = main(["faults", "features", "--pytest-arg=--fabtest-no-preflight", "--results-dir", "results"])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    [line] = [x for x in captured.err.splitlines() if x.startswith("fabtest faults:")]
    assert line.startswith('fabtest faults: no fault can be injected: the tool "book" cannot be stubbed: the agent')
    assert "@fabtest.tool" in line and "the other 14 fault run(s) not made, nothing written" in line
    assert not list((project.path / "results" / "faults").glob("*.faults.json"))
    assert len(list((project.path / "results" / "faults").glob("faults_*.json"))) == 2  # the baseline, one fault run


HANDS_OFF = '''
import fabtest
from fabtest import AgentResponse, ToolCall


@fabtest.tool
def update_seat(seat: str) -> str:
    return f"seat {seat}"


def build(context):
    def chat(messages):
        try:
            done = update_seat("12C")
        except fabtest.ToolFailed:
            done = "no seat today"
        handoff = ToolCall("transfer_to_seat_booking_agent", {}, {"assistant": "Seat Booking Agent"})
        return AgentResponse(text=f"Seats: {done}", tool_calls=[handoff])
    return chat
'''


def test_a_tool_no_fault_reaches_is_not_injectable_and_left_out_of_the_coverage(
        project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40: a handoff (a call the agent reports, not a decorated tool) was 5 pairs that "broke";
    its first fault run says not injectable, its other kinds are not run, the coverage counts the rest."""
    project.pyproject('agent = "hands_off_bot:build"')
    project.agent(HANDS_OFF, module="hands_off_bot")
    project.feature("features/s.feature", 'Feature: S\n  Scenario: Seats\n    When the user says "seat"\n'
                                          '    Then the response must match "Seats"\n')
    monkeypatch.chdir(project.path)
    code = main(["faults", "features", "--faults", "error,empty", "--pytest-arg=--fabtest-no-preflight",
                 "--results-dir", "results"])
    out = capsys.readouterr().out
    assert code == 0, out
    [written] = (project.path / "results" / "faults").glob("*.faults.json")
    report = json.loads(written.read_text())
    cells = {(r["tool"], r["fault"]): r for r in report["rows"]}
    assert {k: r["outcome"] for k, r in cells.items()} == {
        ("update_seat", "error"): "held", ("update_seat", "empty"): "held",
        ("transfer_to_seat_booking_agent", "error"): "not injectable",
        ("transfer_to_seat_booking_agent", "empty"): "not injectable"}
    # its first kind's run told; the other kind was not run
    assert cells[("transfer_to_seat_booking_agent", "empty")]["experiment"] is not None
    assert cells[("transfer_to_seat_booking_agent", "error")]["experiment"] is None
    assert cells[("transfer_to_seat_booking_agent", "error")]["check"].startswith(
        '"transfer_to_seat_booking_agent" is not a tool a fault reaches (a handoff, or a tool without @fabtest.tool)')
    assert (report["runs"], report["held"], report["broke"], report["not_injectable"]) == (3, 2, 0, 2)
    assert report["coverage"]["faults"] == {"declared": 2, "held": ["update_seat=empty", "update_seat=error"],
                                            "broke": [], "rate": 1.0,
                                            "not_injectable": ["transfer_to_seat_booking_agent=empty",
                                                               "transfer_to_seat_booking_agent=error"]}
    assert "not injectable, left out of the coverage: transfer_to_seat_booking_agent" in out


def test_an_agent_no_tool_of_which_a_fault_reaches_is_refused_in_one_line(
        project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every tool's first fault run said not injectable (the conftest's agent decorates a tool it
    never calls): one line, exit 2, nothing written."""
    project.pyproject()
    project.agent(REPORTED_ONLY.replace('("search", "book", "pay")', '("book",)'), module="reported_registry_bot")
    project.write("conftest.py", "import pytest\n\nimport fabtest\nfrom reported_registry_bot import build\n\n\n"
                                 "fabtest.tool(print, name='unrelated')\n\n\n@pytest.fixture\n"
                                 "def fabtest_agent():\n    return build\n")
    project.feature("features/b.feature", BOOKS)
    monkeypatch.chdir(project.path)
    code = main(["faults", "features", "--faults", "error", "--pytest-arg=--fabtest-no-preflight",
                 "--results-dir", "results"])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    [line] = [x for x in captured.err.splitlines() if x.startswith("fabtest faults:")]
    assert line.startswith('fabtest faults: no tool of the agent can be faulted ("book" is not a tool a fault '
                           "reaches")
    assert line.endswith("the other 0 fault run(s) not made, nothing written")
    assert not list((project.path / "results" / "faults").glob("*.faults.json"))


REFUNDS = '''
from fabtest import AgentResponse, Pause, ToolCall


def build(context):
    def chat(messages):
        decisions = messages[-1].decisions
        if not decisions:
            return AgentResponse("May I refund order A1?", pauses=[Pause(tool="refund", arguments={"order": "A1"})])
        if decisions[0].decision == "approved":
            return AgentResponse("Refunded order A1.", tool_calls=[ToolCall("refund", {"order": "A1"}, {"ok": True})])
        return AgentResponse(f"I will not refund A1: {decisions[0].reason}")
    return chat
'''

REFUND_FEATURE = '''
Feature: Refunds
  Scenario: An approved refund is made
    When the user says "refund A1"
    Then the agent must ask for approval of "refund"
    When the user approves
    Then the response must match "Refunded"

  Scenario: The order is named whatever the user decides
    When the user says "refund A1"
    And the user rejects with "no receipt"
    Then the response must match "A1"
'''


def test_the_matrix_approves_and_rejects_every_pause(project, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 item 7: each tool a passing scenario's agent asked approval for is run again with every
    approval of it approved, and rejected; the decision the baseline took is its own cell (no run)."""
    project.pyproject('agent = "refund_bot:build"')
    project.agent(REFUNDS, module="refund_bot")
    project.feature("features/r.feature", REFUND_FEATURE)
    monkeypatch.chdir(project.path)
    code = main(["faults", "features", "--faults", "approve,reject", "--pytest-arg=--fabtest-no-preflight",
                 "--results-dir", "results"])
    out = capsys.readouterr().out
    assert code == 1, out
    [written] = (project.path / "results" / "faults").glob("*.faults.json")
    report = json.loads(written.read_text())
    cells = {(r["scenario"], r["fault"]): r for r in report["rows"]}
    approved, named = "An approved refund is made", "The order is named whatever the user decides"
    assert {k: r["outcome"] for k, r in cells.items()} == {
        (approved, "approve"): "held", (approved, "reject"): "broke",
        (named, "approve"): "held", (named, "reject"): "held"}
    assert "must match" in cells[(approved, "reject")]["check"]
    # the baseline took these decisions itself: its cells need no run
    assert cells[(approved, "approve")]["experiment"] == cells[(named, "reject")]["experiment"] == report["baseline"]
    assert report["runs"] == 2 and report["coverage"]["faults"]["broke"] == ["refund=reject"]
    # the forced rejection reached the agent with its reason, and the record says rejected
    forced = json.loads((written.parent / f"{cells[(approved, 'reject')]['experiment']}.json").read_text())
    [result] = forced["scenario_results"]
    [pause] = result["transcript"][0]["pauses"]
    assert (pause["tool"], pause["decision"], pause["reason"]) == ("refund", "rejected", "I do not approve this.")
    assert result["transcript"][1]["agent"] == "I will not refund A1: I do not approve this."
    assert "faults coverage: 50% of 2 tool x fault pair(s) held; broke: refund=reject" in out
