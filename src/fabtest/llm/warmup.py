"""Warm the Gemini client on a background thread while pytest collects and starts the run.

Importing google-genai and building its first client take about 1.5 s. fabtest imports them
lazily (``--collect-only`` and deterministic runs never pay), so a run that will call Gemini
would otherwise pay on its first scenario. ``start`` does the import and builds a throwaway
client (which loads the SDK's lazily imported parts) on a daemon thread from session start;
the judge and simulator then build their own clients from warm modules. Best effort: any error
is left for the real construction to report.

Once loaded, the SDK's objects (thousands of pydantic classes) live until the process ends, yet
every full garbage collection walks them again: pytest runs two at the end of every process, about
0.3 s each on the 2-core development machine under load, and an ``-n`` run waits for the slowest
worker's. So the warm-up then freezes the heap (``gc.freeze()``): what is alive at that moment,
imports and configuration, is left out of later collections (still freed by reference counting;
only if it later became garbage held by cycles alone would it stay until exit).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

__all__ = ["start", "will_call_gemini"]


def will_call_gemini(settings: Any) -> bool:
    """A role is configured for Gemini and a key (or a replay cache) makes it available."""
    from fabtest.llm.factory import llm_available

    for role in (settings.judge, settings.simulator):
        if role.provider != "gemini":
            continue
        try:
            if llm_available(role.llm_settings(1), cache_mode=settings.llm_cache)[0]:
                return True
        except ValueError:
            continue
    return False


def _warm() -> None:
    try:
        from google import genai
        from google.genai import errors, types  # noqa: F401 - imported for their side effect: loaded

        genai.Client(api_key="fabtest-warm-up", http_options=types.HttpOptions(timeout=1000))
    except Exception:  # noqa: BLE001 - best effort; the real client reports real problems
        return
    gc.freeze()  # the SDK is here for good: later full collections need not walk it again


def start(settings: Any) -> threading.Thread | None:
    """Start warming when this run will call Gemini; the thread (for tests), or None."""
    if not will_call_gemini(settings):
        return None
    thread = threading.Thread(target=_warm, name="fabtest-llm-warm-up", daemon=True)
    thread.start()
    return thread
