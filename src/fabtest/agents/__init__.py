"""Agent adapters: Python objects and callables, HTTP endpoints, CLIs run per turn, ACP agents."""

from fabtest.agents.base import Agent, AgentError, AgentTimeout
from fabtest.agents.http import HttpAgent
from fabtest.agents.python import CallableAgent

__all__ = ["AcpAgent", "Agent", "AgentError", "AgentTimeout", "CallableAgent", "HttpAgent"]


def __getattr__(name: str) -> object:
    """``AcpAgent`` on first use: its module pulls in asyncio, which most runs never need."""
    if name == "AcpAgent":
        from fabtest.agents.acp import AcpAgent

        return AcpAgent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
