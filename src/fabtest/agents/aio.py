"""The one event loop every async agent runs on, shared by all scenarios in flight in the process.

Modern agent frameworks are async first, and their clients (an ``httpx.AsyncClient``, an MCP
session, a model SDK's connection pool) belong to the loop that created them. So fabtest keeps
exactly one loop per process, owned by a daemon thread started on first use, and submits every
coroutine of an agent to it: its factory, ``around()`` entry and exit and each ``chat``. A client
an agent builds in its factory is therefore still usable in its ``chat``, scenarios in flight at
once share the loop instead of each spinning one up, and fabtest's own code (sync, on the
scenario's thread) simply waits for the result.

Each coroutine runs in a copy of the *caller's* :mod:`contextvars` context, so a span or a
deadline set on the scenario's thread is current inside the agent too. :func:`run` gives up
after ``timeout`` seconds and cancels the task (the agent sees ``CancelledError``), which is how
``agent_timeout`` works for async agents. :func:`enter_async` runs an async context manager's
entry and exit in one task that lives as long as the scenario (anyio cancel scopes and task
groups, as used by MCP clients, must be left by the task that entered them).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # asyncio is imported on first use: loading fabtest's plugin must stay light
    import asyncio

__all__ = ["enter_async", "is_async_callable", "loop", "run", "submit"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def loop() -> asyncio.AbstractEventLoop:
    """The process's agent loop, started (on a daemon thread named ``fabtest-aio``) on first use."""
    import asyncio

    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            new = asyncio.new_event_loop()
            ready = threading.Event()

            def _serve() -> None:
                asyncio.set_event_loop(new)
                new.call_soon(ready.set)
                new.run_forever()

            threading.Thread(target=_serve, name="fabtest-aio", daemon=True).start()
            ready.wait()
            _loop = new
        return _loop


def is_async_callable(func: Any) -> bool:
    """True for ``async def`` functions and methods, and objects whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(func) or (callable(func) and inspect.iscoroutinefunction(type(func).__call__))


def submit(awaitable: Awaitable[T]) -> concurrent.futures.Future[T]:
    """Start ``awaitable`` on the loop in a copy of the caller's context; cancelling the returned
    future cancels the task."""
    context = contextvars.copy_context()
    target = loop()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()

    def _start() -> None:
        if result.cancelled():  # the future stays pending while the task runs, so cancel() reaches it
            _close(awaitable)
            return
        task = target.create_task(_as_coroutine(awaitable), context=context)

        def _done(finished: asyncio.Task[T]) -> None:
            if result.done():
                return
            if finished.cancelled():
                result.cancel()
            elif finished.exception() is not None:
                result.set_exception(finished.exception())
            else:
                result.set_result(finished.result())

        task.add_done_callback(_done)
        result.add_done_callback(lambda f: target.call_soon_threadsafe(task.cancel) if f.cancelled() else None)

    target.call_soon_threadsafe(_start)
    return result


def run(awaitable: Awaitable[T], *, timeout: float | None = None) -> T:
    """Run ``awaitable`` on the agent loop and wait for it on this thread.

    Raises :class:`TimeoutError` after ``timeout`` seconds, having cancelled the task; whatever the
    coroutine raises is raised here. Must not be called from the loop's own thread (it would wait
    for itself): async code calls the agent directly.
    """
    if _loop is not None and _on_loop_thread(_loop):
        raise RuntimeError("fabtest.agents.aio.run() was called from the agent loop itself; "
                           "await the coroutine instead")
    future = submit(awaitable)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"the coroutine did not finish within {timeout:g}s") from None
    except concurrent.futures.CancelledError:
        raise TimeoutError("the coroutine was cancelled") from None


def enter_async(manager: Any) -> Callable[[], None]:
    """Enter an async context manager on the loop; returns the function that leaves it.

    Entry and exit happen in one long-lived task, so context managers that must be left by the task
    that entered them (anyio task groups, cancel scopes) work. The exit function raises what
    ``__aexit__`` raised.
    """
    import asyncio

    entered: concurrent.futures.Future[None] = concurrent.futures.Future()
    leave: asyncio.Event | None = None

    async def _host() -> None:
        nonlocal leave
        leave = asyncio.Event()
        try:
            async with manager:
                entered.set_result(None)
                await leave.wait()
        except BaseException as exc:
            if not entered.done():
                entered.set_exception(exc)
                return
            raise

    hosted = submit(_host())
    try:
        entered.result()
    except BaseException:
        hosted.cancel()
        raise

    def _exit() -> None:
        if hosted.done():  # the loop cancelled it already (the process is ending)
            hosted.result()
            return
        assert leave is not None
        loop().call_soon_threadsafe(leave.set)
        hosted.result()

    return _exit


def _on_loop_thread(target: asyncio.AbstractEventLoop) -> bool:
    import asyncio

    try:
        return asyncio.get_running_loop() is target
    except RuntimeError:
        return False


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _close(awaitable: Awaitable[Any]) -> None:
    """A coroutine that never ran is closed, so Python does not warn that it was never awaited."""
    if isinstance(awaitable, Coroutine):
        awaitable.close()
