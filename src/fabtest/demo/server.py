"""Serve the demo agent over HTTP JSON on loopback: ``python -m fabtest.demo.server --port N``.

POST /chat with ``{"messages": [{"role", "content"}], "style": "friendly"|"curt"}``; GET /health.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fabtest.conversation import Message
from fabtest.demo.agent import VenueAgent


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/chat":
            self._send(404, {"error": "not found"})
            return
        try:
            data = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            messages = [Message(m["role"], m["content"]) for m in data["messages"]]
            agent = VenueAgent(style=data.get("style", "friendly"))
        except (ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": f"bad request: {exc}"})
            return
        reply = agent.chat(messages)
        self._send(200, {
            "text": reply.text,
            "tool_calls": [c.to_dict() for c in reply.tool_calls],
            "metadata": reply.metadata,
        })


def make_server(port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server bound to loopback; port 0 picks a free one (read ``server.server_address``)."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError("the demo server only binds to loopback")
    return ThreadingHTTPServer((host, port), _Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the fabtest demo venue agent over HTTP (loopback only).")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    server = make_server(args.port, args.host)
    print(f"fabtest demo agent on http://{args.host}:{server.server_address[1]}/chat", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
