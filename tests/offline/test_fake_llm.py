"""FakeLLM answers the judge and the simulator by kind of call, whatever the prompts say."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabtest.engine import judge as judge_module
from fabtest.engine import simulator as simulator_module
from fabtest.conversation import AgentResponse, Conversation, ToolCall, Turn
from fabtest.config.criteria import Criterion
from fabtest.errors import UsageError
from fabtest.engine.judge import Judge
from fabtest.llm.base import LLMError
from fabtest.engine.simulator import Simulator, SimulatorConfig
from fabtest.testing import FakeLLM, FakeLLMError, load_fake_llm
from fabtest.engine.topics import Topic

FRIENDLY, CONCISE = Criterion("friendly", "The agent is warm"), Criterion("concise", "At most 3 sentences")


def turn(number: int, user: str, agent: str, *calls: ToolCall) -> Turn:
    return Turn(number=number, user=user, response=AgentResponse(text=agent, tool_calls=list(calls)))


def user_lines(fake: FakeLLM, conversation: Conversation, count: int) -> list[tuple[str, bool]]:
    sim = Simulator(fake, SimulatorConfig(goal="Order a pizza"))
    out = []
    for number in range(1, count + 1):
        result = sim.next_message(conversation)
        out.append((result.text, result.goal_complete))
        conversation.turns.append(turn(number, result.text, "ok"))
    return out


def test_the_simulated_user_says_its_lines_then_completes_its_goal_in_every_conversation() -> None:
    fake = FakeLLM().simulated_user(["hi", "a large pepperoni", "that's all"], then="bye")
    first = user_lines(fake, Conversation(), 4)
    assert first == [("hi", False), ("a large pepperoni", False), ("that's all", False), ("bye", True)]
    assert user_lines(fake, Conversation(), 1) == [("hi", False)]  # a new conversation starts over
    assert [c.purpose for c in fake.calls] == ["simulated_user"] * 5
    assert fake.calls[0].goal == "Order a pizza"


def test_verdicts_by_name_with_a_default_and_by_description() -> None:
    fake = FakeLLM().verdicts({"The agent quotes a price": "failed"}, default="passed", friendly=False)
    judge = Judge(fake)
    price = Criterion("step 1", "The agent quotes a price")
    result = judge.evaluate_criteria([FRIENDLY, CONCISE, price], subject="User: hi\nAgent: hello", scope="response")
    assert [(v.criterion, v.verdict) for v in result.value] == [
        ("friendly", "failed"), ("concise", "passed"), ("step 1", "failed")]
    call = fake.calls[-1]
    assert call.purpose == "criteria" and call.criterion_names == ["friendly", "concise", "step 1"]
    assert call.scope == "response" and "hello" in call.subject


def test_a_verdict_function_sees_one_criterion_and_may_give_its_reasoning() -> None:
    fake = FakeLLM().verdicts(default=lambda call: ("passed", f"checked {call.criteria[0].name}")
                              if "hello" in call.subject else "failed")
    result = Judge(fake).evaluate_criteria([FRIENDLY, CONCISE], subject="Agent: hello", scope="response")
    assert [(v.verdict, v.reasoning) for v in result.value] == [
        ("passed", "checked friendly"), ("passed", "checked concise")]


def test_what_is_not_scripted_is_an_error_naming_the_method_to_call() -> None:
    judge = Judge(FakeLLM().verdicts(friendly="passed"))
    with pytest.raises(FakeLLMError, match=r"no verdict scripted for the criterion 'concise'.*fake\.verdicts"):
        judge.evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response")
    with pytest.raises(FakeLLMError, match=r"fake\.goal_achieved"):
        judge.goal_achieved("g", "t")
    with pytest.raises(FakeLLMError, match=r"fake\.simulated_user"):
        Simulator(FakeLLM(), SimulatorConfig(goal="g")).next_message(Conversation())
    assert issubclass(FakeLLMError, LLMError)  # failure type "error", never a silent pass


def test_topic_goal_intent_and_grounding() -> None:
    fake = (FakeLLM().topic("paying", "ordering").goal_achieved(False)
            .intents({"confirm the order": "passed"}, default="failed").grounded(menu=True, default=False))
    judge = Judge(fake)
    greeting, ordering = Topic("greeting", "greets"), Topic("ordering", "takes orders")
    assert judge.choose_topic(greeting, [ordering], "User: hi\nAgent: hi").value == "ordering"
    assert judge.choose_topic(ordering, [], "x").value == "ordering"  # no scripted topic may follow: stay
    assert fake.calls[-1].current_topic == "ordering" and fake.calls[-2].candidates == ("greeting", "ordering")
    assert judge.goal_achieved("Order a pizza", "...").value.verdict == "failed"
    assert judge.intent("x", "Confirm the  order").value.verdict == "passed"
    assert judge.intent("x", "greet").value.verdict == "failed"
    menu = ToolCall("menu", {}, {"pepperoni": 12})
    assert judge.grounding("Pepperoni is 12 euros", "menu", [menu]).value.passed
    other = ToolCall("prices", {}, {})
    grounding = judge.grounding("Pepperoni is 99 euros", "prices", [other]).value
    assert not grounding.passed and grounding.unsupported == ["Pepperoni is 99 euros"]


def test_answers_do_not_depend_on_the_wording_of_the_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """fabtest may reword every prompt in a release: the script still holds."""
    for name in ("CRITERIA_PROMPT", "GOAL_PROMPT", "TOPIC_PROMPT", "SYSTEM_PROMPT"):
        monkeypatch.setattr(judge_module, name, "Reworded {{}} " + "x" * 10)
    monkeypatch.setattr(simulator_module, "USER_PROMPT", "Something else entirely")
    monkeypatch.setattr(simulator_module, "SYSTEM_PROMPT", "Be a customer")
    fake = FakeLLM().simulated_user(["hi"]).verdicts(friendly="failed").goal_achieved(True).topic("ordering")
    judge = Judge(fake)
    assert judge.evaluate_criteria([FRIENDLY], subject="x", scope="response").value[0].verdict == "failed"
    assert judge.goal_achieved("g", "t").value.verdict == "passed"
    assert judge.choose_topic(Topic("greeting", ""), [Topic("ordering", "")], "x").value == "ordering"
    assert Simulator(fake, SimulatorConfig(goal="g")).next_message(Conversation()).text == "hi"


def test_a_yaml_script_uses_the_same_words(tmp_path: Path) -> None:
    script = tmp_path / "fake.yaml"
    script.write_text("""
