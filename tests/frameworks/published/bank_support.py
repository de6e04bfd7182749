"""A bank's support agent on PydanticAI, in the shape of PydanticAI's own example
(pydantic/pydantic-ai, ``examples/pydantic_ai_examples/bank_support.py``): dependencies with the
customer's id and a database, a dynamic system prompt and a tool that read them through
``RunContext``, and a structured output.

Written for fabtest's tests after that example, not copied from it. Two changes: the model is a
``FunctionModel`` scripted here (offline), and ``@fabtest.tool`` sits under ``@support_agent.tool``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import fabtest


class DatabaseConn:
    """A stand-in for the bank's database."""

    async def customer_name(self, *, id: int) -> str | None:
        return "John" if id == 123 else None

    async def customer_balance(self, *, id: int, include_pending: bool) -> float:
        return (123.45 if include_pending else 100.00) if id == 123 else 42


@dataclass
class SupportDependencies:
    customer_id: int
    db: DatabaseConn = field(default_factory=DatabaseConn)
    balance_checks: int = 0  # what the tool leaves behind, for the end state


def support_deps() -> SupportDependencies:
    """The run's dependencies (``context = "...:support_deps"`` in the agent table)."""
    return SupportDependencies(customer_id=123)


class SupportOutput(BaseModel):
    support_advice: str = Field(description="Advice returned to the customer")
    block_card: bool = Field(description="Whether to block their card")
    risk: int = Field(description="Risk level of the query", ge=0, le=10)


def _scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the balance once, then answer with the output tool, naming the customer."""
    system = " ".join(str(getattr(p, "content", "")) for m in messages for p in m.parts
                      if type(p).__name__ == "SystemPromptPart")
    name = "John" if "'John'" in system else "customer"
    returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart) and p.tool_name == "customer_balance"]
    if returned:
        advice = f"Hello {name}, your balance is {returned[0].content}."
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name,
                                                 {"support_advice": advice, "block_card": False, "risk": 1})])
    return ModelResponse(parts=[ToolCallPart("customer_balance", {"include_pending": True})])


support_agent = Agent(
    FunctionModel(_scripted, model_name="gpt-4o"),
    deps_type=SupportDependencies,
    output_type=SupportOutput,
    system_prompt="You are a support agent in our bank. Reply using the customer's name.",
)


@support_agent.system_prompt
async def add_customer_name(ctx: RunContext[SupportDependencies]) -> str:
    customer_name = await ctx.deps.db.customer_name(id=ctx.deps.customer_id)
    return f"The customer's name is {customer_name!r}"


@support_agent.tool
@fabtest.tool
async def customer_balance(ctx: RunContext[SupportDependencies], include_pending: bool) -> str:
    """Returns the customer's current account balance."""
    ctx.deps.balance_checks += 1
    balance = await ctx.deps.db.customer_balance(id=ctx.deps.customer_id, include_pending=include_pending)
    return f"${balance:.2f}"
