import os
import shutil
import subprocess
import re

import pytest

from support.experiments import check, make_doc, make_result
from fabtest.compare.compute import compare
from fabtest.report.console import render_summary
from fabtest.report.html import render_comparison_html, render_experiment_html


def _doc():
    grounding = check("venues", "failed", type_="grounded_in", source="search_venues", claims_total=5, claims_unsupported=2)
    results = [
        make_result("Book <script>alert(1)</script>", extra_checks=[grounding]),
        make_result("Needs a bigger room", passed=False, failure_type="max_turns", evals=[("friendly", "failed"), ("concise", "inconclusive")]),
        make_result("No key configured", skipped=True),
    ]
    return make_doc("exp_html01", results, name="Prompt <v2>")


def test_experiment_html_is_self_contained_and_escaped():
    html = render_experiment_html(_doc())
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html  # escaped, and no JS of our own
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Prompt &lt;v2&gt;" in html
    assert "user line 1 &lt;b&gt;&amp;" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no network resources
    assert "@import" not in html and "<link" not in html
    assert "<svg" in html and "search_venues" in html and "&quot;city&quot;: &quot;Berlin&quot;" in html
    assert "max_turns" in html and "Transcript" in html and "Expectations (hard)" in html


def test_comparison_html():
    base = _doc()
    cur = make_doc("exp_html02", [make_result("Book <script>alert(1)</script>", passed=False), make_result("Needs a bigger room")])
    html = render_comparison_html(base, cur, compare(base, cur))
    assert "<script" not in html and "Comparability" in html and "Newly failing" in html
    assert html.count("<svg") >= 2  # rates and deltas


def test_console_summary_mentions_llms_and_skips():
    text = render_summary(_doc(), "results/exp_html01.json", "exp_000000")
    assert "Judge:      gemini / gemini-2.0-flash" in text
    assert "Simulator:  none (no LLM configured)" in text
    assert "1 skipped" in text and "Grounding Analysis" in text
    assert "Results saved to: results/exp_html01.json" in text
    assert "fabtest-compare exp_000000 exp_html01" in text


def _chromium():
    if os.path.exists("/usr/bin/chromium"):
        return "/usr/bin/chromium"
    return shutil.which("chromium")


def test_chromium_screenshot(tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed: apt-get install chromium")
    report = tmp_path / "report.html"
    report.write_text(render_experiment_html(_doc()), encoding="utf-8")
    shot = tmp_path / "shot.png"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2000", f"file://{report}",
    ]
    try:
        subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish within 90 s")
    assert shot.exists(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a rendered page, not a blank image


def test_comparison_html_keeps_shared_added_and_checks_apart():
    from support.experiments import check

    match = check("match:/venue/", "passed", type_="match")
    base = make_doc("exp_hb", [make_result(n, extra_checks=[match]) for n in "ab"])
    cur = make_doc("exp_hc", [make_result(n, extra_checks=[match]) for n in "ab"]
                   + [make_result("<i>new</i>", passed=False)], iterations=2)
    html = render_comparison_html(base, cur, compare(base, cur))
    assert "Metrics (shared scenarios)" in html and "Checks (deterministic, shared scenarios)" in html
    assert "Added scenarios (only in current) (1)" in html and "&lt;i&gt;new&lt;/i&gt;" in html
    assert "Whole experiments (different scenario sets: for reference, not compared)" in html
    assert "n/a (a side has one run)" in html and "<b>no</b>" not in html
    criteria = html[html.index("Quality by criterion"):html.index("Checks (deterministic")]
    assert "match:/venue/" not in criteria


def test_html_report_groups_iterations_under_their_scenario():
    """Issue 31 point 3: one index row and one collapsible group per scenario with its pass count;
    only the first failing run of a scenario opens, so many iterations stay short."""
    results = [make_result(name, iteration=it, passed=not (name == "Flaky one" and it >= 2),
                           failure_type=None if name != "Flaky one" or it < 2 else "max_turns")
               for it in (1, 2, 3) for name in ("Steady one", "Flaky one")]
    html = render_experiment_html(make_doc("exp_group", results, iterations=3))
    assert "(2 scenarios, 6 runs)" in html
    index = html[html.index("<table><thead><tr><th>Status</th><th>Scenario</th><th>Runs</th>"):]
    index = index[:index.index("</table>")]
    assert index.count("<tr>") == 3  # the header and one row per scenario
    assert index.index("Flaky one") < index.index("Steady one")  # failing scenarios first
    assert "1/3 passed" in index and "3/3 passed" in index
    groups = re.findall(r'<details class="scenario group" id="(g\d)"( open)?>', html)
    assert groups == [("g0", " open"), ("g1", "")]  # the failing scenario's group is open, the passing one closed
    flaky = html[html.index('id="g0"'):html.index('id="g1"')]
    runs = re.findall(r'<details class="scenario" id="s\d+"( open)?><summary>(<span class="badge [^"]+">[^<]+</span>)', flaky)
    assert [(o, "FAILED" in b) for o, b in runs] == [("", False), (" open", True), ("", True)]  # only run 2 opens


def test_html_report_of_many_failing_runs_opens_one_per_scenario():
    results = [make_result(f"scenario {i}", iteration=it, passed=False, failure_type="max_turns")
               for it in range(1, 11) for i in range(20)]
    html = render_experiment_html(make_doc("exp_many", results, iterations=10))
    assert html.count('<details class="scenario" id="s') == 200
    assert len(re.findall(r'<details class="scenario" id="s\d+" open>', html)) == 20
