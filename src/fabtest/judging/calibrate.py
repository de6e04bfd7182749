"""Judge calibration: how often does the judge agree with human labels?

``fabtest calibrate FILE.yaml`` judges labelled examples (a criterion, a response or a transcript,
and a human verdict) and reports accuracy, Cohen's kappa, the confusion matrix and the
disagreements per criterion. ``--from-features`` builds the labelled set from the good/bad examples
criteria already carry (``with examples:`` tables and ``Good:``/``Bad:`` docstring lines): each
example is judged against its criterion *without itself* among the examples shown to the judge
(leave-one-out), or the judge would only be copying the answer. Format: docs/how-to/flaky.md,
"Calibrate the judge against people".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabtest._internal.datafile import read_data_file
from fabtest.config.criteria import Criterion, parse_criterion_text, parse_examples_table
from fabtest.conversation import AgentResponse, Conversation, Turn
from fabtest.engine.judge import CriterionLabel, Judge, format_exchange, majority
from fabtest.engine.transcript import for_judge
from fabtest.errors import UsageError
from fabtest.judging.agreement import cohen_kappa, confusion_matrix
from fabtest.llm.base import LLM
from fabtest.llm.cache import salted

__all__ = ["HUMAN_LABELS", "JUDGE_LABELS", "LabelledExample", "calibrate", "calibration_report",
           "examples_from_features", "load_examples"]

HUMAN_LABELS = ("passed", "failed")
JUDGE_LABELS = ("passed", "failed", "inconclusive")
_ALIASES = {"passed": "passed", "pass": "passed", "good": "passed", "yes": "passed",
            "failed": "failed", "fail": "failed", "bad": "failed", "no": "failed"}


class _Exchange(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    user: str
    agent: str


class LabelledExample(BaseModel):
    """One labelled example (validated once, at the edge)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    criterion: str = Field(min_length=1)
    description: str | None = None
    scope: Literal["response", "conversation"] = "response"
    user: str = ""
    response: str | None = None
    transcript: list[_Exchange] | None = None
    verdict: str
    good_examples: list[str] = Field(default_factory=list)
    bad_examples: list[str] = Field(default_factory=list)
    source: str = ""
    #: where a label made in ``fabtest view`` came from and what the judge said then (for the record;
    #: calibrate judges the example again): docs/view.md, "Review and label"
    judge: str | None = None
    comment: str = ""
    scenario: str = ""
    iteration: int | None = None
    check: int | None = None
    #: ``conversation``: a person's mark on a whole run (docs/view.md, "Review and label"); ``judge``
    #: is then the run's recorded outcome
    kind: Literal["check", "conversation"] = "check"
    #: the simulated user's goal: the example is judged with the goal prompt (the judgement of
    #: ``the goal must be achieved``) over its transcript instead of as a criterion
    goal: str | None = None

    @field_validator("verdict")
    @classmethod
    def _label(cls, value: str) -> str:
        label = _ALIASES.get(value.strip().lower())
        if label is None:
            raise ValueError(f"verdict must be passed or failed (or good/bad), got {value!r}")
        return label

    def subject(self) -> str:
        """What the judge sees: the exchange (response scope) or the transcript."""
        if self.scope == "response":
            return format_exchange(Turn(1, self.user, AgentResponse(self.response or "")))
        turns = [Turn(i, t.user, AgentResponse(t.agent)) for i, t in enumerate(self.transcript or [], 1)]
        return Conversation(turns=turns).transcript()

    def text(self) -> str:
        return self.response if self.scope == "response" else self.subject()  # type: ignore[return-value]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    criteria: dict[str, str] = Field(default_factory=dict)
    examples: list[dict[str, Any]] = Field(min_length=1)


def load_examples(path: Path, declared: dict[str, str]) -> list[LabelledExample]:
    """The labelled examples of ``path``; a problem is a one-line :class:`UsageError` naming the key."""
    data = read_data_file(path, UsageError)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping with 'examples:' (and optionally 'criteria:')")
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: {_where(exc)}") from None
    descriptions = {**declared, **parsed.criteria}
    out = []
    for index, raw in enumerate(parsed.examples):
        key = f"examples[{index}]"
        try:
            example = LabelledExample.model_validate({**raw, "source": f"{path}:{key}"})
        except ValidationError as exc:
            raise UsageError(f"{path}: {key}.{_where(exc)}") from None
        if example.scope == "response" and example.response is None:
            raise UsageError(f"{path}: {key}: a response-scope example needs 'response:' (the agent's reply)")
        if example.scope == "conversation" and not example.transcript:
            raise UsageError(f"{path}: {key}: a conversation-scope example needs 'transcript:' "
                             "(a list of {user: ..., agent: ...})")
        if example.goal is not None and example.scope != "conversation":
            raise UsageError(f"{path}: {key}.goal: a goal is judged over a whole conversation: "
                             "give it 'scope: conversation' and a 'transcript:'")
        description = example.description or descriptions.get(example.criterion) or (
            f"the simulated user's goal is achieved: {example.goal}" if example.goal else None)
        if not description:  # judged on its bare name, a disagreement would blame the judge for a typo
            raise UsageError(f"{path}: {key}.criterion: {example.criterion!r} is not declared"
                             f"{_close(example.criterion, descriptions)}: declare it under 'criteria:' in this "
                             "file or [tool.fabtest.criteria] in pyproject.toml, or give the example a "
                             "'description:'")
        out.append(example.model_copy(update={"description": description}))
    return out


