"""The scenario engine: one scenario run, independent of any test runner.

Features (through the pytest plugin) drive :class:`~fabtest.engine.scenario.ScenarioState`, and
:func:`fabtest.run` drives it from Python; the engine never imports pytest. It says why a scenario
cannot go on with the exceptions of :mod:`fabtest.errors` (a failure type on each class,
:class:`~fabtest.errors.NeedsLLM` for a skip); :func:`~fabtest.engine.outcome.conclude` and
:func:`~fabtest.engine.outcome.ended` turn that into an :class:`Outcome`, and
:func:`~fabtest.engine.result.build_result` into the experiment's ``ScenarioResult``. Each front
end maps the outcome to its own terms. docs/explanation/architecture.md names the module of each job.
"""

from fabtest.engine.entry import SimulatedUser, run
from fabtest.engine.outcome import Outcome, conclude, ended
from fabtest.engine.result import ScenarioIdentity, build_result
from fabtest.engine.scenario import LLMRoles, ScenarioState

__all__ = ["LLMRoles", "Outcome", "ScenarioIdentity", "ScenarioState", "SimulatedUser", "build_result", "conclude",
           "ended", "run"]
