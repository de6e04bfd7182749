"""The console summary stays readable at scale (issue 31, point 7): 1,000 iterations are a
distribution, not 1,000 lines; hundreds of failures are groups with counts, the first few in full."""

from __future__ import annotations

import random
import re
from pathlib import Path

from support.experiments import make_doc, make_result

from fabtest.experiment.model import ScenarioResult
from fabtest.experiment.recorder import Recorder
from fabtest.report.console import render_summary

#: a summary a person reads in one screen or two, however long the run
MAX_LINES = 110


def test_a_thousand_iterations_summarise_as_a_distribution_and_the_flaky_scenarios() -> None:
    rng = random.Random(31)
    odds = {"always": 1.0, "mostly": 0.9, "coin": 0.5, "never": 0.0}
    results = [make_result(name, iteration=it, passed=rng.random() < p)
               for it in range(1, 1001) for name, p in odds.items()]
    text = render_summary(make_doc("exp_thousand", results, iterations=1000))
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, text
    assert not re.search(r"Run \d+", text)  # no line per iteration
    assert "Variance (1,000 runs)" in text and "Runs:       1,000 iterations" in text
    passed = sum(r.passed for r in results)
    assert f"4,000 total, {passed:,} passed, {4000 - passed:,} failed" in text  # large counts read as numbers
    hist = next(line for line in lines if line.strip().startswith("Completion per run:"))
    rates = [sum(r.passed for r in results if r.iteration == it) / 4 for it in range(1, 1001)]
    assert f"min {min(rates) * 100:.1f}%" in hist and f"max {max(rates) * 100:.1f}%" in hist
    bands = next(line for line in lines if "runs per band" in line)
    assert sum(int(n.replace(",", "")) for n in re.findall(r"%: ([\d,]*\d)", bands)) == 1000  # every run in a band
    coin = sum(r.passed for r in results if r.name == "coin")
    mostly = sum(r.passed for r in results if r.name == "mostly")
    assert "Flaky scenarios: 2; always failing: 1" in text
    flaky = [line.strip() for line in lines if "runs passed" in line]
    # the most unsettled first
    assert flaky[0].startswith(f"- coin: {coin}/1000") and flaky[1].startswith(f"- mostly: {mostly}/1000"), flaky


def test_a_few_iterations_still_list_each_run() -> None:
    results = [make_result(n, iteration=it, passed=it != 2 or n == "a") for it in (1, 2, 3) for n in ("a", "b")]
    text = render_summary(make_doc("exp_three", results, iterations=3))
    assert "Run 1" in text and "Run 3" in text and "per run:" not in text


def _failure(scenario: int, run: int) -> ScenarioResult:
    """Scenario 0 fails the most; each scenario fails at one step, with a judge's wording that varies."""
    step = f"features/shop.feature:{10 + scenario}: Then the agent should quote the price of plan {scenario}"
    return make_result(f"plan {scenario}", iteration=run, passed=False).model_copy(update={
        "failure_message": f"{step}\nCriterionFailed: the agent answered without a price (judge run {run})\n"
                           + "".join(f"  turn {t}: detail line\n" for t in range(1, 10))})


def _many_failures() -> list[ScenarioResult]:
    # 40 scenarios, 400 failed runs: scenario s fails 40 - s ... times, some runs pass
    return [_failure(s, run) if run <= max(1, 25 - s) else make_result(f"plan {s}", iteration=run)
            for s in range(40) for run in range(1, 26)]


def test_hundreds_of_failures_are_grouped_by_scenario_and_message_with_counts() -> None:
    results = _many_failures()
    failed = [r for r in results if not r.passed]
    assert len(failed) >= 300
    text = render_summary(make_doc("exp_failing", results, iterations=25))
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, text
    assert f"Failures: {len(failed)} failed runs in 40 scenarios, 40 distinct (scenario, failing step)" in text
    # most frequent first, with its count and its whole message (the step, then what the judge said)
    top = lines.index(next(line for line in lines if "plan 0 [assertion]" in line))
    assert lines[top].strip().startswith("25x  plan 0 [assertion] (25 different messages")
    assert "features/shop.feature:10: Then the agent should quote the price of plan 0" in lines[top + 1]
    assert "CriterionFailed: the agent answered without a price (judge run 1)" in lines[top + 2]
    assert "more lines in the JSON" in text  # a long message is cut, and says so
    assert "22x  plan 3 [assertion]: features/shop.feature:13:" in text  # later groups: one line each
    hidden = sum(1 for r in failed if int(r.name.split()[1]) >= 10)
    assert f"... and 30 more group(s), {hidden} failed run(s)" in text
    assert text.count("judge run") == 3  # only the first three groups in full


def test_failures_read_from_the_streamed_briefs_match_the_whole_document(tmp_path: Path) -> None:
    """The summary of a run reads the recorder's briefs, not the file: the groups must be the same."""
    results = _many_failures()[:200]
    recorder = Recorder(results_dir=tmp_path, experiment_id="exp_fails", iterations=25, cwd=tmp_path)
    for r in results:
        recorder.add(r)
    streamed = render_summary(recorder.document())
    recorder.discard()
    whole = render_summary(make_doc("exp_fails", results, iterations=25))
    assert "Failures: " in streamed and "CriterionFailed" in streamed
    section = lambda text: text[text.index("Failures: "):text.index("Quality")]  # noqa: E731
    assert section(streamed) == section(whole)


def test_with_iterations_the_counts_say_scenario_runs_not_scenarios() -> None:
    """Issue 31: "scenarios" meant runs on some pages. With 3 iterations of 2 scenarios the 6 counted
    are scenario runs, and the console and the HTML report say so; a single iteration still says scenarios."""
    from fabtest.report.html import render_experiment_html

    results = [make_result(name, iteration=it, passed=it != 3 or name == "a") for it in (1, 2, 3) for name in "ab"]
    many = make_doc("exp_iters", results, iterations=3)
    text = render_summary(many)
    assert "Scenario runs:    6 total, 5 passed, 1 failed" in text and "  Scenarios:" not in text
    html = render_experiment_html(many)
    assert "Scenario runs" in html and "1 failed · 3 iterations" in html
    one = make_doc("exp_once", [make_result("a"), make_result("b")])
    assert "  Scenarios:        2 total, 2 passed, 0 failed" in render_summary(one)
    assert "Scenario runs" not in render_experiment_html(one)
