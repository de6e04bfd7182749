"""Compare two experiments (docs/explanation/experiments.md, "The comparison"; the gate: docs/gates.md).

Works directly on the raw experiment documents (plain dicts), never building result models, so
comparing two experiments of 100,000 scenario results stays fast and small. The result is a
plain-data ``Comparison`` with text, JSON and markdown renderers, plus CI gates.

Validity rule (documented contract):

* LOW    when the topic graph differs, the judge LLM or its recorded settings (temperature,
         samples, samples_per_criterion, context_turns, max_file_bytes) differ, or no scenario is shared: the
         numbers measure different things.
* MEDIUM when criteria were added, removed or modified, scenarios were added or removed, or the
         simulator LLM or its recorded settings (temperature, fidelity) differ: shared parts are
         still comparable.
* HIGH   otherwise.

Every headline delta, criterion and check row and every gate is computed over the *shared*
scenarios (stable ids both experiments contain, docs/explanation/experiments.md): a scenario added in the current
experiment is not a regression of the old ones. Added and removed scenarios are listed apart
with their outcomes, and each experiment's own whole figures are kept apart and labelled. With
several runs of a scenario it counts as passing only when every run passed (scenario changes);
rates count every run.

Each rate carries the one-sided Fisher p-value of its drop, and the run-level counts the gate
tests (experiment/gate.py: one family over every gated metric, the scenario run as the unit).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from typing import Any, Literal

from fabtest.compare.inference import wilson
from fabtest.compare.moved import Moved, moves
from fabtest.compare.read import Experiment, ScenarioTally, hard_criteria, merge_counts, no_gc, run_level, summarise
from fabtest.experiment.cost import cost_delta_by_id
from fabtest.experiment.coverage import changes as coverage_changes
from fabtest.experiment.fmt import llm_line
from fabtest.experiment.stats import unjudged

__all__ = [
    "DEFAULT_ALPHA",
    "Comparability",
    "Comparison",
    "CriterionDelta",
    "MetricDelta",
    "ScenarioChange",
    "ScenarioOutcome",
    "VarianceComparison",
    "compare",
    "drop_p_value",
    "name_features",
]

Validity = Literal["HIGH", "MEDIUM", "LOW"]
Status = Literal["compared", "modified", "added", "removed", "not reached", "not evaluated"]

RATE_TOLERANCE = 0.01  # 1pp: smaller changes are marked ─
COUNT_TOLERANCE = 0.1  # turns and topics
BIG_RATE_CHANGE = 0.10  # 10pp: doubled mark
QUALITY_THRESHOLD = 0.05  # per-scenario evaluation rate change that counts as improved/regressed
DEFAULT_ALPHA = 0.05


@dataclass(slots=True)
class MetricDelta:
    name: str
    label: str
    baseline: float | None
    current: float | None
    delta: float | None
    mark: str
    kind: Literal["rate", "count"]
    # pass counts behind a rate (passed, rated) and the one-sided p-value of a drop
    baseline_counts: tuple[int, int] | None = None
    current_counts: tuple[int, int] | None = None
    p_value: float | None = None
    #: the gate's unit (experiment/gate.py): (runs whose every rating passed, runs rated) per side, and
    #: the sums of the current runs' own rates
    baseline_runs: tuple[int, int] | None = None
    current_runs: tuple[int, int] | None = None
    current_run_rate_sum: float | None = None
    #: 95 % Wilson intervals of the two rates (from the counts above; None: no counts)
    baseline_interval: tuple[float, float] | None = None
    current_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        self.baseline_interval, self.current_interval = _interval(self.baseline_counts), _interval(self.current_counts)


def _interval(counts: tuple[int, int] | None) -> tuple[float, float] | None:
    found = wilson(counts[0], counts[1]) if counts is not None else None
    return None if found is None else (round(found[0], 4), round(found[1], 4))


@dataclass(slots=True)
class CriterionDelta:
    """One criterion (or deterministic check) over the shared scenarios."""

    name: str
    baseline: float | None
    current: float | None
    delta: float | None
    mark: str
    status: Status
    baseline_evaluated: int = 0
    current_evaluated: int = 0
    baseline_passed: int = 0
    current_passed: int = 0
    p_value: float | None = None
    note: str = ""
    #: the gate's unit: (runs whose every rating of it passed, runs that rated it) per side
    baseline_runs: tuple[int, int] = (0, 0)
    current_runs: tuple[int, int] = (0, 0)
    hard: bool = False  # a ``must`` criterion on either side (listed apart from the soft ones)
    #: 95 % Wilson intervals of the two rates (ratings passed of ratings)
    baseline_interval: tuple[float, float] | None = None
    current_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        self.baseline_interval = _interval((self.baseline_passed, self.baseline_evaluated))
        self.current_interval = _interval((self.current_passed, self.current_evaluated))


@dataclass(slots=True)
class ScenarioChange:
    id: str
    name: str
    baseline: float | None = None
    current: float | None = None
    failure_type: str | None = None
    note: str = ""
    #: the counts behind the two rates ([passed, of]) and their 95 % Wilson intervals
    baseline_counts: tuple[int, int] | None = None
    current_counts: tuple[int, int] | None = None
    baseline_interval: tuple[float, float] | None = None
    current_interval: tuple[float, float] | None = None
    #: "regressed" / "improved" when the gate's family found the change, else "changed, not significant"
    label: str = ""

    def __post_init__(self) -> None:
        self.baseline_interval, self.current_interval = _interval(self.baseline_counts), _interval(self.current_counts)


@dataclass(slots=True)
class ScenarioOutcome:
    """An added or removed scenario: how it did in the one experiment that has it."""

    id: str
    name: str
    runs: int
    passes: int
    skipped: int
    pass_rate: float | None
    evaluation_rate: float | None
    failure_type: str | None = None
    feature: str | None = None  # two scenarios may share a name: the feature and the id tell them apart


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
    #: what changed in the settings that can change a verdict ("temperature 0.0 → 0.7"), when both
    #: experiments recorded them (experiment.judge.settings / experiment.simulator.settings)
    judge_settings_changed: list[str] = field(default_factory=list)
    simulator_settings_changed: list[str] = field(default_factory=list)


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
    overlap: bool | None  # None: a side has fewer than two runs, so no range to compare


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
    metrics: list[MetricDelta]  # over the shared scenarios
    criteria: list[CriterionDelta]  # LLM-judged criteria, shared scenarios
    newly_passing: list[ScenarioChange]
    newly_failing: list[ScenarioChange]
    quality_improved: list[ScenarioChange]
    quality_regressed: list[ScenarioChange]
    variance: VarianceComparison | None = None
    checks: list[CriterionDelta] = field(default_factory=list)  # deterministic checks, shared scenarios
    added: list[ScenarioOutcome] = field(default_factory=list)  # only in current
    removed: list[ScenarioOutcome] = field(default_factory=list)  # only in baseline
    whole: list[MetricDelta] = field(default_factory=list)  # each experiment's own summary, not compared
    #: experiment/cost.py's ``cost_delta`` over the shared scenarios; None when neither side recorded a cost
    cost: dict[str, Any] | None = None
    #: experiment/gate.py's ``gate_dict`` (the JSON ``gate`` key), set by fabtest-compare
    gate: dict[str, Any] | None = None
    #: experiment/coverage.py's ``changes``: per kind, what became covered and what became uncovered
    coverage: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # why no verdict can be trusted (an index disagreeing)
    #: quality changes the gate's family did not find (``compare.scenario_family.label_changes``)
    changed_not_significant: list[ScenarioChange] = field(default_factory=list)
    verdict: str | None = None  # the one verdict line (``compare.gate``), first in every output
    #: what moved, scenario by scenario (``compare.moved``): second in every output, right after the verdict
    moved: list[Moved] = field(default_factory=list)
    moved_total: int = 0
    #: the shared scenarios' tallies for the gate's per-scenario hypotheses (never in the JSON)
    tallies: tuple[dict[str, ScenarioTally], dict[str, ScenarioTally]] | None = None

    def metric(self, name: str) -> MetricDelta:
        return next(m for m in self.metrics if m.name == name)

    @property
    def gone(self) -> str:
        """What the baseline-only scenarios are: removed, or not run when the current run was
        interrupted (never tried, not taken out of the suite: untested)."""
        return "not run (the current run was interrupted)" if self.current.interrupted else "removed"

    def to_dict(self) -> dict[str, Any]:
        tallies, self.tallies = self.tallies, None
        try:
            data = asdict(self)
        finally:
            self.tallies = tallies
        data.pop("tallies", None)
        data["moved"] = [m.to_dict() for m in self.moved]
        return {"verdict": data.pop("verdict"), "moved": data.pop("moved"), "moved_total": data.pop("moved_total"),
                **data}


# ---------------------------------------------------------------------------------------------
# marks and tests


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


def _direction(delta: float | None) -> str:
    """↑ more, ↓ fewer, ─ within 0.1: a change shown without calling it better or worse."""
    if delta is None:
        return " "
    return "─" if abs(delta) < COUNT_TOLERANCE - 1e-12 else "↑" if delta > 0 else "↓"


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _rate(passed: int, total: int) -> float | None:
    return passed / total if total else None


def drop_p_value(b_passed: int, b_total: int, c_passed: int, c_total: int) -> float | None:
    """One-sided Fisher's exact test: how likely a drop this large is by chance (None: nothing to test).

    The 2×2 table is [[baseline passed, baseline failed], [current passed, current failed]];
    ``alternative="greater"`` asks whether the baseline's odds of passing are higher.
    """
    if b_total <= 0 or c_total <= 0:
        return None
    return min(1.0, max(0.0, _hypergeom_sf(b_passed, b_total + c_total, b_total, b_passed + c_passed)))


def _hypergeom_sf(a: int, total: int, draws: int, successes: int) -> float:
    """P(X >= a) for X hypergeometric (``successes`` marked among ``total``, ``draws`` drawn): the
    one-sided Fisher p-value of the table above, as ``scipy.stats.fisher_exact(alternative="greater")``
    gives it, in pure Python (importing scipy took longer than a 100,000-scenario comparison).

    Terms are summed from the side of ``a`` away from the mode, so they shrink and the loop stops
    once they no longer change the sum."""
    lo, hi = max(0, draws + successes - total), min(draws, successes)
    if a <= lo:
        return 1.0
    if a > hi:
        return 0.0
    base = _log_comb(total, successes)

    def log_pmf(k: int) -> float:
        return _log_comb(draws, k) + _log_comb(total - draws, successes - k) - base

    mode = (draws + 1) * (successes + 1) // (total + 2)
    if a > mode:  # the upper tail: terms fall from k = a upwards
        return _tail_sum(log_pmf, range(a, hi + 1))
    return 1.0 - _tail_sum(log_pmf, range(a - 1, lo - 1, -1))  # the lower tail falls from a - 1 down


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _tail_sum(log_pmf: Callable[[int], float], ks: range) -> float:
    total = 0.0
    for k in ks:
        term = math.exp(log_pmf(k))
        total += term
        if term <= total * 1e-17:  # <=: terms that underflow to 0 from the first stop at once (they only shrink)
            break
    return total



def _llm(doc: dict[str, Any], role: str) -> tuple[Any, Any]:
    entry = doc["experiment"].get(role) or {}
    if not isinstance(entry, dict):
        return (None, None)
    return (entry.get("provider"), entry.get("model"))


def _settings(doc: dict[str, Any], role: str) -> dict[str, Any] | None:
    entry = doc["experiment"].get(role)
    settings = entry.get("settings") if isinstance(entry, dict) else None
    return settings if isinstance(settings, dict) else None


def settings_changes(base: dict[str, Any], cur: dict[str, Any], role: str) -> list[str]:
    """``role``'s recorded settings that differ, one ``name before → after`` each ([] when they
    agree, or when either experiment did not record them: an older file says nothing, and so does
    one that did not record a setting yet, e.g. ``max_file_bytes``, recorded since issue 39)."""
    before, after = _settings(base, role), _settings(cur, role)
    if before is None or after is None:
        return []
    return [f"{name} {before[name]!r} → {after[name]!r}" for name in sorted(set(before) & set(after))
            if before[name] != after[name]]


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
    base: dict[str, Any], cur: dict[str, Any], base_ids: AbstractSet[str], cur_ids: AbstractSet[str],
    defs: tuple[dict[str, set[str]], dict[str, set[str]]],
) -> Comparability:
    topic_same = base["experiment"].get("topic_graph_hash") == cur["experiment"].get("topic_graph_hash")
    b_defs, c_defs = defs
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
    judge_changed, simulator_changed = settings_changes(base, cur, "judge"), settings_changes(base, cur, "simulator")
    if judge_changed:  # the instrument changed: a verdict that moved may be the judge's, not the agent's
        reasons_low.append(f"judge settings differ ({'; '.join(judge_changed)})")
    if simulator_changed:
        reasons_medium.append(f"simulator settings differ ({'; '.join(simulator_changed)})")
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
        judge_settings_changed=judge_changed,
        simulator_settings_changed=simulator_changed,
    )


@dataclass(slots=True)
class _Totals:
    runs: int = 0
    passes: int = 0
    turns: int = 0
    topic_runs: int = 0
    topics: int = 0
    eval_passed: int = 0
    eval_total: int = 0
    eval_runs: int = 0
    eval_clean: int = 0
    eval_rate_sum: float = 0.0


def _totals(aggs: Iterable[ScenarioTally]) -> _Totals:
    aggs = list(aggs)
    return _Totals(*(sum(map(attrgetter(name), aggs)) for name in _TOTALLED))


_TOTALLED = ("runs", "passes", "turns", "topic_runs", "topics", "eval_passed", "eval_total", "eval_runs", "eval_clean",
             "eval_rate_sum")  # _Totals' fields, in order


def _metrics(b: _Totals, c: _Totals) -> list[MetricDelta]:
    """Headline deltas over the shared scenarios, with the counts behind the rates."""
    out = []
    b_rate, c_rate = _rate(b.passes, b.runs), _rate(c.passes, c.runs)
    d = _delta(b_rate, c_rate)
    out.append(MetricDelta("completion_rate", "Completion rate", b_rate, c_rate, d, _mark(d, "rate"), "rate",
                           (b.passes, b.runs), (c.passes, c.runs), drop_p_value(b.passes, b.runs, c.passes, c.runs),
                           (b.passes, b.runs), (c.passes, c.runs), float(c.passes)))
    for key, label, bv, cv in (
        ("avg_turns", "Avg turns", _rate(b.turns, b.runs), _rate(c.turns, c.runs)),
        ("avg_topics", "Avg topics", _rate(b.topics, b.topic_runs), _rate(c.topics, c.topic_runs)),
    ):
        d = _delta(bv, cv)
        # fewer turns to the same end is better; fewer topics is not (reaching more of the topic
        # graph may be the point), so its change gets a direction, never a verdict
        mark = _mark(d, "count", True) if key == "avg_turns" else _direction(d)
        out.append(MetricDelta(key, label, bv, cv, d, mark, "count"))
    b_rate, c_rate = _rate(b.eval_passed, b.eval_total), _rate(c.eval_passed, c.eval_total)
    d = _delta(b_rate, c_rate)
    out.append(MetricDelta("evaluation_rate", "Evaluation rate", b_rate, c_rate, d, _mark(d, "rate"), "rate",
                           (b.eval_passed, b.eval_total), (c.eval_passed, c.eval_total),
                           drop_p_value(b.eval_passed, b.eval_total, c.eval_passed, c.eval_total),
                           (b.eval_clean, b.eval_runs), (c.eval_clean, c.eval_runs), c.eval_rate_sum))
    return out


def _whole(base: dict[str, Any], cur: dict[str, Any]) -> list[MetricDelta]:
    """Each experiment's own summary figures (different scenario sets: shown, never marked)."""
    specs = [
        ("total_scenarios", "Scenario runs", "count"),
        ("completion_rate", "Completion rate", "rate"),
        ("avg_turns", "Avg turns", "count"),
        ("avg_topics", "Avg topics", "count"),
        ("evaluation_rate", "Evaluation rate", "rate"),
    ]
    out = []
    for key, label, kind in specs:
        b, c = base["summary"].get(key), cur["summary"].get(key)
        out.append(MetricDelta(key, label, b, c, None, " ", kind))  # type: ignore[arg-type]
    return out


