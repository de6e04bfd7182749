"""Keep an unused hypothesis from being imported at the end of every fabtest run.

hypothesis registers a pytest plugin (``hypothesispytest``) wherever it is installed, and that
plugin's ``pytest_terminal_summary`` imports ``hypothesis.internal.observability`` and with it
all of hypothesis (about 0.9 s of CPU on the 2-core development machine), even in a run without
a single hypothesis test, in every process: the controller and each ``-n`` worker. fabtest does
not use hypothesis (it is a test-only dependency of fabtest's own repository), but a user's
environment often has it. A run that never imported hypothesis has nothing for that summary to
show (no statistics, no failing examples, no observations), so :func:`spare` unregisters the
plugin just before it, unless hypothesis was imported (a hypothesis test ran or was collected)
or its statistics were asked for. The import cost drops to zero; nothing the user sees changes.
"""

from __future__ import annotations

import sys

import pytest

__all__ = ["spare"]

PLUGIN = "hypothesispytest"


def spare(config: pytest.Config) -> bool:
    """Unregister hypothesis's plugin when this run never imported hypothesis; whether it did."""
    if "hypothesis" in sys.modules:
        return False
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    if plugin is None or config.getoption("--hypothesis-show-statistics", False):
        return False
    config.pluginmanager.unregister(plugin)
    return True