def _close(name: str, declared: dict[str, str]) -> str:
    import difflib

    near = difflib.get_close_matches(name, list(declared), n=1)
    if near:
        return f" (did you mean {near[0]!r}?)"
    return f" (declared: {', '.join(sorted(declared)[:8])})" if declared else " (none is declared)"


def _where(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
    return f"{loc}: {first.get('msg', 'invalid')}"


_TABLE_STEP = re.compile(r'the criterion "(?P<name>[^"]+)" means "(?P<desc>[^"]+)" with examples:\s*$')
_DOC_STEP = re.compile(r'the criterion "(?P<name>[^"]+)" means:\s*$')


def examples_from_features(paths: Sequence[Path]) -> list[LabelledExample]:
    """Labelled examples from the criteria declared with examples in ``*.feature`` files."""
    out: list[LabelledExample] = []
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*.feature"))})
    for file in files:
        lines = file.read_text(encoding="utf-8-sig").splitlines()
        for number, line in enumerate(lines):
            where = f"{file}:{number + 1}"
            if m := _TABLE_STEP.search(line):
                rows = [[c.strip() for c in row.strip().strip("|").split("|")]
                        for row in _following(lines, number, lambda s: s.startswith("|"))]
                try:
                    good, bad = parse_examples_table(rows)
                except ValueError as exc:
                    raise UsageError(f"{where}: {exc}") from None
                out += _labelled(m["name"], m["desc"], good, bad, where)
            elif (m := _DOC_STEP.search(line)) and number + 1 < len(lines) and lines[number + 1].strip() == '"""':
                body = _following(lines, number + 1, lambda s: s != '"""')
                description, good, bad = parse_criterion_text("\n".join(body))
                out += _labelled(m["name"], description, good, bad, where)
    return out


def _following(lines: list[str], index: int, keep: Callable[[str], bool]) -> list[str]:
    taken = []
    for line in lines[index + 1:]:
        if not keep(line.strip()):
            break
        taken.append(line.strip())
    return taken


def _labelled(name: str, description: str, good: list[str], bad: list[str], where: str) -> list[LabelledExample]:
    examples = [(text, "passed") for text in good] + [(text, "failed") for text in bad]
    return [LabelledExample(criterion=name, description=description, response=text, verdict=label,
                            good_examples=[g for g in good if g != text], bad_examples=[b for b in bad if b != text],
                            source=where) for text, label in examples]


@dataclass
class Judged:
    example: LabelledExample
    verdicts: list[CriterionLabel] = field(default_factory=list)
    reasoning: str = ""

    @property
    def verdict(self) -> str:
        return majority(self.verdicts)[0]

    @property
    def self_agreement(self) -> float:
        return max(Counter(self.verdicts).values()) / len(self.verdicts)


def calibrate(examples: Sequence[LabelledExample], llm: LLM, *, times: int = 1,
              progress: Callable[[str], None] | None = None) -> list[Judged]:
    """Every example judged ``times`` times (each repetition its own cache entry, salt
    ``calibrate/K``); the judge's verdict is the majority."""
    # the judge LLM's configured temperature (issue 27 point 6), not a hard-coded 0
    judges = [Judge(salted(llm, f"calibrate/{k}"), temperature=None) for k in range(times)]
    out = []
    for number, example in enumerate(examples, 1):
        if progress:
            progress(f"{number}/{len(examples)} {example.criterion}")
        criterion = Criterion(example.criterion, example.description or example.criterion,
                              list(example.good_examples), list(example.bad_examples))
        judged = Judged(example)
        for judge in judges:
            if example.goal is not None:  # the run's own goal judgement, on the transcript as a run shows it
                turns = [Turn(i, t.user, AgentResponse(t.agent)) for i, t in enumerate(example.transcript or [], 1)]
                goal = judge.goal_achieved(example.goal, for_judge(turns)).value
                judged.verdicts.append(goal.verdict)
                judged.reasoning = judged.reasoning or goal.reasoning
                continue
            [verdict] = judge.evaluate_criteria([criterion], subject=example.subject(), scope=example.scope).value
            judged.verdicts.append(verdict.verdict)
            judged.reasoning = judged.reasoning or verdict.reasoning
        out.append(judged)
    return out


def _stats(items: list[Judged]) -> dict[str, Any]:
    human = [j.example.verdict for j in items]
    judge = [j.verdict for j in items]
    kappa = cohen_kappa(human, judge)
    return {
        "examples": len(items),
        "accuracy": round(sum(a == b for a, b in zip(human, judge, strict=True)) / len(items), 4),
        "kappa": None if kappa is None else round(kappa, 4),
        "confusion": {"rows (human)": list(HUMAN_LABELS), "columns (judge)": list(JUDGE_LABELS),
                      "matrix": confusion_matrix(human, judge, JUDGE_LABELS)[:2]},
        "self_agreement": round(sum(j.self_agreement for j in items) / len(items), 4),
        "disagreements": [{"source": j.example.source, "text": j.example.text(), "human": j.example.verdict,
                           "judge": j.verdict, "verdicts": j.verdicts, "reasoning": j.reasoning}
                          for j in items if j.verdict != j.example.verdict],
    }


def calibration_report(judged: Sequence[Judged], times: int) -> dict[str, Any]:
    """Overall and per-criterion accuracy, kappa, confusion matrix, self-agreement, disagreements."""
    by_criterion: dict[str, list[Judged]] = {}
    for item in judged:
        by_criterion.setdefault(item.example.criterion, []).append(item)
    return {"times": times, "overall": _stats(list(judged)),
            "criteria": {name: _stats(items) for name, items in sorted(by_criterion.items())}}
