"""Agents that answer what fabtest cannot use; each must cost its own scenario, named by field."""

import datetime

from fabtest import AgentResponse
from fabtest.conversation import ToolCall


def _reply(value):
    return lambda context: (lambda messages: value)


returns_int = _reply(42)
returns_none = _reply(None)
returns_list = _reply(["hello"])
returns_bytes = _reply(b"hello")
returns_dict_without_text = _reply({"reply": "hello"})
text_is_int = _reply(AgentResponse(text=3))
text_is_none = _reply(AgentResponse(text=None))
dict_text_is_list = _reply({"text": ["a"]})
tool_calls_is_str = _reply(AgentResponse(text="ok", tool_calls="notalist"))
tool_calls_is_dict = _reply(AgentResponse(text="ok", tool_calls={"name": "a"}))
tool_calls_is_int = _reply(AgentResponse(text="ok", tool_calls=5))
tool_call_is_int = _reply(AgentResponse(text="ok", tool_calls=[5]))
tool_call_is_str = _reply(AgentResponse(text="ok", tool_calls=["search"]))
tool_call_name_int = _reply(AgentResponse(text="ok", tool_calls=[ToolCall(5, {})]))
tool_call_name_empty = _reply(AgentResponse(text="ok", tool_calls=[ToolCall("", {})]))
tool_call_name_missing = _reply(AgentResponse(text="ok", tool_calls=[{"arguments": {}}]))
tool_call_arguments_list = _reply(AgentResponse(text="ok", tool_calls=[ToolCall("a", [1, 2])]))
tool_call_arguments_bad_json = _reply(AgentResponse(text="ok", tool_calls=[{"name": "a", "arguments": "{oops"}]))
tool_call_args_json_list = _reply(AgentResponse(text="ok", tool_calls=[{"name": "a", "args": "[1, 2]"}]))
openai_arguments_bad_json = _reply({"text": "ok", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{'single': 'quotes'}"}}]})
openai_name_missing = _reply({"text": "ok", "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]})
tool_call_metadata_str = _reply(AgentResponse(text="ok", tool_calls=[ToolCall("a", {}, metadata="fast")]))
tool_call_metadata_list = _reply(AgentResponse(text="ok", tool_calls=[{"name": "a", "arguments": {}, "metadata": [1]}]))
second_tool_call_bad = _reply(AgentResponse(text="ok", tool_calls=[ToolCall("a", {}), ToolCall(None, {})]))
metadata_is_str = _reply(AgentResponse(text="ok", metadata="model-x"))
metadata_is_list = _reply(AgentResponse(text="ok", metadata=[("model", "x")]))
_cycle: dict = {}
_cycle["self"] = _cycle
metadata_is_circular = _reply(AgentResponse(text="ok", metadata=_cycle))
arguments_circular = _reply(AgentResponse(text="ok", tool_calls=[ToolCall("a", {"x": _cycle})]))


def reports_garbage(context):
    def chat(messages, on_tool_call=None):
        on_tool_call(42)
        return "ok"
    return chat


def reports_nameless(context):
    def chat(messages, on_tool_call=None):
        on_tool_call({"args": {}})
        return "ok"
    return chat


class MetadataReturnsStr:
    def chat(self, messages):
        return "ok"

    def metadata(self):
        return "v1"


class MetadataRaises:
    def chat(self, messages):
        return "ok"

    def metadata(self):
        raise RuntimeError("metadata exploded")


class MetadataNotJson:
    def chat(self, messages):
        return "ok"

    def metadata(self):
        return {"started": datetime.datetime(2026, 1, 1), "loop": _cycle}


def exits(context):
    def chat(messages):
        raise SystemExit(3)
    return chat


def factory_raises(context):
    raise LookupError("no tenant")


def factory_returns_int(context):
    return 7
