"""Scenario results streamed to disk as they arrive, with only small facts kept in memory.

A run of 100,000 scenarios must not hold 100,000 transcripts. The :class:`Spool` (used by the
Recorder and by ``recover``) turns each result into its finished ``scenario_results`` entry the
moment it arrives and appends it, as one line of JSON, to a spill file
(``results/.<id>.entries.jsonl``). In memory it keeps, per result:

* a *brief*: the result without transcript, explanations or agent metadata, its checks, usage,
  topics and configuration shared with every other result that has the same ones. The summary,
  the per-criterion tables, the cost and the variance sections are computed from briefs by the
  same functions as before (experiment/stats.py), so the numbers cannot drift;
* its ``scenario_index`` row, already as JSON text;
* where its line is in the spill file: the flakiness attribution reads the few flaky scenarios'
  runs back from there (it compares whole transcripts), and a late update rewrites one result.

Writing the experiment copies the spilled lines into the ``scenario_results`` array as text,
never parsing them again (``export.write_streamed``). Every experiment file goes this one way: a
run (the Recorder), ``recover``, ``merge``, and the commands that make results in memory
(``rejudge``, ``replay``: :func:`write_experiment`).

Late updates (soft verdicts that arrive after their scenario was recorded) go through
:meth:`Spool.update`, by the key ``(nodeid, iteration)``: the result is read back, changed,
spilled again, and its brief and index row replaced; the file keeps the first position.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from fabtest._internal.files import TEXT_ERRORS
from fabtest.experiment.attribution import Attributions, Rejudge, attribute_variance, has_flaky_soft_check
from fabtest.experiment.coverage import RunFacts, run_facts, summarise
from fabtest.experiment.export import (
    Costing,
    costing_of,
    document_head,
    dump_json,
    index_row,
    scenario_entry,
    write_streamed,
)
from fabtest.experiment.fingerprint import canonical_json
from fabtest.experiment.model import (
    CheckRecord,
    ExperimentInfo,
    ScenarioResult,
    TurnRecord,
    UsageRecord,
    VoiceRecord,
)
from fabtest.experiment.reader import result_from_entry
from fabtest.llm.retry_budget import BUDGET_SPENT_MARKER

__all__ = ["MESSAGE_CHARS", "ResultKey", "Spool", "result_key", "spill_path", "write_experiment"]

_SPILL_SUFFIX = ".entries.jsonl"
#: the fields of a brief that ``model_construct`` is told were set (one shared set, not one per brief)
_FIELDS_SET: set[str] = set(ScenarioResult.model_fields)
#: check ``data`` the summary reads (grounding by source and claims); the rest stays in the file
_GROUNDING_KEYS = ("source", "claims_total", "claims_unsupported")

#: the result's fields with a default factory, made here: pydantic's ``model_construct`` inspects a
#: factory's signature each time it calls one (9 of them: ~1 ms of a brief, GIL-held, per scenario)
_FACTORIES: tuple[tuple[str, Callable[[], Any]], ...] = tuple(
    (name, cast("Callable[[], Any]", field.default_factory)) for name, field in ScenarioResult.model_fields.items()
    if field.default_factory is not None)

ResultKey = tuple[str, int]
_T = TypeVar("_T")


def result_key(result: ScenarioResult) -> ResultKey:
    """A result's key for late updates: its pytest node id and iteration."""
    return result.nodeid, result.iteration


def spill_path(results_dir: str | os.PathLike[str], experiment_id: str) -> Path:
    return Path(results_dir) / f".{experiment_id}{_SPILL_SUFFIX}"


