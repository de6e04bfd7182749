"""Helpers for the built-in agent's tests: the test MCP server's spec, free ports, process checks."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

HERE = Path(__file__).parent
SERVER = str(HERE / "mcp_test_server.py")


def stdio_spec(pid_dir: Path, **extra: object) -> dict[str, object]:
    return {"command": [sys.executable, SERVER], "env": {"FABTEST_TEST_PID_DIR": str(pid_dir)}, **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pids(folder: Path) -> list[int]:
    return sorted(int(p.read_text()) for p in folder.glob("*.pid"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True
