"""Production conversations: read logged traffic, judge it with ``@production`` features, import it as tests.

``fabtest score`` and ``fabtest import LOGS --all`` (docs/how-to/production.md). The exports of
tracing tools are read by :mod:`.logs` (one reader per format under :mod:`.formats`), judged by
:mod:`.scoring` through the engine's :class:`~fabtest.engine.scenario.ScenarioState` exactly as a
test run's ``Then`` steps are, and written through :mod:`fabtest.experiment.spool` like any run.
"""
