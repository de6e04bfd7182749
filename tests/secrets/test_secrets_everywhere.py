"""A value substituted from the environment never reaches results, reports, console or logs
(issue 10, item 5): an HTTP agent URL with ``?token=${BOT_TOKEN}`` that fails."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from fabtest._internal import redaction

TOKEN = "tok-SECRET-4f9a27"

PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent = {http = "http://127.0.0.1:9/chat?token=${BOT_TOKEN}", timeout = 2}
'''

FEATURE = '''
Feature: Token
  Scenario: Unreachable agent
    When the user says "hi"
    Then the response must match "hello"

  Scenario: Needs the simulator
    Given a simulated user with the goal "Book a room"
    When the simulated user talks to the agent
'''


def test_an_agent_url_token_is_redacted_in_results_report_and_console(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BOT_TOKEN", TOKEN)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makefile(".feature", token=FEATURE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--tb=long",
                                           "--fabtest-experiment-id", "exp_tok", "--junitxml=junit.xml",
                                           "--fabtest-no-preflight")  # the per-scenario path is under test
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, output
    assert "1 failed, 1 skipped" in output  # a skip's (path, line, reason) survives redaction
    assert "127.0.0.1:9" in output  # the failure is still explained
    assert TOKEN not in output
    assert TOKEN not in (pytester.path / "junit.xml").read_text(encoding="utf-8")
    doc_text = (pytester.path / "results" / "exp_tok.json").read_text(encoding="utf-8")
    assert TOKEN not in doc_text
    doc = json.loads(doc_text)
    [scenario] = [s for s in doc["scenario_results"] if not s.get("skipped")]
    assert "token=***" in scenario["agent_metadata"]["url"]
    assert "***" in scenario["failure_message"]
    report = subprocess.run([sys.executable, "-c", "import sys; from fabtest.cli import main; sys.exit(main())",
                             "report", "exp_tok", "--results-dir", str(pytester.path / "results")],
                            capture_output=True, text=True, timeout=60, cwd=pytester.path)
    assert report.returncode == 0, report.stderr
    assert TOKEN not in (pytester.path / "results" / "exp_tok.html").read_text(encoding="utf-8")


def test_redaction_covers_json_and_url_encoded_forms_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    secret = 'p@ss "word"/x'
    redaction.register(secret, "abc")  # too short to be a secret: never shreds results
    try:
        assert redaction.redact(f"a {secret} b") == "a *** b"
        assert redaction.redact(json.dumps({"k": secret})) == '{"k": "***"}'
        assert redaction.redact("u?token=p%40ss%20%22word%22%2Fx") == "u?token=***"
        assert redaction.redact("abc") == "abc"
        with caplog.at_level(logging.INFO, logger="fabtest.conversation"):
            logging.getLogger("fabtest.conversation").info("turn %d user: %s", 1, secret)
        assert secret not in caplog.text and "***" in caplog.text
    finally:
        redaction.clear()
    assert redaction.redact(secret) == secret


def test_playbook_env_values_are_registered_so_the_cache_and_recorder_redact_them() -> None:
    from fabtest.playbook.load import validate_playbook
    from fabtest.playbook.secrets import interpolate

    playbook = validate_playbook({"name": "p", "env": ["CITY_SECRET"],
                                  "steps": [{"user_input": "go to ${CITY_SECRET}", "expected_outcome": "ok"}]})
    try:
        interpolate(playbook, {"CITY_SECRET": "Hamburg-Secret-7"})
        assert redaction.redact("prompt: go to Hamburg-Secret-7") == "prompt: go to ***"
    finally:
        redaction.clear()


def test_the_recorder_redacts_every_result_it_journals(tmp_path: Path) -> None:
    from fabtest.experiment.model import ScenarioResult
    from fabtest.experiment.recorder import Recorder

    redaction.register(TOKEN)
    try:
        recorder = Recorder(results_dir=tmp_path, experiment_id="exp_r", cwd=str(tmp_path))
        recorder.add(ScenarioResult(id="example:000000000001", name="n", passed=False, failure_message=f"x {TOKEN}",
                                    agent_metadata={"url": f"http://h/?token={TOKEN}"}))
        journal = recorder.journal.read_text(encoding="utf-8")
        path = recorder.finalise()
    finally:
        redaction.clear()
    assert TOKEN not in journal and TOKEN not in path.read_text(encoding="utf-8")
