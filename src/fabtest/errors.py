"""fabtest's one exception tree: each class knows how the scenario it ends is reported.

The outcome lives on the class (``failure_type``, docs/reference/steps.md "How a scenario ends"), so no caller keeps an
order-sensitive ``isinstance`` table or a private channel such as ``_Stop("error", ...)``:
raise the class that says what happened and let the front end read ``exc.failure_type``.
Context a front end shows (``where``: ``file:line`` or a playbook step; ``line``) is stored as
attributes, so nobody has to parse a message with a regex. The front ends print these messages
without a traceback: a user needs the step and what happened, not our stack. ::

    FabtestError                      failure_type  "error"
    ├── UsageError                                  "error"   bad input: one line naming file and place
    │   ├── patterns.RegexTimeout                   "error"
    │   ├── preflight.PreflightFailed, playbook.load.PlaybookError, ...
    ├── ExpectationFailed (also AssertionError)     "assertion"
    ├── MaxTurnsReached                             "max_turns"
    ├── ScenarioTimeout                             "timeout"
    ├── InvalidSimulation                           ``skips = True``: the simulated user left its role,
    │                                               so the run is not counted (reported as not run)
    ├── AgentError                                  "error"   the agent under test failed
    │   ├── AgentTimeout                            "timeout"
    │   └── agents.boundary.AgentDataError          "error"
    ├── LLMError                                    "error"   the judge / simulator LLM failed
    │   ├── llm.base.LLMTimeout, LLMBadOutput, llm.budget.RetryBudgetSpent
    │   ├── SimulatorFailed                         "simulator" the simulated user failed for good (an
    │   │                                           outage, or it wrote the agent's lines on every try):
    │   │                                           the run says nothing about the agent (not measured)
    │   ├── JudgeFailed                             "judge"   the judge failed for good on a ``must``
    │   │                                           check: not the agent's failure (not measured)
    │   └── LLMNotConfigured                        "error"   no credentials for a provider
    │       └── NeedsLLM                            ``skips = True``: the scenario needed that LLM,
    │                                               so a front end reports a skip, not a failure
    ├── TransientFailure                            one LLM attempt failed; retried, never escapes
    │                                               (fabtest.llm.limits)
    └── bad files and values, each worded into a one-line usage error by the code that reads them:
        TopicGraphError, TriggerError (also ValueError; the topic table), CoverageFloorError (also
        ValueError; --fabtest-min-coverage), ExperimentFileError (an experiment file), MergeError
        (parts of a sharded run), JournalError (the journal of an interrupted run)

Any other ``AssertionError`` (a plain ``assert`` in a user's own step) is an ``assertion``;
anything else is an ``error`` (:func:`failure_type_of`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal

__all__ = ["MAX_MESSAGE_CHARS", "AgentError", "AgentTimeout", "CoverageFloorError", "ExpectationFailed",
           "ExperimentFileError", "FabtestError", "FailureType", "InvalidSimulation", "JournalError", "JudgeFailed",
           "LLMError", "LLMNotConfigured", "MaxTurnsReached", "MergeError", "NeedsLLM", "ScenarioTimeout",
           "SimulatorFailed", "TopicGraphError",
           "ToolFailed", "TransientFailure", "TriggerError", "UsageError", "did_you_mean", "excerpt", "failure_type_of"]

FailureType = Literal["assertion", "max_turns", "timeout", "error", "simulator", "judge"]


class FabtestError(Exception):
    """Base of every error fabtest raises on purpose; ``failure_type`` is how it ends a scenario."""

    failure_type: ClassVar[FailureType] = "error"
    #: True when the scenario should be reported as skipped (something it needs is not configured)
    skips: ClassVar[bool] = False

    def __init__(self, *args: object, where: str | None = None, line: int | None = None) -> None:
        super().__init__(*args)
        self.where = where  # "file:line" or a playbook step, when the raiser knows it
        self.line = line


class UsageError(FabtestError):
    """Bad input from the user (feature, table, regex, settings): one line naming file and place."""


class ExpectationFailed(FabtestError, AssertionError):
    """A ``must`` expectation failed: failure type ``assertion``."""

    failure_type = "assertion"


class MaxTurnsReached(FabtestError):
    """The simulation ran out of turns before its stop condition: failure type ``max_turns``."""

    failure_type = "max_turns"


class ScenarioTimeout(FabtestError):
    """The whole scenario exceeded ``--fabtest-scenario-timeout``: failure type ``timeout``."""

    failure_type = "timeout"


class AgentError(FabtestError):
    """The agent failed to answer (raised, crashed, exited non-zero, answered garbage)."""


class AgentTimeout(AgentError):
    """The agent did not answer within its timeout."""

    failure_type = "timeout"


class LLMError(FabtestError):
    """An LLM call failed for good (after retries). Maps to failure type ``error``."""


class SimulatorFailed(LLMError):
    """The simulated user failed for good (its LLM down, or an unusable or agent-voiced message on
    every try): failure type ``simulator``. The run measured nothing of the agent, so the gate keeps
    it out of the agent's metrics and counts it as not measured (docs/gates.md)."""

    failure_type = "simulator"


