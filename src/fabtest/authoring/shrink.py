"""Shrink a failed run to the fewest, shortest user turns that still fail the same check.

A simulated conversation that fails once in ten is random and long; a regression test must fail
every time and be short enough to read. :func:`shrink` replays a failed run's *user* turns,
scripted, against today's agent (:func:`fabtest.replay.conversations.replay_scenario`, so the agent
and judge are built as the project configures them now) and searches, by delta debugging
(Zeller's ddmin, the shrinking of Hypothesis and QuickCheck applied to a conversation), for a
smaller list of user messages on which the same check still fails, the same way (a
deterministic check's failure keeps its kind: "called B before A" does not become "did not call
A"), in at least ``k`` of ``n`` replays. It then shortens each kept message a sentence at a
time under the same rule.

The turn a check is about is always kept (a ``response`` check without its response means
nothing), and a conversation check keeps at least one turn (a feature with no user turn fails with
"there is no response yet", not the check's failure); the other turns, their sentences and the
messages of a seeded history (``Given the conversation so far``) are what may go. Every replay
counts against a budget, and the outcome says whether the failure reproduced at all: a failure that needed the simulated
user's wording, or that the judge gives only now and then, is reported as not reproducing
scripted rather than written as a test that passes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fabtest.authoring.feature_text import decision_of
from fabtest.engine import stubbing
from fabtest.experiment.model import CheckRecord, FileRecord, PauseRecord, ScenarioResult, TurnRecord
from fabtest.experiment.stats import LLM_JUDGED_TYPES
from fabtest.replay.conversations import ReplayEnv, recorded_decision, replay_scenario

__all__ = ["Confirm", "Said", "ShrinkOutcome", "failing_checks", "shrink"]


@dataclass(frozen=True)
class Confirm:
    """``k`` failures in at most ``n`` replays make a candidate reproduce (``--confirm k/n``)."""

    k: int = 3
    n: int = 3


@dataclass
class ShrinkOutcome:
    """What the search found and spent."""

    check: CheckRecord
    reproduced: bool = False
    #: the kept user messages, in order, and which of them the check is about (None: the conversation)
    messages: list[str] = field(default_factory=list)
    anchor: int | None = None
    #: the seeded history kept (``{"role", "content"}``), when the run had one
    history: list[dict[str, str]] = field(default_factory=list)
    replays: int = 0
    judge_calls: int = 0
    budget_spent: bool = False
    #: failures / replays of the last confirmed candidate
    confirmed: tuple[int, int] = (0, 0)
    #: why the check could not be re-run (a kind replay cannot re-check), if so
    not_checkable: str = ""


class Said(str):
    """A user message the search keeps, with the files it was sent with (``TurnRecord.user_files``)
    and the decision it carried on the agent's pauses, if any: a str, so the search shortens and
    compares it as text, and the rest goes along."""

    files: list[FileRecord]
    decision: PauseRecord | None

    def __new__(cls, text: str, files: Sequence[FileRecord] = (), decision: PauseRecord | None = None) -> Said:
        self = super().__new__(cls, text)
        self.files = list(files)
        self.decision = decision
        return self


def files_of(message: str) -> list[FileRecord]:
    return list(getattr(message, "files", []))


def transcript_of(messages: Sequence[str]) -> list[TurnRecord]:
    """The user turns a candidate replays, each decision recorded on the turn before, as a run records it."""
    turns = [TurnRecord(number=i, user=text, agent="", user_files=files_of(text))
             for i, text in enumerate(messages, start=1)]
    for number, message in enumerate(messages, start=1):
        decision = decision_of(message, number)
        if decision is not None:
            turns[number - 2].pauses.append(decision.model_copy(update={"decided_in_turn": number}))
    return turns


class _Stop(Exception):  # control flow inside this module, never raised out of it
    """The search cannot go on: the budget is spent, or the check cannot be re-run on a replay."""


def _signature(details: str) -> str:
    """What a deterministic check's failure was, without its numbers: "called change (call 1) before
    lookup" and "did not call lookup" are two failures of one check, as Hypothesis tells failures
    apart by their exception and place, and a shrunk candidate must keep the first one."""
    words = re.sub(r"\d+", "#", details).split()
    return " ".join(words[:2])


def failing_checks(result: ScenarioResult) -> list[CheckRecord]:
    """The checks that failed in ``result``: hard expectations first."""
    return [c for c in (*result.expectations, *result.evaluations) if c.status == "failed"]


class _Search:
    """The candidate tests of one shrink: each is replayed until confirmed or refuted."""

    def __init__(self, result: ScenarioResult, check: CheckRecord, env: ReplayEnv, confirm: Confirm,
                 budget: int, progress: Callable[[str], None] | None) -> None:
        self.result, self.check, self.env, self.confirm, self.budget = result, check, env, confirm, budget
        self.progress = progress
        self.outcome = ShrinkOutcome(check.model_copy(deep=True))
        self.seen: dict[tuple[str, ...], bool] = {}
        self.history: list[dict[str, str]] = list(result.history)
        #: the run's stubbed tool answers: every candidate meets them (its transcript is rebuilt empty)
        self.stubs = stubbing.recorded_stubs(result)

    def fails(self, messages: Sequence[str], anchor: int | None) -> bool:
        """Does the check fail on these user messages (after ``self.history``) in ``k`` of at most ``n`` replays?"""
        key = (*messages, *(f.sha256 for m in messages for f in files_of(m)), f"@{anchor}",
               *(f"{h['role']}:{h['content']}" for h in self.history))
        if key in self.seen:
            return self.seen[key]
        failed = tried = 0
        while (tried < self.confirm.n and failed < self.confirm.k
               and failed + (self.confirm.n - tried) >= self.confirm.k):
            if self.outcome.replays >= self.budget:
                self.outcome.budget_spent = True
                raise _Stop
            status = self._replay(messages, anchor)
            tried += 1
            failed += status == "failed"
            if status == "not checkable":
                raise _Stop
        verdict = failed >= self.confirm.k
        self.seen[key] = verdict
        if verdict:  # the search only ever tries smaller candidates: the last that fails is the best so far
            self.outcome.confirmed = (failed, tried)
            self.outcome.messages, self.outcome.anchor = list(messages), anchor
            self.outcome.history = list(self.history)
        if self.progress:
            self.progress(f"{len(messages)} user turn(s): {'fails' if verdict else 'passes'} ({failed}/{tried})")
        return verdict

    def _replay(self, messages: Sequence[str], anchor: int | None) -> str:
        self.outcome.replays += 1
        candidate = self.result.model_copy(deep=True)
        # a fresh iteration per replay: a cached judge answers each replay anew, as a run would
        candidate.iteration = 10_000 + self.outcome.replays
        candidate.simulator = None  # scripted: the kept user lines, never a simulator taking over
        candidate.history = list(self.history)
        candidate.transcript = transcript_of(messages)
        target = self.check.model_copy(deep=True)
        target.turn = anchor
        candidate.expectations, candidate.evaluations = [target], []
        new, outcome = replay_scenario(candidate, self.env, recorded=self.stubs)
        usage = new.usage.get("judge")
        self.outcome.judge_calls += usage.calls if usage is not None else 0
        rechecked = new.expectations[0] if new.expectations else None
        if rechecked is None or outcome.error:
            return "error"
        if rechecked.data.get("replay") == "kept":
            # replay kept the recorded verdict because the subject looked unchanged (no turn at all): the
            # check was not run on this candidate, so it is no evidence that the candidate fails
            return "not rechecked"
        if rechecked.data.get("replay") == "not rechecked":
            self.outcome.not_checkable = rechecked.details
            return "not checkable"
        # a judge's reasoning differs every time; a deterministic check says what it saw
        if rechecked.status == "failed" and self.check.type not in LLM_JUDGED_TYPES \
                and _signature(rechecked.details) != _signature(self.check.details):
            return "failed otherwise"  # the same check failing for another reason is another bug
        return rechecked.status


def shrink(result: ScenarioResult, check: CheckRecord, env: ReplayEnv, *, confirm: Confirm = Confirm(),
           budget: int = 60, progress: Callable[[str], None] | None = None) -> ShrinkOutcome:
    """Search the fewest, shortest user messages of ``result`` on which ``check`` still fails."""
    search = _Search(result, check, env, confirm, budget, progress)
    messages: list[str] = [Said(t.user, t.user_files, recorded_decision(result.transcript, t.number))
                           for t in result.transcript]
    anchor = check.turn if check.turn and check.turn <= len(messages) else None
    try:
        if not search.fails(messages, anchor):
            return search.outcome
        search.outcome.reproduced = True
        messages, anchor = _fewer_turns(search, messages, anchor)
        _less_history(search, messages, anchor)
        for index in range(len(messages)):
            messages = _shorter_message(search, messages, anchor, index)
    except _Stop:
        pass
    return search.outcome


def _with_anchor(others: Sequence[int], anchor: int | None, messages: Sequence[str]) -> tuple[list[str], int | None]:
    """The messages at ``others`` (indices) plus the anchor turn, in order, and the anchor's new number."""
    keep = sorted({*others, *([anchor - 1] if anchor else [])})
    return [messages[i] for i in keep], (keep.index(anchor - 1) + 1 if anchor else None)


