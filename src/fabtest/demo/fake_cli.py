"""A command-line front-end of the demo agent that mimics the Gemini CLI's headless mode.

    python -m fabtest.demo.fake_cli --skip-trust --prompt=TEXT -m MODEL -o stream-json --approval-mode yolo \\
        --session-id UUID          # first turn: creates the session
    python -m fabtest.demo.fake_cli ... --resume UUID      # later turns

Same flags and ``stream-json`` events as ``gemini`` 0.61 (``init``, ``message``, ``tool_use``,
``tool_result``, ``result``). Each session's message history is kept as JSON in
``$FABTEST_DEMO_STATE_DIR`` (default: ``<tmp>/fabtest-demo-sessions``) and replayed to the
stateless demo agent every turn. ``--session-id`` of an existing session and ``--resume`` of an
unknown one fail with exit code 42 and a message on stderr, like the real CLI. When the agent
books a venue, the confirmation is also written to ``booking.txt`` in the working directory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FATAL_INPUT_ERROR = 42
_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def state_dir() -> Path:
    configured = os.environ.get("FABTEST_DEMO_STATE_DIR")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "fabtest-demo-sessions"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fabtest-demo-cli", description="Demo venue agent, Gemini-CLI style.")
    p.add_argument("-p", "--prompt", required=True, help="the user message (headless mode)")
    p.add_argument("-m", "--model", default="demo")
    p.add_argument("-o", "--output-format", choices=("text", "json", "stream-json"), default="text")
    p.add_argument("--approval-mode", choices=("default", "auto_edit", "yolo", "plan"), default="default")
    p.add_argument("-y", "--yolo", action="store_true")
    p.add_argument("--skip-trust", action="store_true")
    p.add_argument("--session-id")
    p.add_argument("-r", "--resume")
    p.add_argument("--agent", default="build_agent",
                   help="factory in fabtest.demo (build_agent, build_grumpy_agent...)")
    return p


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fail(message: str, code: int = FATAL_INPUT_ERROR) -> int:
    print(message, file=sys.stderr)
    return code


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"type": event.pop("type"), "timestamp": _now(), **event}, separators=(",", ":"))
                     + "\n")
    sys.stdout.flush()


def _as_output(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _write_booking(call: Any, reply: str) -> None:
    result = call.result if isinstance(call.result, dict) else {}
    lines = ["Booking confirmed"]
    if result.get("confirmation"):
        lines.append(f"confirmation: {result['confirmation']}")
    for key, value in {**call.arguments, **{k: v for k, v in result.items() if k != "confirmation"}}.items():
        lines.append(f"{key}: {value}")
    lines += ["", reply]
    Path("booking.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _parse(argv: list[str]) -> argparse.Namespace:
    """The options; ``--prompt=TEXT`` is taken as written. argparse treats a ``--`` inside an
    option's value as its end-of-options marker (a user who says "--" made the demo crash with
    ``TypeError: ... got 'list'``), so the prompt is split off before argparse sees it."""
    rest: list[str] = []
    prompt: str | None = None
    for arg in argv:
        if prompt is None and arg.startswith(("--prompt=", "-p=")):
            prompt = arg.partition("=")[2]
        else:
            rest.append(arg)
    if prompt is None:
        return _parser().parse_args(rest)
    args = _parser().parse_args([*rest, "--prompt", "placeholder"])
    args.prompt = prompt
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else list(argv))
    if args.session_id and args.resume:
        return _fail("The flags --resume, --session-id, and --session-file are mutually exclusive. "
                     "Please provide only one.", 1)
    session_id = args.resume or args.session_id or str(uuid.uuid4())
    if not _SESSION_ID_RE.match(session_id):
        return _fail(f"Error: invalid session id {session_id!r}")
    store = state_dir()
    path = store / f"{session_id}.json"
    if args.resume:
        if not path.exists():
            return _fail(f'Error resuming session: Invalid session identifier "{session_id}". '
                         "Use --list-sessions to see available sessions.")
        try:
            history = json.loads(path.read_text(encoding="utf-8"))["messages"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return _fail(f"Error resuming session: corrupt session file {path}: {exc}")
    else:
        if path.exists():
            return _fail(f'Error starting session: Session ID "{session_id}" already exists. '
                         "Use --resume to resume it, or provide a different ID.")
        history = []

    import fabtest.demo as demo
    from fabtest.conversation import Message

    started = time.monotonic()
    stream = args.output_format == "stream-json"
    if stream:
        _emit({"type": "init", "session_id": session_id, "model": args.model})
        _emit({"type": "message", "role": "user", "content": args.prompt})
    messages = [Message(m["role"], m["content"]) for m in history] + [Message("user", args.prompt)]
    try:
        factory = getattr(demo, args.agent)
        response = factory({}).chat(messages)
    except Exception as exc:  # reported like the real CLI's fatal errors
        if stream:
            _emit({"type": "result", "status": "error",
                   "error": {"type": type(exc).__name__, "message": str(exc)}, "stats": _stats(started, 0)})
        return _fail(f"Error: {type(exc).__name__}: {exc}", 1)

    for i, call in enumerate(response.tool_calls):
        tool_id = f"{call.name}-{int(time.time() * 1000)}-{i}"
        if stream:
            _emit({"type": "tool_use", "tool_name": call.name, "tool_id": tool_id, "parameters": call.arguments})
            _emit({"type": "tool_result", "tool_id": tool_id, "status": "success", "output": _as_output(call.result)})
        if call.name == "book_venue":
            _write_booking(call, response.text)

    store.mkdir(parents=True, exist_ok=True)
    history = history + [{"role": "user", "content": args.prompt}, {"role": "agent", "content": response.text}]
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"session_id": session_id, "model": args.model, "messages": history}, indent=2),
                   encoding="utf-8")
    tmp.replace(path)

    if stream:
        _emit({"type": "message", "role": "assistant", "content": response.text, "delta": True})
        _emit({"type": "result", "status": "success", "stats": _stats(started, len(response.tool_calls))})
    elif args.output_format == "json":
        print(json.dumps({"session_id": session_id, "response": response.text,
                          "stats": _stats(started, len(response.tool_calls))}, indent=2))
    else:
        print(response.text)
    return 0


def command(agent: str = "build_agent") -> list[str]:
    """The first-turn argv template that runs this front-end with the interpreter running fabtest."""
    argv = [sys.executable, "-m", "fabtest.demo.fake_cli", "--skip-trust", "--prompt={prompt}", "-m", "{model}",
            "-o", "stream-json", "--approval-mode", "yolo", "--session-id", "{session_id}"]
    return argv + (["--agent", agent] if agent != "build_agent" else [])


def build_cli_agent(context: dict[str, Any] | None = None) -> Any:
    """Registry factory: the demo agent behind its CLI front-end, driven by :class:`CliAgent`.

    ``context`` may give ``agent_model``, ``timeout``, ``cwd``/``workspace``, ``state_dir`` and
    ``demo_agent`` (a factory name in :mod:`fabtest.demo`).
    """
    from fabtest.agents.cli_agent import CliAgent

    ctx = dict(context or {})
    src = str(Path(__file__).resolve().parents[2])  # so the child imports this very fabtest
    pythonpath = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": pythonpath}
    if ctx.get("state_dir"):
        env["FABTEST_DEMO_STATE_DIR"] = str(ctx["state_dir"])
    return CliAgent(
        command(str(ctx.get("demo_agent") or "build_agent")),
        model=str(ctx.get("agent_model") or "demo"),
        timeout_s=float(ctx.get("timeout_s", ctx.get("timeout", 30))),
        cwd=ctx.get("cwd") or ctx.get("workspace"),
        env=env,
    )


def _stats(started: float, tool_calls: int) -> dict[str, Any]:
    return {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "input": 0,
            "duration_ms": int((time.monotonic() - started) * 1000), "tool_calls": tool_calls, "models": {}}


if __name__ == "__main__":
    sys.exit(main())
