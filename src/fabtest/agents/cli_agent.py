"""An agent behind a command-line program, run once per turn (the Gemini CLI by default).

Each turn starts one subprocess (argv list, never a shell) in its own session/process group, so
a hung CLI and everything it spawned can be killed together: on the CLI's own timeout, when the
runner gives up on the turn (``agent_timeout``, ``--fabtest-scenario-timeout``: :meth:`CliAgent.cancel`),
when the scenario ends (:meth:`CliAgent.close`), and when the Python process exits (Ctrl-C, the
end of pytest: an ``atexit`` hook kills every group still alive). The CLI keeps the conversation
history itself, keyed by a session id: the first turn runs the ``command`` template (which
creates the session), later turns the ``resume_command`` template. Every :class:`CliAgent`
instance owns a fresh ``uuid4`` session id (one instance per scenario run), so nothing leaks
between runs; only the latest user message is passed to the CLI.

Placeholders in the templates: ``{prompt}``, ``{model}``, ``{session_id}``, ``{cwd}``. They are
substituted inside each argv element in one pass, so braces in a prompt are never re-expanded.

Files the user sends with a message are written into the working directory, under
``attachments/`` (``attachments/lamp.png``), before the turn's process starts. An argv element
that is exactly ``{files}`` becomes one element per file path; a template without it gets each
path appended to the prompt as ``@attachments/lamp.png``, the Gemini CLI's way to include a file.

``output_format="stream-json"`` parses the Gemini CLI's JSONL events (``init``, ``message``,
``tool_use``, ``tool_result``, ``error``, ``result``; non-JSON lines are ignored);
``output_format="text"`` takes stdout as the reply.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fabtest.agents import supervisor, trace_calls
from fabtest.agents.base import AgentError, AgentTimeout, OnToolCall, declared_tools, program_path
from fabtest.conversation import AgentResponse, Attachment, Message, ToolCall

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_EXECUTABLE = "gemini"

#: First turn of the Gemini CLI 0.61: creates the session with our own id. The prompt is glued to
#: its flag (``--prompt=TEXT``, which yargs reads as one value) so a user message such as
#: ``--help`` can never be parsed as a flag.
GEMINI_COMMAND: tuple[str, ...] = (
    "{executable}", "--skip-trust", "--prompt={prompt}", "-m", "{model}", "-o", "stream-json",
    "--approval-mode", "yolo", "--session-id", "{session_id}",
)
#: Later turns: the same, resuming the session (``--resume`` and ``--session-id`` are exclusive).
GEMINI_RESUME_COMMAND: tuple[str, ...] = (
    "{executable}", "--skip-trust", "--prompt={prompt}", "-m", "{model}", "-o", "stream-json",
    "--approval-mode", "yolo", "--resume", "{session_id}",
)

OUTPUT_FORMATS = ("stream-json", "text")
#: the folder of the working directory where a turn's files are written for the CLI
ATTACHMENTS_DIR = "attachments"
_PLACEHOLDER = re.compile(r"\{(prompt|model|session_id|cwd)\}")
_STDERR_TAIL_LINES = 20
_SHOW_CHARS = 300


class CliAgent:
    """Runs a CLI per turn; see the module docstring for the templates and formats."""

    #: why this adapter never pauses (docs/how-to/approvals.md): an approval step names it
    pauses_unsupported = "a CLI agent answers each turn in one run of its program, which cannot wait for a decision"

    def __init__(
        self,
        command: Sequence[str] | None = None,
        resume_command: Sequence[str] | None = None,
        *,
        model: str = DEFAULT_MODEL,
        timeout_s: float = 60.0,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        output_format: str = "stream-json",
        executable: str = DEFAULT_EXECUTABLE,
        session_id: str | None = None,
        kill_grace_s: float = 2.0,
        tools: Sequence[str] | None = None,
        traces: bool = False,
    ) -> None:
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        if command is None:
            first = [executable if a == "{executable}" else a for a in GEMINI_COMMAND]
            resume = [executable if a == "{executable}" else a for a in GEMINI_RESUME_COMMAND]
            if resume_command is not None:
                resume = list(resume_command)
        else:
            first = [str(a) for a in command]
            if not first:
                raise ValueError("command must not be empty")
            resume = [str(a) for a in resume_command] if resume_command is not None else _derive_resume(first)
        self.command = program_path(first)
        self.resume_command = program_path(resume)
        self.model = model
        self.timeout_s = float(timeout_s)
        self.cwd = str(cwd) if cwd is not None else None
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.output_format = output_format
        self.kill_grace_s = kill_grace_s
        #: the tool names the agent declares (``tools = [...]``): steps naming another tool are usage errors
        self.tools = declared_tools(tools, where=f"CLI agent {first[0]!r}")
        #: the CLI exports its OpenTelemetry spans to fabtest (``traces = true``): each turn's process gets
        #: the turn's ``TRACEPARENT`` and its tool calls are read from the spans (docs/how-to/agent-traces.md)
        self.exports_traces = trace_calls.exports_flag(traces, f"CLI agent {first[0]!r}")
        self.session_id = session_id or str(uuid.uuid4())
        self.turns = 0
        self._running: set[subprocess.Popen[bytes]] = set()

    # -- construction helpers -------------------------------------------------------------------

    @classmethod
    def build(cls, context: Mapping[str, Any] | None = None) -> CliAgent:
        """Registry hook: options come from the context (``command``, ``model``, ``timeout_s``...)."""
        ctx = dict(context or {})
        options: dict[str, Any] = {}
        for key in _BUILD_KEYS:
            if ctx.get(key) is not None:
                options[key] = ctx[key]
        if "model" not in options and ctx.get("agent_model"):
            options["model"] = ctx["agent_model"]
        if "timeout_s" not in options and ctx.get("timeout") is not None:
            options["timeout_s"] = float(ctx["timeout"])
        if "cwd" not in options and ctx.get("workspace"):
            options["cwd"] = ctx["workspace"]
        return cls(**options)

    @classmethod
    def factory(cls, *args: Any, **kwargs: Any) -> Callable[[Mapping[str, Any] | None], CliAgent]:
        """A ``factory(context) -> CliAgent`` with fixed options (context fills in the rest)."""

        def make(context: Mapping[str, Any] | None = None) -> CliAgent:
            ctx = dict(context or {})
            merged = {**{k: v for k, v in ctx.items() if k in _BUILD_KEYS}, **kwargs}
            if "model" not in merged and ctx.get("agent_model"):
                merged["model"] = ctx["agent_model"]
            if "cwd" not in merged and ctx.get("workspace"):
                merged["cwd"] = ctx["workspace"]
            if "timeout_s" not in merged and ctx.get("timeout") is not None:
                merged["timeout_s"] = float(ctx["timeout"])
            return cls(*args, **merged)

        return make

    # -- the agent protocol ---------------------------------------------------------------------

    def reset(self) -> None:
        """Start a new CLI session (fresh id) on the next turn."""
        self.session_id = str(uuid.uuid4())
        self.turns = 0

    def metadata(self) -> dict[str, Any]:
        return {
            "adapter": "cli",
            "executable": self.command[0],
            "model": self.model,
            "session_id": self.session_id,
            "output_format": self.output_format,
            "turns": self.turns,
            **({"tools": list(self.tools)} if self.tools is not None else {}),
            **({"traces": True} if self.exports_traces else {}),
        }

    def cancel(self) -> None:
        """Kill every process group this agent has running (the runner gave up on the turn)."""
        for proc in list(self._running):
            _kill_group(proc, min(self.kill_grace_s, 0.5))

    def close(self) -> None:
        """The scenario ended: nothing this agent started may outlive it."""
        self.cancel()

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        latest = _latest_user_message(messages)
        user_turns = sum(1 for m in messages if m.role == "user")
        if self.turns and user_turns <= 1:
            # The same instance was handed a brand-new conversation: never resume the old one.
            self.reset()
        template = self.command if self.turns == 0 else self.resume_command
        paths = self._write_files(latest.attachments)
        prompt = latest.content
        if paths and "{files}" not in template:
            prompt = " ".join([prompt, *(f"@{p}" for p in paths)])
        argv = self._render(template, prompt, paths)
        started = time.monotonic()
        code, stdout, stderr = self._run(argv)
        duration = time.monotonic() - started
        stderr_text = stderr.decode("utf-8", "replace")
        tail = _tail(stderr_text)
        if code != 0:
            detail = _stream_error(stdout) if self.output_format == "stream-json" else None
            msg = f"CLI agent {Path(argv[0]).name!r} exited with code {code}"
            if detail:
                msg += f": {detail}"
            msg += f"\nstderr (last {_STDERR_TAIL_LINES} lines):\n{tail}" if tail else " (stderr empty)"
            raise AgentError(msg)
        stdout_text = stdout.decode("utf-8", "replace")
        if self.output_format == "text":
            response = _parse_text(stdout_text)
        else:
            response = parse_stream_json(stdout_text)
        self.turns += 1
        response.metadata.update({
            "session_id": self.session_id,
            "turn": self.turns,
            "resumed": template is self.resume_command,
            "exit_code": code,
            "duration_s": round(duration, 3),
            "stderr_tail": tail,
        })
        if on_tool_call is not None:
            for call in response.tool_calls:
                on_tool_call(call)
        return response

    # -- internals ------------------------------------------------------------------------------

    def _render(self, template: Sequence[str], prompt: str, files: Sequence[str] = ()) -> list[str]:
        values = {"prompt": prompt, "model": self.model, "session_id": self.session_id, "cwd": self.cwd or os.getcwd()}
        argv: list[str] = []
        for arg in template:
            if arg == "{files}":
                argv.extend(files)
            else:
                argv.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg))
        return argv

    def _write_files(self, files: Sequence[Attachment]) -> list[str]:
        """Write the message's files under ``attachments/`` in the working directory; their relative paths."""
        if not files:
            return []
        folder = Path(self.cwd or os.getcwd()) / ATTACHMENTS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for file in files:
            name = Path(file.name).name or file.sha256[:12]  # never a path out of the folder
            (folder / name).write_bytes(file.data)
            paths.append(f"{ATTACHMENTS_DIR}/{name}")
        return paths

    def _run(self, argv: list[str]) -> tuple[int, bytes, bytes]:
        env = {**os.environ, **self.env, **(trace_calls.environment() if self.exports_traces else {})}
        launch = supervisor.wrap(argv, self.kill_grace_s)  # nothing it starts outlives the turn
        try:
            proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
                pass_fds=launch.pass_fds,
            )
        except OSError as exc:
            launch.close()
            raise AgentError(f"CLI agent could not start {argv[0]!r}: {exc}") from None
        try:
            supervisor.started(launch, argv[0])
        except OSError as exc:
            _kill_group(proc, 0.0)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            raise AgentError(f"CLI agent could not start {argv[0]!r}: {exc}") from None
        self._running.add(proc)
        _track(proc.pid)
        try:
            return self._wait(proc)
        finally:
            self._running.discard(proc)
            _untrack(proc.pid)

    def _wait(self, proc: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
        out_chunks: list[bytes] = []
        err_chunks: list[bytes] = []
        readers = [
            threading.Thread(target=_drain, args=(proc.stdout, out_chunks), daemon=True),
            threading.Thread(target=_drain, args=(proc.stderr, err_chunks), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc, self.kill_grace_s)
            _join(readers, 2.0)
            tail = _tail(b"".join(err_chunks).decode("utf-8", "replace"))
            msg = f"CLI agent timed out after {self.timeout_s:g}s"
            if tail:
                msg += f"\nstderr (last {_STDERR_TAIL_LINES} lines):\n{tail}"
            raise AgentTimeout(msg) from None
        except BaseException:
            _kill_group(proc, 0.2)
            _join(readers, 1.0)
            raise
        # The leader exited; anything it left behind in its group goes too (no orphans).
        _terminate_leftovers(proc.pid, self.kill_grace_s)
        _join(readers, 5.0)
        return proc.returncode, b"".join(out_chunks), b"".join(err_chunks)


_BUILD_KEYS = ("command", "resume_command", "model", "timeout_s", "cwd", "env", "output_format", "executable",
               "kill_grace_s", "tools", "traces")


def agent_model(context: Mapping[str, Any]) -> str:
    """The Gemini CLI's model, most specific first: the playbook's ``agent_model`` (it names the model
    it was written for), then ``FABTEST_AGENT_MODEL`` (the default for every run without one), then
    the agent table's ``model``, then ``gemini-2.5-flash``. docs/how-to/playbooks.md documents the order."""
    return str(context.get("agent_model") or os.environ.get("FABTEST_AGENT_MODEL") or context.get("model")
               or DEFAULT_MODEL)


def gemini_cli(context: Mapping[str, Any] | None = None) -> CliAgent:
    """Registry factory for the real Gemini CLI.

    Model: see :func:`agent_model` (a playbook's ``agent_model``, else ``FABTEST_AGENT_MODEL``...).
    Executable: ``FABTEST_GEMINI_CLI``, else ``gemini``. Timeout: ``context["timeout"]`` (seconds,
    default 60); working directory: ``context["cwd"]`` or ``context["workspace"]``.
    """
    ctx = dict(context or {})
    model = agent_model(ctx)
    executable = os.environ.get("FABTEST_GEMINI_CLI") or ctx.get("executable") or DEFAULT_EXECUTABLE
    timeout = ctx.get("timeout_s", ctx.get("timeout", 60))
    cwd = ctx.get("cwd") or ctx.get("workspace")
    env = ctx.get("env") if isinstance(ctx.get("env"), Mapping) else None
    return CliAgent(model=str(model), executable=str(executable), timeout_s=float(timeout), cwd=cwd, env=env,
                    tools=ctx.get("tools"), traces=ctx.get("traces", False))


# -- parsing ----------------------------------------------------------------------------------------


def parse_stream_json(stdout: str) -> AgentResponse:
    """Turn Gemini CLI ``-o stream-json`` output into a response (raises AgentError on garbage)."""
    segments: list[str] = []
    current: list[str] = []
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    metadata: dict[str, Any] = {}
    warnings: list[str] = []
    result: dict[str, Any] | None = None
    events = 0
    for event in _events(stdout):
        kind = event["type"]
        events += 1
        if kind == "init":
            if event.get("session_id"):
                metadata["cli_session_id"] = event["session_id"]
            if event.get("model"):
                metadata["model"] = event["model"]
        elif kind == "message":
            if event.get("role") == "assistant" and isinstance(event.get("content"), str):
                current.append(event["content"])
        elif kind == "tool_use":
            if current:
                segments.append("".join(current))
                current = []
            params = event.get("parameters")
            call = ToolCall(
                name=str(event.get("tool_name") or "?"),
                arguments=params if isinstance(params, dict) else ({} if params is None else {"value": params}),
            )
            tool_id = event.get("tool_id")
            if tool_id is not None:
                call.metadata["tool_id"] = tool_id
                by_id[str(tool_id)] = call
            calls.append(call)
        elif kind == "tool_result":
            _record_result(event, by_id.get(str(event.get("tool_id"))) or _first_open(calls))
        elif kind == "error":
            warnings.append(f"{event.get('severity', 'error')}: {event.get('message', '')}")
        elif kind == "result":
            result = event
    if current:
        segments.append("".join(current))
    text = _join_segments(segments)
    if warnings:
        metadata["warnings"] = warnings
    if result is not None:
        metadata["status"] = result.get("status")
        if isinstance(result.get("stats"), dict):
            stats = result["stats"]
            metadata["stats"] = stats
            metadata["usage"] = {
                "input_tokens": stats.get("input_tokens", 0),
                "output_tokens": stats.get("output_tokens", 0),
                "total_tokens": stats.get("total_tokens", 0),
            }
            models = _model_usage(stats.get("models"))
            # the CLI routes some requests to other models: each is priced as its own (docs/reference/cost.md)
            if models:
                metadata["usage"]["models"] = models
        if result.get("status") == "error":
            err = result.get("error") or {}
            detail = err.get("message") if isinstance(err, dict) else str(err)
            raise AgentError(f"CLI agent reported an error: {detail or 'unknown error'}")
    if events == 0:
        raise AgentError(f"CLI agent produced no stream-json events; stdout was: {_show(stdout)}")
    if not text.strip() and not calls:
        raise AgentError(f"CLI agent produced no reply text; stdout was: {_show(stdout)}")
    return AgentResponse(text=text, tool_calls=calls, metadata=metadata)


def _model_usage(models: Any) -> dict[str, dict[str, Any]]:
    """``result.stats.models`` (``{name: {input_tokens, output_tokens, ...}}``) as per-model usage."""
    if not isinstance(models, dict):
        return {}
    return {str(name): {"input_tokens": entry.get("input_tokens", 0), "output_tokens": entry.get("output_tokens", 0)}
            for name, entry in models.items() if isinstance(entry, dict)}


def _record_result(event: Mapping[str, Any], call: ToolCall | None) -> None:
    """Keep what a ``tool_result`` says: ``status`` always (the Gemini CLI sends it without ``output``
    for ``write_file``), ``output`` as the result when given, else a failed tool's error message."""
    if call is None:
        return
    status, output, error = event.get("status"), event.get("output"), event.get("error")
    if isinstance(status, str) and status:
        call.metadata["status"] = status
    if error:
        call.metadata["error"] = error
    if output is not None:
        call.result = output
    elif call.result is None and status == "error" and isinstance(error, Mapping) and error.get("message"):
        call.result = str(error["message"])


def _first_open(calls: list[ToolCall]) -> ToolCall | None:
    """The earliest call still waiting for its result (a ``tool_result`` without a known ``tool_id``)."""
    return next((c for c in calls if "status" not in c.metadata and c.result is None), None)


def _parse_text(stdout: str) -> AgentResponse:
    text = stdout.strip()
    if not text:
        raise AgentError("CLI agent printed nothing on stdout")
    return AgentResponse(text=text)


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """The JSON event objects in a stream-json stdout; other lines (warnings, noise) are skipped."""
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            yield event


def _stream_error(stdout: bytes) -> str | None:
    """The message of a ``result``/``error`` event in a failed run's stdout, if any."""
    found = None
    for event in _events(stdout.decode("utf-8", "replace")):
        if event["type"] == "result" and isinstance(event.get("error"), dict):
            found = event["error"].get("message") or found
        elif event["type"] == "error" and event.get("message"):
            found = found or event["message"]
    return _show(found, 200) if found else None


def _join_segments(segments: list[str]) -> str:
    """Text before and after a tool call are separate paragraphs of one reply."""
    return "\n".join(seg.strip() for seg in segments if seg.strip())


def _latest_user_message(messages: Sequence[Message]) -> Message:
    for message in reversed(list(messages)):
        if message.role == "user":
            return message
    raise AgentError("CLI agent needs a user message to send, got none")


def _derive_resume(command: list[str]) -> list[str]:
    """A custom first-turn template with ``--session-id X`` resumes with ``--resume X``."""
    return ["--resume" if a == "--session-id" else a for a in command]


def _show(text: str | None, limit: int = _SHOW_CHARS) -> str:
    text = text or ""
    if not text.strip():
        return "(empty)"
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _tail(text: str, lines: int = _STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# -- process handling -------------------------------------------------------------------------------

#: process groups started by any CliAgent and not yet reaped: killed at interpreter exit
_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()
_EXIT_WAIT_S = 3.0  # at exit, how long the supervisors get to end their trees


def _track(pgid: int) -> None:
    with _LIVE_LOCK:
        _LIVE_GROUPS.add(pgid)


def _untrack(pgid: int) -> None:
    with _LIVE_LOCK:
        _LIVE_GROUPS.discard(pgid)


def kill_all_groups() -> None:
    """End every CLI process group still alive (pytest exit, Ctrl-C, a worker shutting down): SIGTERM,
    time for each supervisor to end its tree, then SIGKILL."""
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
        _LIVE_GROUPS.clear()
    supervisor.end_groups(groups, _EXIT_WAIT_S if supervisor.available() else 0.0)


atexit.register(kill_all_groups)


def _drain(stream: Any, sink: list[bytes]) -> None:
    try:
        for chunk in iter(lambda: stream.read1(65536), b""):
            sink.append(chunk)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _join(readers: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for reader in readers:
        reader.join(max(0.0, deadline - time.monotonic()))
    # A reader still alive: someone outside the group (and not under a supervisor) holds the pipes.
    # Stop waiting and leave the daemon reader blocked: closing a stream another thread is reading
    # waits for that read, so it would hang the turn for as long as that process lives.


_signal_group = supervisor.signal_group


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the whole process group, SIGKILL it after ``grace_s``, reap the leader. Under a
    supervisor the leader is the supervisor: it ends the whole tree within its own grace, so it
    gets :data:`~fabtest.agents.supervisor.MARGIN_S` more before the SIGKILL."""
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s + (supervisor.MARGIN_S if supervisor.available() else 0.0)
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            break
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def _terminate_leftovers(pgid: int, grace_s: float) -> None:
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)
