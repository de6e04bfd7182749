"""The demo agent's Gemini-style CLI front-end, end to end through CliAgent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabtest.agents.base import AgentError
from fabtest.conversation import Message

try:
    import fabtest.demo as demo

    demo.build_agent({})
    DEMO_OK = True
except Exception:  # noqa: BLE001
    DEMO_OK = False

pytestmark = pytest.mark.skipif(not DEMO_OK, reason="fabtest.demo.build_agent is not available yet")

SRC = str(Path(__file__).resolve().parents[2] / "src")


def conversation(agent, *texts):
    messages: list[Message] = []
    replies = []
    for text in texts:
        messages.append(Message("user", text))
        resp = agent.chat(list(messages))
        messages.append(Message("agent", resp.text))
        replies.append(resp)
    return replies


def test_multi_turn_booking_resumes_the_session_and_writes_booking_txt(tmp_path):
    from fabtest.demo.fake_cli import build_cli_agent

    agent = build_cli_agent({"state_dir": tmp_path / "state", "cwd": tmp_path, "timeout": 60})
    first, second, third = conversation(
        agent,
        "Hi, I need a venue for 10 people in Berlin on 12 March",
        "Spreeblick Loft please",
        "yes, book it",
    )
    assert [c.name for c in first.tool_calls] == ["search_venues"]
    assert first.tool_calls[0].arguments == {"city": "Berlin", "capacity": 10}
    assert "Spreeblick Loft" in first.text
    assert first.metadata["resumed"] is False and second.metadata["resumed"] is True
    assert [c.name for c in second.tool_calls] == ["check_availability"]
    assert [c.name for c in third.tool_calls] == ["book_venue"]
    assert "confirmation number" in third.text
    booking = (tmp_path / "booking.txt").read_text()
    confirmation = json.loads(third.tool_calls[0].result)["confirmation"]
    assert confirmation in booking and "venue_id: ber-spree" in booking
    saved = json.loads((tmp_path / "state" / f"{agent.session_id}.json").read_text())
    assert len(saved["messages"]) == 6


def test_two_agents_do_not_share_state(tmp_path):
    from fabtest.demo.fake_cli import build_cli_agent

    a = build_cli_agent({"state_dir": tmp_path, "cwd": tmp_path})
    b = build_cli_agent({"state_dir": tmp_path, "cwd": tmp_path})
    conversation(a, "Hi, I need a venue for 10 people in Berlin on 12 March")
    (resp,) = conversation(b, "Spreeblick Loft please")
    assert not resp.tool_calls  # b knows nothing about a's search
    assert a.session_id != b.session_id


def run_cli(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "fabtest.demo.fake_cli", *args], capture_output=True, text=True, cwd=tmp_path,
        env={"PYTHONPATH": SRC, "FABTEST_DEMO_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=60,
    )


def test_unknown_resume_fails_like_the_real_cli(tmp_path):
    proc = run_cli(tmp_path, "-p", "hi", "-o", "stream-json", "--resume", "0b7c1a4e-0000-4000-8000-000000000000")
    assert proc.returncode == 42
    assert "Error resuming session" in proc.stderr
    assert proc.stdout == ""


def test_existing_session_id_is_refused_and_flags_are_exclusive(tmp_path):
    sid = "0b7c1a4e-0000-4000-8000-000000000001"
    assert run_cli(tmp_path, "-p", "hi", "--session-id", sid).returncode == 0
    again = run_cli(tmp_path, "-p", "hi", "--session-id", sid)
    assert again.returncode == 42 and "already exists" in again.stderr
    both = run_cli(tmp_path, "-p", "hi", "--session-id", sid, "--resume", sid)
    assert both.returncode != 0 and "mutually exclusive" in both.stderr


def test_stream_json_events_look_like_gemini(tmp_path):
    proc = run_cli(tmp_path, "--skip-trust", "-p", "Hi, 10 people in Berlin on 12 March", "-m", "demo-1", "-o",
                   "stream-json", "--approval-mode", "yolo", "--session-id", "s-1")
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["type"] for e in events] == ["init", "message", "tool_use", "tool_result", "message", "result"]
    assert events[0]["session_id"] == "s-1" and events[0]["model"] == "demo-1"
    assert events[2]["tool_name"] == "search_venues" and events[2]["tool_id"] == events[3]["tool_id"]
    assert events[4]["role"] == "assistant" and events[4]["delta"] is True
    assert events[5]["status"] == "success" and "stats" in events[5]


def test_resume_of_unknown_session_through_the_adapter_is_an_agent_error(tmp_path):
    from fabtest.demo.fake_cli import build_cli_agent

    agent = build_cli_agent({"state_dir": tmp_path})
    agent.turns = 1  # pretend the first turn happened elsewhere
    with pytest.raises(AgentError, match=r"exited with code 42(.|\n)*Error resuming session"):
        agent.chat([Message("user", "a"), Message("agent", "b"), Message("user", "c")])
