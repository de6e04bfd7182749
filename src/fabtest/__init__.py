"""fabtest: behaviour-testing for conversational agents.

Write Gherkin features, run ``pytest features/``, compare experiments with ``fabtest-compare``.
The public API is what this module exports (docs/reference/api.md): the conversation data model,
the agent protocol, fabtest's errors, :class:`Criterion` and :class:`Settings`, :class:`Scenario`
(what a custom step may use of the running scenario) and :func:`run`, one scenario from Python
without pytest or Gherkin (docs/how-to/python-api.md). Every other module is internal.
"""

from fabtest._internal import rewrite as _rewrite  # noqa: F401 - first: pytest need not rewrite the modules below (see its docstring)

# isort: split
from fabtest.agents.base import Agent, AgentError, AgentTimeout
from fabtest.agents.registry import with_context
from fabtest.agents.stubs import ToolFailed, tool
from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.conversation import (
    AgentResponse,
    Attachment,
    Audio,
    Check,
    Conversation,
    Decision,
    Message,
    Pause,
    ToolCall,
    Turn,
)
from fabtest.errors import ExpectationFailed, FabtestError, UsageError

# last: the engine imports the modules above
from fabtest.engine.entry import Decide, SimulatedUser, run  # isort: skip
from fabtest.engine.custom_steps import Scenario  # isort: skip

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentError",
    "AgentResponse",
    "AgentTimeout",
    "Attachment",
    "Audio",
    "Check",
    "Conversation",
    "Criterion",
    "Decide",
    "Decision",
    "ExpectationFailed",
    "FabtestError",
    "Message",
    "Pause",
    "Scenario",
    "Settings",
    "SimulatedUser",
    "ToolCall",
    "ToolFailed",
    "Turn",
    "UsageError",
    "run",
    "tool",
    "with_context",
]
