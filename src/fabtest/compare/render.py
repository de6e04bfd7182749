"""A :class:`~fabtest.compare.compute.Comparison` as text, JSON and markdown, and conversation diffs.

The numbers are computed in :mod:`fabtest.compare.compute`; this module only words and lays them out
(the HTML page is :mod:`fabtest.report.html`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from fabtest.compare.compute import (
    Comparability,
    Comparison,
    CriterionDelta,
    ExperimentRef,
    MetricDelta,
    ScenarioOutcome,
)
from fabtest.compare.sections import ordered
from fabtest.experiment.coverage_text import change_lines
from fabtest.experiment.diff import ConversationDiff, tool_summary
from fabtest.experiment.fmt import RULE_HEAVY, RULE_LIGHT, num, pct, pp, signed, usd
from fabtest.experiment.pauses import pause_line

__all__ = [
    "ci_pair",
    "ci_text",
    "cost_lines",
    "md_escape",
    "render_diffs_markdown",
    "render_diffs_text",
    "render_json",
    "render_markdown",
    "first_difference_line",
    "render_text",
]

_LISTED = 20  # rows per list in text/markdown; the JSON output has everything
_MOVED_SHOWN = 10  # lines of "what moved" in text/markdown (the JSON keeps compare.moved.MOVED_KEPT)

def cost_lines(comparison: Comparison) -> list[str]:
    """The cost delta as text lines (also used by the markdown and HTML renderers)."""
    spent = comparison.cost
    if not spent:
        return []
    if not spent["scenarios"]:
        return [f"Cost: not compared ({spent['unpriced']} shared scenario(s) have tokens without a price)"]
    ratio = f", x{spent['ratio']:.2f}" if spent.get("ratio") is not None else ""
    line = (f"Cost, {spent['scenarios']} shared scenario(s): {usd(spent['baseline_usd'])} → "
            f"{usd(spent['current_usd'])} "
            f"({usd(spent['delta_usd'], signed=True)}{ratio})")
    if spent["unpriced"]:
        line += f"; {spent['unpriced']} more shared scenario(s) not priced on both sides, left out"
    return [line]


def ci_text(interval: Sequence[float] | None) -> str:
    """A 95 % Wilson interval as ``72-100%`` (``n/a``: nothing rated)."""
    if interval is None:
        return "n/a"
    return f"{interval[0] * 100:.0f}-{interval[1] * 100:.0f}%"


def ci_pair(item: Any) -> str:
    """The baseline and current intervals of a metric, criterion or scenario row."""
    return f"95% CI {ci_text(item.baseline_interval)} → {ci_text(item.current_interval)}"


def _counts_text(counts: tuple[int, int] | None) -> str:
    return "n/a" if counts is None else f"{counts[0]}/{counts[1]}"


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
        f"  {flag(c.topic_graph_identical, True)} Topic graph: "
        f"{'identical' if c.topic_graph_identical else 'DIFFERENT'}",
        f"  {flag(c.criteria_identical)} Criteria: {criteria_text}",
        f"  {flag(scen_ok, c.scenarios_shared == 0)} Scenarios: {c.scenarios_shared} shared, "
        f"{c.scenarios_added} added, {c.scenarios_removed} removed",
        f"  {flag(c.judge_identical, True)} Judge LLM: "
        + ("identical" if c.judge_identical else f"{c.judge_baseline} → {c.judge_current}")
        + (_same_llm(c.judge_current) if c.judge_identical else ""),
        f"  {flag(c.simulator_identical)} Simulator LLM: "
        + ("identical" if c.simulator_identical else f"{c.simulator_baseline} → {c.simulator_current}")
        + (_same_llm(c.simulator_current) if c.simulator_identical else ""),
        *([f"  {flag(False, True)} Judge settings: {'; '.join(c.judge_settings_changed)}"]
          if c.judge_settings_changed else []),
        *([f"  {flag(False)} Simulator settings: {'; '.join(c.simulator_settings_changed)}"]
          if c.simulator_settings_changed else []),
        "",
        f"  Comparison validity: {c.validity}" + (f" ({'; '.join(c.reasons)})" if c.reasons else ""),
    ]


def _listed(items: list[Any], line: Callable[[Any], str]) -> list[str]:
    out = [line(s) for s in items[:_LISTED]]
    if len(items) > _LISTED:
        out.append(f"    ... and {len(items) - _LISTED} more (see --format json)")
    return out


def _row_tail(row: CriterionDelta) -> str:
    if row.status == "compared":
        return f"{pp(row.delta, 0):>9}  {row.mark}"
    return f"{'':>9}  {row.status}" + (f" ({row.note})" if row.note else "")


def _criterion_table(rows: list[CriterionDelta]) -> list[str]:
    width = max(24, *(len(row.name) for row in rows))
    lines = [f"    {'Criterion':<{width}} {'Baseline':>9} {'Current':>9} {'Delta':>9}", "    " + "─" * (width + 32)]
    for row in rows:
        lines.append(f"    {row.name:<{width}} {pct(row.baseline):>9} {pct(row.current):>9} {_row_tail(row)}"
                     f"{_row_counts(row)}".rstrip())
    return lines


def _row_counts(row: CriterionDelta) -> str:
    """A criterion row's ratings passed and the one-sided p of its drop (pooled ratings; the gate tests runs)."""
    p = f", p {row.p_value:.3g}" if row.p_value is not None else ""
    return (f"  [{row.baseline_passed}/{row.baseline_evaluated} → {row.current_passed}/{row.current_evaluated}{p}; "
            f"{ci_pair(row)}]"
            if row.baseline_evaluated or row.current_evaluated else "")


