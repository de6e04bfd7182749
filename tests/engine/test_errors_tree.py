"""The failure type lives on the exception class (one tree in fabtest.errors)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fabtest
from fabtest import errors
from fabtest.agents.base import AgentError, AgentTimeout
from fabtest.llm.base import LLMBadOutput, LLMError, LLMNotConfigured, LLMTimeout


@pytest.mark.parametrize(("exc", "kind"), [
    (errors.ExpectationFailed("x"), "assertion"),
    (errors.MaxTurnsReached("x"), "max_turns"),
    (errors.ScenarioTimeout("x"), "timeout"),
    (AgentTimeout("x"), "timeout"),
    (AgentError("x"), "error"),
    (LLMTimeout("x"), "error"),
    (LLMBadOutput("x"), "error"),
    (errors.UsageError("x"), "error"),
    (AssertionError("x"), "assertion"),  # a plain assert in a user's own step
    (ValueError("x"), "error"),
])
def test_failure_type_comes_from_the_class(exc: BaseException, kind: str) -> None:
    assert errors.failure_type_of(exc) == kind


def test_old_import_places_name_the_same_classes() -> None:
    assert AgentError is errors.AgentError and AgentTimeout is errors.AgentTimeout
    assert LLMError is errors.LLMError and LLMNotConfigured is errors.LLMNotConfigured
    assert fabtest.AgentError is errors.AgentError
    assert fabtest.ExpectationFailed is errors.ExpectationFailed and fabtest.UsageError is errors.UsageError


def test_every_fabtest_error_is_in_the_tree() -> None:
    for cls in (errors.UsageError, errors.ExpectationFailed, errors.MaxTurnsReached, errors.ScenarioTimeout,
                AgentError, LLMError):
        assert issubclass(cls, errors.FabtestError)
    assert issubclass(errors.ExpectationFailed, AssertionError)  # pytest still shows it as an assertion


def test_only_needs_llm_asks_for_a_skip() -> None:
    assert errors.NeedsLLM("x").skips
    assert not LLMNotConfigured("x").skips and not AgentError("x").skips


def test_context_is_on_attributes_not_in_the_message() -> None:
    exc = AgentTimeout("step 2 of 3: no answer", where="step 2 of 3", line=12)
    assert (exc.where, exc.line, str(exc)) == ("step 2 of 3", 12, "step 2 of 3: no answer")
    assert errors.UsageError("plain").where is None


def test_the_engine_imports_no_pytest() -> None:
    code = ("import sys; import fabtest.engine, fabtest.engine.scenario, fabtest.playbook.run; "
            "sys.exit('pytest' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
