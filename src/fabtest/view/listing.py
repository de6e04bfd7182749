"""The pages over many experiments: the experiments table, the comparison chooser and the trends.

All three are built from ``ExperimentRow``s (the compact index), never from whole files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from fabtest.experiment.fmt import pct, usd
from fabtest.view.catalog import Catalog, ExperimentRow
from fabtest.view.chart import Point, Series, line_chart
from fabtest.view.layout import compare_path, e, experiment_path, link, page, scenario_slug

__all__ = ["compare_chooser", "experiments_page", "trend_rows", "trends_page", "trends_path"]


def _commit(row: ExperimentRow) -> str:
    return (row.commit[:8] + ("*" if row.dirty else "")) if row.commit else "–"


def _date(row: ExperimentRow) -> str:
    return row.timestamp.replace("T", " ")[:16]


def _options(values: Sequence[str], label: str) -> str:
    return f'<option value="">{e(label)}</option>' + "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)


_TONE = {"worse": "down", "not worse": "up", "undecided": "flat"}


def _against_previous(catalog: Catalog | None, rows: list[ExperimentRow], r: ExperimentRow) -> tuple[str, str]:
    """The cell saying how ``r`` changed against the experiment before it on its branch (the gate's
    worse / not worse / undecided) with a "compare with previous" link, and the outcome itself."""
    prev = catalog.previous(r, rows) if catalog is not None else None
    if catalog is None or prev is None:
        return '<td class="muted">–</td>', ""
    outcome = catalog.outcome(prev, r)
    return (f'<td class="nowrap"><span class="{_TONE[outcome]}">{e(outcome)}</span> '
            f'<span class="muted">vs {e(prev.id)}</span><br>'
            f'{link("", compare_path(prev.id, r.id), "compare with previous")}</td>',
            outcome)


def experiments_page(rows: Sequence[ExperimentRow], catalog: Catalog | None = None,
                     built: Sequence[tuple[str, str]] | None = None) -> str:
    """The table of every experiment, newest first, with filters by tag, branch and name; with
    ``catalog``, each marked worse / not worse / undecided against the one before it on its branch.
    Two ticked rows open their comparison, older as baseline (``built``: the pairs a static build has)."""
    rows = list(rows)
    tags = sorted({t for r in rows for t in r.tags})
    branches = sorted({r.branch for r in rows if r.branch})
    pairs = "" if built is None else f' data-pairs="{e(" ".join(f"{a}--{b}" for a, b in built))}"'
    body_rows = []
    for r in reversed(rows):
        name = r.name + (" (interrupted)" if r.interrupted else "") + (f" (shard {r.shard})" if r.shard else "")
        source = '<span class="badge b-skip">production</span> ' if r.source == "production" else ""
        tags_html = "".join(f'<span class="topic">{e(t)}</span>' for t in r.tags)
        change, outcome = _against_previous(catalog, rows, r)
        body_rows.append(
            f'<tr class="exp" data-id="{e(r.id)}" data-name="{e(r.name.lower())}" data-branch="{e(r.branch)}" '
            f'data-tags="{e(" ".join(r.tags))}" data-change="{e(outcome)}"><td><input type="checkbox" class="pick" '
            f'aria-label="select {e(r.id)}" value="{e(r.id)}"> {link("", experiment_path(r.id), r.id)}</td>'
            f'<td>{source}{e(name)}</td>'
            f"<td>{tags_html}</td><td>{e(r.branch or '–')}</td><td><code>{e(_commit(r))}</code></td>"
            f'<td class="nowrap">{e(_date(r))}</td>{change}<td class="num">{e(r.scenarios)}</td>'
            f'<td class="num">{e(pct(r.completion))}</td>'
            f'<td class="num">{e(pct(r.evaluation))}</td><td class="num">{e(usd(r.cost_usd))}</td></tr>'
        )
    heads = ["ID", "Name", "Tags", "Branch", "Commit", "Date", "Vs previous on branch", "Runs", "Completion",
             "Evaluation", "Cost"]
    head = "".join(f'<th scope="col"{" class=num" if i >= 7 else ""}>'
                   f'<button type="button" class="sort" data-col="{i}">{h}</button></th>'
                   for i, h in enumerate(heads))
    filters = (
        '<div class="filters"><label>Name or id '
        '<input id="f-name" type="search" placeholder="part of a name or id"></label>'
        f'<label>Tag <select id="f-tag">{_options(tags, "any tag")}</select></label>'
        f'<label>Branch <select id="f-branch">{_options(branches, "any branch")}</select></label>'
        '<span class="muted" id="f-count" role="status"></span>'
        f'<button type="button" id="compare-selected"{pairs} disabled>Compare selected</button>'
        '<span class="muted" id="pick-note" role="status">tick two experiments to compare them</span></div>'
    )
    body = (
        f"<h2>Experiments ({len(rows)})</h2>{filters}"
        f'<div class="panel"><table id="experiments" class="sortable"><thead><tr>{head}</tr></thead>'
        f'<tbody>{"".join(body_rows)}</tbody></table></div>'
        + ("" if rows else '<p class="muted">No experiments in this results directory yet: '
           'run <code>pytest</code> first.</p>')
        + (_skipped_panel(catalog) if catalog is not None and catalog.skipped else "")
    )
    return page("fabtest view · experiments", "", body, active="index.html")


def _skipped_panel(catalog: Catalog) -> str:
    """The files of the results directory that are not readable experiments, each with why: a
    missing experiment is explained on the page, not only on the terminal that started the server."""
    root = catalog.results_dir
    items = "".join(f"<li><code>{e(path.relative_to(root) if path.is_relative_to(root) else path)}</code>: "
                    f"{e(why)}</li>" for path, why in sorted(catalog.skipped.items()))
    count = len(catalog.skipped)
    return (f'<div class="panel" id="skipped"><h3>{count} file{"" if count == 1 else "s"} skipped</h3>'
            '<p class="muted">These files in the results directory are not readable experiments and are left out '
            f'of every page:</p><ul class="plain">{items}</ul></div>')


def compare_chooser(rows: Sequence[ExperimentRow], built: Sequence[tuple[str, str]] | None = None) -> str:
    """Two selects and a button that opens ``compare/<baseline>--<current>.html``. ``built`` lists
    the pairs a static build wrote (the page says when another pair needs ``fabtest view``)."""
    options = "".join(f'<option value="{e(r.id)}">{e(r.id)} · {e(r.name)} · {e(r.branch or "-")} · '
                      f'{e(_date(r))}</option>'
                      for r in reversed(rows))
    pairs = "" if built is None else f' data-pairs="{e(" ".join(f"{a}--{b}" for a, b in built))}"'
    body = (
        '<h2>Compare two experiments</h2><div class="panel">'
        '<p><label>Find experiments '
        '<input type="search" id="c-filter" placeholder="part of an id, name, branch or date">'
        '</label> <span class="muted" id="c-count" role="status"></span></p>'
        f'<form id="compare-form"{pairs}>'
        f'<label>Baseline <select name="baseline" id="c-baseline">{options}</select></label> '
        f'<label>Current <select name="current" id="c-current">{options}</select></label> '
        '<button type="submit">Compare</button></form><p class="muted" id="c-note"></p>'
        "<p class=\"muted\">The same comparison as <code>fabtest-compare BASELINE CURRENT</code>: "
        "deltas over the shared scenarios, the regression gate, and the turn-by-turn diff of the scenarios "
        "that changed outcome.</p></div>"
    )
    if len(rows) >= 2:
        body += '<h3>Each experiment against the one before it</h3><ul class="plain">' + "".join(
            f'<li>{link("", compare_path(a.id, b.id), f"{a.id} → {b.id}")} '
            f'<span class="muted">{e(b.name)}</span></li>'
            for a, b in reversed(list(zip(rows, rows[1:], strict=False)))) + "</ul>"
    return page("fabtest view · compare", "", body, active="compare.html")


def trend_rows(rows: Sequence[ExperimentRow]) -> list[ExperimentRow]:
    """The experiments trends are drawn over: whole runs (no shard parts), oldest first."""
    return [r for r in rows if not r.shard]


def _x_time(rows: Sequence[ExperimentRow]) -> list[float]:
    out = []
    for i, r in enumerate(rows):
        try:
            out.append(datetime.fromisoformat(r.timestamp.replace("Z", "+00:00")).timestamp())
        except ValueError:
            out.append(out[-1] + 1 if out else float(i))
    return out


def _criterion(name: str, row: ExperimentRow) -> float | None:
    return row.criteria.get(name)


def trends_path(branch: str | None, by: str) -> str:
    """``trends.html`` (every branch, x by time), ``trends-commit.html``, ``trends[-commit]/<branch>.html``."""
    suffix = "-commit" if by == "commit" else ""
    return f"trends{suffix}/{scenario_slug(branch)}.html" if branch else f"trends{suffix}.html"


def trends_page(catalog: Catalog, rows: Sequence[ExperimentRow], by: str = "time", branch: str | None = None) -> str:
    """Completion, evaluation, each criterion, cost and latency over the experiments, x by time
    (``by="time"``) or by commit (one step per experiment); each point links to its experiment,
    a band shows the spread over iterations, a red ring marks where the regression gate of
    ``fabtest-compare`` trips against the previous experiment."""
    branches = sorted({r.branch for r in trend_rows(rows) if r.branch})
    rows = [r for r in trend_rows(rows) if branch is None or r.branch == branch]
    root = "../" if branch else ""
    xs = _x_time(rows) if by == "time" else [float(i) for i in range(len(rows))]
    ticks = [(x, r.timestamp[:10] if by == "time" else _commit(r)) for x, r in zip(xs, rows, strict=True)]
    if not rows:  # an empty results directory, or only shard parts or unreadable files: a page, not a crash
        body = (f"<h2>Trends{e(f' on {branch}' if branch else '')}</h2><p>No experiment to chart yet: run pytest, "
                "then reload. Shard parts and files that are not experiments are left out.</p>")
        return page("fabtest view · trends", root, body, active="trends.html")
    # test runs and production scores (fabtest score) are two lines side by side, each gated against its own kind
    lines = [[r for r in rows if r.source != "production"], [r for r in rows if r.source == "production"]]
    pairs = [(a, b) for line in lines for a, b in zip(line, line[1:], strict=False)]
    tripped = {b.id: catalog.regressions(a, b) for a, b in pairs}
    at = {r.id: x for x, r in zip(xs, rows, strict=True)}

    def series(name: str, value: Callable[[ExperimentRow], float | None], gate: str | None = None,
               spread: Callable[[ExperimentRow], tuple[float, float] | None] | None = None,
               fmt: Callable[[float], str] = pct, production: bool = False) -> Series:
        s = Series(f"{name} (production)" if production else name)
        for r in lines[1] if production else lines[0]:
            x, gates, v = at[r.id], tripped.get(r.id, frozenset()), value(r)
            if v is None:
                continue
            band = spread(r) if spread else None
            tip = f"{name}: {fmt(v)}\n{r.id} {r.name}\n{_date(r)} · {r.branch or '-'} @ {_commit(r)}"
            if band:
                tip += f"\nspread over {r.iterations} iterations: {fmt(band[0])} – {fmt(band[1])}"
            hit = gate is not None and gate in gates
            if hit:
                tip += "\nREGRESSION against the previous experiment (fabtest-compare gate)"
            s.points.append(Point(x, v, root + experiment_path(r.id), tip, band[0] if band else None,
                                  band[1] if band else None, hit, f"{r.id} {r.name} · {_date(r)}", fmt(v)))
        return s

    x_label = "experiment time" if by == "time" else "commit (one step per experiment)"
    kinds = [kind for kind, line in ((False, lines[0]), (True, lines[1])) if line]
    rates = line_chart(
        [s for p in kinds for s in (
            series("completion", lambda r: r.completion, "completion", lambda r: r.completion_spread, production=p),
            series("evaluation", lambda r: r.evaluation, None, lambda r: r.evaluation_spread, production=p))],
        "Completion and evaluation rate", ticks, pct, 1.0, "rate", x_label)
    names = [(n, p) for p in kinds for n in sorted({c for r in lines[p] for c in r.criteria})]
    criteria = line_chart([series(n, partial(_criterion, n), f"criterion:{n}", production=p) for n, p in names],
                          "Criteria pass rate", ticks, pct, 1.0, "pass rate", x_label) if names else ""
    cost = line_chart([series("cost", lambda r: r.cost_usd, fmt=usd, production=p) for p in kinds],
                      "Cost per experiment", ticks, usd, y_label="USD", x_label=x_label)
    latency = line_chart([series("scenario duration", lambda r: r.latency_s, fmt=lambda v: f"{v:.2f}s", production=p)
                          for p in kinds],
                         "Mean scenario duration", ticks, lambda v: f"{v:.1f}s", y_label="seconds", x_label=x_label)
    other = "commit" if by == "time" else "time"
    switch = (f'<p class="switch">x axis: <b>{by}</b> · {link(root, trends_path(branch, other), other)}'
              + " &nbsp; branch: " + " · ".join(
                  f"<b>{e(name or 'all')}</b>" if name == (branch or "")
                  else link(root, trends_path(name or None, by), name or "all")
                  for name in ["", *branches]) + "</p>")
    regressions = [(a, b, tripped[b.id]) for a, b in pairs if tripped[b.id]]
    reg_html = "".join(
        f'<li>{link(root, compare_path(a.id, b.id), f"{a.id} → {b.id}")}: {e(", ".join(sorted(g)))} '
        f'<span class="muted">({e(_commit(b))}, {e(_date(b))})</span></li>' for a, b, g in regressions)
    body = (
        f"<h2>Trends over {len(rows)} experiments{e(f' on {branch}' if branch else '')}</h2>{switch}"
        + ('<div class="panel regressions">'
           '<h3>Regressions (fabtest-compare gate, each experiment against the one before)</h3>'
           f'<ul class="plain">{reg_html}</ul></div>' if regressions else "")
        + f'<div class="panel">{rates}</div>'
        + (f'<div class="panel">{criteria}</div>' if criteria else "")
        + f'<div class="panel">{cost}</div><div class="panel">{latency}</div>'
        + '<p class="muted">Hover a point for its values; click it to open the experiment. Shard parts are left out '
        "(their merged experiment is shown). Duration is the mean wall time of a scenario run. Production scores "
        "(fabtest score) are drawn as lines of their own, each compared with the score before it.</p>"
    )
    return page("fabtest view · trends", root, body, active="trends.html")
