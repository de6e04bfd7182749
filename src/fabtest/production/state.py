"""What ``fabtest score`` has judged already, so scoring the same logs again judges nothing twice.

One JSON line per scored conversation in ``<results>/production/scored.jsonl``: its id, the hash
of its content (:meth:`LoggedConversation.content_hash`), the fingerprint of the checks it was
scored with, and the experiment that holds the verdicts. A conversation is skipped when all three
match: a session that went on (new content) or a changed feature (new checks) is scored again.
Lines are appended only after the experiment file is written, so an interrupted run marks nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from fabtest.production.features import ProductionScenario

__all__ = ["ScoredState", "checks_fingerprint"]


def checks_fingerprint(scenarios: Iterable[ProductionScenario]) -> str:
    """sha256 (16 hex) of the scenarios and their steps, as written."""
    body = [[s.feature_file, s.rule, s.name, s.gherkin_steps()] for s in scenarios]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:16]


class ScoredState:
    """The scored keys of one results directory, read once; :meth:`record` appends new ones."""

    def __init__(self, results_dir: str | os.PathLike[str]) -> None:
        self.path = Path(results_dir) / "production" / "scored.jsonl"
        self._keys: set[tuple[str, str, str]] = set()
        #: the experiment the last scored conversation went to: the score before this one
        self.latest_experiment: str | None = None
        try:
            with self.path.open(encoding="utf-8") as handle:
                for line in handle:
                    try:
                        row = json.loads(line)
                        self._keys.add((str(row["conversation"]), str(row["hash"]), str(row["checks"])))
                        self.latest_experiment = str(row.get("experiment") or "") or self.latest_experiment
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn last line (a crash mid-append) is read past
        except FileNotFoundError:
            pass

    def seen(self, conversation: str, content: str, checks: str) -> bool:
        return (conversation, content, checks) in self._keys

    def record(self, rows: Iterable[tuple[str, str]], checks: str, experiment: str) -> None:
        """Mark ``(conversation, content hash)`` pairs as scored into ``experiment``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            for conversation, content in rows:
                handle.write(json.dumps({"conversation": conversation, "hash": content, "checks": checks,
                                         "experiment": experiment}) + "\n")
                self._keys.add((conversation, content, checks))
            handle.flush()
            os.fsync(handle.fileno())
