"""AcpAgent against a small ACP agent written with the SDK (``echo_agent.py``), one process per scenario."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.acp import ECHO, gone, processes_with

from fabtest.agents.acp import AcpAgent, rebuild_arguments
from fabtest.agents.base import AgentError, AgentTimeout
from fabtest.agents.registry import make_agent
from fabtest.conversation import Decision, Message
from fabtest.errors import UsageError


def _is_supervisor(pid: int) -> bool:
    """fabtest's process supervisor (fabtest/agents/supervisor.py), which runs above the agent on Linux."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"supervisor.py" in fh.read()
    except OSError:
        return False


@pytest.fixture
def marker() -> str:
    return f"FABTEST_ACP_TEST_{uuid.uuid4().hex}"


def echo_agent(tmp_path: Path, marker: str, **options) -> AcpAgent:
    return AcpAgent([sys.executable, ECHO], cwd=tmp_path, env={"FABTEST_ACP_MARKER": marker}, **options)


def talk(agent: AcpAgent, *texts: str):
    messages: list[Message] = []
    replies = []
    for text in texts:
        messages.append(Message("user", text))
        reply = agent.chat(messages)
        messages.append(Message("agent", reply.text))
        replies.append(reply)
    return replies


def test_one_process_one_session_many_turns(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        first, second, third = talk(agent, "remember PINEAPPLE", "hello there", "recall")
        pids = [pid for pid in processes_with(marker) if not _is_supervisor(pid)]
        assert len(pids) == 1  # one agent process for the whole conversation
    assert first.text == "I will remember that."  # chunks joined
    assert second.text == "echo: hello there"
    assert third.text == "You told me PINEAPPLE."  # the session kept the history
    assert {r.metadata["session_id"] for r in (first, second, third)} == {"s1"}
    assert [r.metadata["turn"] for r in (first, second, third)] == [1, 2, 3]
    assert first.metadata["usage"] == {"input_tokens": 2, "output_tokens": 2, "total_tokens": 4}
    assert agent.metadata()["agent"] == {"name": "echo-agent", "version": "1.0"}
    assert gone(marker)


def test_session_opens_in_the_scenario_directory_with_mcp_servers_and_no_fs(tmp_path, marker):
    servers = [{"name": "files", "command": "mcp-files", "args": ["--root", "."], "env": {"A": "1"}},
               {"name": "web", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "y"}}]
    agent = echo_agent(tmp_path, marker, mcp_servers=servers)
    with agent.around():
        (reply,) = talk(agent, "where")
    assert reply.text == f"cwd={tmp_path.resolve()} mcp=files,web fs_read=False fs_write=False"


