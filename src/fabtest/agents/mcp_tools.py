"""MCP servers as tools of the built-in agent, through the official ``mcp`` SDK (stdio and streamable HTTP).

The SDK is asynchronous and the agent protocol is not, so every MCP connection lives on one
process-wide event loop running in a daemon thread; the agent submits calls to it and waits
with a timeout. A connection is one long-lived task that enters the SDK's client context, lists
the tools, then waits for its stop event, so the context is entered and left in the same task
(what anyio's cancel scopes require).

Process hygiene: a ``command`` server speaks stdio through the SDK, which starts it in its own
process group and, when the connection closes, closes its stdin and then SIGTERMs/SIGKILLs the
group. A ``command`` with a ``url`` is started by fabtest (own process group, killed with its
group) and reached over HTTP once the port accepts connections. Connections close when their
agent closes (the scenario ends, including after a timeout), shared ones (``shared = true``)
when the process exits; an ``atexit`` hook closes whatever is left.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fabtest.agents.base import AgentError, AgentTimeout
from fabtest.errors import UsageError

__all__ = ["McpConnection", "McpServerSpec", "McpTool", "close_all", "connect", "parse_mcp_specs"]

_SPEC_KEYS = {"command", "url", "env", "cwd", "shared", "headers", "startup_timeout", "timeout", "name"}
_STDERR_TAIL_CHARS = 1500


@dataclass(frozen=True)
class McpServerSpec:
    """One entry of ``mcp = [...]``: a command (stdio), a URL (streamable HTTP), or both (start, then HTTP)."""

    command: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    shared: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    startup_timeout: float = 30.0
    timeout: float = 60.0
    name: str = ""

    @property
    def label(self) -> str:
        """How errors name the server: its name, else its command or URL."""
        if self.name:
            return self.name
        if self.command and not self.url:
            return shlex.join(Path(a).name if i == 0 else a for i, a in enumerate(self.command))
        return self.url or "?"


@dataclass(frozen=True)
class McpTool:
    """A tool one MCP server offers: what the model sees (name, description, JSON schema)."""

    name: str
    description: str
    schema: dict[str, Any]


def parse_mcp_specs(value: Any, *, where: str, root: Path) -> list[McpServerSpec]:
    """Validate ``mcp = [...]`` (a table or a list of tables) into specs; one-line errors naming the entry."""
    entries = [value] if isinstance(value, Mapping) else value
    if not isinstance(entries, list):
        raise UsageError(f"{where}: mcp must be a list of tables like {{ command = [\"python\", \"-m\", \"srv\"] }} "
                         f"or {{ url = \"http://127.0.0.1:8931/mcp\" }}, got {type(value).__name__}")
    if entries:
        from fabtest._internal.extras import require_extra

        require_extra("mcp", where=where)
    specs = []
    for index, entry in enumerate(entries):
        at = f"{where}: mcp[{index}]"
        if not isinstance(entry, Mapping):
            raise UsageError(f"{at}: expected a table with command = [...] or url = \"...\", got {entry!r}")
        unknown = sorted(set(entry) - _SPEC_KEYS)
        if unknown:
            raise UsageError(f"{at}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_SPEC_KEYS))})")
        command = entry.get("command")
        if isinstance(command, str):
            command = shlex.split(command)
        if command is not None and (not isinstance(command, list) or not command
                                    or not all(isinstance(a, str) for a in command)):
            raise UsageError(f"{at}: command must be a non-empty list of strings, got {command!r}")
        url = entry.get("url")
        if url is not None and (not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https")):
            raise UsageError(f"{at}: url must be an http(s) URL like \"http://127.0.0.1:8931/mcp\", got {url!r}")
        if command is None and url is None:
            raise UsageError(f"{at}: give command = [\"python\", \"-m\", \"myapp.mcp_server\"] (stdio) "
                             "or url = \"http://127.0.0.1:8931/mcp\" (streamable HTTP)")
        for key in ("env", "headers"):
            table = entry.get(key, {})
            if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()):
                raise UsageError(f"{at}: {key} must be a table of strings, got {table!r}")
        for key in ("startup_timeout", "timeout"):
            number = entry.get(key, 1)
            if isinstance(number, bool) or not isinstance(number, (int, float)) or number <= 0:
                raise UsageError(f"{at}: {key} must be a positive number of seconds, got {number!r}")
        if not isinstance(entry.get("shared", False), bool):
            raise UsageError(f"{at}: shared must be true or false, got {entry['shared']!r}")
        cwd = entry.get("cwd")
        specs.append(McpServerSpec(
            command=tuple(_python(command)) if command else (),
            url=url,
            env=tuple(sorted(dict(entry.get("env", {})).items())),
            cwd=str((root / cwd).resolve()) if isinstance(cwd, str) else str(root),
            shared=bool(entry.get("shared", False)),
            headers=tuple(sorted(dict(entry.get("headers", {})).items())),
            startup_timeout=float(entry.get("startup_timeout", 30.0)),
            timeout=float(entry.get("timeout", 60.0)),
            name=str(entry.get("name", "")),
        ))
    return specs


def _python(command: list[str]) -> list[str]:
    """``python`` means the interpreter running fabtest, so a server sees the same virtualenv."""
    if command[0] in ("python", "python3"):
        return [sys.executable, *command[1:]]
    return command


# -- the event loop the connections live on -----------------------------------------------------

class _Loop:
    """One asyncio loop in a daemon thread for every MCP connection of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="fabtest-mcp", daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, coro: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.get())
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise


