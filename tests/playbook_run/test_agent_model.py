"""A playbook's ``agent_model`` wins over ``FABTEST_AGENT_MODEL``, which is the default for playbooks
without one (README "Playbooks"); the same order for the per-turn and the ACP Gemini CLI factories."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from fabtest.agents.acp import gemini_acp
from fabtest.agents.cli_agent import gemini_cli
from fabtest.cli import main

from .helpers import PYPROJECT, write_playbook

FAKE_CLI = Path(__file__).resolve().parents[1] / "fixtures" / "fake_cli.py"


def _models(results: Path) -> dict[str, set[str]]:
    """Per playbook, the models the fake CLI said it ran (its ``init`` event, kept in turn metadata)."""
    [experiment] = [p for p in results.glob("*.json") if not p.name.startswith(".")]
    data = json.loads(experiment.read_text(encoding="utf-8"))
    return {r["name"]: {t["metadata"].get("model") for t in r["transcript"]} for r in data["scenario_results"]}


def test_the_playbook_agent_model_wins_over_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          fake: Any) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    cli = tmp_path / "gemini"
    cli.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_CLI} \"$@\"\n", encoding="utf-8")
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FABTEST_PLAYBOOK_AGENT", "fabtest.agents.cli_agent:gemini_cli")
    monkeypatch.setenv("FABTEST_GEMINI_CLI", str(cli))
    monkeypatch.setenv("FABTEST_AGENT_MODEL", "model-from-env")
    monkeypatch.delenv("FABTEST_RESULTS_DIR", raising=False)
    step = {"user_input": "Hi there", "expected_outcome": "The agent answers"}
    write_playbook(tmp_path / "pb", {"name": "pinned", "agent_model": "model-from-playbook", "steps": [step]})
    write_playbook(tmp_path / "pb", {"name": "unpinned", "steps": [step]})
    main(["run", "pb/pinned.playbook.json", "pb/unpinned.playbook.json", "--experiment-id", "exp_models"])
    assert _models(tmp_path / "results") == {"pinned": {"model-from-playbook"}, "unpinned": {"model-from-env"}}


def test_factories_share_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABTEST_AGENT_MODEL", "env")
    for factory in (gemini_cli, lambda ctx: gemini_acp(ctx)):
        model = lambda agent: getattr(agent, "model", None) or agent.command[agent.command.index("-m") + 1]  # noqa: E731
        assert model(factory({"agent_model": "pb", "model": "table"})) == "pb"
        assert model(factory({"model": "table"})) == "env"
    monkeypatch.delenv("FABTEST_AGENT_MODEL")
    assert gemini_cli({"model": "table"}).model == "table"
    assert gemini_cli({}).model == "gemini-2.5-flash"
