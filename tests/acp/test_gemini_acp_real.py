"""The REAL Gemini CLI over ACP (``gemini --acp``) against FakeGemini on 127.0.0.1.

Skipped unless ``gemini`` is on PATH or ``FABTEST_GEMINI_CLI`` names it (CI installs it). The
CLI's HOME is a temp dir whose settings select gemini-api-key auth and turn off telemetry and
update checks; proxies point at a dead port as a second fence, so nothing leaves the machine.
"""

from __future__ import annotations

import shutil
import uuid

import pytest
from _gemini_env import GEMINI, NOT_INSTALLED, answer_router
from support.acp import gone

from fabtest.agents.acp import AcpAgent, gemini, gemini_acp, gemini_supports_acp
from fabtest.agents.base import AgentTimeout
from fabtest.conversation import Message
from fabtest.testing import FakeGemini

pytestmark = pytest.mark.skipif(not GEMINI or not shutil.which("node"), reason=NOT_INSTALLED)


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The --acp answer is asked here, and kept out of the user's ~/.cache (agents/gemini_probe.py)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_real_gemini_cli_over_acp_keeps_one_session(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "notes.txt"
    with FakeGemini(default_text="Hello from the fake model.") as fake:
        answer_router(fake)
        fake.add_rule(r"ZZWRITE", function_call={"name": "write_file",
                                                  "args": {"file_path": str(target), "content": "vlan: 100\n"}},
                      times=1)
        fake.add_rule(r"ZZRECALL", callback=lambda r: "You told me PINEAPPLE." if "PINEAPPLE" in r.prompt
                      else "You told me nothing.")
        env = fake.gemini_cli_env(tmp_path / "home")
        assert gemini_supports_acp(GEMINI)
        agent = gemini({"cwd": str(workspace), "env": env, "timeout": 120, "executable": GEMINI})
        assert isinstance(agent, AcpAgent)  # the default way to drive a CLI that speaks ACP
        with agent.around():
            messages = [Message("user", "Remember the word PINEAPPLE.")]
            first = agent.chat(messages)
            messages += [Message("agent", first.text), Message("user", "ZZWRITE please save the config")]
            second = agent.chat(messages)
            messages += [Message("agent", second.text), Message("user", "ZZRECALL which word did I tell you?")]
            third = agent.chat(messages)
        assert first.text == "Hello from the fake model."
        assert first.metadata["usage"]["total_tokens"] > 0  # from _meta.quota.token_count
        (call,) = second.tool_calls
        assert call.name == "write_file"
        assert call.arguments == {"file_path": str(target), "content": "vlan: 100\n"}
        assert call.metadata["status"] == "completed"
        assert target.read_text() == "vlan: 100\n"
        assert "PINEAPPLE" in third.text  # one session: the model saw the earlier turns
        assert len({r.metadata["session_id"] for r in (first, second, third)}) == 1
        assert fake.errors == []
        assert {r.model for r in fake.requests if r.action == "streamGenerateContent"} == {"gemini-2.5-flash"}
    assert gone(env["HOME"])


def test_real_gemini_cli_asks_permission_and_routes_without_a_model(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "denied.txt"
    with FakeGemini(default_text="Done.") as fake:
        answer_router(fake)
        fake.add_rule(r"ZZWRITE", function_call={"name": "write_file",
                                                  "args": {"file_path": str(target), "content": "no\n"}}, times=1)
        env = fake.gemini_cli_env(tmp_path / "home")
        agent = AcpAgent([GEMINI, "--acp", "--skip-trust"], cwd=workspace, env=env, timeout_s=120,
                         permission={"write_file": "deny", "*": "allow"})
        with agent.around():
            reply = agent.chat([Message("user", "ZZWRITE save it")])
        (call,) = reply.tool_calls
        assert call.name == "write_file"
        assert call.arguments == {"file_path": str(target), "content": "no\n"}  # from the permission request
        assert call.metadata["permission"].startswith("deny")
        assert call.metadata["status"] == "denied"
        assert not target.exists()
        routed = [r for r in fake.requests if r.action == "generateContent" and "complexity_score" in str(r.schema)]
        assert routed  # no -m: each prompt is routed first, and the fake answered the router
        assert fake.errors == []
    assert gone(env["HOME"])


@pytest.mark.skipif(not __import__("os").path.isdir("/proc"), reason="needs /proc to look for leftover processes")
def test_real_gemini_cli_hang_is_a_timeout_and_kills_everything(tmp_path):
    with FakeGemini(default_text="late") as fake:
        answer_router(fake)
        env = fake.gemini_cli_env(tmp_path / f"home-{uuid.uuid4().hex[:8]}")
        agent = gemini_acp({"cwd": str(tmp_path), "env": env, "timeout": 120, "executable": GEMINI,
                            "kill_grace_s": 1})
        agent.chat([Message("user", "hello")])
        fake.latency = 25
        agent.timeout_s = 3
        with pytest.raises(AgentTimeout, match="took longer than 3s to answer"):
            agent.chat([Message("user", "hello"), Message("agent", "late"), Message("user", "again")])
        assert gone(env["HOME"])
        fake.latency = 0
