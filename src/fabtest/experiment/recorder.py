"""Collects scenario results during a run and writes the experiment file at the end.

Every result is also appended to a journal (``results/.<id>.journal.jsonl``, flushed) the moment
it arrives, so a crash or a killed CI job loses nothing: ``recover`` turns a journal left behind
into an experiment file marked ``"interrupted": true``. No pytest imports: the plugin drives this.

A journal is read as bytes, line by line: every complete line is kept and a line torn by the
crash (cut inside a multi-byte character, say) is dropped, so one damaged journal costs its torn
tail, never the other journals. Each line is validated against the models (the header carries
``format_version``); the experiment id must be a plain name (no path characters), so a forged
header cannot make ``recover`` write outside the results directory.

Memory stays small however many results arrive: each result's experiment entry is spilled to disk
as it arrives and only a brief of it stays in memory (experiment/spool.py); the experiment file is
written by copying the spilled entries. ``recover`` streams a journal through the same spool.

Soft verdicts that finish after their scenario's result are journalled as ``"kind": "late"`` and
merged into their spilled results as they arrive (:mod:`fabtest.experiment.late`); a placeholder
never given its verdict is settled as ``skipped`` with the reason when the experiment is written.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabtest._internal import redaction
from fabtest._internal.files import TEXT_ERRORS, remove_stale_temp_files
from fabtest.errors import JournalError, UsageError
from fabtest.experiment.attribution import Rejudge
from fabtest.experiment.export import costing_of, document_path, new_experiment_id
from fabtest.experiment.gitinfo import git_info
from fabtest.experiment.late import (
    INTERRUPTED,
    LATE_KIND,
    NEVER_ARRIVED,
    LateVerdict,
    has_pending,
    merge,
    settle,
)
from fabtest.experiment.model import ExperimentInfo, ScenarioResult
from fabtest.experiment.spool import ResultKey, Spool, result_key, spill_path

__all__ = [
    "EXPERIMENT_ID_HELP",
    "ExperimentInUse",
    "JOURNAL_FORMAT_VERSION",
    "JournalError",
    "NothingToRecover",
    "Recorder",
    "cannot_save_message",
    "check_experiment_id",
    "journal_path",
    "pending_journals",
    "recover",
    "recover_pending",
    "utc_timestamp",
    "valid_experiment_id",
]

_JOURNAL_SUFFIX = ".journal.jsonl"
JOURNAL_FORMAT_VERSION = 1
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
EXPERIMENT_ID_HELP = "use letters, digits, '_', '.' and '-' (at most 128; it names results/<id>.json)"


class ExperimentInUse(UsageError):
    """Another live run is recording an experiment with the same id."""


class NothingToRecover(JournalError):
    """A journal with no scenario result (the run died before one finished): no experiment to write.

    An empty experiment would list a run that recorded nothing among the real ones, and a header-only
    journal is the whole record of that run's configuration, so the journal is left as it is."""


def valid_experiment_id(experiment_id: object) -> bool:
    """A plain file name: no '/', no '..', no leading dot, nothing a shell or a path would interpret."""
    return isinstance(experiment_id, str) and _ID.fullmatch(experiment_id) is not None


def check_experiment_id(experiment_id: str | None, where: str) -> None:
    """UsageError naming ``where`` when a given id is not a plain name."""
    if experiment_id is not None and not valid_experiment_id(experiment_id):
        raise UsageError(f"{where} {experiment_id!r}: {EXPERIMENT_ID_HELP}")


def utc_timestamp() -> str:
    """Now, as ISO 8601 UTC with a ``Z`` (docs/reference/experiment-json.md)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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


def _open_journal(path: Path) -> Any:
    """The journal, opened to append without following a link: a journal name that is a symlink
    (to /etc/passwd, say) is an error, never a file written outside the results directory."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        if path.is_symlink():
            raise OSError(errno.ELOOP, "is a link, not a journal fabtest wrote: remove it", str(path)) from None
        raise exc from None
    return open(fd, "a", encoding="utf-8", errors=TEXT_ERRORS)  # closed by the Recorder


def _append_line(handle: Any, record: dict[str, Any]) -> None:
    """One JSON line, flushed to the OS: it survives the process being killed (not a power cut)."""
    handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    handle.flush()


