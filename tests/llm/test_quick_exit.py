"""At exit the heap is frozen, so the interpreter's last collections skip the LLM SDK's objects."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import atexit, gc
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))  # runs after the freeze
from fabtest.llm import quick_exit
quick_exit.install()
quick_exit.install()
print("frozen before exit:", gc.get_freeze_count() > 0)
"""


def test_the_heap_is_frozen_only_at_exit() -> None:
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["frozen before exit: False", "frozen at exit: True"]
