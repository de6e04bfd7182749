"""``fabtest import LOGS --all --out DIR``: every logged conversation becomes a scripted feature (personal
data masked, duplicates once, failing ones first) that collects and runs green with pytest against an
agent that answers as the logs say."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fabtest._internal.redaction import PersonalData
from fabtest.cli import main
from fabtest.production.logs import read_logs
from fabtest.production.selection import masked

FIXTURES = Path(__file__).parent.parent / "fixtures" / "production"

AGENT = '''
import json, os
from fabtest import AgentResponse, ToolCall

def build(context):
    replies = json.load(open(os.environ["LOGGED_REPLIES"]))
    def chat(messages):
        reply = replies[[m.content for m in messages if m.role == "user"][-1]]
        return AgentResponse(text=reply["text"], tool_calls=[ToolCall(c[0], c[1]) for c in reply["calls"]])
    return chat
'''


def test_every_conversation_becomes_a_feature_that_runs_green(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "logged:build"\nresults_dir = "results"\n')
    pytester.makepyfile(logged=AGENT)
    shutil.copytree(FIXTURES, pytester.path / "logs")
    replies = {t.user: {"text": t.agent, "calls": [[c.name, c.arguments] for c in t.tool_calls]}
               for c in read_logs([str(FIXTURES)]) for t in masked(c, PersonalData()).turns}
    (pytester.path / "replies.json").write_text(json.dumps(replies))
    monkeypatch.setenv("LOGGED_REPLIES", str(pytester.path / "replies.json"))
    monkeypatch.chdir(pytester.path)
    (pytester.path / "results").mkdir()
    (pytester.path / "results" / "week.json").write_text(json.dumps(_scored_with_failure()))
    code = main(["import", "logs", "--all", "--out", "features/imported", "--failing-in", "week"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "8 imported before" not in out
    written = sorted((pytester.path / "features" / "imported").glob("*.feature"))
    assert len(written) == 8 and "1 word-for-word duplicate(s) left out" in out  # chat-003 repeats chat-001
    assert written[0].name == "0001_conv_91bc.feature" and "(failed in production)" in out
    text = "\n".join(p.read_text() for p in written)
    assert "anna.meyer@example.com" not in text and "[email]" in text
    assert 'Then the agent must call "delete_account" with:' in written[0].read_text()
    index = (pytester.path / "results" / "production" / "imported.jsonl").read_text()
    assert '"conversation": "conv-91bc"' in index
    result = pytester.runpytest("features/imported", "-p", "no:randomly", "--fabtest-no-preflight")
    result.assert_outcomes(passed=8)
    ran = {r["id"] for path in (pytester.path / "results").glob("exp_*.json")
           for r in json.loads(path.read_text())["scenario_results"]}
    assert {json.loads(line)["scenario_id"] for line in index.splitlines()} == ran  # fabtest view links them
    again = main(["import", "logs", "--all", "--out", "features/imported"])
    assert again == 0 and "0 feature(s) written" in capsys.readouterr()[0]
    assert len(list((pytester.path / "features" / "imported").glob("*.feature"))) == 8


def _scored_with_failure() -> dict:
    """A fabtest score experiment in which conv-91bc failed (built as the writer builds any)."""
    from fabtest.experiment.export import build_document
    from fabtest.experiment.model import ExperimentInfo, ScenarioResult

    runs = [ScenarioResult(id="example:000000000009", name="Safe", iteration=i, passed=conv != "conv-91bc",
                           production={"conversation": conv}) for i, conv in enumerate(["chat-001", "conv-91bc"], 1)]
    return build_document(ExperimentInfo(id="week", timestamp="2026-01-05T00:00:00Z", source="production"), runs)


def test_pytest_skips_production_scenarios(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject='[tool.fabtest]\nagent = "bot:build"\n')
    pytester.makepyfile(bot="def build(context):\n    return lambda messages: 'hi'\n")
    pytester.makefile(".feature", live='@production\nFeature: Live\n  Scenario: Judged on logs\n'
                                       '    Then the conversation must not include a call to "delete_account"\n')
    result = pytester.runpytest("-p", "no:randomly", "--fabtest-no-preflight", "-rs")
    result.assert_outcomes(skipped=1)
    assert "judged on logged conversations by fabtest score" in result.stdout.str()


def test_importing_one_log_file_points_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(FIXTURES / "mlflow_traces.json")]) == 2
    assert "it reads as mlflow logs: fabtest import" in capsys.readouterr().err
