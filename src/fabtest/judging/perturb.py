"""``fabtest rejudge EXP --perturb``: does a verdict follow the agent, or how the criterion was asked?

A robustness audit that needs no labels. Every recorded ``satisfy`` check is judged again under
changes that must not change a sound verdict, and each criterion gets the share of those
judgements that moved away from the recorded verdict. A criterion that moves often is a coin the
judge tosses, whatever the agent did: fix its wording or examples before gating on it.

The perturbations, each applied to a whole batch (the criteria judged together in the run, in one
call, as ``rejudge`` asks them):

* ``unchanged``: the same question again. The control: how much the judge moves on identical
  input, which every other row includes. It is shown apart and not counted in the move rate.
* ``reworded``: the criterion's text in fixed frames (:data:`REWORDINGS`), every word kept. These
  are deterministic rewordings, not paraphrases by the judge LLM, on purpose: an LLM paraphrase
  can change the meaning (a moved verdict would then say nothing about the criterion), costs a
  call per criterion and differs from run to run; a fixed frame keeps the meaning by
  construction, is free, and gives the same audit twice. The price: it tests less than a free
  paraphrase could (noted in docs/how-to/robustness.md).
* ``examples``: each list of good and bad examples rotated by one (a shuffle that always changes
  the order), for criteria with two or more examples of a kind.
* ``no context``: a response criterion judged on the agent's reply alone, the user's message
  replaced by "(not shown)". A verdict that needs the question to be fair moves here, and so does
  one that leans on it; conversation criteria have no context to remove.
* ``other model``: the same question to another judge model (``--perturb-model``).

Why these: an LLM's answer is known to move with a prompt's surface format (Sclar et al., 2023,
"Quantifying Language Models' Sensitivity to Spurious Features in Prompt Design") and with the
order of its few-shot examples (Lu et al., 2022, "Fantastically Ordered Prompts"); a judge is an
LLM, and a criterion's examples are its few shots.

Self-preference: an LLM judge tends to favour text written by its own model family (Panickssery
et al., 2024, "LLM Evaluators Recognize and Favor Their Own Generations"), so the audit warns when
the judge and the agent share one (:func:`model_family`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.config.criteria import Criterion
from fabtest.conversation import AgentResponse, Conversation, Turn
from fabtest.engine import transcript
from fabtest.engine.judge import Judge
from fabtest.experiment.model import CheckRecord, ScenarioResult, conversation_of
from fabtest.judging.rejudge import check_subject, judgeable, recorded_criterion
from fabtest.llm.base import LLM
from fabtest.llm.cache import salted

__all__ = ["DEFAULT_MAX_MOVE", "KINDS", "REWORDINGS", "Moved", "audit_table", "model_family", "perturb_experiment",
           "self_preference"]

#: A criterion whose perturbed verdicts move more often than this is flagged: one judgement in five
#: moving under changes that keep the meaning is more than a criterion you gate on should allow.
DEFAULT_MAX_MOVE = 0.2

KINDS = ("unchanged", "reworded", "examples", "no context", "other model")

#: (variant, frame): the criterion's text put in a frame that keeps every word of it.
REWORDINGS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("requirement", lambda text: f"The following requirement must hold: {text}"),
    ("plain", lambda text: (text[:1].lower() + text[1:]).rstrip(" .!")),
)

#: What replaces the user's message when the context is removed.
NOT_SHOWN = "(not shown)"


@dataclass
class Moved:
    """One recorded check under one perturbation: the verdicts and how many left the recorded one."""

    scenario_id: str
    scenario_name: str
    iteration: int
    criterion: str
    turn: int | None
    scope: str
    kind: str
    variant: str
    recorded: str
    verdicts: list[str] = field(default_factory=list)

    @property
    def moved(self) -> int:
        return sum(v != self.recorded for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario_id, "name": self.scenario_name, "iteration": self.iteration,
                "criterion": self.criterion, "turn": self.turn, "scope": self.scope, "kind": self.kind,
                "variant": self.variant, "recorded": self.recorded, "verdicts": list(self.verdicts),
                "moved": self.moved}


@dataclass(frozen=True)
class _Variant:
    """One way to ask a batch: its criteria (in the batch's order), which of them it changed, the
    subject and the judge LLM."""

    kind: str
    variant: str
    criteria: list[Criterion]
    changed: list[bool]
    subject: str
    llm: LLM


def _reworded(criterion: Criterion, frame: Callable[[str], str]) -> Criterion:
    """The criterion with its text framed: the description, or an ad-hoc criterion's name (its
    only text), so the answer's name is the framed one too."""
    if criterion.ad_hoc:
        text = frame(criterion.name)
        return Criterion(text, text, list(criterion.good_examples), list(criterion.bad_examples))
    return Criterion(criterion.name, frame(criterion.description), list(criterion.good_examples),
                     list(criterion.bad_examples))


