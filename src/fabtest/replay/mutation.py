"""``fabtest mutate``: run a suite's recorded checks on mutants of its recorded runs.

A mutant (:mod:`.mutants`) is a recorded run with one thing made worse. Its checks are brought up
to date on the changed turns by the code that brings a replayed run's checks up to date
(:func:`fabtest.replay.recorded_checks.recheck`): deterministic checks run again, judged ones go
to the judge with the prompts a run uses. No agent and no simulated user is called.

Only what a mutant can have changed is asked again: a judged check whose subject (the text the
judge would read: its turn with the turns before it, the whole transcript, a reply and its
source's calls) is the same as recorded keeps its verdict, so the judge is not paid to repeat
itself and its noise is not counted as a catch. Deterministic checks cost nothing but follow the
same rule (a pattern reads its turn's reply, a tool check its calls), so "exposed" means the same
for every check.

A mutant is **caught** when a check that passed on the recorded run fails on the mutant (or, for a
``must`` check, is inconclusive: the scenario would fail). A check is **exposed** to a mutant when
the mutant changed its subject and the check was run again; a check exposed at least once and never
failed is **vacuous**: it would not notice that mistake in the agent.

A judge is noisy, and a criterion that tosses a coin "fails" half the mutants it sees without
noticing anything. So the judged checks the mutants ask again are also asked again on the recorded
runs themselves, unmutated (the **control**, :func:`plan_controls`, each run ``samples`` times, each
sample its own cache entry): a check that failed its own unchanged run is **noisy**, and its
failures on mutants are the judge's noise, not catches (:func:`discount_noise`). A mutant counts as
caught only when a check that held on every control failed it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.conversation import Conversation, TokenUsage, Turn
from fabtest.engine import trajectory, transcript
from fabtest.engine.judge import Judge
from fabtest.experiment.model import CheckRecord, ScenarioResult, conversation_of
from fabtest.judging.rejudge import recorded_criterion
from fabtest.llm.cache import salted
from fabtest.replay.mutants import OPERATORS, Hints, Mutant, mutants_of
from fabtest.replay.recorded_checks import JUDGED_ONE_BY_ONE, REJUDGED, recheck

__all__ = ["CONTROL", "NO_FILES", "CheckKey", "FileView", "ControlOutcome", "MutantOutcome", "Planned",
           "discount_noise", "judge_calls", "mutation_table", "plan_controls", "plan_mutants", "run_controls",
           "run_mutant", "run_mutants"]

#: the operator name of a control: the recorded run itself, not mutated
CONTROL = "control"


@dataclass(frozen=True)
class FileView:
    """What the judge is shown of the conversation's files, as the run's judge was: their bytes
    read back from ``results_dir`` (None: the text only), each inline up to ``max_file_bytes``
    (``judge_max_file_bytes``; over it the name, type and size only)."""

    results_dir: Path | None = None
    max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES


NO_FILES = FileView()

@dataclass(frozen=True)
class CheckKey:
    """One check of one scenario, the same across its iterations."""

    feature: str
    scenario: str
    mode: str
    criterion: str
    turn: int | None

    @property
    def label(self) -> str:
        where = f" (turn {self.turn})" if self.turn is not None else ""
        return f"{self.scenario}: {self.mode} {self.criterion}{where}"

    @property
    def sort_key(self) -> tuple[str, str, int, str, str]:
        return self.feature, self.scenario, self.turn or 0, self.mode, self.criterion

    @classmethod
    def of(cls, result: ScenarioResult, check: CheckRecord) -> CheckKey:
        return cls(result.feature, result.name, check.mode, check.criterion, check.turn)


@dataclass
class Planned:
    """One mutant of one recorded run and the checks that are asked again on it (``(list, index)``
    into the run's ``evaluations`` / ``expectations``)."""

    result: ScenarioResult
    mutant: Mutant
    recheck: list[tuple[str, int]]


@dataclass
class MutantOutcome:
    """What the checks made of one mutant."""

    scenario_id: str
    name: str
    feature: str
    iteration: int
    operator: str
    turn: int
    description: str
    caught_by: list[CheckKey] = field(default_factory=list)
    exposed: list[CheckKey] = field(default_factory=list)
    #: checks that passed and whose subject changed, but that cannot be run again from the record
    unchecked: list[CheckKey] = field(default_factory=list)
    judge: TokenUsage = field(default_factory=TokenUsage)
    #: failures by noisy checks (they failed their own unmutated run too): the judge's noise, not catches
    noise: list[CheckKey] = field(default_factory=list)

    @property
    def caught(self) -> bool:
        return bool(self.caught_by)

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario_id, "name": self.name, "feature": self.feature, "iteration": self.iteration,
                "operator": self.operator, "turn": self.turn, "description": self.description, "caught": self.caught,
                "caught_by": [k.label for k in self.caught_by], "exposed": [k.label for k in self.exposed],
                "not_rechecked": [k.label for k in self.unchecked], "failed_by_noise": [k.label for k in self.noise],
                "judge_calls": self.judge.calls}


