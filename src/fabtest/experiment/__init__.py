"""Experiments: every pytest run's results, saved, summarised and compared.

``Recorder`` collects ``ScenarioResult``s and writes ``results/<id>.json``; ``render_summary``
prints it; ``compare`` diffs two of them.
"""

from fabtest.experiment.compare import Comparison, compare, gate_failures, meets_min_completion, regressed
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
from fabtest.experiment.stable_id import stable_id
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
