"""Agent adapters: Python objects and callables, HTTP endpoints, CLIs run per turn, ACP agents."""

from typing import TYPE_CHECKING

from fabtest.agents.base import Agent, AgentError, AgentTimeout
from fabtest.agents.python import CallableAgent

if TYPE_CHECKING:
    from fabtest.agents.acp import AcpAgent
    from fabtest.agents.http import HttpAgent

from fabtest._internal import lazy as _lazy  # after the imports it reads

# Every name above is exported; ``AcpAgent`` and ``HttpAgent`` are imported on first use: their
# modules pull in asyncio and httpx, which most runs (and every ``pytest --collect-only``) never need.
__all__, __getattr__ = _lazy.exports(__name__, __file__)
