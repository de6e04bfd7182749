"""FakeGemini wired through the environment, for the built-in agent."""

from builtin_agent.conftest import fake  # noqa: F401
