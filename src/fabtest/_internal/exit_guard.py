"""The process exits within seconds of the run's end, whatever an agent left running.

When the interpreter ends it first joins every thread pool's workers (``concurrent.futures``
registers that with ``threading._register_atexit``), then every non-daemon thread. An async agent
whose ``run_in_executor`` call is still blocked, a LangGraph node that blocks synchronously (it
runs in an executor thread fabtest gave up waiting for), or a plain ``threading.Thread`` an agent
started: each keeps the process alive forever after the summary is printed and the experiment is
saved. fabtest owns none of these threads, so it must not wait on them.

:func:`arm` (called at the end of the pytest session, with its exit status) registers one more
shutdown callback. Registered last, it runs first when the interpreter begins to end: it starts a
daemon watchdog that, if the process is still alive :data:`GRACE_S` seconds later, names the
threads still running on stderr and ends the process with the run's exit status
(``os._exit``, after flushing stdout and stderr). A process that ends normally never sees it.
Nothing is armed while the interpreter goes on (``pytester``'s in-process runs, a program that
calls ``pytest.main()``): the callback runs only at interpreter shutdown.
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["GRACE_S", "arm", "update"]

#: How long interpreter shutdown may wait on threads before the process ends anyway. Exit handlers
#: that do real work (an OpenTelemetry exporter flushing its last spans) get this long too.
def _grace(text: str | None) -> float:
    try:
        value = float(text or 10)
    except ValueError:
        return 10.0
    return value if 0 < value < 86_400 else 10.0


GRACE_S = _grace(os.environ.get("FABTEST_EXIT_GRACE_S"))

_state: dict[str, int] = {}
_lock = threading.Lock()


def arm(exit_status: int) -> None:
    """Remember the run's exit status and register the shutdown watchdog (once per process)."""
    with _lock:
        first = "status" not in _state
        _state["status"] = int(exit_status)
    if not first:
        return
    import concurrent.futures.thread  # noqa: F401 - its join-the-workers callback must be registered before ours

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not CPython's threading: nothing to guard against
        return
    try:
        register(_start_watchdog)
    except RuntimeError:  # the interpreter is already shutting down
        return


def update(exit_status: int) -> None:
    """A later pytest session in the same process ended (one where fabtest is dormant, around an
    in-process run that armed the guard): the process now ends with its status, not the inner one's."""
    with _lock:
        if "status" in _state:
            _state["status"] = int(exit_status)


def _start_watchdog() -> None:
    threading.Thread(target=_watch, name="fabtest-exit-guard", daemon=True).start()


def _watch() -> None:
    threading.Event().wait(GRACE_S)
    if sys.is_finalizing():  # the threads were joined and the interpreter is tearing down: touch nothing
        os._exit(_state.get("status", 1))
    stuck = sorted(t.name for t in threading.enumerate()
                   if t.is_alive() and t is not threading.main_thread() and t is not threading.current_thread())
    try:
        print(f"fabtest: exiting without waiting for {len(stuck)} thread(s) still running after the run "
              f"({', '.join(stuck[:5]) or 'exit handlers'}{', ...' if len(stuck) > 5 else ''}): fabtest does not "
              f"own them (an agent's executor or thread)", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # closed streams must not keep the process alive
        pass
    os._exit(_state.get("status", 1))
