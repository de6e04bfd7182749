"""Aggregation metrics (docs/explanation/experiments.md, docs/how-to/flaky.md) as pure functions over scenario results.

Conventions, shared by export, summary and report:

* Rates are fractions in [0, 1], or None when there is nothing to rate.
* Skipped scenarios are left out of completion, efficiency and per-run rates, but counted.
* Checks with status ``skipped``, ``inconclusive`` or ``not_applicable`` are left out of every
  rate; inconclusive ones are counted separately because they point at judge trouble, and
  not-applicable ones (the judge found the criterion does not apply to what it judged) are
  counted apart so a criterion that never applies does not read as a criterion that passes.
* Standard deviations are *sample* standard deviations (n - 1), 0.0 for a single run.
* Criteria and checks are kept apart: a *criterion* is judged by the LLM (declared or ad-hoc
  ``satisfy`` criteria, grounding, intent, goal, playbook LLM checks and steps); a *check* is
  deterministic (``match:/…/``, ``call_tool:…``, ``turn_count<=2``, files, topics …). Mixing them
  buries four criteria under forty checks.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from fabtest.experiment.model import CheckRecord, ScenarioResult

__all__ = [
    "FAILURE_TYPES",
    "LLM_JUDGED_TYPES",
    "checks_performance",
    "completion",
    "criteria_performance",
    "efficiency",
    "entry_check_counts",
    "evaluation",
    "is_criterion",
    "grounding",
    "iteration_stats",
    "low_confidence_count",
    "pass_at_k",
    "pass_hat_k",
    "rate",
    "run_rates",
    "sample_std",
    "skipped_checks",
    "scenario_check_summary",
    "spread",
    "tokens",
    "unjudged",
]

FAILURE_TYPES = ("assertion", "max_turns", "timeout", "error")

#: Check types whose verdict comes from the judge LLM: these are the *criteria*.
LLM_JUDGED_TYPES = frozenset({"satisfy", "grounded_in", "intent", "goal", "llm_check", "step"})


def is_criterion(check_type: str | None) -> bool:
    """True for an LLM-judged check (a criterion), False for a deterministic check."""
    return check_type in LLM_JUDGED_TYPES


def rate(passed: int, total: int) -> float | None:
    """``passed / total`` or None when nothing was rated."""
    return passed / total if total else None


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); 0.0 with fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, median and range of a list of numbers (all None when empty)."""
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None}
    return {
        "mean": statistics.fmean(values),
        "median": float(statistics.median(values)),
        "min": min(values),
        "max": max(values),
    }


def _counted(results: Iterable[ScenarioResult]) -> list[ScenarioResult]:
    return [r for r in results if not r.skipped]


