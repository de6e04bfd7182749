"""fabtest view in headless Chromium (Playwright driving the system Chromium, no browser download):
the served site and the static build are clicked through, the DOM checked, each page screenshotted
into tmp_path (look at them with ``pytest --basetemp=DIR``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_fixtures import HOSTILE, results_dir

from fabtest.view.server import build_site

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed: pip install -e '.[dev]'")


def _chromium() -> str | None:
    return next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")) if p
                 and os.path.exists(p)), None)


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: apt-get install chromium")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return results_dir(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser, tmp_path: Path):  # noqa: ANN001 (playwright's types)
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
    yield pg
    pg.wait_for_load_state("load")  # a navigation still loading its assets when the test ends is not a failure
    assert pg.evaluate("window.__xss") is None  # agent text never ran as script
    pg.close()
    assert errors == []


@pytest.fixture
def served(results: Path) -> Iterator[str]:
    """``fabtest view RESULTS --no-open`` in a subprocess; the URL it prints."""
    proc = subprocess.Popen([sys.executable, "-m", "fabtest.cli", "view", str(results), "--no-open"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield line.split(" at ")[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _shot(pg, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    pg.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)


def _visible(pg, selector: str) -> int:  # noqa: ANN001
    return pg.eval_on_selector_all(selector, "rows => rows.filter(r => r.offsetParent !== null).length")


def _search(pg, text: str) -> None:  # noqa: ANN001
    """Type into the transcript search; the first word loads the experiments' search.js (async)."""
    pg.fill("#f-text", text)
    pg.wait_for_function("!document.getElementById('f-count').textContent.startsWith('loading')")


def test_served_site_experiments_trend_point_comparison_and_conversation(page, served: str, tmp_path: Path) -> None:
    page.goto(served)
    assert _visible(page, "tr.exp") == 12
    page.select_option("#f-tag", "release")
    assert _visible(page, "tr.exp") == 4  # experiments 0, 3, 6, 9
    page.select_option("#f-tag", "")
    page.select_option("#f-branch", "feature/tone")
    assert _visible(page, "tr.exp") == 3
    page.select_option("#f-branch", "")
    page.fill("#f-name", "prompt v1")
    assert _visible(page, "tr.exp") == 3  # v1, v10, v11
    page.fill("#f-name", "")
    _shot(page, tmp_path, "experiments")

    # trends: the ringed (regressed) completion point opens the experiment where it dropped
    page.click("nav.viewnav >> text=Trends")
    assert page.locator("figure.chart").count() == 4
    tip = page.locator('a.point[href="exp/exp_008.html"][data-series="completion"] circle[r="4.5"] title').text_content()
    assert "REGRESSION" in tip and "50.0%" in tip
    _shot(page, tmp_path, "trends")
    page.click('a.point[href="exp/exp_008.html"][data-series="friendly"]')
    page.wait_for_url("**/exp/exp_008.html")
    assert "prompt v8" in page.locator("header.top h1").text_content()

    # one experiment: the scenario filters
    total = _visible(page, "tr.scn")
    page.check("#f-failed")
    failed = _visible(page, "tr.scn")
    assert 0 < failed < total and page.locator("#f-count").text_content() == f"{failed} of {total} shown"
    page.uncheck("#f-failed")
    page.select_option("#f-failure", "max_turns")
    assert _visible(page, "tr.scn") == failed
    page.select_option("#f-failure", "")
    page.check("#f-flaky")
    assert _visible(page, "tr.scn") == 0  # experiment 8's scenario 5 did not flake (8 % 3 != 1)
    _shot(page, tmp_path, "experiment")

    # compare two chosen experiments; the text filter narrows both lists to one branch's
    page.click("nav.viewnav >> text=Compare")
    page.wait_for_url("**/compare.html")
    page.wait_for_load_state("load")  # view.js (end of the body) has attached the filter's listener
    page.fill("#c-filter", "feature/tone")
    shown = page.eval_on_selector_all("#c-baseline option", "os => os.filter(o => !o.hidden).map(o => o.value)")
    assert shown == ["exp_008", "exp_004", "exp_000"] and page.locator("#c-count").text_content() == "3 of 12 experiments match"
    assert page.input_value("#c-current") in shown and page.input_value("#c-baseline") in shown
    page.fill("#c-filter", "")
    page.select_option("#c-baseline", "exp_006")
    page.select_option("#c-current", "exp_009")
    page.click("#compare-form button")
    page.wait_for_url("**/compare/exp_006--exp_009.html")
    assert "completion" in page.locator("#gate").text_content()
    assert page.locator("text=Conversation diffs").count() == 1
    _shot(page, tmp_path, "comparison")

    # a conversation that changed outcome
    page.click("#changed a >> nth=0")
    page.wait_for_url("**/exp/exp_009/*-r1.html")
    assert page.locator("section.turn").count() == 3
    assert page.locator("section.turn >> nth=0").locator(".check").count() >= 1
    if "scenario 0" in page.locator("header.top h1").text_content():
        assert HOSTILE in page.locator("section.turn >> nth=0").locator(".msg.agent").text_content()
    _shot(page, tmp_path, "conversation")


