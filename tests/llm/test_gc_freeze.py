"""The LLM SDK's objects are left out of garbage collections: after the warm-up, and at exit.

Both keep the interpreter from walking google-genai's thousands of classes again and again
(pytest's two collections at the end of every process, the interpreter's own at exit), which
was most of the silent tail of an ``-n`` run.
"""

from __future__ import annotations

import subprocess
import sys

EXIT = """
import atexit, gc
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))  # runs after the freeze
from fabtest._internal import quick_exit
quick_exit.install()
quick_exit.install()
print("frozen before exit:", gc.get_freeze_count() > 0)
"""

WARM_UP = """
import gc
from fabtest.llm import warmup
from fabtest.config.settings import Settings
before = gc.get_freeze_count()
warmup.start(Settings()).join(120)
print(before, gc.get_freeze_count() > 0)
"""


def _run(code: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_heap_is_frozen_only_at_exit() -> None:
    assert _run(EXIT).split("\n")[:2] == ["frozen before exit: False", "frozen at exit: True"]


def test_the_warm_up_freezes_what_the_sdk_loaded() -> None:
    env = {"GEMINI_API_KEY": "not-a-real-key", "PATH": "/usr/bin:/bin"}
    assert _run(WARM_UP, env).split() == ["0", "True"]
