"""Agents built with a framework, configured by one table key: ``adk``, ``langgraph``, ``openai_agents``
or ``pydantic_ai`` (``= "module:attr"``).

This module is what the four adapters share, so each adapter module only maps its framework's
run onto fabtest's data: which table key belongs to which framework (its extra, its distribution and
the version range the adapter was tested with), the one-line errors for a missing extra, an
unsupported version or a wrong object, the collection of tool calls with their results and of the
turn's tokens, and how an adapter knows the conversation it is handed is the one it has been
having (a fresh session per scenario, rebuilt from the text when it is not).

No framework is imported here: only the adapter of the key a table names imports its framework,
when the table is built.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from fabtest._internal.extras import install_command
from fabtest._internal.targets import import_object
from fabtest._internal.words import article
from fabtest.agents.base import OnToolCall, declared_tools
from fabtest.conversation import AgentResponse, Message, TokenUsage, ToolCall, jsonable
from fabtest.errors import UsageError

__all__ = ["FRAMEWORKS", "Framework", "Session", "ToolLog", "build_framework_agent", "check_framework_table",
           "framework_key_of", "installed_version", "known_tools", "model_name", "output_text", "resolve_target",
           "tool_result", "turn_response"]


@dataclass(frozen=True, slots=True)
class Framework:
    """One supported framework: the table key, the extra that installs it and the tested range."""

    key: str
    label: str  # the name alone, no article: messages add theirs (_internal/words.py)
    extra: str
    dist: str
    minimum: str  # the lowest version tested (pinned in the extra)
    below: str  # the first version not supported (the next major, or minor before 1.0)
    adapter: str  # "module:function" building the agent from the loaded object

    @property
    def supported(self) -> str:
        return f"{self.dist}>={self.minimum},<{self.below}"

    @property
    def install(self) -> str:
        return install_command(self.extra)


FRAMEWORKS: dict[str, Framework] = {f.key: f for f in (
    Framework("adk", "Google ADK", "adk", "google-adk", "2.13", "3", "fabtest.agents.adk:ADKAgent"),
    Framework("langgraph", "LangGraph", "langgraph", "langgraph", "1.2", "2",
              "fabtest.agents.langgraph:LangGraphAgent"),
    Framework("openai_agents", "OpenAI Agents SDK", "openai-agents", "openai-agents", "0.24", "0.25",
              "fabtest.agents.openai_agents:OpenAIAgentsAgent"),
    Framework("pydantic_ai", "PydanticAI", "pydantic-ai", "pydantic-ai-slim", "2.68", "3",
              "fabtest.agents.pydantic_ai:PydanticAIAgent"),
)}
_OPTIONS = {"model", "tools"}


def installed_version(dist: str) -> str | None:
    """The installed version of a distribution, None when it is not installed (tests monkeypatch this)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def build_framework_agent(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> Any:
    """The registry's entry point for a table naming a framework key: check the table, the installed
    framework and the object it names, and build that framework's adapter (one per scenario)."""
    name = context.get("agent_name")
    where = f"{where}: [tool.fabtest.agents.{name}]" if name else where
    framework, spec, model, target = _checked(table, where)
    module_name, _, cls_name = framework.adapter.partition(":")
    adapter = getattr(importlib.import_module(module_name), cls_name)
    built = adapter.from_target(target, context, where=f"{where}: {framework.key} = {spec!r}", model=model)
    built.declared_tools = declared_tools(table.get("tools"), where=where)  # the table's list wins
    return built


def check_framework_table(table: Mapping[str, Any], *, where: str) -> None:
    """What the pre-flight checks before the first scenario: the table's keys, the installed framework
    and that ``module:attr`` imports (a typo is one UsageError with a "did you mean", not a failure
    of every scenario)."""
    _checked(table, where)


def _checked(table: Mapping[str, Any], where: str) -> tuple[Framework, str, str | None, Any]:
    keys = [k for k in table if k in FRAMEWORKS]
    if len(keys) != 1:
        raise UsageError(f"{where}: give one of {', '.join(FRAMEWORKS)}, got {' and '.join(keys)}")
    framework = FRAMEWORKS[keys[0]]
    unknown = sorted(set(table) - _OPTIONS - {framework.key})
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} for {article(framework.label)} agent "
                         f"(allowed: {framework.key}, {', '.join(sorted(_OPTIONS))})")
    spec, model = table[framework.key], table.get("model")
    if not isinstance(spec, str):
        raise UsageError(f"{where}: {framework.key} must be \"module:attribute\", got {spec!r}")
    if model is not None and not isinstance(model, str):
        raise UsageError(f"{where}: model must be a string (the model's name, for cost), got {model!r}")
    declared_tools(table.get("tools"), where=where)
    _check_installed(framework, where)
    return framework, spec, model, import_object(spec, where=f"{where}: {framework.key}")


