"""Experiments: every pytest run's results, saved, summarised and compared.

``Recorder`` collects ``ScenarioResult``s and writes ``results/<id>.json``; ``render_summary``
prints it; ``compare`` diffs two of them.
"""

from typing import TYPE_CHECKING

# Eager: the submodule of the same name would otherwise shadow the function on the package.
from fabtest.experiment.stable_id import stable_id

if TYPE_CHECKING:
    from fabtest.experiment.compare import Comparison, compare
    from fabtest.experiment.export import (
        ExperimentFileError,
        build_document,
        load_document,
        new_experiment_id,
        read_document,
        write_document,
    )
    from fabtest.experiment.fingerprint import experiment_fingerprints
    from fabtest.experiment.gate import gate_failures, meets_min_completion, regressed
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
    from fabtest.experiment.summary import render_summary

__all__ = [
    "CheckRecord",
    "Comparison",
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
    "compare",
    "experiment_fingerprints",
    "gate_failures",
    "git_info",
    "load_document",
    "meets_min_completion",
    "new_experiment_id",
    "pending_journals",
    "read_document",
    "recover",
    "regressed",
    "render_summary",
    "stable_id",
    "write_document",
]

# Imported on first use: ``import fabtest.experiment.stable_id`` (the collector's) must not load
# the comparison and report machinery.
_LAZY = {'Comparison': 'fabtest.experiment.compare', 'compare': 'fabtest.experiment.compare', 'gate_failures': 'fabtest.experiment.gate', 'meets_min_completion': 'fabtest.experiment.gate', 'regressed': 'fabtest.experiment.gate', 'ExperimentFileError': 'fabtest.experiment.export', 'build_document': 'fabtest.experiment.export', 'load_document': 'fabtest.experiment.export', 'new_experiment_id': 'fabtest.experiment.export', 'read_document': 'fabtest.experiment.export', 'write_document': 'fabtest.experiment.export', 'experiment_fingerprints': 'fabtest.experiment.fingerprint', 'GitInfo': 'fabtest.experiment.gitinfo', 'git_info': 'fabtest.experiment.gitinfo', 'CheckRecord': 'fabtest.experiment.model', 'ExperimentInfo': 'fabtest.experiment.model', 'ScenarioResult': 'fabtest.experiment.model', 'ToolCallRecord': 'fabtest.experiment.model', 'TopicRecord': 'fabtest.experiment.model', 'TurnRecord': 'fabtest.experiment.model', 'UsageRecord': 'fabtest.experiment.model', 'Recorder': 'fabtest.experiment.recorder', 'pending_journals': 'fabtest.experiment.recorder', 'recover': 'fabtest.experiment.recorder', 'render_summary': 'fabtest.experiment.summary'}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