def _fewer_turns(search: _Search, messages: list[str], anchor: int | None) -> tuple[list[str], int | None]:
    """ddmin over the turns other than the anchor."""
    items = [i for i in range(len(messages)) if not anchor or i != anchor - 1]

    def test(subset: Sequence[int]) -> bool:
        return search.fails(*_with_anchor(subset, anchor, messages))

    # at least one user turn: a feature whose Then step comes before any When fails with "there is no
    # response yet", another failure than the one being shrunk
    if items and anchor and test([]):
        return _with_anchor([], anchor, messages)
    n = 2
    while len(items) >= 2:
        size = math.ceil(len(items) / n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for chunk in chunks:
            if test(chunk):
                items, n = chunk, 2
                break
        else:
            for chunk in chunks:
                rest = [i for i in items if i not in chunk]
                if test(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), n * 2)
    return _with_anchor(items, anchor, messages)


def _less_history(search: _Search, messages: list[str], anchor: int | None) -> None:
    """Drop the seeded history's messages the failure does not need: all at once first, then one by one."""
    if not search.history:
        return
    kept = search.history
    search.history = []
    if search.fails(messages, anchor):
        return
    search.history = kept
    position = 0
    while position < len(search.history):
        kept = search.history
        search.history = kept[:position] + kept[position + 1:]
        if not search.fails(messages, anchor):
            search.history = kept
            position += 1


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _shorter_message(search: _Search, messages: list[str], anchor: int | None, index: int) -> list[str]:
    """Drop the sentences of one message that the failure does not need, one at a time."""
    sentences = _SENTENCE.split(messages[index].strip())
    position = 0
    while len(sentences) > 1 and position < len(sentences):
        shorter = sentences[:position] + sentences[position + 1:]
        kept = Said(" ".join(shorter), files_of(messages[index]), getattr(messages[index], "decision", None))
        candidate = [*messages[:index], kept, *messages[index + 1:]]
        if search.fails(candidate, anchor):
            sentences, messages = shorter, candidate
        else:
            position += 1
    return messages
