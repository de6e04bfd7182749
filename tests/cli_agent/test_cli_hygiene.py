"""CLI agents: the whole process group dies when the runner gives up or the scenario ends, and a
prompt can never be parsed as a flag."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.child import child_env

from fabtest.agents.base import AgentTimeout
from fabtest.agents.cli_agent import CliAgent, kill_all_groups
from fabtest.conversation import Message
from fabtest.engine.turns import call_agent

FAKE = str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_cli.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def _gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10  # bounded wait for init to reap the orphaned child
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


def _pids(pid_file: Path, proc: Any = None) -> list[int]:
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline and (proc is None or proc.poll() is None):
        time.sleep(0.05)
    time.sleep(0.1)  # the file is written in one go, but let the write finish
    assert pid_file.exists(), proc.stdout.read().decode() if proc is not None else "no pid file"
    return [int(p) for p in pid_file.read_text().split()]


def _hanging(tmp_path: Path) -> tuple[CliAgent, Path]:
    pid_file = tmp_path / "pids"
    agent = CliAgent([sys.executable, FAKE, "--prompt={prompt}"], timeout_s=120,
                     env={"FAKE_CLI_MODE": "hang", "FAKE_CLI_PID_FILE": str(pid_file)})
    return agent, pid_file


def test_the_runner_giving_up_kills_the_cli_and_its_child(tmp_path: Path) -> None:
    agent, pid_file = _hanging(tmp_path)
    with pytest.raises(AgentTimeout):
        call_agent(agent, [Message("user", "hi")], timeout=1.5)  # far below the CLI's own 120 s
    assert _gone(_pids(pid_file))


def test_close_and_exit_kill_what_is_still_running(tmp_path: Path) -> None:
    import threading

    agent, pid_file = _hanging(tmp_path)
    worker = threading.Thread(target=lambda: pytest.raises(Exception, agent.chat, [Message("user", "hi")]),
                              daemon=True)
    worker.start()
    pids = _pids(pid_file)
    agent.close()
    assert _gone(pids)
    worker.join(10)
    kill_all_groups()  # nothing left to kill: must not raise


def test_a_prompt_that_looks_like_a_flag_reaches_the_cli_as_text(tmp_path: Path) -> None:
    from fabtest.demo.fake_cli import build_cli_agent

    agent = build_cli_agent({"cwd": str(tmp_path), "state_dir": str(tmp_path / "state")})
    try:
        reply = agent.chat([Message("user", "--help")])
    finally:
        agent.close()
    assert reply.text and "usage:" not in reply.text.lower()
    assert agent.command[agent.command.index("--prompt={prompt}")] == "--prompt={prompt}"


def test_the_default_gemini_command_glues_the_prompt_to_its_flag() -> None:
    rendered = CliAgent()._render(CliAgent().command, "--help")
    assert "--prompt=--help" in rendered and "--help" not in rendered


def test_ctrl_c_during_a_hanging_cli_turn_leaves_no_process(tmp_path: Path) -> None:
    import signal
    import subprocess
    import textwrap

    pid_file = tmp_path / "pids"
    (tmp_path / "hangbot.py").write_text(textwrap.dedent(f'''
        import sys
        from fabtest.agents.cli_agent import CliAgent

        def build(context):
            return CliAgent([sys.executable, {FAKE!r}, "--prompt={{prompt}}"], timeout_s=120,
                            env={{"FAKE_CLI_MODE": "hang", "FAKE_CLI_PID_FILE": {str(pid_file)!r}}})
    '''), encoding="utf-8")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "hang.feature").write_text(
        'Feature: Hang\n  Scenario: Hangs\n    When the user says "hi"\n', encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.fabtest]\nagent = "hangbot:build"\n'
        'results_dir = "results"\nagent_timeout = 300\n', encoding="utf-8")  # only Ctrl-C can end it
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "features"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a background job may inherit SIG_IGN
    try:
        pids = _pids(pid_file, proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = proc.stdout.read().decode() if proc.stdout else ""
    assert "KeyboardInterrupt" in output or "Interrupted" in output, output
    assert _gone(pids), "the CLI agent or its child outlived an interrupted pytest"