def _changed_checks(checks: list[CriterionDelta]) -> tuple[list[CriterionDelta], int]:
    """Checks worth a row: anything but an unchanged compared check (the rest is counted)."""
    shown = [r for r in checks if r.status != "compared" or abs(r.delta or 0) >= 1e-12]
    return shown, len(checks) - len(shown)


def _outcome_text(o: ScenarioOutcome) -> str:
    if not o.runs:
        return "skipped"
    status = "passed" if o.passes == o.runs else f"failed ({o.failure_type or 'assertion'})"
    runs = f", {o.passes}/{o.runs} runs passed" if o.runs > 1 else ""
    ev = f", evaluations {pct(o.evaluation_rate, 0)}" if o.evaluation_rate is not None else ""
    return f"{status}{runs}{ev}"


def _change_counts(s: Any, unit: str) -> str:
    counts = " → ".join(_counts_text(x) for x in (s.baseline_counts, s.current_counts) if x)
    return f"{counts} {unit}" if counts else ""


def first_difference_line(diff: ConversationDiff | None) -> list[str]:
    """The lines under a changed scenario saying where its diffed runs part: the turn, what differs,
    and each side's words there (as the view's comparison page shows them); none without a difference."""
    if diff is None or diff.first is None:
        return []
    b, c = _sides(diff)
    lines = [f"      first difference at turn {diff.first} (baseline {b}, current {c}): {diff.what}"]
    sides = diff.first_sides(100)
    if sides is not None:
        lines += [f"        baseline: “{sides[0]}”", f"        current:  “{sides[1]}”"]
    return lines


def _scenario_changes(c: Comparison, diffs: Sequence[ConversationDiff]) -> list[str]:
    """What changed, newly failing first (then quality regressed, newly passing, improved, changed
    but not significant), each with its before → after counts and, when its conversations were
    diffed, the first turn where they part: the answer to "why", before the tables."""
    by_id = {d.scenario_id: d for d in diffs}
    lines = ["Scenario Changes (shared scenarios)"]
    if not (c.newly_passing or c.newly_failing or c.quality_improved or c.quality_regressed
            or c.changed_not_significant):
        return [*lines, "  No scenario changed status or quality."]

    def item(s: Any, title: str, unit: str) -> str:
        counts = _change_counts(s, unit)
        if title.startswith("Newly"):
            note = f" ({s.note})" if s.note else ""
            return f"    - {s.name}{note}" + (f": {counts}" if counts else "") + f" [{ci_pair(s)}]"
        return (f"    - {s.name}: {pct(s.baseline, 0)} → {pct(s.current, 0)} evaluation pass rate ("
                + (f"{counts}; " if counts else "") + f"{ci_pair(s)})")

    groups = (("Newly failing", c.newly_failing, "runs passed"),
              ("Quality regressed (significant in the gate's family)", c.quality_regressed, "checks passed"),
              ("Newly passing", c.newly_passing, "runs passed"),
              ("Quality improved (significant in the gate's family)", c.quality_improved, "checks passed"),
              ("Quality changed, not significant", c.changed_not_significant, "checks passed"))
    for title, items, unit in groups:
        if items:
            lines.append(f"  {title} ({len(items)}):")
            for s in items[:_LISTED]:
                lines += [item(s, title, unit), *first_difference_line(by_id.get(s.id))]
            if len(items) > _LISTED:
                lines.append(f"    ... and {len(items) - _LISTED} more (see --format json)")
    return lines