class _Shared:
    """Equal parts of briefs are one object: most results share their checks, usage and configuration."""

    def __init__(self) -> None:
        self._known: dict[Any, Any] = {}

    def __call__(self, key: Any, make: Callable[[], _T]) -> _T:
        if key not in self._known:
            self._known[key] = make()
        return cast(_T, self._known[key])

    def check(self, c: CheckRecord) -> CheckRecord:
        data = {k: c.data[k] for k in _GROUNDING_KEYS if k in c.data} if c.type == "grounded_in" else {}
        key = ("check", c.type, c.mode, c.criterion, c.status, c.passed, c.turn, canonical_json(data) if data else "")
        return self(key, lambda: CheckRecord.model_construct(type=c.type, mode=c.mode, criterion=c.criterion,
                                                             status=c.status, passed=c.passed, turn=c.turn,
                                                             details="", data=data))

    def checks(self, checks: Sequence[CheckRecord]) -> list[CheckRecord]:
        slim = tuple(self.check(c) for c in checks)
        return self(("checks", *map(id, slim)), lambda: list(slim))

    def strings(self, kind: str, values: Sequence[str]) -> list[str]:
        return self((kind, *values), lambda: [sys.intern(v) for v in values])

    def usage(self, usage: dict[str, UsageRecord]) -> dict[str, UsageRecord]:
        key = ("usage", *((r, u.calls, u.input_tokens, u.output_tokens, u.model) for r, u in usage.items()))
        return self(key, lambda: dict(usage))

    def agent_turns(self, transcript: Sequence[TurnRecord]) -> list[TurnRecord]:
        """Only what the cost reads of each turn (the agent's reported usage and model), and the
        figures of a voice turn (the summary's voice block)."""
        kept = []
        for turn in transcript:
            meta = turn.metadata if isinstance(turn.metadata, dict) else {}
            if turn.voice is not None:  # its own record: the figures differ turn by turn, nothing to share
                kept.append(_voice_turn(meta, turn.voice))
            elif isinstance(meta.get("usage"), dict):
                slim = {"usage": meta["usage"], "model": meta.get("model")}
                kept.append(self(("turn", canonical_json(slim)), _cost_turn(slim)))
        return self(("turns", *map(id, kept)), lambda: kept) if kept else self(("turns",), list)

    def config(self, result: ScenarioResult) -> tuple[Any, Any, Any]:
        criteria = self(("criteria", *result.criteria.items()), lambda: dict(result.criteria))
        topics = self(("topics", *((t.name, t.characteristic, *t.successors, None) for t in result.topics)),
                      lambda: list(result.topics))
        simulator = None if result.simulator is None else self(
            ("simulator", canonical_json(result.simulator)), lambda: result.simulator)
        return criteria, topics, simulator


def _voice_turn(metadata: dict[str, Any], voice: VoiceRecord) -> TurnRecord:
    usage = metadata.get("usage")
    slim = {"usage": usage, "model": metadata.get("model")} if isinstance(usage, dict) else {}
    figures = VoiceRecord.model_construct(
        time_to_first_audio_ms=voice.time_to_first_audio_ms, reply_audio_ms=voice.reply_audio_ms,
        word_error_rate=voice.word_error_rate, interrupted=voice.interrupted)
    return TurnRecord.model_construct(number=0, user="", agent="", metadata=slim, voice=figures)


def _cost_turn(metadata: dict[str, Any]) -> Callable[[], TurnRecord]:
    return lambda: TurnRecord.model_construct(number=0, user="", agent="", metadata=metadata)


