"""Compare two experiments (seed sections 7.3, 7.4, 8.1 and 9.2).

Works directly on the raw experiment documents (plain dicts), never building result models, so
comparing two experiments of 100,000 scenario results stays fast and small. The result is a
plain-data ``Comparison`` with text, JSON and markdown renderers, plus CI gates.

Validity rule (documented contract):

* LOW    when the topic graph differs, the judge LLM differs, or no scenario is shared:
         the numbers measure different things.
* MEDIUM when criteria were added, removed or modified, scenarios were added or removed, or the
         simulator LLM differs: shared parts are still comparable.
* HIGH   otherwise.

Headline metrics come from each experiment's own summary (the numbers people saw); scenario
changes are computed over the intersection of stable ids. With several runs of a scenario it
counts as passing only when every run passed.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from fabtest.experiment.fmt import RULE_HEAVY, RULE_LIGHT, llm_line, num, pct, pp, signed

__all__ = [
    "Comparability",
    "Comparison",
    "CriterionDelta",
    "MetricDelta",
    "ScenarioChange",
    "VarianceComparison",
    "compare",
    "gate_failures",
    "meets_min_completion",
    "regressed",
    "render_json",
    "render_markdown",
    "render_text",
]

Validity = Literal["HIGH", "MEDIUM", "LOW"]

RATE_TOLERANCE = 0.01  # 1pp: smaller changes are marked ─
COUNT_TOLERANCE = 0.1  # turns and topics
BIG_RATE_CHANGE = 0.10  # 10pp: doubled mark
QUALITY_THRESHOLD = 0.05  # per-scenario evaluation rate change that counts as improved/regressed
_LISTED = 20  # rows per list in text/markdown; the JSON output has everything


@dataclass(slots=True)
class MetricDelta:
    name: str
    label: str
    baseline: float | None
    current: float | None
    delta: float | None
    mark: str
    kind: Literal["rate", "count"]


@dataclass(slots=True)
class CriterionDelta:
    name: str
    baseline: float | None
    current: float | None
    delta: float | None
    mark: str
    status: Literal["compared", "modified", "added", "removed"]
    baseline_evaluated: int = 0
    current_evaluated: int = 0


@dataclass(slots=True)
class ScenarioChange:
    id: str
    name: str
    baseline: float | None = None
    current: float | None = None
    failure_type: str | None = None
    note: str = ""


@dataclass(slots=True)
class Comparability:
    topic_graph_identical: bool
    criteria_identical: bool
    criteria_added: list[str]
    criteria_removed: list[str]
    criteria_modified: list[str]
    scenarios_shared: int
    scenarios_added: int
    scenarios_removed: int
    judge_identical: bool
    judge_baseline: str
    judge_current: str
    simulator_identical: bool
    simulator_baseline: str
    simulator_current: str
    validity: Validity
    reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RateSpread:
    runs: list[float]
    mean: float | None
    std: float


@dataclass(slots=True)
class VarianceMetric:
    name: str
    baseline: RateSpread
    current: RateSpread
    delta: float | None
    overlap: bool


@dataclass(slots=True)
class VarianceComparison:
    metrics: list[VarianceMetric]
    notes: list[str]
    scenario_pass_rates: list[ScenarioChange]


@dataclass(slots=True)
class ExperimentRef:
    id: str
    name: str | None
    timestamp: str | None
    iterations: int
    interrupted: bool


@dataclass(slots=True)
class Comparison:
    baseline: ExperimentRef
    current: ExperimentRef
    comparability: Comparability
    metrics: list[MetricDelta]
    criteria: list[CriterionDelta]
    newly_passing: list[ScenarioChange]
    newly_failing: list[ScenarioChange]
    quality_improved: list[ScenarioChange]
    quality_regressed: list[ScenarioChange]
    variance: VarianceComparison | None = None

    def metric(self, name: str) -> MetricDelta:
        return next(m for m in self.metrics if m.name == name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# marks


def _mark(delta: float | None, kind: str, lower_is_better: bool = False) -> str:
    """▲ better, ▼ worse, ─ within tolerance (1pp for rates, 0.1 for counts); doubled ≥10pp."""
    if delta is None:
        return " "
    tolerance = RATE_TOLERANCE if kind == "rate" else COUNT_TOLERANCE
    if abs(delta) < tolerance - 1e-12:
        return "─"
    better = delta < 0 if lower_is_better else delta > 0
    mark = "▲" if better else "▼"
    if kind == "rate" and abs(delta) >= BIG_RATE_CHANGE - 1e-12:
        mark *= 2
    return mark


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


# ---------------------------------------------------------------------------------------------
# per-scenario aggregation over raw dicts


@dataclass(slots=True)
class _Agg:
    name: str
    runs: int = 0
    passes: int = 0
    turns: int = 0
    eval_passed: int = 0
    eval_total: int = 0
    failures: Counter[str] | None = None


def _aggregate(entries: Iterable[dict[str, Any]]) -> dict[str, _Agg]:
    out: dict[str, _Agg] = {}
    for e in entries:
        if e.get("skipped"):
            continue
        sid = e.get("id")
        agg = out.get(sid)
        if agg is None:
            agg = out[sid] = _Agg(name=e.get("name") or sid)
        agg.runs += 1
        if e.get("passed"):
            agg.passes += 1
        else:
            if agg.failures is None:
                agg.failures = Counter()
            agg.failures[e.get("failure_type") or "assertion"] += 1
        agg.turns += e.get("turns") or 0
        ev = e.get("evaluations")
        if isinstance(ev, dict):
            agg.eval_passed += ev.get("passed") or 0
            agg.eval_total += ev.get("total") or 0
    return out


def _all_ids(entries: Iterable[dict[str, Any]]) -> set[str]:
    return {e.get("id") for e in entries}


def _criteria_definitions(doc: dict[str, Any]) -> dict[str, set[str]]:
    """Criterion name → its description(s), from the configuration section or the scenarios."""
    config = doc.get("configuration")
    if isinstance(config, dict) and isinstance(config.get("criteria"), dict):
        return {k: {str(v)} for k, v in config["criteria"].items()}
    out: dict[str, set[str]] = {}
    for e in doc["scenario_results"]:
        for name, desc in (e.get("criteria") or {}).items():
            out.setdefault(name, set()).add(str(desc))
    return out


def _llm(doc: dict[str, Any], role: str) -> tuple[Any, Any]:
    entry = doc["experiment"].get(role) or {}
    if not isinstance(entry, dict):
        return (None, None)
    return (entry.get("provider"), entry.get("model"))


def _ref(doc: dict[str, Any]) -> ExperimentRef:
    exp = doc["experiment"]
    return ExperimentRef(
        id=str(exp.get("id")),
        name=exp.get("name"),
        timestamp=exp.get("timestamp"),
        iterations=int(exp.get("iterations") or 1),
        interrupted=bool(exp.get("interrupted")),
    )


# ---------------------------------------------------------------------------------------------
# the comparison


def _comparability(
    base: dict[str, Any], cur: dict[str, Any], base_ids: set[str], cur_ids: set[str]
) -> Comparability:
    topic_same = base["experiment"].get("topic_graph_hash") == cur["experiment"].get("topic_graph_hash")
    b_defs, c_defs = _criteria_definitions(base), _criteria_definitions(cur)
    added = sorted(set(c_defs) - set(b_defs))
    removed = sorted(set(b_defs) - set(c_defs))
    modified = sorted(n for n in set(b_defs) & set(c_defs) if b_defs[n] != c_defs[n])
    criteria_same = not (added or removed or modified)
    hashes = (base["experiment"].get("criteria_hash"), cur["experiment"].get("criteria_hash"))
    if criteria_same and hashes[0] and hashes[1] and hashes[0] != hashes[1] and not (b_defs or c_defs):
        criteria_same = False  # definitions unavailable but the fingerprints disagree
    shared = len(base_ids & cur_ids)
    b_judge, c_judge = _llm(base, "judge"), _llm(cur, "judge")
    b_sim, c_sim = _llm(base, "simulator"), _llm(cur, "simulator")
    reasons_low, reasons_medium = [], []
    if not topic_same:
        reasons_low.append("topic graph differs")
    if b_judge != c_judge:
        reasons_low.append("judge LLM differs")
    if shared == 0:
        reasons_low.append("no shared scenarios")
    if not criteria_same:
        reasons_medium.append("criteria changed")
    if base_ids != cur_ids:
        reasons_medium.append("scenario set differs")
    if b_sim != c_sim:
        reasons_medium.append("simulator LLM differs")
    validity: Validity = "LOW" if reasons_low else "MEDIUM" if reasons_medium else "HIGH"
    return Comparability(
        topic_graph_identical=topic_same,
        criteria_identical=criteria_same,
        criteria_added=added,
        criteria_removed=removed,
        criteria_modified=modified,
        scenarios_shared=shared,
        scenarios_added=len(cur_ids - base_ids),
        scenarios_removed=len(base_ids - cur_ids),
        judge_identical=b_judge == c_judge,
        judge_baseline=llm_line({"provider": b_judge[0], "model": b_judge[1]}),
        judge_current=llm_line({"provider": c_judge[0], "model": c_judge[1]}),
        simulator_identical=b_sim == c_sim,
        simulator_baseline=llm_line({"provider": b_sim[0], "model": b_sim[1]}),
        simulator_current=llm_line({"provider": c_sim[0], "model": c_sim[1]}),
        validity=validity,
        reasons=reasons_low + reasons_medium,
    )


def _metrics(base: dict[str, Any], cur: dict[str, Any]) -> list[MetricDelta]:
    specs = [
        ("completion_rate", "Completion rate", "rate", False),
        ("avg_turns", "Avg turns", "count", True),
        ("avg_topics", "Avg topics", "count", True),
        ("evaluation_rate", "Evaluation rate", "rate", False),
    ]
    out = []
    for key, label, kind, lower_better in specs:
        b, c = base["summary"].get(key), cur["summary"].get(key)
        d = _delta(b, c)
        out.append(MetricDelta(key, label, b, c, d, _mark(d, kind, lower_better), kind))  # type: ignore[arg-type]
    return out


def _criteria(base: dict[str, Any], cur: dict[str, Any], modified: list[str]) -> list[CriterionDelta]:
    b_res, c_res = base.get("criteria_results") or {}, cur.get("criteria_results") or {}
    rows = []
    for name in sorted(set(b_res) | set(c_res)):
        b, c = b_res.get(name) or {}, c_res.get(name) or {}
        b_rate, c_rate = b.get("rate"), c.get("rate")
        if name in modified:
            status, d = "modified", None
        elif name not in b_res:
            status, d = "added", None
        elif name not in c_res:
            status, d = "removed", None
        else:
            status, d = "compared", _delta(b_rate, c_rate)
        rows.append(
            CriterionDelta(
                name, b_rate, c_rate, d, _mark(d, "rate"), status,  # type: ignore[arg-type]
                int(b.get("evaluated") or 0), int(c.get("evaluated") or 0),
            )
        )
    return rows


def _scenario_changes(
    b_agg: dict[str, _Agg], c_agg: dict[str, _Agg]
) -> tuple[list[ScenarioChange], list[ScenarioChange], list[ScenarioChange], list[ScenarioChange]]:
    passing, failing, improved, regressed_ = [], [], [], []
    for sid in sorted(set(b_agg) & set(c_agg), key=lambda s: (c_agg[s].name, s)):
        b, c = b_agg[sid], c_agg[sid]
        b_pass, c_pass = b.passes == b.runs, c.passes == c.runs
        if not b_pass and c_pass:
            passing.append(ScenarioChange(sid, c.name, b.passes / b.runs, c.passes / c.runs))
        elif b_pass and not c_pass:
            ftype = c.failures.most_common(1)[0][0] if c.failures else "assertion"
            turns = b.turns / b.runs
            turns_text = str(int(turns)) if turns == int(turns) else f"{turns:.1f}"
            note = f"was completing in {turns_text} turn{'' if turns == 1 else 's'}, now {ftype}"
            if c.runs > 1:
                note += f" ({c.runs - c.passes}/{c.runs} runs failed)"
            failing.append(ScenarioChange(sid, c.name, b.passes / b.runs, c.passes / c.runs, ftype, note))
        if b.eval_total and c.eval_total:
            br, cr = b.eval_passed / b.eval_total, c.eval_passed / c.eval_total
            if cr - br >= QUALITY_THRESHOLD - 1e-12:
                improved.append(ScenarioChange(sid, c.name, br, cr))
            elif br - cr >= QUALITY_THRESHOLD - 1e-12:
                regressed_.append(ScenarioChange(sid, c.name, br, cr))
    improved.sort(key=lambda s: -(s.current - s.baseline))  # type: ignore[operator]
    regressed_.sort(key=lambda s: s.current - s.baseline)  # type: ignore[operator]
    return passing, failing, improved, regressed_


def _run_rates(doc: dict[str, Any], key: str) -> list[float]:
    var = doc.get("variance")
    if isinstance(var, dict) and var.get("runs"):
        return [r[key] for r in var["runs"] if r.get(key) is not None]
    value = doc["summary"].get(key)
    return [] if value is None else [value]


def _spread(values: list[float]) -> RateSpread:
    if not values:
        return RateSpread([], None, 0.0)
    return RateSpread(values, statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def _variance(
    base: dict[str, Any], cur: dict[str, Any], b_agg: dict[str, _Agg], c_agg: dict[str, _Agg]
) -> VarianceComparison:
    metrics, notes = [], []
    for key, label in (("completion_rate", "Completion rate"), ("evaluation_rate", "Evaluation rate")):
        b, c = _spread(_run_rates(base, key)), _spread(_run_rates(cur, key))
        overlap = True
        if b.mean is not None and c.mean is not None:
            overlap = not (b.mean + b.std < c.mean - c.std or c.mean + c.std < b.mean - b.std)
            if not overlap:
                notes.append(f"{label} ranges (mean ± std) do not overlap")
        metrics.append(VarianceMetric(key, b, c, _delta(b.mean, c.mean), overlap))
    per_scenario = [
        ScenarioChange(sid, c_agg[sid].name, b_agg[sid].passes / b_agg[sid].runs, c_agg[sid].passes / c_agg[sid].runs)
        for sid in sorted(set(b_agg) & set(c_agg), key=lambda s: (c_agg[s].name, s))
    ]
    return VarianceComparison(metrics, notes, per_scenario)


def compare(baseline_doc: dict[str, Any], current_doc: dict[str, Any]) -> Comparison:
    """Everything that changed from ``baseline_doc`` to ``current_doc`` (raw experiment dicts)."""
    b_entries, c_entries = baseline_doc["scenario_results"], current_doc["scenario_results"]
    b_agg, c_agg = _aggregate(b_entries), _aggregate(c_entries)
    comparability = _comparability(baseline_doc, current_doc, _all_ids(b_entries), _all_ids(c_entries))
    passing, failing, improved, regressed_ = _scenario_changes(b_agg, c_agg)
    b_ref, c_ref = _ref(baseline_doc), _ref(current_doc)
    has_runs = b_ref.iterations > 1 or c_ref.iterations > 1 or "variance" in baseline_doc or "variance" in current_doc
    return Comparison(
        baseline=b_ref,
        current=c_ref,
        comparability=comparability,
        metrics=_metrics(baseline_doc, current_doc),
        criteria=_criteria(baseline_doc, current_doc, comparability.criteria_modified),
        newly_passing=passing,
        newly_failing=failing,
        quality_improved=improved,
        quality_regressed=regressed_,
        variance=_variance(baseline_doc, current_doc, b_agg, c_agg) if has_runs else None,
    )


# ---------------------------------------------------------------------------------------------
# gates


def regressed(comparison: Comparison) -> bool:
    """True when a shared scenario newly fails or the completion rate dropped at all."""
    delta = comparison.metric("completion_rate").delta
    return bool(comparison.newly_failing) or (delta is not None and delta < -1e-9)


def meets_min_completion(comparison: Comparison, minimum: float) -> bool:
    """True when the current completion rate is at least ``minimum`` (a fraction)."""
    rate = comparison.metric("completion_rate").current
    return rate is not None and rate >= minimum - 1e-12


def gate_failures(
    comparison: Comparison, fail_on_regression: bool = False, min_completion: float | None = None
) -> list[str]:
    """One line per tripped gate (empty when the comparison passes every requested gate)."""
    out = []
    if fail_on_regression and regressed(comparison):
        m = comparison.metric("completion_rate")
        out.append(
            f"regression: {len(comparison.newly_failing)} newly failing scenario(s), completion "
            f"{pct(m.baseline)} → {pct(m.current)}"
        )
    if min_completion is not None and not meets_min_completion(comparison, min_completion):
        out.append(
            f"completion rate {pct(comparison.metric('completion_rate').current)} is below the minimum {pct(min_completion)}"
        )
    return out


# ---------------------------------------------------------------------------------------------
# renderers


def _ref_line(label: str, ref: ExperimentRef) -> str:
    name = f' "{ref.name}"' if ref.name else ""
    date = f" ({ref.timestamp[:10]})" if ref.timestamp else ""
    extra = f" [{ref.iterations} runs]" if ref.iterations > 1 else ""
    extra += " [INTERRUPTED]" if ref.interrupted else ""
    return f"{label}{ref.id}{name}{date}{extra}"


def _value(m: MetricDelta | CriterionDelta, which: str, kind: str = "rate") -> str:
    v = getattr(m, which)
    return pct(v) if kind == "rate" else num(v)


def _delta_text(delta: float | None, kind: str) -> str:
    return pp(delta) if kind == "rate" else signed(delta)


def _same_llm(line: str) -> str:
    return " (none configured)" if line.startswith("none") else f" ({line})"


def _comparability_lines(c: Comparability) -> list[str]:
    def flag(ok: bool, severe: bool = False) -> str:
        return "✓" if ok else ("✗" if severe else "⚠")

    parts = []
    if c.criteria_added:
        parts.append(f"{len(c.criteria_added)} added ({', '.join(c.criteria_added)})")
    if c.criteria_removed:
        parts.append(f"{len(c.criteria_removed)} removed ({', '.join(c.criteria_removed)})")
    if c.criteria_modified:
        parts.append(f"{len(c.criteria_modified)} modified ({', '.join(c.criteria_modified)}; not compared)")
    criteria_text = "identical" if c.criteria_identical else (", ".join(parts) or "changed")
    scen_ok = c.scenarios_added == 0 and c.scenarios_removed == 0
    return [
        "Comparability Assessment",
        f"  {flag(c.topic_graph_identical, True)} Topic graph: {'identical' if c.topic_graph_identical else 'DIFFERENT'}",
        f"  {flag(c.criteria_identical)} Criteria: {criteria_text}",
        f"  {flag(scen_ok, c.scenarios_shared == 0)} Scenarios: {c.scenarios_shared} shared, "
        f"{c.scenarios_added} added, {c.scenarios_removed} removed",
        f"  {flag(c.judge_identical, True)} Judge LLM: "
        + ("identical" if c.judge_identical else f"{c.judge_baseline} → {c.judge_current}")
        + (_same_llm(c.judge_current) if c.judge_identical else ""),
        f"  {flag(c.simulator_identical)} Simulator LLM: "
        + ("identical" if c.simulator_identical else f"{c.simulator_baseline} → {c.simulator_current}")
        + (_same_llm(c.simulator_current) if c.simulator_identical else ""),
        "",
        f"  Comparison validity: {c.validity}" + (f" ({'; '.join(c.reasons)})" if c.reasons else ""),
    ]


def _listed(items: list[ScenarioChange], line) -> list[str]:  # type: ignore[no-untyped-def]
    out = [line(s) for s in items[:_LISTED]]
    if len(items) > _LISTED:
        out.append(f"    ... and {len(items) - _LISTED} more (see --format json)")
    return out


def render_text(comparison: Comparison) -> str:
    """The console comparison (seed 8.1 layout)."""
    c = comparison
    comp = c.comparability
    lines = [
        "Experiment Comparison",
        RULE_HEAVY,
        "",
        _ref_line("Baseline: ", c.baseline),
        _ref_line("Current:  ", c.current),
        "",
        f"Scenarios compared: {comp.scenarios_shared} ({comp.scenarios_added} added, {comp.scenarios_removed} removed)",
        "",
        *_comparability_lines(comp),
        "",
        RULE_LIGHT,
        "",
        "Completion (Hard Expectations)",
    ]
    for m in c.metrics:
        if m.name == "evaluation_rate":
            lines += ["", RULE_LIGHT, "", "Quality (Soft Evaluations)"]
            label = "Overall"
        else:
            label = {"completion_rate": "Rate", "avg_turns": "Avg Turns", "avg_topics": "Avg Topics"}[m.name]
        values = f"{_value(m, 'baseline', m.kind)} → {_value(m, 'current', m.kind)}"
        lines.append(f"  {label + ':':<15} {values:<16} ({_delta_text(m.delta, m.kind)}) {m.mark}".rstrip())
    if c.criteria:
        width = max(24, *(len(row.name) for row in c.criteria))
        lines += ["", "  By Criterion:", f"    {'Criterion':<{width}} {'Baseline':>9} {'Current':>9} {'Delta':>9}",
                  "    " + "─" * (width + 32)]
        for row in c.criteria:
            if row.status == "compared":
                tail = f"{pp(row.delta, 0):>9}  {row.mark}"
            else:
                tail = f"{row.status + (' (not compared)' if row.status == 'modified' else '')}"
                tail = f"{'':>9}  {tail}"
            lines.append(f"    {row.name:<{width}} {pct(row.baseline):>9} {pct(row.current):>9} {tail}".rstrip())
    lines += ["", RULE_LIGHT, "", "Scenario Changes"]
    if not (c.newly_passing or c.newly_failing or c.quality_improved or c.quality_regressed):
        lines.append("  No scenario changed status or quality.")
    if c.newly_passing:
        lines.append(f"  Newly passing ({len(c.newly_passing)}):")
        lines += _listed(c.newly_passing, lambda s: f"    - {s.name}")
    if c.newly_failing:
        lines.append(f"  Newly failing ({len(c.newly_failing)}):")
        lines += _listed(c.newly_failing, lambda s: f"    - {s.name} ({s.note})")
    if c.quality_improved:
        lines.append(f"  Quality improved ({len(c.quality_improved)}):")
        lines += _listed(c.quality_improved, lambda s: f"    - {s.name}: {pct(s.baseline, 0)} → {pct(s.current, 0)} evaluation pass rate")
    if c.quality_regressed:
        lines.append(f"  Quality regressed ({len(c.quality_regressed)}):")
        lines += _listed(c.quality_regressed, lambda s: f"    - {s.name}: {pct(s.baseline, 0)} → {pct(s.current, 0)} evaluation pass rate")
    if c.variance is not None:
        lines += ["", RULE_LIGHT, "", "Comparison (with variance)", ""]
        lines.append(f"  {'Metric':<18} {'Baseline':<18} {'Current':<18} Delta")
        lines.append("  " + "─" * 63)
        for vm in c.variance.metrics:
            label = "Completion Rate" if vm.name == "completion_rate" else "Evaluation Rate"
            b = f"{pct(vm.baseline.mean)} ± {num(vm.baseline.std * 100)}pp"
            cur = f"{pct(vm.current.mean)} ± {num(vm.current.std * 100)}pp"
            lines.append(f"  {label:<18} {b:<18} {cur:<18} {pp(vm.delta)}")
        for note in c.variance.notes:
            lines.append(f"  Note: {note}")
        changed = [s for s in c.variance.scenario_pass_rates if s.baseline != s.current]
        if changed:
            lines += ["", f"  Per-scenario pass rate changes ({len(changed)}):"]
            lines += _listed(changed, lambda s: f"    - {s.name}: {pct(s.baseline, 0)} → {pct(s.current, 0)}")
    lines += ["", RULE_LIGHT]
    return "\n".join(lines) + "\n"


def render_json(comparison: Comparison) -> str:
    return json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False) + "\n"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def _md_escape(text: object) -> str:
    """Names and notes come from results files: no markup, no raw HTML, one table cell."""
    plain = " ".join(str(text).split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", plain)


def render_markdown(comparison: Comparison) -> str:
    """A compact report for a pull-request comment."""
    c = comparison
    comp = c.comparability
    icon = {"HIGH": "🟢", "MEDIUM": "🟡", "LOW": "🔴"}[comp.validity]
    lines = [
        f"## fabtest: `{c.baseline.id}` → `{c.current.id}`",
        "",
        f"**Comparison validity: {icon} {comp.validity}**" + (f" ({_md_escape('; '.join(comp.reasons))})" if comp.reasons else ""),
        "",
        f"Scenarios compared: {comp.scenarios_shared} ({comp.scenarios_added} added, {comp.scenarios_removed} removed)",
        "",
        "| Metric | Baseline | Current | Delta | |",
        "|---|---:|---:|---:|:-:|",
    ]
    for m in c.metrics:
        lines.append(
            f"| {m.label} | {_value(m, 'baseline', m.kind)} | {_value(m, 'current', m.kind)} | {_delta_text(m.delta, m.kind)} | {m.mark} |"
        )
    if c.criteria:
        lines += ["", "### By criterion", "", "| Criterion | Baseline | Current | Delta | |", "|---|---:|---:|---:|:-:|"]
        for row in c.criteria:
            delta = pp(row.delta, 0) if row.status == "compared" else row.status
            lines.append(f"| {_md_escape(row.name)} | {pct(row.baseline)} | {pct(row.current)} | {delta} | {row.mark.strip()} |")
    for title, items, fmt in (
        ("Newly failing", c.newly_failing, lambda s: f"- ❌ {_md_escape(s.name)} ({_md_escape(s.note)})"),
        ("Newly passing", c.newly_passing, lambda s: f"- ✅ {_md_escape(s.name)}"),
        ("Quality regressed", c.quality_regressed, lambda s: f"- {_md_escape(s.name)}: {pct(s.baseline, 0)} → {pct(s.current, 0)}"),
        ("Quality improved", c.quality_improved, lambda s: f"- {_md_escape(s.name)}: {pct(s.baseline, 0)} → {pct(s.current, 0)}"),
    ):
        if items:
            lines += ["", f"### {title} ({len(items)})", ""]
            lines += [fmt(s) for s in items[:_LISTED]]
            if len(items) > _LISTED:
                lines.append(f"- … and {len(items) - _LISTED} more")
    if c.variance is not None:
        lines += ["", "### Variance", "", "| Metric | Baseline | Current | Delta |", "|---|---:|---:|---:|"]
        for vm in c.variance.metrics:
            lines.append(
                f"| {vm.name.replace('_', ' ')} | {pct(vm.baseline.mean)} ± {num(vm.baseline.std * 100)}pp | "
                f"{pct(vm.current.mean)} ± {num(vm.current.std * 100)}pp | {pp(vm.delta)} |"
            )
        lines += [f"\n> {note}" for note in c.variance.notes]
    return "\n".join(lines) + "\n"
