"""Nothing a CLI or ACP agent starts outlives its turn, its scenario or the process that ran it.

Killing the agent's process group is not enough: a grandchild that calls ``setsid`` (a daemon, a
language server, a browser) leaves the group, and when the pytest process (an xdist worker) is
killed outright nothing in it runs to clean up. So on Linux each agent command runs under a small
supervisor, this file run as a script (``python -I -S supervisor.py ...``, standard library only):

* it makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): every descendant that
  is orphaned, ``setsid`` or not, is re-parented to it instead of to init, so it can always find
  the whole tree by walking ``/proc`` parent links from itself;
* it asks for SIGTERM when the process that started it dies (``prctl(PR_SET_PDEATHSIG)``), and the
  agent for SIGKILL when the supervisor dies: a killed worker takes the tree with it;
* when the agent exits, or the supervisor is told to stop (SIGTERM, SIGINT, SIGHUP), it sends
  SIGTERM to every descendant, waits ``grace`` seconds, sends SIGKILL to what is left, reaps them
  and exits with the agent's status (a signal death is passed on as the same signal).

The supervisor stays in the agent's process group (the caller still kills "the group"), and
because it enforces the grace itself, callers wait :data:`MARGIN_S` longer than it before their
own SIGKILL (which would stop it half-way). ``PR_SET_PDEATHSIG`` fires when the *thread* that
started the supervisor ends: CLI turns wait for their process on that thread, ACP agents start
theirs on the agent's own loop thread, which lives as long as the agent.

Elsewhere (no ``prctl``, no ``/proc``) :func:`wrap` returns the command as it is and only the
process group is killed, as before.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Iterable, Sequence

__all__ = ["MARGIN_S", "Launch", "available", "end_groups", "signal_group", "started", "wrap"]

#: callers wait this much longer than the supervisor's grace before they SIGKILL its group
MARGIN_S = 3.0
_START_S = 30.0  # bounded wait for the supervisor to say whether the agent started
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


class Launch:
    """The command to start and the status pipe the supervisor answers on (``None`` unsupervised)."""

    def __init__(self, argv: list[str], status: tuple[int, int] | None) -> None:
        self.argv = argv
        self.status = status

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.status[1],) if self.status else ()

    def close(self) -> None:
        """Close the status pipe (the process could not be started at all)."""
        if self.status is not None:
            for fd in self.status:
                os.close(fd)
            self.status = None


def available() -> bool:
    """True where the supervisor works: Linux with ``/proc`` and a Python to run it with."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc") and bool(sys.executable)


def wrap(argv: Sequence[str], grace_s: float) -> Launch:
    """``argv`` run under the supervisor (or as it is where there is none); pass ``pass_fds`` to
    the process start and call :func:`started` right after it."""
    if not available():
        return Launch(list(argv), None)
    read, write = os.pipe()
    return Launch([sys.executable, "-I", "-S", os.path.abspath(__file__), str(write), str(os.getpid()),
                   f"{max(0.0, grace_s):g}", "--", *argv], (read, write))


def started(launch: Launch, command: str) -> None:
    """Wait (bounded) for the supervisor's word; OSError when the agent's command could not start,
    as a plain process start would raise."""
    if launch.status is None:
        return
    read, write = launch.status
    launch.status = None
    os.close(write)
    try:
        answer = b""
        deadline = time.monotonic() + _START_S
        while not answer.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read, 4096) if ready else b""
            if not chunk:
                break
            answer += chunk
    finally:
        os.close(read)
    if answer.startswith(b"ok"):
        return
    if answer.startswith(b"E"):
        number, _, message = answer[1:].decode("utf-8", "replace").strip().partition(" ")
        raise OSError(int(number) if number.isdigit() else 0, message, command)
    raise OSError(0, "the process supervisor did not start (is sys.executable a working Python?)", command)


def end_groups(pgids: Iterable[int], wait_s: float) -> None:
    """SIGTERM each process group, give them ``wait_s`` seconds (a supervisor ends its tree in that
    time), then SIGKILL what is left: the end of the run, Ctrl-C, a worker shutting down."""
    groups = [pgid for pgid in pgids if signal_group(pgid, signal.SIGTERM)]
    deadline = time.monotonic() + wait_s
    while groups and time.monotonic() < deadline:
        groups = [pgid for pgid in groups if signal_group(pgid, 0)]
        if groups:
            time.sleep(0.02)
    for pgid in groups:
        signal_group(pgid, signal.SIGKILL)


def signal_group(pgid: int, sig: int) -> bool:
    """``killpg`` that answers whether the group (still) exists instead of raising."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


# -- the supervisor process ---------------------------------------------------------------------


class _Stop(Exception):
    """Raised by the signal handler: the supervisor was told to stop."""


def _descendants(root: int) -> list[int]:
    """Live (non-zombie) processes below ``root``, from ``/proc`` parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _reap(agent: int, status: list[int]) -> None:
    """Collect every exited child (orphans are re-parented to us); keep the agent's status."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == agent:
            status.append(code)


def _end_tree(agent: int, status: list[int], grace_s: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # told twice: the same cleanup is already under way
    me = os.getpid()
    termed: set[int] = set()
    deadline = time.monotonic() + grace_s
    hard_stop = deadline + 5.0  # SIGKILL cannot be refused: this only bounds a /proc oddity
    while time.monotonic() < hard_stop:
        _reap(agent, status)
        left = _descendants(me)
        if not left:
            break
        late = time.monotonic() >= deadline
        for pid in left:
            if late or pid not in termed:
                try:
                    os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
                termed.add(pid)
        time.sleep(0.02)
    _reap(agent, status)


def _main(args: list[str]) -> int:
    import ctypes

    status_fd, parent, grace_s, argv = int(args[0]), int(args[1]), float(args[2]), args[4:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def _on_signal(signum: int, frame: object) -> None:
        raise _Stop(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if os.getppid() != parent:  # the caller died before the death signal was armed
        return 1
    errors_read, errors_write = os.pipe()  # close-on-exec: EOF means the agent's exec succeeded
    agent = os.fork()
    if agent == 0:
        try:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            os.close(errors_read)
            os.close(status_fd)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(errors_write, f"{exc.errno or 0} {exc.strerror or exc}".encode())
        finally:
            os._exit(127)
    status: list[int] = []
    try:
        os.close(errors_write)
        failed = os.read(errors_read, 4096)
        os.close(errors_read)
        os.write(status_fd, b"E" + failed + b"\n" if failed else b"ok\n")
        os.close(status_fd)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the agent's pipes reach EOF when the agent's tree closes them, not us
            os.dup2(null, fd)
        while not status:
            pid, code = os.waitpid(-1, 0)
            if pid == agent:
                status.append(code)
    except _Stop:
        pass
    except ChildProcessError:
        pass
    _end_tree(agent, status, grace_s)
    if not status:
        return 1
    if os.WIFSIGNALED(status[0]):
        signal.signal(os.WTERMSIG(status[0]), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status[0]))
    return os.waitstatus_to_exitcode(status[0]) if os.WIFEXITED(status[0]) else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