def _stopped_early(name: str, had: dict[str, ScenarioTally], lacks: dict[str, ScenarioTally], kind: str) -> bool:
    """True when every shared scenario that ran ``name`` on one side failed on the other (a must
    stopped it before the step), so the label is missing for that reason, not because it was removed."""
    ids = [sid for sid, a in had.items() if name in getattr(a, kind)]
    return bool(ids) and all(lacks[sid].runs > lacks[sid].passes for sid in ids if sid in lacks)


def _summed(aggs: Iterable[ScenarioTally], kind: str) -> dict[str, list[int]]:
    """The scenarios' ``{label: [passed, evaluated]}`` (``kind``) added up: each distinct map once,
    times the scenarios that share it (most scenarios share one of a few maps)."""
    maps = list(map(attrgetter(kind), aggs))
    times = Counter(map(id, maps))
    out: dict[str, list[int]] = {}
    for key, counts in dict(zip(map(id, maps), maps, strict=True)).items():
        for name, pair in counts.items():
            total = out.setdefault(name, [0, 0])
            total[0] += int(pair[0]) * times[key]
            total[1] += int(pair[1]) * times[key]
    return out


def _summed_runs(aggs: Iterable[ScenarioTally]) -> dict[str, list[int]]:
    """The criteria's run-level counts (``run_level``) added up over the scenarios; a one-run
    scenario's map is converted once however many scenarios share it."""
    out: dict[str, list[int]] = {}
    single: list[dict[str, list[int]]] = []
    for a in aggs:
        if a.criteria_runs is not None:
            merge_counts(out, a.criteria_runs)
        elif a.runs:
            single.append(a.criteria)
    times = Counter(map(id, single))
    for key, counts in dict(zip(map(id, single), single, strict=True)).items():
        for name, pair in run_level(counts).items():
            total = out.setdefault(name, [0, 0])
            total[0] += pair[0] * times[key]
            total[1] += pair[1] * times[key]
    return out