def _rotated(criterion: Criterion) -> tuple[Criterion, bool]:
    good, bad = criterion.good_examples, criterion.bad_examples
    changed = len(good) > 1 or len(bad) > 1
    return Criterion(criterion.name, criterion.description, [*good[1:], *good[:1]], [*bad[1:], *bad[:1]]), changed


def _variants(criteria: list[Criterion], conversation: Conversation, scope: str, turn: int | None,
              llm: LLM, other: LLM | None, max_file_bytes: int) -> list[_Variant]:
    subject = check_subject(conversation, scope, turn, max_file_bytes)
    every = [True] * len(criteria)
    out = [_Variant("unchanged", "", criteria, every, subject, llm)]
    for name, frame in REWORDINGS:
        reworded = [_reworded(c, frame) for c in criteria]
        if len({c.name for c in reworded}) == len(reworded):  # two ad-hoc texts may frame alike: not askable
            out.append(_Variant("reworded", name, reworded, every, subject, llm))
    rotated = [_rotated(c) for c in criteria]
    if any(changed for _, changed in rotated):
        out.append(_Variant("examples", "rotated", [c for c, _ in rotated], [ch for _, ch in rotated], subject, llm))
    if scope == "response" and turn:
        alone = Conversation(turns=[Turn(1, NOT_SHOWN, AgentResponse(conversation.turns[turn - 1].response.text))])
        out.append(_Variant("no context", "reply alone", criteria, every, check_subject(alone, "response", 1), llm))
    if other is not None:
        out.append(_Variant("other model", other.model or "", criteria, every, subject, other))
    return out


def perturb_experiment(
    results: Sequence[ScenarioResult],
    llm: LLM,
    *,
    other: LLM | None = None,
    times: int = 1,
    criterion: str | None = None,
    scenario: str | None = None,
    progress: Callable[[str], None] | None = None,
    files_dir: Path | None = None,
    max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES,
) -> list[Moved]:
    """Every judgeable recorded check under every perturbation that applies to it, ``times``
    judgements each (each its own cache entry: salt ``perturb/<kind>/<variant>/K``); the judge
    sees the files kept in ``files_dir``, each inline up to ``max_file_bytes``, as rejudge shows them."""
    if times < 1:
        raise ValueError(f"--times must be at least 1, got {times}")
    rows: list[Moved] = []
    for result in results:
        if scenario is not None and not (result.id.startswith(scenario) or result.name == scenario):
            continue
        groups: dict[tuple[str, int | None], list[CheckRecord]] = {}
        for check in [*result.evaluations, *result.expectations]:
            if judgeable(result, check) and (criterion is None or check.criterion == criterion):
                groups.setdefault((str(check.data["scope"]), check.turn), []).append(check)
        if progress and groups:
            progress(f"{result.id} iteration {result.iteration}: {sum(map(len, groups.values()))} checks")
        conversation = conversation_of(result, files_dir=files_dir)
        for (scope, turn), checks in groups.items():
            unique = {c.criterion: recorded_criterion(result, c) for c in checks}
            names = list(unique)
            for variant in _variants(list(unique.values()), conversation, scope, turn, llm, other, max_file_bytes):
                answers = []
                for k in range(times):
                    judge = Judge(salted(variant.llm, f"perturb/{variant.kind}/{variant.variant}/{k}"))
                    answers.append(judge.evaluate_criteria(variant.criteria, subject=variant.subject,
                                                           scope="response" if scope == "response"
                                                           else "conversation").value)
                for check in checks:
                    position = names.index(check.criterion)
                    if not variant.changed[position]:
                        continue
                    verdicts = [str(answer[position].verdict) for answer in answers]
                    rows.append(Moved(result.id, result.name, result.iteration, check.criterion, turn, scope,
                                      variant.kind, variant.variant, check.status, verdicts))
    return rows


