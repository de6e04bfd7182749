"""PydanticAI's bank-support example run as written (issue 40 item 1): the table's ``context``
factory builds the run's ``deps`` (without them the system prompt fails), the deps are the end
state, and the ``@fabtest.tool`` that takes ``RunContext`` is recorded once. The fixture agent is
tests/frameworks/published/bank_support.py."""

from __future__ import annotations

import json

import pytest

from fabtest.agents.base import AgentError
from fabtest.conversation import Message
from fabtest.engine import end_state
from fabtest.engine.turns import call_agent

from .helpers import build, require

require("pydantic_ai")

SPEC = "frameworks.published.bank_support"


def test_without_deps_the_example_fails() -> None:
    with pytest.raises(AgentError, match="'NoneType' object has no attribute 'db'"):
        call_agent(build("pydantic_ai", f"{SPEC}:support_agent"), [Message("user", "What is my balance?")],
                   timeout=30)


def test_the_context_factory_gives_the_deps_and_the_end_state() -> None:
    agent = build("pydantic_ai", f"{SPEC}:support_agent", context=f"{SPEC}:support_deps")
    response = call_agent(agent, [Message("user", "What is my balance?")], timeout=30)
    [balance, _output] = response.tool_calls  # the output tool is PydanticAI's final_result call
    assert (balance.name, balance.arguments, balance.result) == ("customer_balance", {"include_pending": True},
                                                                 "$123.45")
    assert json.loads(response.text)["support_advice"] == "Hello John, your balance is $123.45."
    state = end_state.read_state(agent, where="f:1")
    assert end_state.lookup(state, "balance_checks") == (True, 1, "")
    assert agent.stubbable_tools() == ["customer_balance"]
