"""Carrying soft verdicts that finish after their scenario to the controller's recorder.

A finished scenario's :class:`fabtest.engine.verdicts.LateVerdicts` calls back on a judge thread
once its verdicts are in; the :class:`LateChannel` of the process keeps them as plain data (a
:class:`fabtest.experiment.late.LateVerdict` dump) until the next report of any test leaves
this process, which carries them in ``user_properties`` (``fabtest_late``), the way results
travel, so the same path works sequentially and under pytest-xdist. At the end of the session a
process waits for its verdicts still out (unless the run was interrupted) and hands over the
rest: sequentially straight to the recorder, on an xdist worker in ``workeroutput``, which the
controller reads in ``pytest_testnodedown``.
"""

from __future__ import annotations

import threading
from typing import Any

from fabtest.engine.verdicts import LateVerdicts
from fabtest.experiment.late import LateCheck, LateVerdict
from fabtest.experiment.model import CheckRecord, UsageRecord

__all__ = ["LATE_PROPERTY", "LateChannel"]

#: the report's user property (and the worker's ``workeroutput`` key) carrying late verdicts
LATE_PROPERTY = "fabtest_late"


class LateChannel:
    """This process's late verdicts: the scenarios still waiting for some, and those in but not yet sent."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._waiting: set[int] = set()
        self._ready: list[dict[str, Any]] = []
        #: node id -> the tries of a run its late fidelity review voided, with tries left: to run again
        self._voided: dict[str, list[dict[str, Any]]] = {}

    def expect(self, nodeid: str, late: LateVerdicts) -> None:
        """Collect ``late`` for the scenario ``nodeid`` when its verdicts are in."""
        with self._changed:
            self._waiting.add(id(late))
        late.on_complete(lambda done: self._arrived(nodeid, done))

    def _arrived(self, nodeid: str, late: LateVerdicts) -> None:
        payload: dict[str, Any] | None = None
        try:
            payload = _payload(nodeid, late)
        finally:  # a verdict that cannot be sent stays a placeholder; nobody waits for it forever
            with self._changed:
                if payload is not None:
                    self._ready.append(payload)
                    review = late.review
                    if review is not None and payload.get("tries") and review.attempts_left \
                            and not payload["tries"][-1].get("valid"):
                        self._voided[nodeid] = payload["tries"]
                self._waiting.discard(id(late))
                self._changed.notify_all()

    @property
    def outstanding(self) -> int:
        """Scenarios with a soft verdict still with the judge."""
        with self._changed:
            return len(self._waiting)

    def take(self) -> list[dict[str, Any]]:
        """The verdicts in since the last call (each a LateVerdict as plain data)."""
        with self._changed:
            ready, self._ready = self._ready, []
        return ready

    def take_voided(self) -> dict[str, list[dict[str, Any]]]:
        """The runs voided by a late fidelity review since the last call, to run again (node id -> its tries)."""
        with self._changed:
            voided, self._voided = self._voided, {}
        return voided

    def wait(self, timeout: float | None = None) -> bool:
        """Until no verdict is out (True) or ``timeout`` seconds passed (False); Ctrl-C interrupts it."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._waiting, timeout)


def _payload(nodeid: str, late: LateVerdicts) -> dict[str, Any]:
    if late.review is not None:
        late.review.problems()  # done: completes its try's entry
    verdict = LateVerdict(
        nodeid=nodeid,
        checks=[LateCheck(index=index, check=CheckRecord.model_validate(check.to_dict()))
                for index, check in late.checks()],
        usage={role: UsageRecord.model_validate(usage.to_dict()) for role, usage in late.usage.items()},
        tries=[dict(t) for t in late.tries] if late.review is not None else None,
    )
    return verdict.model_dump(mode="json")
