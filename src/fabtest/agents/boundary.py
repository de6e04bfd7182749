"""The one boundary between fabtest and the agent under test.

Everything user code hands back (``chat``'s return value, calls reported through ``on_tool_call``,
``metadata()``, an HTTP body) is validated here, once, and becomes plain fabtest data; everything
user code raises (``chat``, ``on_tool_call``, ``around()``, ``metadata()``, a factory's
``build()``) goes through :func:`guarded` and becomes an :class:`AgentError` with the user's
exception chained. So a misbehaving agent costs its own scenario (failure type ``error``) and
never the run: nothing past this module sees a tool call whose name is not a string.

Tool calls are accepted in the shapes agents commonly produce, so nobody has to write a mapping:
``ToolCall``, ``{name, arguments}`` and ``{name, args}`` (arguments as an object or a JSON
string), OpenAI's ``{id, type, function: {name, arguments: "<json>"}}``, each with an optional
``result`` or ``output`` and ``metadata``.

One policy for text UTF-8 cannot hold: a lone surrogate (``"\\ud83d"``, half of an emoji cut by an
agent, or a ``\\ud83d`` escape in JSON) is replaced by U+FFFD here, in the reply, its tool calls and
its metadata, so every writer and the console downstream only see encodable text (docs/reliability.md).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import threading
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from fabtest.agents.aio import is_async_callable, run
from fabtest.conversation import AgentResponse, Attachment, Pause, ToolCall
from fabtest.errors import AgentError, AgentTimeout, UsageError, describe, excerpt
from fabtest.llm.base import LLMNotConfigured

__all__ = ["AgentDataError", "accepts_keyword", "agent_traceback", "coerce_pauses", "coerce_response",
           "coerce_tool_call", "guarded", "guarded_async", "merge_tool_calls", "safe_metadata", "without_surrogates"]

T = TypeVar("T")

#: fabtest's own errors pass through the guard unchanged: they already say what went wrong.
#: fabtest's own errors pass through unchanged (a built-in agent without a key is a skip, not a failure)
_OURS = (AgentError, UsageError, LLMNotConfigured)
_FABTEST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: frames under these fabtest directories are user-facing examples, shown like an agent's own
_SHOWN_FABTEST_DIRS = tuple(os.path.join(_FABTEST_DIR, d) + os.sep for d in ("demo", "testing"))


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def without_surrogates(value: Any) -> Any:
    """``value`` with every surrogate code point in its text (keys too, in lists and mappings)
    replaced by U+FFFD: what an agent hands over can then be written and printed as UTF-8."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


class AgentDataError(AgentError):
    """The agent answered, but with data fabtest cannot use; the message names the field."""


def guarded(failed: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call one user hook (``chat``, ``around()``, ``metadata()``, a factory): what it raises becomes an
    AgentError reading ``"<failed> <ExceptionType>: <message>"`` (``failed`` says which hook, e.g.
    ``"the agent's around() failed on exit:"``), with the user's exception chained so its frames
    stay visible."""
    try:
        return func(*args, **kwargs)
    except _OURS:
        raise
    except (Exception, SystemExit) as exc:  # user code: anything it raises is its failure
        raise AgentError(excerpt(f"{failed} {describe(exc)}")) from exc


async def guarded_async(failed: str, awaitable: Awaitable[T]) -> T:
    """:func:`guarded` for a coroutine of user code (an async ``chat``, factory or ``cancel()``)."""
    try:
        return await awaitable
    except _OURS:
        raise
    except (Exception, SystemExit) as exc:  # user code: anything it raises is its failure
        raise AgentError(excerpt(f"{failed} {describe(exc)}")) from exc


def agent_traceback(exc: BaseException) -> str | None:
    """The frames of the agent's own code behind an AgentError (fabtest's frames left out), or None."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, _OURS):
        return None
    frames = [f for f in traceback.extract_tb(cause.__traceback__) if _users_frame(f.filename)]
    if not frames:
        return None
    lines = ["Traceback (the agent's frames, most recent call last):", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(cause), cause)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip()