def _brief(result: ScenarioResult, shared: _Shared) -> ScenarioResult:
    """What the summary, variance and cost sections read of one result, nothing more."""
    criteria, topics, simulator = shared.config(result)
    failure = result.failure_message
    values: dict[str, Any] = dict(
        id=sys.intern(result.id), name=sys.intern(result.name), nodeid="", feature="", feature_file="", rule=None,
        record_id=None, iteration=result.iteration, passed=result.passed, skipped=result.skipped, skip_reason=None,
        turns=result.turns, topics_visited=shared.strings("visited", result.topics_visited),
        topic_path=shared.strings("path", result.topic_path), backtracked=result.backtracked,
        off_graph_transitions=shared.strings("off", result.off_graph_transitions),
        failure_type=result.failure_type,
        failure_message=failure if failure and BUDGET_SPENT_MARKER in failure else None,
        evaluations=shared.checks(result.evaluations), expectations=shared.checks(result.expectations),
        transcript=shared.agent_turns(result.transcript), usage=shared.usage(result.usage),
        duration_s=result.duration_s, criteria=criteria, topics=topics, simulator=simulator,
        agent_metadata=shared(("meta",), dict), simulation=_validity_only(result.simulation),
    )
    for name, make in _FACTORIES:  # the rest at their defaults, made here (see _FACTORIES)
        if name not in values:
            values[name] = make()
    return ScenarioResult.model_construct(_fields_set=_FIELDS_SET, **values)


def _validity_only(simulation: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the simulator validity rate reads of a result's ``simulation`` (not the problems' text)."""
    if simulation is None:
        return None
    return {"valid": simulation.get("valid"),
            "tries": [{"valid": t.get("valid")} for t in simulation.get("tries") or []]}


#: The console summary reads at most this much of a failure message (report/console_scale.py).
MESSAGE_CHARS = 4000


def _summary_stub(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The little the console summary reads of an entry itself (off-graph jumps, low-confidence
    verdicts, a spent retry budget, a failure's message), or None when it has none of them."""
    low = {block: [d for d in (entry.get(block) or {}).get("details") or [] if d.get("confidence") == "low"]
           for block in ("evaluations", "expectations")}
    budget = BUDGET_SPENT_MARKER in str(entry.get("failure_message") or "")
    failed = entry.get("passed") is False and not entry.get("skipped")  # the summary groups failures
    if not (entry.get("off_graph_transitions") or low["evaluations"] or low["expectations"] or budget or failed):
        return None
    message = entry.get("failure_message") if budget or failed else None
    return {"id": entry.get("id"), "name": entry.get("name"), "iteration": entry.get("iteration"),
            "passed": entry.get("passed"), "skipped": entry.get("skipped"), "failure_type": entry.get("failure_type"),
            "failure_message": message[:MESSAGE_CHARS] if isinstance(message, str) else message,
            "off_graph_transitions": entry.get("off_graph_transitions") or [],
            **{block: {"details": details} for block, details in low.items()}}


