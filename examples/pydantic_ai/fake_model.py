"""The model the shop runs on without a key: PydanticAI's own FunctionModel, scripted.

It asks for get_price when the user names an item, and answers from the tool's result once it
came back. It reports itself as gemini-2.5-flash, so the turn's tokens are priced like that model.
"""

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

ITEMS = ("green tea", "black tea")


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts
    returned = [p for p in last if isinstance(p, ToolReturnPart)]
    if returned:
        quote = returned[-1].content
        return ModelResponse(parts=[TextPart(f"The {quote['item']} costs {quote['price']:.2f} {quote['currency']}.")])
    asked = " ".join(str(getattr(p, "content", "")) for p in last).lower()
    item = next((i for i in ITEMS if i in asked), None)
    if item is None:
        return ModelResponse(parts=[TextPart(f"Which tea would you like a price for? We sell {' and '.join(ITEMS)}.")])
    return ModelResponse(parts=[ToolCallPart("get_price", {"item": item})])


def scripted_model() -> FunctionModel:
    return FunctionModel(_reply, model_name="gemini-2.5-flash")
