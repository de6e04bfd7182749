"""Issue 44, point 6: undecided still says what moved, first, and every surface shares one order.

On main an undecided gate opened with "about N more runs per side would decide ...": nothing said
which scenario had moved. Now the verdict names the largest move, a "What moved" section follows
it on every surface (console, Markdown, JSON, HTML, ``fabtest view``), and the console, Markdown
and view lay their sections out in the one order of ``compare.sections.SECTIONS``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.experiments import make_doc, make_result

from fabtest.cli import compare_main
from fabtest.compare.sections import SECTIONS, ordered
from fabtest.experiment.export import write_document

ITERATIONS = 10


def _runs(fail_add_to_cart: int) -> list:
    """Checkout fails its ``call add_to_cart`` check in its first ``fail_add_to_cart`` runs; Search steady."""
    out = []
    for i in range(ITERATIONS):
        bad = i < fail_add_to_cart
        out.append(make_result("Checkout", iteration=i + 1, passed=not bad, evals=[],
                               expects=[("call add_to_cart", "failed" if bad else "passed")]))
        out.append(make_result("Search", iteration=i + 1, evals=[], expects=[("call search_venues", "passed")]))
    return out


@pytest.fixture
def args(tmp_path: Path) -> list[str]:
    for exp_id, failing in (("exp_base01", 0), ("exp_curr01", 2)):
        write_document(make_doc(exp_id, _runs(failing), iterations=ITERATIONS), tmp_path)
    return ["exp_base01", "exp_curr01", "--results-dir", str(tmp_path), "--fail-on-regression"]


MOVED = "Checkout: 2/10 runs fail 'call add_to_cart' now (was 0/10)"


def test_undecided_says_what_moved_first_then_what_would_decide(args, capsys) -> None:
    assert compare_main([*args, "--format", "json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert list(data)[:3] == ["verdict", "moved", "moved_total"]
    assert data["verdict"].startswith(f"undecided: {MOVED}; ")  # main: "undecided: about 28 more runs ..."
    assert "would decide" in data["verdict"]
    assert [m["line"] for m in data["moved"]] == [MOVED, "Checkout: 2/10 runs fail now (was 0/10)"]


def _positions(text: str, markers: dict[str, str]) -> list[str]:
    found = {name: text.index(marker) for name, marker in markers.items() if marker in text}
    assert len(found) >= 5, (found, text[:2000])
    return sorted(found, key=found.__getitem__)


def _in_sections_order(names: list[str]) -> bool:
    return names == [s for s in SECTIONS if s in names]


def test_console_markdown_html_and_view_share_one_order(args, capsys, tmp_path: Path) -> None:
    assert compare_main(args) == 3
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith(f"Verdict: undecided: {MOVED}")
    assert _in_sections_order(_positions(text, {
        "verdict": "Verdict:", "moved": "What moved", "changes": "Scenario Changes", "comparability": "Comparability",
        "metrics": "Completion (Hard", "checks": "Checks (deterministic)", "variance": "Comparison (with variance)"}))

    assert compare_main([*args, "--format", "markdown"]) == 3
    md = capsys.readouterr().out
    assert _in_sections_order(_positions(md, {
        "verdict": "**Verdict:", "moved": "### What moved", "changes": "### Newly failing", "gate": "### Gate:",
        "comparability": "**Comparison validity", "metrics": "| Metric (shared", "checks": "### Checks",
        "variance": "### Variance"}))
    assert f"- {MOVED}" in md

    html_path = tmp_path / "cmp.html"
    assert compare_main([*args, "--html", str(html_path)]) == 3
    capsys.readouterr()
    html = html_path.read_text()
    html_markers = {"verdict": 'id="verdict"', "moved": 'id="moved"', "changes": "<h2>Scenario changes",
                    "comparability": "<h2>Comparability", "metrics": "Metrics (shared", "checks": "<h2>Checks",
                    "variance": "<h2>Variance"}
    assert _in_sections_order(_positions(html, html_markers))
    assert "Checkout: 2/10 runs fail &#x27;call add_to_cart&#x27; now (was 0/10)" in html

    sys.path.insert(0, str(Path(__file__).parents[1] / "view"))
    from fabtest.view.catalog import Catalog
    from fabtest.view.layout import compare_path
    from fabtest.view.site import Site

    page = Site(Catalog(tmp_path)).render(compare_path("exp_base01", "exp_curr01"))
    assert page is not None
    view = page.body.decode()
    assert _in_sections_order(_positions(view, {**html_markers, "changes": 'id="what-changed"', "gate": 'id="gate"'}))


def test_a_section_outside_the_list_is_refused() -> None:
    with pytest.raises(ValueError, match="not in SECTIONS"):
        ordered({"verdict": ["x"], "summary": ["y"]})