class Spool:
    """Results of one experiment: ``add`` each, ``update`` late, then ``write`` once and ``close``."""

    def __init__(self, results_dir: str | os.PathLike[str], experiment_id: str, costing: Costing) -> None:
        self.path = spill_path(results_dir, experiment_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._costing = costing
        self._file: Any = open(self.path, "w+b")  # closed by close()
        self._shared = _Shared()
        #: briefs, in arrival order (see module docstring); ``results[i]`` is slot i
        self.results: list[ScenarioResult] = []
        self._rows: list[str] = []
        self._offsets = array("q")
        self._lengths = array("q")
        self._end = 0
        self._slots: dict[ResultKey, int] = {}
        self._stubs: dict[int, dict[str, Any]] = {}
        self._configs: dict[tuple[int, int, int], ScenarioResult] = {}
        #: each slot's coverage facts (identical runs share one object)
        self._facts: dict[int, RunFacts] = {}
        self._rewritten = False
        self._head: dict[str, Any] | None = None
        #: node id -> position in the collection: entries are written in that order (then by
        #: scenario id and iteration), not in the order scenarios finished (concurrency, -n)
        self.order: dict[str, int] | None = None
        self._keys: list[tuple[str, str, int]] = []
        #: asks the judge again about a deciding check (opt-in, ``attribution_rejudge``); None: never
        self.rejudge: Rejudge | None = None

    def __len__(self) -> int:
        return len(self.results)

    def add(self, result: ScenarioResult, dumped: dict[str, Any] | None = None) -> None:
        """Spill one result's entry and keep its brief; ``dumped``: its ``model_dump(mode="json")``
        if already made (it is consumed)."""
        prepared = self._prepare(result, dumped)  # first, touching nothing: Ctrl-C / SIGTERM may land anywhere
        slot = len(self.results)
        self.results.append(result)  # replaced by its brief in _commit
        self._rows.append("")
        self._offsets.append(0)
        self._lengths.append(0)  # 0 until its entry is written: such a slot is left out of the file
        self._slots[result_key(result)] = slot
        self._keys.append((result.nodeid, result.id, result.iteration))  # briefs drop the node id
        self._commit(slot, *prepared)

    def holds(self, key: ResultKey) -> bool:
        """A result of this key was added and its entry written (an interrupted add leaves it out)."""
        slot = self._slots.get(key)
        return slot is not None and self._lengths[slot] > 0

    def index_rows(self) -> list[list[Any]]:
        """The ``scenario_index`` rows recorded so far (what a comparison adds up), for a look
        during the run (``--fabtest-until-decided``)."""
        return [json.loads(row) for row in self._rows if row]

    def forget_head(self) -> None:
        """The experiment's identity changed (``until_decided``): build the head again."""
        self._head = None

    def scenario_nodeids(self) -> list[tuple[str, str]]:
        """``(scenario id, node id)`` of every result recorded so far."""
        return [(scenario_id, nodeid) for nodeid, scenario_id, _ in self._keys]

    def update(self, key: ResultKey, change: Callable[[ScenarioResult], ScenarioResult]) -> bool:
        """Late update of the result recorded under ``key`` (soft verdicts that came after it):
        ``change`` gets the whole result back and returns the new one. False for an unknown key."""
        slot = self._slots.get(key)
        if slot is None:
            return False
        self._commit(slot, *self._prepare(change(self.read(slot)), None))
        self._rewritten = True
        return True

    def read(self, slot: int) -> ScenarioResult:
        """The whole result in ``slot``, read back from the spill file."""
        self._file.flush()
        raw = os.pread(self._file.fileno(), self._lengths[slot], self._offsets[slot])
        return result_from_entry(json.loads(raw))

    def _prepare(self, result: ScenarioResult, dumped: dict[str, Any] | None) -> tuple[bytes, str, Any, Any, RunFacts]:
        """Everything a slot will hold (its spilled line, index row, summary stub, brief and coverage facts)."""
        entry = scenario_entry(result, self._costing, dumped)
        line = dump_json(entry).encode("utf-8", TEXT_ERRORS) + b"\n"
        facts = run_facts(result)
        return (line, dump_json(index_row(entry)), _summary_stub(entry), _brief(result, self._shared),
                self._shared(("facts", facts), lambda: facts))

    def _commit(self, slot: int, line: bytes, row: str, stub: Any, brief: Any, facts: RunFacts) -> None:
        """Store a prepared slot: a few assignments, so an interrupt rarely finds one half done,
        and a slot whose entry was never written is left out of the file (:meth:`_slot_order`)."""
        start = self._file.tell()  # not self._end: a write an interrupt cut short may lie between
        self._file.write(line)
        self._rows[slot] = row
        if stub is None:
            self._stubs.pop(slot, None)
        else:
            self._stubs[slot] = stub
        self._facts[slot] = facts
        self._configs.setdefault((id(brief.criteria), id(brief.topics), id(brief.simulator)), brief)
        self.results[slot] = brief
        self._head = None
        self._offsets[slot], self._end = start, start + len(line)
        self._lengths[slot] = len(line) - 1  # last: the slot is complete

    def head(self, info: ExperimentInfo) -> dict[str, Any]:
        """Every section but ``scenario_results`` (cached until the next add or update)."""
        if self._head is None:
            self._head = document_head(info, self.results, configs=list(self._configs.values()),
                                       attribute=self._attribute, coverage=summarise(self._facts.values()))
        return self._head

    def summary_document(self, info: ExperimentInfo) -> dict[str, Any]:
        """The document for the console summary: every section, and as ``scenario_results`` only
        the entries it reads something of (see ``_summary_stub``); the file has them all."""
        head = dict(self.head(info))
        head["experiment"] = {**head["experiment"], "interrupted": info.interrupted}
        variance = head.pop("variance", None)
        rank = {slot: i for i, slot in enumerate(self._slot_order())}
        head["scenario_results"] = [self._stubs[slot] for slot in sorted(self._stubs, key=rank.__getitem__)]
        if variance is not None:
            head["variance"] = variance
        return head

    def _attribute(self, briefs: Sequence[ScenarioResult]) -> Attributions:
        """``attribute_variance`` over whole results, one scenario at a time (read back), for the
        scenarios that are flaky or whose soft verdicts differ between runs (seen in the briefs)."""
        runs: dict[str, list[int]] = {}
        for slot, brief in enumerate(briefs):
            if not brief.skipped:
                runs.setdefault(brief.id, []).append(slot)
        out = Attributions()
        for slots in runs.values():
            if len({briefs[s].passed for s in slots}) > 1 or has_flaky_soft_check([briefs[s] for s in slots]):
                found = attribute_variance([self.read(s) for s in slots], self.rejudge)
                out.scenarios.extend(found.scenarios)
                out.criteria.extend(found.criteria)
        return out

    def write(self, info: ExperimentInfo, results_dir: str | os.PathLike[str],
              sections: Mapping[str, Any] | None = None) -> Path:
        """The experiment file: the sections, then the spilled entries copied as text.

        ``sections``: a command's own top-level sections after the others (``rejudge``, ``replay``).
        """
        head = dict(self.head(info))
        head["experiment"] = {**head["experiment"], "interrupted": info.interrupted}
        head.update(sections or {})
        self._file.flush()
        slots = self._slot_order()
        return write_streamed(head, [self._rows[s] for s in slots], self._entries(slots), results_dir)

    def _slot_order(self) -> list[int]:
        """Slots in collection order (then scenario id, iteration); arrival order without ``order``."""
        complete = [s for s in range(len(self.results)) if self._lengths[s]]  # not one an interrupt cut short
        if self.order is None:
            return complete
        order, last = self.order, len(self.order)
        return sorted(complete,
                      key=lambda s: (order.get(self._keys[s][0], last), *self._keys[s][1:], s))

    def _entries(self, slots: list[int]) -> Iterator[str]:
        whole = len(slots) == len(self.results) and self._file.tell() == self._end  # nothing cut short
        # the file is the entries in order: read it through
        if whole and not self._rewritten and slots == sorted(slots):
            self._file.seek(0)
            for line in self._file:
                yield line[:-1].decode("utf-8")
            return
        for slot in slots:
            yield os.pread(self._file.fileno(), self._lengths[slot], self._offsets[slot]).decode("utf-8")

    def close(self) -> None:
        """Remove the spill file (the journal stays the record of a run until it is finalised)."""
        self._file.close()
        self.path.unlink(missing_ok=True)


def write_experiment(info: ExperimentInfo, results: Iterable[ScenarioResult], results_dir: str | os.PathLike[str],
                     sections: Mapping[str, Any] | None = None) -> Path:
    """``results/<id>.json`` of results a command made (``rejudge``, ``replay``), in their order.

    They go through a :class:`Spool` like a run's and a merge's, so every experiment file is
    written by one path (:meth:`Spool.write`, then ``export.write_streamed``) and cannot differ
    from a run's in layout or numbers; ``sections`` are the command's own (after the others).
    """
    spool = Spool(results_dir, info.id, costing_of(info))
    try:
        for result in results:
            spool.add(result)
        return spool.write(info, results_dir, sections)
    finally:
        spool.close()
