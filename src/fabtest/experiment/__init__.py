"""Experiments: the record of a run and its numbers.

``Recorder`` collects ``ScenarioResult``s and writes ``results/<id>.json``. What reads an experiment
sits above this package: :mod:`fabtest.report.console` prints it, :mod:`fabtest.compare` diffs two.
"""

from typing import TYPE_CHECKING

# Eager: the submodule of the same name would otherwise shadow the function on the package.
from fabtest.experiment.stable_id import stable_id

if TYPE_CHECKING:
    from fabtest.experiment.export import (
        ExperimentFileError,
        build_document,
        load_document,
        new_experiment_id,
        read_document,
        write_document,
    )
    from fabtest.experiment.fingerprint import experiment_fingerprints
    from fabtest.experiment.gitinfo import GitInfo, git_info
    from fabtest.experiment.model import (
        CheckRecord,
        ExperimentInfo,
        ScenarioResult,
        ToolCallRecord,
        TopicRecord,
        TurnRecord,
        UsageRecord,
    )
    from fabtest.experiment.recorder import Recorder, pending_journals, recover

__all__ = [
    "CheckRecord",
    "ExperimentFileError",
    "ExperimentInfo",
    "GitInfo",
    "Recorder",
    "ScenarioResult",
    "ToolCallRecord",
    "TopicRecord",
    "TurnRecord",
    "UsageRecord",
    "build_document",
    "experiment_fingerprints",
    "git_info",
    "load_document",
    "new_experiment_id",
    "pending_journals",
    "read_document",
    "recover",
    "stable_id",
    "write_document",
]

# Imported on first use: ``import fabtest.experiment.stable_id`` (the collector's) must not load
# the comparison and report machinery.
_LAZY = {'ExperimentFileError': 'fabtest.experiment.export', 'build_document': 'fabtest.experiment.export', 'load_document': 'fabtest.experiment.export', 'new_experiment_id': 'fabtest.experiment.export', 'read_document': 'fabtest.experiment.export', 'write_document': 'fabtest.experiment.export', 'experiment_fingerprints': 'fabtest.experiment.fingerprint', 'GitInfo': 'fabtest.experiment.gitinfo', 'git_info': 'fabtest.experiment.gitinfo', 'CheckRecord': 'fabtest.experiment.model', 'ExperimentInfo': 'fabtest.experiment.model', 'ScenarioResult': 'fabtest.experiment.model', 'ToolCallRecord': 'fabtest.experiment.model', 'TopicRecord': 'fabtest.experiment.model', 'TurnRecord': 'fabtest.experiment.model', 'UsageRecord': 'fabtest.experiment.model', 'Recorder': 'fabtest.experiment.recorder', 'pending_journals': 'fabtest.experiment.recorder', 'recover': 'fabtest.experiment.recorder'}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
