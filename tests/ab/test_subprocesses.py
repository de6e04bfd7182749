"""_internal/subprocesses.py: a child and what it started are stopped together, its output kept."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from fabtest._internal.subprocesses import Child, run_together

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups")

# a child that starts a grandchild and both sleep: stopping the child must end the grandchild too
SCRIPT = """
import signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a test run in the background starts with it ignored
grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(grand.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")  # a zombie has ended


def test_a_timeout_stops_the_child_and_its_children(tmp_path: Path) -> None:
    out = tmp_path / "child.log"
    child = Child([sys.executable, "-c", SCRIPT], output=out)
    deadline = time.monotonic() + 30
    while not out.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(out.read_text().split()[0])
    [done] = run_together([child], timeout=0.5)
    assert done.timed_out and done.returncode != 0
    assert done.tail.startswith(str(grandchild)) and "KeyboardInterrupt" in done.tail  # SIGINT came first
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_children_that_end_report_their_code(tmp_path: Path) -> None:
    children = [Child([sys.executable, "-c", f"print('hi'); raise SystemExit({code})"], output=tmp_path / f"{code}.log")
                for code in (0, 3)]
    assert [(d.returncode, d.tail.strip(), d.timed_out) for d in run_together(children)] == [(0, "hi", False),
                                                                                            (3, "hi", False)]
