"""MCP servers as the built-in agent's tools: a real server (mcp SDK) over stdio and streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabtest.agents.base import AgentError, AgentTimeout
from fabtest.agents.builtin import BuiltinAgent
from fabtest.agents.mcp_tools import close_all
from fabtest.agents.registry import make_agent
from fabtest.conversation import Message
from fabtest.engine.turns import call_agent
from fabtest.testing import FakeGemini

from .helpers import SERVER, alive, free_port, pids, stdio_spec


def build(mcp: list[dict[str, object]], tmp_path: Path, **extra: object) -> BuiltinAgent:
    agent = make_agent({"gemini": "gemini-2.5-flash", "mcp": mcp, **extra}, {"rootdir": str(tmp_path)}, where="x")
    assert isinstance(agent, BuiltinAgent)
    return agent


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def wait_for_port(port: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_stdio_server_tools_are_declared_called_and_recorded(fake: FakeGemini, tmp_path: Path, pid_dir: Path) -> None:
    fake.add_tool_script(r"alpha", [{"name": "lookup", "args": {"key": "alpha"}},
                                    lambda req: f"value is {req.function_responses[0]['response']['value']}"])
    agent = build([stdio_spec(pid_dir)], tmp_path)
    with agent.around():
        reply = agent.chat([Message("user", "what is alpha?")])
        assert agent.metadata()["tools"] == ["lookup", "slow", "broken"]
        [pid] = pids(pid_dir)
        assert alive(pid)
    assert reply.text == "value is 1"
    [call] = reply.tool_calls
    assert call.name == "lookup" and call.arguments == {"key": "alpha"}
    # the server got its own env entry but not the key fabtest holds (the fake fixture set GEMINI_API_KEY)
    assert call.result == {"key": "alpha", "value": 1, "pid": pid, "sees_gemini_key": False}
    assert call.metadata["source"].startswith("mcp:")
    assert set(fake.requests[0].tool_names) == {"lookup", "slow", "broken"}
    assert wait_gone(pid), "the stdio server outlived its scenario"
    assert agent.metadata()["tools"] == ["lookup", "slow", "broken"]  # still declared after the scenario


def test_an_mcp_tool_error_goes_back_to_the_model(fake: FakeGemini, tmp_path: Path, pid_dir: Path) -> None:
    fake.add_tool_script(r"", [{"name": "broken", "args": {"reason": "disk full"}}, "it failed"])
    agent = build([stdio_spec(pid_dir)], tmp_path)
    with agent.around():
        reply = agent.chat([Message("user", "try")])
    assert reply.tool_calls[0].metadata["error"] is True
    assert "error" in fake.requests[-1].function_responses[0]["response"]


def test_http_server_started_by_fabtest_is_killed_with_its_group(fake: FakeGemini, tmp_path: Path,
                                                                  pid_dir: Path) -> None:
    port = free_port()
    fake.add_tool_script(r"beta", [{"name": "lookup", "args": {"key": "beta"}}, "two"])
    agent = build([{"command": [sys.executable, SERVER, "--http", str(port)], "url": f"http://127.0.0.1:{port}/mcp",
                    "env": {"FABTEST_TEST_PID_DIR": str(pid_dir)}, "name": "catalogue"}], tmp_path)
    with agent.around():
        reply = agent.chat([Message("user", "beta?")])
        [pid] = pids(pid_dir)
    assert reply.tool_calls[0].result["value"] == 2
    assert reply.tool_calls[0].result["sees_gemini_key"] is False
    assert reply.tool_calls[0].metadata["source"] == "mcp:catalogue"
    assert wait_gone(pid), "the HTTP server outlived its scenario"


def test_an_http_server_at_a_url_is_used_as_it_is(fake: FakeGemini, tmp_path: Path, pid_dir: Path) -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port)
        fake.add_tool_script(r"", [{"name": "lookup", "args": {"key": "alpha"}}, "one"])
        agent = build([{"url": f"http://127.0.0.1:{port}/mcp"}], tmp_path)
        reply = agent.chat([Message("user", "alpha")])
        assert reply.tool_calls[0].result["pid"] == server.pid
        agent.close()
        assert server.poll() is None  # fabtest did not start it, so it does not stop it
    finally:
        server.kill()
        server.wait(5)


def test_a_server_that_cannot_start_is_an_agent_error_with_its_stderr(fake: FakeGemini, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text("import sys\nsys.stderr.write('missing dependency foo\\n')\nsys.exit(3)\n")
    agent = build([{"command": [sys.executable, str(script)], "startup_timeout": 20}], tmp_path)
    with pytest.raises(AgentError, match="MCP server .* failed to start") as info:
        agent.chat([Message("user", "hi")])
    assert "missing dependency foo" in str(info.value)


def test_a_timed_out_turn_still_stops_the_server(fake: FakeGemini, tmp_path: Path, pid_dir: Path) -> None:
    fake.add_tool_script(r"", [{"name": "slow", "args": {"seconds": 30}}, "done"])
    agent = build([stdio_spec(pid_dir)], tmp_path)
    with agent.around():
        agent.metadata()  # starts the server before the timed turn
        [pid] = pids(pid_dir)
        with pytest.raises(AgentTimeout):
            call_agent(agent, [Message("user", "wait")], timeout=2)
    assert wait_gone(pid), "the server outlived the timed-out scenario"


def test_shared_servers_live_for_the_run_and_close_all_stops_them(fake: FakeGemini, tmp_path: Path,
                                                                    pid_dir: Path) -> None:
    fake.add_tool_script(r"", [{"name": "lookup", "args": {"key": "alpha"}}, "one"])
    spec = stdio_spec(pid_dir, shared=True)
    first = build([spec], tmp_path)
    with first.around():
        one = first.chat([Message("user", "a")])
    second = build([spec], tmp_path)
    with second.around():
        two = second.chat([Message("user", "b")])
    [pid] = pids(pid_dir)  # one process served both scenarios
    assert one.tool_calls[0].result["pid"] == two.tool_calls[0].result["pid"] == pid
    assert alive(pid)
    close_all()
    assert wait_gone(pid)