_LOOP = _Loop()
_LIVE: set[McpConnection] = set()
_SHARED: dict[McpServerSpec, McpConnection] = {}
_REGISTRY_LOCK = threading.Lock()


class McpConnection:
    """A connected MCP server: its tools, ``call(name, args)`` and ``close()`` (idempotent)."""

    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self.tools: list[McpTool] = []
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._task: concurrent.futures.Future[None] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr = tempfile.TemporaryFile()
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> McpConnection:
        """Start (if it has a command) and connect; raise AgentError naming the server on failure."""
        spec = self.spec
        with _REGISTRY_LOCK:
            _LIVE.add(self)
        try:
            if spec.command and spec.url:
                self._process = _spawn(spec, self._stderr)
                _wait_for_port(spec, self._process, self._stderr)
            loop = _LOOP.get()
            ready: asyncio.Future[Any] = asyncio.run_coroutine_threadsafe(_new_future(), loop).result(5)
            self._task = asyncio.run_coroutine_threadsafe(self._hold(ready), loop)
            _LOOP.run(_await(ready), spec.startup_timeout)
        except TimeoutError:
            tail = self._stderr_tail()
            self.close()
            raise AgentError(f"MCP server {spec.label!r} did not start within {spec.startup_timeout:g}s "
                             f"(startup_timeout){tail}") from None
        except AgentError as exc:
            tail = self._stderr_tail()
            self.close()
            raise AgentError(f"{exc}{tail}") from None
        except Exception as exc:  # the SDK and the server can fail in many ways
            tail = self._stderr_tail()
            self.close()
            raise AgentError(f"MCP server {spec.label!r} failed to start: {_describe(exc)}{tail}") from exc
        return self

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        """The connection's own task: enter the SDK client, list tools, wait for close()."""
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        self._stop = asyncio.Event()
        spec = self.spec
        try:
            if spec.url:
                http = None
                if spec.headers:
                    import httpx2  # the HTTP client the mcp SDK itself uses

                    http = httpx2.AsyncClient(headers=dict(spec.headers))
                transport: Any = streamable_http_client(spec.url, http_client=http)
            else:
                params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]),
                                               env=dict(spec.env) or None, cwd=spec.cwd)
                transport = stdio_client(params, errlog=self._stderr)  # type: ignore[arg-type, unused-ignore]  # binary file: the server's bytes as they come
            async with Client(transport, read_timeout_seconds=spec.timeout) as client:
                listed = await client.list_tools()
                self.tools = [McpTool(t.name, t.description or "", dict(t.input_schema or {"type": "object"}))
                              for t in listed.tools]
                self._client = client
                if not ready.done():
                    ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None

    def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[Any, bool]:
        """Call a tool: ``(result, is_error)``. The result is the structured content, else the text."""
        if self._client is None:
            raise AgentError(f"MCP server {self.spec.label!r} is not connected (it exited?){self._stderr_tail()}")
        client = self._client
        try:
            result = _LOOP.run(client.call_tool(name, dict(arguments)), self.spec.timeout + 1)
        except TimeoutError:
            raise AgentTimeout(f"MCP tool {name!r} of {self.spec.label!r} did not answer within "
                               f"{self.spec.timeout:g}s (timeout)") from None
        except Exception as exc:  # a protocol error, a dead server
            raise AgentError(f"MCP tool {name!r} of {self.spec.label!r} failed: {_describe(exc)}"
                             f"{self._stderr_tail()}") from exc
        return _result_value(result), bool(getattr(result, "is_error", False))

    def close(self) -> None:
        """Leave the SDK client (which stops a stdio server's group) and kill a started HTTP server."""
        if self._closed:
            return
        self._closed = True
        loop = _LOOP.get()
        if self._task is not None and self._stop is not None:
            loop.call_soon_threadsafe(self._stop.set)
            try:
                self._task.result(10)
            except Exception:  # closing is best effort; the group kill below still runs
                self._task.cancel()
        if self._process is not None:
            _kill_group(self._process)
        self._stderr.close()
        with _REGISTRY_LOCK:
            _LIVE.discard(self)

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f"\nserver stderr (tail):\n{text[-_STDERR_TAIL_CHARS:]}" if text else ""