@dataclass
class ControlOutcome:
    """One recorded run's judged checks asked again unmutated (one sample): the ones that still held
    and the ones that flipped, which is the judge's noise."""

    scenario_id: str
    iteration: int
    sample: int
    rejudged: list[CheckKey] = field(default_factory=list)
    flipped: list[CheckKey] = field(default_factory=list)
    judge: TokenUsage = field(default_factory=TokenUsage)


def _supported_claims(result: ScenarioResult) -> dict[int, list[str]]:
    """Per turn, the claims the judge found supported when it checked grounding."""
    out: dict[int, list[str]] = {}
    for check in [*result.evaluations, *result.expectations]:
        if check.type == "grounded_in" and check.turn is not None:
            claims = check.data.get("claims") or []
            out.setdefault(check.turn, []).extend(str(c.get("claim")) for c in claims
                                                  if isinstance(c, dict) and c.get("supported") and c.get("claim"))
    return out


def _tools(result: ScenarioResult, called: Sequence[str]) -> list[str]:
    """The tools the agent declares (``tools`` in its metadata), then any tool a recorded run called."""
    declared = result.agent_metadata.get("tools") if isinstance(result.agent_metadata, dict) else None
    names = [t if isinstance(t, str) else t.get("name") if isinstance(t, dict) else None
             for t in (declared if isinstance(declared, list) else [])]
    return list(dict.fromkeys([*(n for n in names if isinstance(n, str) and n), *called]))


def _calls(turns: Sequence[Turn]) -> str:
    return json.dumps([[c.name, c.arguments] for t in turns for c in t.tool_calls], sort_keys=True, default=str)


def _looks_at(check: CheckRecord, conversation: Conversation) -> str | None:
    """What a deterministic check reads on ``conversation``: its turn's reply (a pattern), its
    turn's or every turn's calls in order (tool and trajectory checks), the transcript; None when
    it is not known (the check then runs on every mutant from its turn on)."""
    turns = conversation.turns
    if check.turn is not None and not 1 <= check.turn <= len(turns):
        return ""
    scoped = [turns[check.turn - 1]] if check.turn is not None else turns
    if check.type in ("match", "not_match") and check.turn is not None:
        return turns[check.turn - 1].response.text
    if check.type in ("call_tool", "not_call_tool", "include_call", "not_include_call", *trajectory.KINDS):
        return _calls(scoped)
    if check.type == "transcript_contains":
        return conversation.transcript()
    if check.type == "turn_count":  # no operator adds or removes a turn, nor moves a topic
        return str(len(turns))
    if check.type in ("reached_topic", "follow_topics"):
        return " > ".join(conversation.topic_path) + str(conversation.off_graph_transitions)
    return None


def _subject(check: CheckRecord, conversation: Conversation) -> str | None:
    """What the judge reads for ``check`` on ``conversation`` (None: not a judged check)."""
    turns = conversation.turns
    if check.type == "goal" or (check.type == "satisfy" and check.data.get("scope") == "conversation"):
        return transcript.for_judge(conversation)
    number = check.turn or len(turns)
    if not 1 <= number <= len(turns):
        return ""
    if check.type in ("satisfy", "intent"):
        return transcript.exchange_for_judge(conversation, number)
    if check.type == "grounded_in":
        source = str(check.data.get("source") or check.criterion.removeprefix("grounded_in:"))
        calls = [c.to_dict() for t in turns[:number] for c in t.tool_calls if c.name == source]
        return f"{turns[number - 1].response.text}\n{calls}"
    return None