def _check_installed(framework: Framework, where: str) -> None:
    version = installed_version(framework.dist)
    if version is None:
        raise UsageError(f"{where}: {framework.key} needs {framework.label} ({framework.dist}), which is not "
                         f"installed: {framework.install}")
    try:
        ok = Version(framework.minimum) <= Version(version) < Version(framework.below)
    except InvalidVersion:
        ok = False
    if not ok:
        raise UsageError(f"{where}: {framework.dist} {version} is installed; fabtest's {framework.label} adapter "
                         f"supports {framework.supported}: {framework.install} installs a supported version")


def resolve_target(target: Any, expected: type | tuple[type, ...], context: Mapping[str, Any], *, where: str,
                   what: str, hint: Callable[[Any], str | None] = lambda obj: None) -> Any:
    """The framework object ``module:attr`` names: the object itself, or what a factory returns (called
    once per scenario, with the scenario context when its first parameter is ``context``/``ctx``).
    Anything else is a one-line UsageError naming ``what`` was expected and, where ``hint`` knows it,
    the fix."""
    if isinstance(target, expected):
        return target
    factory = _factory_arguments(target)
    if factory is not None:
        built = target(dict(context)) if factory else target()
        if isinstance(built, expected):
            return built
        target = built
        source = "the factory returned"
    else:
        source = "got"
    fix = hint(target) or f"point the table at {what}, or a function returning one"
    raise UsageError(f"{where}: expected {what}, {source} {type(target).__module__}.{type(target).__qualname__}: "
                     f"{fix}")


#: the top-level package of each framework's objects (``type(obj).__module__``): a match is told by
#: the object's type alone, so no framework is imported to recognise one
_PACKAGES = {"langgraph": "langgraph", "adk": "google.adk", "openai_agents": "agents", "pydantic_ai": "pydantic_ai"}


def _key_of_object(obj: Any) -> str | None:
    module = type(obj).__module__ or ""
    for key, package in _PACKAGES.items():
        if module == package or module.startswith(package + "."):
            return key
    return None


def framework_key_of(target: Any, context: Mapping[str, Any] | None = None) -> str | None:
    """The framework table key (``langgraph``, ...) for the object ``module:attr`` names, or for
    what it returns when it is a factory (called once, as a scenario would call it); None for
    anything else, a plain agent. ``fabtest init --agent`` uses it to write the right table: a
    LangGraph factory given as a plain agent would be called with the messages and fail."""
    key = _key_of_object(target)
    if key is not None:
        return key
    factory = _factory_arguments(target)
    if factory is None:
        return None
    try:
        built = target(dict(context or {})) if factory else target()
    except Exception:  # not a factory we can call here: the caller treats it as a plain agent
        return None
    return _key_of_object(built)


def _factory_arguments(target: Any) -> bool | None:
    """How to call ``target`` as a factory: True with the context (first parameter ``context``/``ctx``),
    False without arguments, None when it is no factory (a class, or a function that needs arguments,
    like a tool the table points at by mistake)."""
    if not callable(target) or inspect.isclass(target):
        return None
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None
    if params and params[0].name in ("context", "ctx"):
        return True
    required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                                          p.KEYWORD_ONLY)]
    return None if required else False


def known_tools(names: Iterable[str | None]) -> list[str] | None:
    """The tool names an adapter read from its framework, in order and once each; None when one of
    them could not be read (a toolset or MCP server lists its tools only when the run starts), so a
    partial list never makes a real tool a "typo". ``tools = [...]`` in the table names them then."""
    found: list[str] = []
    for name in names:
        if not name:
            return None
        if name not in found:
            found.append(name)
    return found or None


