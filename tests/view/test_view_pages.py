"""fabtest view without a browser: the catalog, the pages' content, escaping, the server and the build."""

from __future__ import annotations

import html
import json
import re
import threading
from pathlib import Path

import httpx
import pytest
from view_fixtures import HOSTILE, results_dir

from fabtest.cli import main
from fabtest.view.catalog import Catalog
from fabtest.view.layout import compare_path, conversation_path, experiment_path
from fabtest.view.server import make_server
from fabtest.view.site import Site


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return results_dir(tmp_path_factory.mktemp("view"))


def _text(site: Site, path: str) -> str:
    page = site.render(path)
    assert page is not None, path
    return page.body.decode()


def test_catalog_rows_come_from_the_headers_and_are_reread_when_a_file_changes(results: Path, tmp_path: Path) -> None:
    rows = Catalog(results).rows()
    assert [r.id for r in rows] == [f"exp_{n:03d}" for n in range(12)]
    ninth = rows[8]
    assert (ninth.completion, ninth.criteria["friendly"], ninth.branch) == (0.5, 0.25, "feature/tone")
    assert rows[1].iterations == 2 and rows[1].completion_spread == (0.875, 1.0)  # scenario 5 failed in run 2
    assert rows[0].completion_spread is None and rows[0].cost_usd and rows[0].latency_s == pytest.approx(1.25)

    one = tmp_path / "r"
    one.mkdir()
    (one / "exp_000.json").write_bytes((results / "exp_000.json").read_bytes())
    catalog = Catalog(one)
    assert [r.id for r in catalog.rows()] == ["exp_000"]
    (one / "exp_001.json").write_bytes((results / "exp_001.json").read_bytes())
    (one / "junk.json").write_text("{not json")  # skipped with a warning, as fabtest list does
    assert [r.id for r in catalog.rows()] == ["exp_000", "exp_001"]


def test_trends_mark_the_regression_the_compare_gate_finds_and_link_every_point(results: Path) -> None:
    catalog = Catalog(results)
    rows = catalog.rows()
    assert catalog.regressions(rows[7], rows[8]) == {"completion", "evaluation", "criterion:friendly"}
    assert catalog.regressions(rows[8], rows[9]) == frozenset()
    html = _text(Site(catalog), "trends.html")
    rings = re.findall(r'<a class="point" href="([^"]+)" tabindex="-1" data-series="([^"]+)"><circle[^>]*r="8"', html)
    assert sorted(rings) == [("exp/exp_008.html", "completion"), ("exp/exp_008.html", "friendly")]
    # every experiment has a point per rate series, and a band where iterations gave a spread
    assert html.count('data-series="completion"') == 12
    assert 'class="band"' in html and "spread over 2 iterations" in html
    assert "exp_007 → exp_008" in html and "<title>Criteria pass rate</title>" in html
    commit = _text(Site(catalog), "trends-commit.html")
    assert "08c0ffee" in commit  # x by commit: the short commits label the axis


def test_every_page_escapes_what_the_experiments_hold(results: Path) -> None:
    site = Site(Catalog(results))
    rows = site.catalog.rows()
    sid = site.catalog.scenario_ids(rows[3])[0]
    for path in ("index.html", "compare.html", experiment_path("exp_003"), conversation_path("exp_003", sid, 1),
                 compare_path("exp_002", "exp_003")):
        html = _text(site, path)
        assert "<img src=x" not in html and "<script>window" not in html, path
    conversation = _text(site, conversation_path("exp_003", sid, 1))
    assert "&lt;img src=x onerror=" in conversation and HOSTILE not in conversation


def test_conversation_page_shows_each_turn_with_tools_checks_latency_and_cost(results: Path) -> None:
    site = Site(Catalog(results))
    row = site.catalog.rows()[9]
    entries = site.catalog.document(row)["scenario_results"]
    first = next(e for e in entries if e["name"] == "scenario 0" and e["iteration"] == 1)
    html = _text(site, conversation_path(row.id, first["id"], 1))
    turn1 = html[html.index('id="turn-1"'):html.index('id="turn-2"')]
    assert "search_venues" in turn1 and "agent 1.15s" in turn1  # 0.25 + 9/10
    assert "agent tokens 1000 in / 100 out · $" in turn1  # priced with the experiment's table
    assert "<b>friendly</b>" in turn1 and "friendly passed" in turn1  # the check on this turn with its reasoning
    assert "max_turns: expectation failed at turn 3" in html
    assert site.render(conversation_path(row.id, first["id"], 5)) is None