def _to_recheck(result: ScenarioResult, before: Conversation, mutant: Mutant) -> list[tuple[str, int]]:
    """The checks of ``result`` whose subject ``mutant`` changed (``before``: the recorded conversation)."""
    after = conversation_of(result, mutant.transcript)
    chosen: list[tuple[str, int]] = []
    for where in ("evaluations", "expectations"):
        for index, check in enumerate(getattr(result, where)):
            if check.status == "skipped":
                continue
            if check.type in REJUDGED:
                # every satisfy check of a changed subject is asked, as the run batched them; the other
                # judged checks only when they passed (one call each, and only a pass can be caught)
                if check.type != "satisfy" and check.status != "passed":
                    continue
                if _subject(check, before) != _subject(check, after):
                    chosen.append((where, index))
            elif check.status == "passed" and (check.turn is None or check.turn >= mutant.turn):
                seen = _looks_at(check, before)
                if seen is None or seen != _looks_at(check, after):
                    chosen.append((where, index))
    return chosen


def plan_mutants(results: Sequence[ScenarioResult], *, seed: int = 0, per_run: int | None = None,
                 scenario: str | None = None) -> list[Planned]:
    """The mutants of every run that was not skipped and has turns, and what each asks again. Each
    run draws from its own generator, seeded with ``seed``, its id and iteration, so adding a
    scenario does not change the mutants of another."""
    planned: list[Planned] = []
    called = sorted({c.name for r in results for t in r.transcript for c in t.tool_calls})
    for result in results:
        if result.skipped or not result.transcript:
            continue
        if scenario is not None and not (result.id.startswith(scenario) or result.name == scenario):
            continue
        rng = random.Random(f"{seed}:{result.id}:{result.iteration}")
        hints = Hints(_supported_claims(result), _tools(result, called))
        recorded = conversation_of(result)
        for mutant in mutants_of(result.transcript, rng, hints, limit=per_run):
            planned.append(Planned(result, mutant, _to_recheck(result, recorded, mutant)))
    return planned


def judge_calls(planned: Sequence[Planned], judge: Judge) -> int:
    """How many judge calls the mutants need: one per batch of satisfy checks (their turn and scope,
    as the run batched them) and one per other judged check, each times its samples."""
    total = 0
    for plan in planned:
        batches: dict[tuple[str, int | None], int] = {}
        for where, index in plan.recheck:
            check = getattr(plan.result, where)[index]
            scope = check.data.get("scope")
            if check.type == "satisfy" and scope in ("response", "conversation"):
                key = (str(scope), check.turn if scope == "response" else None)
                samples = judge.samples_for(recorded_criterion(plan.result, check))
                batches[key] = max(batches.get(key, 0), samples)
            elif check.type in JUDGED_ONE_BY_ONE:  # a satisfy check without its scope is not asked
                total += 1
        total += sum(batches.values())
    return total


def _caught(before: CheckRecord, after: CheckRecord) -> bool:
    return before.status == "passed" and (after.status == "failed"
                                          or (after.mode == "must" and after.status == "inconclusive"))


def _rechecked(plan: Planned, judge: Judge | None, judge_reason: str, changed_from: int,
               files: FileView) -> tuple[list[tuple[CheckKey, CheckRecord, CheckRecord]], TokenUsage]:
    """The chosen checks of ``plan`` run again on its transcript: (key, recorded, now) for each that
    passed when recorded and was asked again, and what the judge cost; the judge sees the
    conversation's files as ``files`` says (as rejudge shows them)."""
    result = plan.result
    subset = result.model_copy(deep=True)
    chosen = {where: [i for w, i in plan.recheck if w == where] for where in ("evaluations", "expectations")}
    subset.evaluations = [subset.evaluations[i] for i in chosen["evaluations"]]
    subset.expectations = [subset.expectations[i] for i in chosen["expectations"]]
    conversation = conversation_of(result, plan.mutant.transcript, files_dir=files.results_dir)
    recheck(subset, result.transcript, conversation, judge, judge_reason=judge_reason, changed_from=changed_from,
            max_file_bytes=files.max_file_bytes)
    out = []
    for where in ("evaluations", "expectations"):
        for index, after in zip(chosen[where], getattr(subset, where), strict=True):
            before = getattr(result, where)[index]
            if before.status == "passed" and after.data.get("replay") != "kept":  # kept: its subject did not change
                out.append((CheckKey.of(result, before), before, after))
    return out, conversation.usage.get("judge", TokenUsage())


