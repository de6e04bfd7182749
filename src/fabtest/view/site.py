"""Paths to pages: the one table both the server and the static build use.

``Site.render(path)`` returns the bytes and content type of a site path (``index.html``,
``trends.html``, ``exp/<id>.html``, ``exp/<id>/s<n>.html``, ``compare/<a>--<b>.html``,
``assets/...``) or None. The server calls it per request; ``fabtest view --build`` writes what
``pages()`` yields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import unquote

from fabtest.compare.gate import gate_lines, regression_gate
from fabtest.compare.sections import ordered
from fabtest.experiment.diff import ConversationDiff, diff_scenarios
from fabtest.production.regressions import imported_index
from fabtest.report.html import REPORT_CSS, comparison_parts
from fabtest.view.catalog import Catalog, ExperimentRow
from fabtest.view.compare_runs import comparison_runs
from fabtest.view.faults import FAULTS_PATH, faults_page, read_matrices
from fabtest.view.files import FILE_PATH, file_page, referenced_files
from fabtest.view.labels import LabelError, agreement, label_check, label_conversation, labels_path, read_labels
from fabtest.view.layout import compare_path, conversation_path, e, experiment_path, link, page, scenario_slug
from fabtest.view.listing import compare_chooser, experiments_page, trend_rows, trends_page, trends_path
from fabtest.view.packs import (
    SHELL,
    pack_key,
    pack_path,
    pack_script,
    packed_links,
    run_key,
    search_index,
    search_text,
    shell_page,
)
from fabtest.view.review import review_panel
from fabtest.view.scenarios import conversation_page, conversation_parts, experiment_page

__all__ = ["ASSETS", "Page", "Site"]

ASSETS = ("report.css", "view.css", "view.js")
_TRENDS = re.compile(r"trends(-commit)?(?:/([A-Za-z0-9_.-]+))?\.html")
_EXP = re.compile(r"exp/([^/]+)\.html")
_PACK = re.compile(r"exp/([^/]+)/runs\.js")
_CONV = re.compile(r"exp/([^/]+)/([A-Za-z0-9_.-]+)-r(\d+)\.html")
_CMP = re.compile(r"compare/(.+)--(.+)\.html")
_DIFFS = 5  # conversation diffs shown, as fabtest-compare shows by default
_CHANGED = 30  # scenarios of each kind listed under the verdict (each reads only that scenario's lines)


@dataclass(frozen=True, slots=True)
class Page:
    body: bytes
    content_type: str


def _html(text: str) -> Page:
    return Page(text.encode("utf-8"), "text/html; charset=utf-8")


@dataclass(slots=True)
class Site:
    catalog: Catalog
    #: the comparisons a static build writes (None when served: any pair is rendered on request)
    built_pairs: list[tuple[str, str]] | None = None
    #: each experiment's predecessor on its branch, fixed once for a static build (50,000 conversation
    #: pages would otherwise look it up 50,000 times)
    _previous: dict[str, ExperimentRow | None] | None = None
    #: ``fabtest import LOGS --all``'s index, read once for a static build (None when served: read per page)
    _imported: dict[str, dict[str, str]] | None = None

    def render(self, path: str) -> Page | None:
        path = path.lstrip("/") or "index.html"
        if path.startswith("assets/") and path[7:] in ASSETS:
            kind = "text/css" if path.endswith(".css") else "text/javascript"
            data = (REPORT_CSS.encode() if path == "assets/report.css"  # the HTML report's, which inlines it
                    else resources.files("fabtest.view").joinpath("assets", path[7:]).read_bytes())
            return Page(data, f"{kind}; charset=utf-8")
        if m := FILE_PATH.fullmatch(path):  # a conversation's file, from results/files/<sha256>
            found = file_page(self.catalog.results_dir, m.group(1), m.group(2))
            return Page(*found) if found else None
        rows = self.catalog.rows()
        if path == "index.html":
            return _html(experiments_page(rows, self.catalog, self.built_pairs))
        if m := _TRENDS.fullmatch(path):
            by = "commit" if m.group(1) else "time"
            if m.group(2) is None:
                return _html(trends_page(self.catalog, rows, by))
            branch = next((r.branch for r in rows if r.branch and scenario_slug(r.branch) == m.group(2)), None)
            return _html(trends_page(self.catalog, rows, by, branch)) if branch else None
        if path == "compare.html":
            return _html(compare_chooser(rows, self.built_pairs))
        if path == FAULTS_PATH:
            return _html(faults_page(read_matrices(self.catalog.results_dir)))
        if m := _EXP.fullmatch(path):
            row = _row(rows, m.group(1))
            return _html(self._experiment(rows, row, self.catalog.document(row))) if row else None
        if m := _PACK.fullmatch(path):
            row = _row(rows, m.group(1))
            return _script(pack_key(row.id), search_index(self.catalog.document(row))) if row else None
        if m := _CONV.fullmatch(path):
            row = _row(rows, m.group(1))
            sid = (next((s for s in self.catalog.scenario_ids(row) if scenario_slug(s) == m.group(2)), None)
                   if row else None)
            if row is None or sid is None:
                return None
            runs = self.catalog.runs(row, sid)
            entry = next((x for x in runs if (x.get("iteration") or 1) == int(m.group(3))), None)
            if not entry:
                return None
            labels = read_labels(labels_path(self.catalog.results_dir, row.id))
            return _html(conversation_page(self.catalog.header(row), self._regression(rows, entry),
                                           self._related(rows, row, entry, runs), labels))
        if m := _CMP.fullmatch(path):
            base, cur = _row(rows, m.group(1)), _row(rows, m.group(2))
            return _html(self._comparison(base, cur)) if base and cur else None
        return None

    def _comparison(self, base: ExperimentRow, cur: ExperimentRow) -> str:
        """``fabtest-compare``'s content for two experiments, with the turn-by-turn diff of the
        scenarios that changed outcome (only their entries are read from the files)."""
        comparison = self.catalog.comparison(base, cur)
        changed = [*comparison.newly_failing, *comparison.newly_passing][:_DIFFS]
        ids = [s.id for s in changed]
        cur_doc: dict[str, Any] = {"scenario_results": []}
        diffs = []
        if ids:
            b_doc = {"scenario_results": [x for i in ids for x in self.catalog.runs(base, i)]}
            cur_doc = {"scenario_results": [x for i in ids for x in self.catalog.runs(cur, i)]}
            diffs = diff_scenarios(b_doc, cur_doc, ids)
        head = (
            f'<header class="top"><div class="inner"><h1>Comparison</h1><div class="sub">'
            f'baseline {link("../", experiment_path(base.id), base.id)} {e(base.name)} → current '
            f'{link("../", experiment_path(cur.id), cur.id)} {e(cur.name)}</div></div></header>'
        )
        gate = regression_gate(comparison)
        lines = "".join(f'<p class="{"down" if line.startswith("FAIL") else "muted"}">{e(line)}</p>'
                        for line in gate_lines(gate))
        tone = {"worse": "down", "not worse": "up", "undecided": "muted"}[gate.outcome]
        parts = comparison_parts(cur_doc, comparison, diffs)
        parts.update({  # the page's own: its verdict's tone, the changes with links to the runs, the gate, the runs
            "verdict": f'<p class="verdict {tone}" id="verdict"><b>{e(gate.verdict)}</b></p>',
            "changes": self._changed(base, cur, comparison, diffs),
            "gate": ('<div class="panel" id="gate">'
                     '<h3>Regression gate (<code>fabtest-compare --fail-on-regression</code>, '
                     f'exit {gate.exit_code})</h3>' + lines + "</div>"),
            "runs": comparison_runs(base.id, cur.id, self.catalog.document(base), self.catalog.document(cur),
                                    _change_labels(comparison)),
        })
        if changed:
            links = "".join(f'<li>{link("../", conversation_path(cur.id, s.id, 1), s.name)}</li>' for s in changed)
            parts["diffs"] += ('<h3>Conversations that changed outcome (current run)</h3>'
                               f'<ul class="plain" id="changed">{links}</ul>')
        body = "".join(ordered({name: [html] for name, html in parts.items()}))
        return page(f"fabtest view · {base.id} → {cur.id}", "../", body, head, "compare.html")

    def label(self, data: Any) -> dict[str, Any]:
        """Save a person's mark on a judged check (``fabtest view`` posts it): ``data`` names the
        experiment, scenario, iteration and check and says ``right`` or ``wrong`` with an optional
        comment. Returns the label and the judge's agreement with every label of the experiment."""
        if not isinstance(data, dict) or data.get("verdict") not in ("right", "wrong"):
            raise LabelError("expected {experiment, scenario, iteration, check (or kind: conversation), "
                             "verdict: right|wrong, comment}")
        whole = data.get("kind") == "conversation"  # the run's outcome, not one check
        row = _row(self.catalog.rows(), str(data.get("experiment")))
        if row is None:
            raise LabelError(f"no experiment {data.get('experiment')!r} in {self.catalog.results_dir}")
        iteration, check = data.get("iteration"), data.get("check")
        if not isinstance(iteration, int) or not (whole or isinstance(check, int)):
            raise LabelError("iteration and check must be numbers")
        entry = next((x for x in self.catalog.runs(row, str(data.get("scenario")))
                      if (x.get("iteration") or 1) == iteration), None)
        if entry is None:
            raise LabelError(f"experiment {row.id} has no run {iteration} of {data.get('scenario')!r}")
        head = self.catalog.header(row)
        right, comment, where = data["verdict"] == "right", str(data.get("comment") or ""), self.catalog.results_dir
        saved = (label_conversation(where, head, entry, right, comment) if whole or not isinstance(check, int)
                 else label_check(where, head, entry, check, right, comment))
        return {"label": saved, **agreement(read_labels(labels_path(self.catalog.results_dir, row.id)))}

    def _experiment(self, rows: list[ExperimentRow], row: ExperimentRow, doc: dict[str, Any]) -> str:
        """The experiment's page, its scenarios marked with how they changed against the experiment
        before it on its branch (the ``changed`` filter)."""
        prev = self.catalog.previous(row, rows)
        review = review_panel(doc, read_labels(labels_path(self.catalog.results_dir, row.id)))
        if prev is None:
            return experiment_page(doc, review=review)
        return experiment_page(doc, _change_labels(self.catalog.comparison(prev, row)), prev.id, review)

    def _related(self, rows: list[ExperimentRow], row: ExperimentRow, entry: dict[str, Any],
                 runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """Links to the same scenario in the other iterations of this experiment and in the
        experiment before it on its branch (the baseline the list compares it with)."""
        sid, here = str(entry.get("id")), entry.get("iteration") or 1
        out = [(conversation_path(row.id, sid, x.get("iteration") or 1),
                f"run {x.get('iteration') or 1} ({'passed' if x.get('passed') else 'failed'})")
               for x in runs if (x.get("iteration") or 1) != here]
        prev = self._previous.get(row.id) if self._previous is not None else self.catalog.previous(row, rows)
        if prev is not None and sid in self.catalog.scenario_ids(prev):
            out.append((conversation_path(prev.id, sid, here if here <= prev.iterations else 1),
                        f"in {prev.id} (previous on branch)"))
            out.append((compare_path(prev.id, row.id), f"compare {prev.id} → {row.id}"))
        return out

    def _regression(self, rows: list[ExperimentRow], entry: dict[str, Any]) -> dict[str, Any]:
        """A production run (``fabtest score``) with the scenario ``fabtest import LOGS --all`` wrote for
        its conversation, if any: the feature, and its newest run in a test experiment when it was run."""
        logged = entry.get("production")
        if not isinstance(logged, dict):
            return entry
        index = self._imported if self._imported is not None else imported_index(self.catalog.results_dir)
        imported = index.get(str(logged.get("conversation")))
        if imported is None:
            return entry
        ran = next((r for r in reversed(trend_rows(rows)) if r.source != "production"
                    and imported["scenario_id"] in self.catalog.scenario_ids(r)), None)
        path = conversation_path(ran.id, imported["scenario_id"], 1) if ran is not None else None
        return {**entry, "production": {**logged, "regression": {"feature": imported["feature"], "path": path}}}

    def _changed(self, base: ExperimentRow, cur: ExperimentRow, comparison: Any,
                 diffs: list[ConversationDiff]) -> str:
        """The scenarios that changed, right under the verdict (newly failing first, then quality
        regressed, newly passing, improved, changed but not significant), each with its before and
        after counts and links to a run of it on both sides: a failing one where it now fails, a
        passing one where it used to pass (the diffed pair when there is a diff, whose first
        differing turn is shown inline)."""
        by_id = {d.scenario_id: d for d in diffs}
        groups = (("newly failing", "down", comparison.newly_failing),
                  ("quality regressed", "down", comparison.quality_regressed),
                  ("newly passing", "up", comparison.newly_passing),
                  ("quality improved", "up", comparison.quality_improved),
                  ("changed, not significant", "flat", comparison.changed_not_significant))
        items, seen = [], set()
        for label, tone, found in groups:
            for s in [s for s in found if s.id not in seen][:_CHANGED]:
                seen.add(s.id)  # a scenario that newly fails is not listed again for its quality
                unit = "runs" if label.startswith("newly") else "checks"
                worse = tone == "down"
                sides, diff = [], by_id.get(s.id)
                for row, want, diffed in ((base, worse, diff and diff.baseline_iteration),
                                          (cur, not worse, diff and diff.current_iteration)):
                    runs = self.catalog.runs(row, s.id)
                    pick = next((x for x in runs if (x.get("iteration") or 1) == diffed), None) or next(
                        (x for x in runs if bool(x.get("passed")) == want), runs[0] if runs else None)
                    if pick is not None:
                        it = pick.get("iteration") or 1
                        which = "baseline" if row is base else "current"
                        sides.append(link("../", conversation_path(row.id, s.id, it), f"{which} run {it}"))
                counts = " → ".join(f"{c[0]}/{c[1]}" for c in (s.baseline_counts, s.current_counts) if c)
                counts = f"{counts} {unit}" if counts else "–"
                items.append(f'<tr><td><span class="{tone}">{e(label)}</span></td><td>{e(s.name)}</td>'
                             f'<td class="num">{e(counts)}</td><td>{" · ".join(sides)}</td></tr>'
                             + _first_difference(diff))
        if not items:
            return ('<div class="panel" id="what-changed">'
                    '<p class="muted">No scenario changed outcome or quality.</p></div>')
        return ('<div class="panel" id="what-changed"><h2>What changed</h2><table><thead><tr>'
                '<th scope="col">Change</th>'
                '<th scope="col">Scenario</th><th scope="col" class="num">Passed, before → after</th>'
                f'<th scope="col">Conversations</th></tr></thead><tbody>{"".join(items)}</tbody></table></div>')

    def pages(self) -> Iterator[tuple[str, Page]]:
        """Every page of the static build: the lists, the trends (all and per branch), each
        experiment, its conversations packed into ``exp/<id>/runs.js`` with the page that shows
        them (``exp/<id>/conversation.html#<run>``; links to a conversation point there), and each
        experiment compared with the one before it, overall and on its branch (``built_pairs``)."""
        rows = self.catalog.rows()
        ordered = trend_rows(rows)
        branches = sorted({r.branch for r in ordered if r.branch})
        # each experiment against the one before it, overall and on its branch (the trends' regressions link them)
        lines = [ordered, *([r for r in ordered if r.branch == b] for b in branches)]
        pairs = {(a.id, b.id): (a, b) for line in lines for a, b in zip(line, line[1:], strict=False)}
        self.built_pairs = sorted(pairs)
        self._previous = {r.id: self.catalog.previous(r, rows) for r in rows}
        self._imported = imported_index(self.catalog.results_dir)
        trends = [trends_path(b, by) for b in (None, *branches) for by in ("time", "commit")]
        for path in ("index.html", *trends, "compare.html", FAULTS_PATH, *(f"assets/{n}" for n in ASSETS)):
            rendered = self.render(path)
            assert rendered is not None  # these paths always render
            yield path, _static(rendered)
        for row in rows:
            doc = self.catalog.document(row)
            yield experiment_path(row.id), _static(_html(self._experiment(rows, row, doc)))
            entries = [x for x in doc["scenario_results"] if isinstance(x, dict)]
            labels = read_labels(labels_path(self.catalog.results_dir, row.id))
            packed = {}
            for entry in entries:
                runs = [x for x in entries if x.get("id") == entry.get("id")]
                title, _, body, header = conversation_parts(doc, self._regression(rows, entry),
                                                            self._related(rows, row, entry, runs), labels,
                                                            editable=False)
                packed[run_key(str(entry.get("id")), entry.get("iteration") or 1)] = [
                    title, packed_links(header), packed_links(body), search_text(entry)]
            yield pack_path(row.id), _script(pack_key(row.id), packed)
            yield pack_path(row.id, SHELL), _html(shell_page(row.id))
            for path in referenced_files(doc):  # the files its conversations show, when kept
                found = self.render(path)
                if found is not None:
                    yield path, found
        for a, b in pairs.values():
            yield compare_path(a.id, b.id), _static(_html(self._comparison(a, b)))


def _change_labels(c: Any) -> dict[str, str]:
    """Scenario id -> how it changed in comparison ``c`` (newly failing before quality regressed...)."""
    groups = (("newly failing", c.newly_failing), ("quality regressed", c.quality_regressed),
              ("newly passing", c.newly_passing), ("quality improved", c.quality_improved),
              ("changed", c.changed_not_significant))
    changed: dict[str, str] = {}
    for label, found in groups:
        for s in found:
            changed.setdefault(s.id, label)
    return changed


def _static(page: Page) -> Page:
    """A page of the static build, its links to conversations pointing into the packs."""
    if not page.content_type.startswith("text/html"):
        return page
    return Page(packed_links(page.body.decode("utf-8")).encode("utf-8"), page.content_type)


def _script(key: str, data: Any) -> Page:
    return Page(pack_script(key, data), "text/javascript; charset=utf-8")


def _first_difference(diff: ConversationDiff | None) -> str:
    """A row under a changed scenario: the first turn where its diffed runs differ, both sides' part
    that differs (shortened), so the why is on the first screen."""
    if diff is None or diff.first is None:
        return ""
    sides = diff.first_sides()
    both = f': baseline “{e(sides[0])}” · current “{e(sides[1])}”' if sides is not None else ""
    return (f'<tr class="firstdiff"><td></td><td colspan="3" class="muted">first difference at turn {diff.first}, '
            f"{e(diff.what)}{both}</td></tr>")


def _row(rows: list[ExperimentRow], slug: str) -> ExperimentRow | None:
    wanted = unquote(slug)
    return next((r for r in rows if r.id == wanted), None)
