"""Number formatting shared by the console summary, the comparison and the HTML report."""

from __future__ import annotations

from typing import Any

__all__ = ["count", "git_line", "llm_line", "num", "pct", "pp", "signed", "timestamp", "usd"]

RULE_HEAVY = "━" * 66
RULE_LIGHT = "─" * 66


def pct(rate: float | None, digits: int = 1) -> str:
    """A fraction as a percentage, ``n/a`` when there was nothing to rate."""
    return "n/a" if rate is None else f"{rate * 100:.{digits}f}%"


def pp(delta: float | None, digits: int = 1) -> str:
    """A difference of two fractions in percentage points, signed."""
    return "n/a" if delta is None else f"{delta * 100:+.{digits}f}pp"


def num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def signed(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def usd(value: float | None, signed: bool = False) -> str:
    """Dollars with enough digits for a cent's fraction (a scenario often costs $0.0004); ``n/a`` when unpriced."""
    if value is None:
        return "n/a"
    digits = 2 if abs(value) >= 10 else 4 if abs(value) >= 0.01 or value == 0 else 6
    return f"{'+' if signed and value >= 0 else '-' if value < 0 else ''}${abs(value):,.{digits}f}"


def count(value: int) -> str:
    return f"{value:,}"


def timestamp(value: str | None) -> str:
    """``2025-01-16T14:30:00Z`` → ``2025-01-16 14:30:00 UTC`` (other strings unchanged)."""
    if not value:
        return "unknown"
    if value.endswith("Z") and "T" in value:
        return value[:-1].replace("T", " ") + " UTC"
    return value.replace("T", " ")


def git_line(experiment: dict[str, Any]) -> str:
    commit = experiment.get("git_commit")
    if not commit:
        return "not a git repository"
    text = str(commit)[:10]
    if experiment.get("git_branch"):
        text += f" ({experiment['git_branch']})"
    if experiment.get("git_dirty"):
        text += " +uncommitted changes"
    return text


def llm_line(entry: dict[str, Any] | None) -> str:
    """``provider / model`` or the no-LLM note the summary must show
    (docs/how-to/offline.md "Running without a key")."""
    entry = entry or {}
    provider, model = entry.get("provider"), entry.get("model")
    if not provider and not model:
        return "none (no LLM configured)"
    text = " / ".join(str(x) for x in (provider, model) if x)
    return f"{text} ({entry['note']})" if entry.get("note") else text
