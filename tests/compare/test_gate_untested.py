"""Issue 44, point 7: nothing tested never passes, and what is not the agent's fault never counts against it.

Each case below exited 0 ("not worse") or 1 ("worse") on main; each is undecided now (exit 3) with
a line saying why: the judge down on both sides, one scenario wholly unrun, every judge answer
unusable, ``--sequential`` opening with the fixed gate's verdict, a different judge and simulated
user; and a run ended by the simulated user or by the judge is "not measured", never the agent's.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.experiments import make_doc, make_result
from fabtest.cli import compare_main
from fabtest.experiment.export import write_document

SCENARIOS, ITERATIONS = 3, 10
GOOD = [("friendly", "passed"), ("concise", "passed")]
SKIPPED = [("friendly", "skipped"), ("concise", "skipped")]


def _runs(evals=GOOD, *, passed=lambda s, i: True, failure=lambda s, i: None, skipped=lambda s, i: False,
          expects=None) -> list:
    return [make_result(f"scenario {'abc'[s]}", iteration=i + 1, passed=passed(s, i), evals=evals,
                        failure_type=failure(s, i), skipped=skipped(s, i), expects=expects)
            for s in range(SCENARIOS) for i in range(ITERATIONS)]


def _gate(tmp_path: Path, base: list, cur: list, capsys, *extra: str, mutate=None) -> tuple[int, dict, str]:
    b, c = make_doc("exp_base01", base, iterations=ITERATIONS), make_doc("exp_curr01", cur, iterations=ITERATIONS)
    if mutate is not None:
        mutate(b, c)
    write_document(b, tmp_path)
    write_document(c, tmp_path)
    code = compare_main(["exp_base01", "exp_curr01", "--results-dir", str(tmp_path), "--fail-on-regression",
                         "--format", "json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_the_same_good_runs_are_still_not_worse(tmp_path, capsys):
    """The control: what the cases below break is a pass without them."""
    code, data, _ = _gate(tmp_path, _runs(), _runs(), capsys)
    assert code == 0 and data["gate"]["problems"] == [] and data["moved"] == []


def test_a_judge_down_on_both_sides_is_undecided(tmp_path, capsys):
    """Case (a): soft-only scenarios, every judged check skipped on both sides (main: exit 0, "not
    worse" on completion alone)."""
    code, data, err = _gate(tmp_path, _runs(SKIPPED), _runs(SKIPPED), capsys)
    assert code == 3 and data["gate"]["outcome"] == "undecided"
    assert data["verdict"].startswith("undecided: nothing judged in the current experiment: its 60 judged check(s) "
                                      "were all skipped or inconclusive")
    assert "UNDECIDED: nothing judged in the current experiment" in err


def test_one_scenario_wholly_unrun_is_undecided(tmp_path, capsys):
    """Case (b): scenario c skipped in every iteration (invalid simulations, exit 6, @skip) while a
    and b pass (main: exit 0)."""
    cur = _runs(skipped=lambda s, i: s == 2)
    code, data, _ = _gate(tmp_path, _runs(), cur, capsys)
    assert code == 3
    assert data["gate"]["problems"] == [
        "1 shared scenario(s) have no measured run in the current experiment: 'scenario c' (10 skipped; 10 run(s) "
        "in the baseline); untested is never a pass"]


def test_every_judge_answer_unusable_is_undecided(tmp_path, capsys):
    """Case (c): every soft check of the current run skipped with "judge failed" (LLMBadOutput),
    the baseline's rated. Completion alone was "not worse" on main when the criteria were gone from
    both the rows and the baseline; here the current side has none rated."""
    code, data, _ = _gate(tmp_path, _runs(SKIPPED), _runs(SKIPPED), capsys, "--min-completion", "0.5")
    assert code == 3 and any(p.startswith("nothing judged in the current experiment") for p in data["gate"]["problems"])


def test_sequential_opens_with_its_own_verdict(tmp_path, capsys):
    """Case (d): with --sequential the exit code is the sequential decision; main printed the fixed
    gate's "not worse" first and exited 3."""
    code, data, err = _gate(tmp_path, _runs(), _runs(), capsys, "--sequential")
    outcome = data["gate"]["sequential"]["outcome"]
    assert code == {"worse": 1, "not worse": 0, "undecided": 3}[outcome] == 3
    assert data["verdict"].startswith(f"{outcome} (sequential gate): ")
    capsys.readouterr()
    b, c = (str(tmp_path / f"exp_{x}01.json") for x in ("base", "curr"))
    assert compare_main([b, c, "--fail-on-regression", "--sequential"]) == 3
    assert capsys.readouterr().out.splitlines()[0].startswith("Verdict: undecided (sequential gate): ")


def test_a_different_judge_and_simulated_user_are_undecided(tmp_path, capsys):
    """Case (e): judge model, simulator model and every fingerprint different (main: "not worse",
    nothing on stderr)."""
    def other_models(b: dict, c: dict) -> None:
        c["experiment"]["judge"] = {"provider": "gemini", "model": "gemini-other"}
        c["experiment"]["simulator"] = {"provider": "gemini", "model": "gemini-other"}
        for key in ("config_hash", "criteria_hash", "topic_graph_hash"):
            c["experiment"][key] = "f" * 16
        for doc in (b, c):
            doc["summary"]["simulator_validity"] = {"runs": 30, "rate": 1.0}

    code, data, err = _gate(tmp_path, _runs(), _runs(), capsys, mutate=other_models)
    assert code == 3
    problems = data["gate"]["problems"]
    assert any(p.startswith("the judge differs (baseline ") for p in problems)
    assert any(p.startswith("the simulated user differs (baseline ") for p in problems)
    assert "UNDECIDED: the judge differs" in err and "UNDECIDED: the simulated user differs" in err


def test_a_simulator_failure_never_counts_against_the_agent(tmp_path, capsys):
    """An unchanged agent whose current run lost 9 of 30 runs to a simulated user writing the
    agent's lines (main: failure type ``error``, completion 30/30 -> 21/30, "worse", exit 1)."""
    cur = _runs(passed=lambda s, i: not (s == 0 and i < 9), failure=lambda s, i: "simulator" if s == 0 and i < 9 else None)
    code, data, err = _gate(tmp_path, _runs(), cur, capsys)
    assert code != 1 and data["gate"]["outcome"] != "worse"
    completion = next(m for m in data["gate"]["metrics"] if m["metric"] == "completion")
    assert completion["current"] == [21, 21]  # the 9 simulator failures are not measured, not failed
    assert "FAIL" not in err


def test_a_judge_outage_on_must_criteria_is_never_worse(tmp_path, capsys):
    """A judge outage during ``must satisfy`` checks (failure type ``judge``) leaves scenario a with
    no measured run: undecided, not "worse" (main: exit 1)."""
    cur = _runs(passed=lambda s, i: s != 0, failure=lambda s, i: "judge" if s == 0 else None)
    code, data, err = _gate(tmp_path, _runs(), cur, capsys)
    assert code == 3 and data["gate"]["outcome"] == "undecided"
    assert "'scenario a' (10 ended by the simulated user or the judge; 10 run(s) in the baseline)" in \
        data["gate"]["problems"][0]
    assert "FAIL " not in err


def test_every_run_ended_by_the_simulated_user_says_so(tmp_path, capsys):
    """Tried as a stranger: a simulated user that wrote the agent's lines in every run was reported
    as "every shared scenario was skipped"; nothing was skipped, nothing was measured."""
    cur = _runs(passed=lambda s, i: False, failure=lambda s, i: "simulator")
    code, data, _ = _gate(tmp_path, _runs(), cur, capsys)
    assert code == 3 and data["verdict"] == (
        "undecided: no shared scenario has a measured run in the current experiment (30 run(s) ended by the "
        "simulated user or the judge, 0 skipped): nothing was measured")


def test_scenarios_an_interrupted_run_never_reached_are_not_run_not_removed(tmp_path, capsys):
    """After Ctrl-C the current experiment lacks the scenarios it never started: they read as not
    run (untested) on every surface, not as taken out of the suite, and the gate is undecided."""
    cur = [r for r in _runs() if r.name != "scenario c"]

    def interrupted(b, c):
        c["experiment"]["interrupted"] = True

    code, data, _ = _gate(tmp_path, _runs(), cur, capsys, mutate=interrupted)
    assert code == 3 and data["gate"]["problems"][0].startswith(
        "the current run was interrupted: 1 baseline scenario(s) did not run ('scenario c'); untested is never a pass")
    compare_main(["exp_base01", "exp_curr01", "--results-dir", str(tmp_path)])
    text = capsys.readouterr().out
    assert "2 shared (0 added, 1 not run (the current run was interrupted))" in text
    assert "Not run (1, the current run was interrupted before them: untested" in text
    assert "Removed scenarios" not in text
    compare_main(["exp_base01", "exp_curr01", "--results-dir", str(tmp_path), "--format", "markdown"])
    assert "Not run (the current run was interrupted before them: untested)" in capsys.readouterr().out
