"""Experiments: the record of a run and its numbers.

``Recorder`` collects ``ScenarioResult``s and writes ``results/<id>.json``. What reads an experiment
sits above this package: :mod:`fabtest.report.console` prints it, :mod:`fabtest.compare` diffs two.
"""

from typing import TYPE_CHECKING

# Eager: the submodule of the same name would otherwise shadow the function on the package.
from fabtest.experiment.stable_id import stable_id

if TYPE_CHECKING:
    from fabtest.experiment.export import build_document, new_experiment_id, write_document
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
    from fabtest.experiment.reader import ExperimentFileError, load_document, read_document
    from fabtest.experiment.recorder import Recorder, pending_journals, recover

from fabtest._internal import lazy as _lazy  # noqa: E402 - after the imports it reads

# Every name above is exported; those under TYPE_CHECKING are imported on first use, so
# ``import fabtest.experiment.stable_id`` (the collector's) does not load the report machinery.
__all__, __getattr__ = _lazy.exports(__name__, __file__)