def model_name(model: Any) -> str | None:
    """A model's name from a string or a model object (``.model``, ``.model_name``), None if unknown."""
    if isinstance(model, str):
        return model or None
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def tool_result(value: Any) -> Any:
    """A tool's output as plain data; text holding JSON (LangChain and OpenAI send results as text)
    is parsed, so grounding and the report see the fields."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, (dict, list)) else value
    return jsonable(value)


@dataclass
class ToolLog:
    """The tool calls of one turn, each with its arguments and, once it came back, its result.

    ``called`` and ``returned`` are fed from a framework's events or items in the order they
    occur; a call is reported to ``on_tool_call`` when its result arrives (or at the end of the
    turn without one), so a timeout still leaves the calls that completed.
    """

    on_tool_call: OnToolCall | None = None
    calls: list[ToolCall] = field(default_factory=list)
    _open: dict[str, ToolCall] = field(default_factory=dict)

    def called(self, call_id: str | None, name: str, arguments: Any) -> None:
        args = tool_result(arguments) if isinstance(arguments, str) else jsonable(arguments or {})
        call = ToolCall(name=name, arguments=args if isinstance(args, dict) else {"input": args},
                        metadata={"id": call_id} if call_id else {})
        self.calls.append(call)
        self._open[call_id or f"#{len(self.calls)}"] = call

    def returned(self, call_id: str | None, result: Any, *, error: bool = False, name: str | None = None) -> None:
        call = self._open.pop(call_id or "", None)
        if call is None:  # a result without its call (or no ids): the oldest open call of that name
            key = next((k for k, c in self._open.items() if name is None or c.name == name), None)
            call = self._open.pop(key) if key is not None else None
        if call is None:
            return
        call.result = tool_result(result)
        if error:
            call.metadata["error"] = True
        self._report(call)

    def held(self) -> list[ToolCall]:
        """Take out the calls still without a result: a run that paused for approval has not made
        them (they are the pause; the turn that resumes it records them with their result)."""
        held = [call for call in self.calls if any(call is c for c in self._open.values())]
        self.calls = [call for call in self.calls if not any(call is c for c in held)]
        self._open.clear()
        return held

    def finish(self) -> list[ToolCall]:
        for call in self._open.values():
            self._report(call)
        self._open.clear()
        return self.calls

    def _report(self, call: ToolCall) -> None:
        if self.on_tool_call is not None:
            self.on_tool_call(call)


class Session:
    """What an adapter knows of the scenario's conversation: the messages it has answered so far.

    A framework keeps its own session (ADK session, LangGraph thread, history); fabtest hands the
    whole conversation every turn. ``continues`` tells whether that conversation is the one the
    framework's session holds (the usual case: only the last user message is new); when it is not,
    the adapter starts a fresh session seeded with the earlier messages as text.
    """

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self.usage = TokenUsage()
        self.models: list[str] = []
        self._seen: list[Message] = []

    def new_user_text(self, messages: Sequence[Message]) -> str:
        if not messages or messages[-1].role != "user":
            from fabtest.agents.base import AgentError

            raise AgentError(f"the {self.framework} adapter needs the conversation to end with a user message")
        return messages[-1].content

    def continues(self, messages: Sequence[Message]) -> bool:
        return list(messages[:-1]) == self._seen

    def answered(self, messages: Sequence[Message], response: AgentResponse) -> AgentResponse:
        """Remember the turn and add its totals to the adapter's; a turn whose messages named no model
        (a fake model, a provider that does not say) is priced with the model named before."""
        self._seen = [*messages, Message("agent", response.text, tuple(response.attachments),
                                         pauses=tuple(response.pauses))]
        if not response.metadata.get("model") and self.models:
            response.metadata["model"] = self.models[-1]
        usage = response.metadata.get("usage") or {}
        self.usage.add(TokenUsage(calls=usage.get("calls", 0), input_tokens=usage.get("input_tokens", 0),
                                  output_tokens=usage.get("output_tokens", 0)))
        model = response.metadata.get("model")
        if model and model not in self.models:
            self.models.append(model)
        return response

    def metadata(self, **extra: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"adapter": self.framework, **{k: v for k, v in extra.items() if v is not None}}
        if self.models:
            meta.setdefault("model", self.models[-1])
        meta["usage"] = self.usage.to_dict()
        return meta


def turn_response(text: str, log: ToolLog, usage: TokenUsage, model: str | None, **extra: Any) -> AgentResponse:
    """The turn as fabtest's AgentResponse: text, the tool calls with results, usage and the model."""
    metadata: dict[str, Any] = {"usage": usage.to_dict(), **{k: v for k, v in extra.items() if v is not None}}
    if model:
        metadata["model"] = model
    return AgentResponse(text=text, tool_calls=log.finish(), metadata=metadata)


def output_text(output: Any) -> str:
    """A run's final output as the reply's text: text as is, structured output as JSON."""
    if output is None:
        return ""
    return output if isinstance(output, str) else json.dumps(jsonable(output), ensure_ascii=False)
