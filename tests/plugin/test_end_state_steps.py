"""End state: what the conversation left in the agent's ``state()``, whatever path the agent took."""

from __future__ import annotations

import textwrap

from fabtest.engine import end_state

AGENT = '''
class Shop:
    def __init__(self):
        self.db = {"account": {"id": "A-17", "plan": "basic"}, "orders": []}

    def chat(self, messages):
        text = messages[-1].content
        if text.startswith("plan "):
            self.db["account"]["plan"] = text.split()[1]
        if text.startswith("order "):
            self.db["orders"].append({"item": text.split()[1], "total": int(text.split()[2])})
        return "ok"

    def state(self):
        return self.db


class AsyncShop(Shop):
    async def state(self):
        return {"account": {"plan": "async"}}


def build(context):
    return Shop()


def build_async(context):
    return AsyncShop()


def stateless(context):
    return lambda messages: "ok"
'''

PYPROJECT = '''
agent = "mybot:build"

[tool.fabtest.agents]
async_shop = "mybot:build_async"
stateless = "mybot:stateless"
'''

FEATURE = '''
Feature: End state
  Scenario: The plan changed and the order is in
    When the user says "plan unlimited"
    And the user says "order phone 120"
    Then the state "account.plan" must be "unlimited"
    And the state must include:
      | path           | value      |
      | account.id     | A-17       |
      | orders.0.item  | phone      |
      | orders.0.total | >= 100     |
      | account.plan   | /^unl/     |

  Scenario: Soft misses are recorded
    When the user says "plan basic"
    Then the state "account.plan" should be "unlimited"
    And the state "orders.0.item" should be "phone"
    And the state "account.plan" must be "basic"

  Scenario: An async state
    Given the agent "async_shop"
    When the user says "hi"
    Then the state "account.plan" must be "async"

  Scenario: An agent without state
    Given the agent "stateless"
    When the user says "hi"
    Then the state "account.plan" must be "unlimited"
'''


def test_state_steps_read_the_agents_state_after_the_conversation(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENT)
    project.feature("features/s.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm")
    result.assert_outcomes(passed=3, failed=1)
    by_name = project.scenarios()
    kept = by_name["The plan changed and the order is in"]["expectations"]["details"]
    assert [(c["criterion"], c["status"]) for c in kept] == [
        ("state:account.plan", "passed"), ("state:account.id", "passed"), ("state:orders.0.item", "passed"),
        ("state:orders.0.total", "passed"), ("state:account.plan", "passed")]
    assert kept[3]["actual"] == 120 and kept[3]["expected"] == ">= 100" and kept[0]["turn"] is None
    soft = by_name["Soft misses are recorded"]["evaluations"]["details"]
    assert [(c["status"], c["details"]) for c in soft] == [
        ("failed", 'state account.plan is "basic", not unlimited'),
        ("failed", "no state at orders.0.item (orders is a list of 0)")]
    message = by_name["An agent without state"]["failure_message"]
    lines = textwrap.dedent(FEATURE).lstrip("\n").splitlines()
    line = max(i for i, text in enumerate(lines, start=1) if 'the state "account.plan" must be "unlimited"' in text)
    assert message.startswith(f"features/s.feature:{line}: the agent (CallableAgent) exposes no state: give it a "
                              "state() method"), message


def test_paths_walk_mappings_lists_and_attributes() -> None:
    class Account:
        plan = "basic"

    state = {"accounts": [{"owner": Account()}]}
    assert end_state.lookup(state, "accounts.0.owner.plan") == (True, "basic", "")
    assert end_state.lookup(state, "accounts.1") == (False, None, "accounts is a list of 1")
    assert end_state.lookup(state, "orders") == (False, None, "the state has accounts")
