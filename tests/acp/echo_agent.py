"""A small ACP agent written with the SDK, run as ``python echo_agent.py``: what a prompt does depends on its words.

- ``remember WORD`` / ``recall``: the session keeps history, so a later turn can answer with WORD.
- ``write PATH TEXT``: writes the file itself and reports it as ``tool_call`` (in_progress, no
  rawInput, Gemini-CLI style id) then ``tool_call_update`` (completed, a diff), then more text.
- ``shell``: a tool call that sends ``rawInput`` and fails with text output.
- ``ask``: asks permission first, then says which option it got (or that it was cancelled).
- ``where``: the session's cwd, the MCP server names and the fs capability the client advertised.
- ``spawn``: starts a grandchild that outlives the agent unless its process group is killed.
- ``escape PIDFILE``: starts a grandchild that calls ``setsid`` (leaves the group), writes
  "<agent pid> <grandchild pid>" to PIDFILE; ``escape_hang PIDFILE`` does so and never answers.
- ``crash``: writes to stderr and exits with code 3. ``hang``: starts a grandchild and never answers.
- ``silent``: ends the turn without any text.
- ``env NAME``: says ``token: <the value of $NAME>`` (an agent echoing a secret it was given).
- ``meta``: says ``traceparent: <the prompt's _meta.traceparent>`` (or ``none``).
- ``malformed``: sends a ``session/update`` the schema rejects, then a good reply.
- ``surrogate``: replies with a lone surrogate escaped in its JSON (``"\\ud83d"``).

Every reply carries Gemini-CLI style token usage in ``_meta.quota.token_count``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallLocation,
    ToolCallUpdate,
)


class EchoAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.fs: Any = None
        self.sessions: dict[str, dict[str, Any]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        self.fs = client_capabilities.fs if client_capabilities is not None else None
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="echo-agent", version="1.0"))

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        session_id = f"s{len(self.sessions) + 1}"
        self.sessions[session_id] = {"cwd": cwd, "mcp": [s.name for s in mcp_servers or []], "words": []}
        return NewSessionResponse(session_id=session_id)

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        words = text.split()
        session = self.sessions[session_id]
        command = words[0].lower() if words else ""
        if command == "remember":
            session["words"].append(words[1])
            await self.say(session_id, "I will ")
            await self.say(session_id, "remember that.")
        elif command == "recall":
            await self.say(session_id, f"You told me {', '.join(session['words']) or 'nothing'}.")
        elif command == "write":
            path, content = os.path.join(session["cwd"], words[1]), " ".join(words[2:]) + "\n"
            call_id = f"write_file__write_file_{int(time.time() * 1000)}_0"
            await self.say(session_id, "Saving it.")
            await self.conn.session_update(session_id, start_tool_call(
                call_id, f"Writing to {words[1]}", kind="edit", status="in_progress",
                locations=[ToolCallLocation(path=path)]))
            with open(path, "w") as fh:
                fh.write(content)
            await self.conn.session_update(session_id, update_tool_call(
                call_id, status="completed", content=[tool_diff_content(path, content)]))
            await self.say(session_id, "Saved.")
        elif command == "shell":
            await self.conn.session_update(session_id, start_tool_call(
                "call-7", "ls /nowhere", kind="execute", status="pending", raw_input={"command": "ls /nowhere"}))
            await self.conn.session_update(session_id, update_tool_call(
                "call-7", status="failed", content=[tool_content(text_block("ls: cannot access '/nowhere'"))]))
            await self.say(session_id, "That did not work.")
        elif command == "ask":
            call = ToolCallUpdate(tool_call_id=f"run_shell_command__run_shell_command_{int(time.time() * 1000)}_1",
                                  title="rm -rf build", kind="execute", status="pending")
            options = [PermissionOption(option_id="proceed_once", name="Allow", kind="allow_once"),
                       PermissionOption(option_id="cancel", name="Reject", kind="reject_once")]
            answer = await self.conn.request_permission(session_id=session_id, tool_call=call, options=options)
            outcome = answer.outcome
            chosen = getattr(outcome, "option_id", None) or outcome.outcome
            if chosen == "proceed_once":
                await self.conn.session_update(session_id, update_tool_call(
                    call.tool_call_id, status="completed", content=[tool_content(text_block("removed"))]))
            await self.say(session_id, f"permission: {chosen}")
        elif command == "where":
            fs = self.fs
            await self.say(session_id, f"cwd={session['cwd']} mcp={','.join(session['mcp'])} "
                                       f"fs_read={bool(fs and fs.read_text_file)} fs_write={bool(fs and fs.write_text_file)}")
        elif command == "crash":
            print("echo-agent: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        elif command == "spawn":
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            await self.say(session_id, "spawned a helper")
        elif command in ("escape", "escape_hang"):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
            with open(words[1], "w") as fh:
                fh.write(f"{os.getpid()} {child.pid}\n")
            if command == "escape_hang":
                await asyncio.sleep(300)
            await self.say(session_id, "escaped")
        elif command == "env":
            await self.say(session_id, f"token: {os.environ.get(words[1], '')}")
        elif command == "meta":
            await self.say(session_id, f"traceparent: {kwargs.get('traceparent', 'none')}")
        elif command == "malformed":
            await self.conn._conn.send_notification("session/update", {  # noqa: SLF001 - bypasses the SDK's model
                "sessionId": session_id, "update": {"sessionUpdate": "agent_message_chunk", "content": 42}})
            await self.say(session_id, "the rest of the reply")
        elif command == "surrogate":
            await self.conn._conn.send_notification("session/update", {  # noqa: SLF001 - a raw JSON escape
                "sessionId": session_id,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a \ud83d b"}}})
        elif command == "hang":
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            await asyncio.sleep(300)
        elif command != "silent":
            await self.say(session_id, f"echo: {text}")
        return PromptResponse(stop_reason="end_turn",
                              field_meta={"quota": {"token_count": {"input_tokens": len(words),
                                                                    "output_tokens": 2}}})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    time.sleep(float(os.environ.get("FABTEST_ACP_SLOW_START", "0")))  # an agent that takes its time to start
    asyncio.run(run_agent(EchoAgent()))