def run_mutant(plan: Planned, judge: Judge | None, *, judge_reason: str = "",
               files: FileView = NO_FILES) -> MutantOutcome:
    """The chosen checks of ``plan`` run again on its mutant (the judge shown the run's files as
    ``files`` says); FabtestError if the judge fails for good."""
    result, mutant = plan.result, plan.mutant
    pairs, usage = _rechecked(plan, judge, judge_reason, mutant.turn, files)
    outcome = MutantOutcome(result.id, result.name, result.feature, result.iteration, mutant.operator, mutant.turn,
                            mutant.description, judge=usage)
    for key, before, after in pairs:
        if after.status == "skipped":
            outcome.unchecked.append(key)
            continue
        outcome.exposed.append(key)
        if _caught(before, after):
            outcome.caught_by.append(key)
    return outcome


def plan_controls(planned: Sequence[Planned]) -> list[Planned]:
    """One control per mutated run: its judged checks that some mutant asks again, asked on the
    recorded transcript itself (deterministic checks need none: they give the same answer twice)."""
    judged: dict[tuple[str, int], set[tuple[str, int]]] = {}
    runs: dict[tuple[str, int], ScenarioResult] = {}
    for plan in planned:
        key = (plan.result.id, plan.result.iteration)
        runs.setdefault(key, plan.result)
        judged.setdefault(key, set()).update(
            (where, i) for where, i in plan.recheck if getattr(plan.result, where)[i].type in REJUDGED)
    return [Planned(runs[key], Mutant(CONTROL, 1, "the recorded run, unmutated", list(runs[key].transcript)),
                    sorted(chosen)) for key, chosen in judged.items() if chosen]


def run_controls(controls: Sequence[Planned], judge: Judge | None, samples: int, *,
                 judge_reason: str = "", files: FileView = NO_FILES) -> list[ControlOutcome]:
    """Each control judged ``samples`` times, each sample its own cache entry (a cached judge would
    otherwise answer every sample with the first)."""
    out = []
    for sample in range(1, samples + 1):
        view = _sample_judge(judge, sample)
        for plan in controls:
            pairs, usage = _rechecked(plan, view, judge_reason, 1, files)
            found = ControlOutcome(plan.result.id, plan.result.iteration, sample, judge=usage)
            for key, before, after in pairs:
                if after.status != "skipped":
                    found.rejudged.append(key)
                    if _caught(before, after):
                        found.flipped.append(key)
            out.append(found)
    return out


def _sample_judge(judge: Judge | None, sample: int) -> Judge | None:
    if judge is None or judge.llm is None:
        return judge
    return Judge(salted(judge.llm, f"{getattr(judge.llm, 'salt', '')}/control-{sample}"), samples=judge.samples,
                 per_criterion=judge.per_criterion, temperature=judge.temperature, purpose=judge.purpose)


def discount_noise(outcomes: Sequence[MutantOutcome], controls: Sequence[ControlOutcome]) -> set[CheckKey]:
    """Moves the failures of noisy checks (flipped on a control) from ``caught_by`` to ``noise``;
    returns the noisy checks."""
    noisy = {key for c in controls for key in c.flipped}
    for o in outcomes:
        o.noise = [k for k in o.caught_by if k in noisy]
        o.caught_by = [k for k in o.caught_by if k not in noisy]
    return noisy


def run_mutants(planned: Sequence[Planned], judge: Judge | None, *, judge_reason: str = "",
                progress: Callable[[str], None] | None = None, files: FileView = NO_FILES) -> list[MutantOutcome]:
    """Every planned mutant, in order (``files``: what the judge is shown of the conversation's files)."""
    out = []
    for plan in planned:
        if progress:
            progress(f"{plan.result.name} (iteration {plan.result.iteration}): {plan.mutant.description}")
        out.append(run_mutant(plan, judge, judge_reason=judge_reason, files=files))
    return out


def _share(caught: int, total: int) -> float | None:
    return round(caught / total, 4) if total else None


