"""Unclear or missing errors (reliability round 2, item 7, the rest): an OpenAI answer whose message
is null, a judge answer blocked for safety, ``fabtest calibrate`` with an undeclared criterion; and
an ACP agent echoing an environment secret (item 2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support.acp import ECHO as ECHO_ACP
from support.bad_inputs import BASE_ARGS
from tests.builtin_agent.fake_openai import FakeOpenAI, message

from fabtest.agents.base import AgentError
from fabtest.agents.openai_chat import OpenAIChatAgent
from fabtest.cli import main
from fabtest.conversation import Message
from fabtest.llm.base import LLMBadOutput, LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import Reply


def _null_message(value: Any, finish: str = "content_filter") -> dict[str, Any]:
    body = message("x")
    body["choices"][0].update(message=value, finish_reason=finish)
    return body


@pytest.mark.parametrize(("body", "expected"), [
    (_null_message(None), "choices[0].message is null, expected an object with 'content' (finish_reason: 'content_filter')"),
    (_null_message("just text", "stop"), "choices[0].message is str, expected an object"),
    (_null_message(["a", "b"], "stop"), "choices[0].message is list, expected an object"),
    (_null_message(7, "stop"), "choices[0].message is int, expected an object"),
])
def test_an_openai_answer_without_a_message_object_is_one_clear_agent_error(body: dict[str, Any],
                                                                            expected: str) -> None:
    with FakeOpenAI(lambda _: (200, body)) as server:
        agent = OpenAIChatAgent(server.base_url)
        with pytest.raises(AgentError) as caught:
            agent.chat([Message("user", "hi")])
    assert expected in str(caught.value)
    assert not isinstance(caught.value.__cause__, AttributeError)


def test_the_builtin_agent_on_an_openai_endpoint_says_the_message_is_missing(tmp_path: Path) -> None:
    from fabtest.agents.registry import make_agent

    with FakeOpenAI(lambda _: (200, _null_message(None))) as server:
        agent = make_agent({"provider": "openai", "model": "m", "base_url": server.base_url, "max_retries": 0},
                           {"rootdir": str(tmp_path)}, where="x")
        with pytest.raises(Exception) as caught:
            agent.chat([Message("user", "hi")])
    assert "no choices[0].message object" in str(caught.value)
    assert not isinstance(caught.value, AttributeError)


class _Verdict(BaseModel):
    passed: bool


@pytest.mark.parametrize(("script", "expected"), [
    ("blocked", "the provider blocked the prompt (prompt_feedback.block_reason=SAFETY)"),
    ("SAFETY", "the answer was blocked for safety (finish_reason=SAFETY)"),
    ("PROHIBITED_CONTENT", "the answer was blocked for safety (finish_reason=PROHIBITED_CONTENT)"),
    ("RECITATION", "the answer was blocked for safety (finish_reason=RECITATION)"),
])
def test_a_judge_answer_blocked_for_safety_is_named_as_such(monkeypatch: pytest.MonkeyPatch, script: str,
                                                            expected: str) -> None:
    with FakeGemini() as fake:
        if script == "blocked":
            fake.add_fault("blocked", times=None)
        else:
            fake.add_rule(r"", callback=lambda _request: Reply(text="", finish_reason=script))
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        llm = GeminiLLM(LLMSettings(base_url=fake.base_url, timeout_s=5.0, max_retries=0),
                        backoff_base_s=0.01, backoff_max_s=0.02, bad_output_retries=1)
        with pytest.raises(LLMBadOutput) as caught:
            llm.complete_json("Evaluate this reply", _Verdict)
    assert expected in str(caught.value)
    assert "empty answer" not in str(caught.value)
    # issue 27 point 13: no advice to change a setting fabtest does not have
    assert "relax the model's safety settings" not in str(caught.value)
    assert "fabtest sends no safety settings" in str(caught.value)


@pytest.mark.parametrize(("criterion", "expected"), [
    ("frendly", "'frendly' is not declared (did you mean 'friendly'?)"),
    ("helpfulness", "'helpfulness' is not declared (declared: friendly)"),
])
def test_calibrate_with_an_undeclared_criterion_names_the_criterion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    criterion: str, expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest]\n[tool.fabtest.criteria]\nfriendly = "The reply is warm"\n')
    (tmp_path / "labels.yaml").write_text(f"examples:\n  - {{criterion: {criterion}, response: hi, verdict: passed}}\n")
    assert main(["calibrate", "labels.yaml"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"labels.yaml: examples[0].criterion: {expected}" in err, err
    assert "judge" not in err.split("criterion:", 1)[1].split(":", 1)[0]


def test_an_acp_agent_echoing_an_environment_secret_is_redacted(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "acp-s3cr3t/value\"quoted"
    monkeypatch.setenv("ACP_TOKEN", secret)
    pytester.makefile(".toml", pyproject=(
        '[tool.fabtest]\nresults_dir = "results"\nagent_timeout = 120\n\n[tool.fabtest.agents]\n'
        f'echo = {{ acp = [{json.dumps(sys.executable)}, {json.dumps(ECHO_ACP)}], timeout = 60, '
        'env = { ACP_TOKEN = "${ACP_TOKEN}" } }\n'))
    pytester.makefile(".feature", acp='Feature: F\n  Background:\n    Given the agent "echo"\n\n'
                                      '  Scenario: Echoes its token\n    When the user says "env ACP_TOKEN"\n'
                                      '    Then the response must match "nothing like it"\n')
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_acp_secret")
    output = result.stdout.str() + result.stderr.str()
    written = (pytester.path / "results" / "exp_acp_secret.json").read_text(encoding="utf-8")
    assert "token: ***" in output, output  # the reply is shown, the token is not
    for form in (secret, json.dumps(secret)[1:-1], "acp-s3cr3t"):
        assert form not in output and form not in written, form
