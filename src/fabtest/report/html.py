"""One self-contained HTML file per experiment or comparison: inline CSS, inline SVG, no JS.

Everything a reviewer needs is in the file (summary, charts, every transcript with tool calls and
topics, every check with its status, failure messages), so it can be attached to a CI run or
mailed and opened offline. Every value from the document is escaped with ``html.escape``: a
results file may come from elsewhere (a hand-edited or foreign experiment), so table cells are
escaped unless they are an :class:`_Html` fragment the report built itself (the building blocks
and the stylesheet are in ``report/html_parts.py`` and ``report/css.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fabtest.compare.compute import Comparison
from fabtest.compare.render import ci_text, cost_lines
from fabtest.compare.sections import ordered
from fabtest.experiment.cost import summary_cost, total_text, unpriced_note
from fabtest.experiment.diff import ConversationDiff, tool_summary
from fabtest.experiment.fmt import git_line, llm_line, num, pct, pp, signed, timestamp, usd
from fabtest.judging.render import split_note
from fabtest.report.css import REPORT_CSS
from fabtest.report.html_parts import _card, _e, _header, _Html, _page, _table, steps_list
from fabtest.report.robustness import robustness_html
from fabtest.report.svg import delta_chart, paired_chart, rate_chart, rate_color

__all__ = [
    "REPORT_CSS",
    "comparison_parts",
    "comparison_sections",
    "experiment_sections",
    "moved_panel",
    "page_header",
    "render_comparison_html",
    "render_experiment_html",
]

_MOVED_SHOWN = 10  # lines of "what moved" on a page (the JSON keeps more)
_ICONS = {"passed": "✓", "failed": "✗", "inconclusive": "?", "not_applicable": "n/a", "skipped": "–"}


def _experiment_meta(exp: dict[str, Any]) -> list[tuple[str, str]]:
    meta = [
        ("Experiment", str(exp.get("id"))),
        ("Timestamp", timestamp(exp.get("timestamp"))),
        ("Git", git_line(exp)),
        ("Judge", llm_line(exp.get("judge"))),
        ("Simulator", llm_line(exp.get("simulator"))),
    ]
    if exp.get("tags"):
        meta.append(("Tags", ", ".join(exp["tags"])))
    if (exp.get("iterations") or 1) > 1:
        meta.append(("Runs", str(exp["iterations"])))
    if exp.get("interrupted"):
        meta.append(("Status", "INTERRUPTED (partial results)"))
    return meta


# ---------------------------------------------------------------------------------------------
# experiment sections


def _summary_cards(summary: dict[str, Any], iterations: int = 1) -> str:
    """The headline cards; with several iterations the count is of scenario runs, and says so."""
    counted = summary.get("passed", 0) + summary.get("failed", 0)
    ev = summary.get("evaluations") or {}
    skipped = f", {summary['skipped']} skipped" if summary.get("skipped") else ""
    return '<div class="cards">' + "".join(
        [
            _card("Completion", pct(summary.get("completion_rate")),
                  f"{summary.get('passed', 0)}/{counted} passed{skipped}",
                  rate_color(summary.get("completion_rate"))),
            _card("Evaluation rate", pct(summary.get("evaluation_rate")),
                  f"{ev.get('passed', 0)}/{ev.get('evaluated', 0)} soft checks passed",
                  rate_color(summary.get("evaluation_rate"))),
            _card("Scenarios" if iterations <= 1 else "Scenario runs", str(summary.get("total_scenarios", 0)),
                  f"{summary.get('failed', 0)} failed" + (f" · {iterations} iterations" if iterations > 1 else "")),
            _card("Avg turns", num(summary.get("avg_turns")), "per scenario run"),
            _card("Avg topics", num(summary.get("avg_topics")),
                  f"backtracking {pct(summary.get('backtracking_rate'))}"),
        ]
    ) + "</div>"


def _completion_section(summary: dict[str, Any]) -> str:
    counted = summary.get("passed", 0) + summary.get("failed", 0)
    failures = {k: v for k, v in (summary.get("failure_types") or {}).items() if v}
    items = [("passed", summary.get("passed", 0) / counted if counted else None,
              f"({summary.get('passed', 0)})")]
    items += [(k, v / counted if counted else None, f"({v})") for k, v in failures.items()]
    note = ""
    if summary.get("skipped"):
        note = (f'<p class="muted">{_e(summary["skipped"])} skipped scenario(s) are not counted in the '
                'completion rate.</p>')
    validity = summary.get("simulator_validity")
    if validity:  # engine/fidelity.py: invalid simulated conversations were run again or not counted
        note += (f'<p class="muted">Simulator valid: {_e(pct(validity.get("rate")))} ({_e(validity.get("valid", 0))}/'
                 f'{_e(validity.get("conversations", 0))} simulated conversations stayed in role; '
                 f'{_e(validity.get("reruns", 0))} re-run, {_e(validity.get("invalid_runs", 0))} '
                 'scenario(s) not counted).</p>')
    colors = ["#2f9e44"] + ["#e03131"] * len(failures)
    chart = rate_chart(items, "completion by outcome", colors)
    return f'<h2>Completion (hard expectations)</h2><div class="panel">{chart}{note}</div>'


def _criteria_section(doc: dict[str, Any]) -> str:
    criteria = doc.get("criteria_results") or {}
    summary = doc["summary"]
    ev = summary.get("evaluations") or {}
    notes = []
    if ev.get("inconclusive"):
        notes.append(f"{ev['inconclusive']} inconclusive evaluation(s) (judge could not decide) are not rated.")
    if ev.get("not_applicable"):
        notes.append(f"{ev['not_applicable']} evaluation(s) were not applicable (the criterion did not apply to what "
                     "was judged) and are not rated.")
    if summary.get("skipped_checks"):
        notes.append(f"{summary['skipped_checks']} check(s) were skipped (could not run, e.g. no LLM configured) "
                     "and are not rated.")
    note_html = "".join(f'<p class="muted">{_e(n)}</p>' for n in notes)
    if not criteria:
        return (f'<h2>Quality by criterion</h2><div class="panel"><p class="muted">No checks were rated.</p>'
                f'{note_html}</div>')
    chart = rate_chart([(n, e.get("rate"), f"({e.get('passed', 0)}/{e.get('evaluated', 0)})")
                        for n, e in criteria.items()], "criteria rates")
    # inconclusive and not-applicable verdicts beside the rate they are left out of, as the console does
    unrated = any(e.get("inconclusive") or e.get("not_applicable") for e in criteria.values())
    rows = [[_e(n), str(e.get("evaluated", 0)), str(e.get("passed", 0)), pct(e.get("rate"))]
            + ([str(e.get("inconclusive", 0)), str(e.get("not_applicable", 0))] if unrated else [])
            for n, e in criteria.items()]
    headers = ["Criterion", "Evaluated", "Passed", "Rate", *(["Inconclusive", "Not applicable"] if unrated else [])]
    return (
        f'<h2>Quality by criterion</h2><div class="panel">{chart}</div>'
        f'<div class="panel">{_table(headers, rows, set(range(1, len(headers))))}{note_html}</div>'
    )


def _efficiency_section(summary: dict[str, Any]) -> str:
    def row(label: str, key: str) -> list[str]:
        s = summary.get(key) or {}
        return [label, num(s.get("mean")), num(s.get("median")), f"{num(s.get('min'), 0)}–{num(s.get('max'), 0)}"]

    table = _table(["", "Mean", "Median", "Range"], [row("Turns", "turns"), row("Topics visited", "topics")],
                   {1, 2, 3})
    return (f'<h2>Efficiency</h2><div class="panel">{table}'
            f'<p class="muted">Backtracking rate: {pct(summary.get("backtracking_rate"))}</p></div>')


def _grounding_section(summary: dict[str, Any]) -> str:
    ground = summary.get("grounding")
    if not ground:
        return ""
    rows = [
        [_e(src), str(e["evaluated"]), str(e["grounded"]), pct(e["rate"]),
         pct(e.get("claim_rate")) if e.get("claims_total") else "–"]
        for src, e in ground["by_source"].items()
    ]
    worst = "".join(f"<li>{_e(s['name'])}: {pct(s['ungrounded_rate'])} ungrounded</li>"
                    for s in ground.get("worst_scenarios", []))
    worst_html = f"<h3>Highest ungrounded rates</h3><ul class=\"plain\">{worst}</ul>" if worst else ""
    table = _table(["Source", "Evaluated", "Grounded", "Rate", "Claims supported"], rows, {1, 2, 3, 4})
    return f'<h2>Grounding</h2><div class="panel">{table}{worst_html}</div>'


def _tokens_section(summary: dict[str, Any]) -> str:
    spent = summary_cost(summary)
    if spent is not None:
        rows = [[_e(ln["role"]), _e(ln.get("model") or "(not reported)"), f"{ln['calls']:,}",
                 f"{ln['input_tokens']:,}",
                 f"{ln['output_tokens']:,}", usd(ln.get("usd"))] for ln in spent["lines"]]
        total = total_text(spent)
        notes = "".join(f"<p>{_e(unpriced_note(entry))}</p>" for entry in spent.get("unpriced") or [])
        table = _table(["Role", "Model", "Calls", "Input tokens", "Output tokens", "Cost (USD)"], rows, {2, 3, 4, 5})
        return (f'<h2>LLM usage and cost</h2><div class="panel">{table}'
                f'<p><strong>Total cost: {_e(total)}</strong></p>'
                f'{notes}<p style="color:var(--muted)">{_e(spent.get("note", ""))}</p></div>')
    usage = summary.get("tokens") or {}
    if not usage:
        return ""
    rows = [[_e(r), f"{u['calls']:,}", f"{u['input_tokens']:,}", f"{u['output_tokens']:,}"]
            for r, u in usage.items()]
    table = _table(["Role", "Calls", "Input tokens", "Output tokens"], rows, {1, 2, 3})
    return f'<h2>LLM usage</h2><div class="panel">{table}</div>'


_STABILITY_BADGE = {"stable-pass": "b-pass", "stable-fail": "b-fail"}


def _variance_section(doc: dict[str, Any]) -> str:
    var = doc.get("variance")
    if not var:
        return ""
    rows = [[f"Run {r['iteration']}", str(r["scenarios"]), pct(r["completion_rate"]), pct(r["evaluation_rate"])]
            for r in var["runs"]]
    agg_c, agg_e = var.get("completion_rate") or {}, var.get("evaluation_rate") or {}

    def ms(a: dict[str, Any]) -> str:
        return "n/a" if a.get("mean") is None else f"{pct(a['mean'])} ± {num(a['std'] * 100)}pp"

    rows.append([_Html("<b>Mean ± std</b>"), "", ms(agg_c), ms(agg_e)])
    causes = {c.get("id"): c for c in var.get("flaky_causes") or [] if isinstance(c, dict)}  # experiment/attribution.py
    scen_rows = [
        [_e(s["name"]),
         _Html(f'<span class="badge {_STABILITY_BADGE.get(s["label"], "b-warn")}">{_e(s["label"])}</span>'),
         f"{s['passes']}/{s['runs']}", pct(s["pass_rate"]), pct(s["pass_at_k"]), pct(s["pass_hat_k"]),
         _e(f"flaky: {c['cause']} ({c['evidence']})" if (c := causes.get(s["id"])) else "")]
        for s in var.get("scenarios", [])
    ]
    return (
        f'<h2>Variance ({len(var["runs"])} runs)</h2><div class="panel">'
        f'{_table(["Run", "Scenarios", "Completion", "Evaluation"], rows, {1, 2, 3})}'
        f'<p class="muted">Standard deviation: {_e(var.get("std_kind", "sample"))} (n − 1).</p></div>'
        '<div class="panel"><h3>Per-scenario stability</h3>'
        f'{_table(["Scenario", "Label", "Passes", "Pass rate", "pass@k", "pass^k", "Why"], scen_rows, {2, 3, 4, 5})}'
        '<p class="muted">k = runs of the scenario: pass@k = passed at least once, '
        'pass^k = passed every time.</p></div>'
        + _flaky_criteria(var)
    )


def _flaky_criteria(var: dict[str, Any]) -> str:
    """Soft criteria whose verdict differs between runs (``variance.flaky_criteria``): a soft flip
    never fails a scenario, so the stability table above cannot show it."""
    found = [c for c in var.get("flaky_criteria") or [] if isinstance(c, dict)]
    if not found:
        return ""
    rows = [[_e(c.get("name")), _e(c.get("criterion")), "" if c.get("turn") is None else str(c.get("turn")),
             _e(c.get("verdicts")), _e(f"flaky: {c.get('cause')} ({c.get('evidence')})")] for c in found]
    return (f'<div class="panel"><h3>Flaky soft criteria ({len(found)})</h3>'
            f'{_table(["Scenario", "Criterion", "Turn", "Verdicts", "Why"], rows, {2})}</div>')


def _status_badge(entry: dict[str, Any]) -> _Html:
    if entry.get("skipped"):
        return _Html('<span class="badge b-skip">SKIPPED</span>')
    if entry.get("passed"):
        return _Html('<span class="badge b-pass">PASSED</span>')
    return _Html(f'<span class="badge b-fail">FAILED · {_e(entry.get("failure_type") or "assertion")}</span>')


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _transcript(entry: dict[str, Any]) -> str:
    turns = entry.get("transcript") or []
    if not turns:
        return '<p class="muted">No transcript recorded.</p>'
    out = []
    for t in turns:
        topic = f'<span class="topic">{_e(t.get("topic"))}</span>' if t.get("topic") else ""
        if t.get("off_graph"):
            topic += '<span class="topic" style="background:#fff4e6;color:#c2410c">off-graph jump</span>'
        tools = "".join(
            f'<div class="tool"><b>{_e(c.get("name"))}</b>({_e(_json(c.get("arguments", {})))})'
            + (' <span class="muted">stubbed</span>' if c.get("stubbed") else "")
            + (f'\n→ {_e(_json(c.get("result")))}' if c.get("result") is not None else "")
            + _metadata_line(c.get("metadata"))
            + "</div>"
            for c in t.get("tool_calls") or []
        )
        out.append(
            f'<div class="turn"><div class="tn">Turn {_e(t.get("number"))}{topic}'
            f'<span class="muted"> · agent {num(t.get("duration_s"), 2)}s</span></div>'
            f'<div class="msg user"><span class="who">User</span>{_e(t.get("user"))}</div>'
            f'<div class="msg agent"><span class="who">Agent</span>{_e(t.get("agent"))}'
            f'{_metadata_line(t.get("metadata"))}</div>{tools}</div>'
        )
    return "".join(out)


def _metadata_line(meta: Any) -> str:
    """What the agent said about a reply or a tool call (model, request id, latency), one muted line."""
    if not isinstance(meta, dict) or not meta:
        return ""
    parts = " · ".join(f"{_e(k)}: {_e(v if isinstance(v, (str, int, float)) else _json(v))}" for k, v in meta.items())
    return f'<div class="muted" style="font-size:11px">{parts}</div>'


def _checks(title: str, block: Any) -> str:
    details = block.get("details", []) if isinstance(block, dict) else (block or [])
    if not details:
        return ""
    rows = []
    for c in details:
        status = c.get("status", "skipped")
        icon = _Html(f'<span class="icon i-{_e(status)}" title="{_e(status)}">{_ICONS.get(status, "?")}</span>')
        note = split_note(c)  # judge samples that split (fabtest.judging)
        rows.append([icon, _e(c.get("turn") if c.get("turn") is not None else "–"), _e(c.get("type")),
                     _e(c.get("criterion")),
                     _e(f"{status} ({note})" if note else status), _e(c.get("details"))])
    summary = ""
    if isinstance(block, dict):
        summary = f' <span class="muted">{_e(block.get("passed", 0))}/{_e(block.get("total", 0))} passed</span>'
    return f"<h3>{_e(title)}{summary}</h3>" + _table(["", "Turn", "Type", "Criterion", "Status", "Details"], rows)


def _scenario(entry: dict[str, Any], anchor: str, opened: bool | None = None) -> str:
    ev = entry.get("evaluations")
    ev = ev if isinstance(ev, dict) else {}
    iteration = f" · run {entry.get('iteration')}" if (entry.get("iteration") or 1) > 1 else ""
    facts = f"{entry.get('turns', 0)} turns · eval {pct(ev.get('rate'))}{iteration}"
    failure = ""
    if entry.get("failure_message"):
        failure = f'<div class="failure">{_e(entry["failure_message"])}</div>'
    if entry.get("skipped") and entry.get("skip_reason"):
        failure = ('<div class="failure" style="border-color:#adb5bd;background:#f8f9fa">'
                   f'Skipped: {_e(entry["skip_reason"])}</div>')
    path = entry.get("topic_path") or entry.get("topics_visited") or []
    path_html = ""
    if path:
        path_html = ('<p class="path muted">Topics: ' + " → ".join(f'<span class="topic">{_e(t)}</span>' for t in path)
                     + "</p>")
    where = " · ".join(_e(x) for x in (entry.get("feature"), entry.get("rule"), entry.get("record_id")) if x)
    if opened is None:  # alone: open when it failed; in a group the caller decides
        opened = not entry.get("passed") and not entry.get("skipped")
    is_open = " open" if opened else ""
    return (
        f'<details class="scenario" id="{_e(anchor)}"{is_open}><summary>{_status_badge(entry)}'
        f'<span class="name">{_e(entry.get("name"))}</span><span class="facts">{_e(facts)}</span></summary>'
        f'<div class="sbody"><p class="muted">{_e(entry.get("id"))}{" · " + where if where else ""}</p>'
        f"{failure}{path_html}"
        + (f"<h3>Steps</h3>{steps}" if (steps := steps_list(entry)) else "")
        + f"<h3>Transcript</h3>{_transcript(entry)}"
        f'{_checks("Evaluations (soft)", entry.get("evaluations"))}'
        f'{_checks("Expectations (hard)", entry.get("expectations"))}'
        "</div></details>"
    )


def _scenarios_section(entries: list[dict[str, Any]], title: str = "Scenarios") -> str:
    """Every run grouped under its scenario (iterations: one collapsible group with its pass count),
    failing first; only each scenario's first failing run opens by default, so 1,000 runs stay a page
    to scroll."""
    if not entries:
        return f'<h2>{_e(title)}</h2><p class="muted">No scenarios.</p>'
    groups: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for i, e in enumerate(entries):
        groups.setdefault(e.get("id") or f"#{i}", []).append((i, e))
    failing = {i for i, e in enumerate(entries) if not e.get("passed") and not e.get("skipped")}
    ordered = sorted(groups.values(), key=lambda runs: (not any(i in failing for i, _ in runs),
                                                         all(e.get("skipped") for _, e in runs),
                                                         runs[0][1].get("name") or ""))
    rows, details = [], []
    for g, runs in enumerate(ordered):
        runs = sorted(runs, key=lambda p: p[1].get("iteration") or 1)
        first = runs[0][1]
        counted = [e for _, e in runs if not e.get("skipped")]
        passed = sum(1 for e in counted if e.get("passed"))
        rates = [r for _, e in runs if isinstance(ev := e.get("evaluations"), dict)
                 and isinstance(r := ev.get("rate"), (int, float))]
        tone = "b-pass" if counted and passed == len(counted) else "b-fail" if counted else "b-skip"
        badge = _status_badge(first) if len(runs) == 1 else _Html(
            f'<span class="badge {tone}">'
            f"{passed}/{len(counted)} passed</span>")
        anchor = f"s{runs[0][0]}" if len(runs) == 1 else f"g{g}"
        rows.append([badge, _Html(f'<a href="#{anchor}">{_e(first.get("name"))}</a>'),
                     _Html(" ".join(f'<a href="#s{i}">{_e(e.get("iteration") or 1)}</a>' for i, e in runs)),
                     num(sum(float(e.get("turns") or 0) for _, e in runs) / len(runs)),
                     pct(sum(rates) / len(rates) if rates else None),
                     _e(next((e.get("failure_message") for _, e in runs if e.get("failure_message")), ""))])
        first_fail = next((i for i, _ in runs if i in failing), None)
        details.append(_scenario(first, anchor) if len(runs) == 1 else (
            f'<details class="scenario group" id="{anchor}"{" open" if first_fail is not None else ""}><summary>{badge}'
            f'<span class="name">{_e(first.get("name"))}</span><span class="facts">{len(runs)} runs</span></summary>'
            '<div class="sbody">'
            + "".join(_scenario(e, f"s{i}", opened=i == first_fail) for i, e in runs) + "</div></details>"))
    index = _table(["Status", "Scenario", "Runs", "Turns (mean)", "Eval rate (mean)", "Failure"], rows, {3, 4})
    return (f'<h2>{_e(title)} ({len(ordered)} scenarios, {len(entries)} runs)</h2>'
            f'<div class="panel">{index}</div>{"".join(details)}')


_COVERAGE_ROWS = (("topics", "Topics", "reached", "never_reached"),
                  ("transitions", "Transitions", "taken", "never_taken"),
                  ("tools", "Tools", "called", "never_called"),
                  ("criteria", "Criteria", "evaluated", "never_evaluated"))


def _coverage_section(doc: dict[str, Any]) -> str:
    """What the run exercised of what the project declares (experiment/coverage.py)."""
    section = doc.get("coverage") or {}
    rows = []
    for kind, label, hit, miss in _COVERAGE_ROWS:
        part = section.get(kind) or {}
        if part.get("declared"):
            covered = ", ".join(f"{name} ({n})" for name, n in (part.get(hit) or {}).items())
            rows.append([_e(label), f"{len(part.get(hit) or {})}/{part['declared']}", pct(part.get("rate")),
                         _e(covered or "-"), _e(", ".join(part.get(miss) or []) or "-")])
    records = section.get("records") or {}
    if not rows and not records:
        return ""
    table = _table(["Kind", "Covered", "Rate", "Exercised (times)", "Never"], rows, {1, 2}) if rows else ""
    jumps = (section.get("transitions") or {}).get("off_graph") or {}
    extra = (f'<p class="muted">Off-graph jumps: {_e(", ".join(f"{j} ({n})" for j, n in jumps.items()))}</p>'
             if jumps else "")
    if records:
        extra += _table(["Record category", "Records", "Runs passed", "Rate"],
                        [[_e(cat), str(e["records"]), f"{e['passed']}/{e['runs']}", pct(e.get("rate"))]
                         for cat, e in records.items()], {1, 2, 3})
    return f'<h2>Coverage</h2><div class="panel">{table}{extra}</div>'


def _iterations(doc: dict[str, Any]) -> int:
    experiment = doc.get("experiment")
    value = experiment.get("iterations") if isinstance(experiment, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def experiment_sections(doc: dict[str, Any]) -> str:
    """Everything the report shows of one experiment but its scenarios (``fabtest view`` lists
    those itself, with filters and a page per conversation)."""
    summary = doc["summary"]
    return (
        _summary_cards(summary, _iterations(doc))
        + _completion_section(summary)
        + _criteria_section(doc)
        + _efficiency_section(summary)
        + _grounding_section(summary)
        + _tokens_section(summary)
        + _coverage_section(doc)
        + _variance_section(doc)
        + robustness_html(doc.get("robustness"))  # fabtest rejudge --perturb, when it was run
    )


def page_header(doc: dict[str, Any], subtitle: str) -> str:
    """The dark header of an experiment's page: its name and identity (git, judge, tags...)."""
    exp = doc["experiment"]
    return _header(exp.get("name") or "fabtest experiment", subtitle, _experiment_meta(exp))


