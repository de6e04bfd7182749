"""Checking a scenario's tool stubs against the agent that will run them.

A stub that names a tool the agent does not have would never answer, and the scenario would talk
to the real system it meant to replace: that is an error at the stub's line, with a "did you
mean". So is a stub for an agent whose tools fabtest cannot reach (HTTP, CLI, ACP): its tools
run in another process, and only what that process reports (or its traces) can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fabtest.agents.stubs import UNSET, ToolStub, ToolStubs, stubbable_tools
from fabtest.config.settings import Settings
from fabtest.errors import UsageError, did_you_mean
from fabtest.experiment.model import ScenarioResult, ToolCallRecord

__all__ = ["project_stubs", "recorded_stubs", "verify"]

_REACH = ("stubs reach the built-in agent's Python and MCP tools, a LangGraph graph's ToolNode, and the "
          "functions a Python agent decorates with @fabtest.tool")


def verify(stubs: ToolStubs, agent: Any) -> None:
    """Raise a UsageError at the first stub the agent cannot honour."""
    if not stubs:
        return
    names = stubbable_tools(agent)
    first = next(iter(stubs))
    if names is None:
        kind = type(agent).__name__
        raise UsageError(f'{first.where}: the tool "{first.name}" cannot be stubbed: the agent ({kind}) runs its tools '
                         f"where fabtest cannot reach them; {_REACH} (an HTTP, CLI or ACP agent's tools run in "
                         "another process; its calls can still be checked from its traces: "
                         "traces = true, docs/how-to/agent-traces.md)")
    for stub in stubs:
        if stub.name not in names:
            shown = ", ".join(f'"{n}"' for n in names[:20]) + (", ..." if len(names) > 20 else "") or "none"
            raise UsageError(f'{stub.where}: no tool "{stub.name}" to stub: the agent has {shown}'
                             f"{did_you_mean(stub.name, names)}")


def project_stubs(settings: Settings) -> list[ToolStub]:
    """``[tool.fabtest.stubs.TOOL]`` tables as stubs, the level above every Background."""
    found = []
    for name, table in settings.stubs.items():
        where = f"{settings.source or 'pyproject.toml'} [tool.fabtest.stubs.{name}]"
        if table.returns is not None and table.fails is not None:
            raise UsageError(f"{where}: give returns or fails, not both")
        found.append(ToolStub(name, where, result=table.returns if table.returns is not None else UNSET,
                              error=table.fails, delay_s=table.takes))
    return found


@dataclass(frozen=True)
class _SameArguments:
    """A stub case for the arguments a recorded call had, exactly."""

    arguments: Mapping[str, Any]

    def matches(self, arguments: dict[str, Any]) -> bool:
        return arguments == dict(self.arguments)


def recorded_stubs(result: ScenarioResult) -> list[ToolStub]:
    """The tools a stub answered in a recorded run (``"stubbed": true``), stubbed again with what
    they answered, so a replay or a shrink meets the tool behaviour the run met instead of the real
    system: a call with a recorded call's arguments gets that call's result, any other the tool's
    first recorded answer; a tool whose first answer was a failure fails again."""
    by_tool: dict[str, list[ToolCallRecord]] = {}
    for call in (c for turn in result.transcript for c in turn.tool_calls if c.stubbed):
        by_tool.setdefault(call.name, []).append(call)
    where = f"{result.feature_file or result.nodeid} (the answers its stubs gave in the recorded run)"
    stubs = []
    for name, calls in by_tool.items():
        if calls[0].metadata.get("error"):
            stubs.append(ToolStub(name, where, error=str(calls[0].result)))
            continue
        cases = tuple(((_SameArguments(c.arguments),), c.result) for c in calls if not c.metadata.get("error"))
        stubs.append(ToolStub(name, where, result=calls[0].result, cases=cases))
    return stubs