def _pair(counts: list[int] | None) -> tuple[int, int]:
    return (counts[0], counts[1]) if counts else (0, 0)


def _rows(
    b_shared: dict[str, ScenarioTally], c_shared: dict[str, ScenarioTally], kind: str,
    defs: tuple[dict[str, set[str]], dict[str, set[str]]] | None, modified: list[str],
    hard: AbstractSet[str] = frozenset(),
) -> list[CriterionDelta]:
    """Criteria (``kind="criteria"``) or checks rows over the shared scenarios."""
    b_counts, c_counts = _summed(b_shared.values(), kind), _summed(c_shared.values(), kind)
    no_runs: dict[str, list[int]] = {}
    b_runs, c_runs = ((_summed_runs(b_shared.values()), _summed_runs(c_shared.values())) if kind == "criteria"
                      else (no_runs, no_runs))
    rows = []
    for name in sorted(set(b_counts) | set(c_counts)):
        (bp, bn), (cp, cn) = b_counts.get(name, [0, 0]), c_counts.get(name, [0, 0])
        b_rate, c_rate = _rate(bp, bn), _rate(cp, cn)
        note, d, p = "", None, None
        status: Status
        if name in modified:
            status, note = "modified", "not compared"
        elif name in b_counts and name in c_counts:
            status, d, p = "compared", _delta(b_rate, c_rate), drop_p_value(bp, bn, cp, cn)
        elif name in c_counts:
            if defs is not None and name in defs[1] and name not in defs[0]:
                status = "added"
            elif _stopped_early(name, c_shared, b_shared, kind):
                status, note = "not reached", "not run in the baseline: the scenario stopped early (a must failed)"
            elif defs is not None and name in defs[0]:
                status, note = ("not evaluated",
                                "declared in both, never rated in the baseline (skipped or inconclusive)")
            else:
                status = "added"
        else:
            if defs is not None and name in defs[0] and name not in defs[1]:
                status = "removed"
            elif _stopped_early(name, b_shared, c_shared, kind):
                status, note = ("not reached",
                                "not run in the current experiment: the scenario stopped early (a must failed)")
            elif defs is not None and name in defs[1]:
                status, note = ("not evaluated",
                                "declared in both, never rated in the current experiment (skipped or inconclusive)")
            else:
                status = "removed"
        rows.append(CriterionDelta(name, b_rate, c_rate, d, _mark(d, "rate"), status, bn, cn, bp, cp, p, note,
                                   _pair(b_runs.get(name)), _pair(c_runs.get(name)), name in hard))
    return rows