def mutation_table(outcomes: Sequence[MutantOutcome], results: Sequence[ScenarioResult],
                   controls: Sequence[ControlOutcome] = ()) -> dict[str, Any]:
    """The score overall, per operator and per feature (mutants caught / mutants), per check and per
    criterion (mutants that failed it / mutants it was exposed to), the vacuous, untouched and noisy
    checks, and the control. ``results`` are the mutated runs, for the checks no mutant reached;
    ``outcomes`` are already discounted (:func:`discount_noise`) by ``controls``."""

    def tally(group: Sequence[MutantOutcome]) -> dict[str, Any]:
        caught = sum(o.caught for o in group)
        return {"mutants": len(group), "caught": caught, "score": _share(caught, len(group))}

    by: dict[str, dict[str, list[MutantOutcome]]] = {"operators": {}, "features": {}}
    for o in outcomes:
        by["operators"].setdefault(o.operator, []).append(o)
        by["features"].setdefault(o.feature or "(no feature)", []).append(o)
    checks: dict[CheckKey, dict[str, int]] = {}
    mutated = {(o.scenario_id, o.iteration) for o in outcomes}
    for result in results:
        if (result.id, result.iteration) in mutated:
            for check in [*result.evaluations, *result.expectations]:
                if check.status == "passed":
                    checks.setdefault(CheckKey.of(result, check), {"exposed": 0, "caught": 0, "not_rechecked": 0})
    for o in outcomes:
        for name, keys in (("exposed", o.exposed), ("caught", o.caught_by), ("not_rechecked", o.unchecked)):
            for key in set(keys):
                checks.setdefault(key, {"exposed": 0, "caught": 0, "not_rechecked": 0})[name] += 1
    control = _control_table(outcomes, controls)
    noisy = {row["check"] for row in control["noisy"]}
    rows: list[dict[str, Any]] = []
    criteria: dict[str, dict[str, int]] = {}
    for key, n in sorted(checks.items(), key=lambda item: item[0].sort_key):
        status = ("noisy" if key.label in noisy else "vacuous" if n["exposed"] and not n["caught"]
                  else "caught" if n["caught"] else "not re-checkable" if n["not_rechecked"] else "untouched")
        rows.append({"check": key.label, "feature": key.feature, "scenario": key.scenario, "mode": key.mode,
                     "criterion": key.criterion, "turn": key.turn, **n, "share": _share(n["caught"], n["exposed"]),
                     "status": status})
        entry = criteria.setdefault(key.criterion, {"checks": 0, "exposed": 0, "caught": 0})
        entry["checks"] += 1
        entry["exposed"] += n["exposed"]
        entry["caught"] += n["caught"]
    return {
        "overall": tally(outcomes),
        "operators": {name: tally(by["operators"][name]) for name in OPERATORS if name in by["operators"]},
        "features": {name: tally(group) for name, group in sorted(by["features"].items())},
        "criteria": {name: {**e, "share": _share(e["caught"], e["exposed"])} for name, e in sorted(criteria.items())},
        "checks": rows,
        "vacuous": [r["check"] for r in rows if r["status"] == "vacuous"],
        "untouched": [r["check"] for r in rows if r["status"] == "untouched"],
        "not_recheckable": [r["check"] for r in rows if r["status"] == "not re-checkable"],
        "control": control,
    }


def _control_table(outcomes: Sequence[MutantOutcome], controls: Sequence[ControlOutcome]) -> dict[str, Any]:
    """What the judge did with the unmutated runs: how often its verdicts flipped, the noisy checks,
    and the failures on mutants not counted as catches because of them."""
    rejudged: dict[CheckKey, int] = {}
    flipped: dict[CheckKey, int] = {}
    for c in controls:
        for key in c.rejudged:
            rejudged[key] = rejudged.get(key, 0) + 1
        for key in c.flipped:
            flipped[key] = flipped.get(key, 0) + 1
    noisy = [{"check": key.label, "flipped": n, "rejudged": rejudged.get(key, n)}
             for key, n in sorted(flipped.items(), key=lambda item: item[0].sort_key)]
    return {"runs": len({(c.scenario_id, c.iteration) for c in controls}),
            "samples": max((c.sample for c in controls), default=0),
            "rejudged": sum(rejudged.values()), "flipped": sum(flipped.values()), "noisy": noisy,
            "failures_not_counted": sum(len(o.noise) for o in outcomes),
            "mutants_not_counted": sum(1 for o in outcomes if o.noise and not o.caught_by),
            "judge_calls": sum(c.judge.calls for c in controls)}

