"""One ``max_concurrency`` for a whole ``pytest -n N`` run: a semaphore shared by processes.

Splitting the suite-wide limit into N per-worker pieces (8 into 2 at ``-n 4``) makes a worker
send one scenario's four judge calls in two rounds while the other workers' pieces sit idle.
Instead every process of the run takes its slots from the same pool: ``size`` slot files in a
directory the xdist controller creates (:func:`create_pool_dir`) and hands to its workers. A
slot is held with ``flock`` on its file, so

- the cap is exact across processes (a slot is one kernel lock, whoever holds it);
- a worker that crashes or is killed frees its slots at once (the kernel drops its locks), so
  nobody waits for a dead holder and no lock files need cleaning mid-run;
- nothing runs in the background: no server thread, no port, no leftover process.

Threads of one process first take a local slot (a bounded semaphore of ``size``), then look for a
free file lock; when every slot is busy in other processes they poll with a short backoff (at
most :data:`POLL_MAX_S`), which only happens when the run is at its cap anyway. Waiting is bounded
by ``timeout`` when one is given. Where ``fcntl`` is missing (Windows) :func:`available` is False
and callers fall back to a per-process share (see README "Performance").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["POLL_MAX_S", "SharedSemaphore", "available", "busy_slots", "create_pool_dir", "remove_pool_dir", "slot_dir"]

#: Longest pause between two looks for a slot freed by another process.
POLL_MAX_S = 0.01
_POLL_MIN_S = 0.0005
_PREFIX = "fabtest-llm-slots-"


def available() -> bool:
    """True where slots can be shared between processes (``fcntl.flock`` exists)."""
    return fcntl is not None


def create_pool_dir() -> Path:
    """A fresh private directory for one run's slot files (the xdist controller calls this)."""
    return Path(tempfile.mkdtemp(prefix=_PREFIX))


def remove_pool_dir(path: str | os.PathLike[str] | None) -> None:
    """Delete a run's slot directory (only one :func:`create_pool_dir` made); silent if gone."""
    if path and Path(path).name.startswith(_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def slot_dir(pool: str | os.PathLike[str], provider: str, base_url: str | None) -> Path:
    """The sub-directory holding one endpoint's slots: calls to one provider and base URL share it."""
    key = f"{provider}|{(base_url or '').rstrip('/')}"
    return Path(pool) / hashlib.sha256(key.encode()).hexdigest()[:16]


def busy_slots(pool: str | os.PathLike[str]) -> int:
    """How many slots of the run's pool some process holds now: the run's LLM calls in flight.

    The xdist controller calls no LLM itself; it asks each slot file with a non-blocking lock that it
    drops at once (microseconds; a worker that meets it just tries the next slot, as with any holder).
    """
    if fcntl is None:  # pragma: no cover - Windows
        return 0
    busy = 0
    for path in Path(pool).glob("*/slot-*"):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy += 1
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return busy


class SharedSemaphore:
    """At most ``size`` holders at once across every process that opens the same ``directory``.

    Used like ``threading.BoundedSemaphore`` (``with sem:``, ``acquire(timeout=...)``,
    ``release()``); a thread releases the slot it acquired.
    """

    def __init__(self, directory: str | os.PathLike[str], size: int) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise OSError("a shared LLM limit needs fcntl.flock (POSIX)")
        self.size = max(1, size)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._local = threading.BoundedSemaphore(self.size)
        self._lock = threading.Lock()
        self._fds: list[int | None] = [None] * self.size
        self._busy = [False] * self.size
        self._held = threading.local()
        self._released: list[int] = []  # slots this process gave back, the last one first
        self._cursor = os.getpid() % self.size  # processes start their search at different slots

    # -- the semaphore protocol ---------------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a slot; False when ``blocking`` is off or ``timeout`` passes without one."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        if not self._local.acquire(blocking, timeout if blocking else None):
            return False
        pause = _POLL_MIN_S
        try:
            while True:
                slot = self._try_slots()
                if slot is not None:
                    self._stack().append(slot)
                    return True
                if not blocking or (deadline is not None and time.monotonic() >= deadline):
                    self._local.release()
                    return False
                wait = pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic()))
                time.sleep(wait)
                pause = min(POLL_MAX_S, pause * 2)
        except BaseException:
            self._local.release()
            raise

    def release(self) -> None:
        """Give back the slot this thread acquired last."""
        stack = self._stack()
        if not stack:
            raise ValueError("SharedSemaphore released more often than acquired in this thread")
        slot = stack.pop()
        fd = self._fds[slot]
        if fd is not None:  # outside self._lock: only this thread holds the slot (see _try_slots)
            fcntl.flock(fd, fcntl.LOCK_UN)
        with self._lock:
            self._busy[slot] = False
            self._released.append(slot)
        self._local.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    @property
    def held(self) -> int:
        """Slots the threads of this process hold now."""
        with self._lock:
            return sum(self._busy)

    def close(self) -> None:
        """Close the slot files (held slots are released by the close)."""
        with self._lock:
            fds, self._fds = self._fds, [None] * self.size
            self._busy = [False] * self.size
            self._released.clear()
        for fd in fds:
            if fd is not None:
                os.close(fd)

    def __repr__(self) -> str:
        return f"SharedSemaphore({str(self.directory)!r}, size={self.size})"

    # -- internals ------------------------------------------------------------------------------
    def _stack(self) -> list[int]:
        stack: list[int] | None = getattr(self._held, "slots", None)
        if stack is None:
            stack = self._held.slots = []
        return stack

    def _try_slots(self) -> int | None:
        """Lock a slot no thread of this process holds and no other process has locked.

        The slots this process released last come first: another process's search rarely reaches
        them, so the lock is taken at the first try. Only when there are none does it search, onwards
        from where its last search stopped. Before, every acquire searched from the same place and
        stepped over each slot another process held, one refused ``flock`` (a system call, a hand-off
        of the GIL) each: at 1,000 conversations in two workers, hundreds per call.

        ``self._lock`` is held only to pick a slot and mark it, never across the ``flock``: a system
        call gives up the GIL, and under a thousand threads taking it back can take milliseconds,
        during which every other acquire and release of the process would wait on the lock.
        """
        for _ in range(self.size):
            with self._lock:
                slot = self._candidate()
                if slot is None:
                    return None
                fd = self._fds[slot]
                if fd is None:
                    fd = self._fds[slot] = os.open(self.directory / f"slot-{slot}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process holds it
                with self._lock:
                    self._busy[slot] = False
                continue
            return slot
        return None

    def _candidate(self) -> int | None:
        """The next slot to try, marked busy (``self._lock`` held): one this process gave back, else
        the next one not busy here from the cursor on; None when every slot is busy here."""
        while self._released:
            slot = self._released.pop()
            if not self._busy[slot]:
                self._busy[slot] = True
                return slot
        for offset in range(self.size):
            slot = (self._cursor + offset) % self.size
            if not self._busy[slot]:
                self._busy[slot] = True
                self._cursor = (slot + 1) % self.size
                return slot
        return None
