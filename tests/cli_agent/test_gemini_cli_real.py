"""The REAL Gemini CLI (``@google/gemini-cli``) driven by CliAgent against a local stand-in server.

Skipped unless ``gemini`` is on PATH or ``FABTEST_GEMINI_CLI`` names it. Nothing leaves the
machine: the CLI talks to :class:`fabtest.testing.FakeGemini` on 127.0.0.1 (GOOGLE_GEMINI_BASE_URL),
its HOME is a temp dir whose settings turn off usage statistics, telemetry and update checks
(verified: with these settings the CLI makes no DNS lookup at all), and HTTP(S)_PROXY point at a
dead local port with NO_PROXY=127.0.0.1 as a second fence.
"""

from __future__ import annotations

import os
import shutil

import pytest

from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import Message

GEMINI = os.environ.get("FABTEST_GEMINI_CLI") or shutil.which("gemini")
pytestmark = pytest.mark.skipif(
    not GEMINI or not shutil.which("node"), reason="the Gemini CLI is not installed (set FABTEST_GEMINI_CLI or put gemini on PATH)"
)

from fabtest.testing import FakeGemini


def test_real_gemini_cli_multi_turn_tool_call_and_isolation(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "notes.txt"

    def recall(request):
        if "PINEAPPLE" in request.prompt:
            return "You told me the word PINEAPPLE."
        return "You have not told me any word."

    with FakeGemini(default_text="Hello from the fake model.") as fake:
        fake.add_rule(r"ZZWRITE", function_call={"name": "write_file",
                                                  "args": {"file_path": str(target), "content": "vlan: 100\n"}},
                      times=1)
        fake.add_rule(r"ZZRECALL", callback=recall)
        env = fake.gemini_cli_env(tmp_path / "home")
        agent = CliAgent(executable=GEMINI, model="gemini-2.5-flash", cwd=workspace, env=env, timeout_s=120)

        messages = [Message("user", "Remember the word PINEAPPLE.")]
        first = agent.chat(messages)
        assert first.text == "Hello from the fake model."
        assert first.metadata["cli_session_id"] == agent.session_id
        assert first.metadata["usage"]["total_tokens"] > 0

        messages += [Message("agent", first.text), Message("user", "ZZWRITE please save the config")]
        seen = []
        second = agent.chat(messages, on_tool_call=seen.append)
        assert [c.name for c in second.tool_calls] == ["write_file"]
        assert second.tool_calls[0].arguments == {"file_path": str(target), "content": "vlan: 100\n"}
        assert second.tool_calls[0].metadata["status"] == "success"
        assert seen == second.tool_calls
        assert target.read_text() == "vlan: 100\n"
        assert second.metadata["resumed"] is True

        messages += [Message("agent", second.text), Message("user", "ZZRECALL which word did I tell you?")]
        third = agent.chat(messages)
        assert "PINEAPPLE" in third.text  # the resumed session carried the history

        other = CliAgent(executable=GEMINI, model="gemini-2.5-flash", cwd=workspace, env=env, timeout_s=120)
        fresh = other.chat([Message("user", "ZZRECALL which word did I tell you?")])
        assert "PINEAPPLE" not in fresh.text  # a new instance is a new session: nothing leaks

        assert fake.errors == []
        assert {r.action for r in fake.requests} <= {"streamGenerateContent", "generateContent", "countTokens"}
        assert all(r.model == "gemini-2.5-flash" for r in fake.requests if r.action == "streamGenerateContent")


def _processes_with(marker: str) -> list[int]:
    """Pids whose environment mentions ``marker`` (our temp HOME), i.e. CLI processes we started."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if marker.encode() in fh.read():
                    with open(f"/proc/{entry}/stat") as st:
                        if st.read().rsplit(")", 1)[-1].split()[0] != "Z":
                            found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to look for leftover processes")
def test_real_gemini_cli_hang_is_killed_with_all_its_processes(tmp_path):
    import time

    from fabtest.agents.base import AgentTimeout

    with FakeGemini(default_text="late", latency=25) as fake:
        env = fake.gemini_cli_env(tmp_path / "home")
        agent = CliAgent(executable=GEMINI, cwd=tmp_path, env=env, timeout_s=6, kill_grace_s=1)
        started = time.monotonic()
        with pytest.raises(AgentTimeout, match="CLI agent timed out after 6s"):
            agent.chat([Message("user", "hello")])
        assert time.monotonic() - started < 15
        deadline = time.monotonic() + 5
        while _processes_with(env["HOME"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(env["HOME"]) == []
