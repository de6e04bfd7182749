"""FakeGemini wired through the environment (the ``fake`` fixture of the built-in agent's tests)."""

from builtin_agent.conftest import fake  # noqa: F401 - re-exported as a fixture for the ADK tests
