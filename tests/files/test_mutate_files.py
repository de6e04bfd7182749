"""``fabtest mutate`` and ``fabtest rejudge`` (and its ``--perturb`` audit) show the judge the conversation's files (issue 39):
the mutants, the control and the re-judged checks are judged on the recorded turns with their
files read back from results/files, each inline up to ``judge_max_file_bytes`` as a run shows
them, through the real google-genai client against FakeGemini."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.conversation import AgentResponse, Attachment, Conversation, Turn
from fabtest.experiment import file_store
from fabtest.experiment.model import CheckRecord, ExperimentInfo, ScenarioResult, turn_records
from fabtest.experiment.spool import write_experiment
from fabtest.testing import FakeGemini

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
LAMP = Attachment.from_bytes(PNG, name="lamp.png")


def _passed(request: Any) -> dict[str, Any]:
    names = [line.split("name: ", 1)[1].strip() for line in request.text.splitlines() if ". name: " in line]
    return {"verdicts": [{"criterion": n, "verdict": "passed", "reasoning": "scripted"} for n in names]}


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str = "") -> Path:
    """A recorded experiment exp_f whose one turn sent the photo, its bytes kept in results/files."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.fabtest]\nresults_dir = "results"\n{limit}\n'
                                             "[tool.fabtest.judge]\nmax_retries = 0\ntimeout = 5\n")
    conversation = Conversation(turns=[Turn(1, "Is this lamp covered?",
                                            AgentResponse("Yes, the lamp is covered. The excess is 50 euros."),
                                            attachments=(LAMP,))])
    check = CheckRecord(type="satisfy", mode="should", criterion="The reply is about the photographed lamp",
                        status="passed", turn=1, data={"scope": "response"})
    result = ScenarioResult(id="claims:1", name="Lamp", feature="Claims", passed=True,
                            transcript=turn_records(conversation), evaluations=[check])
    results = tmp_path / "results"
    file_store.keep(results, [LAMP])
    write_experiment(ExperimentInfo(id="exp_f", timestamp="2026-01-01T00:00:00Z"), [result], results)
    monkeypatch.chdir(tmp_path)
    return results


def _judged(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> list[Any]:
    """The judge requests ``fabtest <argv>`` made."""
    with FakeGemini(handler=_passed) as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        assert main(argv) == 0
        requests = list(fake.requests)
    capsys.readouterr()
    return requests


def test_mutants_and_control_are_judged_with_the_runs_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    results = _project(tmp_path, monkeypatch)
    requests = _judged(["mutate", "exp_f", "--yes", "--control", "1"], monkeypatch, capsys)
    doc = json.loads((results / "exp_f.mutants.json").read_text())
    assert doc["mutants"] and doc["control"]["rejudged"] == 1  # the mutants, then the unmutated run once
    assert len(requests) == doc["judge"]["calls"] == len([m for m in doc["mutants"] if m["exposed"]]) + 1
    for request in requests:  # every judge call got the photo inline, right after the line naming it
        parts = request.contents[0]["parts"]
        assert parts[0]["text"].endswith('turn 1 user file: "lamp.png" image/png 70 B [attached: file 1]\n')
        assert base64.b64decode(parts[1]["inlineData"]["data"]) == PNG


@pytest.mark.parametrize("command", [["mutate", "exp_f", "--yes", "--control", "0"],
                                     ["rejudge", "exp_f", "--times", "1"], ["rejudge", "exp_f", "--perturb"]])
def test_a_file_over_the_judges_limit_is_described_as_in_a_run(command: list[str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    results = _project(tmp_path, monkeypatch, "judge_max_file_bytes = 50")
    requests = _judged(command, monkeypatch, capsys)
    # every request that shows the user's turn (the audit's "reply alone" variant does not) names the
    # photo, 70 B over a 50 B limit: named, typed and sized, not sent
    showing = [r for r in requests if "Is this lamp covered?" in r.text]
    assert showing and len(showing) >= len(requests) - 1
    for request in requests:
        assert [list(p) for p in request.contents[0]["parts"]] == [["text"]]
    for request in showing:
        assert '"lamp.png" image/png 70 B [not attached: over the judge\'s limit of 50 B' in request.text
    if "--times" in command:  # the re-judged experiment records the limit its judge had
        [new] = [p for p in results.glob("*.json") if p.name != "exp_f.json"]
        assert json.loads(new.read_text())["experiment"]["judge"]["settings"]["max_file_bytes"] == 50
