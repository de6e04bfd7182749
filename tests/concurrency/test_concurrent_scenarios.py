"""Scenarios in flight at once keep pytest's semantics (issue 17 items 1 and 2, docs/concurrency.md).

One run of a small project (``concurrency = 4``) is shared by most tests here: four scenarios
that pass a barrier only when all four are in flight together (across two feature files), a
failing and a hanging one beside passing ones, and one marked ``@fabtest_serial``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from project import events, experiment, feature, make_project, run, scenario  # type: ignore[import-not-found]

FEATURES = {
    "a.feature": feature("A", scenario("barrier a1"), scenario("barrier a2")),
    "b.feature": feature("B", scenario("barrier b1"), scenario("barrier b2")),
    "c.feature": feature("C", scenario("pass c1"), scenario("fail c2"), scenario("hang c3"), scenario("pass c4")),
    "d.feature": feature("D", scenario("serial d1", tags="@fabtest_serial"), scenario("pass d2"),
                         scenario("fixture_serial d3"), scenario("pass d4")),
}
ORDER = ["barrier a1", "barrier a2", "barrier b1", "barrier b2", "pass c1", "fail c2", "hang c3", "pass c4",
         "serial d1", "pass d2", "fixture_serial d3", "pass d4"]

_RUN: dict[str, Any] = {}


@pytest.fixture
def shared_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    if not _RUN:
        monkeypatch.setenv("BARRIER", "4")
        path = make_project(pytester, FEATURES)
        result = run(pytester, "--junitxml=junit.xml", "-o", "junit_logging=all")
        _RUN.update(result=result, path=path, output=result.stdout.str(), events=events(path),
                    doc=experiment(path), junit=ET.parse(path / "junit.xml").getroot())
    return _RUN


def test_four_scenarios_were_in_flight_at_once_and_every_one_ended_as_it_should(shared_run: dict[str, Any]) -> None:
    shared_run["result"].assert_outcomes(passed=10, failed=2)  # the barrier scenarios pass only together
    by_name = {s["name"]: s for s in shared_run["doc"]["scenario_results"]}
    assert by_name["fail c2"]["failure_type"] == "assertion"
    assert by_name["hang c3"]["failure_type"] == "timeout"
    assert "did not answer within 0.5s" in by_name["hang c3"]["failure_message"]
    assert all(by_name[n]["passed"] for n in ORDER if n.split()[0] in ("barrier", "pass", "serial", "fixture_serial"))


def test_function_scoped_fixtures_are_per_scenario_with_their_own_teardown(shared_run: dict[str, Any]) -> None:
    """``stamp`` is first requested by a step on the scenario's thread, ``ticket`` by the
    fabtest_agent fixture at setup: each scenario got its own, torn down once, owned by it alone."""
    for kind in ("stamp-teardown", "ticket-teardown"):
        torn = [e for e in shared_run["events"] if e["kind"] == kind]
        assert sorted(e["owner"] for e in torn) == sorted(ORDER), kind
        assert len({e["n"] for e in torn}) == len(ORDER), kind


def test_each_scenario_entered_and_left_its_own_agents_around(shared_run: dict[str, Any]) -> None:
    for kind in ("enter", "exit"):
        assert sorted(e["scenario"] for e in shared_run["events"] if e["kind"] == kind) == sorted(ORDER)


def test_a_serial_scenario_runs_alone_and_the_run_says_so(shared_run: dict[str, Any]) -> None:
    seen = [(e["kind"], e["scenario"]) for e in shared_run["events"] if e["kind"] in ("enter", "exit")]
    for name in ("serial d1", "fixture_serial d3"):
        start, end = seen.index(("enter", name)), seen.index(("exit", name))
        assert end == start + 1, seen  # nothing else entered or left while it ran
        before = {n for kind, n in seen[:start] if kind == "exit"}
        assert set(ORDER[:ORDER.index(name)]) <= before, seen  # everything collected before it had finished
    output = shared_run["output"]
    assert "fabtest: 2 scenario(s) ran alone, not concurrently" in output
    assert "features/d.feature::test_serial_d1: marked fabtest_serial" in output
    assert ("features/d.feature::test_fixture_serial_d3: marked fabtest_serial by a fixture "
            "(the fixture is not thread-safe)") in output


def test_captured_output_and_logs_belong_to_their_scenario(shared_run: dict[str, Any]) -> None:
    cases = {case.get("name"): case for case in shared_run["junit"].iter("testcase")}
    assert len(cases) == len(ORDER)  # one JUnit test case per scenario
    for name in ORDER:
        case = cases["test_" + name.replace(" ", "_")]
        out = case.findtext("system-out") or ""
        if name != "hang c3":  # timed out before it printed
            assert f"stdout of {name}" in out and f"log of {name}" in out, out
        others = [n for n in ORDER if n != name and (f"stdout of {n}\n" in out or f"log of {n}\n" in out)]
        assert not others, (name, others)
        # its setup and teardown, on the main thread while other scenarios run, are its own too
        test = "test_" + name.replace(" ", "_")
        assert f"setup of {test}\n" in out and f"teardown of {test}\n" in out, out
        assert out.count("setup of ") == 1 and out.count("teardown of ") == 1, out
        assert (case.find("failure") is not None) == (name in ("fail c2", "hang c3"))
    # a failure shows its own captured output under pytest's usual heading
    output = shared_run["output"]
    failure = output[output.index("Scenario: fail c2"):]
    assert "Captured stdout call" in failure and "stdout of fail c2" in failure


def test_results_are_in_collection_order_not_completion_order(shared_run: dict[str, Any]) -> None:
    assert [s["name"] for s in shared_run["doc"]["scenario_results"]] == ORDER
    assert [row[1] for row in shared_run["doc"]["scenario_index"]["rows"]] == ORDER


def test_dash_x_starts_nothing_after_a_failure_and_reports_what_was_in_flight(pytester: pytest.Pytester) -> None:
    path = make_project(pytester, {"x.feature": feature(
        "X", scenario("fail x1", stamp=False), *(scenario(f"pass x{i}", stamp=False) for i in range(2, 9)))},
        concurrency=2)
    result = run(pytester, "-x")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes.get("passed", 0) < 7, outcomes
    assert "stopping after 1 failures" in result.stdout.str()
    entered = [e["scenario"] for e in events(path) if e["kind"] == "enter"]
    left = [e["scenario"] for e in events(path) if e["kind"] == "exit"]
    assert sorted(entered) == sorted(left)  # every scenario that started finished and was torn down
    recorded = {s["name"]: s["passed"] for s in experiment(path)["scenario_results"]}
    assert set(recorded) == set(entered) and recorded["fail x1"] is False
    assert sum(recorded.values()) == outcomes.get("passed", 0)  # nothing that finished is lost


def test_an_async_agent_runs_several_conversations_on_one_loop_and_k_selects(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNC_PARTIES", "3")
    asyncs = [f'  Scenario: async {i}\n    Given the agent "async_bot"\n    When the user says "hi"\n'
              f'    Then the response must match "hello from async {i}"\n' for i in range(1, 4)]
    path = make_project(pytester, {"async.feature": feature("Async", *asyncs),
                                   "other.feature": feature("Other", scenario("barrier o1"))}, concurrency=3)
    result = run(pytester, "-k", "async")
    result.assert_outcomes(passed=3, deselected=1)
    seen = [e for e in events(path) if e["kind"] == "async"]
    assert sorted(e["scenario"] for e in seen) == ["async 1", "async 2", "async 3"]
    assert len({e["loop"] for e in seen}) == 1 and {e["thread"] for e in seen} == {"fabtest-aio"}


def test_concurrency_inside_xdist_workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-n 2`` with one feature file per worker: each worker has both of its scenarios in flight."""
    monkeypatch.setenv("BARRIER", "2")
    path = make_project(pytester, {"a.feature": feature("A", scenario("barrier a1"), scenario("barrier a2")),
                                   "b.feature": feature("B", scenario("barrier b1"), scenario("barrier b2"))},
                        concurrency=2)
    result = run(pytester, "-n", "2", "--dist", "loadfile")
    result.assert_outcomes(passed=4)
    names = [s["name"] for s in experiment(path)["scenario_results"]]
    assert names == ["barrier a1", "barrier a2", "barrier b1", "barrier b2"]