def _moved_lines(c: Comparison, bullet: str = "  - ", escape: Callable[[str], str] = str) -> list[str]:
    """What moved, scenario by scenario, the largest rise in failures first (:mod:`fabtest.compare.moved`)."""
    if not c.moved:
        return [f"{bullet}Nothing moved: every shared scenario's runs failed as often as before, check by check."]
    lines = [bullet + escape(m.line) for m in c.moved[:_MOVED_SHOWN]]
    if c.moved_total > _MOVED_SHOWN:
        lines.append(f"{bullet}... and {c.moved_total - _MOVED_SHOWN} more (see --format json)")
    return lines


def render_text(comparison: Comparison, diffs: Sequence[ConversationDiff] = ()) -> str:
    """The console comparison (docs/explanation/experiments.md, "The comparison"), its sections in
    the one order of :data:`fabtest.compare.sections.SECTIONS`: the verdict, what moved, the
    scenarios that changed (with the first differing turn of each diffed pair inline), then the
    shared scenarios' numbers, then what is not compared."""
    c = comparison
    comp = c.comparability
    parts: dict[str, list[str]] = {}
    head = [  # the verdict line itself is the caller's (fabtest-compare, fabtest ab), written before this
        "Experiment Comparison",
        RULE_HEAVY,
        "",
        _ref_line("Baseline: ", c.baseline),
        _ref_line("Current:  ", c.current),
        "",
        f"Scenarios compared: {comp.scenarios_shared} shared ({comp.scenarios_added} added, "
        f"{comp.scenarios_removed} removed)",
    ]
    if comp.scenarios_added or comp.scenarios_removed:
        head.append("  Deltas, criteria, checks and gates below are over the shared scenarios only.")
    parts["verdict"] = head
    parts["moved"] = ["", RULE_LIGHT, "", "What moved (shared scenarios, failing runs now and before)",
                      *_moved_lines(c)]
    parts["changes"] = ["", RULE_LIGHT, "", *_scenario_changes(c, diffs)]
    parts["comparability"] = ["", RULE_LIGHT, "", *_comparability_lines(comp)]
    lines = ["", RULE_LIGHT, "", "Completion (Hard Expectations), shared scenarios"]
    for m in c.metrics:
        if m.name == "evaluation_rate":
            lines += ["", RULE_LIGHT, "", "Quality (Soft Evaluations), shared scenarios"]
            label = "Overall"  # every soft check: the note below the table says so
        else:
            label = {"completion_rate": "Rate", "avg_turns": "Avg Turns", "avg_topics": "Avg Topics"}[m.name]
        values = f"{_value(m, 'baseline', m.kind)} → {_value(m, 'current', m.kind)}"
        counts = ""
        if m.baseline_counts is not None and m.current_counts is not None:
            counts = f"  [{_counts_text(m.baseline_counts)} → {_counts_text(m.current_counts)}; {ci_pair(m)}]"
        lines.append(f"  {label + ':':<15} {values:<16} ({_delta_text(m.delta, m.kind)}) {m.mark}{counts}".rstrip())
    ev = c.metric("evaluation_rate")
    if ev.current_counts is not None:
        lines.append("  (Overall counts every soft check rating, LLM-judged criteria and "
                     "deterministic `should` checks alike; the gate's overall evaluation counts runs "
                     "with every soft check passed, so its percentage differs)")
    parts["metrics"] = lines
    lines = []
    soft, hard = [r for r in c.criteria if not r.hard], [r for r in c.criteria if r.hard]
    if soft:
        lines += ["", "  By Criterion (soft `should`, LLM-judged; ratings passed, p of a drop):",
                  *_criterion_table(soft)]
    if hard:
        lines += ["", RULE_LIGHT, "", "Hard Criteria (`must`, LLM-judged; a failure fails the run), shared scenarios",
                  *_criterion_table(hard)]
    parts["criteria"] = lines
    lines = []
    if c.checks:
        shown, same = _changed_checks(c.checks)
        lines += ["", RULE_LIGHT, "", f"Checks (deterministic), shared scenarios: {len(c.checks)}"]
        if shown:
            width = max(24, *(len(row.name) for row in shown))
            lines += [f"    {'Check':<{width}} {'Baseline':>9} {'Current':>9} {'Delta':>9}",
                      "    " + "─" * (width + 32)]
            lines += _listed(shown, lambda row: f"    {row.name:<{width}} {pct(row.baseline):>9} {pct(row.current):>9} "
                                                f"{_row_tail(row)}  [{ci_pair(row)}]".rstrip())
        if same:
            lines.append(f"  {same} check{'' if same == 1 else 's'} unchanged")
    parts["checks"] = lines
    lines = []
    if c.added or c.removed:
        lines += ["", RULE_LIGHT, ""]
        if c.added:
            lines.append(f"Added scenarios ({len(c.added)}, only in current; not in the deltas above):")
            lines += _listed(c.added, lambda o: f"    - {_scenario_label(o)}: {_outcome_text(o)}")
        if c.removed:
            lines.append(f"Removed scenarios ({len(c.removed)}, only in baseline; not in the deltas above):")
            lines += _listed(c.removed, lambda o: f"    - {_scenario_label(o)}: {_outcome_text(o)}")
        lines += ["", "Whole experiments (different scenario sets: for reference, not compared)",
                  f"  {'':<17} {'Baseline':>9} {'Current':>9}"]
        for m in c.whole:
            b = str(m.baseline) if m.name == "total_scenarios" else _value(m, "baseline", m.kind)
            cur = str(m.current) if m.name == "total_scenarios" else _value(m, "current", m.kind)
            lines.append(f"  {m.label + ':':<17} {b:>9} {cur:>9}")
    parts["apart"] = lines
    parts["variance"] = _variance_lines(c)
    parts["cost"] = ["", RULE_LIGHT, "", *cost_lines(c)] if c.cost else []
    parts["coverage"] = [*change_lines(c.coverage), "", RULE_LIGHT]
    return "\n".join(ordered(parts)) + "\n"


