"""Accessibility (issue 31 point 5): axe-core, run in headless Chromium, finds no critical or
serious violation on any page kind of ``fabtest view`` (served by the static build, opened from
files) and of the HTML reports; the trend charts are one tab stop each, with a data table.

axe-core's ``axe.min.js`` is vendored under ``tests/view/axe/`` (MPL-2.0, its licence beside it;
version and checksum in ``tests/view/axe/README.md``): nothing is fetched at test time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_fixtures import results_dir

from fabtest.compare.compute import compare
from fabtest.experiment.diff import diff_scenarios
from fabtest.experiment.reader import read_document
from fabtest.report.html import render_comparison_html, render_experiment_html
from fabtest.view.catalog import Catalog
from fabtest.view.layout import compare_path, conversation_path, experiment_path
from fabtest.view.packs import SHELL, pack_path, run_key
from fabtest.view.server import build_site

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install -e '.[dev]'")

AXE = Path(__file__).parent / "axe" / "axe.min.js"
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
                 if p and os.path.exists(p)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: apt-get install chromium")

#: the impacts that fail the test (axe's four levels: minor, moderate, serious, critical)
BLOCKING = ("critical", "serious")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The static build of the view over 12 experiments, and the two HTML reports beside it."""
    root = tmp_path_factory.mktemp("a11y")
    results = results_dir(root)
    out = root / "site"
    build_site(results, out)
    base = read_document(results / "exp_007.json", results)[1]
    cur = read_document(results / "exp_008.json", results)[1]
    (out / "report.html").write_text(render_experiment_html(cur), encoding="utf-8")
    ids = sorted({x["id"] for x in cur["scenario_results"]})[:2]
    (out / "report-compare.html").write_text(
        render_comparison_html(base, cur, compare(base, cur), diff_scenarios(base, cur, ids)), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _page_kinds(site: Path) -> dict[str, str]:
    catalog = Catalog(site.parent / "results")
    row = catalog.rows()[8]
    sid = catalog.scenario_ids(row)[0]
    return {
        "experiments": "index.html", "trends": "trends.html", "trends by commit": "trends-commit.html",
        "one branch's trends": "trends/feature_tone.html", "compare chooser": "compare.html",
        "experiment": experiment_path(row.id),
        "conversation": pack_path(row.id, SHELL) + "#" + run_key(sid, 1),  # a static build packs them
        "comparison": compare_path("exp_007", "exp_008"),
        "HTML report": "report.html", "HTML comparison report": "report-compare.html",
    }


def _violations(browser, url: str, search: str = "") -> list[str]:  # noqa: ANN001 (playwright's types)
    """axe's critical and serious findings on ``url`` (after typing ``search`` into its transcript search)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(url)
        if "#" in url:  # a packed conversation: shown once its experiment's runs.js is unpacked
            page.wait_for_selector("#packed section.turn")
        if search:
            page.fill("#f-text", search)
            page.wait_for_function("document.querySelector('a.run.hit, tr.scn:not(.hidden)') !== null && "
                                   "!document.getElementById('f-count').textContent.startsWith('loading')")
            page.check("#f-changed")
        page.add_script_tag(path=str(AXE))
        found = page.evaluate("""async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                          nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + n.failureSummary)}));
        }""")
    finally:
        page.close()
    return [f"{v['impact']} {v['id']} ({v['help']}): {v['nodes']}" for v in found if v["impact"] in BLOCKING]


@pytest.mark.parametrize("kind", ["experiments", "trends", "trends by commit", "one branch's trends", "compare chooser",
                                  "experiment", "conversation", "comparison", "HTML report", "HTML comparison report"])
def test_no_critical_or_serious_axe_violation(browser, site: Path, kind: str) -> None:  # noqa: ANN001
    path, _, fragment = _page_kinds(site)[kind].partition("#")
    url = (site / path).as_uri() + (f"#{fragment}" if fragment else "")
    assert _violations(browser, url) == []


@pytest.mark.parametrize("kind", ["experiment", "comparison"])
def test_a_search_and_the_changed_filter_leave_no_violation(browser, site: Path, kind: str) -> None:  # noqa: ANN001
    """The states the filters make: runs marked as matching the search, rows hidden."""
    assert _violations(browser, (site / _page_kinds(site)[kind]).as_uri(), search="reply") == []


def test_axe_finds_what_it_should_on_a_page_made_inaccessible(browser, tmp_path: Path) -> None:  # noqa: ANN001
    """The harness itself: an unlabelled select and grey-on-white text are reported (so a clean
    result above means clean pages, not a check that cannot fail)."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html lang="en"><head><title>bad</title></head><body><main>'
                   '<select><option>any tag</option></select><p style="color:#f08c00">evaluation 62%</p>'
                   "</main></body></html>", encoding="utf-8")
    found = " ".join(_violations(browser, bad.as_uri()))
    assert "critical select-name" in found and "serious color-contrast" in found


def test_a_trend_chart_is_one_tab_stop_with_a_data_table(browser, site: Path) -> None:  # noqa: ANN001
    """299 points must not put 299 links in the tab order: tabbing from the page's top reaches each
    chart once; its data table (a disclosure) links every experiment."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto((site / "trends.html").as_uri())
        charts = page.locator("figure.chart").count()
        stops = []
        for _ in range(60):
            page.keyboard.press("Tab")
            stops.append(page.evaluate("(() => { const a = document.activeElement;"
                                       " return a.tagName + '|' + (a.getAttribute('class') || '') + '|'"
                                       " + (a.getAttribute('aria-label') || a.textContent.slice(0, 40)); })()"))
        points = [s for s in stops if "point" in s.split("|")[1]]
        svgs = [s for s in stops if s.startswith("svg|")]
        assert points == [] and len(set(svgs)) == charts, stops
        table = page.locator("figure.chart >> nth=0").locator("details.chart-data")
        table.locator("summary").click()
        assert table.locator("tbody tr").count() == 12  # one row per experiment, its values per series
        assert table.locator('a[href="exp/exp_008.html"]').count() == 1
        assert "REGRESSION" in table.locator("tbody tr >> nth=8").text_content()
    finally:
        page.close()


def test_served_conversation_with_its_review_controls_has_no_serious_violation(browser, tmp_path: Path) -> None:  # noqa: ANN001
    """Served, a conversation page shows right / wrong and a comment on each judged check (hidden
    in the static build above): they are labelled controls too."""
    import threading

    from fabtest.view.server import make_server

    results = results_dir(tmp_path, count=2)
    catalog = Catalog(results)
    sid = catalog.scenario_ids(catalog.rows()[1])[1]
    server = make_server(results)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{conversation_path('exp_001', sid, 1)}"
        page = browser.new_page()
        page.goto(url)
        assert page.locator("form.label-form").first.is_visible()
        page.close()
        assert _violations(browser, url) == []
        # with labels already made (a check's and the whole run's), shown under them
        from fabtest.view.site import Site

        site = Site(Catalog(results))
        for body in ({"check": 0}, {"kind": "conversation"}):
            site.label({"experiment": "exp_001", "scenario": sid, "iteration": 1, "verdict": "wrong",
                        "comment": "a comment", **body})
        page = browser.new_page()
        page.goto(url)
        assert page.locator("div.labelled").count() == 2
        page.close()
        assert _violations(browser, url) == []
    finally:
        server.shutdown()
        server.server_close()