def render_experiment_html(doc: dict[str, Any]) -> str:
    """The full report of one experiment document."""
    exp = doc["experiment"]
    title = f"fabtest experiment {exp.get('id')}" + (f" — {exp['name']}" if exp.get("name") else "")
    body = experiment_sections(doc) + _scenarios_section(doc.get("scenario_results") or [])
    return _page(title, page_header(doc, f"Experiment report · {exp.get('id')}"), body)


# ---------------------------------------------------------------------------------------------
# comparison


def _mark_class(mark: str) -> str:
    return "up" if "▲" in mark else "down" if "▼" in mark else "flat"


def _comparability_panel(comparison: Comparison) -> str:
    c = comparison.comparability
    crit = "identical" if c.criteria_identical else "; ".join(
        x for x in (
            f"added: {', '.join(c.criteria_added)}" if c.criteria_added else "",
            f"removed: {', '.join(c.criteria_removed)}" if c.criteria_removed else "",
            f"modified (not compared): {', '.join(c.criteria_modified)}" if c.criteria_modified else "",
        ) if x
    ) or "changed"

    def line(ok: bool, severe: bool, label: str, text: str) -> list[str]:
        icon = _Html('<span class="icon i-passed">✓</span>' if ok else (
            '<span class="icon i-failed">✗</span>' if severe else '<span class="icon i-inconclusive">⚠</span>'))
        return [icon, _e(label), _e(text)]

    rows = [
        line(c.topic_graph_identical, True, "Topic graph", "identical" if c.topic_graph_identical else "different"),
        line(c.criteria_identical, False, "Criteria", crit),
        line(c.scenarios_added == c.scenarios_removed == 0, c.scenarios_shared == 0, "Scenarios",
             f"{c.scenarios_shared} shared, {c.scenarios_added} added, {c.scenarios_removed} {comparison.gone}"),
        line(c.judge_identical, True, "Judge LLM",
             c.judge_current if c.judge_identical else f"{c.judge_baseline} → {c.judge_current}"),
        line(c.simulator_identical, False, "Simulator LLM",
             c.simulator_current if c.simulator_identical else f"{c.simulator_baseline} → {c.simulator_current}"),
    ]
    reasons = f' <span class="muted">({_e("; ".join(c.reasons))})</span>' if c.reasons else ""
    return (
        '<h2>Comparability</h2><div class="panel"><p>Comparison validity: '
        f'<span class="badge b-{_e(c.validity)}">{_e(c.validity)}</span>{reasons}</p>'
        f'{_table(["", "Aspect", "Assessment"], rows)}</div>'
    )


