"""Leave the interpreter without its final garbage collections.

A process that imported google-genai holds thousands of pydantic classes; the interpreter's
final collections walk all of them, which took 0.7 s per process on the 2-core development
machine (about 0.05 s without the SDK). Under ``pytest -n N`` the controller waits for every worker
to exit, then pays its own, so that was most of the silent tail after the last LLM call. An
exit handler calls ``gc.freeze()``, which moves the surviving objects out of the collector's
sight: the operating system reclaims the memory anyway, other exit handlers still run, and
objects freed by reference counting are still finalised as usual (only objects kept alive by
reference cycles alone are not collected at exit).
"""

from __future__ import annotations

import atexit
import gc
import threading

__all__ = ["install"]

_installed = threading.Event()


def install() -> None:
    """Register the freeze once per process (idempotent)."""
    if _installed.is_set():
        return
    _installed.set()
    atexit.register(gc.freeze)