def _variance_lines(c: Comparison) -> list[str]:
    if c.variance is None:
        return []
    lines = ["", RULE_LIGHT, "", "Comparison (with variance), shared scenarios", ""]
    lines.append(f"  {'Metric':<18} {'Baseline':<18} {'Current':<18} Delta")
    lines.append("  " + "─" * 63)
    for vm in c.variance.metrics:
        label = "Completion Rate" if vm.name == "completion_rate" else "Evaluation Rate"
        b = f"{pct(vm.baseline.mean)} ± {num(vm.baseline.std * 100)}pp"
        cur = f"{pct(vm.current.mean)} ± {num(vm.current.std * 100)}pp"
        lines.append(f"  {label:<18} {b:<18} {cur:<18} {pp(vm.delta)}")
    for note in c.variance.notes:
        lines.append(f"  Note: {note}")
    if any(vm.overlap is None for vm in c.variance.metrics):
        lines.append("  (a side with a single run has no spread: ranges are not compared)")
    changed = [s for s in c.variance.scenario_pass_rates if s.baseline != s.current]
    if changed:
        lines += ["", f"  Per-scenario pass rate changes ({len(changed)}):"]
        lines += _listed(changed, lambda s: f"    - {s.name}: {pct(s.baseline, 0)} "
                                            f"→ {pct(s.current, 0)} ({ci_pair(s)})")
    return lines


