"""A real MCP server (official SDK) for the built-in agent's tests: stdio, or ``--http PORT``.

When ``FABTEST_TEST_PID_DIR`` is set it writes its pid there, so tests can check it was stopped.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("fabtest-test-server")


@server.tool()
def lookup(key: str) -> dict[str, Any]:
    """Look a key up in the test catalogue."""
    return {"key": key, "value": {"alpha": 1, "beta": 2}.get(key), "pid": os.getpid(),
            "sees_gemini_key": "GEMINI_API_KEY" in os.environ}


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer (for timeouts)."""
    time.sleep(seconds)
    return "done"


@server.tool()
def broken(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


if __name__ == "__main__":
    pid_dir = os.environ.get("FABTEST_TEST_PID_DIR")
    if pid_dir:
        (Path(pid_dir) / f"{os.getpid()}.pid").write_text(str(os.getpid()))
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