def _users_frame(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_SHOWN_FABTEST_DIRS):
        return True
    return not path.startswith(_FABTEST_DIR + os.sep) and os.path.basename(path) != "threading.py"


def accepts_keyword(func: Any, name: str) -> bool:
    """True when ``func`` takes a keyword ``name`` (or ``**kwargs``), so plain ``chat(messages)`` agents
    are never handed arguments they do not expect."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


# -- validation ------------------------------------------------------------------------------------


class _ToolCallIn(BaseModel):
    """A tool call as fabtest stores it, after the common shapes were brought to one."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    stubbed: bool = False

    @field_validator("arguments", "metadata", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


def coerce_tool_call(raw: Any, *, where: str = "tool_calls[0]") -> ToolCall:
    """One tool call in any accepted shape as a ToolCall; AgentDataError naming ``where`` otherwise."""
    fields = _normalise_call(raw, where)
    fields["name"] = without_surrogates(fields["name"])  # the rest is made plain (and surrogate-free) by _plain
    try:
        model = _ToolCallIn.model_validate(fields)
    except ValidationError as exc:
        raise AgentDataError(_first_error(exc, where)) from None
    return ToolCall(name=model.name, arguments=_plain(model.arguments, f"{where}.arguments"),
                    result=_plain(model.result, f"{where}.result"),
                    metadata=_plain(model.metadata, f"{where}.metadata"),
                    stubbed=model.stubbed)


def _normalise_call(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, ToolCall):
        return {"name": raw.name, "arguments": raw.arguments, "result": raw.result, "metadata": raw.metadata,
                "stubbed": raw.stubbed}
    if not isinstance(raw, Mapping):
        raise AgentDataError(f"{where}: expected a ToolCall or a mapping with 'name' and 'arguments', "
                             f"got {type(raw).__name__} ({_short(raw)})")
    metadata = raw.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, Mapping) else metadata
    function = raw.get("function")
    if isinstance(function, Mapping):  # OpenAI chat completions: {id, type, function: {name, arguments}}
        name, arguments, args_where = function.get("name"), function.get("arguments"), f"{where}.function.arguments"
    else:
        key = "arguments" if "arguments" in raw else "args"
        name, arguments, args_where = raw.get("name"), raw.get(key), f"{where}.{key}"
    if isinstance(arguments, str):
        arguments = _json_arguments(arguments, args_where)
    if raw.get("id") is not None and (metadata is None or isinstance(metadata, dict)):
        metadata = {"id": raw["id"], **(metadata or {})}
    result = raw["result"] if "result" in raw else raw.get("output")
    return {"name": name, "arguments": arguments, "result": result, "metadata": metadata}


def _json_arguments(text: str, where: str) -> Any:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AgentDataError(f"{where}: not valid JSON ({exc}): {_short(text)}") from None


def coerce_response(value: Any, *, where: str = "") -> AgentResponse:
    """What ``chat`` returned as a validated AgentResponse: an AgentResponse, a string, or a mapping
    with ``text`` (plus ``tool_calls`` and ``metadata``); anything else is an AgentDataError."""
    prefix = f"{where}: " if where else ""
    text: Any
    calls: Any
    metadata: Any
    files: Any = None
    pauses: Any = None
    if isinstance(value, str):
        return AgentResponse(text=without_surrogates(value))
    if isinstance(value, AgentResponse):
        text, calls, metadata, files = value.text, value.tool_calls, value.metadata, value.attachments
        pauses = value.pauses
    elif isinstance(value, Mapping) and "text" in value:
        text, calls, metadata = value.get("text"), value.get("tool_calls"), value.get("metadata")
        files, pauses = value.get("attachments"), value.get("pauses")
    else:
        hint = " (or a mapping with 'text', 'tool_calls', 'metadata')"
        if isinstance(value, Mapping):  # a mapping is allowed, but this one has no reply in it
            keys = ", ".join(repr(str(k)) for k in list(value)[:5]) or "none"
            hint = f" (a mapping needs a 'text' key; it has {keys})"
        elif hasattr(value, "chat"):
            hint = (" (it looks like an agent: if this function is a factory, name its first parameter"
                    " `context` so fabtest calls it once per scenario)")
        raise AgentDataError(f"{prefix}the agent returned {type(value).__name__} ({_short(value)}); "
                             f"expected str or AgentResponse{hint}")
    if not isinstance(text, str):
        raise AgentDataError(f"{prefix}the agent returned bad data: text: expected a string, got "
                             f"{type(text).__name__} ({_short(text)})")
    if calls is None:
        calls = []
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
        raise AgentDataError(f"{prefix}the agent returned bad data: tool_calls: expected a list of tool calls, got "
                             f"{type(calls).__name__} ({_short(calls)})")
    try:
        tool_calls = [coerce_tool_call(call, where=f"tool_calls[{i}]") for i, call in enumerate(calls)]
        meta = _metadata(metadata, "metadata")
        attachments = _attachments(files)
        paused = coerce_pauses(pauses)
    except AgentDataError as exc:
        raise AgentDataError(f"{prefix}the agent returned bad data: {exc}") from None
    return AgentResponse(text=without_surrogates(text), tool_calls=tool_calls, metadata=meta, attachments=attachments,
                         pauses=paused)