def render_json(comparison: Comparison) -> str:
    return json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _side_lines(turn: dict[str, Any] | None, width: int, files_dir: str = "results/files",
                escape: Callable[[str], str] = str) -> list[str]:
    """One side of a turn, wrapped: user, agent, then tool calls (``(no turn)`` when absent). Each
    file is named with where the run kept its bytes (``files_dir``/<sha256>); with ``escape``
    (Markdown) the lines are escaped and each file is a link to its bytes."""
    import textwrap

    if turn is None:
        return ["(no turn)"]
    lines: list[str] = []
    for label, text, files in (("User", turn.get("user"), turn.get("user_files")),
                               ("Agent", turn.get("agent"), turn.get("agent_files"))):
        said = textwrap.wrap(f"{label}: {' '.join(str(text or '').split())}", width) or [f"{label}:"]
        lines += map(escape, said)
        for file in files or []:
            if isinstance(file, dict):
                lines += (_file_link(file, files_dir) if escape is not str else
                          textwrap.wrap(f"[file {file.get('name')} {file.get('mime_type')} {file.get('size')} B: "
                                        f"{files_dir}/{file.get('sha256')}]", width,
                                        break_long_words=False, break_on_hyphens=False))  # the path in one piece
    for call in tool_summary(turn):
        lines += map(escape, textwrap.wrap(f"-> {call}", width))
    for pause in turn.get("pauses") or []:
        if isinstance(pause, dict):
            lines += map(escape, textwrap.wrap(f"|| {pause_line(pause)}", width))
    return lines


def _file_link(file: dict[str, Any], files_dir: str) -> list[str]:
    """A recorded file as a Markdown link to its kept bytes (``[lamp.png](results/files/<sha256>)``):
    the name is escaped (its brackets too), the target is only ever ``files_dir`` and a sha256 (a record whose hash is
    no sha256 is named, not linked)."""
    from urllib.parse import quote

    name = re.sub(r"([\[\]])", r"\\\1", md_escape(file.get("name") or "file"))  # a bracket would end the link text
    sha = str(file.get("sha256"))
    link = f"[{name}]({quote(files_dir)}/{sha})" if re.fullmatch(r"[0-9a-f]{64}", sha) else name
    return [f"file {link} {md_escape(file.get('mime_type'))} {md_escape(file.get('size'))} B"]


def _outcome(passed: bool | None, iteration: int | None = None) -> str:
    """"passed" or "failed", with the iteration when the diff is not of the first runs."""
    word = "passed" if passed else "failed" if passed is not None else "?"
    return f"{word} (iteration {iteration})" if iteration is not None else word


def _sides(d: ConversationDiff) -> tuple[str, str]:
    shown = (d.baseline_iteration or 1) != 1 or (d.current_iteration or 1) != 1
    return (_outcome(d.baseline_passed, d.baseline_iteration if shown else None),
            _outcome(d.current_passed, d.current_iteration if shown else None))


def render_diffs_text(diffs: Sequence[ConversationDiff], width: int = 48,
                      files_dirs: tuple[str, str] = ("results/files", "results/files")) -> str:
    """Each conversation diff side by side (baseline | current) from the turn before the first
    difference; ``files_dirs``: where each side's files are kept."""
    from itertools import zip_longest

    out: list[str] = []
    for d in diffs:
        b, c = _sides(d)
        out += ["", f"Conversation diff: {d.name} ({d.scenario_id}): baseline {b}, current {c}"]
        if d.first is None:
            out.append("  the recorded conversations are the same")
            continue
        out.append(f"  first difference at turn {d.first}: {d.what}")
        out.append(f"  {'BASELINE':<{width}} | CURRENT")
        for pair in d.pairs:
            mark = "  <- first difference" if pair.number == d.first else ""
            out.append(f"  -- turn {pair.number}{mark}")
            left = _side_lines(pair.baseline, width, files_dirs[0])
            right = _side_lines(pair.current, width, files_dirs[1])
            out += [f"  {a:<{width}} | {b}" for a, b in zip_longest(left, right, fillvalue="")]
    return "\n".join(out) + "\n" if out else ""


