"""Old import paths of modules that moved in 0.2 keep working for one release, with a warning.

fabtest 0.2 laid its modules out by the flow of data (docs/explanation/architecture.md). Code that
still imports ``fabtest.settings`` or ``fabtest.judge`` gets the module from its new place and a
``DeprecationWarning`` naming it, instead of an ``ImportError``. The finder answers only for the
names in :data:`MOVED`; it is installed by ``fabtest/__init__.py``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: old dotted name -> where the module lives now
MOVED: dict[str, str] = {
    "fabtest._files": "fabtest._internal.files",
    "fabtest._rewrite": "fabtest._internal.rewrite",
    "fabtest._signals": "fabtest._internal.signals",
    "fabtest._terminal": "fabtest._internal.terminal",
    "fabtest.agents.cli": "fabtest.agents.cli_agent",
    "fabtest.checks": "fabtest.engine.checks",
    "fabtest.criteria": "fabtest.config.criteria",
    "fabtest.datafile": "fabtest._internal.datafile",
    "fabtest.demo.cli": "fabtest.demo.fake_cli",
    "fabtest.experiment.compare": "fabtest.compare.compute",
    "fabtest.experiment.gate": "fabtest.compare.gate",
    "fabtest.experiment.summary": "fabtest.report.console",
    "fabtest.extras": "fabtest._internal.extras",
    "fabtest.generate": "fabtest.authoring.generate",
    "fabtest.generate_command": "fabtest.cli.generate",
    "fabtest.init": "fabtest.cli.init",
    "fabtest.judge": "fabtest.engine.judge",
    "fabtest.judging.commands": "fabtest.cli.judging",
    "fabtest.judging.replay": "fabtest.replay.conversations",
    "fabtest.judging.replay_checks": "fabtest.replay.recorded_checks",
    "fabtest.judging.replay_command": "fabtest.cli.replay",
    "fabtest.judging.replay_feature": "fabtest.replay.feature_setup",
    "fabtest.judging.replay_topics": "fabtest.replay.topic_replay",
    "fabtest.llm.budget": "fabtest.llm.retry_budget",
    "fabtest.llm.quick_exit": "fabtest._internal.quick_exit",
    "fabtest.patterns": "fabtest.engine.patterns",
    "fabtest.playbook.cli": "fabtest.cli.run",
    "fabtest.preflight": "fabtest.engine.preflight",
    "fabtest.pytest_plugin.concurrent": "fabtest.pytest_plugin.concurrency.protocol",
    "fabtest.pytest_plugin.isolation": "fabtest.pytest_plugin.concurrency.isolation",
    "fabtest.pytest_plugin.late": "fabtest.pytest_plugin.late_verdicts",
    "fabtest.pytest_plugin.routing": "fabtest.pytest_plugin.concurrency.routing",
    "fabtest.redaction": "fabtest._internal.redaction",
    "fabtest.runner": "fabtest.engine.turns",
    "fabtest.scenario_sets": "fabtest.config.scenario_sets",
    "fabtest.settings": "fabtest.config.settings",
    "fabtest.simulator": "fabtest.engine.simulator",
    "fabtest.targets": "fabtest._internal.targets",
    "fabtest.topics": "fabtest.engine.topics",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new place: one module object under two names."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; import it from there (the old path goes in fabtest 0.3)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """A meta path finder that knows only the moved names."""

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder at the end of ``sys.meta_path`` (once): the real modules are always found first."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
