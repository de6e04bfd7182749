"""fabtest view of one ``fabtest ab``: its two arms marked as a pair, their comparison led by the A/B decision."""

from __future__ import annotations

from pathlib import Path

from support.experiments import make_doc, make_result

from fabtest.cli import main
from fabtest.experiment.export import write_document
from fabtest.view.catalog import Catalog
from fabtest.view.layout import compare_path
from fabtest.view.site import Site

VERDICT = "undecided: Checkout: 2/10 runs fail add_to_cart now (was 0/10)"


def _results(root: Path) -> Path:
    """Two arms of one fabtest ab (with an unrelated experiment between them, so the pair is not the
    list's "previous"), and a third arm-like experiment whose other arm is missing."""
    out = root / "results"
    arms = {"ab_base": ("baseline", "ab_cur", "origin/main"), "ab_cur": ("current", "ab_base", "."),
            "ab_lone": ("current", "ab_gone", ".")}
    for n, exp_id in enumerate(["ab_base", "plain", "ab_cur", "ab_lone"]):
        results = [make_result(f"scenario {i}", iteration=it, passed=not (exp_id == "ab_cur" and i == 0 and it < 3))
                   for it in range(1, 6) for i in range(3)]
        extra = {}
        if exp_id in arms:
            arm, other, ref = arms[exp_id]
            extra["ab"] = {"arm": arm, "ref": ref, "commit": f"{n}abc1234def", "dirty": arm == "current",
                           "other": other, "outcome": "undecided", "verdict": VERDICT,
                           "stopped": "the budget cannot decide: completion would stay undecided", "rounds": 4}
        write_document(make_doc(exp_id, results, timestamp=f"2026-11-0{n + 1}T10:00:00Z", git_branch="main", **extra),
                       out)
    return out


def _text(site: Site, path: str) -> str:
    page = site.render(path)
    assert page is not None, path
    return page.body.decode()


def test_the_list_marks_both_arms_as_one_pair_and_links_their_decision(tmp_path: Path) -> None:
    site = Site(Catalog(_results(tmp_path)))
    index = _text(site, "index.html")
    rows = {r.split('"', 1)[0]: r for r in index.split('data-id="')[1:]}
    link = f'href="{compare_path("ab_base", "ab_cur")}">A/B decision: undecided'
    assert "A/B baseline origin/main" in rows["ab_base"] and link in rows["ab_base"]
    assert "A/B current ." in rows["ab_cur"] and link in rows["ab_cur"]
    assert "A/B" not in rows["plain"] and "A/B" not in rows["ab_lone"]  # its other arm is not there: no pair


def test_the_pairs_comparison_leads_with_the_ab_decision(tmp_path: Path) -> None:
    site = Site(Catalog(_results(tmp_path)))
    page = _text(site, compare_path("ab_base", "ab_cur"))
    panel = page[page.index('id="ab-decision"'):page.index('id="verdict"')]  # before the fixed gate's verdict
    assert "Checkout: 2/10 runs fail add_to_cart now (was 0/10)" in panel
    assert "Stopped: the budget cannot decide" in panel and "Rounds: 4" in panel
    assert "Runs: baseline 15, current 15" in panel and "origin/main" in panel and "2abc1234*" in panel
    # two experiments that are not one fabtest ab's arms (or the arms the wrong way round) get no A/B panel
    assert 'id="ab-decision"' not in _text(site, compare_path("plain", "ab_cur"))
    assert 'id="ab-decision"' not in _text(site, compare_path("ab_cur", "ab_base"))


def test_a_static_build_has_the_ab_pairs_comparison(tmp_path: Path, capsys) -> None:
    out = tmp_path / "site"
    assert main(["view", str(_results(tmp_path)), "--build", str(out)]) == 0
    capsys.readouterr()
    built = out / compare_path("ab_base", "ab_cur")
    assert built.is_file() and 'id="ab-decision"' in built.read_text()
    assert f'href="{compare_path("ab_base", "ab_cur")}"' in (out / "index.html").read_text()
