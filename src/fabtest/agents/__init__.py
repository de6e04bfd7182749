"""Agent adapters: Python objects and callables, HTTP endpoints, CLIs run per turn, ACP agents."""

from typing import TYPE_CHECKING

from fabtest.agents.base import Agent, AgentError, AgentTimeout
from fabtest.agents.python import CallableAgent

if TYPE_CHECKING:
    from fabtest.agents.acp import AcpAgent
    from fabtest.agents.http import HttpAgent

__all__ = ["AcpAgent", "Agent", "AgentError", "AgentTimeout", "CallableAgent", "HttpAgent"]


def __getattr__(name: str) -> object:
    """``AcpAgent`` and ``HttpAgent`` on first use: their modules pull in asyncio and httpx, which
    most runs (and every ``pytest --collect-only``) never need."""
    if name == "AcpAgent":
        from fabtest.agents.acp import AcpAgent

        return AcpAgent
    if name == "HttpAgent":
        from fabtest.agents.http import HttpAgent

        return HttpAgent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
