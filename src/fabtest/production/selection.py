"""Which logged conversations a score run judges: new ones (not scored before), since a time, a sample.

Personal data is masked first (``[tool.fabtest.redact]``), so the judge, the state and the results
only ever see the masked text. A sample is reproducible: a conversation is in a ``10%`` sample when
the hash of ``seed`` and its id falls in the first tenth, whatever the order of the files; ``200``
keeps the 200 conversations with the smallest such hashes (those 200 are held in memory).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fabtest._internal.redaction import PersonalData
from fabtest.config.settings import Settings
from fabtest.production.logged import LoggedConversation, LoggedTurn
from fabtest.production.state import ScoredState

__all__ = ["Counts", "Sample", "mask_of", "masked", "parse_since", "select"]


@dataclass(frozen=True)
class Sample:
    """``--sample``: a fraction (``10%``) or a number of conversations (``200``)."""

    fraction: float | None = None
    count: int | None = None


@dataclass
class Counts:
    """What the selection left out, for the summary."""

    read: int = 0
    already_scored: int = 0
    before_since: int = 0
    not_sampled: int = 0
    formats: dict[str, int] = field(default_factory=dict)


def mask_of(settings: Settings) -> PersonalData:
    """The masking ``[tool.fabtest.redact]`` asks for."""
    redact = settings.redact
    return PersonalData([k for k in ("emails", "phones", "cards") if getattr(redact, k)], redact.patterns)


def masked(conversation: LoggedConversation, mask: PersonalData) -> LoggedConversation:
    """A copy with every text, argument and result masked."""
    turns = []
    for t in conversation.turns:
        calls = [type(c)(c.name, mask.obj(c.arguments), mask.obj(c.result), mask.obj(c.metadata)) for c in t.tool_calls]
        turns.append(LoggedTurn(mask.text(t.user), mask.text(t.agent), calls, t.duration_s, t.metadata))
    return LoggedConversation(conversation.id, turns, conversation.timestamp, conversation.source, conversation.format)


def parse_since(text: str) -> datetime:
    """``2026-01-31`` or ``2026-01-31T12:00:00Z`` (UTC when no zone is given); ValueError otherwise."""
    stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _rank(seed: int, conversation: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{conversation}".encode()).digest()[:8], "big")


def select(conversations: Iterable[LoggedConversation], *, mask: PersonalData, state: ScoredState | None,
           checks: str, since: datetime | None, sample: Sample | None, seed: int, counts: Counts
           ) -> Iterator[tuple[int, LoggedConversation]]:
    """``(iteration, masked conversation)`` for each conversation to judge, numbered from 1."""
    kept: list[tuple[int, int, LoggedConversation]] = []
    number = 0
    for raw in conversations:
        counts.read += 1
        conversation = masked(raw, mask)
        if state is not None and state.seen(conversation.id, conversation.content_hash(), checks):
            counts.already_scored += 1
            continue
        if since is not None and not (conversation.timestamp and parse_since(conversation.timestamp) >= since):
            counts.before_since += 1
            continue
        rank = _rank(seed, conversation.id)
        if sample is not None and sample.fraction is not None and rank >= sample.fraction * 2**64:
            counts.not_sampled += 1
            continue
        if sample is not None and sample.count is not None:
            number += 1
            item = (-rank, number, conversation)  # a max-heap of the smallest ranks
            if len(kept) < sample.count:
                heapq.heappush(kept, item)
            else:
                counts.not_sampled += 1
                heapq.heappushpop(kept, item)
            continue
        number += 1
        yield number, conversation
    for index, (_, _, conversation) in enumerate(sorted(kept, key=lambda k: (-k[0], k[1])), start=1):
        yield index, conversation
