"""The console summary printed after a run (docs/explanation/experiments.md) and by ``fabtest show``.

It works on the experiment document (a plain dict), so a stored experiment and a fresh one are
summarised by the same code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tabulate import tabulate

from fabtest.experiment.cost import summary_cost, total_text, unpriced_note
from fabtest.experiment.coverage_text import coverage_lines
from fabtest.experiment.fmt import RULE_HEAVY, RULE_LIGHT, count, git_line, llm_line, num, pct, timestamp, usd
from fabtest.experiment.reader import list_experiment_files
from fabtest.experiment.stats import low_confidence_count
from fabtest.llm.retry_budget import budget_line
from fabtest.report.console_scale import failure_lines, rate_histogram
from fabtest.report.robustness import robustness_lines

__all__ = ["previous_experiment_id", "render_summary"]

_MAX_LISTED = 10
#: up to this many iterations the variance lists each run; beyond, a distribution (console_scale.py)
_RUNS_LISTED = 10


def previous_experiment_id(results_dir: str | os.PathLike[str], current_id: str) -> str | None:
    """The most recently written other experiment in the results dir: the natural baseline."""
    others = [p.stem for p in list_experiment_files(results_dir) if p.stem != current_id]
    return others[-1] if others else None


def _table(rows: list[list[Any]], headers: list[str]) -> list[str]:
    text = tabulate(rows, headers=headers, tablefmt="simple")
    return ["    " + line for line in text.splitlines()]


def _header(doc: dict[str, Any]) -> list[str]:
    exp = doc["experiment"]
    name = f' "{exp["name"]}"' if exp.get("name") else ""
    lines = [
        "fabtest: Experiment Summary",
        RULE_HEAVY,
        "",
        f"Experiment: {exp.get('id')}{name}",
        f"Timestamp:  {timestamp(exp.get('timestamp'))}",
        f"Git:        {git_line(exp)}",
        f"Judge:      {llm_line(exp.get('judge'))}",
        f"Simulator:  {llm_line(exp.get('simulator'))}",
    ]
    if exp.get("tags"):
        lines.append(f"Tags:       {', '.join(exp['tags'])}")
    if exp.get("iterations", 1) > 1:
        lines.append(f"Runs:       {count(exp['iterations'])} iterations of every scenario")
    if exp.get("interrupted"):
        lines.append("Status:     INTERRUPTED (recovered from the journal; results are partial)")
    return lines


def _completion(summary: dict[str, Any], iterations: int = 1) -> list[str]:
    """Completion; with several iterations the counts are of scenario runs, and the label says so
    (issue 31: "scenarios" meant runs on some pages)."""
    counted = summary.get("passed", 0) + summary.get("failed", 0)
    skipped, ended = summary.get("skipped", 0), summary.get("unmeasured", 0)
    label = "Scenarios:" if iterations <= 1 else "Scenario runs:"
    lines = [
        "Completion (Hard Expectations)",
        f"  {label:<17} {count(summary.get('total_scenarios', 0))} total, "
        f"{count(summary.get('passed', 0))} passed, "
        f"{count(summary.get('failed', 0))} failed"
        + (f", {count(ended)} ended by the simulated user or the judge" if ended else "")
        + (f", {count(skipped)} skipped" if skipped else ""),
        f"  Completion Rate:  {pct(summary.get('completion_rate'))} "
        f"({count(summary.get('passed', 0))}/{count(counted)})",
    ]
    if skipped or ended:
        lines.append("  (" + " and ".join(filter(None, ("skipped scenarios" if skipped else "",
                                                        "runs the simulated user or the judge ended" if ended
                                                        else ""))) + " are not counted in the rate: "
                     + ("they measure nothing of the agent)" if ended else "they did not run)"))
    lines += _simulator_validity(summary.get("simulator_validity"))
    failures = {k: v for k, v in (summary.get("failure_types") or {}).items() if v}
    if failures:
        lines.append("  By failure type:")
        for kind, n in failures.items():
            lines.append(f"    - {kind}: {n} ({pct(n / (counted + ended) if counted + ended else None)})")
    return lines


def _quality(doc: dict[str, Any]) -> list[str]:
    summary = doc["summary"]
    ev = summary.get("evaluations") or {}
    lines = [
        "Quality (Soft Evaluations)",
        f"  Total Evaluations: {count(ev.get('evaluated', 0))}",
        f"  Evaluation Rate:   {pct(summary.get('evaluation_rate'))}",
    ]
    if ev.get("inconclusive"):
        lines.append(f"  Inconclusive:      {ev['inconclusive']} (judge could not decide; not rated)")
    if ev.get("not_applicable"):
        lines.append(f"  Not applicable:    {ev['not_applicable']} "
                     "(the criterion did not apply to what was judged; not rated)")
    skipped = summary.get("skipped_checks", 0)
    if skipped:
        lines.append(f"  Skipped checks:    {skipped} (could not run, e.g. no LLM configured; not rated)")
    criteria = doc.get("criteria_results") or {}
    if criteria:
        lines += ["", "  By Criterion (LLM-judged, soft and hard):"]
        # inconclusive and not-applicable verdicts beside the rate they are left out of (issue 27)
        unrated = any(e.get("inconclusive") or e.get("not_applicable") for e in criteria.values())
        rows = [[name, e.get("evaluated", 0), e.get("passed", 0), pct(e.get("rate"))]
                + ([e.get("inconclusive", 0), e.get("not_applicable", 0)] if unrated else [])
                for name, e in criteria.items()]
        lines += _table(rows, ["Criterion", "Evaluated", "Passed", "Rate"]
                        + (["Inconclusive", "Not applicable"] if unrated else []))

    if low := low_confidence_count(doc):
        lines.append(f"  Low confidence:    {low} verdict(s) where the judge's samples split (see 'samples')")
    return lines


def _checks(doc: dict[str, Any]) -> list[str]:
    """Deterministic checks, compact: the failing ones, then a count of those that always passed."""
    checks = doc.get("checks_results") or {}
    if not checks:
        return []
    failing = {n: e for n, e in checks.items() if (e.get("failed") or 0) or (e.get("inconclusive") or 0)}
    passing = len(checks) - len(failing)
    lines = ["", f"Checks (deterministic): {len(checks)}, {len(failing)} with failures"]
    if failing:
        shown = sorted(failing.items(),
                       key=lambda kv: (kv[1].get("rate") if kv[1].get("rate") is not None else -1, kv[0]))
        rows = [[name, e.get("evaluated", 0), e.get("passed", 0), pct(e.get("rate"))]
                for name, e in shown[:_MAX_LISTED]]
        lines += _table(rows, ["Check", "Evaluated", "Passed", "Rate"])
        if len(failing) > _MAX_LISTED:
            lines.append(f"    ... and {len(failing) - _MAX_LISTED} more with failures (see the JSON checks_results)")
    if passing:
        lines.append(f"  {passing} check{'' if passing == 1 else 's'} always passed")
    return lines


def _efficiency(summary: dict[str, Any]) -> list[str]:
    def spread(key: str) -> str:
        s = summary.get(key) or {}
        if s.get("mean") is None:
            return "n/a"
        return f"mean {num(s['mean'])}, median {num(s['median'])}, range {num(s['min'], 0)}-{num(s['max'], 0)}"

    with_graph = summary.get("topic_graph_scenarios")
    topics_note = (f" (over the {with_graph} runs with a topic graph)"
                   if with_graph is not None and spread("topics") != "n/a" else "")
    return [
        "Efficiency",
        f"  Turns:             {spread('turns')}",
        f"  Topics visited:    {spread('topics')}{topics_note}",
        f"  Backtracking rate: {pct(summary.get('backtracking_rate'))}",
    ]


def _off_graph(doc: dict[str, Any]) -> list[str]:
    """Topic jumps the graph does not allow, counted only when there are some."""
    jumps = [len(s.get("off_graph_transitions") or []) for s in doc.get("scenario_results") or []
             if isinstance(s, dict)]
    if not sum(jumps):
        return []
    return [f"  Off-graph jumps:   {sum(jumps)} in {sum(1 for j in jumps if j)} scenario(s)"]


def _grounding(summary: dict[str, Any]) -> list[str]:
    ground = summary.get("grounding")
    if not ground:
        return []
    rows = [
        [src, e["evaluated"], e["grounded"], pct(e["rate"]), pct(e.get("claim_rate")) if e.get("claims_total") else "-"]
        for src, e in ground["by_source"].items()
    ]
    lines = ["", "Grounding Analysis", *_table(rows, ["Source", "Evaluated", "Grounded", "Rate", "Claims supported"])]
    if ground.get("worst_scenarios"):
        lines.append("  Scenarios with highest ungrounded rates:")
        for s in ground["worst_scenarios"]:
            runs = f" over {s['runs']} runs" if (s.get("runs") or 1) > 1 else ""
            lines.append(f"    - {s['name']}: {pct(s['ungrounded_rate'])} ungrounded{runs}")
    return lines


def _tokens(summary: dict[str, Any]) -> list[str]:
    spent = summary_cost(summary)
    if spent is not None:
        return _cost_table(spent)
    usage = summary.get("tokens") or {}  # an experiment written before costs were recorded
    if not usage:
        return []
    rows = [[role, count(u["calls"]), count(u["input_tokens"]), count(u["output_tokens"])] for role, u in usage.items()]
    return ["", "LLM Usage", *_table(rows, ["Role", "Calls", "Input tokens", "Output tokens"])]


def _cost_table(spent: dict[str, Any]) -> list[str]:
    """Tokens and USD per role and model (the agent included), the total, and what had no price."""
    rows = [[ln["role"], ln.get("model") or "(not reported)", count(ln["calls"]), count(ln["input_tokens"]),
             count(ln["output_tokens"]), usd(ln.get("usd"))] for ln in spent["lines"]]
    lines = ["", "LLM Usage", *_table(rows, ["Role", "Model", "Calls", "Input tokens", "Output tokens", "Cost (USD)"]),
             f"  Total cost: {total_text(spent)}"]
    lines += [f"  Note: {unpriced_note(entry)}" for entry in spent.get("unpriced") or []]
    return lines


def _variance(doc: dict[str, Any]) -> list[str]:
    var = doc.get("variance")
    if not var:
        return []
    runs = var["runs"]
    lines = [RULE_LIGHT, "", f"Variance ({count(len(runs))} runs)"]
    if len(runs) <= _RUNS_LISTED:
        rows = [[f"Run {r['iteration']}", pct(r["completion_rate"]), pct(r["evaluation_rate"])] for r in runs]
        lines += _table(rows, ["Run", "Completion", "Evaluation"])
    else:  # 1,000 iterations are a distribution, not 1,000 lines
        lines += rate_histogram([r.get("completion_rate") for r in runs], "Completion")
        lines += rate_histogram([r.get("evaluation_rate") for r in runs], "Evaluation")
    for key, label in (("completion_rate", "Completion"), ("evaluation_rate", "Evaluation")):
        agg = var.get(key) or {}
        if agg.get("mean") is not None:
            lines.append(f"  {label}: mean {pct(agg['mean'])} ± {num(agg['std'] * 100)}pp "
                         f"({var.get('std_kind', 'sample')} std dev)")
    # the most unsettled first: a scenario passing half its runs says more than one failing once in 1,000
    flaky = sorted((s for s in var.get("scenarios", []) if s["label"] == "flaky"),
                   key=lambda s: abs(s["passes"] / s["runs"] - 0.5) if s.get("runs") else 1.0)
    stable_fail = sum(1 for s in var.get("scenarios", []) if s["label"] == "stable-fail")
    lines.append(f"  Flaky scenarios: {len(flaky)}; always failing: {stable_fail}")
    causes = {c.get("id"): c for c in var.get("flaky_causes") or [] if isinstance(c, dict)}
    for s in flaky[:_MAX_LISTED]:
        cause = causes.get(s["id"])
        why = f" (flaky: {cause['cause']}; {cause['evidence']})" if cause else ""
        lines.append(f"    - {s['name']}: {s['passes']}/{s['runs']} runs passed{why}")
    if len(flaky) > _MAX_LISTED:
        lines.append(f"    ... and {len(flaky) - _MAX_LISTED} more (every scenario in the JSON's variance.scenarios)")
    soft = [c for c in var.get("flaky_criteria") or [] if isinstance(c, dict)]
    if soft:  # a soft flip never fails a scenario, so the flaky count above cannot show it
        lines.append(f"  Flaky soft criteria: {len(soft)}")
        for c in soft[:_MAX_LISTED]:
            where = f" (turn {c['turn']})" if c.get("turn") is not None else ""
            lines.append(f"    - {c['name']}: {c['criterion']}{where}: {c['verdicts']} "
                         f"(flaky: {c['cause']}; {c['evidence']})")
        if len(soft) > _MAX_LISTED:
            lines.append(f"    ... and {len(soft) - _MAX_LISTED} more")
    lines.append("")
    return lines


def _robustness(doc: dict[str, Any]) -> list[str]:
    """The criterion robustness audit (``fabtest rejudge --perturb``), when one was written; else the
    criteria of this run that an earlier audit flagged (``robustness_flags``)."""
    audit = doc.get("robustness")
    if isinstance(audit, dict):
        return [*robustness_lines(audit), ""]
    flags = doc.get("robustness_flags") or []
    lines = [f"  NOT ROBUST: {f['criterion']!r} moved in {pct(f.get('move_rate'))} of its perturbed judgements "
             f"({f.get('moved')}/{f.get('judgements')}) in the audit of {f['experiment']}: its verdicts here may turn "
             "on the judge's reading of the wording (docs/how-to/robustness.md)" for f in flags]
    return ["Criterion robustness (earlier audits, fabtest rejudge --perturb)", *lines, ""] if lines else []


def _simulator_validity(validity: dict[str, Any] | None) -> list[str]:
    """How often the simulated user stayed in its role; invalid conversations were run again or
    their scenario skipped, never counted (docs: judge-and-simulator.md, "The simulated user")."""
    if not validity:
        return []
    line = (f"  Simulator valid:  {pct(validity.get('rate'))} ({validity.get('valid', 0)}/"
            f"{validity.get('conversations', 0)} simulated conversations)")
    extra = []
    if validity.get("reruns"):
        extra.append(f"{validity['reruns']} re-run")
    if validity.get("invalid_runs"):
        extra.append(f"{validity['invalid_runs']} scenario(s) not counted: the simulated user left its role")
    return [line + (f"; {', '.join(extra)}" if extra else "")]


def _iterations(doc: dict[str, Any]) -> int:
    experiment = doc.get("experiment")
    value = experiment.get("iterations") if isinstance(experiment, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def render_summary(
    doc: dict[str, Any], path: str | os.PathLike[str] | None = None, previous_id: str | None = None,
    *, unsaved: str | None = None,
) -> str:
    """The whole console summary; ``path`` and ``previous_id`` add the saved-to and compare lines;
    ``unsaved`` (why nothing was written, e.g. ``--fabtest-no-results``) replaces both."""
    summary = doc["summary"]
    lines = [
        *_header(doc),
        "",
        RULE_LIGHT,
        "",
        *_completion(summary, _iterations(doc)),
        *budget_line(doc),
        *failure_lines(doc.get("scenario_results") or []),
        "",
        *_quality(doc),
        *_checks(doc),
        "",
        *_efficiency(summary),
        *_off_graph(doc),
        *_grounding(summary),
        *_tokens(summary),
        *coverage_lines(doc.get("coverage")),
        "",
        *_variance(doc),
        *_robustness(doc),
        RULE_LIGHT,
    ]
    if unsaved:
        lines += ["", f"Results not saved ({unsaved}): nothing to compare or view later"]
        return "\n".join(lines) + "\n"
    if path is not None:
        lines += ["", f"Results saved to: {Path(path)}"]
    this_id = doc["experiment"].get("id")
    if previous_id:
        lines += ["", "To compare with the previous experiment:", f"  fabtest-compare {previous_id} {this_id}"]
    else:
        lines += ["", "To compare with a later run:", f"  fabtest-compare {this_id} <next experiment id>"]
    return "\n".join(lines) + "\n"
