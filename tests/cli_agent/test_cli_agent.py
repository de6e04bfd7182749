"""CliAgent against the fake CLI in tests/fixtures/fake_cli.py."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from fabtest.agents.base import AgentError, AgentTimeout
from fabtest.agents.cli_agent import CliAgent, gemini_cli, parse_stream_json
from fabtest.conversation import Message, ToolCall

FAKE = str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_cli.py")
FIRST = [sys.executable, FAKE, "--skip-trust", "-p", "{prompt}", "-m", "{model}", "-o", "stream-json",
         "--approval-mode", "yolo", "--session-id", "{session_id}"]


def make(tmp_path: Path, mode: str = "echo", **kw) -> CliAgent:
    env = {"FAKE_CLI_MODE": mode, "FAKE_CLI_STATE_DIR": str(tmp_path / "state"),
           "FAKE_CLI_PID_FILE": str(tmp_path / "pids")}
    (tmp_path / "state").mkdir(exist_ok=True)
    kw.setdefault("timeout_s", 20)
    return CliAgent(FIRST, env=env, model="fake-1", **kw)


def user(*texts: str) -> list[Message]:
    out: list[Message] = []
    for i, t in enumerate(texts):
        out.append(Message("user", t))
        if i < len(texts) - 1:
            out.append(Message("agent", "..."))
    return out


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as gone
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_default_command_is_the_gemini_cli():
    agent = CliAgent(model="gemini-2.5-pro")
    assert agent.command == ["gemini", "--skip-trust", "--prompt={prompt}", "-m", "{model}", "-o", "stream-json",
                             "--approval-mode", "yolo", "--session-id", "{session_id}"]
    assert agent.resume_command[-2:] == ["--resume", "{session_id}"]
    assert "--session-id" not in agent.resume_command
    rendered = agent._render(agent.command, "hi {model} there")
    assert rendered[2] == "--prompt=hi {model} there"  # placeholders in the prompt are not re-expanded
    assert rendered[4] == "gemini-2.5-pro"
    assert rendered[-1] == agent.session_id


def test_each_instance_gets_a_fresh_uuid_session():
    a, b = CliAgent(), CliAgent()
    assert a.session_id != b.session_id
    assert len(a.session_id) == 36


def test_echo_reply_tool_calls_and_usage(tmp_path):
    agent = make(tmp_path)
    seen: list[ToolCall] = []
    resp = agent.chat(user("find it TOOL:search_venues"), on_tool_call=seen.append)
    assert resp.text == "Let me check.\necho: find it TOOL:search_venues"
    assert [c.name for c in resp.tool_calls] == ["search_venues"]
    call = resp.tool_calls[0]
    assert call.arguments == {"q": "find it TOOL:search_venues", "n": 2}
    assert call.result == "tool output"
    assert call.metadata["tool_id"] == "t1"
    assert seen == resp.tool_calls
    assert resp.metadata["usage"] == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
    assert resp.metadata["model"] == "fake-1"
    assert resp.metadata["warnings"] == ["warning: loop detected"]
    assert resp.metadata["session_id"] == agent.session_id
    assert resp.metadata["exit_code"] == 0


def test_only_the_latest_user_message_is_sent(tmp_path):
    agent = make(tmp_path)
    agent.chat(user("first"))
    resp = agent.chat(user("first", "second"))
    assert resp.text == "echo: second"


def test_non_zero_exit_reports_code_and_stderr_tail(tmp_path):
    agent = make(tmp_path, "fail")
    with pytest.raises(AgentError) as info:
        agent.chat(user("hello"))
    msg = str(info.value)
    assert "exited with code 3" in msg
    assert "fatal: something broke" in msg
    assert "stderr line 29" in msg
    assert "stderr line 10" not in msg  # only the last 20 lines
    assert not isinstance(info.value, AgentTimeout)


def test_hang_is_killed_with_its_process_group(tmp_path):
    agent = make(tmp_path, "hang", timeout_s=1.5, kill_grace_s=0.5)
    started = time.monotonic()
    with pytest.raises(AgentTimeout, match=r"CLI agent timed out after 1.5s"):
        agent.chat(user("hello"))
    assert time.monotonic() - started < 6
    leader, child = (int(x) for x in (tmp_path / "pids").read_text().split())
    assert wait_gone(leader) and wait_gone(child), "the CLI or its child survived the timeout"


def test_sigterm_ignoring_cli_gets_sigkilled(tmp_path):
    agent = make(tmp_path, "stubborn", timeout_s=1, kill_grace_s=0.3)
    with pytest.raises(AgentTimeout) as info:
        agent.chat(user("hello"))
    assert "working..." in str(info.value)  # stderr tail is part of the timeout message
    leader, child = (int(x) for x in (tmp_path / "pids").read_text().split())
    assert wait_gone(leader) and wait_gone(child)


def test_leftover_children_are_cleaned_up_after_a_normal_exit(tmp_path):
    agent = make(tmp_path, "orphan", kill_grace_s=0.5)
    resp = agent.chat(user("hello"))
    assert resp.text == "echo: hello"
    _, child = (int(x) for x in (tmp_path / "pids").read_text().split())
    assert wait_gone(child)


def test_garbage_output_is_an_agent_error(tmp_path):
    agent = make(tmp_path, "garbage")
    with pytest.raises(AgentError, match=r"no stream-json events; stdout was: 'Traceback"):
        agent.chat(user("hello"))


def test_result_error_event_is_an_agent_error(tmp_path):
    with pytest.raises(AgentError, match="quota exceeded"):
        make(tmp_path, "error_result").chat(user("hello"))


def test_text_output_format(tmp_path):
    agent = make(tmp_path, "text", output_format="text")
    assert agent.chat(user("hi")).text == "plain: hi"


def test_missing_executable(tmp_path):
    agent = CliAgent(["/nonexistent/cli-xyz", "-p", "{prompt}"])
    with pytest.raises(AgentError, match="could not start"):
        agent.chat(user("hi"))


def test_session_resumes_and_does_not_leak_between_instances(tmp_path):
    a = make(tmp_path, "session")
    b = make(tmp_path, "session")
    r1 = a.chat(user("one"))
    assert r1.text == f"turn 1 in {a.session_id}; history: one"
    assert r1.metadata["resumed"] is False
    r2 = a.chat(user("one", "two"))
    assert r2.text == f"turn 2 in {a.session_id}; history: one | two"
    assert r2.metadata["resumed"] is True
    rb = b.chat(user("other"))
    assert rb.text == f"turn 1 in {b.session_id}; history: other"
    r3 = a.chat(user("one", "two", "three"))
    assert r3.text.endswith("history: one | two | three")


def test_a_new_conversation_on_the_same_instance_starts_a_new_session(tmp_path):
    a = make(tmp_path, "session")
    a.chat(user("one"))
    old = a.session_id
    resp = a.chat(user("fresh start"))
    assert a.session_id != old
    assert resp.text.endswith("history: fresh start")


def test_custom_template_derives_resume_flag(tmp_path):
    agent = CliAgent(["x", "--session-id", "{session_id}"])
    assert agent.resume_command == ["x", "--resume", "{session_id}"]


def test_gemini_cli_factory_reads_env_and_context(monkeypatch):
    monkeypatch.delenv("FABTEST_AGENT_MODEL", raising=False)
    monkeypatch.delenv("FABTEST_GEMINI_CLI", raising=False)
    agent = gemini_cli({})
    assert agent.model == "gemini-2.5-flash" and agent.command[0] == "gemini"
    agent = gemini_cli({"agent_model": "gemini-2.5-pro", "timeout": 5})
    assert agent.model == "gemini-2.5-pro" and agent.timeout_s == 5
    monkeypatch.setenv("FABTEST_AGENT_MODEL", "m-env")
    monkeypatch.setenv("FABTEST_GEMINI_CLI", "/opt/gemini")
    agent = gemini_cli({})
    assert agent.model == "m-env" and agent.command[0] == "/opt/gemini" and agent.resume_command[0] == "/opt/gemini"
    assert gemini_cli({"agent_model": "pinned"}).model == "pinned"  # a playbook's agent_model wins over the variable


def test_factory_and_build_work_with_the_registry(tmp_path):
    from fabtest.agents.registry import make_agent

    agent = make_agent(CliAgent.factory(FIRST, output_format="stream-json"), {"agent_model": "m2"}, where="t")
    assert isinstance(agent, CliAgent) and agent.model == "m2" and agent.command == FIRST
    built = make_agent(CliAgent, {"agent_model": "m3", "timeout": 7}, where="t")
    assert isinstance(built, CliAgent) and built.model == "m3" and built.timeout_s == 7
    via_spec = make_agent("fabtest.agents.cli_agent:gemini_cli", {}, where="t")
    assert isinstance(via_spec, CliAgent)


def test_parse_stream_json_ignores_user_messages_and_unknown_events():
    out = "\n".join([
        '{"type":"init","session_id":"s","model":"m"}',
        '{"type":"message","role":"user","content":"question"}',
        '{"type":"weird"}',
        '[1,2]',
        '{"type":"message","role":"assistant","content":"Hel","delta":true}',
        '{"type":"message","role":"assistant","content":"lo","delta":true}',
        '{"type":"result","status":"success","stats":{"total_tokens":3,"input_tokens":1,"output_tokens":2}}',
    ])
    resp = parse_stream_json(out)
    assert resp.text == "Hello"
    assert resp.metadata["cli_session_id"] == "s"
    assert resp.metadata["status"] == "success"


def test_parse_stream_json_empty_reply_is_an_error():
    with pytest.raises(AgentError, match="no reply text"):
        parse_stream_json('{"type":"init","session_id":"s"}\n{"type":"result","status":"success"}')