simulated_user: {lines: ["hi", "a large pepperoni"], then: "bye"}
verdicts: {default: passed, friendly: failed}
intents: {default: passed}
goal_achieved: true
topic: ordering
grounded: {default: true, prices: false}
""", encoding="utf-8")
    fake = load_fake_llm("fake.yaml", root=tmp_path)
    judge = Judge(fake)
    assert [v.verdict for v in judge.evaluate_criteria([FRIENDLY, CONCISE], subject="x", scope="response").value] \
        == ["failed", "passed"]
    assert judge.goal_achieved("g", "t").value.passed is True
    assert user_lines(fake, Conversation(), 3)[2] == ("bye", True)
    assert not judge.grounding("x", "prices", [ToolCall("prices")]).value.passed


@pytest.mark.parametrize(("text", "message"), [
    ("verdicts: {friendly: maybe}\n", r"fake\.yaml: .*friendly.*expected passed, failed, inconclusive"),
    ("simulated_usr: [hi]\n", r"fake\.yaml: unknown key 'simulated_usr' \(did you mean 'simulated_user'\?\)"),
    ("goal_achieved: [1]\n", r"fake\.yaml: goal_achieved"),
    ("- hi\n", r"fake\.yaml: expected a mapping"),
    ("verdicts: {a: [\n", r"fake\.yaml: invalid YAML"),
])
def test_a_bad_script_is_one_line_naming_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "fake.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=message) as info:
        load_fake_llm("fake.yaml", root=tmp_path)
    assert "\n" not in str(info.value)


def test_a_missing_script_and_a_module_that_is_no_llm_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope\.yaml does not exist"):
        load_fake_llm("nope.yaml", root=tmp_path)
    with pytest.raises(UsageError, match=r"--fabtest-fake-llm"):
        load_fake_llm("json:dumps")
