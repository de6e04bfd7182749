"""Threads for work that blocks (a scenario's call phase, a sync agent's turn), started once and reused.

``threading.Thread.start`` waits until the new thread has run, which needs the GIL: with a
thousand conversations in flight that wait was about 12 ms a thread on the main thread, which
starts and reports every scenario (docs/performance.md). Here a finished thread takes the next
job instead of exiting, and a new one, when none is idle, is started by a helper thread, so the
caller never waits. Unlike ``ThreadPoolExecutor`` nothing queues behind a busy thread: every job
runs at once, on an idle thread or a new one (a job may block for minutes: an agent's turn).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ReusableThreads"]

_Job = tuple[Callable[..., Any], tuple[Any, ...], str]


class ReusableThreads:
    """Runs each job at once on its own daemon thread, reusing the threads that finished."""

    def __init__(self, name: str, *, start_here: bool = False) -> None:
        """``start_here``: a new thread is started by the submitting thread itself (which then waits
        for it, as ``Thread.start`` does), not by the helper thread: for callers of their own that
        may all need a new thread at once (thousands of agents' turns), which one helper would
        start one after the other."""
        self.name = name
        self._start_here = start_here
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, less the jobs already promised to them
        self._threads = 0
        self._starts: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: start one; False: the starter stops
        self._starter: threading.Thread | None = None
        self._closed = False

    @property
    def threads(self) -> int:
        """Threads started so far (for tests: reuse keeps it at the most jobs ever running at once)."""
        return self._threads

    def submit(self, fn: Callable[..., Any], *args: Any, name: str = "") -> None:
        """Run ``fn(*args)`` now on a thread named ``name`` (the pool's name if empty). What it
        raises is its own business: catch it inside ``fn``."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: closed")
            self._jobs.put((fn, args, name or self.name))
            if self._idle:
                self._idle -= 1
                return
            self._threads += 1
            if not self._start_here and self._starter is None:
                self._starter = threading.Thread(target=self._start_threads, name=f"{self.name} starter", daemon=True)
                self._starter.start()
        if self._start_here:
            threading.Thread(target=self._work, name=self.name, daemon=True).start()
        else:
            self._starts.put(True)

    def close(self) -> None:
        """Let every thread end once its job is done (idle ones at once); jobs running go on."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(None)
        self._starts.put(False)

    def _start_threads(self) -> None:
        while self._starts.get():
            threading.Thread(target=self._work, name=self.name, daemon=True).start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, name = job
            me.name = name
            try:
                fn(*args)
            except BaseException:  # a job handles its own errors; the thread lives on
                pass
            finally:
                del fn, args, job  # nothing of a finished job stays referenced while the thread waits
            me.name = self.name
            with self._lock:
                self._idle += 1
