"""What a concurrent run does for the CPU: reused threads (fabtest._internal.threads), fewer collections."""

from __future__ import annotations

import threading

from fabtest._internal.threads import ReusableThreads


def test_every_job_runs_at_once_and_finished_threads_take_the_next_jobs() -> None:
    pool = ReusableThreads("test-pool")
    try:
        for _ in range(2):  # the second round finds the first round's threads idle
            together = threading.Barrier(5, timeout=10)  # broken (an error) unless all 5 run at the same time
            names: list[str] = []
            done = threading.Semaphore(0)

            def job(i: int, barrier: threading.Barrier = together, seen: list[str] = names,
                    finished: threading.Semaphore = done) -> None:
                try:
                    barrier.wait()
                    seen.append(threading.current_thread().name)
                finally:
                    finished.release()

            for i in range(5):
                pool.submit(job, i, name=f"job {i}")
            for _ in range(5):
                assert done.acquire(timeout=10)
            assert sorted(names) == [f"job {i}" for i in range(5)]  # each ran under its own name
        assert pool.threads == 5  # reused, not started again
    finally:
        pool.close()


def test_a_job_that_raises_leaves_its_thread_to_the_next_one_and_close_ends_the_idle_threads() -> None:
    pool = ReusableThreads("test-pool")
    ran = threading.Event()

    def boom() -> None:
        raise RuntimeError("the job's own business")

    pool.submit(boom)
    pool.submit(ran.set)
    assert ran.wait(10)
    pool.close()
    for thread in [t for t in threading.enumerate() if t.name.startswith("test-pool")]:
        thread.join(10)
        assert not thread.is_alive()
    assert pool.threads <= 2


def test_the_collector_runs_less_often_while_scenarios_run_concurrently_and_as_before_after() -> None:
    import gc

    from fabtest.pytest_plugin.concurrency.protocol import GC_THRESHOLDS, _fewer_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 1000)  # a project's own higher last threshold is kept
        with _fewer_collections():
            assert gc.get_threshold() == (GC_THRESHOLDS[0], GC_THRESHOLDS[1], 1000)
        assert gc.get_threshold() == (700, 10, 1000)
    finally:
        gc.set_threshold(*before)


def test_threads_started_by_the_submitting_thread_are_reused_too() -> None:
    import time

    pool = ReusableThreads("test-here", start_here=True)
    try:
        for _ in range(3):
            done = threading.Event()
            pool.submit(done.set)
            assert done.wait(10)
            deadline = time.monotonic() + 10
            while not pool._idle and time.monotonic() < deadline:  # the thread on its way back to wait
                time.sleep(0.001)
        assert pool.threads == 1
        assert not [t for t in threading.enumerate() if t.name == "test-here starter"]
    finally:
        pool.close()
