"""The small ACP agent of tests/acp (``echo_agent.py``) and how to tell that its processes are gone."""

from __future__ import annotations

import os
import time
from pathlib import Path

ECHO = str(Path(__file__).resolve().parents[1] / "acp" / "echo_agent.py")


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) pids whose environment holds ``marker``: the agent and anything it started."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if marker.encode() not in fh.read():
                    continue
            with open(f"/proc/{entry}/stat") as st:
                if st.read().rsplit(")", 1)[-1].split()[0] != "Z":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def gone(marker: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_with(marker) == []
