"""Soft verdicts finish after their scenario: the conversation never waits for a ``should``.

Soft LLM checks (``should`` criteria, grounding, intent, goal) run on the session's judge pool.
When a scenario finishes, :meth:`ScenarioState.finish` takes the verdicts already in and leaves a
placeholder (status ``skipped``, ``data.pending``; see :mod:`fabtest.experiment.late`) for each
one still with the judge; those are gathered in a :class:`LateVerdicts`, which calls back once
every one of them is in, with the judge usage they cost. The front end carries them to the
experiment (docs/explanation/soft-verdicts.md: how soft evaluations finish after their scenario).

A judge that fails on a soft check (an outage, garbage after the retries, a timeout) cannot fail
a test that has already ended, and should not fail one still running: the check is recorded as
``skipped`` with ``judge failed: ...`` as its reason and ``data.judge_error``, outside every rate.
Hard ``must`` checks never come here: they block their step and an outage is the scenario's
``error``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, cast

from fabtest.conversation import Check, TokenUsage
from fabtest.experiment.late import PENDING, PENDING_DETAILS

__all__ = ["LateVerdicts", "Pending", "Review", "judge_failed", "placeholder"]

_REASON_LIMIT = 500


def placeholder(kind: str, label: str, turn: int | None) -> Check:
    """What a soft check's result says while its verdict is still with the judge."""
    return Check(kind, "should", label, "skipped", turn, PENDING_DETAILS, {PENDING: True})


def judge_failed(check: Check, exc: BaseException) -> Check:
    """A soft check whose judge call failed for good: skipped, with the judge's error as the reason."""
    reason = " ".join(str(exc).split())[:_REASON_LIMIT] or type(exc).__name__  # one line: a check's details
    return Check(check.type, check.mode, check.criterion, "skipped", check.turn, f"judge failed: {reason}",
                 {"judge_error": type(exc).__name__})


class Pending:
    """One soft check being judged in the background: a background call's verdict, or one of a batch's."""

    def __init__(self, future: Future[Any], index: int | None, placeholder: Check) -> None:
        self.future = future
        self.index = index
        self.placeholder = placeholder

    def done(self) -> bool:
        return self.future.done()

    def check(self) -> Check:
        """The verdict (waits for it); a judge failure becomes the check skipped with the reason."""
        try:
            value = self.future.result()
        except Exception as exc:  # whatever the judge raised is this soft check's reason
            return judge_failed(self.placeholder, exc)
        return cast(Check, value if self.index is None else value[self.index])


class Review:
    """The simulator-fidelity review of one simulated conversation, made in the background while the
    scenario (and the next one) goes on: the judge's answer completes the try's ``entry``."""

    def __init__(self, future: Future[Any], entry: dict[str, Any], attempts_left: int) -> None:
        self.future = future
        self.entry = entry
        #: tries the run still has when this one is voided (``simulator_retries``): 0, it is not run again
        self.attempts_left = attempts_left

    def problems(self) -> list[str]:
        """Waits for the review; what it found (also written into ``entry``, once)."""
        try:
            found = self.future.result()
        except Exception as exc:  # a bug or an outage in the review must not void the run
            self.entry["note"] = f"not reviewed by the judge ({type(exc).__name__}); deterministic checks only"
            return []
        problems = list(found.problems)
        self.entry.update(valid=not problems, problems=problems, judged=found.judged,
                          **({"note": found.note} if found.note else {}))
        return problems


class LateVerdicts:
    """The soft checks of a finished scenario still with the judge, by their index in its evaluations,
    and its simulator-fidelity review when that was still going on (``review``, ``tries``: every try
    of the run, the reviewed one among them)."""

    def __init__(self, pending: list[tuple[int, Pending]], *, review: Review | None = None,
                 tries: list[dict[str, Any]] | None = None) -> None:
        self.pending = pending
        self.review = review
        self.tries = tries if tries is not None else []
        #: judge usage charged after the scenario's result was built (the state charges it here)
        self.usage: dict[str, TokenUsage] = {}
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[LateVerdicts], None]] = []
        self._complete = threading.Event()
        futures = {id(p.future): p.future for _, p in pending}
        if review is not None:
            futures[id(review.future)] = review.future
        self._left = len(futures)
        for future in futures.values():  # set _left first: a done future calls back at once
            future.add_done_callback(self._one_done)

    def charge(self, role: str, usage: TokenUsage) -> None:
        """Add a background call's cost (the state holds its usage lock while calling)."""
        self.usage.setdefault(role, TokenUsage()).add(usage)

    def _one_done(self, _future: Future[Any]) -> None:
        with self._lock:
            self._left -= 1
            if self._left:
                return
            self._complete.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def on_complete(self, callback: Callable[[LateVerdicts], None]) -> None:
        """Call ``callback(self)`` once every verdict is in (at once if they already are), on the judge's thread."""
        with self._lock:
            if not self._complete.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def wait(self, timeout: float | None = None) -> bool:
        return self._complete.wait(timeout)

    def checks(self) -> list[tuple[int, Check]]:
        """Every verdict with its index in the scenario's evaluations (waits for them)."""
        return [(index, pending.check()) for index, pending in self.pending]