def connect(spec: McpServerSpec) -> McpConnection:
    """A started connection: a fresh one, or the process-wide one for a ``shared`` spec."""
    if not spec.shared:
        return McpConnection(spec).start()
    with _REGISTRY_LOCK:
        existing = _SHARED.get(spec)
    if existing is not None and existing._client is not None:
        return existing
    connection = McpConnection(spec).start()
    with _REGISTRY_LOCK:
        _SHARED[spec] = connection
    return connection


def close_all() -> None:
    """Close every connection still open (shared ones included); registered with ``atexit``."""
    with _REGISTRY_LOCK:
        live = list(_LIVE)
        _SHARED.clear()
    for connection in live:
        try:
            connection.close()
        except Exception:  # at exit, keep closing the others
            pass


atexit.register(close_all)


# -- helpers ------------------------------------------------------------------------------------

async def _new_future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


async def _await(future: asyncio.Future[Any]) -> Any:
    return await future


def _result_value(result: Any) -> Any:
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    texts = [t for block in getattr(result, "content", None) or []
             if isinstance(t := getattr(block, "text", None), str)]
    if len(texts) == 1:
        try:
            return json.loads(texts[0])
        except ValueError:
            return texts[0]
    return "\n".join(texts)


def _describe(exc: BaseException) -> str:
    """The innermost useful message (the SDK wraps failures in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _spawn(spec: McpServerSpec, stderr: Any) -> subprocess.Popen[bytes]:
    from mcp.client.stdio import get_default_environment  # the same minimal environment as a stdio server

    try:
        return subprocess.Popen(list(spec.command), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                cwd=spec.cwd, env={**get_default_environment(), **dict(spec.env)},
                                start_new_session=True)
    except OSError as exc:
        raise AgentError(f"MCP server {spec.label!r} could not start {spec.command[0]!r}: {exc}") from None


def _wait_for_port(spec: McpServerSpec, process: subprocess.Popen[bytes], stderr: Any) -> None:
    """Poll until the URL's port accepts a connection, the process exits, or startup_timeout passes."""
    parts = urlsplit(spec.url or "")
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
    deadline = time.monotonic() + spec.startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AgentError(f"MCP server {spec.label!r} exited with code {process.returncode} before "
                             f"listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError


def _kill_group(process: subprocess.Popen[bytes], grace_s: float = 2.0) -> None:
    """SIGTERM the server's whole process group, SIGKILL it after ``grace_s``, reap the leader."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            process.wait(timeout=grace_s)
            if sig == signal.SIGTERM:
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # anything the leader left behind
                except (ProcessLookupError, PermissionError):
                    pass
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass
