"""Checking a scenario's tool stubs against the agent that will run them.

A stub that names a tool the agent does not have would never answer, and the scenario would talk
to the real system it meant to replace: that is an error at the stub's line, with a "did you
mean". So is a stub for an agent whose tools fabtest cannot reach (HTTP, CLI, ACP): its tools
run in another process, and only what that process reports (or its traces) can be checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabtest.agents.stubs import UNSET, ToolStub, ToolStubs, stubbable_tools
from fabtest.config.settings import Settings
from fabtest.errors import UsageError, did_you_mean
from fabtest.experiment.model import ScenarioResult, ToolCallRecord

__all__ = ["project_stubs", "recorded_stubs", "tools_out_of_reach", "verify"]

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


#: agent tables whose adapter talks to another process, where the agent's tools run
_REMOTE_TABLES = {"http": "an HTTP agent", "openai": "an OpenAI-compatible chat endpoint", "acp": "an ACP agent",
                  "a2a": "an A2A agent", "ag_ui": "an AG-UI agent"}


def tools_out_of_reach(settings: Settings, root: Path) -> str | None:
    """Why no tool of any agent the project configures can be stubbed (or faulted), from what each
    adapter says before anything is called; None when one may be reachable or it cannot be told
    without a run (a conftest's ``fabtest_agent``, a built-in or framework agent, a factory that fails)."""
    from fabtest.engine.preflight import configured_agents

    targets = configured_agents(settings, scenarios=True, playbooks=False)
    if not targets or any("fabtest_agent" in _text(path) for path in _conftests(root)):
        return None
    reasons = []
    for where, target in targets.items():
        reason = _out_of_reach(where, target, root)
        if reason is None:
            return None
        reasons.append(reason)
    return "; ".join(reasons)


def _out_of_reach(where: str, target: Any, root: Path) -> str | None:
    if isinstance(target, Mapping):
        remote = next((kind for key, kind in _REMOTE_TABLES.items() if key in target), None)
        if remote is not None:
            return f"{where} is {remote}, whose tools run in another process"
        if "factory" not in target:
            return None
    from fabtest.agents.registry import make_agent

    try:  # built, never called: a Python agent's @fabtest.tool functions register as its module is imported
        agent = make_agent(target, {"scenario": "", "workdir": str(root), "cwd": str(root)}, where=where)
    except Exception:  # the run itself reports a broken agent, with its line
        return None
    try:
        names = stubbable_tools(agent)
    finally:
        close = getattr(agent, "close", None)
        if callable(close):
            close()
    if names is not None:
        return None
    return f"{where} ({type(agent).__name__}) runs its tools out of reach (no @fabtest.tool function)"


def _conftests(root: Path) -> Iterator[Path]:
    """The project's conftest.py files (not those of a virtualenv or a hidden folder inside it)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__")) and d not in ("node_modules", "site-packages")]
        if "conftest.py" in files:
            yield Path(folder) / "conftest.py"


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


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
