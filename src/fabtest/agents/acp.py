"""An agent behind the Agent Client Protocol (``gemini --acp``): one process and one session per scenario.

The per-turn CLI adapter (:mod:`fabtest.agents.cli_agent`) starts Node for every turn (6-9 s each with
the Gemini CLI); over ACP the process starts once, opens one session in the scenario's working
directory, and every turn is one ``session/prompt`` in that session (tens of milliseconds plus
the model's own time). The client side is the ``agent-client-protocol`` SDK; only the process is
started here rather than by the SDK's ``spawn_agent_process``, because that helper neither puts
the child in its own process group (so a hung agent's helpers could not be killed together) nor
drains stderr (a chatty agent would block on a full pipe). The child inherits the environment
like :class:`~fabtest.agents.cli_agent.CliAgent` (the SDK's own helper would trim it to PATH/HOME).

Streamed updates become the reply: ``agent_message_chunk`` text (text before and after a tool
call are separate paragraphs), ``tool_call``/``tool_call_update`` become :class:`ToolCall` s with
status and output. Agents that send ``rawInput`` give their arguments as they are; the Gemini
CLI does not, so arguments are rebuilt from what it does send (see :func:`rebuild_arguments`
and README "ACP agents (persistent Gemini CLI)"). Permission requests are answered from the
``permission`` setting (allow by default, like ``--approval-mode yolo``). The client advertises
no file-system or terminal capability, so the agent reads and writes files itself.

The process group is killed when the scenario ends (``around()``/``close()``), when a turn
exceeds ``timeout_s``, and at interpreter exit for anything still running.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from fabtest.agents import supervisor, trace_calls
from fabtest.agents.acp_updates import PERMISSIONS, Collector, Turn, rebuild_arguments
from fabtest.agents.base import AgentError, AgentTimeout, OnToolCall, declared_tools, program_path
from fabtest.agents.boundary import AgentDataError
from fabtest.agents.file_parts import refuse_files
from fabtest.agents.gemini_probe import gemini_supports_acp
from fabtest.conversation import AgentResponse, Decision, Message
from fabtest.errors import UsageError, did_you_mean

__all__ = ["TABLE_KEYS", "AcpAgent", "PERMISSIONS", "check_table", "from_table", "gemini", "gemini_acp",
           "gemini_supports_acp", "rebuild_arguments"]

_STDERR_TAIL_LINES = 20
_STREAM_LIMIT = 50 * 1024 * 1024  # the SDK's own default: a turn may carry big diffs
_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()
T = TypeVar("T")


# -- the adapter ------------------------------------------------------------------------------------


class AcpAgent:
    """Drives one ACP agent process for one scenario (see the module docstring)."""


    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        permission: str | Mapping[str, str] = "allow",
        mcp_servers: Sequence[Mapping[str, Any]] = (),
        auth_method: str | None = None,
        kill_grace_s: float = 1.0,
        startup_timeout_s: float | None = None,
        model: str | None = None,
        tools: Sequence[str] | None = None,
        traces: bool = False,
    ) -> None:
        from fabtest._internal.extras import require_extra

        require_extra("acp", where=f"ACP agent {' '.join(str(a) for a in command)[:80]!r}")
        self.model = model  # what the agent was started with, so its tokens can be priced (README "Cost")
        argv = [str(a) for a in command]
        if not argv:
            raise ValueError("the ACP command must not be empty")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        for decision in [permission] if isinstance(permission, str) else list(permission.values()):
            if decision not in PERMISSIONS:
                raise ValueError(f"permission must be one of {PERMISSIONS} (or a table of them), got {decision!r}")
        self.command = program_path(argv)
        #: the tool names the agent declares (``tools = [...]``; ACP has no call that lists them)
        self.tools = declared_tools(tools, where=f"ACP agent {argv[0]!r}")
        #: the agent exports its OpenTelemetry spans to fabtest (``traces = true``): every prompt carries the
        #: turn's ``traceparent`` in ``_meta`` and its tool calls are read from the spans (agent-traces.md)
        self.exports_traces = trace_calls.exports_flag(traces, f"ACP agent {argv[0]!r}")
        self.cwd = str(Path(cwd or os.getcwd()).resolve())
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.timeout_s = float(timeout_s)
        #: start-up (process, ``initialize``, ``session/new``) has its own budget, before the first prompt's
        self.startup_timeout_s = float(startup_timeout_s) if startup_timeout_s else self.timeout_s
        self.permission = permission
        self.mcp_servers = [_mcp_server(s) for s in mcp_servers]
        self.auth_method = auth_method
        self.kill_grace_s = kill_grace_s
        self.turns = 0
        self.session_id: str | None = None
        self.agent_info: dict[str, Any] = {}
        self._client = Collector(self)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._exited: asyncio.Future[int] | None = None
        self._conn: Any = None
        self._stderr_dir: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        #: the start begun by :meth:`around` (the first turn waits for it) and when it began
        self._starting: concurrent.futures.Future[None] | None = None
        self._start_task: asyncio.Future[None] | None = None
        self._start_began = 0.0
        #: the prompt whose turn ended on a permission request left to the user: it goes on after the decision
        self._inflight: asyncio.Future[Any] | None = None

    @property
    def pauses_unsupported(self) -> str | None:
        """Why this agent never pauses (an approval step names it): its permission requests are
        answered by ``permission``, unless that leaves some to the user (``"pause"``)."""
        chosen = [self.permission] if isinstance(self.permission, str) else list(self.permission.values())
        return None if "pause" in chosen else (
            "fabtest answers its permission requests from the permission setting; permission = \"pause\" leaves "
            "them to the scenario's user")

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def build(cls, context: Mapping[str, Any] | None = None) -> AcpAgent:
        """Registry hook: ``{acp = [argv...], permission = "allow", mcp_servers = [...], timeout = 60}``."""
        ctx = dict(context or {})
        command = ctx.get("acp") or ctx.get("command")
        if isinstance(command, str):
            command = [command]
        if not command or not isinstance(command, (list, tuple)):
            raise ValueError("an ACP agent needs 'acp = [\"program\", \"arg\", ...]'")
        options: dict[str, Any] = {}
        for key in ("env", "permission", "mcp_servers", "auth_method", "kill_grace_s", "model", "tools", "traces"):
            if ctx.get(key) is not None:
                options[key] = ctx[key]
        for key in ("startup_timeout_s", "startup_timeout"):
            if ctx.get(key) is not None:
                options["startup_timeout_s"] = float(ctx[key])
        timeout = ctx.get("timeout_s", ctx.get("timeout"))
        if timeout is not None:
            options["timeout_s"] = float(timeout)
        return cls(command, cwd=ctx.get("cwd") or ctx.get("workspace"), **options)

    # -- the agent protocol -------------------------------------------------------------------------

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        refuse_files("acp", messages)  # the pre-flight refuses such a scenario first (engine/preflight.py)
        prompt = _latest_user_message(messages)
        with self._lock:
            if self._closed:
                raise AgentError("the ACP agent was already stopped (a timeout or the end of the scenario)")
            started = time.monotonic()
            if self.session_id is None:
                if self._starting is None:
                    self._begin_start()
                assert self._starting is not None
                try:
                    self._wait(self._starting, self._start_began + self.startup_timeout_s, "to start")
                except AgentError:
                    self.close()  # half started is not started: the next turn says so
                    raise
                finally:
                    self._starting = None
            deadline = time.monotonic() + self.timeout_s
            decisions = messages[-1].decisions if messages else ()
            if self._inflight is not None and not decisions:  # the user moved on: the request is cancelled
                self._run(self._resume(()), deadline, "to finish the turn it paused")
            if self.turns and sum(1 for m in messages if m.role == "user") <= 1:
                # The same instance was handed a brand-new conversation: a new session, not the old one.
                self._run(self._new_session(), deadline, "to open a new session")
                self.turns = 0
            # read here, on the turn's thread: the prompt runs on the connection's own loop and context
            meta = trace_calls.headers() if self.exports_traces else {}
            if self._inflight is not None:
                _check_decisions(decisions)
                result, turn = self._run(self._resume(decisions), deadline, "to answer")
            else:
                result, turn = self._run(self._prompt(prompt, meta), deadline, "to answer")
            self.turns += 1
        if turn.malformed:
            raise AgentDataError(f"the ACP agent sent {len(turn.malformed)} malformed session update(s), which "
                                 f"were dropped, so its reply is incomplete: {turn.malformed[0]}")
        pauses = [w.pause for w in turn.waiting if not w.answer.done()] if result is None else []
        response = AgentResponse(text=turn.text(), tool_calls=list(turn.calls.values()), pauses=pauses)
        for call in response.tool_calls:
            if call.metadata.get("permission", "").startswith(("deny", "cancel")) \
                    and call.metadata.get("status") in (None, "pending"):
                call.metadata["status"] = "denied"
        if result is not None:
            response.metadata.update(_prompt_metadata(result))
        if self.model and "usage" in response.metadata:
            response.metadata.setdefault("model", self.model)
        response.metadata.update({"session_id": self.session_id, "turn": self.turns,
                                  "duration_s": round(time.monotonic() - started, 3)})
        if not response.text.strip() and not response.tool_calls and not response.pauses:
            raise AgentError(f"the ACP agent ended its turn ({result.stop_reason}) without a reply"
                             + self._stderr_note())
        if on_tool_call is not None:
            for call in response.tool_calls:
                on_tool_call(call)
        return response

    @contextlib.contextmanager
    def around(self) -> Iterator[None]:
        """The scenario: the agent starts at once, in the background (the CLI's seconds of start-up
        overlap whatever the run does before its first prompt; the first turn waits for it and
        reports its failure, within ``startup_timeout_s`` of its beginning); whatever happens in
        the scenario, the agent's process group is gone afterwards."""
        try:
            with self._lock:
                if not self._closed and self.session_id is None and self._starting is None:
                    self._begin_start()
            yield
        finally:
            self.close()

    def close(self) -> None:
        """Kill the process group, stop the event loop, remove the stderr file. Safe to call twice."""
        self._closed = True
        loop = self._loop
        if loop is not None and loop.is_running() and self._starting is not None:
            with contextlib.suppress(Exception):  # a start in flight ends first, so its process is known
                asyncio.run_coroutine_threadsafe(self._settle_start(), loop).result(5)
        proc = self._proc
        if proc is not None:
            _kill_group(proc.pid, self.kill_grace_s)
        if loop is not None and loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._aclose(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        if loop is not None and not loop.is_running():
            # closed here, on purpose: a loop left to the garbage collector closes itself first and
            # the subprocess transport it held then fails in its own __del__ ("Event loop is closed")
            loop.close()
        self._loop = self._thread = None
        if self._stderr_dir is not None:
            shutil.rmtree(self._stderr_dir, ignore_errors=True)
            self._stderr_dir = None

    def metadata(self) -> dict[str, Any]:
        return {"adapter": "acp", "command": self.command[0], "session_id": self.session_id, "turns": self.turns,
                **({"agent": self.agent_info} if self.agent_info else {}),
                **({"tools": list(self.tools)} if self.tools is not None else {}),
                **({"traces": True} if self.exports_traces else {})}

    # -- internals ----------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], deadline: float, doing: str) -> T:
        """Run ``coro`` on the agent's loop; past the deadline the process group is killed."""
        return self._wait(self._submit(coro), deadline, doing)

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """``coro`` on the agent's loop (started on first use, on its own thread)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="fabtest-acp", daemon=True)
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _begin_start(self) -> None:
        """Start the process, ``initialize`` and ``session/new`` in the background (caller holds the lock)."""
        self._start_began = time.monotonic()
        self._starting = self._submit(self._start())

    async def _settle_start(self) -> None:
        """Cancel a start still in flight and wait for it to unwind (``close`` then knows its process)."""
        task = self._start_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _wait(self, future: concurrent.futures.Future[T], deadline: float, doing: str) -> T:
        """The result of ``future`` (from :meth:`_submit`); past the deadline the process group is killed."""
        try:
            return future.result(max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            future.cancel()
            tail = self._stderr_tail()
            self.close()
            limit = self.startup_timeout_s if doing == "to start" else self.timeout_s
            raise AgentTimeout(f"ACP agent {Path(self.command[0]).name!r} took longer than {limit:g}s "
                               f"{doing}; its processes were killed"
                               + (f"\nstderr (last {_STDERR_TAIL_LINES} lines):\n{tail}" if tail else "")) from None
        except AgentError:
            if self._exited is not None and self._exited.done():
                self.close()  # it crashed: whatever it left in its group goes too
            raise
        except Exception as exc:  # a protocol error is the agent's failure, not ours
            raise AgentError(f"ACP agent {Path(self.command[0]).name!r} failed {doing}: "
                             f"{_describe(exc)}{self._stderr_note()}") from exc

    async def _start(self) -> None:
        self._start_task = asyncio.current_task()
        self._stderr_dir = tempfile.mkdtemp(prefix="fabtest-acp-")
        launch = supervisor.wrap(self.command, self.kill_grace_s)  # nothing it starts outlives the agent
        with open(Path(self._stderr_dir) / "stderr.log", "wb") as stderr:
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *launch.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    cwd=self.cwd, env={**os.environ, **self.env}, start_new_session=True, limit=_STREAM_LIMIT,
                    pass_fds=launch.pass_fds)
            except OSError as exc:
                launch.close()
                raise AgentError(f"ACP agent could not start {self.command[0]!r}: {exc}") from None
        with _LIVE_LOCK:
            _LIVE_GROUPS.add(self._proc.pid)
        try:
            await asyncio.get_running_loop().run_in_executor(None, supervisor.started, launch, self.command[0])
        except OSError as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 5)
            with _LIVE_LOCK:
                _LIVE_GROUPS.discard(self._proc.pid)
            self._proc = None
            raise AgentError(f"ACP agent could not start {self.command[0]!r}: {exc}") from None
        self._exited = asyncio.ensure_future(self._proc.wait())
        # the SDK (pydantic models: a second or so) is imported while the agent's own runtime starts
        from acp import PROTOCOL_VERSION, connect_to_agent
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        # Collector implements the SDK's Client protocol by its methods, not by subclassing it
        self._conn = connect_to_agent(self._client, self._proc.stdin, self._proc.stdout,  # type: ignore[arg-type, unused-ignore]
                                      observers=[self._client.observe])
        # No fs capability: the Gemini CLI would then read files through us, and a missing file
        # answered with an error breaks its write_file.
        capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                                          terminal=False)
        info = await self._or_exit(self._conn.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities,
            client_info=Implementation(name="fabtest", version=_version())))
        if info.agent_info is not None:
            self.agent_info = {"name": info.agent_info.name, "version": info.agent_info.version}
        if self.auth_method:
            await self._or_exit(self._conn.authenticate(method_id=self.auth_method))
        await self._new_session()

    async def _new_session(self) -> None:
        session = await self._or_exit(self._conn.new_session(cwd=self.cwd, mcp_servers=list(self.mcp_servers)))
        self.session_id = session.session_id

    async def _prompt(self, text: str, meta: Mapping[str, str]) -> tuple[Any, Turn]:
        """One ``session/prompt``; ``meta`` (the turn's W3C trace context) goes in its ``_meta`` as root
        keys, the convention ACP shares with MCP for propagating trace context."""
        from acp import text_block

        self._client.turn = Turn()
        request = asyncio.ensure_future(self._or_exit(self._conn.prompt(session_id=self.session_id,
                                                                        prompt=[text_block(text)], **meta)))
        return await self._answered_or_paused(request)

    async def _answered_or_paused(self, request: asyncio.Future[Any]) -> tuple[Any, Turn]:
        """The prompt's result and its turn, or (None, the turn so far) when the turn stopped on a
        permission request left to the user: the prompt is kept in flight for the decision."""
        turn = self._client.turn
        paused = asyncio.ensure_future(turn.paused.wait())
        try:
            await asyncio.wait({request, paused}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the caller gave up (timeout): so does the request
            request.cancel()
            raise
        finally:
            paused.cancel()
        if request.done():
            self._inflight = None
            return request.result(), turn
        if self._inflight is not request:  # a scenario that ends on the pause: the process is killed under it
            request.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._inflight = request
        return None, turn

    async def _resume(self, decisions: Sequence[Decision]) -> tuple[Any, Turn]:
        """Answer the requests the last turn paused on (approved: allow; rejected: deny; undecided:
        cancelled) and follow the prompt on, to its end or its next pause."""
        assert self._inflight is not None
        decided = {d.pause_id: d.decision for d in decisions}
        turn = self._client.turn
        for waiting in turn.waiting:
            if not waiting.answer.done():
                choice = decided.get(waiting.pause.id)
                waiting.answer.set_result("allow" if choice == "approved" else "deny" if choice == "rejected" else None)
        self._client.turn = turn.resumed()
        return await self._answered_or_paused(self._inflight)

    async def _or_exit(self, awaitable: Any) -> Any:
        """Await a request, or fail as soon as the agent process exits (a crash never hangs a turn)."""
        assert self._exited is not None
        task = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({task, self._exited}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the caller gave up (timeout): so does the request
            task.cancel()
            raise
        if task.done() and (task.cancelled() or task.exception() is None):
            return task.result()
        if not self._exited.done():
            # The request failed (often "connection closed"): if the process is exiting, say so.
            await asyncio.wait({self._exited}, timeout=1.0)
            if not self._exited.done():
                return task.result()
        task.cancel()
        code = self._exited.result()
        raise AgentError(f"ACP agent {Path(self.command[0]).name!r} exited with code {code} in the middle of a "
                         f"request{self._stderr_note()}")

    async def _aclose(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.close(), 2)
        if self._proc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 2)
            transport = getattr(self._proc, "_transport", None)  # its pipes, closed while the loop runs
            if transport is not None:
                transport.close()
            with _LIVE_LOCK:
                _LIVE_GROUPS.discard(self._proc.pid)

    def _stderr_tail(self) -> str:
        if self._stderr_dir is None:
            return ""
        try:
            text = (Path(self._stderr_dir) / "stderr.log").read_text("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-_STDERR_TAIL_LINES:])

    def _stderr_note(self) -> str:
        tail = self._stderr_tail()
        return f"\nstderr (last {_STDERR_TAIL_LINES} lines):\n{tail}" if tail else " (stderr empty)"


def _prompt_metadata(result: Any) -> dict[str, Any]:
    """Stop reason and token usage (the Gemini CLI puts it in ``_meta.quota.token_count``)."""
    meta: dict[str, Any] = {"stop_reason": result.stop_reason}
    counts = ((result.field_meta or {}).get("quota") or {}).get("token_count")
    usage = getattr(result, "usage", None)
    if isinstance(counts, dict):
        inp, out = int(counts.get("input_tokens") or 0), int(counts.get("output_tokens") or 0)
        meta["usage"] = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
    elif usage is not None:
        meta["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                         "total_tokens": usage.total_tokens}
    return meta


def _mcp_server(spec: Mapping[str, Any]) -> Any:
    """``{name, command, args, env}`` (stdio) or ``{name, url, headers, type = "http" | "sse"}``."""
    from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

    spec = dict(spec)
    if "url" in spec:
        headers = [HttpHeader(name=str(k), value=str(v)) for k, v in (spec.get("headers") or {}).items()]
        if spec.get("type") == "sse":
            return SseMcpServer(type="sse", name=str(spec["name"]), url=str(spec["url"]), headers=headers)
        return HttpMcpServer(type="http", name=str(spec["name"]), url=str(spec["url"]), headers=headers)
    if "command" not in spec or "name" not in spec:
        raise ValueError(f"an MCP server needs name and command (stdio) or name and url (http), got {sorted(spec)}")
    env = [EnvVariable(name=str(k), value=str(v)) for k, v in (spec.get("env") or {}).items()]
    return McpServerStdio(name=str(spec["name"]), command=str(spec["command"]),
                          args=[str(a) for a in spec.get("args") or []], env=env)


def _check_decisions(decisions: Sequence[Decision]) -> None:
    """ACP answers a permission request with one of its options: allow or reject, nothing else."""
    for decision in decisions:
        if decision.decision == "edited":
            raise AgentError("an ACP agent's permission request cannot be approved with edited arguments (ACP "
                             "answers it with allow or reject only): use When the user approves or rejects")


def _latest_user_message(messages: Sequence[Message]) -> str:
    for message in reversed(list(messages)):
        if message.role == "user":
            return message.content
    raise AgentError("the ACP agent needs a user message to send, got none")


def _describe(exc: BaseException) -> str:
    data = getattr(exc, "data", None)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} ({data})" if data else text


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pytest-fabtest")  # the distribution's name (fabtest on PyPI is another project)
    except Exception:  # metadata is optional in a source checkout
        return "0"


# -- the process group ------------------------------------------------------------------------------


def _kill_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL whatever is left after ``grace_s``."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    # under a supervisor (its leader) the tree is ended within grace_s by it: it gets a margin first
    deadline = time.monotonic() + grace_s + (supervisor.MARGIN_S if supervisor.available() else 0.0)
    while time.monotonic() < deadline and _group_has_live_members(pgid):
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with _LIVE_LOCK:
        _LIVE_GROUPS.discard(pgid)


def _group_has_live_members(pgid: int) -> bool:
    """True while a non-zombie process of the group exists (``killpg(0)`` also counts zombies)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not os.path.isdir("/proc"):
        return True
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                return True
    return False


@atexit.register
def _kill_leftovers() -> None:
    """At interpreter (pytest) exit, nothing an ACP agent started may outlive the run."""
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
        _LIVE_GROUPS.clear()
    supervisor.end_groups(groups, 3.0 if supervisor.available() else 0.0)


# -- the Gemini CLI over ACP ------------------------------------------------------------------------

DEFAULT_MODEL = "gemini-2.5-flash"


def gemini_acp(context: Mapping[str, Any] | None = None) -> AcpAgent:
    """Registry factory: the Gemini CLI over ACP (``gemini --acp --skip-trust -m MODEL``).

    Model, executable, timeout and working directory as in :func:`fabtest.agents.cli_agent.gemini_cli`
    (``FABTEST_AGENT_MODEL``, ``FABTEST_GEMINI_CLI``, ``timeout``, ``cwd``); ``permission`` and
    ``mcp_servers`` from the context. ``approval_mode = "default"`` makes the CLI ask permission
    for each edit or command (answered by ``permission``); the default is ``yolo``.
    """
    ctx = dict(context or {})
    from fabtest.agents.cli_agent import agent_model

    model = agent_model(ctx)  # the playbook's agent_model wins over FABTEST_AGENT_MODEL (as for gemini_cli)
    executable = os.environ.get("FABTEST_GEMINI_CLI") or ctx.get("executable") or "gemini"
    command = [str(executable), "--acp", "--skip-trust", "-m", str(model),
               "--approval-mode", str(ctx.get("approval_mode") or "yolo")]
    env = ctx.get("env") if isinstance(ctx.get("env"), Mapping) else None
    options: dict[str, Any] = {k: ctx[k] for k in ("permission", "mcp_servers", "kill_grace_s", "startup_timeout_s",
                                                   "tools", "traces") if ctx.get(k) is not None}
    return AcpAgent(command, cwd=ctx.get("cwd") or ctx.get("workspace"), env=env,
                    timeout_s=float(ctx.get("timeout_s", ctx.get("timeout", 60))), model=str(model), **options)


def gemini(context: Mapping[str, Any] | None = None) -> Any:
    """Registry factory: the Gemini CLI over ACP when the installed CLI supports ``--acp``, else per turn.

    ``FABTEST_GEMINI_TRANSPORT=per-turn`` (or ``acp = false`` in the context) keeps the per-turn
    subprocess adapter (:func:`fabtest.agents.cli_agent.gemini_cli`); ``=acp`` insists on ACP.
    """
    ctx = dict(context or {})
    transport = os.environ.get("FABTEST_GEMINI_TRANSPORT") or ("per-turn" if ctx.get("acp") is False else "auto")
    if transport not in ("auto", "acp", "per-turn"):
        raise ValueError(f"FABTEST_GEMINI_TRANSPORT must be auto, acp or per-turn, got {transport!r}")
    executable = os.environ.get("FABTEST_GEMINI_CLI") or ctx.get("executable") or "gemini"
    from fabtest._internal.extras import EXTRAS

    has_acp = importlib.util.find_spec(EXTRAS["acp"][0]) is not None  # without pytest-fabtest[acp], per turn
    if transport == "acp" or (transport == "auto" and has_acp and gemini_supports_acp(str(executable))):
        return gemini_acp(ctx)
    from fabtest.agents.cli_agent import gemini_cli

    return gemini_cli(ctx)


#: what an ACP agent table may hold besides ``acp``: :meth:`AcpAgent.build`'s, :func:`gemini_acp`'s
#: and (``acp = false``) :func:`fabtest.agents.cli_agent.gemini_cli`'s settings
TABLE_KEYS = frozenset({"acp", "command", "cwd", "workspace", "env", "timeout", "timeout_s", "startup_timeout",
                        "startup_timeout_s", "permission", "mcp_servers", "auth_method", "kill_grace_s", "model",
                        "executable", "approval_mode", "tools", "traces"})


def check_table(table: Mapping[str, Any], *, where: str) -> None:
    """Raise UsageError for a misspelt key (with its likely spelling) or a bad ``tools`` list, before
    any process starts: an unknown key would otherwise be ignored without a word."""
    unknown = sorted(set(table) - TABLE_KEYS)
    if unknown:
        hint = did_you_mean(unknown[0], sorted(TABLE_KEYS))
        raise UsageError(f"{where}: unknown key {unknown[0]!r} in an ACP agent table{hint}; "
                         f"known: {', '.join(sorted(TABLE_KEYS))}")
    declared_tools(table.get("tools"), where=where)


def from_table(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str = "ACP agent") -> Any:
    """``{acp = ["program", "arg", ...], ...}`` for any ACP agent, ``{acp = true, ...}`` for the Gemini CLI
    over ACP, ``{acp = false}`` for the Gemini CLI per turn; the table's keys join the context."""
    check_table(table, where=where)
    merged = {**context, **table}
    spec = table["acp"]
    if spec is True:
        return gemini_acp(merged)
    if spec is False:
        return gemini(merged)
    if isinstance(spec, str):
        merged["acp"] = [spec]
    elif not isinstance(spec, (list, tuple)) or not spec:
        raise ValueError("acp must be a non-empty list of strings (the command), true or false")
    return AcpAgent.build(merged)