def _metrics_panel(comparison: Comparison) -> str:
    rows = []
    for m in comparison.metrics:
        fmt = pct if m.kind == "rate" else num
        delta = pp(m.delta) if m.kind == "rate" else signed(m.delta)
        rows.append([_e(m.label), fmt(m.baseline), fmt(m.current), delta,
                     _Html(f'<span class="{_mark_class(m.mark)}">{_e(m.mark)}</span>'), _ci_cell(m)])
    cards = '<div class="cards">' + "".join(
        _card(m.label, pct(m.current) if m.kind == "rate" else num(m.current),
              f"was {pct(m.baseline) if m.kind == 'rate' else num(m.baseline)} · "
              f"{pp(m.delta) if m.kind == 'rate' else signed(m.delta)} {m.mark}",
              "#237032" if "▲" in m.mark else "#c92a2a" if "▼" in m.mark else None)
        for m in comparison.metrics
    ) + "</div>"
    table = _table(["Metric", "Baseline", "Current", "Delta", "", "95% intervals (Wilson)"], rows, {1, 2, 3})
    return cards + (f'<h2>Metrics (shared scenarios)</h2><div class="panel">{table}'
                    '<p class="muted">Over the scenarios both experiments contain. The evaluation rate counts '
                    'soft check ratings; the regression gate\'s overall evaluation counts scenario runs with every '
                    'soft check passed (the run is the gate\'s unit), so the two percentages differ. '
                    'Fewer turns count as better; a change in topics is shown (↑ more, ↓ fewer) but not judged, since '
                    'reaching more of the topic graph may be the point.</p></div>')


def _ci_cell(item: Any) -> str:
    if item.baseline_interval is None and item.current_interval is None:
        return ""
    return f"{ci_text(item.baseline_interval)} → {ci_text(item.current_interval)}"


def _criteria_panel(comparison: Comparison) -> str:
    if not comparison.criteria:
        return ""
    paired = paired_chart([(r.name, r.baseline, r.current) for r in comparison.criteria],
                          "criteria baseline vs current")
    deltas = delta_chart([(r.name, r.delta if r.status == "compared" else None) for r in comparison.criteria],
                         "criteria deltas")
    rows = [_row_cells(r) for r in comparison.criteria]
    table = _table(["Criterion", "Baseline", "Current", "Delta", "", "95% intervals (Wilson)"], rows, {1, 2, 3})
    return (
        '<h2>Quality by criterion (shared scenarios)</h2>'
        f'<div class="panel"><h3>Rates</h3>{paired}<h3>Change</h3>{deltas}</div>'
        f'<div class="panel">{table}</div>'
    )


def _row_cells(r: Any) -> list[str]:
    delta = pp(r.delta, 0) if r.status == "compared" else _e(r.status + (f" — {r.note}" if r.note else ""))
    return [_e(r.name), pct(r.baseline), pct(r.current), delta,
            _Html(f'<span class="{_mark_class(r.mark)}">{_e(r.mark)}</span>'), _ci_cell(r)]