def render_diffs_markdown(diffs: Sequence[ConversationDiff],
                          files_dirs: tuple[str, str] = ("results/files", "results/files")) -> str:
    """Each conversation diff as a Markdown table: turn, baseline, current; each file a link to its
    bytes in ``files_dirs`` (each side's, relative to where the report is read from)."""
    out: list[str] = []
    for d in diffs:
        b, c = _sides(d)
        out += ["", f"### Conversation diff: {md_escape(d.name)} (baseline {b}, current {c})", ""]
        if d.first is None:
            out.append("The recorded conversations are the same.")
            continue
        out += [f"First difference at turn {d.first}: {d.what}.", "", "| Turn | Baseline | Current |", "|---:|---|---|"]
        for pair in d.pairs:
            cells = [" / ".join(_side_lines(side, 10_000, where, md_escape))
                     for side, where in ((pair.baseline, files_dirs[0]), (pair.current, files_dirs[1]))]
            number = f"**{pair.number}**" if pair.number == d.first else str(pair.number)
            out.append(f"| {number} | {cells[0]} | {cells[1]} |")
    return "\n".join(out) + "\n" if out else ""


#: what breaks a cell or opens code
_MD_ACTIVE = re.compile(r"([\\`|])")
#: the ``](`` / ``][`` that makes ``[x](u)``, ``![x](u)`` or ``[x][ref]`` a link or an image: escaping
#: the second bracket leaves ``[id]`` as written and no link live (a reference definition cannot be
#: injected: it must start a line, and line breaks become spaces)
_MD_LINK = re.compile(r"\](?=[(\[])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: what GitHub turns into a link by itself: ``https://...`` and ``www.``
_AUTOLINK = re.compile(r"(?i)(://|\bwww\.)")


def md_escape(text: Any) -> str:
    """Names and notes come from results files: Markdown/HTML-safe table cell or list text, so no
    pipes, tags, entities or line breaks leak, and no link, image (a tracking pixel) or autolinked
    URL is live in a PR comment: the bracket after ``]`` and the ``://`` of a URL are backslash-escaped."""
    out = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _MD_ACTIVE.sub(r"\\\1", out)
    out = _MD_LINK.sub("]\\\\", out)
    out = _AUTOLINK.sub(lambda m: m.group().replace("/", "\\/").replace(".", "\\."), out)
    out = _CONTROL.sub(" ", out)  # an escape sequence is no text a reader should get
    return " ".join(out.split())  # newlines, tabs, carriage returns → one space


def _md_rows(rows: list[CriterionDelta], title: str) -> list[str]:
    lines = [f"| {title} | Baseline | Current | Delta | |", "|---|---:|---:|---:|:-:|"]
    for row in rows:
        delta = (pp(row.delta, 0) if row.status == "compared"
                 else md_escape(row.status + (f" ({row.note})" if row.note else "")))
        lines.append(f"| {md_escape(row.name)} | {pct(row.baseline)} | {pct(row.current)} | {delta} | "
                     f"{row.mark.strip()} |")
    return lines


def render_markdown(comparison: Comparison, gate: Sequence[str] = ()) -> str:
    """A compact report for a pull-request comment, its sections in the one order of
    :data:`fabtest.compare.sections.SECTIONS` (``gate``: the gate's Markdown lines, ``gate_markdown``)."""
    c = comparison
    comp = c.comparability
    icon = {"HIGH": "🟢", "MEDIUM": "🟡", "LOW": "🔴"}[comp.validity]
    parts: dict[str, list[str]] = {}
    # the verdict line itself is the caller's (fabtest-compare, fabtest ab), written before this
    parts["verdict"] = [f"## fabtest: `{md_escape(c.baseline.id)}` → `{md_escape(c.current.id)}`"]
    parts["moved"] = ["", "### What moved (shared scenarios, failing runs now and before)", "",
                      *_moved_lines(c, "- ", md_escape)]
    lines: list[str] = []
    for title, items, fmt in (
        ("Newly failing", c.newly_failing, lambda s: f"- ❌ {md_escape(s.name)} ({md_escape(s.note)})"),
        ("Newly passing", c.newly_passing, lambda s: f"- ✅ {md_escape(s.name)}"),
        ("Quality regressed", c.quality_regressed,
         lambda s: f"- {md_escape(s.name)}: {pct(s.baseline, 0)} → {pct(s.current, 0)}"),
        ("Quality improved", c.quality_improved,
         lambda s: f"- {md_escape(s.name)}: {pct(s.baseline, 0)} → {pct(s.current, 0)}"),
        ("Quality changed, not significant", c.changed_not_significant,
         lambda s: f"- {md_escape(s.name)}: {pct(s.baseline, 0)} → {pct(s.current, 0)} ({ci_pair(s)})"),
    ):
        lines += _md_list(title, items, fmt)
    parts["changes"] = lines
    parts["gate"] = list(gate)
    parts["comparability"] = [
        "",
        f"**Comparison validity: {icon} {comp.validity}**"
        + (f" ({md_escape('; '.join(comp.reasons))})" if comp.reasons else ""),
        "",
        f"Scenarios compared: {comp.scenarios_shared} shared ({comp.scenarios_added} added, "
        f"{comp.scenarios_removed} removed)"
        + ("; the tables below are over the shared scenarios only." if comp.scenarios_added or comp.scenarios_removed
           else ""),
    ]
    lines = ["", "| Metric (shared scenarios) | Baseline | Current | Delta | |", "|---|---:|---:|---:|:-:|"]
    for m in c.metrics:
        lines.append(
            f"| {m.label} | {_value(m, 'baseline', m.kind)} | {_value(m, 'current', m.kind)} | "
            f"{_delta_text(m.delta, m.kind)} | {m.mark} |"
        )
    parts["metrics"] = lines
    lines = []
    soft, hard = [r for r in c.criteria if not r.hard], [r for r in c.criteria if r.hard]
    if soft:
        lines += ["", "### By criterion (soft `should`)", "", *_md_rows(soft, "Criterion")]
    if hard:
        lines += ["", "### Hard criteria (`must`)", "", *_md_rows(hard, "Criterion")]
    parts["criteria"] = lines
    lines = []
    if c.checks:
        shown, same = _changed_checks(c.checks)
        lines += ["", f"### Checks (deterministic, {len(c.checks)})", ""]
        if shown:
            lines += _md_rows(shown[:_LISTED], "Check")
        if same:
            lines += ["", f"{same} check{'' if same == 1 else 's'} unchanged."]
    parts["checks"] = lines
    lines = [*_md_list("Added scenarios (only in current)", c.added,
                       lambda o: f"- {md_escape(_scenario_label(o))}: {_outcome_text(o)}"),
             *_md_list("Removed scenarios (only in baseline)", c.removed,
                       lambda o: f"- {md_escape(_scenario_label(o))}: {_outcome_text(o)}")]
    if c.added or c.removed:
        lines += ["", "### Whole experiments (different scenario sets, not compared)", "",
                  "| Metric | Baseline | Current |", "|---|---:|---:|"]
        for m in c.whole:
            b = m.baseline if m.name == "total_scenarios" else _value(m, "baseline", m.kind)
            cur = m.current if m.name == "total_scenarios" else _value(m, "current", m.kind)
            lines.append(f"| {m.label} | {b} | {cur} |")
    parts["apart"] = lines
    lines = []
    if c.variance is not None:
        lines += ["", "### Variance (shared scenarios)", "", "| Metric | Baseline | Current | Delta |",
                  "|---|---:|---:|---:|"]
        for vm in c.variance.metrics:
            lines.append(
                f"| {vm.name.replace('_', ' ')} | {pct(vm.baseline.mean)} ± {num(vm.baseline.std * 100)}pp | "
                f"{pct(vm.current.mean)} ± {num(vm.current.std * 100)}pp | {pp(vm.delta)} |"
            )
        lines += [f"\n> {note}" for note in c.variance.notes]
    parts["variance"] = lines
    parts["cost"] = ["", *(md_escape(line) for line in cost_lines(c))] if c.cost else []
    parts["coverage"] = [md_escape(line) for line in change_lines(c.coverage)]
    return "\n".join(ordered(parts)) + "\n"


def _md_list(title: str, items: Sequence[Any], fmt: Callable[[Any], str]) -> list[str]:
    if not items:
        return []
    lines = ["", f"### {title} ({len(items)})", "", *(fmt(s) for s in items[:_LISTED])]
    if len(items) > _LISTED:
        lines.append(f"- … and {len(items) - _LISTED} more")
    return lines


def _scenario_label(o: ScenarioOutcome) -> str:
    return f"{o.feature} / {o.name} [{o.id}]" if o.feature else f"{o.name} [{o.id}]"
