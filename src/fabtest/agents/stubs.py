"""Tool stubs: a scenario decides what a tool returns, that it fails, or how long it takes.

A scenario's stubs (``Given the tool "X" returns:`` and friends, merged level by level like
criteria) are active while fabtest waits for the agent: the turn loop opens a :func:`session`
around every ``chat`` call, and everything that runs a tool on fabtest's side asks
:func:`current` whether the call is stubbed. That is the built-in agent's tool loop, the
LangGraph adapter's ``ToolNode`` interceptor, and any Python function the agent decorates with
:func:`tool` (the opt-in registry for Python agents). Because the session is a ``contextvars``
value, scenarios running side by side never see each other's stubs, and outside a scenario a
decorated tool is the plain function.

A stubbed call is recorded as a tool call with ``stubbed=True`` and the result the stub gave; a
call to a decorated tool is recorded whether stubbed or not, so a Python agent need not report
its own calls. Agents whose tools run in another process (HTTP, CLI, ACP, OpenAI-compatible)
cannot be stubbed from here: :func:`stubbable_tools` says so and the scenario stops with that.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from fabtest.conversation import ToolCall, jsonable
from fabtest.errors import ToolFailed

__all__ = ["ToolFailed", "ToolStub", "ToolStubs", "current", "record", "registered_tools", "session",
           "stubbable_tools", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


class ArgMatcher(Protocol):
    """One argument pattern of a stub's table (:class:`fabtest.engine.checks.ArgExpectation`)."""

    def matches(self, arguments: dict[str, Any]) -> bool: ...


UNSET: Any = object()


@dataclass(frozen=True)
class Answer:
    """What a stub gives for one call: a result or an error message, after a delay."""

    result: Any
    is_error: bool
    delay_s: float


@dataclass(frozen=True)
class ToolStub:
    """Everything the scenario said about one tool; unset parts leave the real tool's behaviour."""

    name: str
    where: str
    result: Any = UNSET
    cases: tuple[tuple[tuple[ArgMatcher, ...], Any], ...] = ()
    error: str | None = None
    delay_s: float | None = None
    #: an LLM playing the tool (``is simulated as``): ``answer(arguments) -> Answer``
    simulated: Any = None

    @property
    def answers(self) -> bool:
        """True when the stub replaces the tool (a result, argument cases, a failure or a simulation),
        not only delays it."""
        return self.result is not UNSET or bool(self.cases) or self.error is not None or self.simulated is not None

    def over(self, earlier: ToolStub) -> ToolStub:
        """This stub defined at a lower level over ``earlier``: a result or failure replaces the
        earlier result and failure; a delay replaces the earlier delay; the rest is kept."""
        merged = earlier
        if self.answers:
            merged = replace(merged, result=self.result, cases=self.cases, error=self.error, simulated=self.simulated)
        if self.delay_s is not None:
            merged = replace(merged, delay_s=self.delay_s)
        return replace(merged, where=self.where)

    def answer(self, arguments: Mapping[str, Any]) -> Answer | None:
        """The stubbed outcome of a call with ``arguments``; None: the real tool runs (after the delay)."""
        delay = self.delay_s or 0.0
        if self.error is not None:
            return Answer(self.error, True, delay)
        args = dict(arguments)
        for matchers, result in self.cases:
            if all(m.matches(args) for m in matchers):
                return Answer(result, False, delay)
        if self.result is not UNSET:
            return Answer(self.result, False, delay)
        if self.simulated is not None:
            played = self.simulated.answer(args)
            return Answer(played.result, played.is_error, delay)
        if self.cases:
            shown = json.dumps(jsonable(args), ensure_ascii=False)
            return Answer(f"no row of the stub of {self.name} (at {self.where}) matches the arguments {shown}",
                          True, delay)
        return None


@dataclass
class ToolStubs:
    """A scenario's stubs by tool name, level over level (project, Feature / Rule Background, scenario)."""

    by_name: dict[str, ToolStub] = field(default_factory=dict)
    #: faults injected for the whole run (``--fabtest-fault``): they win over every level's stub
    forced: dict[str, ToolStub] = field(default_factory=dict)

    def define(self, stub: ToolStub) -> None:
        earlier = self.by_name.get(stub.name)
        self.by_name[stub.name] = stub if earlier is None else stub.over(earlier)

    def force(self, stub: ToolStub) -> None:
        self.forced[stub.name] = stub

    def get(self, name: str) -> ToolStub | None:
        return self.forced.get(name) or self.by_name.get(name)

    def __bool__(self) -> bool:
        return bool(self.by_name or self.forced)

    def __iter__(self) -> Iterator[ToolStub]:
        return iter([*self.by_name.values(), *(s for n, s in self.forced.items() if n not in self.by_name)])


@dataclass
class _Session:
    stubs: ToolStubs | None
    calls: list[ToolCall] = field(default_factory=list)


_SESSION: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("fabtest_tool_session", default=None)


@contextlib.contextmanager
def session(stubs: ToolStubs | None) -> Iterator[list[ToolCall]]:
    """Stubs active for one agent call; yields the calls recorded on fabtest's side during it."""
    current_session = _Session(stubs)
    token = _SESSION.set(current_session)
    try:
        yield current_session.calls
    finally:
        _SESSION.reset(token)


