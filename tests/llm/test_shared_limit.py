"""The cross-process LLM limit: one pool of slots for every process of a run, freed by a crash.

Holders run in real subprocesses (flock is per open file, so threads of one process are checked
separately). Every wait in these tests is bounded by a timeout or a non-blocking acquire.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabtest.llm import limits, shared_limit
from fabtest.llm.shared_limit import SharedSemaphore

pytestmark = pytest.mark.skipif(not shared_limit.available(), reason="needs fcntl.flock (POSIX)")

# Holds N slots of the pool at argv[1] (size argv[2]) until stdin closes, then releases them.
HOLDER = textwrap.dedent("""
    import sys, threading
    from fabtest.llm.shared_limit import SharedSemaphore
    sem = SharedSemaphore(sys.argv[1], int(sys.argv[2]))
    count = int(sys.argv[3])
    got, done = threading.Barrier(count + 1, timeout=60), threading.Event()
    def hold():
        with sem:
            got.wait()
            done.wait(60)
    threads = [threading.Thread(target=hold) for _ in range(count)]
    for t in threads:
        t.start()
    got.wait()
    print("held", flush=True)
    sys.stdin.read()
    done.set()
    for t in threads:
        t.join(60)
    print("released", flush=True)
""")

# Several threads take turns holding a slot; each counts the marker files of all current holders.
HAMMER = textwrap.dedent("""
    import os, sys, threading, time, uuid
    from pathlib import Path
    from fabtest.llm.shared_limit import SharedSemaphore
    pool, size, markers, ready = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    sem = SharedSemaphore(pool, size)
    seen = []
    (ready / str(os.getpid())).touch()
    for _ in range(6000):  # start together (at most 60 s)
        if len(os.listdir(ready)) >= int(sys.argv[5]):
            break
        time.sleep(0.01)
    def work():
        for _ in range(10):
            with sem:
                mark = markers / uuid.uuid4().hex
                mark.touch()
                seen.append(len(os.listdir(markers)))
                time.sleep(0.01)
                mark.unlink()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    print(max(seen))
""")


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return tmp_path / "slots"


def _holder(pool: Path, size: int, count: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(pool), str(size), str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_the_cap_counts_the_slots_of_every_process(pool: Path, holders: list[subprocess.Popen[str]]) -> None:
    holders.append(_holder(pool, 3, 2))
    holders.append(_holder(pool, 3, 1))
    mine = SharedSemaphore(pool, 3)
    assert mine.acquire(blocking=False) is False  # 2 + 1 slots are held elsewhere
    assert mine.acquire(timeout=0.05) is False  # a bounded wait gives up

    second = holders[1]
    assert second.stdin is not None and second.stdout is not None
    second.stdin.close()
    assert second.stdout.readline().strip() == "released"
    assert mine.acquire(timeout=60) is True  # the slot given back is ours now
    assert mine.acquire(blocking=False) is False
    mine.release()
    mine.close()


def test_a_killed_holder_frees_its_slots(pool: Path, holders: list[subprocess.Popen[str]]) -> None:
    holders.append(_holder(pool, 2, 2))
    mine = SharedSemaphore(pool, 2)
    assert mine.acquire(blocking=False) is False
    os.kill(holders[0].pid, signal.SIGKILL)
    holders[0].wait(30)
    assert mine.acquire(timeout=60) and mine.acquire(timeout=60)  # nobody waits for a dead holder
    mine.release()
    mine.release()
    mine.close()


def test_many_processes_never_exceed_the_cap(pool: Path, tmp_path: Path) -> None:
    markers, ready = tmp_path / "markers", tmp_path / "ready"
    markers.mkdir()
    ready.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", HAMMER, str(pool), "3", str(markers), str(ready), "3"],
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    peaks = [int(proc.communicate(timeout=120)[0]) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert max(peaks) <= 3  # 3 processes x 4 threads want 12 slots at once


def test_threads_of_one_process_share_the_slots(pool: Path) -> None:
    sem = SharedSemaphore(pool, 2)
    got = threading.Barrier(3, timeout=30)
    release = threading.Event()

    def hold() -> None:
        with sem:
            got.wait()
            release.wait(30)

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    got.wait()
    assert sem.acquire(blocking=False) is False
    release.set()
    for t in threads:
        t.join(30)
    assert sem.acquire(blocking=False) is True
    sem.release()
    sem.close()


def test_a_slot_given_back_is_taken_again_at_the_first_try(pool: Path, holders: list[subprocess.Popen[str]],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """With most slots held by another process, a thread's next call takes the slot this process
    gave back (one ``flock``), instead of stepping over every slot held elsewhere again."""
    holders.append(_holder(pool, 64, 40))
    monkeypatch.setattr(shared_limit.os, "getpid", lambda: holders[0].pid)  # our search starts at its slots
    mine = SharedSemaphore(pool, 64)
    tries: list[int] = []
    plain = shared_limit.fcntl.flock

    def counted(fd: int, op: int) -> None:
        if op & shared_limit.fcntl.LOCK_NB:
            tries.append(fd)
        plain(fd, op)

    monkeypatch.setattr(shared_limit.fcntl, "flock", counted)
    for _ in range(5):
        assert mine.acquire(timeout=30) is True
        mine.release()
    assert len(tries) <= 41 + 4  # the first search may meet all 40 held; each later call one try
    assert len(set(tries)) <= 41
    mine.close()


def test_release_without_acquire_is_an_error(pool: Path) -> None:
    sem = SharedSemaphore(pool, 1)
    with pytest.raises(ValueError, match="released more often"):
        sem.release()


def test_endpoints_have_their_own_slots(pool: Path) -> None:
    a = shared_limit.slot_dir(pool, "gemini", "http://127.0.0.1:1/")
    assert a == shared_limit.slot_dir(pool, "gemini", "http://127.0.0.1:1")
    assert a != shared_limit.slot_dir(pool, "gemini", "http://127.0.0.1:2")
    assert a != shared_limit.slot_dir(pool, "openai", "http://127.0.0.1:1")


def test_the_registry_hands_out_shared_limiters_once_given_a_pool(pool: Path) -> None:
    try:
        limits.share_across_processes(str(pool))
        assert limits.shares_across_processes()
        sem = limits.provider_semaphore("gemini", "http://x", 4)
        assert isinstance(sem, SharedSemaphore) and sem.size == 4
        assert limits.provider_semaphore("gemini", "http://x/", 9) is sem  # first caller fixes the size
    finally:
        limits.share_across_processes(None)
    assert not isinstance(limits.provider_semaphore("gemini", "http://x", 4), SharedSemaphore)


def test_the_pool_directory_is_removed_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    made = shared_limit.create_pool_dir()
    sem = SharedSemaphore(made / "x", 2)
    assert sem.acquire(blocking=False)
    shared_limit.remove_pool_dir(made)  # a holder keeps its open file; the directory goes
    assert not made.exists()
    sem.release()
    sem.close()
    other = tmp_path / "not-a-pool"
    other.mkdir()
    shared_limit.remove_pool_dir(other)  # only directories create_pool_dir made
    assert other.exists()
