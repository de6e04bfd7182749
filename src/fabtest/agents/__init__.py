"""Agent adapters: Python objects and callables, HTTP endpoints, CLIs run per turn."""

from fabtest.agents.base import Agent, AgentError, AgentTimeout
from fabtest.agents.http import HttpAgent
from fabtest.agents.python import CallableAgent

__all__ = ["Agent", "AgentError", "AgentTimeout", "CallableAgent", "HttpAgent"]