def test_tool_call_arguments_status_and_output_without_raw_input(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    seen = []
    with agent.around():
        reply = agent.chat([Message("user", "write notes.txt vlan 100")], on_tool_call=seen.append)
    assert reply.text == "Saving it.\nSaved."  # text before and after the call are two paragraphs
    (call,) = reply.tool_calls
    target = str(tmp_path.resolve() / "notes.txt")
    assert call.name == "write_file"  # from the Gemini-CLI style id
    assert call.arguments == {"file_path": target, "content": "vlan 100\n"}
    assert call.metadata["status"] == "completed"
    assert call.metadata["kind"] == "edit"
    assert call.metadata["locations"] == [target]
    assert call.result == f"wrote {target}"
    assert seen == [call]
    assert (tmp_path / "notes.txt").read_text() == "vlan 100\n"


def test_raw_input_is_used_as_is_and_failed_output_is_kept(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        (reply,) = talk(agent, "shell")
    (call,) = reply.tool_calls
    assert call.name == "ls /nowhere"  # an opaque id: the title names it
    assert call.arguments == {"command": "ls /nowhere"}
    assert call.metadata["status"] == "failed"
    assert call.result == "ls: cannot access '/nowhere'"


PERMISSION_CASES = [
    ("allow", "permission: proceed_once", "completed"),
    ("cancel", "permission: cancelled", "denied"),
    ({"run_shell_command": "deny", "*": "allow"}, "permission: cancel", "denied"),
    ({"execute": "allow", "*": "deny"}, "permission: proceed_once", "completed"),
]


def test_permission_requests_are_answered_from_configuration(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        for permission, answer, status in PERMISSION_CASES:  # one process: each turn asks again
            agent.permission = permission
            (reply,) = talk(agent, "ask")
            assert reply.text == answer, permission
            (call,) = reply.tool_calls
            assert call.name == "run_shell_command"
            assert call.arguments == {"command": "rm -rf build"}
            assert call.metadata["status"] == status, permission


def test_permission_pause_leaves_each_request_to_the_user(tmp_path, marker):
    """permission = "pause": the turn ends on the request as a pause, and the next message's decision
    answers it (approved: allow; rejected: deny; none: the request is cancelled and the message sent)."""
    agent = echo_agent(tmp_path, marker, permission={"execute": "pause", "*": "allow"})
    assert agent.pauses_unsupported is None
    with agent.around():
        messages = [Message("user", "ask")]
        for decision, answer, calls in (("approved", "permission: proceed_once", [("run_shell_command", "completed")]),
                                        ("rejected", "permission: cancel", [])):
            asked = agent.chat(messages)
            [pause] = asked.pauses
            assert (pause.kind, pause.tool, pause.arguments) == ("approval", "run_shell_command", {"command": "rm -rf build"})
            assert pause.question == "rm -rf build" and not asked.tool_calls  # the call runs after the decision
            assert {o["kind"] for o in pause.metadata["options"]} == {"allow_once", "reject_once"}
            messages += [Message("agent", asked.text, pauses=(pause,)),
                         Message("user", "", decisions=(Decision(pause.id, decision),))]
            decided = agent.chat(messages)
            assert decided.text == answer and not decided.pauses
            # run after an approval; after a rejection never run, so never a call (must not call passes)
            assert [(c.name, c.metadata["status"]) for c in decided.tool_calls] == calls
            messages += [Message("agent", decided.text), Message("user", "ask")]
        # the user says something else instead: the request is cancelled, the new message answered
        agent.chat(messages)
        messages += [Message("agent", ""), Message("user", "hello")]
        assert agent.chat(messages).text == "echo: hello"
        # ACP answers with allow or reject: an edited approval is the scenario's error, in one line
        messages += [Message("agent", "echo: hello"), Message("user", "ask")]
        [pause] = agent.chat(messages).pauses
        messages += [Message("agent", ""), Message("user", "", decisions=(Decision(pause.id, "edited", arguments={}),))]
        with pytest.raises(AgentError, match="cannot be approved with edited arguments"):
            agent.chat(messages)
    assert echo_agent(tmp_path, marker).pauses_unsupported.startswith("fabtest answers its permission requests")


def test_a_crash_is_an_agent_error_with_stderr_and_nothing_is_left(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        talk(agent, "hello")
        with pytest.raises(AgentError, match=r"exited with code 3(.|\n)*crashing on purpose") as info:
            talk(agent, "crash")
        assert not isinstance(info.value, AgentTimeout)
        with pytest.raises(AgentError, match="already stopped"):
            talk(agent, "hello")
    assert gone(marker)


def test_a_hang_is_a_timeout_and_the_whole_group_is_killed(tmp_path, marker):
    agent = echo_agent(tmp_path, marker, kill_grace_s=0.5)
    talk(agent, "hello")  # the first turn includes start-up, outside the hang below
    agent.timeout_s = 3
    with pytest.raises(AgentTimeout, match="took longer than 3s to answer; its processes were killed"):
        agent.chat([Message("user", "hello"), Message("agent", "echo: hello"), Message("user", "hang")])
    assert gone(marker)  # the agent and the grandchild it started
    agent.close()  # still safe


def test_an_agent_that_does_not_start_is_an_agent_error(tmp_path):
    agent = AcpAgent([str(tmp_path / "no-such-agent")], cwd=tmp_path)
    with agent.around():
        with pytest.raises(AgentError, match="could not start"):
            agent.chat([Message("user", "hi")])
        with pytest.raises(AgentError, match="already stopped"):
            agent.chat([Message("user", "hi")])


def _until(condition, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(condition())


def test_around_starts_the_agent_before_the_first_turn(tmp_path, marker):
    """The process, initialize and session/new begin when the scenario does, not at its first prompt,
    so the agent's start-up overlaps what the run does before then (fabtest run: its pre-flight)."""
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        assert _until(lambda: agent.session_id is not None)  # no turn yet
        (reply,) = talk(agent, "hello")
        assert reply.text == "echo: hello" and reply.metadata == {**reply.metadata, "turn": 1, "session_id": "s1"}
    assert gone(marker)


def test_a_scenario_that_ends_while_its_agent_starts_leaves_nothing(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    agent.env["FABTEST_ACP_SLOW_START"] = "60"
    with agent.around():
        assert _until(lambda: processes_with(marker) != [])  # started, not answering initialize yet
    assert gone(marker) and agent.session_id is None
    with pytest.raises(AgentError, match="already stopped"):
        talk(agent, "hello")


def test_a_slow_start_is_a_start_timeout_from_the_first_turn(tmp_path, marker):
    agent = echo_agent(tmp_path, marker, startup_timeout_s=1)
    agent.env["FABTEST_ACP_SLOW_START"] = "60"
    with agent.around(), pytest.raises(AgentTimeout, match="took longer than 1s to start; its processes were killed"):
        talk(agent, "hello")
    assert gone(marker)


def test_an_empty_turn_is_an_agent_error(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    with agent.around(), pytest.raises(AgentError, match=r"ended its turn \(end_turn\) without a reply"):
        talk(agent, "silent")


def test_a_new_conversation_on_the_same_instance_gets_a_new_session(tmp_path, marker):
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        talk(agent, "remember KIWI", "recall")
        (fresh,) = talk(agent, "recall")
    assert fresh.text == "You told me nothing."
    assert fresh.metadata["session_id"] == "s2"


def test_configured_from_a_table(tmp_path):
    agent = make_agent({"acp": [sys.executable, ECHO], "permission": "deny", "timeout": 7,
                        "mcp_servers": [{"name": "m", "command": "x"}]}, {"cwd": str(tmp_path)}, where="t")
    assert isinstance(agent, AcpAgent)
    assert (agent.command, agent.permission, agent.timeout_s, agent.startup_timeout_s, agent.cwd) == (
        [sys.executable, ECHO], "deny", 7.0, 7.0, str(tmp_path.resolve()))
    assert make_agent({"acp": ["x"], "startup_timeout": 90}, {}, where="t").startup_timeout_s == 90.0
    gemini = make_agent({"acp": True, "model": "gemini-2.5-pro"}, {"cwd": str(tmp_path)}, where="t")
    assert gemini.command[1:] == ["--acp", "--skip-trust", "-m", "gemini-2.5-pro", "--approval-mode", "yolo"]


@pytest.mark.parametrize(("table", "message"), [
    ({"acp": 3}, "acp must be a non-empty list"),
    ({"acp": []}, "acp must be a non-empty list"),
    ({"acp": ["x"], "permission": "maybe"}, "permission must be one of"),
    ({"acp": ["x"], "mcp_servers": [{"name": "m"}]}, "an MCP server needs name and command"),
])
def test_bad_tables_are_one_line_usage_errors(table, message):
    with pytest.raises(UsageError, match=f"^pyproject.toml: bad options for the ACP agent .*{message}") as info:
        make_agent(table, {}, where="pyproject.toml")
    assert "\n" not in str(info.value)


def test_rebuilt_arguments_from_locations_only():
    class Loc:
        path = "/w/a.py"

    assert rebuild_arguments("read_file", {"kind": "read", "title": "a.py", "locations": [Loc()]}) == {
        "file_path": "/w/a.py"}
    assert rebuild_arguments("glob", {"kind": "search", "title": "*.py"}) == {}


def test_an_agent_left_running_is_killed_at_interpreter_exit(tmp_path, marker):
    script = (
        "import sys\n"
        "from fabtest.agents.acp import AcpAgent\n"
        "from fabtest.conversation import Message\n"
        f"agent = AcpAgent([sys.executable, {ECHO!r}], cwd={str(tmp_path)!r}, env={{'FABTEST_ACP_MARKER': {marker!r}}})\n"
        "print(agent.chat([Message('user', 'spawn')]).text, flush=True)\n"
        "sys.exit(0)  # no close(): the process must not outlive the interpreter\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "spawned a helper", done.stderr
    assert gone(marker)


def test_environment_variables_are_expanded_inside_lists(monkeypatch, tmp_path):
    monkeypatch.setenv("FABTEST_TEST_TOKEN", "s3cret")
    agent = make_agent({"acp": [sys.executable, ECHO, "--token=${FABTEST_TEST_TOKEN}"],
                        "mcp_servers": [{"name": "d", "url": "http://127.0.0.1:9/mcp",
                                         "headers": {"Authorization": "Bearer ${FABTEST_TEST_TOKEN}"}}]},
                       {"cwd": str(tmp_path)}, where="t")
    assert agent.command[-1] == "--token=s3cret"
    assert agent.mcp_servers[0].headers[0].value == "Bearer s3cret"


def test_an_agent_that_exports_traces_gets_the_turns_traceparent_in_the_prompts_meta(tmp_path, marker):
    """ACP's convention (shared with MCP): W3C trace context as root keys of ``params._meta``; only an
    agent with ``traces = true`` gets it, and it is the turn's own (the spans fabtest waits for)."""
    from fabtest.agents import trace_calls

    traced, plain = echo_agent(tmp_path, marker, traces=True), echo_agent(tmp_path, marker)
    with traced.around(), trace_calls.turn(traced, port=0, wait=0.1):
        reply = traced.chat([Message("user", "meta")])
        sent = trace_calls.headers()["traceparent"]
    assert reply.text == f"traceparent: {sent}"
    assert traced.metadata()["traces"] is True
    with plain.around():
        assert plain.chat([Message("user", "meta")]).text == "traceparent: none"
    with pytest.raises(UsageError, match="traces: expected true or false"):
        make_agent({"acp": [sys.executable, ECHO], "traces": "yes"}, {}, where="agent")


def test_close_leaves_no_loop_or_pipe_for_the_garbage_collector(tmp_path, marker):
    """The agent's event loop and the process's transport are closed by close() itself: left to the
    garbage collector, the loop closed first and the transport's __del__ then raised (a
    PytestUnraisableExceptionWarning in a later, unrelated test)."""
    agent = echo_agent(tmp_path, marker)
    with agent.around():
        talk(agent, "hello")
        loop, proc = agent._loop, agent._proc
    assert loop is not None and loop.is_closed()
    assert proc is not None and proc._transport.is_closing()


def test_a_scenario_decides_an_acp_permission_request(tmp_path, marker):
    """The engine's side: the request is the turn's pause in the record, the decision step answers it."""
    import fabtest
    from fabtest.config.settings import Settings

    result = fabtest.run(echo_agent(tmp_path, marker, permission="pause"), settings=Settings(),
                         user=["ask", fabtest.Decide("reject", reason="not in production")],
                         must_not_call=["run_shell_command"])
    assert result.passed, result.failure_message
    [pause] = result.transcript[0].pauses
    assert (pause.tool, pause.decision, pause.reason) == ("run_shell_command", "rejected", "not in production")
    assert result.transcript[1].agent == "permission: cancel"
