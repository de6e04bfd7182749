"""Child processes that can always be stopped: each in its own process group, its output in a file.

A command that runs pytest (or any worker) as a child must be able to stop the child and everything
the child started (an agent's own subprocesses, an MCP server), on Ctrl-C, on a timeout and on an
error, and must never leave one running. A child started in its own session is one process group:
the terminal's Ctrl-C does not reach it directly (so the parent decides how it ends) and one
``killpg`` reaches all of it. Stopping is graceful first (SIGINT, as a Ctrl-C at the terminal would
be: pytest then writes what ran), then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Child", "Finished", "run_together"]

#: seconds a child gets after SIGINT (to write its results), then after SIGTERM
GRACE_S = 20.0
TERM_GRACE_S = 5.0


@dataclass(frozen=True, slots=True)
class Finished:
    """How a child ended: its exit code (negative: killed by that signal) and its output's tail."""

    returncode: int
    tail: str
    timed_out: bool = False


class Child:
    """One child process in its own process group, its stdout and stderr written to ``output``."""

    def __init__(self, args: Sequence[str], *, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None, output: Path | None = None) -> None:
        self.output = output
        handle = open(output, "wb") if output is not None else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                list(args), cwd=cwd, env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL,
                stdout=handle, stderr=subprocess.STDOUT, start_new_session=sys.platform != "win32")
        finally:
            if output is not None:
                handle.close()  # type: ignore[union-attr]

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self, grace: float = GRACE_S) -> int:
        """End the child and its group: SIGINT, then SIGTERM, then SIGKILL, each after a grace period."""
        steps = ((signal.SIGINT, grace), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, TERM_GRACE_S))
        for sig, wait in steps:
            if self.process.poll() is not None:
                break
            self._signal(sig)
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        self._signal(signal.SIGKILL)  # what the child started and left behind goes with it
        return self.process.wait()

    def _signal(self, sig: int) -> None:
        try:
            if sys.platform == "win32":  # pragma: no cover - no process groups to signal
                self.process.send_signal(sig)
            else:
                os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def finished(self, timed_out: bool = False) -> Finished:
        return Finished(self.process.returncode if self.process.returncode is not None else -1, self.tail(), timed_out)

    def tail(self, chars: int = 4000) -> str:
        if self.output is None:
            return ""
        try:
            with open(self.output, "rb") as handle:
                handle.seek(max(0, self.output.stat().st_size - chars))
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""


def run_together(children: Sequence[Child], timeout: float | None = None, poll_s: float = 0.1) -> list[Finished]:
    """Wait for every child; on a timeout stop the ones still running (their ``timed_out`` set), and
    on any exception (Ctrl-C in the parent) stop them all before it propagates."""
    deadline = None if timeout is None else time.monotonic() + timeout
    late: set[int] = set()
    try:
        while any(c.poll() is None for c in children):
            if deadline is not None and time.monotonic() > deadline:
                for index, child in enumerate(children):
                    if child.poll() is None:
                        late.add(index)
                        child.stop()
                break
            time.sleep(poll_s)
    except BaseException:
        for child in children:
            child.stop()
        raise
    return [c.finished(i in late) for i, c in enumerate(children)]
