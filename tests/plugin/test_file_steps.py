"""Files in the conversation (issue 39): the steps that send them, the checks on the files an agent
replies with, and the one-line collection error for a file that cannot be sent."""

from __future__ import annotations

import base64
import json

# a 1x1 PNG: real image bytes, so the type and the hash are those of a real file
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

AGENT = '''
import json
from pathlib import Path
from fabtest import AgentResponse, Attachment


def build(context):
    def reply(messages):
        last = messages[-1]
        seen = [[a.name, a.mime_type, a.size, a.sha256] for a in last.attachments]
        with open(Path(__file__).parent / "log.jsonl", "a") as log:
            log.write(json.dumps({"text": last.content, "files": seen,
                                  "history_files": [len(m.attachments) for m in messages]}) + "\\n")
        if "report" in last.content:
            return AgentResponse(text="here it is", attachments=[
                Attachment.from_bytes(b"Total: 42 EUR", name="report.txt")])
        names = ", ".join(a.name for a in last.attachments) or "nothing"
        return f"I got {names}"

    return reply
'''

FEATURE = '''
Feature: Files
  Scenario: One photo
    When the user sends "files/lamp.png" with "Is this covered?"
    Then the response must match "I got lamp.png"
    And the agent should not reply with a file

  Scenario: Two files and a table
    When the user sends "files/lamp.png" and "files/note.txt" with "Two"
    And the user sends these files with "Again":
      | file           |
      | files/note.txt |
    Then the response must match "I got note.txt"

  Scenario: The agent replies with a file
    When the user says "send the report"
    Then the agent must reply with a file matching "*.txt"
    And the agent should reply with an image
    And the agent's file "*.txt" must contain "Total: 42"
    And the agent's file "report.*" must match "\\d+ EUR"
'''


def _project(project):
    project.pyproject()
    project.agent(AGENT)
    project.write("features/files/note.txt", "a note\n")
    (project.path / "features" / "files" / "lamp.png").write_bytes(PNG)
    project.feature("features/files.feature", FEATURE)


def test_files_reach_the_agent_and_its_files_are_checked(project):
    _project(project)
    result = project.run("features")
    result.assert_outcomes(passed=3)
    log = project.log()
    assert log[0]["text"] == "Is this covered?"
    [[name, mime, size, sha]] = log[0]["files"]
    assert (name, mime, size) == ("lamp.png", "image/png", len(PNG))
    assert [f[0] for f in log[1]["files"]] == ["lamp.png", "note.txt"]
    assert log[2]["history_files"] == [2, 0, 1]  # the earlier message keeps its files in the history
    scenarios = project.scenarios()
    soft = scenarios["The agent replies with a file"]["evaluations"]["details"]
    assert [(d["type"], d["passed"]) for d in soft] == [("reply_file", False)]  # a .txt is not an image
    hard = scenarios["The agent replies with a file"]["expectations"]["details"]
    assert [(d["type"], d["passed"]) for d in hard] == [("reply_file", True), ("file_contain", True),
                                                        ("file_match", True)]
    # the record: name, type, size, sha256 per turn, never the bytes; the bytes once per content
    [turn] = scenarios["One photo"]["transcript"]
    assert turn["user_files"] == [{"name": "lamp.png", "mime_type": "image/png", "size": len(PNG), "sha256": sha}]
    assert "agent_files" not in turn
    [reply] = scenarios["The agent replies with a file"]["transcript"]
    assert [f["name"] for f in reply["agent_files"]] == ["report.txt"] and "user_files" not in reply
    kept = sorted(p.name for p in (project.results_dir / "files").iterdir())
    assert sha in kept and len(kept) == 3  # lamp.png, note.txt and report.txt, each once
    assert (project.results_dir / "files" / sha).read_bytes() == PNG
    assert base64.b64encode(PNG).decode() not in json.dumps(project.experiment())
    _view_shows_them(project.results_dir, sha)


def _view_shows_them(results_dir, sha):
    """fabtest view: a thumbnail linking to the image, a download link for another file, and the
    bytes served (an image as itself, anything else as a download); the static build copies them."""
    from fabtest.view.catalog import Catalog
    from fabtest.view.layout import conversation_path
    from fabtest.view.server import build_site
    from fabtest.view.site import Site

    site = Site(Catalog(results_dir))
    [row] = site.catalog.rows()
    photo = next(x for x in site.catalog.document(row)["scenario_results"] if x["name"] == "One photo")
    html = site.render(conversation_path(row.id, photo["id"], 1)).body.decode()
    assert f'<img class="thumb" src="../../files/{sha}/lamp.png"' in html
    image = site.render(f"files/{sha}/lamp.png")
    assert (image.body, image.content_type) == (PNG, "image/png")
    report = next(x for x in site.catalog.document(row)["scenario_results"] if x["name"].startswith("The agent"))
    txt = report["transcript"][0]["agent_files"][0]["sha256"]
    assert site.render(f"files/{txt}/report.txt").content_type == "application/octet-stream"  # never a page
    out = results_dir.parent / "site"
    build_site(results_dir, out)
    assert (out / "files" / sha / "lamp.png").read_bytes() == PNG


def test_a_missing_file_is_one_line_at_collection_and_nothing_runs(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/files.feature", FEATURE.replace("files/note.txt", "files/nope.txt"))
    (project.path / "features" / "files").mkdir(parents=True)
    (project.path / "features" / "files" / "lamp.png").write_bytes(PNG)
    result = project.run("features")
    out = project.output(result)
    assert result.ret == 2, out
    line = 'features/files.feature:8: the file "files/nope.txt" does not exist'
    assert line in out and "Traceback" not in out
    assert 'step: the user sends "files/lamp.png" and "files/nope.txt" with "Two"' in out
    assert project.log() == []  # never a partial run
