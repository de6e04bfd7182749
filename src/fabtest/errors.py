"""Exceptions that end a scenario with an explicit failure type, and the usage error.

The pytest plugin maps these to the failure types of DESIGN section 3 and prints their message
without a traceback: a user needs the step and what happened, not our stack.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user (feature, table, regex, settings): one line naming file and place."""


class ExpectationFailed(AssertionError):
    """A ``must`` expectation failed: failure type ``assertion``."""


class MaxTurnsReached(Exception):
    """The simulation ran out of turns before its stop condition: failure type ``max_turns``."""


class ScenarioTimeout(Exception):
    """The whole scenario exceeded ``--fabtest-scenario-timeout``: failure type ``timeout``."""
