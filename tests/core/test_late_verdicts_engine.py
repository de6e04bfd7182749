"""The engine's side of late soft verdicts: ``finish`` leaves placeholders for what the judge has
not answered and hands them to ``on_late``; without ``on_late`` it waits; a failing judge skips
the soft check with the reason; a ``must`` is judged in its step."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fabtest.config.criteria import Criterion
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.engine.verdicts import LateVerdicts
from fabtest.errors import ExpectationFailed
from fabtest.llm.base import LLMError
from fabtest.config.settings import Settings

from .fake_llm import Call, FakeLLM

POLITE = Criterion("polite", "The agent is polite")


class Gate:
    """A judge that answers only once the test opens the gate (bounded, so nothing hangs)."""

    def __init__(self, verdict: str = "passed", error: BaseException | None = None) -> None:
        self.open = threading.Event()
        self.verdict = verdict
        self.error = error

    def __call__(self, call: Call) -> Any:
        self.open.wait(10)
        if self.error is not None:
            return self.error
        return {"verdicts": [{"criterion": "polite", "verdict": self.verdict, "reasoning": "judged"}]}


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


def _state(tmp_path: Path, judge: FakeLLM, pool: ThreadPoolExecutor, **kw: Any) -> ScenarioState:
    state = ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={},
                          llms=LLMRoles(judge=judge, executor=pool), default_agent=lambda messages: "hello", **kw)
    state.user_says("hi")
    return state


def test_finish_leaves_a_placeholder_and_hands_the_verdict_over_later(tmp_path: Path,
                                                                      pool: ThreadPoolExecutor) -> None:
    gate = Gate()
    handed: list[LateVerdicts] = []
    state = _state(tmp_path, FakeLLM(respond=gate), pool, on_late=handed.append)
    state.satisfy(POLITE, "should", "response")
    state.finish()  # returns while the judge still holds the verdict
    [waiting] = state.conversation.evaluations
    assert (waiting.status, waiting.data) == ("skipped", {"pending": True})
    assert handed == [state.late] and state.late is not None
    assert "judge" not in state.conversation.usage  # charged with the late verdict instead
    gate.open.set()
    assert state.late.wait(10)
    [(index, check)] = state.late.checks()
    assert (index, check.status, check.details) == (0, "passed", "judged")
    assert state.late.usage["judge"].calls == 1


def test_without_on_late_finish_waits_for_the_verdict(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    gate = Gate()
    gate.open.set()
    state = _state(tmp_path, FakeLLM(respond=gate), pool)
    state.satisfy(POLITE, "should", "response")
    state.finish()
    assert [c.status for c in state.conversation.evaluations] == ["passed"] and state.late is None


def test_a_failing_judge_skips_the_soft_check_with_the_reason(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    gate = Gate(error=LLMError("fake fake-1: HTTP 500 INTERNAL"))
    gate.open.set()
    state = _state(tmp_path, FakeLLM(respond=gate), pool)
    state.satisfy(POLITE, "should", "response")
    state.finish()  # raises nothing: a soft check never fails its scenario
    [check] = state.conversation.evaluations
    assert check.status == "skipped" and check.details == "judge failed: fake fake-1: HTTP 500 INTERNAL"
    assert check.data == {"judge_error": "LLMError"}


def test_a_must_is_judged_in_its_step_and_fails_there(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    gate = Gate(verdict="failed")
    gate.open.set()
    state = _state(tmp_path, FakeLLM(respond=gate), pool, on_late=lambda late: None)
    with pytest.raises(ExpectationFailed, match="polite"):
        state.satisfy(POLITE, "must", "response")
