"""A framework agent's run context: ``[tool.fabtest.agents.NAME] context = "module:factory"``.

Framework agents are written against an object the framework hands to every tool and hook: the
OpenAI Agents SDK's ``Runner.run(..., context=...)`` (a tool's ``RunContextWrapper.context``),
PydanticAI's ``deps``, LangGraph's runtime ``context`` and ADK's session state. An agent whose tools
read it cannot run without it (the SDK's customer-service example fails with ``'NoneType' object
has no attribute 'flight_number'``), so the table names a factory that builds one. It is called
once per scenario, like the agent factory (with the scenario context when its first parameter is
``context``/``ctx``), and what it returns is the object the adapter passes every run; the same
object, as the tools left it, is the agent's end state for ``Then the state ...``.

A factory that does not import, or raises, is one line naming it and the cause (a usage error,
never a traceback).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from fabtest._internal.targets import import_object
from fabtest.errors import UsageError, describe

__all__ = ["CONTEXT_KEY", "build_run_context", "check_context_spec", "injected_context", "no_run_context"]

#: the agent table's key naming the factory
CONTEXT_KEY = "context"

#: the frameworks' packages, whose context objects a tool receives as an argument
_PACKAGES = ("agents", "pydantic_ai", "google.adk", "langgraph", "langchain", "langchain_core")
#: what the frameworks call the object they inject into a tool (RunContextWrapper, ToolContext,
#: RunContext, ToolRuntime, InvocationContext)
_CONTEXT_NAMES = ("Context", "ContextWrapper", "Runtime")


def check_context_spec(table: Mapping[str, Any], *, where: str) -> Any:
    """The factory ``context = "module:factory"`` names (None without the key): imported, not called."""
    spec = table.get(CONTEXT_KEY)
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise UsageError(f'{where}: context must be "module:factory" (a function returning the run context), '
                         f"got {spec!r}")
    factory = import_object(spec, where=f"{where}: context", what="the context factory")
    if not callable(factory):
        raise UsageError(f"{where}: context = {spec!r} is {type(factory).__name__}, not a function: name a factory "
                         "returning the run context, so each scenario gets a fresh one")
    return factory


def build_run_context(table: Mapping[str, Any], scenario: Mapping[str, Any], *, where: str) -> Any:
    """A fresh run context for one scenario (None when the table names no factory)."""
    factory = check_context_spec(table, where=where)
    if factory is None:
        return None
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        params = []
    takes_context = bool(params) and params[0].name in ("context", "ctx")
    try:
        built = factory(dict(scenario)) if takes_context else factory()
    except Exception as exc:  # the user's factory: its failure is one line, not a traceback
        raise UsageError(f"{where}: context = {table[CONTEXT_KEY]!r} raised {describe(exc)}") from None
    if inspect.isawaitable(built):
        close = getattr(built, "close", None)
        if callable(close):
            close()
        raise UsageError(f"{where}: context = {table[CONTEXT_KEY]!r} is async; give a plain function that returns "
                         "the run context")
    return built


def injected_context(value: Any) -> bool:
    """True for the object a framework injects into a tool call (the SDK's ``RunContextWrapper``,
    PydanticAI's ``RunContext``, ADK's ``ToolContext``, LangGraph's ``ToolRuntime``): it is the
    framework's state, not an argument the model chose, so ``@fabtest.tool`` leaves it out of the
    recorded call (told by the object's type, so no framework is imported)."""
    kind = type(value)
    module = kind.__module__ or ""
    if not any(module == p or module.startswith(p + ".") for p in _PACKAGES):
        return False
    return any(c.__name__.endswith(_CONTEXT_NAMES) for c in kind.__mro__)


def no_run_context(framework: str, what: str = "run context") -> UsageError:
    """The error of ``Then the state ...`` on a framework agent whose table names no context factory."""
    return UsageError(f"the {framework} agent has no {what} to read the state from: name a factory returning "
                      'one in its table, context = "module:factory" (docs/frameworks.md#the-run-context)')
