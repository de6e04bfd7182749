"""The agent protocol and the errors adapters raise.

An agent is any object with ``chat(messages, on_tool_call=None) -> AgentResponse``. Adapters
raise :class:`AgentError` (failure type ``error``) or :class:`AgentTimeout` (``timeout``) so the
runner can report an explicit outcome instead of a bare traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from fabtest.conversation import AgentResponse, Decision, Message, Pause, ToolCall
from fabtest.errors import AgentError, AgentTimeout, UsageError  # defined with the whole tree; importable from here too

__all__ = ["STAND_IN_KEY", "Agent", "AgentError", "AgentTimeout", "OnToolCall", "agent_metadata", "declared_tools",
           "each_decided", "program_path"]

#: The agent context's key for the run's scripted stand-in model (agents.builtin_models.StandInModel):
#: the engine puts it there, built-in agents read it.
STAND_IN_KEY = "fabtest_stand_in_model"

OnToolCall = Callable[[ToolCall], None]


@runtime_checkable
class Agent(Protocol):
    """What the runner talks to. ``around()`` and ``metadata()`` are optional extras."""

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse: ...


def agent_metadata(agent: Any, timeout: float | None = None) -> dict[str, Any]:
    """The agent's ``metadata()`` as plain data ({} without one); raises AgentError when it raises or
    returns something that is not a mapping, AgentTimeout when it takes longer than ``timeout``
    (see :mod:`fabtest.agents.boundary`)."""
    from fabtest.agents.boundary import safe_metadata

    return safe_metadata(agent, timeout)


def declared_tools(value: Any, *, where: str) -> list[str] | None:
    """``tools = ["search", "book"]`` in an HTTP, OpenAI, CLI or ACP agent table: the tool names its
    steps may use and coverage counts, since fabtest cannot list a remote or separate process's tools
    itself (``must not call "typo"`` would otherwise pass forever)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{where}: tools must be a list of tool names like [\"search_venues\"], got {value!r}")
    return list(value)


def program_path(argv: list[str]) -> list[str]:
    """``argv`` with a relative program path (``./mycli``, ``bin/agent``) made absolute against the
    directory the run started in: a CLI or ACP agent starts in the scenario's working directory,
    where the relative path would name nothing. A bare name (``gemini``) is still looked up on PATH."""
    import os

    if argv and os.sep in argv[0] and not os.path.isabs(argv[0]):
        return [os.path.abspath(argv[0]), *argv[1:]]
    return argv


def each_decided(pauses: Sequence[Pause], decisions: Sequence[Decision], *,
                 waits_on: str) -> list[tuple[Pause, Decision]]:
    """Each pause with the user's decision on it; an AgentError naming the first pause left undecided,
    since a framework resumes a run only with every pending pause answered (``waits_on``: "the ADK
    run waits on 2 confirmations", said before "and only some were decided")."""
    by_pause = {d.pause_id: d for d in decisions}
    decided = []
    for pause in pauses:
        decision = by_pause.get(pause.id)
        if decision is None:
            raise AgentError(f"{waits_on} and only some were decided: decide {pause.describe()} too")
        decided.append((pause, decision))
    return decided