def test_static_build_opens_from_files(page, results: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(results, site)
    page.goto((site / "index.html").as_uri())
    assert _visible(page, "tr.exp") == 12
    page.click('tr.exp td:first-child a:text-is("exp_003")')
    assert HOSTILE in page.locator("header.top h1").text_content()  # shown as text, not markup
    page.click("tr.scn a >> text=scenario 0 >> nth=0")
    assert HOSTILE in page.locator("section.turn >> nth=0").locator(".msg.agent").text_content()
    assert "search_venues" in page.locator("section.turn >> nth=0").locator(".tool").text_content()
    _shot(page, tmp_path, "static-conversation")
    # the experiment's conversations are one pack: another run of it is the same page, another #run
    page.click("#related a >> text=run 2")
    page.wait_for_url("**/exp/exp_003/conversation.html#*-r2")
    page.wait_for_function("document.querySelector('.cards .card:nth-child(2) .v').textContent === '2'")
    page.click("#related a >> text=in exp_002")  # the previous experiment's pack
    page.wait_for_url("**/exp/exp_002/conversation.html#*-r2")
    page.wait_for_function("document.title.indexOf('scenario 0') >= 0 && !!document.querySelector('section.turn')")
    assert "reply of experiment 2" in page.locator("section.turn >> nth=0").text_content()
    page.click("nav.viewnav >> text=Compare")
    page.wait_for_url("**/compare.html")  # loaded: view.js handles the form's submit
    page.select_option("#c-baseline", "exp_000")
    page.select_option("#c-current", "exp_011")
    page.click("#compare-form button")
    assert "run `fabtest view`" in page.locator("#c-note").text_content()  # only consecutive pairs are built
    page.click("text=exp_010 → exp_011")
    assert page.locator("#gate").count() == 1
    page.click("nav.viewnav >> text=Trends")
    page.click("text=commit")
    assert "08c0ffee" in page.locator("figure.chart >> nth=0").text_content()
    page.click("p.switch >> text=feature/tone")  # one branch's trends, still x by commit
    assert "3 experiments on feature/tone" in page.locator("h2").first.text_content()
    _shot(page, tmp_path, "static-trends-commit")
    page.click('a.point[data-series="completion"] >> nth=2')
    assert "prompt v8" in page.locator("header.top h1").text_content()


def test_find_things_in_an_experiment_search_changed_grouped_sorted(page, results: Path, tmp_path: Path) -> None:
    """Issue 31 point 3: runs grouped under their scenario with pass counts, a search across the
    transcripts, the 'changed vs previous' filter, sortable columns (static build, from files)."""
    site = tmp_path / "site"
    build_site(results, site)
    page.goto((site / "exp" / "exp_008.html").as_uri())
    assert page.locator("tbody.group").count() == 8 and _visible(page, "tr.scn") == 16
    first = page.locator("tbody.group >> nth=0").locator("tr.sgroup")
    assert "0/2 passed" in first.text_content() and "scenario 0" in first.text_content()

    _search(page, "reply of EXPERIMENT 8")  # only scenario 0's agent says it, in both runs
    assert _visible(page, "tr.scn") == 2 and _visible(page, "tbody.group") == 1
    # each row's run is read from its link (no data-runs copy of it, issue 31's 50 MB), which is marked
    assert page.locator("a.run.hit").count() == 2 and "data-runs" not in page.content()
    _search(page, "experiment 7")
    assert _visible(page, "tr.scn") == 0 and page.locator("#f-count").text_content() == "0 of 16 shown"
    page.fill("#f-text", "")

    page.check("#f-changed")  # against exp_004, the one before it on feature/tone
    groups = _visible(page, "tbody.group")
    assert 0 < groups < 8
    badges = page.eval_on_selector_all("tbody.group:not(.hidden) tr.sgroup", "rs => rs.map(r => r.textContent)")
    assert all("vs exp_004" in b for b in badges) and any("newly failing" in b for b in badges)
    page.uncheck("#f-changed")

    # a failed criterion, a called tool: the runs counted from the file
    from fabtest.experiment.reader import read_document

    runs = read_document(results / "exp_008.json", results)[1]["scenario_results"]
    unfriendly = sum(any(c["criterion"] == "friendly" and c["status"] == "failed" for c in r["evaluations"]["details"]) for r in runs)
    venues = sum(any(c["name"] == "search_venues" for t in r["transcript"] for c in t.get("tool_calls") or []) for r in runs)
    page.select_option("#f-criterion", "friendly")
    assert _visible(page, "tr.scn") == unfriendly and 0 < unfriendly < 16
    page.select_option("#f-criterion", "")
    page.select_option("#f-tool", "search_venues")
    assert _visible(page, "tr.scn") == venues and venues > 0
    page.select_option("#f-tool", "")

    def order(attr: str) -> list[float]:
        return [float(v) for v in page.eval_on_selector_all("tbody.group", f"gs => gs.map(g => g.dataset.{attr})")]

    page.click("#scenarios th >> nth=0 >> button")  # by pass rate, lowest first
    assert order("s0") == sorted(order("s0")) and order("s0")[0] == 0.0
    page.click("#scenarios th >> nth=0 >> button")
    assert order("s0") == sorted(order("s0"), reverse=True)
    assert page.get_attribute("#scenarios th >> nth=0", "aria-sort") == "descending"

    page.click("nav.viewnav >> text=Experiments")
    page.click("#experiments th:has-text('Completion') button")
    rates = page.eval_on_selector_all("tr.exp td:nth-child(9)", "cs => cs.map(c => parseFloat(c.textContent))")
    assert rates == sorted(rates) and rates[0] < rates[-1]
    dates = page.eval_on_selector_all("tr.exp td:nth-child(6)", "cs => cs.map(c => c.textContent)")
    page.click("#experiments th:has-text('Date') button")
    assert page.eval_on_selector_all("tr.exp td:nth-child(6)", "cs => cs.map(c => c.textContent)") == sorted(dates)


@pytest.mark.parametrize("how", ["served", "static"])
def test_search_the_transcripts_of_a_comparison_and_show_only_what_changed(page, results: Path, tmp_path: Path,
                                                                         request: pytest.FixtureRequest, how: str) -> None:
    """Issue 31 point 3: the comparison page lists every scenario with its runs on both sides; the
    transcript search covers both experiments (a run that matches is marked) and "show only what
    changed" keeps the scenarios the comparison found changed, served and from a static build."""
    if how == "served":
        page.goto(request.getfixturevalue("served") + "compare/exp_007--exp_008.html")
    else:
        build_site(results, tmp_path / "site")
        page.goto((tmp_path / "site" / "compare" / "exp_007--exp_008.html").as_uri())
    assert _visible(page, "tr.scn") == 8
    _search(page, "reply of experiment 8")  # said only in exp_008 (current), by scenario 0
    assert _visible(page, "tr.scn") == 1 and "scenario 0" in page.locator("tr.scn:not(.hidden)").text_content()
    marked = page.eval_on_selector_all("a.run.hit", "as => as.map(a => a.getAttribute('href'))")
    assert len(marked) == 2 and all("exp_008/" in m for m in marked)  # both current runs, no baseline run
    _search(page, "reply of experiment 7")  # the baseline's transcripts are searched too
    marked = page.eval_on_selector_all("a.run.hit", "as => as.map(a => a.getAttribute('href'))")
    assert _visible(page, "tr.scn") == 1 and len(marked) == 2 and all("exp_007/" in m for m in marked)
    _search(page, "")
    assert _visible(page, "tr.scn") == 8 and page.locator("a.run.hit").count() == 0
    page.check("#f-changed")  # show only what changed: the scenarios listed under "What changed"
    changed = page.locator("#what-changed tbody tr:not(.firstdiff)").count()
    assert 0 < _visible(page, "tr.scn") == changed < 8
    assert page.locator("#f-count").text_content() == f"{changed} of 8 shown"
    page.click("tr.scn:not(.hidden) a.run >> nth=0")  # a run link opens its conversation
    page.wait_for_selector("section.turn")  # a static build's conversation is unpacked after load
    # its stylesheet and script loaded too: the served view stops before the page's fixture checks them
    page.wait_for_load_state("load")


def test_review_a_judged_check_in_the_served_view(page, served: str, results: Path) -> None:
    """Issue 31 point 4: served, each judged check has right / wrong and a comment; a click saves a
    label next to the experiment and says how often the judge agrees so far."""
    page.goto(served + "exp/exp_002.html")
    page.click("tr.scn a >> text=scenario 1 · run 1")
    page.wait_for_load_state("load")  # its stylesheet and script: under load they arrive after the DOM
    forms = page.locator("form.label-form[data-check]")
    assert forms.count() == 2 and forms.first.is_visible()
    forms.first.locator("input[name=comment]").fill("not warm at all")
    forms.first.locator("button >> text=wrong").click()
    page.wait_for_function("document.querySelector('form.label-form[data-check] .saved').textContent.length > 0")
    assert forms.first.locator(".saved").text_content().startswith("saved (wrong): 1 label(s), the judge agrees with 0%")
    labels = (results / "exp_002.labels.yaml").read_text(encoding="utf-8")
    assert "comment: not warm at all" in labels and "verdict: failed" in labels and "judge: passed" in labels
    whole = page.locator('#run-label form.label-form[data-kind="conversation"]')  # the whole run's outcome
    assert whole.is_visible()
    whole.locator("input[name=comment]").fill("fine overall")
    whole.locator("button >> text=right").click()
    page.wait_for_function("document.querySelector('#run-label .saved').textContent.length > 0")
    assert whole.locator(".saved").text_content().startswith("saved (right): 2 label(s)")
    assert "kind: conversation" in (results / "exp_002.labels.yaml").read_text(encoding="utf-8")
    page.reload()
    assert "labelled right" in page.locator("#run-label").text_content()


def test_a_static_build_hides_the_review_controls(page, results: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(results, site)
    page.goto((site / "exp" / "exp_002.html").as_uri())
    page.click("tr.scn a >> text=scenario 1 · run 1")
    page.wait_for_load_state("load")  # its stylesheet and script: under load they arrive after the DOM
    page.wait_for_selector("#packed section.turn")  # unpacked from the experiment's runs.js
    assert page.locator("form.label-form").count() == 0 and page.locator("#labeling").count() == 0  # cannot save


def test_compare_selected_opens_the_two_ticked_experiments_older_first(page, served: str) -> None:
    page.goto(served)
    assert page.is_disabled("#compare-selected")
    page.check('input.pick[value="exp_011"]')
    page.check('input.pick[value="exp_006"]')
    assert page.is_enabled("#compare-selected")
    page.click("#compare-selected")
    page.wait_for_url("**/compare/exp_006--exp_011.html")
    assert page.locator("#verdict").count() == 1 and page.locator("#what-changed").count() == 1
