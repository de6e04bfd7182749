"""``fabtest view`` over production scores: marked as such, charted beside the test runs (each line
compared with its own kind), and a logged conversation linked to the regression scenario imported
from it once that scenario has run."""

from __future__ import annotations

import json
from pathlib import Path

from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.model import ExperimentInfo, ScenarioResult, TurnRecord
from fabtest.experiment.stable_id import stable_id
from fabtest.view.catalog import Catalog
from fabtest.view.layout import conversation_path, scenario_slug
from fabtest.view.site import Site

SCENARIO = "example:0000000000aa"


def _experiment(results: Path, exp_id: str, stamp: str, *, production: bool, passed: bool,
                scenario: str = SCENARIO, name: str = "Safe") -> None:
    run = ScenarioResult(id=scenario, name=name, passed=passed,
                         transcript=[TurnRecord(number=1, user="hi", agent="yo")],
                         production={"conversation": "conv-91bc", "timestamp": "2026-01-01T07:05:00Z",
                                     "source": "logs/otlp.jsonl:3", "format": "otlp"} if production else None)
    info = ExperimentInfo(id=exp_id, timestamp=stamp, source="production" if production else None,
                          tags=["production"] if production else [])
    write_document(build_document(info, [run]), results)


def _text(site: Site, path: str) -> str:
    page = site.render(path)
    assert page is not None, path
    return page.body.decode()


def test_production_scores_are_marked_charted_apart_and_linked_to_their_regression(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _experiment(results, "tests1", "2026-01-01T00:00:00Z", production=False, passed=True)
    _experiment(results, "prod1", "2026-01-02T00:00:00Z", production=True, passed=True)
    _experiment(results, "prod2", "2026-01-03T00:00:00Z", production=True, passed=False)
    site = Site(Catalog(results))
    index = _text(site, "index.html")
    assert index.count('<span class="badge b-skip">production</span>') == 2
    assert "vs prod1" in index and "vs tests1" not in index  # a score is compared with the score before it
    trends = _text(site, "trends.html")
    assert "completion (production)" in trends and "evaluation (production)" in trends
    assert trends.count("completion (production)") < trends.count("completion")  # the test runs' line too
    page = _text(site, conversation_path("prod2", scenario_slug(SCENARIO), 1))
    assert "Logged conversation conv-91bc" in page and "logs/otlp.jsonl:3" in page and "regression" not in page

    name = "conv-91bc: Please close my account"
    imported = stable_id(name, None, name)
    (results / "production").mkdir()
    (results / "production" / "imported.jsonl").write_text(json.dumps(
        {"conversation": "conv-91bc", "feature": "features/imported/0001_conv_91bc.feature", "hash": "h",
         "scenario_id": imported}) + "\n")
    page = _text(site, conversation_path("prod2", scenario_slug(SCENARIO), 1))
    assert "imported as <code>features/imported/0001_conv_91bc.feature</code>, not run yet" in page
    _experiment(results, "tests2", "2026-01-04T00:00:00Z", production=False, passed=True, scenario=imported, name=name)
    page = _text(site, conversation_path("prod2", scenario_slug(SCENARIO), 1))
    assert conversation_path("tests2", scenario_slug(imported), 1) in page and "its regression scenario" in page
