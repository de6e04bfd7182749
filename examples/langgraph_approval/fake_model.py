"""The chat model the desk runs on without a key: a LangChain chat model with a script.

It asks for the refund tool when the user names an order, and answers from the tool's result
once it came back (after the person's decision).
"""

import json
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedChatModel(BaseChatModel):
    orders: dict[str, float] = {}

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self  # the script knows its one tool

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            done = json.loads(last.content)
            reply = (AIMessage(f"Refunded {done['amount']:.2f} EUR for order {done['order']}.") if done["refunded"]
                     else AIMessage(f"I did not refund the order: {done['reason']}."))
        else:
            order = re.search(r"\b([A-Z]\d)\b", str(last.content))
            if order and order.group(1) in self.orders:
                args = {"order": order.group(1), "amount": self.orders[order.group(1)]}
                reply = AIMessage("", tool_calls=[{"name": "refund", "args": args, "id": f"call_{len(messages)}"}])
            else:
                reply = AIMessage("Which order should I refund?")
        reply.usage_metadata = {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
        reply.response_metadata = {"model_name": "gemini-2.5-flash"}
        return ChatResult(generations=[ChatGeneration(message=reply)])
