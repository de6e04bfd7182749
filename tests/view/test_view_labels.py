"""Review and label in ``fabtest view`` (issue 31 point 4): a mark on a judged check is saved in
``<results>/<id>.labels.yaml``, which ``fabtest calibrate`` reads as it is; the judge's agreement
with the labels is returned; only this server's own pages can post, and nothing is written outside
the results directory."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from view_fixtures import results_dir

from fabtest.judging.calibrate import load_examples
from fabtest.view.catalog import Catalog
from fabtest.view.labels import LabelError, judged_checks, labels_path, read_labels
from fabtest.view.layout import conversation_path
from fabtest.view.server import make_server
from fabtest.view.site import Site


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return results_dir(tmp_path, count=2)


def _run(site: Site, exp: str = "exp_001", name: str = "scenario 1", iteration: int = 1) -> dict:
    row = site.catalog.row(exp)
    assert row is not None
    doc = site.catalog.document(row)
    return next(x for x in doc["scenario_results"] if x["name"] == name and x["iteration"] == iteration)


def test_a_mark_is_saved_in_calibrates_format_and_replaced_when_marked_again(results: Path) -> None:
    site = Site(Catalog(results))
    entry = _run(site)
    checks = judged_checks(entry)
    assert [c["criterion"] for _, c in checks] == ["friendly", "concise"]  # the judged ones
    friendly = checks[0][0]
    answer = site.label({"experiment": "exp_001", "scenario": entry["id"], "iteration": 1, "check": friendly,
                         "verdict": "wrong", "comment": "  too curt  "})
    path = labels_path(results, "exp_001")
    assert path == results / "exp_001.labels.yaml" and path.read_text().startswith("# Labels of experiment exp_001")
    (label,) = read_labels(path)
    assert label["verdict"] == "failed" and label["judge"] == "passed" and label["comment"] == "too curt"  # wrong: the opposite
    assert label["scope"] == "response" and label["user"] == entry["transcript"][0]["user"]
    assert answer["labels"] == 1 and answer["agreement"] == 0.0

    site.label({"experiment": "exp_001", "scenario": entry["id"], "iteration": 1, "check": friendly, "verdict": "right"})
    site.label({"experiment": "exp_001", "scenario": entry["id"], "iteration": 1, "check": checks[1][0], "verdict": "right"})
    labels = read_labels(path)
    assert [(x["criterion"], x["verdict"]) for x in labels] == [("friendly", "passed"), ("concise", "passed")]

    # fabtest calibrate reads the file directly, criteria descriptions included
    examples = load_examples(path, {})
    assert [(x.criterion, x.verdict, x.judge) for x in examples] == [("friendly", "passed", "passed"), ("concise", "passed", "passed")]
    assert examples[0].description == "The agent is warm and polite"
    assert sorted(p.name for p in results.iterdir()) == ["exp_000.json", "exp_001.json", "exp_001.labels.yaml"]


@pytest.mark.parametrize("bad, says", [
    ({"experiment": "../etc", "scenario": "x", "iteration": 1, "check": 0, "verdict": "right"}, "no experiment"),
    ({"experiment": "exp_001", "scenario": "x", "iteration": 1, "check": 0, "verdict": "right"}, "has no run 1"),
    ({"experiment": "exp_001", "iteration": 1, "check": 99, "verdict": "right"}, "not a judged check"),
    ({"experiment": "exp_001", "iteration": 1, "check": 0, "verdict": "maybe"}, "verdict: right|wrong"),
    ({"experiment": "exp_001", "iteration": "1", "check": 0, "verdict": "right"}, "must be numbers"),
])
def test_a_bad_request_is_refused_and_writes_nothing(results: Path, bad: dict, says: str) -> None:
    site = Site(Catalog(results))
    bad = {"scenario": _run(site)["id"], **bad}
    with pytest.raises(LabelError, match=says.replace("|", r"\|")):
        site.label(bad)
    assert not list(results.glob("*.yaml"))
    with pytest.raises(LabelError, match="plain file name"):
        labels_path(results, "../outside")


@pytest.fixture
def served(results: Path) -> Iterator[int]:
    server = make_server(results)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_server_saves_a_label_from_its_own_pages_only(results: Path, served: int) -> None:
    site = Site(Catalog(results))
    entry = _run(site)
    body = {"experiment": "exp_001", "scenario": entry["id"], "iteration": 1, "check": 0, "verdict": "right"}
    own = f"http://127.0.0.1:{served}"
    with httpx.Client(base_url=own, timeout=10) as client:
        assert client.post("/label", json=body, headers={"Origin": "http://evil.example"}).status_code == 403
        assert client.post("/label", json=body, headers={"Host": "evil.example"}).status_code == 403
        form = client.post("/label", content=b"verdict=right", headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert form.status_code == 400  # what a cross-site form could send
        assert client.post("/other", json=body).status_code == 400
        with socket.create_connection(("127.0.0.1", served), timeout=10) as raw:  # a length httpx would not send
            raw.sendall(f"POST /label HTTP/1.1\r\nHost: 127.0.0.1:{served}\r\nContent-Type: application/json\r\n"
                        "Content-Length: many\r\n\r\n{}".encode())
            assert raw.recv(200).startswith(b"HTTP/1.0 400")
        assert not list(results.glob("*.yaml"))
        ok = client.post("/label", json=body, headers={"Origin": own})
        assert ok.status_code == 200 and ok.json()["labels"] == 1 and ok.json()["kappa"] is None  # one class only
        bad = client.post("/label", json={**body, "check": 42})
        assert bad.status_code == 400 and "not a judged check" in bad.json()["error"]
        page = client.get("/" + conversation_path("exp_001", entry["id"], 1)).text
    assert page.count('class="label-form" hidden data-check=') == 2 and page.count('data-kind="conversation"') == 1 and 'id="labeling" hidden data-experiment="exp_001"' in page


def test_kappa_interval_is_cohens_large_sample_interval() -> None:
    from fabtest.judging.agreement import cohen_kappa
    from fabtest.view.review import kappa_interval

    people, judge = ["passed", "passed", "failed", "failed"], ["passed", "failed", "failed", "failed"]
    examples = [{"verdict": p, "judge": j} for p, j in zip(people, judge, strict=True)]
    assert cohen_kappa(people, judge) == pytest.approx(0.5)
    low, high = kappa_interval(examples)
    assert low == pytest.approx(0.5 - 1.96 * (0.75 * 0.25 / (4 * 0.25)) ** 0.5) and high == 1.0  # clipped at 1
    assert kappa_interval(examples[:1]) is None and kappa_interval([{"verdict": "passed", "judge": "passed"}] * 3) is None


def test_the_experiment_page_shows_agreement_and_a_review_queue_split_first(results: Path) -> None:
    from fabtest.view.review import review_queue

    site = Site(Catalog(results))
    html = site.render("exp/exp_001.html").body.decode()
    review = html[html.index('id="review"'):html.index("<h2>Scenarios")]
    assert "No labels yet" in review and "the scenario is flaky" in review  # exp_001: scenario 5 flaked
    assert "scenario 5 · run 1" in review and "scenario 0" not in review

    row = site.catalog.row("exp_001")
    doc = site.catalog.document(row)
    steady = next(x for x in doc["scenario_results"] if x["name"] == "scenario 2" and x["iteration"] == 1)
    steady["evaluations"]["details"][0].update(confidence="low", samples={"passed": 2, "failed": 1})
    queue = review_queue(doc, set())
    assert queue[0][0] == "the judge's samples split (low confidence: 2 passed, 1 failed)" and queue[0][1] is steady
    assert {why for why, *_ in queue[1:]} == {"the scenario is flaky"}

    flaky = next(x for x in doc["scenario_results"] if x["name"] == "scenario 5" and x["iteration"] == 1)
    site.label({"experiment": "exp_001", "scenario": flaky["id"], "iteration": 1, "check": 0, "verdict": "wrong"})
    site.label({"experiment": "exp_001", "scenario": flaky["id"], "iteration": 1, "check": 1, "verdict": "right"})
    html = site.render("exp/exp_001.html").body.decode()
    review = html[html.index('id="review"'):html.index("<h2>Scenarios")]
    assert "2 label(s) in <code>exp_001.labels.yaml</code>: the judge agrees with 50%" in review
    assert "scenario 5 · run 1" not in review  # labelled checks leave the queue


def test_a_whole_conversation_is_labelled_through_the_server_and_shown(results: Path, served: int) -> None:
    """Issue 31 point 4: right / wrong on a whole run's outcome, posted as the page does, saved in
    the same labels file (``kind: conversation``, the transcript, the goal or the expected steps) beside
    the check labels, replaced when marked again, shown on the conversation page and read by calibrate."""
    site = Site(Catalog(results))
    entry = _run(site, name="scenario 1")  # passed (scenarios 0-3 fail from experiment 8 on)
    own = f"http://127.0.0.1:{served}"
    check = {"experiment": "exp_001", "scenario": entry["id"], "iteration": 1, "check": 0, "verdict": "right"}
    whole = {"experiment": "exp_001", "scenario": entry["id"], "iteration": 1, "kind": "conversation",
             "verdict": "wrong", "comment": "it never confirmed the booking"}
    with httpx.Client(base_url=own, timeout=10, headers={"Origin": own}) as client:
        assert client.post("/label", json=check).status_code == 200
        answer = client.post("/label", json=whole)
        assert answer.status_code == 200, answer.text
        assert answer.json()["labels"] == 2 and answer.json()["agreement"] == 0.5  # the check agreed, the run did not
        saved = answer.json()["label"]
        assert saved["kind"] == "conversation" and saved["scope"] == "conversation"
        assert saved["judge"] == "passed" and saved["verdict"] == "failed"  # the run passed; the person says it should not
        assert saved["transcript"][0] == {"user": entry["transcript"][0]["user"], "agent": entry["transcript"][0]["agent"]}
        assert "check" not in saved and saved["criterion"] == "scenario outcome"  # no simulated user in this run
        again = client.post("/label", json={**whole, "verdict": "right", "comment": ""})
        assert again.json()["labels"] == 2  # replaced, not added
        client.post("/label", json={**whole, "comment": "it never confirmed the booking"})
        page = client.get("/" + conversation_path("exp_001", entry["id"], 1)).text
    labels = read_labels(labels_path(results, "exp_001"))
    assert [x.get("kind", "check") for x in labels] == ["check", "conversation"]
    review = site.render("exp/exp_001.html").body.decode()  # the Review panel counts both kinds
    assert "2 label(s) in <code>exp_001.labels.yaml</code> (1 on a whole run" in review
    run_label = page[page.index('id="run-label"'):page.index("</div>", page.index('class="labelled'))]
    assert "This run passed." in run_label and 'data-kind="conversation"' in run_label
    assert "labelled <b>wrong</b> (the person says failed)" in run_label and "never confirmed the booking" in run_label
    examples = load_examples(labels_path(results, "exp_001"), {})
    whole_example = examples[1]
    assert whole_example.kind == "conversation" and whole_example.scope == "conversation"
    assert whole_example.verdict == "failed" and whole_example.description.startswith("The agent does what the scenario")
    assert sorted(p.name for p in results.iterdir()) == ["exp_000.json", "exp_001.json", "exp_001.labels.yaml"]


def test_a_run_with_a_goal_is_labelled_with_it_and_a_skipped_run_cannot_be(results: Path) -> None:
    site = Site(Catalog(results))
    row = site.catalog.row("exp_001")
    entry = dict(_run(site))
    entry["simulator"] = {"goal": "book a loft in Berlin", "persona": "a planner"}
    entry["steps"] = [{"keyword": "Given", "text": "a user"}, {"keyword": "And", "text": "a goal"},
                      {"keyword": "Then", "text": "the goal must be achieved"}]
    from fabtest.view.labels import label_conversation

    head = site.catalog.header(row)
    label = label_conversation(results, head, entry, right=True)
    assert label["goal"] == "book a loft in Berlin" and label["criterion"] == "goal achieved" and "description" not in label
    (example,) = load_examples(labels_path(results, "exp_001"), {})
    assert example.goal == "book a loft in Berlin" and example.description.endswith("book a loft in Berlin")
    entry.pop("simulator")
    label = label_conversation(results, head, entry, right=True)
    assert label["description"].endswith("expects: the goal must be achieved")  # the Then steps, not the Givens
    with pytest.raises(LabelError, match="skipped"):
        label_conversation(results, head, {**entry, "skipped": True}, right=True)
