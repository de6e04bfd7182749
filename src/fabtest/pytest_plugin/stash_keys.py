"""What fabtest keeps on a pytest item while its scenario runs (``item.stash``): shared by the hooks
of ``plugin.py`` and the report translation of ``reports.py``."""

from __future__ import annotations

from typing import Any

import pytest

from fabtest.engine.scenario import ScenarioState
from fabtest.tracing import ScenarioSpan

#: the running scenario's engine state (the fabtest_scenario fixture's)
STATE_KEY = pytest.StashKey[ScenarioState]()
#: "features/x.feature:12" of the step running now
WHERE_KEY = pytest.StashKey[str]()
#: the step running now, as written ("Then the response must ...")
STEP_KEY = pytest.StashKey[str]()
#: the scenario's span, with --fabtest-otel
SPAN_KEY = pytest.StashKey[ScenarioSpan | None]()
#: the session that ended: its final exit status arms the exit guard
ENDED_KEY = pytest.StashKey[pytest.Session]()
#: the iteration an extra run of --fabtest-until-decided records (its clone of the scenario's item)
ITERATION_KEY = pytest.StashKey[int]()
#: the simulated tries of a run voided by its late fidelity review, carried by its run again (requeue.py)
VOIDED_KEY = pytest.StashKey[list[dict[str, Any]]]()
