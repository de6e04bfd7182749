"""The scenario engine: one scenario run, independent of any test runner.

Features (through the pytest plugin) drive :class:`fabtest.engine.scenario.ScenarioState`; the
engine never imports pytest. It says why a scenario cannot go on with the exceptions of
:mod:`fabtest.errors` (a failure type on each class, :class:`~fabtest.errors.NeedsLLM` for a
skip), and each front end maps those to its own outcomes.
"""

from fabtest.engine.scenario import LLMRoles, ScenarioState

__all__ = ["LLMRoles", "ScenarioState"]