def current(name: str) -> ToolStub | None:
    """The stub of ``name`` in force for the agent call running now (None: no stub, or no scenario)."""
    active = _SESSION.get()
    return active.stubs.get(name) if active is not None and active.stubs is not None else None


def record(call: ToolCall) -> None:
    """Add a call to the running agent call's record (nothing outside a scenario)."""
    active = _SESSION.get()
    if active is not None:
        active.calls.append(call)


def stubbed_call(name: str, arguments: Mapping[str, Any], answer: Answer, **metadata: Any) -> ToolCall:
    """The record of a call a stub answered."""
    meta = {**metadata, **({"error": True} if answer.is_error else {})}
    return ToolCall(name=name, arguments=dict(arguments), result=jsonable(answer.result), metadata=meta, stubbed=True)


def as_text(result: Any) -> str:
    """A stub's result as a tool message's text: strings as they are, the rest as JSON."""
    return result if isinstance(result, str) else json.dumps(jsonable(result), ensure_ascii=False)


# -- the opt-in registry for Python agents ---------------------------------------------------------
_REGISTRY: dict[str, Callable[..., Any]] = {}


def registered_tools() -> list[str]:
    """The names of every function decorated with :func:`tool` so far, in this process."""
    return list(_REGISTRY)


def tool(func: F | None = None, *, name: str | None = None) -> Any:
    """Make a Python agent's tool visible to fabtest: recorded on every call, stubbable by name.

    ``@fabtest.tool`` (or ``@fabtest.tool(name="lookup")``) on the function the agent calls. Inside
    a scenario, a stub of that name answers instead of the function (``fails with`` raises
    :class:`ToolFailed`, ``takes N seconds`` sleeps first); every call, stubbed or real, becomes
    one of the turn's tool calls. Outside a scenario the function runs unchanged.
    """
    def decorate(fn: F) -> F:
        tool_name = name or fn.__name__
        _REGISTRY[tool_name] = fn
        signature = inspect.signature(fn)

        def arguments_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
            try:
                return dict(signature.bind(*args, **kwargs).arguments)
            except TypeError:
                return {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                if _SESSION.get() is None:
                    return await fn(*args, **kwargs)
                arguments = arguments_of(args, kwargs)
                stub = current(tool_name)
                answer = stub.answer(arguments) if stub is not None else None
                if stub is not None and stub.delay_s:
                    import asyncio  # here: importing fabtest loads no event loop machinery

                    await asyncio.sleep(stub.delay_s)
                if answer is not None:
                    return _stubbed(tool_name, arguments, answer)
                return _real(tool_name, arguments, await _awaited(fn, args, kwargs, tool_name, arguments))

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            if _SESSION.get() is None:
                return fn(*args, **kwargs)
            arguments = arguments_of(args, kwargs)
            stub = current(tool_name)
            answer = stub.answer(arguments) if stub is not None else None
            if stub is not None and stub.delay_s:
                time.sleep(stub.delay_s)
            if answer is not None:
                return _stubbed(tool_name, arguments, answer)
            try:
                value = fn(*args, **kwargs)
            except Exception as exc:
                record(ToolCall(tool_name, arguments, f"{type(exc).__name__}: {exc}", {"error": True}))
                raise
            return _real(tool_name, arguments, value)

        return run  # type: ignore[return-value]

    return decorate(func) if func is not None else decorate


async def _awaited(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], name: str,
                   arguments: dict[str, Any]) -> Any:
    try:
        return await fn(*args, **kwargs)
    except Exception as exc:
        record(ToolCall(name, arguments, f"{type(exc).__name__}: {exc}", {"error": True}))
        raise


def _stubbed(name: str, arguments: dict[str, Any], answer: Answer) -> Any:
    record(stubbed_call(name, arguments, answer))
    if answer.is_error:
        raise ToolFailed(str(answer.result))
    return answer.result


def _real(name: str, arguments: dict[str, Any], value: Any) -> Any:
    record(ToolCall(name, arguments, jsonable(value)))
    return value


# -- which agents can be stubbed -------------------------------------------------------------------
#: adapters whose tools run in another process: fabtest sees their calls only as reported
_REMOTE_ADAPTERS = ("fabtest.agents.http", "fabtest.agents.cli_agent", "fabtest.agents.acp",
                    "fabtest.agents.openai_chat", "fabtest.agents.a2a", "fabtest.agents.ag_ui")


def stubbable_tools(agent: Any) -> list[str] | None:
    """The tool names fabtest can stub for ``agent``; None when its tools are out of fabtest's reach.

    An adapter that runs tools itself says which (``stubbable_tools()``: the built-in agent,
    LangGraph); any other in-process agent can stub the functions decorated with :func:`tool`.
    """
    own = getattr(agent, "stubbable_tools", None)
    if callable(own):
        return list(own())
    if type(agent).__module__ in _REMOTE_ADAPTERS or not _REGISTRY:
        return None
    return registered_tools()