def test_comparison_page_has_the_gate_the_diff_and_the_changed_conversations(results: Path) -> None:
    html = _text(Site(Catalog(results)), compare_path("exp_007", "exp_008"))
    gate = html[html.index('id="gate"'):]
    assert "FAIL completion: 15/16 → 8/16 runs passed" in gate and "FAIL criterion &#x27;friendly&#x27;: 15/16 → 4/16" in gate
    assert "UNDECIDED criterion &#x27;concise&#x27;" in gate and "gate FAILED (exit 1)" in gate  # a line for every metric
    assert "Conversation diffs" in html and 'id="changed"' in html
    # the page opens with the one verdict line (issue 28), before the gate's lines and the metrics
    verdict = html[html.index('id="verdict"'):html.index('id="gate"')]
    assert "worse: criterion &#x27;friendly&#x27; 15/16 → 4/16 (-69 pp" in verdict and html.index('id="verdict"') < html.index("Completion rate")
    steady = _text(Site(Catalog(results)), compare_path("exp_009", "exp_010"))
    assert "gate UNDECIDED (exit 3)" in steady and "undecided: about" in steady and "PASSED" not in steady


def test_server_serves_pages_and_404s_on_loopback(results: Path) -> None:
    server = make_server(results)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            index = client.get("/")
            assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
            assert index.text.count('class="exp"') == 12
            assert client.get("/assets/view.js").headers["content-type"].startswith("text/javascript")
            assert client.get("/exp/nope.html").status_code == 404
            assert client.get(f"/{compare_path('exp_000', 'exp_011')}").status_code == 200  # any pair when served
    finally:
        server.shutdown()
        server.server_close()