class JudgeFailed(LLMError):
    """The judge failed for good on a ``must`` check (an outage or unusable answers): failure type
    ``judge``. The agent was not found wanting, so the gate keeps the run out of its metrics."""

    failure_type = "judge"


class LLMNotConfigured(LLMError):
    """No credentials for the provider: callers that need the LLM raise :class:`NeedsLLM`."""


class NeedsLLM(LLMNotConfigured):
    """The scenario cannot run without an LLM that is not configured: front ends report a skip."""

    skips = True


class InvalidSimulation(FabtestError):
    """The simulated user left its role (spoke as the agent, invented facts, gave its whole goal away,
    ended on a promise) or the red-team attacker would not attack, on every try: the run says nothing
    about the agent. Front ends report it as not run (a skip tagged ``simulator``), never as a pass or
    a failure, so it stays out of completion, criteria and the gate (docs: judge-and-simulator.md)."""

    skips = True
    #: the kind of "did not run" a front end reports (pytest_plugin/not_run.py)
    not_run_kind: ClassVar[str] = "simulator"


class ToolFailed(FabtestError):  # reads as what happened: the tool failed
    """What a stubbed Python tool raises for ``fails with "..."``: the agent sees its tool raise. It
    reaches fabtest only through the agent (wrapped as the agent's error, like anything it raises)."""


class TransientFailure(FabtestError):
    """One attempt failed in a way a later attempt may not (raised by providers, never escapes)."""

    def __init__(
        self, message: str, *, status: int | None = None, timeout: bool = False, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.timeout = timeout
        self.retry_after_s = retry_after_s


# -- bad files and values: the code that reads them words each into a one-line usage error --------
class TopicGraphError(FabtestError, ValueError):
    """A topic graph that cannot be used; the message is one line and names where it was declared."""


class TriggerError(FabtestError, ValueError):
    """A trigger that cannot be parsed (wrapped in ``TopicGraphError`` by the graph)."""


class CoverageFloorError(FabtestError, ValueError):
    """A ``--fabtest-min-coverage`` value that is not ``KIND=RATE``."""


class ExperimentFileError(FabtestError):
    """An experiment file is missing, ambiguous or malformed; the message is one line."""


class MergeError(FabtestError):
    """Parts that cannot be merged; the message is one line naming the part and the field."""


class JournalError(FabtestError):
    """A journal cannot be recovered; the message is one line naming the file."""


def failure_type_of(exc: BaseException) -> FailureType:
    """How ``exc`` ends a scenario: its class says so; a plain ``assert`` is an ``assertion``."""
    if isinstance(exc, FabtestError):
        return exc.failure_type
    return "assertion" if isinstance(exc, AssertionError) else "error"


#: the longest failure message kept (console and results): a 20 MB exception message from an agent
#: would otherwise make a 20 MB experiment file and flood the terminal
MAX_MESSAGE_CHARS = 20_000


def excerpt(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` when short enough, else its start and its end with a line saying how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return (f"{text[:head]}\n[... {len(text) - head - tail:,} characters cut: the message had {len(text):,} "
            f"characters, fabtest keeps the first {head:,} and the last {tail:,} ...]\n{text[-tail:]}")



def exception_text(exc: BaseException) -> str:
    """``str(exc)``, even for an exception whose ``__str__`` raises or returns a non-string: then its
    arguments (``repr``) and what ``__str__`` raised, so the user's error is reported, not the
    secondary one its formatting caused."""
    try:
        text = str(exc)
        if isinstance(text, str):
            return text
    except Exception as failure:  # user code: its __str__ may raise anything
        problem = f"{type(failure).__name__} in its __str__"
    else:
        problem = "its __str__ returned no string"
    try:
        args = repr(exc.args)
    except Exception:  # so may the repr of its arguments
        args = "(arguments that cannot be shown)"
    return f"{args} [{problem}]"


def describe(exc: BaseException) -> str:
    """``"ExceptionType: message"`` of any exception (see :func:`exception_text`)."""
    return f"{type(exc).__name__}: {exception_text(exc)}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'agent'?)`` when ``choices`` holds a close spelling of ``word``, else "": the
    hint every "unknown key" / "unknown agent" message ends with."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
