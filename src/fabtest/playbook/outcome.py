"""What one playbook run gave: passed, failed (with the error that ended it) or skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fabtest.conversation import Check, Conversation
from fabtest.engine.outcome import Ending
from fabtest.errors import FabtestError, FailureType
from fabtest.experiment.model import ScenarioResult

__all__ = ["PlaybookOutcome"]


@dataclass
class PlaybookOutcome:
    """What one playbook run gave. Messages and ``result`` are already redacted."""

    name: str
    source: str
    mode: str  # "steps", "persona" or "steps+persona"
    passed: bool
    failure_type: FailureType | None = None  # from ``error``'s class (fabtest.errors)
    failure_message: str | None = None
    error: FabtestError | None = None  # what ended a failed run; its message is ``failure_message``
    skipped: bool = False
    skip_reason: str | None = None
    conversation: Conversation = field(default_factory=Conversation)
    checks: list[Check] = field(default_factory=list)
    trace_path: Path | None = None
    workspace_path: Path | None = None  # kept after a failure; None after a pass (removed)
    duration_s: float = 0.0
    result: ScenarioResult | None = None

    @property
    def status(self) -> Ending:
        return "skipped" if self.skipped else "passed" if self.passed else "failed"

    def fail(self, error: FabtestError) -> None:
        self.passed, self.error, self.failure_type, self.failure_message = False, error, error.failure_type, str(error)
