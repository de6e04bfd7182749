"""Playbooks share the agent boundary: a raising factory, around() or metadata() is that playbook's
``error`` naming the hook, never a crash."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fabtest.playbook import run_playbook

from .helpers import BookingAgent, write_playbook

PLAYBOOK = {"name": "boundary", "persona": {"initial_user_input": "Hi, I need a venue for 10 people in Berlin on 12 March.",
                                            "context": "An office manager.", "max_turns": 6,
                                            "success_criteria": {"flow_contains": ["confirmation number"]}}}


class MetadataRaises(BookingAgent):
    def metadata(self) -> dict[str, Any]:
        raise KeyError("no model configured")


class AroundRaises(BookingAgent):
    @contextmanager
    def around(self) -> Any:
        raise RuntimeError("db connection refused")
        yield


def _factory_raises(context: dict[str, Any]) -> Any:
    raise ValueError("bad factory")


def test_a_raising_metadata_fails_the_playbook_as_an_error(llm: Any, tmp_path: Path) -> None:
    ok = run_playbook(write_playbook(tmp_path / "ok", PLAYBOOK), agent_factory=BookingAgent, judge_llm=llm,
                      simulator_llm=llm, repo_root=tmp_path)
    assert ok.passed, ok.failure_message
    bad = run_playbook(write_playbook(tmp_path / "bad", PLAYBOOK), agent_factory=MetadataRaises, judge_llm=llm,
                       simulator_llm=llm, repo_root=tmp_path)
    assert (bad.passed, bad.failure_type) == (False, "error")
    assert "the agent's metadata() raised KeyError" in bad.failure_message


def test_raising_around_and_factory_are_errors_naming_the_hook(llm: Any, tmp_path: Path) -> None:
    around = run_playbook(write_playbook(tmp_path / "a", PLAYBOOK), agent_factory=AroundRaises, judge_llm=llm,
                          simulator_llm=llm, repo_root=tmp_path)
    assert around.failure_type == "error"
    assert "around() failed on entry: RuntimeError: db connection refused" in around.failure_message
    factory = run_playbook(write_playbook(tmp_path / "f", PLAYBOOK), agent_factory=_factory_raises, judge_llm=llm,
                           simulator_llm=llm, repo_root=tmp_path)
    assert factory.failure_type == "error"
    assert "cannot build the agent: the agent factory raised ValueError: bad factory" in factory.failure_message