def test_build_writes_a_static_site_with_relative_links_only(results: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "site"
    assert main(["view", str(results), "--build", str(out)]) == 0
    assert "files written to" in capsys.readouterr().out
    pages = list(out.rglob("*.html"))
    assert (out / "index.html").is_file() and (out / "assets" / "view.css").is_file()
    assert (out / compare_path("exp_010", "exp_011")).is_file() and not (out / compare_path("exp_000", "exp_011")).exists()
    for page in pages:
        text = page.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://ai.google.dev" not in text[:200]
        for href in re.findall(r'(?:href|src)="([^"#]+)"', text):
            if href.startswith("https://"):
                continue
            assert (page.parent / href).resolve().is_file(), f"{page}: broken link {href}"


def test_view_of_a_missing_directory_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["view", str(tmp_path / "none"), "--no-open"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no such directory" in err and len(err.splitlines()) == 1


def test_trends_of_one_branch_link_back_to_every_branch(results: Path) -> None:
    site = Site(Catalog(results))
    html = _text(site, "trends/feature_tone.html")
    assert "Trends over 3 experiments on feature/tone" in html  # experiments 0, 4 and 8
    assert html.count('data-series="completion"') == 3 and 'href="../exp/exp_008.html"' in html
    assert 'href="../trends.html">all</a>' in html and 'href="../trends-commit/feature_tone.html">commit</a>' in html
    assert site.render("trends/nope.html") is None


def test_shard_parts_are_listed_but_left_out_of_the_trends(results: Path, tmp_path: Path) -> None:
    import json

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for n in (0, 1):
        (mixed / f"exp_00{n}.json").write_bytes((results / f"exp_00{n}.json").read_bytes())
    part = (results / "exp_002.json").read_text().replace('"id": "exp_002"', '"id": "exp_002_part1"', 1)
    head = json.loads("{" + part.splitlines()[2].rstrip(",") + "}")["experiment"]
    part = part.replace(json.dumps(head, ensure_ascii=False), json.dumps({**head, "shard": "1/2"}, ensure_ascii=False), 1)
    (mixed / "exp_002_part1.json").write_text(part)
    site = Site(Catalog(mixed))
    assert [r.shard for r in site.catalog.rows()] == [None, None, "1/2"]
    assert "(shard 1/2)" in _text(site, "index.html")
    trends = _text(site, "trends.html")
    assert "Trends over 2 experiments" in trends and "exp_002_part1" not in trends


def test_chart_axes_label_each_date_and_each_y_value_once() -> None:
    """Issue 31: trend axes repeated one date label (several experiments a day) and y ticks the
    format rounds alike ($0.00 four times)."""
    from fabtest.experiment.fmt import usd
    from fabtest.view.chart import Point, Series, line_chart

    points = [Point(float(i), 0.001 * i, f"exp/e{i}.html", "tip") for i in range(6)]
    ticks = [(float(i), "2026-11-27" if i < 4 else "2026-11-28") for i in range(6)]
    svg = line_chart([Series("cost", points)], "Cost", ticks, lambda v: f"${v:.2f}" if v < 0.01 else usd(v))
    assert svg.count(">2026-11-27</text>") == 1 and svg.count(">2026-11-28</text>") == 1
    ylabels = re.findall(r'dominant-baseline="middle" fill="#5c656d">([^<]+)</text>', svg)
    assert len(ylabels) == len(set(ylabels)) and "$0.00" in ylabels


def _unpack(path: Path) -> dict:
    from fabtest.view.packs import unpack_script

    return unpack_script(path.read_text(encoding="utf-8"))


def test_a_pack_holds_7_bits_per_ascii_character() -> None:
    """Issue 31 point 5: a pack's gzip as a string of ASCII characters carrying 7 bits each (8/7 of
    its size where base64 takes 4/3): every byte value survives, at every length, and the string
    is valid in a JS or JSON string literal once its quote, backslash, line breaks and NUL are moved
    up by 128 (two bytes of UTF-8, as an escape)."""
    import os

    from fabtest.view.packs import ascii7, pack_script, unpack_script

    for n in range(0, 40):
        data = os.urandom(n) + bytes(range(256))
        text = ascii7(data)
        assert len(text) == -(-len(data) * 8 // 7) and all(ord(c) < 128 for c in text)
    payload = {"run": "every byte " + "".join(map(chr, range(1, 300))), "n": [1, 2.5, None]}
    script = pack_script("runs:x", payload)
    assert unpack_script(script.decode("utf-8")) == payload
    big = {str(i): os.urandom(64).hex() for i in range(300)}  # incompressible: the encoding shows
    import base64
    import gzip

    b64 = len(base64.b64encode(gzip.compress(json.dumps(big, separators=(",", ":")).encode(), 9)))
    assert len(pack_script("k", big)) < b64 * 0.94


def test_a_static_build_packs_each_experiments_conversations_into_one_script(results: Path, tmp_path: Path) -> None:
    """Issue 31 point 5: no file per conversation; ``exp/<id>/runs.js`` holds every run's page
    (title, header, body) and searchable text, shown by ``exp/<id>/conversation.html#<run>``; every
    link, packed ones included, resolves inside the build."""
    from fabtest.view.packs import run_key, search_text
    from fabtest.view.server import build_site

    out = tmp_path / "site"
    build_site(results, out)
    assert not list(out.glob("exp/*/*-r*.html"))  # 12 experiments × up to 16 runs: no page each
    site = Site(Catalog(results))
    row = site.catalog.row("exp_009")
    doc = site.catalog.document(row)
    packed = _unpack(out / "exp" / "exp_009" / "runs.js")
    assert set(packed) == {run_key(x["id"], x["iteration"]) for x in doc["scenario_results"]}
    entry = doc["scenario_results"][0]
    title, header, body, text = packed[run_key(entry["id"], entry["iteration"])]
    served = _text(site, conversation_path("exp_009", entry["id"], entry["iteration"]))
    assert title in served and text == search_text(entry)
    for turn in entry["transcript"]:  # the same escaped conversation as the served page
        assert html.escape(turn["agent"]) in body and html.escape(turn["agent"]) in served
    assert 'class="label-form"' not in body  # a static build cannot save a label
    shell = out / "exp" / "exp_009" / "conversation.html"
    for href in re.findall(r'href="([^"]+)"', header + body):
        target, _, run = href.partition("#")
        assert (shell.parent / target).resolve().is_file(), href
        if run:  # a conversation: in the pack of its experiment
            assert run in _unpack((shell.parent / target).resolve().parent / "runs.js"), href
    experiment = (out / "exp" / "exp_009.html").read_text()
    assert f'href="../exp/exp_009/conversation.html#{run_key(entry["id"], 1)}"' in experiment
