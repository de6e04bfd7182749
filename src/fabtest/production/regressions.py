"""Every logged conversation as a scripted regression feature (``fabtest import LOGS --all --out DIR``).

Each conversation is written as ``fabtest import FILE`` writes one (:func:`fabtest.authoring.feature_text.feature_text`:
the user's lines replayed, the agent's tool calls asserted as ``must call`` steps to review), after
personal data is masked. Word-for-word duplicates (the same user lines, replies and calls) are
written once. Conversations that failed a ``must`` in a scored experiment (``--failing-in EXP``)
come first, numbered ``0001_...`` after the features already in the folder (each feature is written
as its conversation is read: memory stays flat); a file that exists is never overwritten. Which
feature holds which conversation (and its content hash) is kept in
``<results>/production/imported.jsonl``: importing the same logs again writes only what is new,
and ``fabtest view`` links a failing production run to its regression scenario.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fabtest._internal import redaction
from fabtest._internal.redaction import PersonalData
from fabtest.authoring.feature_text import feature_text, write_feature
from fabtest.authoring.transcripts import RecordedConversation, RecordedTurn
from fabtest.experiment.stable_id import stable_id
from fabtest.production.logged import LoggedConversation
from fabtest.production.selection import masked

__all__ = ["ImportReport", "import_all", "imported_index"]


@dataclass
class ImportReport:
    written: list[tuple[str, Path, bool]] = field(default_factory=list)  # (conversation, feature, failing)
    duplicates: int = 0
    existing: list[Path] = field(default_factory=list)
    already_imported: int = 0


def _stem(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:50] or "conversation"


def _recorded(conversation: LoggedConversation) -> RecordedConversation:
    first_line = conversation.turns[0].user.split("\n")[0][:60]
    return RecordedConversation(
        name=f"{conversation.id}: {first_line}", source_format=conversation.format,
        turns=[RecordedTurn(t.user, t.agent, list(t.tool_calls)) for t in conversation.turns],
        origin=(f"conversation {conversation.id}" + (f" of {conversation.timestamp}" if conversation.timestamp else "")
                + "; the tool calls are what the agent did in production: review each one before keeping it"))


def _index_rows(results_dir: str | Path) -> list[dict[str, str]]:
    path = Path(results_dir) / "production" / "imported.jsonl"
    rows = []
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                rows.append({"conversation": str(row["conversation"]), "feature": str(row["feature"]),
                             "hash": str(row.get("hash", "")), "scenario_id": str(row.get("scenario_id", ""))})
            except (ValueError, KeyError, TypeError):
                continue
    except OSError:
        pass
    return rows


def imported_index(results_dir: str | Path) -> dict[str, dict[str, str]]:
    """conversation id -> ``{"feature": path, "scenario_id": its stable id}`` (the latest import wins)."""
    return {row["conversation"]: row for row in _index_rows(results_dir)}


def _next_number(out_dir: Path) -> int:
    numbers = [int(p.name[:4]) for p in out_dir.glob("[0-9][0-9][0-9][0-9]_*.feature")] if out_dir.is_dir() else []
    return max(numbers, default=0) + 1


def import_all(conversations: Iterable[LoggedConversation], out_dir: Path, *, mask: PersonalData,
               failing: set[str], results_dir: str | Path, agent: str | None = None) -> ImportReport:
    """Write one feature per distinct conversation into ``out_dir`` as it is read, the failing ones
    numbered first (numbers kept for them, whether or not each is in the logs); nothing but the
    hashes of the conversations seen is held in memory."""
    report = ImportReport()
    done = {(row["conversation"], row["hash"]) for row in _index_rows(results_dir) if Path(row["feature"]).exists()}
    seen: set[str] = set()
    start = _next_number(out_dir)
    numbers = {"failing": start, "other": start + len(failing)}
    index = Path(results_dir) / "production" / "imported.jsonl"
    index.parent.mkdir(parents=True, exist_ok=True)
    with index.open("a", encoding="utf-8") as handle:
        for raw in conversations:
            conversation = masked(raw, mask)
            digest = conversation.content_hash()
            if digest in seen:
                report.duplicates += 1
                continue
            seen.add(digest)
            if (conversation.id, digest) in done:
                report.already_imported += 1
                continue
            kind = "failing" if conversation.id in failing else "other"
            path = out_dir / f"{numbers[kind]:04d}_{_stem(conversation.id)}.feature"
            numbers[kind] += 1
            if path.exists():
                report.existing.append(path)
                continue
            recorded = _recorded(conversation)
            write_feature(path, redaction.redact(feature_text(recorded, source=conversation.source, agent=agent)))
            report.written.append((conversation.id, path, kind == "failing"))
            name = " ".join(recorded.name.split())  # the Feature's and the Scenario's name, as feature_text writes
            handle.write(json.dumps({"conversation": conversation.id, "feature": str(path), "hash": digest,
                                     "scenario_id": stable_id(name, None, name)}) + "\n")
            handle.flush()
    report.written.sort(key=lambda row: row[1].name)
    return report
