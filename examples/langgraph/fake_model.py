"""The chat model the shop runs on without a key: a LangChain chat model with a script.

It asks for get_price when the user names an item, and answers from the tool's result once it
came back. Its messages carry token usage and say they come from gemini-2.5-flash, so the turn's
tokens are priced like that model.
"""

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

ITEMS = ("green tea", "black tea")


class ScriptedChatModel(BaseChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self  # the script knows its one tool

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            quote = json.loads(last.content)
            reply = AIMessage(f"The {quote['item']} costs {quote['price']:.2f} {quote['currency']}.")
        else:
            item = next((i for i in ITEMS if i in str(last.content).lower()), None)
            reply = (AIMessage("", tool_calls=[{"name": "get_price", "args": {"item": item}, "id": f"call_{len(messages)}"}])
                     if item else AIMessage(f"Which tea would you like a price for? We sell {' and '.join(ITEMS)}."))
        prompt = sum(len(str(m.content).split()) for m in messages)
        reply.usage_metadata = {"input_tokens": prompt, "output_tokens": 12, "total_tokens": prompt + 12}
        reply.response_metadata = {"model_name": "gemini-2.5-flash"}
        return ChatResult(generations=[ChatGeneration(message=reply)])