def _scenario_changes(
    b_agg: dict[str, ScenarioTally], c_agg: dict[str, ScenarioTally]
) -> tuple[list[ScenarioChange], list[ScenarioChange], list[ScenarioChange], list[ScenarioChange]]:
    passing: list[ScenarioChange] = []
    failing: list[ScenarioChange] = []
    improved: list[ScenarioChange] = []
    regressed_: list[ScenarioChange] = []
    for sid in b_agg:  # the shared scenarios (both maps have them all); the few changes are sorted below
        b, c = b_agg[sid], c_agg[sid]
        if not b.runs or not c.runs:
            continue  # skipped on one side: nothing to compare
        b_pass, c_pass = b.passes == b.runs, c.passes == c.runs
        runs = ((b.passes, b.runs), (c.passes, c.runs))
        if not b_pass and c_pass:
            passing.append(ScenarioChange(sid, c.name, b.passes / b.runs, c.passes / c.runs, None, "", *runs))
        elif b_pass and not c_pass:
            ftype = c.failures.most_common(1)[0][0] if c.failures else "assertion"
            turns = b.turns / b.runs
            turns_text = str(int(turns)) if turns == int(turns) else f"{turns:.1f}"
            note = f"was completing in {turns_text} turn{'' if turns == 1 else 's'}, now {ftype}"
            if c.runs > 1:
                note += f" ({c.runs - c.passes}/{c.runs} runs failed)"
            failing.append(ScenarioChange(sid, c.name, b.passes / b.runs, c.passes / c.runs, ftype, note, *runs))
        if b.eval_total and c.eval_total:
            br, cr = b.eval_passed / b.eval_total, c.eval_passed / c.eval_total
            ratings = ((b.eval_passed, b.eval_total), (c.eval_passed, c.eval_total))
            if abs(cr - br) >= QUALITY_THRESHOLD - 1e-12:
                (improved if cr > br else regressed_).append(ScenarioChange(sid, c.name, br, cr, None, "", *ratings))
    for changes in (passing, failing, improved, regressed_):
        changes.sort(key=lambda s: (s.name, s.id))  # the name order, which the rate sorts below keep for ties
    improved.sort(key=lambda s: -(s.current - s.baseline))  # type: ignore[operator]
    regressed_.sort(key=lambda s: s.current - s.baseline)  # type: ignore[operator]
    return passing, failing, improved, regressed_


