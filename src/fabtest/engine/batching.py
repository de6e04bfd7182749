"""A scenario's checks in step order, and the judge calls that decide its LLM-backed ones.

Soft LLM criteria are batched: every criterion due on one turn goes to the judge in one call,
submitted in the background when the next turn starts (or the scenario ends), so the conversation
waits only for the agent and the simulator. Each check keeps the slot of the step that asked for
it, so the experiment lists checks in step order whatever order their verdicts arrive in; a slot
still with the judge holds a :class:`~fabtest.engine.verdicts.Pending`. The state of the scenario
(:class:`fabtest.engine.scenario.ScenarioState`) owns one :class:`CheckSlots` and tells it what is
due; the judge, the cost and a failed ``must`` stay the state's, passed in as callables.

A judge that fails for good is never the agent's failure: a soft check becomes skipped with the
reason (on this thread as in the background), a ``must`` check ends the scenario as ``judge``
(:class:`~fabtest.errors.JudgeFailed`), and what the failed requests cost is charged all the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from fabtest import tracing
from fabtest.config.criteria import Criterion
from fabtest.conversation import Check, Conversation, Mode, TokenUsage
from fabtest.engine import judge_checks, transcript
from fabtest.engine.judge import Judge, Scope
from fabtest.engine.verdicts import Pending, judge_failed, placeholder
from fabtest.errors import JudgeFailed, LLMError, LLMNotConfigured
from fabtest.llm.base import spent

__all__ = ["CheckSlots", "charging_failures"]

_T = TypeVar("_T")


@contextlib.contextmanager
def charging_failures(charge: Callable[[str, TokenUsage], None]) -> Iterator[None]:
    """A judge call that failed for good: what its requests cost is charged all the same (the
    summary's judge calls count every request), and the error goes on to the check's caller."""
    try:
        yield
    except LLMNotConfigured:
        raise
    except LLMError as exc:
        charge("judge", spent(exc))
        raise


@dataclass
class _Pending:
    """A soft response criterion waiting for its turn's batch."""

    slot: int
    criterion: Criterion
    mode: Mode


@dataclass
class CheckSlots:
    """Every check of one scenario in step order: decided, with the judge, or waiting for its batch."""

    #: the scenario's judge (None: no judge LLM; the callers skip the check before asking)
    judge: Callable[[], Judge | None]
    #: where background calls go (None: every call is made at once)
    executor: Callable[[], ThreadPoolExecutor | None]
    #: charges what a judge call cost to the scenario (from worker threads too)
    charge: Callable[[str, TokenUsage], None]
    #: raises the failed ``must``'s ExpectationFailed
    fail: Callable[[Check], None]
    #: the scenario's place (``file:line``), for a judge that failed on a ``must``
    where: str = ""
    #: the largest file the judge is shown inline (``[tool.fabtest] judge_max_file_bytes``)
    max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES
    slots: list[Check | Pending | None] = field(default_factory=list)
    _by_turn: dict[int, list[_Pending]] = field(default_factory=dict)
    _conversation: list[_Pending] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """No check recorded nor queued yet."""
        return not self.slots and not self._by_turn

    def add(self, check: Check) -> None:
        self.slots.append(check)

    def reserve(self) -> int:
        self.slots.append(None)
        return len(self.slots) - 1

    def queue_turn(self, number: int, criterion: Criterion, mode: Mode) -> None:
        """A criterion of turn ``number``'s response, judged with the others due on that turn."""
        self._by_turn.setdefault(number, []).append(_Pending(self.reserve(), criterion, mode))

    def queue_conversation(self, criterion: Criterion, mode: Mode) -> None:
        """A criterion of the whole conversation, judged when the conversation is flushed."""
        self._conversation.append(_Pending(self.reserve(), criterion, mode))

    def run(self, run: Callable[[], Check], mode: Mode, waiting: Check) -> None:
        """One judge call of its own (grounding, intent, goal): now for a ``must`` (failing at once
        when not met), else in the background with ``waiting`` as its placeholder."""
        slot = self.reserve()
        executor = self.executor()
        if mode == "must" or executor is None:
            check = self._hard_verdict(run) if mode == "must" else _soft_verdict(run, waiting)
            self.slots[slot] = check
            if mode == "must" and check.status in ("failed", "inconclusive"):
                self.fail(check)
        else:
            self.slots[slot] = Pending(executor.submit(tracing.carry(run)), None, waiting)

    def flush(self, conversation: Conversation, context_turns: int) -> None:
        """Send the judge what is due before the next turn (a simulated user's message is one)."""
        for number in list(self._by_turn):
            self.flush_turn(conversation, number, context_turns, block=False)
        if self._conversation:
            self.flush_conversation(conversation, block=False)

    def flush_turn(self, conversation: Conversation, number: int, context_turns: int, *, block: bool) -> None:
        pending = self._by_turn.pop(number, [])
        if not pending:
            return
        turn = conversation.turns[number - 1]
        subject = transcript.exchange_for_judge(conversation, turn.number, context=context_turns,
                                                max_file_bytes=self.max_file_bytes)
        self._batch(pending, subject, "response", turn.number, block=block)

    def flush_conversation(self, conversation: Conversation, *, block: bool) -> None:
        pending, self._conversation = self._conversation, []
        subject = transcript.for_judge(conversation, max_file_bytes=self.max_file_bytes)
        self._batch(pending, subject, "conversation", None, block=block)

    def _batch(self, pending: list[_Pending], subject: str, scope: Scope, turn: int | None, *, block: bool) -> None:
        """The judge calls for every criterion pending on one subject; fills their slots.

        Soft criteria share one call (judge calls per turn stay 1.00); each hard (``must``)
        criterion gets a call of its own, so its verdict is not swayed by the others judged beside
        it (the halo effect G-Eval and DeepEval avoid by one metric per call). ``block`` waits for
        the hard verdicts (one was just asserted) and fails on one that is not met.
        """
        soft = [p for p in pending if p.mode != "must"]
        hard = [p for p in pending if p.mode == "must"]
        if soft:
            self._judge_group(soft, subject, scope, turn, block=block and self.executor() is None)
        for one in hard:
            self._judge_group([one], subject, scope, turn, block=block)

    def _judge_group(self, pending: list[_Pending], subject: str, scope: Scope, turn: int | None, *,
                     block: bool) -> None:
        """One judge call for ``pending`` (now, or in the background); fills their slots."""
        unique: dict[str, Criterion] = {p.criterion.name: p.criterion for p in pending}

        def run() -> list[Check]:
            judge = self.judge()
            assert judge is not None
            with charging_failures(self.charge):
                result = judge.evaluate_criteria(list(unique.values()), subject=subject, scope=scope)
            self.charge("judge", result.usage)
            by_name = {v.criterion: v for v in result.value}
            return [judge_checks.criterion_check(p.criterion, p.mode, by_name[p.criterion.name], scope, turn)
                    for p in pending]

        executor = self.executor()
        if block or executor is None:
            results = (self._hard_verdict(run) if any(p.mode == "must" for p in pending) else
                       _soft_verdict(run, [placeholder("satisfy", p.criterion.name, turn) for p in pending]))
            for p, check in zip(pending, results, strict=True):
                self.slots[p.slot] = check
            if block:
                for check in results:
                    if check.mode == "must" and check.status in ("failed", "inconclusive"):
                        self.fail(check)
            return
        future = executor.submit(tracing.carry(run))
        for index, p in enumerate(pending):
            self.slots[p.slot] = Pending(future, index, placeholder("satisfy", p.criterion.name, turn))

    def _hard_verdict(self, run: Callable[[], _T]) -> _T:
        """A ``must`` check's verdict: a judge that failed for good ends the scenario as ``judge``
        (:class:`~fabtest.errors.JudgeFailed`), not as the agent's ``error``."""
        try:
            return run()
        except LLMNotConfigured:
            raise
        except LLMError as exc:
            raise JudgeFailed(f"the judge failed for good on a must check: {exc}", where=self.where) from exc


def _soft_verdict(run: Callable[[], _T], waiting: Any) -> _T:
    """A soft check judged on this thread (no executor): a judge that failed for good makes it
    skipped with the reason, as a background verdict is (:func:`verdicts.judge_failed`), never the
    scenario's error. ``waiting``: the placeholder check, or one per criterion of a batch."""
    try:
        return run()
    except LLMNotConfigured:
        raise
    except LLMError as exc:
        if isinstance(waiting, list):
            return cast(_T, [judge_failed(w, exc) for w in waiting])
        return cast(_T, judge_failed(waiting, exc))