def _checks_panel(comparison: Comparison) -> str:
    """Deterministic checks apart from the criteria; unchanged ones are counted, not listed."""
    if not comparison.checks:
        return ""
    shown = [r for r in comparison.checks if r.status != "compared" or abs(r.delta or 0) >= 1e-12]
    same = len(comparison.checks) - len(shown)
    table = _table(["Check", "Baseline", "Current", "Delta", "", "95% intervals (Wilson)"],
                   [_row_cells(r) for r in shown], {1, 2, 3}) if shown else ""
    note = f'<p class="muted">{same} check{"" if same == 1 else "s"} unchanged.</p>' if same else ""
    return f'<h2>Checks (deterministic, shared scenarios)</h2><div class="panel">{table}{note}</div>'


def _outcome_cells(o: Any) -> list[str]:
    status = ("skipped" if not o.runs else "passed" if o.passes == o.runs
              else f"failed ({o.failure_type or 'assertion'})")
    return [_e(o.name), _e(status), f"{o.passes}/{o.runs}", pct(o.evaluation_rate)]


def _added_removed_panel(comparison: Comparison) -> str:
    """Scenarios only one side has, and each experiment's whole figures, labelled as not compared."""
    if not (comparison.added or comparison.removed):
        return ""
    html = ""
    for title, items in (("Added scenarios (only in current)", comparison.added),
                         ("Not run (the current run was interrupted before them: untested)"
                          if comparison.current.interrupted else "Removed scenarios (only in baseline)",
                          comparison.removed)):
        if items:
            html += f"<h3>{_e(title)} ({len(items)})</h3>" + _table(
                ["Scenario", "Outcome", "Runs passed", "Evaluations"], [_outcome_cells(o) for o in items], {2, 3})
    whole = [[_e(m.label),
              _e(m.baseline) if m.name == "total_scenarios" else (pct if m.kind == "rate" else num)(m.baseline),
              _e(m.current) if m.name == "total_scenarios" else (pct if m.kind == "rate" else num)(m.current)]
             for m in comparison.whole]
    html += ("<h3>Whole experiments (different scenario sets: for reference, not compared)</h3>"
             + _table(["Metric", "Baseline", "Current"], whole, {1, 2}))
    return f'<h2>Added and removed scenarios</h2><div class="panel">{html}</div>'


