"""Collects scenario results during a run and writes the experiment file at the end.

Every result is also appended to a journal (``results/.<id>.journal.jsonl``, flushed) the moment
it arrives, so a crash or a killed CI job loses nothing: ``recover`` turns a journal left behind
into an experiment file marked ``"interrupted": true``. No pytest imports: the plugin drives this.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fabtest.experiment.export import build_document, new_experiment_id, write_document
from fabtest.experiment.fingerprint import experiment_fingerprints
from fabtest.experiment.gitinfo import git_info
from fabtest.experiment.model import ExperimentInfo, ScenarioResult

__all__ = ["Recorder", "journal_path", "pending_journals", "recover", "utc_timestamp"]

_JOURNAL_SUFFIX = ".journal.jsonl"


def utc_timestamp() -> str:
    """Now, as ISO 8601 UTC with a ``Z`` (seed 10.1)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def journal_path(results_dir: str | os.PathLike[str], experiment_id: str) -> Path:
    return Path(results_dir) / f".{experiment_id}{_JOURNAL_SUFFIX}"


def pending_journals(results_dir: str | os.PathLike[str]) -> list[Path]:
    """Journals left behind by runs that never finished (candidates for ``recover``).

    A journal whose run is still alive is locked by its Recorder and left out, so a second
    pytest run in the same project never "recovers" a run in progress.
    """
    directory = Path(results_dir)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(f".*{_JOURNAL_SUFFIX}") if not _locked(p))


def _locked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we took
    return False


def _append_line(handle: Any, record: dict[str, Any]) -> None:
    """One JSON line, flushed to the OS: it survives the process being killed (not a power cut)."""
    handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    handle.flush()


def _finalise_info(info: ExperimentInfo, results: Sequence[ScenarioResult]) -> ExperimentInfo:
    """Fingerprints and iteration count from the results actually recorded."""
    config_h, criteria_h, topic_h = experiment_fingerprints(results)
    iterations = max([info.iterations, *(r.iteration for r in results)]) if results else info.iterations
    return info.model_copy(
        update={
            "config_hash": config_h,
            "criteria_hash": criteria_h,
            "topic_graph_hash": topic_h,
            "iterations": iterations,
        }
    )


class Recorder:
    """One experiment in progress: ``add`` each result, then ``finalise`` once."""

    def __init__(
        self,
        results_dir: str | os.PathLike[str] = "results",
        name: str | None = None,
        tags: Sequence[str] = (),
        experiment_id: str | None = None,
        judge_provider: str | None = None,
        judge_model: str | None = None,
        simulator_provider: str | None = None,
        simulator_model: str | None = None,
        iterations: int = 1,
        judge_note: str | None = None,
        simulator_note: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.results_dir = Path(results_dir)
        # Git state is taken at the start: that is the code the scenarios run against.
        git = git_info(cwd)
        self.info = ExperimentInfo(
            id=experiment_id or new_experiment_id(),
            timestamp=utc_timestamp(),
            name=name,
            tags=list(tags),
            judge_provider=judge_provider,
            judge_model=judge_model,
            simulator_provider=simulator_provider,
            simulator_model=simulator_model,
            judge_note=judge_note,
            simulator_note=simulator_note,
            iterations=iterations,
            git_commit=git.commit,
            git_branch=git.branch,
            git_dirty=git.dirty,
        )
        self.results: list[ScenarioResult] = []
        self.path: Path | None = None
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.journal = journal_path(self.results_dir, self.info.id)
        # The header lets recover() rebuild the identity of the run without the Recorder object.
        # Open for the whole run; its lock (released by the OS if the run dies) marks it in use.
        self._journal: Any = open(self.journal, "a", encoding="utf-8")  # noqa: SIM115
        fcntl.flock(self._journal.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        _append_line(self._journal, {"kind": "header", "info": self.info.model_dump(mode="json")})
        os.fsync(self._journal.fileno())

    @property
    def experiment_id(self) -> str:
        return self.info.id

    def add(self, result: ScenarioResult) -> None:
        """Keep one result and journal it durably before returning."""
        self.results.append(result)
        _append_line(self._journal, {"kind": "result", "result": result.model_dump(mode="json")})

    def document(self, interrupted: bool = False) -> dict[str, Any]:
        """The experiment document as it would be written now."""
        info = _finalise_info(self.info, self.results).model_copy(update={"interrupted": interrupted})
        return build_document(info, self.results)

    def finalise(self, interrupted: bool = False) -> Path:
        """Write ``results/<id>.json`` atomically and remove the journal."""
        self.path = write_document(self.document(interrupted=interrupted), self.results_dir)
        self.journal.unlink(missing_ok=True)
        self._journal.close()
        return self.path


def _read_journal(path: Path) -> tuple[ExperimentInfo | None, list[ScenarioResult]]:
    info: ExperimentInfo | None = None
    results: list[ScenarioResult] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
                if record.get("kind") == "header":
                    info = ExperimentInfo.model_validate(record["info"])
                elif record.get("kind") == "result":
                    results.append(ScenarioResult.model_validate(record["result"]))
            except (ValueError, KeyError, AttributeError):
                # A line torn by the crash itself: everything before it is still good.
                continue
    return info, results


def recover(journal: str | os.PathLike[str]) -> Path:
    """Write the experiment file from a journal left behind, marked ``"interrupted": true``.

    The file goes next to the journal; the journal is removed once the file is safely written.
    """
    path = Path(journal)
    info, results = _read_journal(path)
    if info is None:
        stem = path.name.removeprefix(".").removesuffix(_JOURNAL_SUFFIX) or new_experiment_id()
        info = ExperimentInfo(id=stem, timestamp=utc_timestamp())
    info = _finalise_info(info, results)
    doc = build_document(info.model_copy(update={"interrupted": True}), results)
    out = write_document(doc, path.parent)
    path.unlink(missing_ok=True)
    return out