def _rate(moved: int, judged: int) -> float | None:
    return round(moved / judged, 4) if judged else None


def audit_table(rows: Sequence[Moved], max_move: float = DEFAULT_MAX_MOVE) -> dict[str, Any]:
    """Per criterion: the checks, per perturbation kind the judgements and how many moved, the move
    rate over every perturbation but the ``unchanged`` control, and ``flagged`` above ``max_move``."""
    by_criterion: dict[str, list[Moved]] = {}
    for row in rows:
        by_criterion.setdefault(row.criterion, []).append(row)
    criteria: dict[str, Any] = {}
    for name, items in sorted(by_criterion.items()):
        kinds: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            of_kind = [r for r in items if r.kind == kind]
            if of_kind:
                judged, moved = sum(len(r.verdicts) for r in of_kind), sum(r.moved for r in of_kind)
                kinds[kind] = {"judgements": judged, "moved": moved, "rate": _rate(moved, judged)}
        perturbed = [r for r in items if r.kind != "unchanged"]
        judged, moved = sum(len(r.verdicts) for r in perturbed), sum(r.moved for r in perturbed)
        rate = _rate(moved, judged)
        criteria[name] = {
            "checks": len({(r.scenario_id, r.iteration, r.turn) for r in items}),
            "judgements": judged, "moved": moved, "move_rate": rate, "by_kind": kinds,
            "flagged": rate is not None and rate > max_move,
        }
    return {"max_move": max_move, "criteria": criteria, "flagged": [n for n, c in criteria.items() if c["flagged"]]}


#: Lower-case name prefixes of model families (a judge and an agent of one family: self-preference).
_FAMILIES = (
    ("gemini", "gemini"), ("gemma", "gemini"), ("models/gemini", "gemini"),
    ("gpt", "openai gpt"), ("chatgpt", "openai gpt"), ("o1", "openai gpt"), ("o3", "openai gpt"), ("o4", "openai gpt"),
    ("claude", "anthropic claude"), ("llama", "meta llama"), ("meta-llama", "meta llama"),
    ("mistral", "mistral"), ("mixtral", "mistral"), ("qwen", "qwen"), ("deepseek", "deepseek"),
)


def model_family(model: str | None) -> str | None:
    """The family of a model name (``gemini-2.5-flash`` -> ``gemini``), None when unknown. A
    provider prefix (``openai/gpt-4o``, ``models/gemini-2.0``) is ignored."""
    if not model:
        return None
    name = model.strip().lower()
    candidates = [name, name.rsplit("/", 1)[-1]]
    for text in candidates:
        for prefix, family in _FAMILIES:
            if text.startswith(prefix):
                return family
    return None


def agent_models(results: Sequence[ScenarioResult]) -> list[str]:
    """The agent models the experiment recorded (its metadata, and each turn's reported model)."""
    seen: dict[str, None] = {}
    for result in results:
        model = result.agent_metadata.get("model") if isinstance(result.agent_metadata, dict) else None
        if isinstance(model, str) and model:
            seen[model] = None
        for turn in result.transcript:
            reported = turn.metadata.get("model") if isinstance(turn.metadata, dict) else None
            if isinstance(reported, str) and reported:
                seen[reported] = None
    return list(seen)


def self_preference(judges: Sequence[str | None], agents: Sequence[str]) -> list[str]:
    """A warning per judge model that shares a family with an agent model."""
    out = []
    for judge in judges:
        family = model_family(judge)
        same = [a for a in agents if family is not None and model_family(a) == family]
        if same:
            out.append(f"the judge ({judge}) and the agent ({', '.join(same)}) share the model family {family}: "
                       "a judge tends to favour its own family's text (self-preference); "
                       "try --perturb-model with a model of another family")
    return out