def _changes_panel(comparison: Comparison) -> str:
    def block(title: str, items: list[Any], fmt: Any) -> str:
        if not items:
            return ""
        return (f"<h3>{_e(title)} ({len(items)})</h3><ul class=\"plain\">"
                + "".join(f"<li>{fmt(s)}</li>" for s in items) + "</ul>")

    def quality(s: Any) -> str:
        return (f"{_e(s.name)}: {pct(s.baseline, 0)} → {pct(s.current, 0)} "
                f"<span class=\"muted\">({_e(_ci_cell(s))})</span>")

    html = (
        block("Newly failing", comparison.newly_failing,
              lambda s: f'<span class="down">✗</span> {_e(s.name)} '
                        f'<span class="muted">({_e(s.note)}; {_e(_ci_cell(s))})</span>')
        + block("Newly passing", comparison.newly_passing,
                lambda s: f'<span class="up">✓</span> {_e(s.name)} <span class="muted">({_e(_ci_cell(s))})</span>')
        + block("Quality regressed (significant in the gate's family)", comparison.quality_regressed, quality)
        + block("Quality improved (significant in the gate's family)", comparison.quality_improved, quality)
        + block("Quality changed, not significant", comparison.changed_not_significant, quality)
    )
    empty = "<p class=muted>No scenario changed status or quality.</p>"
    return f'<h2>Scenario changes</h2><div class="panel">{html or empty}</div>'


