"""The comparison page's table of every scenario with its runs on both sides, filtered as the
experiment page's runs are (the same filter bar and script): text in the transcripts of either
experiment, failing now, only what changed, failed criterion, called tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabtest.view.layout import conversation_path, e
from fabtest.view.scenarios import data_attrs, failed_criteria_of, run_filters, tools_called

__all__ = ["comparison_runs"]


def comparison_runs(base_id: str, cur_id: str, base_doc: Mapping[str, Any], cur_doc: Mapping[str, Any],
                    changed: Mapping[str, str]) -> str:
    """Every scenario of either experiment (one row each, current order first) with a link to each
    of its runs on both sides; ``changed``: scenario id -> how it changed (the "What changed" list)."""
    sides: list[dict[str, list[dict[str, Any]]]] = [{}, {}]
    for side, doc in enumerate((base_doc, cur_doc)):
        for run in doc.get("scenario_results") or []:
            if isinstance(run, dict):
                sides[side].setdefault(str(run.get("id")), []).append(run)
    order = list(dict.fromkeys([*sides[1], *sides[0]]))
    rows = []
    criteria: set[str] = set()
    tools: set[str] = set()
    for sid in order:
        both = (sides[0].get(sid, []), sides[1].get(sid, []))
        name = str((both[1] or both[0])[0].get("name") or sid)
        cells = []
        for exp, runs in zip((base_id, cur_id), both, strict=True):
            links = []
            for run in runs:
                it = run.get("iteration") or 1
                mark = "passed" if run.get("passed") else "skipped" if run.get("skipped") else "failed"
                tone = "" if mark == "passed" else f" r-{mark[0]}"  # a passed run is the plain case
                links.append(f'<a href="{e("../" + conversation_path(exp, sid, it))}" class="run{tone}">'
                             f'{e(it)}{"✓" if mark == "passed" else "✗"}</a>')
            passed = sum(1 for r in runs if r.get("passed"))
            counted = sum(1 for r in runs if not r.get("skipped"))
            cells.append(f'<td data-v="{passed / counted if counted else -1}">'
                         f'{f"{passed}/{counted} " if runs else "–"}{" ".join(links)}</td>')
        failed_now = set().union(*(failed_criteria_of(r) for r in both[1]))
        used = set().union(*(tools_called(r) for r in both[0] + both[1]))
        criteria |= failed_now
        tools |= used
        change = changed.get(sid, "")
        status = "failed" if any(not r.get("passed") and not r.get("skipped") for r in both[1]) else "passed"
        # no data-runs: view.js reads each run from its link (which experiment's pack, which run)
        attrs = data_attrs(changed="1" if change else "",
                           criteria=chr(10).join(sorted(failed_now)), tools=chr(10).join(sorted(used)))
        rows.append(f'<tr class="scn" data-status="{status}"{attrs}><td>{e(change) or "<span class=muted>same</span>"}'
                    f"</td><td>{e(name)}</td>{''.join(cells)}</tr>")
    heads = ["Change", "Scenario", f"Baseline {base_id} runs (✓ passed, ✗ not)", f"Current {cur_id} runs"]
    th = "".join(f'<th scope="col"><button type="button" class="sort" data-col="{i}">{e(h)}</button></th>'
                 for i, h in enumerate(heads))
    filters = run_filters([(base_id, "../"), (cur_id, "../")], (), sorted(criteria), sorted(tools),
                          changed="show only what changed", flaky=False, failed="failing now only")
    return (f'<h2 id="runs">Every scenario, both sides ({len(order)})</h2>'
            '<p class="muted">Search the transcripts of both experiments; a run whose transcript matches is '
            f'marked. Runs link to their conversation.</p>{filters}'
            f'<div class="panel"><table id="scenarios" class="sortable"><thead><tr>{th}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')