_PAUSE_KEYS = {"id", "kind", "tool", "arguments", "question", "metadata"}


def coerce_pauses(value: Any) -> list[Pause]:
    """``pauses``: :class:`fabtest.Pause` objects or mappings with their fields (the HTTP JSON form,
    docs/how-to/approvals.md), each numbered ``pause-N`` when it has no id; AgentDataError naming
    the pause otherwise."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise AgentDataError(f"pauses: expected a list of fabtest.Pause or {{tool, arguments}} objects, got "
                             f"{type(value).__name__} ({_short(value)})")
    out: list[Pause] = []
    for i, item in enumerate(value):
        where = f"pauses[{i}]"
        if isinstance(item, Mapping):
            unknown = sorted(set(map(str, item)) - _PAUSE_KEYS)
            if unknown:
                raise AgentDataError(f"{where}: unknown key {unknown[0]!r} "
                                     f"(a pause has {', '.join(sorted(_PAUSE_KEYS))})")
            fields = dict(item)
            if isinstance(fields.get("arguments"), str):
                fields["arguments"] = _json_arguments(fields["arguments"], f"{where}.arguments")
        elif isinstance(item, Pause):
            fields = {"id": item.id, "kind": item.kind, "tool": item.tool, "arguments": item.arguments,
                      "question": item.question, "metadata": item.metadata}
        else:
            raise AgentDataError(f"{where}: expected a fabtest.Pause, got {type(item).__name__} ({_short(item)})")
        for key in ("tool", "question", "id"):
            if fields.get(key) is not None and not isinstance(fields[key], str):
                raise AgentDataError(f"{where}.{key}: expected a string, got {type(fields[key]).__name__} "
                                     f"({_short(fields[key])})")
        arguments = fields.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise AgentDataError(f"{where}.arguments: expected an object, got {type(arguments).__name__} "
                                 f"({_short(arguments)})")
        try:
            out.append(Pause(tool=without_surrogates(fields.get("tool")) or None,
                             arguments=_plain(dict(arguments or {}), f"{where}.arguments"),
                             question=without_surrogates(fields.get("question")) or None,
                             id=fields.get("id") or f"pause-{i + 1}", kind=fields.get("kind"),
                             metadata=_plain(fields.get("metadata") or {}, f"{where}.metadata")))
        except ValueError as exc:
            raise AgentDataError(f"{where}: {exc}") from None
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise AgentDataError(f"pauses: two pauses share the id {next(i for i in ids if ids.count(i) > 1)!r}")
    return out


def _attachments(value: Any) -> list[Attachment]:
    """``attachments``: a list of :class:`fabtest.Attachment` (files are never guessed from other shapes)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise AgentDataError(f"attachments: expected a list of fabtest.Attachment, got {type(value).__name__} "
                             f"({_short(value)})")
    for i, item in enumerate(value):
        if not isinstance(item, Attachment):
            raise AgentDataError(f"attachments[{i}]: expected a fabtest.Attachment (Attachment.from_bytes(data, "
                                 f"name=...)), got {type(item).__name__} ({_short(item)})")
    return list(value)


