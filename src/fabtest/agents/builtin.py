"""The built-in agent: a model, instructions, skills, Python tools and MCP servers, all from configuration.

It exists so a prompt, a skill or an MCP server can be tested without writing an agent::

    [tool.fabtest.agents.helper]
    gemini = "gemini-2.5-flash"            # or provider = "openai", model = "...", base_url = "..."
    instructions = "prompts/helper.md"     # a file (relative to the project root) or the text itself
    skills = ["skills/booking"]
    tools = "myapp.tools:TOOLS"
    mcp = [{ command = ["python", "-m", "myapp.mcp_server"] }, { url = "http://127.0.0.1:8931/mcp" }]
    max_tool_rounds = 8

Each user message runs the tool loop: the model answers or asks for function calls, fabtest runs
them (Python function or MCP tool) and sends the results back, up to ``max_tool_rounds`` rounds.
Every call is recorded with its arguments and result; tokens are reported per turn in
``AgentResponse.metadata["usage"]``. The conversation (tool calls included) is kept across turns.
One agent is built per scenario, so its MCP servers start with the scenario's first turn and
stop when it ends (``shared = true`` servers live for the whole run).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabtest.agents import stubs
from fabtest.agents.base import AgentError, OnToolCall
from fabtest.agents.builtin_models import (
    STAND_IN_KEY,
    ChatModel,
    FunctionCall,
    StandInModel,
    ToolSpec,
    build_chat_model,
)
from fabtest.agents.builtin_tools import (
    PythonTool,
    load_skills,
    python_tools,
    skill_file_tool,
    skills_instructions,
)
from fabtest.agents.mcp_tools import McpConnection, McpServerSpec, connect, parse_mcp_specs
from fabtest.conversation import AgentResponse, Message, TokenUsage, ToolCall, jsonable
from fabtest.errors import UsageError, did_you_mean
from fabtest.llm.base import LLMError, LLMNotConfigured, LLMSettings
from fabtest.llm.gemini import gemini_api_key, missing_key_message

__all__ = ["BuiltinAgent", "BuiltinConfig", "build_builtin_agent", "check_builtin_table"]


class BuiltinConfig(BaseModel):
    """The agent table; provider settings are the judge's (``timeout``, ``max_retries``, ``base_url``...)."""

    model_config = ConfigDict(extra="forbid")
    gemini: str | None = None  # shorthand for provider = "gemini", model = ...
    provider: Literal["gemini", "openai"] | None = None
    model: str | None = None
    temperature: float | None = None
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    backoff: float = Field(default=0.5, ge=0)
    base_url: str | None = None
    api_key_env: str | None = None
    instructions: str = ""
    skills: list[str] = Field(default_factory=list)
    tools: str | None = None  # "module:attr": a list of functions or a dict of name to function
    mcp: list[dict[str, Any]] = Field(default_factory=list)
    max_tool_rounds: int = Field(default=8, ge=1)

    def llm_settings(self) -> LLMSettings:
        provider = self.provider or "gemini"
        model = self.gemini or self.model or ("gemini-2.5-flash" if provider == "gemini" else "")
        return LLMSettings(provider=provider, model=model, temperature=self.temperature, timeout_s=self.timeout,
                           max_retries=self.max_retries, base_url=self.base_url, api_key_env=self.api_key_env)