def _variance_panel(comparison: Comparison) -> str:
    v = comparison.variance
    if v is None:
        return ""
    rows = [
        [_e(m.name.replace("_", " ")), f"{pct(m.baseline.mean)} ± {num(m.baseline.std * 100)}pp",
         f"{pct(m.current.mean)} ± {num(m.current.std * 100)}pp",
         pp(m.delta), "n/a (a side has one run)" if m.overlap is None else "yes" if m.overlap else _Html("<b>no</b>")]
        for m in v.metrics
    ]
    notes = "".join(f'<p class="muted">Note: {_e(n)}</p>' for n in v.notes)
    changed = [s for s in v.scenario_pass_rates if s.baseline != s.current]
    per = ""
    if changed:
        per = "<h3>Per-scenario pass rate changes</h3>" + _table(
            ["Scenario", "Baseline", "Current", "95% intervals (Wilson)"],
            [[_e(s.name), pct(s.baseline), pct(s.current), _ci_cell(s)] for s in changed], {1, 2}
        )
    table = _table(["Metric", "Baseline", "Current", "Delta", "Ranges overlap"], rows, {1, 2, 3})
    return f'<h2>Variance</h2><div class="panel">{table}{notes}{per}</div>'


def _diffs_section(diffs: Sequence[ConversationDiff]) -> str:
    """Conversation diffs (experiment/diff.py) as side-by-side tables from the first difference."""
    if not diffs:
        return ""
    parts = ["<h2>Conversation diffs</h2>"]
    for d in diffs:
        rows = []
        for pair in d.pairs:
            sides = [_Html("<br>".join(_e(line) for line in _diff_lines(side)))
                     for side in (pair.baseline, pair.current)]
            number = _Html(f"<b>{pair.number}</b>") if pair.number == d.first else str(pair.number)
            rows.append([number, *sides])
        where = f"first difference at turn {d.first}: {d.what}" if d.first else d.what
        where += (f" · baseline iteration {d.baseline_iteration} ({'passed' if d.baseline_passed else 'failed'}), "
                  f"current iteration {d.current_iteration} ({'passed' if d.current_passed else 'failed'})")
        parts.append(f'<div class="panel"><h3>{_e(d.name)}</h3><p class="muted">{_e(d.scenario_id)} · {_e(where)}</p>'
                     + (_table(["Turn", "Baseline", "Current"], rows) if rows else "") + "</div>")
    return "".join(parts)


