"""Processes left behind: a CLI or ACP agent whose grandchild calls
``setsid`` (leaving the process group), and the process running the agent (an xdist worker) killed
outright. Nothing the agent started may survive either (fabtest/agents/supervisor.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.acp import ECHO as ECHO_ACP

from fabtest.agents.acp import AcpAgent
from fabtest.agents.base import AgentTimeout
from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import Message
from fabtest.engine.turns import call_agent

TESTS = Path(__file__).resolve().parents[1]
FAKE_CLI = str(TESTS / "fixtures" / "fake_cli.py")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process trees are read from /proc")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pids: list[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


def _pids(pid_file: Path, within: float = 60.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text = pid_file.read_text() if pid_file.exists() else ""
        if text.endswith("\n"):
            return [int(p) for p in text.split()]
        time.sleep(0.05)
    raise AssertionError(f"{pid_file} was never written")


def _kill_all(pids: list[int]) -> None:
    """The test's own cleanup when fabtest failed to: nothing may be left on the shared machine."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _cli(pid_file: Path, mode: str) -> CliAgent:
    return CliAgent([sys.executable, FAKE_CLI, "--prompt={prompt}"], timeout_s=120, kill_grace_s=0.5,
                    env={"FAKE_CLI_MODE": mode, "FAKE_CLI_PID_FILE": str(pid_file)})


def test_a_cli_grandchild_that_left_the_group_ends_with_the_turn(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    reply = _cli(pid_file, "escape").chat([Message("user", "hi")])
    pids = _pids(pid_file)
    try:
        assert reply.text == "echo: hi"
        assert _gone(pids), "the CLI's setsid grandchild outlived the turn"
    finally:
        _kill_all(pids)


def test_a_cli_grandchild_that_left_the_group_ends_when_the_runner_gives_up(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    agent = _cli(pid_file, "escape_hang")
    with pytest.raises(AgentTimeout):
        call_agent(agent, [Message("user", "hi")], timeout=2.0)
    pids = _pids(pid_file)
    try:
        assert _gone(pids), "the hung CLI or its setsid grandchild outlived the timeout"
    finally:
        _kill_all(pids)


def test_an_acp_grandchild_that_left_the_group_ends_with_the_agent(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    agent = AcpAgent([sys.executable, ECHO_ACP], cwd=tmp_path, kill_grace_s=0.5)
    with agent.around():
        assert agent.chat([Message("user", f"escape {pid_file}")]).text == "escaped"
        pids = _pids(pid_file)
    try:
        assert _gone(pids), "the ACP agent's setsid grandchild outlived the scenario"
    finally:
        _kill_all(pids)


_WORKER = '''
import sys
from fabtest.agents.acp import AcpAgent
from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import Message

kind, fake, pid_file = sys.argv[1:4]
if kind == "cli":
    agent = CliAgent([sys.executable, fake, "--prompt={{prompt}}"], timeout_s=300,
                     env={{"FAKE_CLI_MODE": "escape_hang", "FAKE_CLI_PID_FILE": pid_file}})
    agent.chat([Message("user", "hi")])
else:
    agent = AcpAgent([sys.executable, fake], timeout_s=300)
    agent.chat([Message("user", "escape_hang " + pid_file)])
'''


@pytest.mark.parametrize("kind", ["cli", "acp"])
def test_killing_the_process_that_runs_the_agent_ends_the_agent_and_its_children(tmp_path: Path, kind: str) -> None:
    """As when an xdist worker is killed (SIGKILL: no atexit, no finally runs in it)."""
    pid_file = tmp_path / "pids"
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(_WORKER.format()), encoding="utf-8")
    fake = FAKE_CLI if kind == "cli" else ECHO_ACP
    worker = subprocess.Popen([sys.executable, str(script), kind, fake, str(pid_file)], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        pids = _pids(pid_file)
        assert all(_alive(p) for p in pids)
        worker.kill()
        worker.wait(timeout=30)
        assert _gone(pids), f"the {kind} agent or its child outlived the killed worker"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        _kill_all(pids)


def test_without_the_supervisor_a_grandchild_holding_the_pipes_does_not_hang_the_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there is no supervisor (not Linux), the escaped grandchild survives, but the turn ends
    (it used to wait forever, closing a pipe another thread was reading)."""
    from fabtest.agents import supervisor

    monkeypatch.setattr(supervisor, "available", lambda: False)
    pid_file = tmp_path / "pids"
    done: list[str] = []
    turn = threading.Thread(target=lambda: done.append(_cli(pid_file, "escape").chat([Message("user", "hi")]).text),
                            daemon=True)
    turn.start()
    pids = _pids(pid_file)
    try:
        turn.join(60)
        assert done == ["echo: hi"], "the turn hung on the escaped grandchild's pipes"
    finally:
        _kill_all(pids)
