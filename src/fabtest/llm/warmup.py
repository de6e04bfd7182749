"""Build the run's Gemini clients on a background thread while pytest collects and starts the run.

Building the judge's and simulator's HTTP clients takes a moment (httpx, a TLS context), and where
google-genai is needed (llm/gemini_rest.py says when) importing it and building its first client
take about 1 s. fabtest builds them lazily (``--collect-only`` and deterministic runs never pay), so
a run that will call Gemini would otherwise pay on its first scenario. ``start`` builds the run's own
judge and simulator (``build``, the plugin's ``llm_roles``) and their clients on a daemon thread: the
pre-flight probe and the first scenario then use those clients, already built, and the probe's
connection. It does not import google-genai for its own sake: a run whose judge and simulator do
without it should not spend a second of CPU beside its first scenario loading it. Best effort: any
error is left for the real construction to report.

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
from collections.abc import Callable
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


def _warm(build: Callable[[], Any] | None) -> None:
    try:
        roles = build() if build is not None else None
        for llm in (getattr(roles, "judge", None), getattr(roles, "simulator", None)):
            while llm is not None and not hasattr(llm, "warm") and hasattr(llm, "inner"):
                llm = llm.inner  # under the cache wrapper
            warm = getattr(llm, "warm", None)
            if callable(warm):
                warm()
    except Exception:  # best effort; the real construction reports real problems
        return
    gc.freeze()  # the clients (and the SDK, where loaded) are here for good: later full collections skip them


def start(settings: Any, build: Callable[[], Any] | None = None) -> threading.Thread | None:
    """Start warming when this run will call Gemini; the thread (for tests), or None. ``build``
    returns the run's :class:`~fabtest.engine.scenario.LLMRoles` (built once, kept by its caller)."""
    if not will_call_gemini(settings):
        return None
    thread = threading.Thread(target=_warm, args=(build,), name="fabtest-llm-warm-up", daemon=True)
    thread.start()
    return thread