def _diff_lines(turn: dict[str, Any] | None) -> list[str]:
    if turn is None:
        return ["(no turn)"]
    return [f"User: {turn.get('user', '')}", f"Agent: {turn.get('agent', '')}",
            *(f"-> {c}" for c in tool_summary(turn))]


def render_comparison_html(baseline_doc: dict[str, Any], current_doc: dict[str, Any], comparison: Comparison,
                           diffs: Sequence[ConversationDiff] = ()) -> str:
    """The comparison report, with the transcripts of every scenario that changed and the
    turn-by-turn ``diffs`` (see ``fabtest-compare --scenario``)."""
    b, c = comparison.baseline, comparison.current
    body = comparison_sections(current_doc, comparison, diffs)
    meta = [("Baseline", f"{b.id}" + (f" “{b.name}”" if b.name else "") + f" ({timestamp(b.timestamp)})"),
            ("Current", f"{c.id}" + (f" “{c.name}”" if c.name else "") + f" ({timestamp(c.timestamp)})"),
            ("Scenarios compared", str(comparison.comparability.scenarios_shared))]
    header = _header("Experiment comparison", f"{b.id} → {c.id}", meta)
    return _page(f"fabtest comparison {b.id} → {c.id}", header, body)


def moved_panel(comparison: Comparison) -> str:
    """What moved, scenario by scenario (:mod:`fabtest.compare.moved`), right under the verdict."""
    shown = comparison.moved[:_MOVED_SHOWN]
    items = "".join(f'<li><span class="{"down" if m.change > 0 else "up"}">{"▼" if m.change > 0 else "▲"}</span> '
                    f"{_e(m.line)}</li>" for m in shown)
    more = comparison.moved_total - len(shown)
    items += f'<li class="muted">… and {more} more (fabtest-compare --format json)</li>' if more > 0 else ""
    body = (f'<ul class="plain">{items}</ul>' if items else
            "<p class=muted>Nothing moved: every shared scenario's runs failed as often as before, check by check.</p>")
    return f'<div class="panel" id="moved"><h2>What moved</h2>{body}</div>'


def comparison_parts(current_doc: dict[str, Any], comparison: Comparison,
                     diffs: Sequence[ConversationDiff] = ()) -> dict[str, str]:
    """The comparison's sections as HTML, by name (:data:`fabtest.compare.sections.SECTIONS`):
    ``fabtest-compare``'s content, the turn-by-turn ``diffs`` and the current run of every scenario
    that changed (when ``current_doc`` has its entries). ``fabtest view`` replaces some with its own."""
    changed_ids = {s.id for s in (*comparison.newly_failing, *comparison.newly_passing, *comparison.quality_regressed,
                                  *comparison.quality_improved, *comparison.changed_not_significant)}
    changed = [e for e in current_doc.get("scenario_results") or [] if e.get("id") in changed_ids]
    verdict = comparison.verdict  # the gate's one line opens the page, as it opens every output
    return {
        "verdict": f'<p class="verdict" id="verdict"><b>Verdict: {_e(verdict)}</b></p>' if verdict else "",
        "moved": moved_panel(comparison),
        "changes": _changes_panel(comparison),
        "comparability": _comparability_panel(comparison),
        "metrics": _metrics_panel(comparison),
        "criteria": _criteria_panel(comparison),
        "checks": _checks_panel(comparison),
        "apart": _added_removed_panel(comparison),
        "variance": _variance_panel(comparison),
        "diffs": _diffs_section(diffs) + _scenarios_section(changed, "Changed scenarios (current run)"),
        "cost": "".join(f'<h2>Cost</h2><div class="panel"><p>{_e(line)}</p></div>' for line in cost_lines(comparison)),
    }


def comparison_sections(current_doc: dict[str, Any], comparison: Comparison,
                        diffs: Sequence[ConversationDiff] = ()) -> str:
    """The body of the comparison report: :func:`comparison_parts` in the one order of sections."""
    return "".join(ordered({name: [html] for name, html in comparison_parts(current_doc, comparison, diffs).items()}))
