"""The model the shop runs on without a key: an OpenAI Agents SDK Model with a script.

It asks for get_price when the user names an item, and answers from the tool's output once it
came back. It is named gpt-4.1-mini and reports token usage, so the turn is priced with
[tool.fabtest.prices] "gpt-4.1-mini" in pyproject.toml.
"""

import ast
import json
from typing import Any

from agents import ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

ITEMS = ("green tea", "black tea")


class ScriptedModel(Model):
    model = "gpt-4.1-mini"  # the name fabtest prices the turn with

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        last = items[-1]
        if last.get("type") == "function_call_output":
            quote = _data(last["output"])
            output: Any = _message(f"The {quote['item']} costs {quote['price']:.2f} {quote['currency']}.")
        else:
            item = next((i for i in ITEMS if i in str(last.get("content", "")).lower()), None)
            output = (ResponseFunctionToolCall(type="function_call", call_id=f"call_{len(items)}", name="get_price",
                                               arguments=json.dumps({"item": item}))
                      if item else _message(f"Which tea would you like a price for? We sell {' and '.join(ITEMS)}."))
        prompt = sum(len(str(i.get("content", i.get("output", ""))).split()) for i in items)
        return ModelResponse(output=[output], response_id=None,
                             usage=Usage(requests=1, input_tokens=prompt, output_tokens=12, total_tokens=prompt + 12))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def _data(output: Any) -> dict:
    """The tool's output as the SDK sends it to the model: str() of the returned dict."""
    return output if isinstance(output, dict) else ast.literal_eval(output)