def completion(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """Completion rate over non-skipped scenarios, with the breakdown by failure type."""
    counted = _counted(results)
    passed = sum(1 for r in counted if r.passed)
    failure_types: Counter[str] = Counter()
    for r in counted:
        if not r.passed:
            failure_types[r.failure_type or "assertion"] += 1
    return {
        "total": len(results),
        "skipped": len(results) - len(counted),
        "counted": len(counted),
        "passed": passed,
        "failed": len(counted) - passed,
        "rate": rate(passed, len(counted)),
        "failure_types": {t: failure_types.get(t, 0) for t in FAILURE_TYPES} | {
            t: n for t, n in sorted(failure_types.items()) if t not in FAILURE_TYPES
        },
    }


def simulator_validity(results: Sequence[ScenarioResult]) -> dict[str, Any] | None:
    """How often the simulated user stayed in its role (engine/fidelity.py): over every simulated
    conversation tried, how many were valid; ``invalid_runs`` are the scenarios whose every try was
    invalid (skipped, not counted) and ``reruns`` the conversations run again. None: nothing simulated."""
    simulated = [r.simulation for r in results if r.simulation]
    if not simulated:
        return None
    tries = [t for s in simulated for t in s.get("tries") or []]
    valid = sum(1 for t in tries if t.get("valid"))
    return {"runs": len(simulated), "conversations": len(tries), "valid": valid, "invalid": len(tries) - valid,
            "rate": rate(valid, len(tries)), "reruns": len(tries) - len(simulated),
            "invalid_runs": sum(1 for s in simulated if not s.get("valid"))}


def _tally(checks: Iterable[CheckRecord]) -> dict[str, int]:
    counts = {"evaluated": 0, "passed": 0, "failed": 0, "inconclusive": 0, "not_applicable": 0, "skipped": 0}
    for c in checks:
        if c.status == "passed":
            counts["passed"] += 1
            counts["evaluated"] += 1
        elif c.status == "failed":
            counts["failed"] += 1
            counts["evaluated"] += 1
        else:
            counts[c.status] += 1
    return counts


def evaluation(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """Soft-evaluation pass rate; skipped and inconclusive checks are counted but not rated."""
    counts = _tally(c for r in results for c in r.evaluations)
    return counts | {"rate": rate(counts["passed"], counts["evaluated"])}


def _performance(results: Sequence[ScenarioResult], criteria: bool) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[CheckRecord]] = defaultdict(list)
    for r in results:
        for c in (*r.evaluations, *r.expectations):
            if c.status != "skipped" and is_criterion(c.type) == criteria:
                groups[c.criterion].append(c)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(groups):
        counts = _tally(groups[name])
        out[name] = {
            "evaluated": counts["evaluated"],
            "passed": counts["passed"],
            "failed": counts["failed"],
            "inconclusive": counts["inconclusive"],
            "not_applicable": counts["not_applicable"],
            "rate": rate(counts["passed"], counts["evaluated"]),
        }
        must = sum(1 for c in groups[name] if c.mode == "must")
        if must and criteria:  # hard ratings (only when any): compare lists hard criteria apart
            out[name]["must"] = must
    return out


def criteria_performance(results: Sequence[ScenarioResult]) -> dict[str, dict[str, Any]]:
    """Per criterion (LLM-judged checks only, soft and hard; docs/reference/experiment-json.md), sorted by name.

    Skipped checks are left out entirely; inconclusive ones are counted but not rated.
    """
    return _performance(results, criteria=True)


def checks_performance(results: Sequence[ScenarioResult]) -> dict[str, dict[str, Any]]:
    """Per deterministic check label (``match:/…/``, ``call_tool:…`` …), same counting as criteria."""
    return _performance(results, criteria=False)


def entry_check_counts(entry: dict[str, Any]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Criteria and checks of one raw scenario entry: ``{label: [passed, evaluated]}`` each.

    Works on the JSON document (``evaluations.details`` / ``expectations.details``) so comparisons
    need no models; skipped checks are left out, inconclusive ones counted as seen but not rated.
    """
    criteria: dict[str, list[int]] = {}
    checks: dict[str, list[int]] = {}
    for key in ("evaluations", "expectations"):
        block = entry.get(key)
        details = block.get("details") if isinstance(block, dict) else block
        for d in details if isinstance(details, list) else ():
            if not isinstance(d, dict) or d.get("status") == "skipped":
                continue
            target = criteria if is_criterion(d.get("type")) else checks
            counts = target.setdefault(str(d.get("criterion")), [0, 0])
            if d.get("status") in ("passed", "failed"):
                counts[1] += 1
                counts[0] += d.get("status") == "passed"
    return criteria, checks


def unjudged(doc: dict[str, Any]) -> int:
    """The judged checks of an experiment document when not one of them was rated (every one skipped:
    no judge, a judge outage, unusable answers; or inconclusive), else 0. Such a run tested none of
    them, so neither pytest nor the gate may call it green (docs/gates.md, "What counts as untested")."""
    summary, results = doc.get("summary"), doc.get("criteria_results")
    summary = summary if isinstance(summary, dict) else {}
    entries = [e for e in results.values() if isinstance(e, dict)] if isinstance(results, dict) else []
    if any(_count(e.get("evaluated")) for e in entries):
        return 0
    return _count(summary.get("skipped_checks")) + sum(_count(e.get("inconclusive")) for e in entries)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def skipped_checks(results: Sequence[ScenarioResult]) -> int:
    """How many checks could not run (mentioned in the summary so nobody mistakes them for passes)."""
    return sum(1 for r in results for c in (*r.evaluations, *r.expectations) if c.status == "skipped")


def efficiency(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """Turns and distinct topics per scenario (mean/median/range) and the backtracking rate."""
    counted = _counted(results)
    with_topics = [r for r in counted if r.topic_path or r.topics_visited]
    # Topics only mean something where a topic graph was declared: a scenario without one would
    # pull the average towards 0.
    with_graph = [r for r in counted if r.topics or r.topic_path or r.topics_visited]
    return {
        "turns": spread([float(r.turns) for r in counted]),
        "topics": spread([float(len(r.topics_visited)) for r in with_graph]),
        "topic_graph_scenarios": len(with_graph),
        # Backtracking only means something where a topic graph was followed.
        "backtracking_rate": rate(sum(1 for r in with_topics if r.backtracked), len(with_topics)),
    }


def voice(results: Sequence[ScenarioResult]) -> dict[str, Any] | None:
    """The voice turns' figures (docs/how-to/voice.md): time to first audio, reply length, word error
    rate and barge-ins; None when no turn was spoken."""
    spoken = [t.voice for r in results for t in r.transcript if t.voice is not None]
    if not spoken:
        return None
    firsts = sorted(v.time_to_first_audio_ms for v in spoken if v.time_to_first_audio_ms is not None)
    rates = [v.word_error_rate for v in spoken if v.word_error_rate is not None]
    p95 = firsts[max(0, math.ceil(0.95 * len(firsts)) - 1)] if firsts else None  # nearest rank
    return {
        "turns": len(spoken),
        "time_to_first_audio_ms": {**spread(firsts), "p95": p95},
        "reply_audio_ms": spread([v.reply_audio_ms for v in spoken]),
        "word_error_rate": statistics.fmean(rates) if rates else None,
        "interrupted": sum(1 for v in spoken if v.interrupted),
    }


def grounding(results: Sequence[ScenarioResult], worst: int = 5) -> dict[str, Any]:
    """``grounded_in`` checks by tool source, and the scenarios with the most ungrounded claims.

    A check's ``data`` has ``source`` (the tool) and optionally ``claims_total`` and
    ``claims_unsupported``. A scenario's ungrounded rate uses claim counts when every one of its
    grounding checks has them, else the share of failed grounding checks.
    """
    by_source: dict[str, dict[str, Any]] = {}
    per_id: dict[str, dict[str, Any]] = {}
    for r in results:
        checks = [
            c for c in (*r.evaluations, *r.expectations) if c.type == "grounded_in" and c.status in ("passed", "failed")
        ]
        if not checks:
            continue
        claims_total = claims_bad = 0
        all_claims = True
        for c in checks:
            source = str(c.data.get("source") or c.criterion or "unknown")
            entry = by_source.setdefault(
                source, {"evaluated": 0, "grounded": 0, "claims_total": 0, "claims_unsupported": 0}
            )
            entry["evaluated"] += 1
            entry["grounded"] += c.status == "passed"
            total = c.data.get("claims_total")
            bad = c.data.get("claims_unsupported")
            if isinstance(total, int) and isinstance(bad, int):
                entry["claims_total"] += total
                entry["claims_unsupported"] += bad
                claims_total += total
                claims_bad += bad
            else:
                all_claims = False
        # One entry per scenario (all its runs together), never one per iteration.
        entry = per_id.setdefault(r.id, {"id": r.id, "name": r.name, "runs": 0, "checks": 0, "failed": 0,
                                         "claims_total": 0, "claims_unsupported": 0, "all_claims": True})
        entry["runs"] += 1
        entry["checks"] += len(checks)
        entry["failed"] += sum(1 for c in checks if c.status == "failed")
        entry["claims_total"] += claims_total
        entry["claims_unsupported"] += claims_bad
        entry["all_claims"] = entry["all_claims"] and all_claims
    per_scenario: list[dict[str, Any]] = []
    for e in per_id.values():
        if e["all_claims"] and e["claims_total"]:
            ungrounded = e["claims_unsupported"] / e["claims_total"]
        else:
            ungrounded = e["failed"] / e["checks"]
        per_scenario.append({"id": e["id"], "name": e["name"], "runs": e["runs"], "checks": e["checks"],
                             "ungrounded_rate": ungrounded})
    for entry in by_source.values():
        entry["rate"] = rate(entry["grounded"], entry["evaluated"])
        entry["claim_rate"] = (
            1 - entry["claims_unsupported"] / entry["claims_total"] if entry["claims_total"] else None
        )
    per_scenario.sort(key=lambda s: (-s["ungrounded_rate"], s["name"], s["id"]))
    return {
        "by_source": dict(sorted(by_source.items())),
        "worst_scenarios": [s for s in per_scenario if s["ungrounded_rate"] > 0][:worst],
    }


def tokens(results: Sequence[ScenarioResult]) -> dict[str, dict[str, int]]:
    """LLM calls and tokens summed per role (judge, simulator, ...)."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        for role, usage in r.usage.items():
            entry = out.setdefault(role, {"calls": 0, "input_tokens": 0, "output_tokens": 0})
            entry["calls"] += usage.calls
            entry["input_tokens"] += usage.input_tokens
            entry["output_tokens"] += usage.output_tokens
    return dict(sorted(out.items()))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k runs passes: unbiased estimator ``1 - C(n-c, k) / C(n, k)``."""
    if n <= 0 or k <= 0 or k > n:
        return 0.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Chance that all k runs pass: unbiased estimator ``C(c, k) / C(n, k)``."""
    if n <= 0 or k <= 0 or k > n:
        return 0.0
    return math.comb(c, k) / math.comb(n, k)


def iteration_stats(results: Sequence[ScenarioResult], k: int | None = None) -> list[dict[str, Any]]:
    """Per stable id: runs, passes, pass rate, pass@k, pass^k and a stability label.

    ``k`` defaults to the number of runs of each scenario (then pass@k is "passed at least once"
    and pass^k "passed every time"). Skipped runs are not counted. Labels: ``stable-pass`` (every
    run passed), ``stable-fail`` (none did), ``flaky`` (some did).
    """
    groups: dict[str, list[ScenarioResult]] = defaultdict(list)
    for r in results:
        groups[r.id].append(r)
    out: list[dict[str, Any]] = []
    for sid, runs in groups.items():
        counted = _counted(runs)
        n = len(counted)
        c = sum(1 for r in counted if r.passed)
        kk = min(k, n) if k is not None else n
        label = "skipped" if n == 0 else "stable-pass" if c == n else "stable-fail" if c == 0 else "flaky"
        out.append(
            {
                "id": sid,
                "name": runs[0].name,
                "runs": n,
                "passes": c,
                "skipped": len(runs) - n,
                "pass_rate": rate(c, n),
                "k": kk,
                "pass_at_k": pass_at_k(n, c, kk) if n else None,
                "pass_hat_k": pass_hat_k(n, c, kk) if n else None,
                "label": label,
            }
        )
    out.sort(key=lambda s: (s["name"], s["id"]))
    return out


def run_rates(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """Completion and evaluation rate of each run (iteration), with mean and sample std dev."""
    by_run: dict[int, list[ScenarioResult]] = defaultdict(list)
    for r in results:
        by_run[r.iteration].append(r)
    runs = []
    for iteration in sorted(by_run):
        group = by_run[iteration]
        runs.append(
            {
                "iteration": iteration,
                "scenarios": len(group),
                "completion_rate": completion(group)["rate"],
                "evaluation_rate": evaluation(group)["rate"],
            }
        )

    def _agg(key: str) -> dict[str, float | None]:
        values = [r[key] for r in runs if r[key] is not None]
        if not values:
            return {"mean": None, "std": None}
        return {"mean": statistics.fmean(values), "std": sample_std(values)}

    return {
        "runs": runs,
        "completion_rate": _agg("completion_rate"),
        "evaluation_rate": _agg("evaluation_rate"),
        "std_kind": "sample",
    }


def scenario_check_summary(checks: Sequence[CheckRecord], by_criterion: bool) -> dict[str, Any]:
    """Per-scenario check counts for the JSON document (``evaluations``/``expectations``,
    docs/reference/experiment-json.md)."""
    counts = _tally(checks)
    out: dict[str, Any] = {
        "total": counts["evaluated"],
        "passed": counts["passed"],
        "failed": counts["failed"],
        "inconclusive": counts["inconclusive"],
        "not_applicable": counts["not_applicable"],
        "skipped": counts["skipped"],
        "rate": rate(counts["passed"], counts["evaluated"]),
    }
    if by_criterion:
        groups: dict[str, dict[str, int]] = {}
        for c in checks:
            if c.status in ("passed", "failed"):
                entry = groups.setdefault(c.criterion, {"evaluated": 0, "passed": 0})
                entry["evaluated"] += 1
                entry["passed"] += c.status == "passed"
        out["by_criterion"] = dict(sorted(groups.items()))
    return out


def low_confidence_count(doc: dict[str, Any]) -> int:
    """Checks of an experiment whose judge samples did not agree."""
    count = 0
    for entry in doc.get("scenario_results") or []:
        for block in ("evaluations", "expectations"):
            details = (entry.get(block) or {}).get("details") if isinstance(entry, dict) else None
            count += sum(1 for d in details or [] if isinstance(d, dict) and d.get("confidence") == "low")
    return count