def _stable(value: Any) -> Any:
    """An experiment without what differs between any two runs (times, ids, when)."""
    volatile = ("duration", "timestamp", "latency", "elapsed", "started", "finished", "wall")
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()
                if not any(word in k for word in volatile) and k not in ("id", "experiment_id", "ms", "s")}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_a_concurrent_run_records_what_a_sequential_run_records(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BARRIER", "1")
    simulated = '''
  Scenario: simulated {n}
    Given a simulated user with the goal "book a room"
    And the criterion "polite" means "The agent is polite"
    When the simulated user talks to the agent
    Then the response should satisfy "polite"
    And the response must match "hello from simulated {n}"
'''
    features = {"s.feature": feature("S", *(simulated.format(n=i) for i in range(1, 5)), scenario("fail s5"))}
    fake = ("from fabtest.testing import FakeLLM\n\n"
            "def fake():\n"
            "    return FakeLLM().simulated_user(['hi', 'more please']).verdicts(default='passed').goal_achieved(True)\n")
    docs = []
    for concurrency in (1, 4):
        path = make_project(pytester, features, concurrency=concurrency)
        pytester.makepyfile(scriptedfake=fake)
        result = run(pytester, "--fabtest-fake-llm", "scriptedfake:fake", "--fabtest-iterations", "2")
        result.assert_outcomes(passed=8, failed=2)
        docs.append(experiment(path))
        for file in Path(path, "results").glob("*.json"):
            file.unlink()
    sequential, concurrent = (_stable(d) for d in docs)
    assert [s["name"] for s in concurrent["scenario_results"]] == [s["name"] for s in sequential["scenario_results"]]
    for one, other in zip(sequential["scenario_results"], concurrent["scenario_results"], strict=True):
        assert one == other
    for key in sequential:
        if key not in ("experiment", "scenario_results"):
            assert sequential[key] == concurrent[key], key


def test_process_wide_fixtures_run_their_scenario_alone_or_fail_it_by_name(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BARRIER", "1")
    extra_steps = '''

@when("I read what was printed")
def read_printed(capsys):
    capsys.readouterr()
'''
    from project import CONFTEST  # type: ignore[import-not-found]

    path = make_project(pytester, {
        "p.feature": feature("P", scenario("pass p1"), '  Scenario: capsys p2\n    When I read what was printed\n'),
    }, conftest=CONFTEST + extra_steps)
    (path / "features" / "mp").mkdir()
    (path / "features" / "mp" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture(autouse=True)\ndef patched(monkeypatch):\n"
        "    monkeypatch.setenv('PATCHED', '1')\n")
    (path / "features" / "mp" / "m.feature").write_text(feature("M", scenario("patched m1")))
    result = run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    output = result.stdout.str()
    assert ("features/p.feature::test_capsys_p2: a step requested the fixture 'capsys' while the scenario ran "
            "concurrently, but a scenario that uses capsys (pytest's capture is process-wide) must run alone; "
            "tag the scenario @fabtest_serial to run it alone") in " ".join(output.split())
    assert "features/mp/m.feature::test_patched_m1: uses monkeypatch (it changes process-wide state)" in output
