"""Helpers for the playbook runner tests: files, in-process agents."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from fabtest.conversation import AgentResponse, Message
from fabtest.demo.agent import VenueAgent

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "scenarios" / "playbooks"
DEMO_CLI = "fabtest.demo.fake_cli:build_cli_agent"
#: Project settings for inner runs: fast retries against the local fake.
PYPROJECT = """
[tool.fabtest]
results_dir = "results"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 1
timeout = 5

[tool.fabtest.simulator]
backoff = 0.01
max_retries = 1
timeout = 5
"""


def write_playbook(directory: Path, data: dict[str, Any], name: str | None = None, fmt: str = "json") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name or data['name']}.playbook.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


class BookingAgent:
    """The demo venue agent in-process, writing booking.txt in its workspace like the demo CLI."""

    def __init__(self, context: dict[str, Any]) -> None:
        self.cwd = Path(context["cwd"])
        self.context = context
        self.inner = VenueAgent()
        self.received: list[str] = []

    def chat(self, messages: list[Message], on_tool_call: Any = None) -> AgentResponse:
        self.received.append(messages[-1].content)
        response = self.inner.chat(messages)
        for call in response.tool_calls:
            if call.name == "book_venue":
                lines = ["Booking confirmed", f"confirmation: {call.result['confirmation']}"]
                lines += [f"{k}: {v}" for k, v in call.arguments.items()]
                (self.cwd / "booking.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return response


class Recording:
    """An agent factory that remembers the agents it built (to see what they received)."""

    def __init__(self, cls: type = BookingAgent) -> None:
        self.cls = cls
        self.agents: list[Any] = []

    def __call__(self, context: dict[str, Any]) -> Any:
        agent = self.cls(context)
        self.agents.append(agent)
        return agent

    @property
    def received(self) -> list[str]:
        return [m for a in self.agents for m in a.received]


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


def environ(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}
