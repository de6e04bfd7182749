"""Issue 38, 3 and 2: review labels are never lost or leaked. Two writers on one labels file (two
``fabtest view`` servers) keep every label; a file of another shape is refused, never replaced; a
hand-written criterion and the file's own comment stay; NEL / LS / PS in a comment read back as
written; a secret in the labelled text reaches neither the file nor the POST /label answer."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from view_fixtures import results_dir

from fabtest._internal import redaction
from fabtest.judging.calibrate import load_examples
from fabtest.view.catalog import Catalog
from fabtest.view.labels import LabelError, label_check, labels_path, read_labels
from fabtest.view.packs import unpack_script
from fabtest.view.server import make_server
from fabtest.view.site import Site

HEAD = {"experiment": {"id": "exp_many"}, "configuration": {"criteria": {"c0": "The reply is warm"}}}
CHECKS = 12


def _entry(agent: str = "Hello!") -> dict[str, Any]:
    """One run with ``2 * CHECKS`` judged checks (the labels two writers add at once)."""
    evaluations = [{"type": "satisfy", "criterion": f"c{i}", "status": "passed", "turn": 1} for i in range(2 * CHECKS)]
    return {"id": "sc", "iteration": 1, "evaluations": evaluations,
            "transcript": [{"number": 1, "user": "hi", "agent": agent}]}


WRITER = """
import json, sys
from pathlib import Path
from fabtest.view.labels import label_check
results, head, entry, first, count = json.loads(sys.argv[1])
sys.stdin.read()  # both writers start together
for check in range(first, first + count):
    label_check(Path(results), head, entry, check, right=True)
"""


def test_two_writers_at_once_keep_every_label(tmp_path: Path) -> None:
    """Two processes (two servers) each answered 12 marks: all 24 are in the file (the issue saw 16 of 40 lost)."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, json.dumps([str(tmp_path), HEAD, _entry(), first,
                                                                           CHECKS])], stdin=subprocess.PIPE)
               for first in (0, CHECKS)]
    for w in writers:
        assert w.stdin is not None
        w.stdin.close()
    assert [w.wait(60) for w in writers] == [0, 0]
    labels = read_labels(labels_path(tmp_path, "exp_many"))
    assert sorted(x["check"] for x in labels) == list(range(2 * CHECKS))


@pytest.mark.parametrize("text, says", [
    ("- criterion: a\n  verdict: passed\n", "it holds a list"),
    ("examples:\n  first: {criterion: a, verdict: passed}\n", "'examples:' is a mapping"),
    ("just some notes\n", "it holds a scalar"),
    ("examples:\n  - not a label\n", "an entry of 'examples:' is not a mapping"),
    ("criteria: [a, b]\nexamples: []\n", "'criteria:' is a list"),
    ("examples: [\n", "invalid YAML"),
])
def test_a_labels_file_of_another_shape_is_refused_and_left_as_it_is(tmp_path: Path, text: str, says: str) -> None:
    path = labels_path(tmp_path, "exp_many")
    path.write_text(text)
    with pytest.raises(LabelError, match=says) as raised:
        label_check(tmp_path, HEAD, _entry(), 0, right=True)
    assert path.read_text() == text and "\n" not in str(raised.value)


def test_a_click_keeps_hand_written_criteria_comments_and_line_separators(tmp_path: Path) -> None:
    """One click dropped a hand-written criterion's description (calibrate then refused the file);
    the comment's NEL / LS / PS came back as spaces."""
    path = labels_path(tmp_path, "exp_many")
    path.write_text("# my calibration set\x85\ncriteria:\n  tone: The agent stays calm\nexamples:\n"
                    "  - {criterion: tone, response: 'Calm down.', verdict: failed}\n")
    odd = "first\x85second\u2028third\u2029fourth\rfifth"
    label_check(tmp_path, HEAD, _entry(), 0, right=False, comment=odd)
    text = path.read_text()
    assert text.startswith("# my calibration set\x85\n")
    tone, mine = read_labels(path)
    assert tone["criterion"] == "tone" and mine["comment"] == odd
    examples = load_examples(path, {})  # what fabtest calibrate reads
    assert [(x.criterion, x.description) for x in examples] == [("tone", "The agent stays calm"),
                                                                 ("c0", "The reply is warm")]


@pytest.fixture
def key() -> Iterator[str]:
    redaction.register("sk-view-0123456789")
    yield "sk-view-0123456789"
    redaction.clear()


def test_a_secret_in_the_labelled_text_reaches_neither_the_file_nor_the_answer(tmp_path: Path, key: str) -> None:
    results = results_dir(tmp_path, count=1)
    site = Site(Catalog(results))
    doc = site.catalog.document(site.catalog.row("exp_000"))
    entry = next(x for x in doc["scenario_results"] if x["name"] == "scenario 1")
    entry["transcript"][0]["agent"] = f"your key is {key}"  # a file written before the key was registered
    path = labels_path(results, "exp_000")
    label = label_check(results, doc, entry, 0, right=True, comment=f"it leaked {key}")
    assert key not in str(label) and key not in path.read_text() and "***" in path.read_text()

    server = make_server(results)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}", timeout=10) as client:
            answer = client.post("/label", json={"experiment": "exp_000", "scenario": entry["id"], "iteration": 1,
                                                 "check": 0, "verdict": "wrong", "comment": f"see {key}"})
            deep = client.post("/label", content=b"[" * 60000, headers={"Content-Type": "application/json"})
    finally:
        server.shutdown()
        server.server_close()
    assert answer.status_code == 200 and key not in answer.text and "***" in answer.text
    assert key not in path.read_text()
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]  # issue 38, 4: no dropped connection


def test_the_view_command_masks_the_projects_var_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``fabtest view`` registers the ``${VAR}`` values of [tool.fabtest]'s agent tables, as a run does:
    before, only the LLM keys were masked in what it serves and builds."""
    from fabtest.cli import main

    token = "tok-view-0123456789"
    results = results_dir(tmp_path, count=1)
    path = results / "exp_000.json"
    path.write_text(path.read_text().replace("reply of experiment 0", f"reply of experiment 0 {token}"))
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest.agents.remote]\ntype = "http"\n'
                                             'url = "http://127.0.0.1:9/chat?token=${VIEW_TOKEN}"\n')
    monkeypatch.setenv("VIEW_TOKEN", token)
    monkeypatch.chdir(tmp_path)
    try:
        assert main(["view", str(results), "--build", str(tmp_path / "site")]) == 0
    finally:
        redaction.clear()
    pages = [p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()]
    assert not any(token.encode() in page for page in pages)
    runs = json.dumps(unpack_script((tmp_path / "site" / "exp" / "exp_000" / "runs.js").read_text()))
    assert token not in runs and "reply of experiment 0 ***" in runs  # inside the gzipped pack too


def test_a_broken_labels_file_takes_no_page_down(tmp_path: Path) -> None:
    """An invalid labels file made `fabtest view --build` end in a traceback and every served page of
    the experiment a 500; now they show no labels, and a click says what is wrong (above)."""
    from fabtest.view.server import build_site

    results = results_dir(tmp_path, count=1)
    labels_path(results, "exp_000").write_text("examples: [\n")
    assert build_site(results, tmp_path / "site") > 0
    assert (tmp_path / "site" / "exp" / "exp_000.html").exists()
