"""Text renderings of judge agreement (rejudge) tables; the numbers come from :mod:`.rejudge`."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

__all__ = ["low_confidence_count", "render_rejudge_text", "split_note"]


def split_note(detail: dict[str, Any]) -> str:
    """``"low confidence: 2 passed, 1 failed"`` for a check whose judge samples split, else ""."""
    samples = detail.get("samples")
    if detail.get("confidence") != "low" or not isinstance(samples, dict):
        return ""
    return "low confidence: " + ", ".join(f"{n} {label}" for label, n in samples.items())


def low_confidence_count(doc: dict[str, Any]) -> int:
    """Checks of an experiment whose judge samples did not agree."""
    count = 0
    for entry in doc.get("scenario_results") or []:
        for block in ("evaluations", "expectations"):
            details = (entry.get(block) or {}).get("details") if isinstance(entry, dict) else None
            count += sum(1 for d in details or [] if isinstance(d, dict) and d.get("confidence") == "low")
    return count


def _row(name: str, entry: dict[str, Any]) -> list[Any]:
    return [name, entry["checks"], f"{entry['self_agreement']:.0%}", f"{entry['unanimous']}/{entry['checks']}",
            f"{entry['flip_rate']:.0%}", entry["majority_changed"]]


_HEADERS = ["", "Checks", "Self-agreement", "Unanimous", "Flip rate", "Majority changed"]


def render_rejudge_text(table: dict[str, Any], *, source: str, new_id: str | None, times: int) -> str:
    """Per criterion, then per scenario: how often the judge agreed with itself and with the record."""
    if not table["overall"]:
        return f"Nothing to re-judge in {source} (no judged 'satisfy' checks matched).\n"
    lines = [f"Re-judged {table['overall']['checks']} checks of {source}, {times} times each.", ""]
    lines.append(tabulate([_row(n, e) for n, e in table["criteria"].items()], headers=["Criterion", *_HEADERS[1:]]))
    lines.append("")
    rows = [_row(f"{e['name']} ({key.rpartition('#')[2]})", e) for key, e in table["scenarios"].items()]
    lines.append(tabulate(rows, headers=["Scenario (iteration)", *_HEADERS[1:]]))
    lines.append("")
    lines.append("Flip rate: share of re-judgements unlike the recorded verdict. Self-agreement: share of the "
                 f"{times} verdicts equal to their most common one.")
    if new_id:
        lines.append(f"Re-judged experiment: {new_id} (compare: fabtest-compare {source} {new_id})")
    return "\n".join(lines) + "\n"
