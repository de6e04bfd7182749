"""``fabtest run`` stopped by SIGTERM (CI cancelling a job) saves the finished playbooks, marked
interrupted, and exits 130 (issue 10: SIGTERM is handled like SIGINT)."""

from __future__ import annotations

import json
import os
import signal
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.conversation import AgentResponse

from .helpers import PYPROJECT, write_playbook

GREET = {"name": "greet", "steps": [{"user_input": "Hi, I need a meeting room.", "expected_outcome": "The agent is friendly"}]}
STOP = {"name": "stop", "steps": [{"user_input": "STOP NOW", "expected_outcome": "The agent is friendly"}]}


def _build(context: dict[str, Any]) -> Any:
    def chat(messages: Any) -> AgentResponse:
        if "STOP NOW" in str(messages[-1].content):
            os.kill(os.getpid(), signal.SIGTERM)  # what `timeout` or a CI runner sends
        return AgentResponse(text="Hello! Happy to help you find a meeting room.")
    return chat


def test_sigterm_during_fabtest_run_saves_the_finished_playbooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capfd: pytest.CaptureFixture[str], fake: Any) -> None:
    module = types.ModuleType("sigterm_agent")
    module.build = _build  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sigterm_agent", module)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FABTEST_RESULTS_DIR", raising=False)
    write_playbook(tmp_path / "pb", GREET)
    write_playbook(tmp_path / "pb", STOP)
    before = signal.getsignal(signal.SIGTERM)
    code = main(["run", "pb/greet.playbook.json", "pb/stop.playbook.json", "--experiment-id", "exp_term",
                 "--agent", "sigterm_agent:build"])
    out, err = capfd.readouterr()
    assert code == 130, out + err
    assert "interrupted" in err and "Traceback" not in out + err
    doc = json.loads((tmp_path / "results" / "exp_term.json").read_text(encoding="utf-8"))
    assert doc["experiment"]["interrupted"] is True
    assert [r["name"] for r in doc["scenario_results"]] == ["greet"]
    assert not (tmp_path / "results" / ".exp_term.journal.jsonl").exists()
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
