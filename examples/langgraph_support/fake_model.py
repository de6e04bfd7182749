"""The chat model the support agent runs on without a key: a LangChain chat model with a script.

Per user request it looks the account up (by the phone number the user gave), lists the plans,
changes to the plan the user asked for, then says what it did; when a tool fails it says so and
stops. It reads the whole conversation, so a request made before the phone number counts.
"""

import json
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

PHONE = re.compile(r"\d[\d ]{6,}\d")


class ScriptedSupportModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        asked = " ".join(str(m.content) for m in messages if isinstance(m, HumanMessage)).lower()
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
        if not results:
            phone = PHONE.search(str(messages[start].content))
            if phone is None:
                return AIMessage("Sure, what is your phone number?")
            return _call("lookup_account", {"phone": phone.group(0)}, len(messages))
        last = results[-1]
        if last.status == "error":
            return AIMessage(f"Sorry, {last.name} is not working right now ({last.content}); please try again later.")
        if last.name == "lookup_account":
            return _call("list_plans", {}, len(messages))
        if last.name == "list_plans":
            account = json.loads(str(results[0].content))
            wanted = next((p["name"] for p in json.loads(str(last.content)) if p["name"] in asked), None)
            if wanted is None:
                return AIMessage("We offer " + ", ".join(p["name"] for p in json.loads(str(last.content))) + ".")
            return _call("change_plan", {"account_id": account["account_id"], "plan": wanted}, len(messages))
        done = json.loads(str(last.content))
        return AIMessage(f"Done: account {done['account_id']} is now on {done['plan']}.")


def _call(name: str, args: dict, number: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{number}"}])