def safe_metadata(agent: Any, timeout: float | None = None) -> dict[str, Any]:
    """The agent's ``metadata()`` as plain JSON data ({} without one); a raising or malformed
    ``metadata()`` is an AgentError naming it, one that does not answer within ``timeout`` seconds
    an AgentTimeout (a hung ``metadata()`` must not leave the scenario looking passed)."""
    meta = getattr(agent, "metadata", None)
    if not callable(meta):
        return {}
    if is_async_callable(meta):
        try:
            value = run(guarded_async("the agent's metadata() raised", meta()), timeout=timeout)
        except TimeoutError as exc:  # the agent's own TimeoutError is an AgentError: this is the loop giving up
            within = f" within {timeout:g}s (agent_timeout)" if timeout is not None else f" ({exc})"
            raise AgentTimeout(f"the agent's metadata() did not answer{within}") from None
    elif timeout is None or _adapters_own(meta):
        value = guarded("the agent's metadata() raised", meta)
    else:
        value = _within(timeout, "the agent's metadata()", lambda: guarded("the agent's metadata() raised", meta))
    try:
        return _metadata(value, "metadata()")
    except AgentDataError as exc:
        raise AgentDataError(f"the agent returned bad data: {exc}") from None


def _adapters_own(method: Any) -> bool:
    """A ``metadata()`` of fabtest's own adapters only reads attributes, so it needs no thread to
    bound it: that thread cost several milliseconds a scenario while judge threads held the GIL.
    A user's agent (and a user's subclass overriding ``metadata``) still gets one."""
    module = getattr(getattr(method, "__func__", method), "__module__", None) or ""
    return module.startswith("fabtest.agents.")


def _within(timeout: float, what: str, func: Callable[[], T]) -> T:
    """``func()`` on a daemon thread; AgentTimeout when it has not returned after ``timeout`` seconds."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:  # re-raised on the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=run, name="fabtest-agent-hook", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AgentTimeout(f"{what} did not answer within {timeout:g}s (agent_timeout)")
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])


def _metadata(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AgentDataError(f"{where}: expected a mapping, got {type(value).__name__} ({_short(value)})")
    return cast(dict[str, Any], _plain({str(k): v for k, v in value.items()}, where))


def _plain(value: Any, where: str) -> Any:
    """Plain JSON data (objects become text), so results and reports always serialise."""
    try:
        return without_surrogates(json.loads(json.dumps(value, default=str)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise AgentDataError(f"{where}: not JSON data ({describe(exc)})") from None


def _first_error(exc: ValidationError, where: str) -> str:
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
    got = err.get("input")
    return f"{where}{loc}: {err['msg']}, got {type(got).__name__} ({_short(got)})"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- merging -----------------------------------------------------------------------------------------


def merge_tool_calls(returned: Sequence[ToolCall], reported: Sequence[ToolCall]) -> list[ToolCall]:
    """Calls returned in the response plus calls reported through ``on_tool_call``; a call reported
    both ways (same name and arguments, or the same ``id``) counts once, keeping what either side knew."""
    merged = list(returned)
    unmatched = list(range(len(merged)))
    for call in reported:
        twin = next((i for i in unmatched if _same_call(merged[i], call)), None)
        if twin is None:
            merged.append(call)
            continue
        unmatched.remove(twin)
        kept = merged[twin]
        stubbed = kept.stubbed or call.stubbed  # fabtest's record of a stub's answer is the truth of the result
        result = call.result if call.stubbed else kept.result if kept.result is not None else call.result
        merged[twin] = ToolCall(name=kept.name, arguments=kept.arguments, result=result,
                                metadata={**call.metadata, **kept.metadata}, stubbed=stubbed)
    return merged


def _same_call(a: ToolCall, b: ToolCall) -> bool:
    a_id, b_id = a.metadata.get("id", a.metadata.get("tool_id")), b.metadata.get("id", b.metadata.get("tool_id"))
    if a_id is not None and b_id is not None:
        return a_id == b_id and a.name == b.name
    return a.name == b.name and a.arguments == b.arguments