def build_builtin_agent(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> BuiltinAgent:
    """The registry's entry point: validate the table (one-line errors) and build the agent."""
    name = context.get("agent_name")
    where = f"{where}: [tool.fabtest.agents.{name}]" if name else where
    config = _validated(table, where)
    stand_in = context.get(STAND_IN_KEY)
    return BuiltinAgent(config, root=project_root(context), where=where,
                        stand_in=stand_in if isinstance(stand_in, StandInModel) else None)


def check_builtin_table(table: Mapping[str, Any], *, root: Path | None, where: str) -> None:
    """The pre-flight's check: everything building the agent checks (keys, types, tools import,
    instructions file, skills, MCP specs) without a key and without starting an MCP server."""
    try:
        BuiltinAgent(_validated(table, where), root=root or project_root({}), where=where, check_only=True)
    except LLMNotConfigured:  # not a configuration problem: the scenarios that need it skip (or fail the run)
        pass


def _validated(table: Mapping[str, Any], where: str) -> BuiltinConfig:
    """The table as a BuiltinConfig; every problem in one line, a misspelt key with its likely spelling."""
    try:
        config = BuiltinConfig.model_validate(dict(table))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown key {loc!r}{did_you_mean(loc, BuiltinConfig.model_fields)}")
            else:
                problems.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
        raise UsageError(f"{where}: {'; '.join(problems)}") from None
    if config.gemini and config.provider == "openai":
        raise UsageError(f"{where}: give gemini = \"MODEL\" or provider = \"openai\", not both")
    if config.provider == "openai" and not config.model:
        raise UsageError(f"{where}: provider = \"openai\" needs model = \"...\" (the name the endpoint serves)")
    return config


def project_root(context: Mapping[str, Any]) -> Path:
    """Where relative paths point: the context's ``rootdir``, else the nearest pyproject.toml upwards."""
    if context.get("rootdir"):
        return Path(str(context["rootdir"]))
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return here


class BuiltinAgent:
    """See the module docstring. Built by the registry from an agent table, one per scenario."""

    #: why this adapter never pauses (docs/how-to/approvals.md): an approval step names it
    pauses_unsupported = "a built-in agent runs its tools without asking"

    def __init__(self, config: BuiltinConfig, *, root: Path, where: str, stand_in: StandInModel | None = None,
                 check_only: bool = False) -> None:
        self.config = config
        self.settings = config.llm_settings()
        # the run's scripted fake plays the model: always under --fabtest-fake-llm, else only without a key
        self._stand_in = stand_in if stand_in is not None and stand_in.applies(self.settings) else None
        self._where = where
        skills = load_skills(config.skills, root=root, where=where)
        self.instructions = "\n\n".join(p for p in (_instructions(config.instructions, root, where),
                                                    skills_instructions(skills)) if p)
        self._python: list[PythonTool] = []
        if config.tools:
            from fabtest._internal.targets import import_object

            self._python = python_tools(import_object(config.tools, where=f"{where}: tools", what="tools"),
                                        where=f"{where}: tools")
        reader = skill_file_tool(skills)
        if reader is not None:
            self._python.append(reader)
        self._skills = [s.name for s in skills]
        self._specs: list[McpServerSpec] = parse_mcp_specs(config.mcp, where=where, root=root) if config.mcp else []
        self._connections: list[McpConnection] = []
        self._routes: dict[str, tuple[str, Any]] | None = None
        self._model: ChatModel | None = None
        self._seen: list[Message] | None = None
        self._usage = TokenUsage()
        self._closed = False
        # last, so a broken table is reported even where no key is set
        if (not check_only and self._stand_in is None and self.settings.provider == "gemini"
                and not gemini_api_key(self.settings)[0]):
            raise LLMNotConfigured(missing_key_message(self.settings).replace(" LLM", " built-in agent"))

    # -- the agent protocol ---------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """Provider, model, the declared tool names (``tools``), servers, skills and tokens so far."""
        names = list(self._routes) if self._routes is not None else [t.spec.name for t in self._python]
        if self._routes is None and self._specs and not self._closed:
            with contextlib.suppress(Exception):  # the first turn reports a server that fails to start
                names = list(self._ready())
        return {"adapter": "builtin", "provider": self.settings.provider, "model": self._model_name(),
                "tools": names, "mcp": [s.label for s in self._specs], "skills": list(self._skills),
                "usage": self._usage.to_dict()}

    def stubbable_tools(self) -> list[str]:
        """Every tool runs in this loop, so every one can be stubbed (MCP servers start to list theirs)."""
        return list(self._ready())

    def around(self) -> contextlib.AbstractContextManager[Any]:
        """Stops the MCP servers this agent started when the scenario ends."""
        return contextlib.closing(self)

    def close(self) -> None:
        """Stop this agent's MCP servers (shared ones stay up until the run ends)."""
        self._closed = True
        connections, self._connections = self._connections, []
        for connection in connections:
            if not connection.spec.shared:
                connection.close()

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        if not messages or messages[-1].role != "user":
            raise AgentError("the built-in agent needs the conversation to end with a user message")
        routes = self._ready()
        model = self._get_model(routes)
        prior = list(messages[:-1])
        if prior != self._seen:
            model.reset(prior)
        model.add_user(messages[-1].content, messages[-1].attachments)
        self._seen = None  # until this turn completes, the model's history is not the conversation's
        usage = TokenUsage()
        calls: list[ToolCall] = []
        texts: list[str] = []
        for round_number in range(1, self.config.max_tool_rounds + 2):
            try:
                turn = model.generate()
            except LLMError as exc:
                raise AgentError(f"{self._where}: the model failed: {exc}") from exc
            usage.add(turn.usage)
            if turn.text:
                texts.append(turn.text)
            if not turn.calls:
                break
            if round_number > self.config.max_tool_rounds:
                made = ", ".join(c.name for c in calls)
                raise AgentError(f"{self._where}: the model still asked for tools after max_tool_rounds="
                                 f"{self.config.max_tool_rounds} rounds (calls so far: {made})")
            results = []
            for request in turn.calls:
                call, result, is_error = self._run_tool(routes, request, round_number)
                calls.append(call)
                results.append((request, result, is_error))
                if on_tool_call is not None:
                    on_tool_call(call)
            model.add_results(results)
        text = "\n".join(texts)
        self._seen = [*messages, Message("agent", text)]
        self._usage.add(usage)
        return AgentResponse(text=text, tool_calls=calls, metadata={
            "usage": usage.to_dict(), "provider": self.settings.provider, "model": self._model_name(),
            "tool_rounds": len({c.metadata["round"] for c in calls}),
        })

    # -- internals ------------------------------------------------------------------------------
    def _model_name(self) -> str:
        """The configured model, or what scripted it: results never credit a model that did not answer."""
        return self.settings.model if self._stand_in is None else f"scripted stand-in for {self.settings.model}"

    def _ready(self) -> dict[str, tuple[str, Any]]:
        """Start the MCP servers (once) and map every tool name to where it runs."""
        if self._routes is not None:
            return self._routes
        if self._closed:
            raise AgentError(f"{self._where}: the built-in agent was closed (its scenario ended)")
        routes: dict[str, tuple[str, Any]] = {}
        for tool in self._python:
            routes[tool.spec.name] = ("python", tool)
        for spec in self._specs:
            connection = connect(spec)
            self._connections.append(connection)
            for mcp_tool in connection.tools:
                if mcp_tool.name in routes:
                    owner = routes[mcp_tool.name][0]
                    raise AgentError(f"{self._where}: tool {mcp_tool.name!r} of MCP server {spec.label!r} has the "
                                     f"same name as a tool of {owner}; rename one of them")
                routes[mcp_tool.name] = (f"mcp:{spec.label}", (connection, mcp_tool))
        self._routes = routes
        return routes

    def _get_model(self, routes: dict[str, tuple[str, Any]]) -> ChatModel:
        if self._model is None:
            specs = [tool.spec if source == "python" else ToolSpec(tool[1].name, tool[1].description, tool[1].schema)
                     for source, tool in routes.values()]
            try:
                if self._stand_in is not None:
                    self._model = self._stand_in.build(self.settings, system=self.instructions, tools=specs)
                else:
                    self._model = build_chat_model(self.settings, system=self.instructions, tools=specs,
                                                   backoff_base_s=self.config.backoff)
            except LLMNotConfigured:
                raise
            except Exception as exc:  # the SDK refusing a declaration, say
                raise AgentError(f"{self._where}: could not set up the model: {type(exc).__name__}: {exc}") from exc
        return self._model

    def _run_tool(self, routes: dict[str, tuple[str, Any]], request: FunctionCall,
                  round_number: int) -> tuple[ToolCall, Any, bool]:
        meta: dict[str, Any] = {"id": request.id, "round": round_number}
        route = routes.get(request.name)
        stub = stubs.current(request.name) if route is not None else None
        answer = stub.answer(request.arguments) if stub is not None else None
        if stub is not None and stub.delay_s:
            time.sleep(stub.delay_s)
        if answer is not None:
            call = stubs.stubbed_call(request.name, request.arguments, answer, **meta,
                                      source=route[0] if route else None)
            return call, call.result, answer.is_error
        if route is None:
            result: Any = f"unknown tool {request.name!r}; available: {', '.join(sorted(routes)) or 'none'}"
            is_error = True
        elif route[0] == "python":
            meta["source"] = "python"
            try:
                result, is_error = jsonable(route[1](request.arguments)), False
            except Exception as exc:  # the model sees the error and may recover
                result, is_error = f"{type(exc).__name__}: {exc}", True
        else:
            meta["source"] = route[0]
            connection, tool = route[1]
            result, is_error = connection.call(tool.name, request.arguments)
        if is_error:
            meta["error"] = True
        return ToolCall(name=request.name, arguments=dict(request.arguments), result=result, metadata=meta), \
            result, is_error


def _instructions(value: str, root: Path, where: str) -> str:
    """A file (relative to the project root) when one exists at that path, else the text itself."""
    if not value or "\n" in value or len(value) > 300:
        return value
    path = root / value
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if " " not in value and ("/" in value or value.endswith((".md", ".txt"))):
        raise UsageError(f"{where}: instructions file {value!r} not found (looked in {root}); "
                         "give an existing file or the instructions text itself")
    return value
