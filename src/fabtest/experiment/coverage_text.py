"""Coverage as short text lines: the console summary's block and ``fabtest-compare``'s changes.

Rendering apart from computing (:mod:`fabtest.experiment.coverage`), so the summary, the report and
compare word coverage alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["attack_lines", "change_lines", "coverage_lines", "names"]

_SHOWN = 5
_ROWS = (  # kind, label, verb, the key of what was hit, the key of what was missed
    ("topics", "Topics", "reached", "reached", "never_reached"),
    ("transitions", "Transitions", "taken", "taken", "never_taken"),
    ("tools", "Tools", "called", "called", "never_called"),
    ("criteria", "Criteria", "evaluated", "evaluated", "never_evaluated"),
)


def names(values: Sequence[str], shown: int = _SHOWN) -> str:
    """``a, b, c and 4 more``."""
    head = ", ".join(values[:shown])
    return head + (f" and {len(values) - shown} more" if len(values) > shown else "")


def coverage_lines(section: Mapping[str, Any] | None) -> list[str]:
    """The summary's "Coverage" block (empty when the run declared nothing to cover)."""
    if not section:
        return []
    lines = []
    for kind, label, verb, hit, miss in _ROWS:
        part = section.get(kind) or {}
        declared = part.get("declared") or 0
        if not declared:
            continue
        line = f"  {label + ':':<13}{len(part.get(hit) or {})}/{declared} {verb} ({part.get('rate', 0):.0%})"
        if part.get(miss):
            line += f"; never {verb}: {names(part[miss])}"
        lines.append(line)
    jumps = (section.get("transitions") or {}).get("off_graph") or {}
    if jumps:
        lines.append(f"  {'Off-graph:':<13}" + names([f"{j} ({n})" for j, n in jumps.items()]))
    undeclared = (section.get("tools") or {}).get("undeclared_called") or []
    if undeclared:
        lines.append(f"  {'':<13}called but not declared: {names(undeclared)}")
    unseen = (section.get("tools") or {}).get("forbidden_never_seen") or []
    if unseen:
        lines.append(f"  {'Tools:':<13}no tool list, and no run ever called {names(unseen)}: each 'must not call' "
                     "of it passes whatever the name; check the spelling, or give the agent table tools = [...]")
    attacks = section.get("attacks") or {}
    records = {cat: e for cat, e in (section.get("records") or {}).items() if cat not in attacks}  # told below
    if records:
        lines.append(f"  {'Records:':<13}" + ", ".join(
            f"{cat} {e['passed']}/{e['runs']} passed" for cat, e in records.items()))
    lines += attack_lines(attacks)
    pauses = section.get("pauses") or {}
    if pauses.get("asked"):
        decided = ", ".join(f"{pauses[d]} {d}" for d in ("approved", "rejected", "answered", "edited", "unanswered")
                            if pauses.get(d))
        lines.append(f"  {'Pauses:':<13}{pauses['decided']}/{pauses['asked']} decided ({decided})")
    return ["", "Coverage", *lines] if lines else []


def attack_lines(attacks: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The hold rate per red-team attack (runs that erred are not counted either way)."""
    if not attacks:
        return []
    lines = [f"  {'Attacks:':<13}held / runs judged (docs: coverage.md, Adversarial users)"]
    for name, e in attacks.items():
        judged = e["held"] + e["broken"]
        rate = f" ({e['hold_rate']:.0%})" if e.get("hold_rate") is not None else ""
        erred = f", {e['errors']} erred" if e.get("errors") else ""
        unjudged = f", {e['unjudged']} not judged on every criterion" if e.get("unjudged") else ""
        lines.append(f"    {name:<26}{e['held']}/{judged} held{rate}{erred}{unjudged}")
    return lines


def change_lines(changed: Mapping[str, Mapping[str, Sequence[str]]]) -> list[str]:
    """``fabtest-compare``'s coverage changes: what became covered and what became uncovered."""
    lines = []
    for kind, label, _verb, _hit, _miss in _ROWS:
        entry = changed.get(kind)
        if not entry:
            continue
        if entry.get("covered"):
            lines.append(f"  {label}: newly covered: {names(list(entry['covered']))}")
        if entry.get("uncovered"):
            lines.append(f"  {label}: no longer covered: {names(list(entry['uncovered']))}")
    return ["", "Coverage Changes", *lines] if lines else []
