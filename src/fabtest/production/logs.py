"""Every conversation in a set of log files, whatever tools exported them, told apart by content.

Each file's format is told from its first record (:data:`FORMATS`, tried in order); a file no
format fits is one line naming the formats tried and why each did not fit. The files' events go
through one :class:`~fabtest.production.grouping.Grouper`, so a conversation spread over several
files (a day per file) is one conversation. fabtest's own experiments are read as they are: one
conversation per scenario run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from fabtest.conversation import ToolCall
from fabtest.errors import UsageError
from fabtest.experiment.model import ToolCallRecord
from fabtest.production.assemble import assemble
from fabtest.production.formats import chat, langfuse, mlflow, otel
from fabtest.production.formats.base import Format
from fabtest.production.grouping import Grouper
from fabtest.production.logged import LoggedConversation, LoggedTurn
from fabtest.production.records import Record, records

__all__ = ["FORMATS", "FORMAT_LABELS", "detect", "read_logs"]

FORMATS: tuple[Format, ...] = (otel.OTLP, otel.PHOENIX, langfuse.LANGFUSE, mlflow.MLFLOW, chat.OPENAI)
FORMAT_LABELS = {**{f.name: f.label for f in FORMATS}, "fabtest": "fabtest experiments"}


def _is_experiment(value: object) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("experiment"), dict) and (
            "scenario_results" in value or "scenario_index" in value):
        return None
    return "no 'experiment' with 'scenario_results'"


def detect(value: object) -> tuple[str | None, list[str]]:
    """The name of ``value``'s format (a file's first record), or None and why each one did not fit."""
    reasons = []
    for name, probe in [*((f.name, f.probe) for f in FORMATS), ("fabtest", _is_experiment)]:
        why = probe(value)
        if why is None:
            return name, []
        reasons.append(f"{name} ({why})")
    return None, reasons


def _files(paths: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".ndjson"))
        elif path.exists():
            out.append(path)
        else:
            raise UsageError(f"{raw}: no such file or directory")
    if not out:
        raise UsageError(f"no log files (.json, .jsonl, .ndjson) in {' '.join(paths)}")
    return out


def _experiment(path: Path) -> Iterator[LoggedConversation]:
    from fabtest.experiment.reader import ExperimentFileError, load_document

    try:
        info, results, _doc = load_document(path, path.parent)
    except ExperimentFileError as exc:
        raise UsageError(str(exc)) from None
    for r in results:
        if not r.transcript:
            continue
        turns = [LoggedTurn(t.user, t.agent, [_call(c) for c in t.tool_calls], t.duration_s, dict(t.metadata))
                 for t in r.transcript]
        yield LoggedConversation(f"{info.id}/{r.id}/{r.iteration}", turns, timestamp=info.timestamp,
                                 source=f"{path} ({r.name}, run {r.iteration})", format="fabtest")


def _call(c: ToolCallRecord) -> ToolCall:
    return ToolCall(c.name, dict(c.arguments), c.result, dict(c.metadata))


def read_logs(paths: Sequence[str], *, warn: Callable[[str], None] = lambda _line: None,
              formats: dict[str, int] | None = None) -> Iterator[LoggedConversation]:
    """Every conversation with at least one user turn in ``paths`` (files or folders); ``formats``
    counts the files read per format. UsageError before anything is yielded for a file no format fits."""
    files = _files(paths)
    plan: list[tuple[Path, str]] = []
    for path in files:
        head = next(records(path), None)
        if head is None:
            warn(f"{path}: empty, skipped")
            continue
        name, reasons = detect(head.value)
        if name is None:
            raise UsageError(f"{head.where}: not a log format fabtest reads; tried {'; '.join(reasons)}")
        plan.append((path, name))
        if formats is not None:
            formats[name] = formats.get(name, 0) + 1
    for path, name in plan:
        if name == "fabtest":
            yield from (c for c in _experiment(path) if c.turns)
    spans = [(p, n) for p, n in plan if n != "fabtest"]
    if not spans:
        return
    by_name = {f.name: f for f in FORMATS}
    with Grouper() as grouper:
        for path, name in spans:
            _feed(path, by_name[name], grouper, warn)
        for conversation, events in grouper.conversations():
            logged = assemble(conversation, events, fmt=events[0].get("fmt", ""))
            if logged.turns:
                yield logged


def _feed(path: Path, fmt: Format, grouper: Grouper, warn: Callable[[str], None]) -> None:
    skipped: list[Record] = []
    for record in records(path):
        if fmt.probe(record.value) is not None:
            skipped.append(record)
            continue
        grouper.format = fmt.name
        fmt.read(record, grouper)
    if skipped:
        warn(f"{skipped[0].where}: {len(skipped)} record(s) not {fmt.label} like the rest of the file, skipped")