def _unhashed(info: ExperimentInfo) -> ExperimentInfo:
    """Fingerprints are computed from the results recorded, never taken from a journal header."""
    return info.model_copy(update={"config_hash": "", "criteria_hash": "", "topic_graph_hash": ""})


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
        prices: dict[str, dict[str, float]] | None = None,
        shard: str | None = None,
        judge_settings: dict[str, Any] | None = None,
        simulator_settings: dict[str, Any] | None = None,
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
            judge_settings=dict(judge_settings or {}),
            simulator_settings=dict(simulator_settings or {}),
            iterations=iterations,
            git_commit=git.commit,
            git_branch=git.branch,
            git_dirty=git.dirty,
            prices=dict(prices or {}),
            shard=shard,
        )
        check_experiment_id(self.info.id, "experiment id")
        self.path: Path | None = None
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.journal = journal_path(self.results_dir, self.info.id)
        # The header lets recover() rebuild the identity of the run without the Recorder object.
        # Open for the whole run; its lock (released by the OS if the run dies) marks it in use.
        self._journal: Any = _open_journal(self.journal)
        try:
            fcntl.flock(self._journal.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._journal.close()
            raise ExperimentInUse(in_use_message(self.results_dir, self.info.id)) from None
        if self.journal.stat().st_size:  # a journal left by a killed run with this id: recover it first
            self._journal.close()
            try:
                recover(self.journal)
            except NothingToRecover:  # that run recorded no scenario: this run takes its id over
                os.truncate(self.journal, 0)
            self._journal = _open_journal(self.journal)
            fcntl.flock(self._journal.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        _append_line(self._journal, {"kind": "header", "format_version": JOURNAL_FORMAT_VERSION,
                                     "info": self.info.model_dump(mode="json")})
        os.fsync(self._journal.fileno())
        self._spool = Spool(self.results_dir, self.info.id, costing_of(self.info))
        self._late = _LateMerge(self._spool)

    @property
    def experiment_id(self) -> str:
        return self.info.id

    @property
    def results(self) -> list[ScenarioResult]:
        """Briefs of the results recorded so far (no transcripts: see experiment/spool.py)."""
        self._late.flush()
        return self._spool.results

    def index_rows(self) -> list[list[Any]]:
        """The index rows of the results so far (``Spool.index_rows``)."""
        self._late.flush()
        return self._spool.index_rows()

    def set_until_decided(self, record: dict[str, Any]) -> None:
        """What ``--fabtest-until-decided`` did, written as ``experiment.until_decided``."""
        self.info = self.info.model_copy(update={"until_decided": record})
        self._spool.forget_head()

    def nodeids(self) -> list[tuple[str, str]]:
        """``(scenario id, node id)`` of the results so far."""
        self._late.flush()
        return self._spool.scenario_nodeids()

    def set_rejudge(self, rejudge: Rejudge | None) -> None:
        """Let the flakiness attribution ask the judge again about a flaky scenario's deciding checks
        (``[tool.fabtest.judge] attribution_rejudge``; experiment/attribution.py)."""
        self._spool.rejudge = rejudge

    def set_order(self, nodeids: list[str]) -> None:
        """The collection's node ids, in order: the experiment lists results in this order (then by
        scenario id and iteration), whatever order they finished in."""
        self._spool.order = {nodeid: i for i, nodeid in enumerate(nodeids)}

    def add(self, result: ScenarioResult) -> None:
        """Journal one result (secrets redacted) durably before returning, and spill its entry."""
        dumped = result.model_dump(mode="json")
        if redaction.secrets():
            dumped = redaction.redact_obj(dumped)
            result = ScenarioResult.model_validate(dumped)
        _append_line(self._journal, {"kind": "result", "result": dumped})
        self._late.add(result, dumped)

    def update_result(self, key: ResultKey, change: Callable[[ScenarioResult], ScenarioResult]) -> bool:
        """Late update of a result already added, found by ``(nodeid, iteration)``: ``change``
        gets the whole result and returns the new one (late soft verdicts are merged this way,
        before ``finalise``). Journalling the change is the caller's. False for an unknown key."""
        return self._spool.update(key, change)

    # -- late soft verdicts (fabtest.experiment.late) ---------------------------------------------
    def add_late(self, verdict: LateVerdict) -> None:
        """Journal soft verdicts that finished after their scenario's result and merge them into it
        (held until the result arrives, if it has not yet)."""
        if redaction.secrets():
            verdict = LateVerdict.model_validate(redaction.redact_obj(verdict.model_dump(mode="json")))
        _append_line(self._journal, {"kind": LATE_KIND, LATE_KIND: verdict.model_dump(mode="json")})
        self._late.verdict(verdict)

    def document(self, interrupted: bool = False) -> dict[str, Any]:
        """The experiment as the console summary reads it: every section as the file has it, and
        as ``scenario_results`` only the entries the summary looks into (the file has them all)."""
        self._late.settle(INTERRUPTED if interrupted else NEVER_ARRIVED)
        return self._spool.summary_document(self._final_info(interrupted))

    def _final_info(self, interrupted: bool) -> ExperimentInfo:
        return _unhashed(self.info).model_copy(update={"interrupted": interrupted})

    def _add_journaled_but_unspooled(self) -> None:
        """An interrupt that landed after a result's journal line and before its entry was spooled
        left it out of the spool, and the journal is removed once the file is written: add such a
        result back from the journal, the record of what finished (the window is a few lines wide,
        but a loaded machine hit it)."""
        self._journal.flush()
        for kind, value in _journal_records(self.journal):
            if kind == "result" and not self._spool.holds(result_key(value)) and not self._late.holding(value):
                self._late.add(value)

    def discard(self) -> None:
        """Nothing was recorded: release the id and remove the journal, write no experiment."""
        self._spool.close()
        self.journal.unlink(missing_ok=True)
        self._journal.close()

    def finalise(self, interrupted: bool = False) -> Path:
        """Write ``results/<id>.json`` atomically and remove the journal (``document`` still works)."""
        if interrupted:
            self._add_journaled_but_unspooled()
        self._late.settle(INTERRUPTED if interrupted else NEVER_ARRIVED)
        try:
            self.path = self._spool.write(self._final_info(interrupted), self.results_dir)
        except BaseException:  # a full disk, say: the journal stays, unlocked, for `fabtest recover`
            self._spool.close()
            self._journal.close()
            raise
        self._spool.close()
        self.journal.unlink(missing_ok=True)
        self._journal.close()
        return self.path


def cannot_save_message(exc: OSError, journal: Path | None) -> str:
    """One line for a write that failed (a full disk): what failed, and where the finished
    scenarios still are."""
    where = f" ({exc.filename})" if exc.filename else ""
    kept = (f"; the scenarios finished so far are in {journal}: free space, then run `fabtest recover`"
            if journal is not None and journal.exists() else "")
    return f"cannot save the experiment: {exc.strerror or exc}{where}{kept}"


def in_use_message(results_dir: Path, experiment_id: str) -> str:
    return (f"experiment id {experiment_id!r} is in use by another run that is still going "
            f"({journal_path(results_dir, experiment_id)} is locked); wait for it or choose another id")


def experiment_id_in_use(results_dir: str | os.PathLike[str], experiment_id: str) -> bool:
    """A live run holds the journal of this id (checked before any scenario runs)."""
    journal = journal_path(results_dir, experiment_id)
    return journal.exists() and _locked(journal)


def _journal_records(path: Path) -> Iterator[tuple[str, Any]]:
    """``("header", ExperimentInfo)``, ``("result", ScenarioResult)`` and ``("late", LateVerdict)`` of
    every complete, valid line.

    Read line by line as bytes (never the whole file); a line with no newline was torn by the
    crash and is dropped, a line damaged in place is skipped and the others still count.
    """
    try:
        handle = open(path, "rb")  # closed by the with below
    except OSError as exc:
        raise JournalError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                break
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                continue
            if not isinstance(record, dict):
                continue
            if record.get("kind") == "header":
                version = record.get("format_version", 1)
                if version != JOURNAL_FORMAT_VERSION:
                    raise JournalError(f"{path}: line {number}: format_version: {version!r} is not supported "
                                       f"(this fabtest reads version {JOURNAL_FORMAT_VERSION}); recover it with the "
                                       "fabtest that wrote it")
                try:
                    yield "header", ExperimentInfo.model_validate(record.get("info"))
                except ValidationError:
                    continue
            elif record.get("kind") == "result":
                try:
                    yield "result", ScenarioResult.model_validate(record.get("result"))
                except ValidationError:
                    continue
            elif record.get("kind") == LATE_KIND:
                try:
                    yield LATE_KIND, LateVerdict.model_validate(record.get(LATE_KIND))
                except ValidationError:
                    continue


def recover(journal: str | os.PathLike[str]) -> Path:
    """Write the experiment file from a journal left behind, marked ``"interrupted": true``.

    The file goes next to the journal (never elsewhere: the id must be a plain name); the journal
    is removed once the file is safely written. An experiment file that already has the journal's
    id is never overwritten: the partial one is written as ``<id>.recovered`` (see
    :func:`_free_id`). Raises :class:`JournalError` when it cannot be
    (:class:`NothingToRecover` when the journal holds no scenario result).
    """
    path = Path(journal)
    _check_journal_file(path)
    stem = path.name.removeprefix(".").removesuffix(_JOURNAL_SUFFIX)
    fallback = stem if valid_experiment_id(stem) else new_experiment_id()
    info: ExperimentInfo | None = None
    spool: Spool | None = None
    late: _LateMerge | None = None
    read = results = 0
    try:
        for kind, value in _journal_records(path):
            read += 1
            results += kind == "result"
            if kind == "header" and spool is None:
                info = value if valid_experiment_id(value.id) else value.model_copy(update={"id": fallback})
                continue
            if spool is None or late is None:
                info = info or ExperimentInfo(id=fallback, timestamp=utc_timestamp())
                spool = Spool(path.parent, info.id, costing_of(info))
                late = _LateMerge(spool)
            if kind == "result":
                late.add(value)
            elif kind == LATE_KIND:
                late.verdict(value)
        if not read and path.stat().st_size:
            raise JournalError(f"{path}: not one journal line could be read (random bytes, or not a fabtest "
                               "journal); left as it is, no experiment written")
        if not results:
            raise NothingToRecover(f"{path}: nothing to recover: its run stopped before any scenario finished "
                                   f"(the journal holds {'only its header' if read else 'nothing'}); left as it "
                                   "is, no experiment written (delete it once you no longer need it)")
        info = info or ExperimentInfo(id=fallback, timestamp=utc_timestamp())
        if spool is None:  # not ``spool or``: a spool holding no entry yet is falsy (its len)
            spool = Spool(path.parent, info.id, costing_of(info))
        if late is not None:
            late.settle(INTERRUPTED)  # a journal left behind: the run was interrupted
        info = info.model_copy(update={"id": _free_id(path.parent, info.id)})
        out = spool.write(_unhashed(info).model_copy(update={"interrupted": True}), path.parent)
    except OSError as exc:
        raise JournalError(f"{path}: cannot write the recovered experiment ({exc.strerror or exc})") from None
    finally:
        if spool is not None:
            spool.close()
    path.unlink(missing_ok=True)
    spill_path(path.parent, stem).unlink(missing_ok=True)  # the dead run's own spill, when it left one
    return out


def _check_journal_file(path: Path) -> None:
    """A journal is a regular file fabtest wrote in the results directory: a link (to /etc/passwd, or
    to another project's journal) or anything else is refused, and left as it is."""
    if path.is_symlink():
        raise JournalError(f"{path}: is a link (to {os.readlink(path)}), not a journal fabtest wrote; left as it "
                           "is, no experiment written")
    if not path.is_file():
        raise JournalError(f"{path}: is not a regular file; left as it is, no experiment written")


_MAX_RECOVERED_NAMES = 1000


def _free_id(results_dir: Path, experiment_id: str) -> str:
    """``experiment_id`` when no experiment file has it yet, else the first free
    ``<id>.recovered``, ``<id>.recovered-2``, ...: a partial experiment never replaces a file that
    is already there (a finished run, a stray journal with a finished run's id, a killed rerun)."""
    if not document_path(results_dir, experiment_id).exists():
        return experiment_id
    base = experiment_id[:100]
    for n in range(1, _MAX_RECOVERED_NAMES + 1):
        candidate = f"{base}.recovered" if n == 1 else f"{base}.recovered-{n}"
        if not document_path(results_dir, candidate).exists():
            return candidate
    return new_experiment_id()


def recover_pending(results_dir: str | os.PathLike[str]) -> list[tuple[Path, Path | None, str]]:
    """Recover every journal left behind and remove stale temp files; one journal never stops the rest.

    Returns ``(journal, experiment file or None, error line or "")`` per journal.
    """
    remove_stale_temp_files(results_dir)
    done: list[tuple[Path, Path | None, str]] = []
    for journal in pending_journals(results_dir):
        try:
            done.append((journal, recover(journal), ""))
        except JournalError as exc:
            done.append((journal, None, str(exc)))
        except Exception as exc:  # a damaged journal must not stop the others
            done.append((journal, None, f"{journal}: cannot recover ({type(exc).__name__}: {exc})"))
    return done


class _LateMerge:
    """Late soft verdicts into the spooled results. A result with placeholders still waiting is held
    (in memory, a few per scenario in flight) until its verdicts come, then spooled once: merging
    into a spooled result reads it back and writes its entry again, which at 1,000 scenarios at
    once was a tenth of the main thread's work. Verdicts whose result has not arrived yet wait for
    it; what is still missing is settled once, when the run ends (or someone reads the results)."""

    def __init__(self, spool: Spool) -> None:
        self._spool = spool
        self._early: dict[str, list[LateVerdict]] = {}  # by node id: verdicts whose result is not here yet
        self._keys: dict[str, ResultKey] = {}  # node id -> key of its result
        self._waiting: set[ResultKey] = set()  # spooled results with a placeholder still waiting
        self._held: dict[ResultKey, ScenarioResult] = {}  # results waiting for their verdicts, not spooled yet

    def add(self, result: ScenarioResult, dumped: dict[str, Any] | None = None) -> None:
        early = self._early.pop(result.nodeid, [])
        if early:
            result, dumped = merge(result, early), None
        key = result_key(result)
        if result.nodeid:
            self._keys[result.nodeid] = key
        if not result.nodeid:  # no verdict can find it (fabtest.run): spooled as it is
            self._spool.add(result, dumped)
            return
        self._waiting.discard(key)
        self._held.pop(key, None)  # a run voided by its late fidelity review, run again: this run replaces it
        if has_pending(result):
            self._held[key] = result
            return
        self._spool_result(key, result, dumped)

    def _spool_result(self, key: ResultKey, result: ScenarioResult, dumped: dict[str, Any] | None) -> None:
        if has_pending(result):
            self._waiting.add(key)
        if self._spool.holds(key):  # the voided run's result was spooled: this run replaces it
            self._spool.update(key, lambda _voided: result)
            return
        self._spool.add(result, dumped)

    def verdict(self, verdict: LateVerdict) -> None:
        key = self._keys.get(verdict.nodeid)
        if key is None:
            self._early.setdefault(verdict.nodeid, []).append(verdict)
            return
        held = self._held.get(key)
        if held is not None:
            merged = merge(held, [verdict])
            if not has_pending(merged):
                del self._held[key]
                self._spool_result(key, merged, None)
            else:
                self._held[key] = merged
            return

        def change(result: ScenarioResult) -> ScenarioResult:
            merged = merge(result, [verdict])
            if not has_pending(merged):
                self._waiting.discard(key)
            return merged

        self._spool.update(key, change)

    def holding(self, result: ScenarioResult) -> bool:
        """``result``'s run is held here, waiting for its verdicts."""
        return result_key(result) in self._held

    def flush(self) -> None:
        """Spool the results still held: someone reads the results (their verdicts merge in later)."""
        held, self._held = self._held, {}
        for key, result in held.items():
            self._spool_result(key, result, None)

    def settle(self, missing: str) -> None:
        held, self._held = self._held, {}
        for key, result in held.items():
            self._spool_result(key, settle(result, missing), None)
        for key in sorted(self._waiting):
            self._spool.update(key, lambda result: settle(result, missing))
        self._waiting.clear()
