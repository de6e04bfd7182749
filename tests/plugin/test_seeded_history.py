"""``Given the conversation so far``: a scenario starts deep in a conversation.

The seeded messages reach the agent as history before the first user message, the judge and the
simulated user read them before the turns, and the experiment keeps them apart from the turns.
"""

from __future__ import annotations

from fabtest.conversation import AgentResponse, Conversation, Message, Turn
from fabtest.engine.simulator import Simulator, SimulatorConfig
from fabtest.testing import FakeLLM

AGENT = '''
def chat(messages):
    return f"{len(messages)} messages: " + " / ".join(f"{m.role}={m.content}" for m in messages)


def build(context):
    return chat
'''

FEATURE = '''
Feature: Deep in a conversation
  Background:
    Given the conversation so far:
      | role  | message                          |
      | user  | I want to change my plan         |
      | agent | Sure, what is your phone number? |

  Scenario: The agent gets the history first
    When the user says "0176 555 0101"
    Then the response must match "^3 messages: user=I want to change my plan / agent=Sure, what is your phone number\\? / user=0176 555 0101$"
    And the transcript must contain "Agent: Sure, what is your phone number?"

  Scenario: A scenario replaces the Background's history
    Given the conversation so far:
      | role      | message   |
      | user      | hello     |
      | assistant | hi there  |
    When the user says "bye"
    Then the response must match "^3 messages: user=hello / agent=hi there / user=bye$"

  Scenario: A role that is neither user nor agent
    Given the conversation so far:
      | role   | message |
      | system | be nice |
    When the user says "bye"

  Scenario: History after the conversation started
    When the user says "hi"
    Given the conversation so far:
      | role | message |
      | user | hello   |
'''


def test_seeded_history_is_sent_to_the_agent_and_recorded(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/h.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm")
    result.assert_outcomes(passed=2, failed=2)
    by_name = project.scenarios()
    first = by_name["The agent gets the history first"]
    assert first["history"] == [{"role": "user", "content": "I want to change my plan"},
                                {"role": "agent", "content": "Sure, what is your phone number?"}]
    assert first["turns"] == 1 and first["transcript"][0]["user"] == "0176 555 0101"
    assert by_name["A scenario replaces the Background's history"]["history"][1] == {"role": "agent",
                                                                                      "content": "hi there"}
    line = project.line_of(FEATURE, "| system | be nice |")
    assert by_name["A role that is neither user nor agent"]["failure_message"] == (
        f"features/h.feature:{line}: role 'system' is not user or agent")
    late = by_name["History after the conversation started"]["failure_message"]
    assert "the conversation so far comes after the conversation started" in late


def test_a_scenario_without_history_writes_no_history_key(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/n.feature", """
        Feature: Plain
          Scenario: No history
            When the user says "hi"
            Then the response must match "^1 messages"
        """)
    project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm").assert_outcomes(passed=1)
    assert "history" not in project.scenarios()["No history"]


def test_the_simulated_user_continues_the_seeded_conversation() -> None:
    """The simulator's prompt shows the seeded messages first, in order, as the conversation so far
    (not "write your opening message"), so it answers the agent's pending question."""
    conversation = Conversation(history=[Message("user", "I want to change my plan"),
                                         Message("agent", "Sure, what is your phone number?")])
    simulator = Simulator(FakeLLM().simulated_user(["0176 555 0101"]), SimulatorConfig(goal="Change my plan"))
    prompt = simulator.build_prompt(conversation)
    so_far = prompt.split("THE CONVERSATION SO FAR")[1]
    assert "You: I want to change my plan\nAgent: Sure, what is your phone number?" in so_far
    assert "nothing yet" not in so_far
    conversation.turns.append(Turn(1, "0176 555 0101", AgentResponse("You are on basic.")))
    so_far = simulator.build_prompt(conversation).split("THE CONVERSATION SO FAR")[1]
    assert so_far.index("Agent: Sure, what is") < so_far.index("You: 0176 555 0101") < so_far.index("on basic")
    # the judge's conversation subject reads the same order
    assert conversation.transcript().splitlines() == [
        "User: I want to change my plan", "Agent: Sure, what is your phone number?",
        "User: 0176 555 0101", "Agent: You are on basic."]


BOOKING_AGENT = '''
def chat(messages):
    text = messages[-1].content
    if text.startswith("book"):
        return "Done: your booking B-4711 is confirmed."
    return f"you said: {text}"


def build(context):
    return chat
'''

BOOKING = '''
Feature: Values across turns
  Scenario: The reference comes back
    When the user says "book a room"
    And the response mentions "booking (B-\\d+)" as "ref"
    And the user says "cancel {ref}, not {other}"
    Then the response must match "^you said: cancel B-4711, not \\{other\\}$"
    And the transcript must contain "cancel {ref}"
    And the agent must not call "x{ref}"

  Scenario: Nothing to take
    When the user says "hello"
    And the response mentions "B-\\d+" as "ref"
    Then the transcript must contain "never"
'''


def test_a_value_taken_from_a_reply_fills_later_steps(project):
    project.pyproject()
    project.agent(BOOKING_AGENT)
    project.feature("features/v.feature", BOOKING)
    project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm").assert_outcomes(passed=1, failed=1)
    by_name = project.scenarios()
    taken = by_name["The reference comes back"]["expectations"]["details"]
    assert (taken[0]["type"], taken[0]["value"], taken[0]["turn"]) == ("mentions", "B-4711", 1)
    assert by_name["The reference comes back"]["transcript"][1]["user"] == "cancel B-4711, not {other}"
    assert any(c["criterion"] == "transcript:cancel B-4711" and c["status"] == "passed" for c in taken)
    assert any(c["criterion"] == "not_call_tool:xB-4711" for c in taken)
    missed = by_name["Nothing to take"]
    assert missed["failure_type"] == "assertion"
    assert "the response does not mention /B-\\d+/" in missed["failure_message"]


JUDGED = '''
Feature: Judged values
  Scenario: The judge takes the reference
    When the user says "book a room"
    And the response mentions a booking reference as "ref"
    And the user says "cancel {ref}"
    Then the response must match "^you said: cancel B-4711$"

  Scenario: The reply has none
    When the user says "hello"
    And the response mentions the total price as "total"
'''


def test_the_judge_takes_a_described_value(project):
    project.pyproject()
    project.agent(BOOKING_AGENT)
    project.feature("features/j.feature", JUDGED)
    project.write("fake.yaml", 'extract:\n  "a booking reference": "B-4711"\n  "the total price": null\n')
    result = project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=1, failed=1)
    by_name = project.scenarios()
    [taken, _] = by_name["The judge takes the reference"]["expectations"]["details"]
    assert (taken["type"], taken["value"], taken["what"]) == ("mentions", "B-4711", "a booking reference")
    assert by_name["The judge takes the reference"]["usage"]["judge"]["calls"] == 1
    assert "the response does not mention the total price" in by_name["The reply has none"]["failure_message"]