def _outcomes(aggs: dict[str, ScenarioTally], ids: AbstractSet[str]) -> list[ScenarioOutcome]:
    out = []
    for sid in sorted(ids, key=lambda s: (aggs[s].name, s)):
        a = aggs[sid]
        ftype = a.failures.most_common(1)[0][0] if a.failures else None
        out.append(ScenarioOutcome(sid, a.name, a.runs, a.passes, a.skipped, _rate(a.passes, a.runs),
                                   _rate(a.eval_passed, a.eval_total), ftype))
    return out


def name_features(outcomes: list[ScenarioOutcome], entries: Iterable[dict[str, Any]]) -> list[ScenarioOutcome]:
    """``outcomes`` with the feature of each, from whole entries (a lean read has none: the caller
    reads the few entries of the added and removed scenarios)."""
    wanted = {o.id: o for o in outcomes if o.feature is None}
    for e in entries if wanted else ():
        o = wanted.get(str(e.get("id")))
        if o is not None and e.get("feature"):
            o.feature = str(e["feature"])
    return outcomes



def _spread(values: list[float]) -> RateSpread:
    if not values:
        return RateSpread([], None, 0.0)
    return RateSpread(values, statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def _per_run(aggs: Iterable[ScenarioTally], index: int) -> list[float]:
    """Per-iteration rate over the shared scenarios (index 0: completion, 2: evaluation)."""
    sums: dict[int, list[int]] = {}
    for a in aggs:
        for it, v in a.by_iteration().items():
            s = sums.setdefault(it, [0, 0])
            s[0] += v[index]
            s[1] += v[index + 1]
    return [s[0] / s[1] for _, s in sorted(sums.items()) if s[1]]


def _variance(b_shared: dict[str, ScenarioTally], c_shared: dict[str, ScenarioTally]) -> VarianceComparison:
    metrics, notes = [], []
    for key, label, index in (("completion_rate", "Completion rate", 0), ("evaluation_rate", "Evaluation rate", 2)):
        b, c = _spread(_per_run(b_shared.values(), index)), _spread(_per_run(c_shared.values(), index))
        overlap: bool | None = None
        # One run has no spread (sd 0): no range to compare, so never claim the ranges are apart.
        if b.mean is not None and c.mean is not None and len(b.runs) > 1 and len(c.runs) > 1:
            overlap = not (b.mean + b.std < c.mean - c.std or c.mean + c.std < b.mean - b.std)
            if not overlap:
                notes.append(f"{label} ranges (mean ± std) do not overlap")
        metrics.append(VarianceMetric(key, b, c, _delta(b.mean, c.mean), overlap))
    per_scenario = [
        ScenarioChange(sid, c_shared[sid].name, _rate(b_shared[sid].passes, b_shared[sid].runs),
                       _rate(c_shared[sid].passes, c_shared[sid].runs),
                       baseline_counts=(b_shared[sid].passes, b_shared[sid].runs),
                       current_counts=(c_shared[sid].passes, c_shared[sid].runs))
        for sid in sorted(b_shared, key=lambda s: (c_shared[s].name, s))  # both have the shared ids only
    ]
    return VarianceComparison(metrics, notes, per_scenario)


def compare(baseline: dict[str, Any] | Experiment, current: dict[str, Any] | Experiment) -> Comparison:
    """Everything that changed from ``baseline`` to ``current`` (raw experiment dicts, or experiments
    that ``read_experiment`` added up while reading)."""
    with no_gc():
        base = baseline if isinstance(baseline, Experiment) else summarise(baseline)
        cur = current if isinstance(current, Experiment) else summarise(current)
        return _compared(base, cur)


def _compared(base: Experiment, cur: Experiment) -> Comparison:
    b_agg, c_agg = base.scenarios, cur.scenarios
    b_ids, c_ids = b_agg.keys(), c_agg.keys()  # views, not copies: 100,000 ids each
    shared = b_ids & c_ids
    b_shared = b_agg if len(shared) == len(b_agg) else {sid: b_agg[sid] for sid in shared}
    c_shared = c_agg if len(shared) == len(c_agg) else {sid: c_agg[sid] for sid in shared}
    defs = (base.definitions, cur.definitions)
    hard = hard_criteria(base.doc) | hard_criteria(cur.doc)
    comparability = _comparability(base.doc, cur.doc, b_ids, c_ids, defs)
    passing, failing, improved, regressed_ = _scenario_changes(b_shared, c_shared)
    b_ref, c_ref = _ref(base.doc), _ref(cur.doc)
    has_runs = b_ref.iterations > 1 or c_ref.iterations > 1 or "variance" in base.doc or "variance" in cur.doc
    c = Comparison(
        baseline=b_ref,
        current=c_ref,
        comparability=comparability,
        metrics=_metrics(_totals(b_shared.values()), _totals(c_shared.values())),
        criteria=_rows(b_shared, c_shared, "criteria", defs, comparability.criteria_modified, hard),
        newly_passing=passing,
        newly_failing=failing,
        quality_improved=improved,
        quality_regressed=regressed_,
        variance=_variance(b_shared, c_shared) if has_runs else None,
        checks=_rows(b_shared, c_shared, "checks", None, []),
        added=name_features(_outcomes(c_agg, c_ids - b_ids), cur.entries_of(c_ids - b_ids)),
        removed=name_features(_outcomes(b_agg, b_ids - c_ids), base.entries_of(b_ids - c_ids)),
        whole=_whole(base.doc, cur.doc),
        cost=cost_delta_by_id(base.shared_costs(shared), cur.shared_costs(shared)),
        coverage=coverage_changes(base.doc.get("coverage"), cur.doc.get("coverage")),
        problems=[p for p in (base.index_problem(), cur.index_problem()) if p],
        tallies=(b_shared, c_shared),
    )
    c.problems += _untested(base, cur, c)
    c.moved, c.moved_total = moves(b_shared, c_shared)
    return c


def _untested(base: Experiment, cur: Experiment, c: Comparison) -> list[str]:
    """Why the metrics cannot show "not worse" although they have numbers (docs/gates.md, "What counts
    as untested"): a shared scenario with no measured run now, nothing judged in the current run, or
    verdicts from a different judge (or one with other settings) or conversations from a different
    simulated user (or one with other settings)."""
    out = []
    assert c.tallies is not None
    b_shared, c_shared = c.tallies
    comparability = c.comparability
    if c.current.interrupted and c.removed:  # never tried, not taken out of the suite
        out.append(f"the current run was interrupted: {len(c.removed)} baseline scenario(s) did not run "
                   f"({', '.join(repr(o.name) for o in c.removed[:3])}{' and more' if len(c.removed) > 3 else ''}); "
                   "untested is never a pass")
    unrun = [(a.name, b_shared[sid].runs, a) for sid, a in c_shared.items() if b_shared[sid].runs and not a.runs]
    if unrun and len(unrun) < len(c_shared):  # all of them unrun is the gate's own "nothing ran"
        named = "; ".join(f"'{name}' ({_not_measured(a)}; {runs} run(s) in the baseline)"
                          for name, runs, a in unrun[:3])
        more = f"; and {len(unrun) - 3} more" if len(unrun) > 3 else ""
        out.append(f"{len(unrun)} shared scenario(s) have no measured run in the current experiment: {named}{more}; "
                   "untested is never a pass")
    unrated = unjudged(cur.doc)
    if unrated:
        out.append(f"nothing judged in the current experiment: its {unrated} judged check(s) were all skipped or "
                   "inconclusive (no judge LLM, a judge outage or unusable answers): untested is never a pass")
    rated = any(r.baseline_runs[1] or r.current_runs[1] for r in c.criteria)
    if not comparability.judge_identical and rated:
        out.append(f"the judge differs (baseline {comparability.judge_baseline}, current "
                   f"{comparability.judge_current}): its verdicts measure different things; judge both with one "
                   "judge (fabtest rejudge) to compare them")
    if comparability.judge_settings_changed and rated:  # a moved verdict may be the judge's, not the agent's
        out.append(f"the judge's settings changed ({'; '.join(comparability.judge_settings_changed)}): run both "
                   "experiments with the same [tool.fabtest.judge] settings")
    simulated = _simulated(base.doc) or _simulated(cur.doc)
    if not comparability.simulator_identical and simulated:
        out.append(f"the simulated user differs (baseline {comparability.simulator_baseline}, current "
                   f"{comparability.simulator_current}): the conversations test different things")
    if comparability.simulator_settings_changed and simulated:
        out.append(f"the simulated user's settings changed ({'; '.join(comparability.simulator_settings_changed)}): "
                   "run both experiments with the same [tool.fabtest.simulator] temperature and simulator_fidelity")
    return out


def _not_measured(a: ScenarioTally) -> str:
    parts = [f"{a.skipped} skipped"] if a.skipped else []
    if a.unmeasured:
        parts.append(f"{a.unmeasured} ended by the simulated user or the judge")
    return ", ".join(parts) or "not run"


def _simulated(doc: dict[str, Any]) -> bool:
    summary = doc.get("summary")
    return isinstance(summary, dict) and bool(summary.get("simulator_validity"))
