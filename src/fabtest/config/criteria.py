"""Quality criteria: a name, what it means, and examples that calibrate the judge.

Criteria are declared at project level, in a Feature or Rule Background, or in a scenario; a
lower level adds criteria or redefines a name (``merge``). An assertion step names either a
declared criterion or writes an ad-hoc description (``resolve``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_GOOD = ("good", "pass", "passed", "yes")
_BAD = ("bad", "fail", "failed", "no")


@dataclass(frozen=True)
class Criterion:
    """One quality criterion. Examples are shown to the judge to anchor what good and bad look like."""

    name: str
    description: str
    good_examples: list[str] = field(default_factory=list)
    bad_examples: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a criterion needs a name")
        if not self.description.strip():
            raise ValueError(f"criterion {self.name!r} needs a description")

    @property
    def ad_hoc(self) -> bool:
        """True for a criterion written inline in a step (its name is its description)."""
        return self.name == self.description

    def with_examples(self, good: list[str], bad: list[str]) -> Criterion:
        """A copy with more calibration examples (a later examples table adds to earlier ones)."""
        return Criterion(self.name, self.description, [*self.good_examples, *good], [*self.bad_examples, *bad])

    def to_fingerprint(self) -> dict[str, Any]:
        """Canonical form for the criteria hash: examples are part of what the judge sees."""
        return {
            "name": self.name,
            "description": self.description,
            "good_examples": list(self.good_examples),
            "bad_examples": list(self.bad_examples),
        }


#: Declared criteria by name. A plain dict so inheritance is a dict merge.
CriteriaSet = dict[str, Criterion]


def merge(parent: Mapping[str, Criterion], child: Mapping[str, Criterion]) -> CriteriaSet:
    """Inheritance: criteria accumulate and a name redefined lower replaces the one above."""
    merged: CriteriaSet = dict(parent)
    merged.update(child)
    return merged


def resolve(text: str, declared: Mapping[str, Criterion]) -> Criterion:
    """The declared criterion called ``text``, else an ad-hoc criterion described by ``text`` itself."""
    key = text.strip()
    if key in declared:
        return declared[key]
    return Criterion(name=key, description=key)


def parse_examples_table(rows: list[list[str]]) -> tuple[list[str], list[str]]:
    """Good and bad examples from a Gherkin table ``| example | verdict |`` (header row optional).

    The verdict column says ``good`` or ``bad``; anything else is an error so a typo never turns a
    bad example into a good one.
    """
    good: list[str] = []
    bad: list[str] = []
    body = rows
    if rows and [c.strip().lower() for c in rows[0]][:2] == ["example", "verdict"]:
        body = rows[1:]
    for number, row in enumerate(body, start=1):
        if len(row) < 2:
            raise ValueError(f"examples table row {number}: expected | example | verdict |, got {row!r}")
        example, verdict = row[0].strip(), row[1].strip().lower()
        if not example:
            raise ValueError(f"examples table row {number}: the example is empty")
        if verdict in _GOOD:
            good.append(example)
        elif verdict in _BAD:
            bad.append(example)
        else:
            raise ValueError(f"examples table row {number}: verdict must be 'good' or 'bad', got {row[1]!r}")
    return good, bad


def parse_criterion_text(text: str) -> tuple[str, list[str], list[str]]:
    """Split a docstring into (description, good examples, bad examples).

    Lines starting with ``Good:`` or ``Bad:`` (any case) are examples; every other non-blank line
    belongs to the description, so a multi-line description keeps its wording.
    """
    description: list[str] = []
    good: list[str] = []
    bad: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        lowered = line.lower()
        if lowered.startswith("good:"):
            _append_example(good, line[5:])
        elif lowered.startswith("bad:"):
            _append_example(bad, line[4:])
        elif line:
            description.append(line)
    return " ".join(description), good, bad


def criterion_from_text(name: str, text: str) -> Criterion:
    """A criterion from a step docstring (description plus optional Good:/Bad: lines)."""
    description, good, bad = parse_criterion_text(text)
    return Criterion(name.strip(), description, good, bad)


def _append_example(target: list[str], text: str) -> None:
    example = text.strip()
    if len(example) >= 2 and example[0] == example[-1] and example[0] in "\"'":
        example = example[1:-1].strip()
    if example:
        target.append(example)
