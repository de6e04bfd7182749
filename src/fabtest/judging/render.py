"""Text renderings of judge agreement (rejudge) tables; the numbers come from :mod:`.rejudge`."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from fabtest.experiment.stats import low_confidence_count

__all__ = ["low_confidence_count", "render_calibration_text", "render_rejudge_text", "split_note"]


def split_note(detail: dict[str, Any]) -> str:
    """``"low confidence: 2 passed, 1 failed"`` for a check whose judge samples split, else ""."""
    samples = detail.get("samples")
    if detail.get("confidence") != "low" or not isinstance(samples, dict):
        return ""
    return "low confidence: " + ", ".join(f"{n} {label}" for label, n in samples.items())


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


def _kappa(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render_calibration_text(report: dict[str, Any], *, source: str) -> str:
    """Per criterion: accuracy and kappa against the human labels, the confusion matrix, and every
    disagreement (the text, both verdicts, the judge's reason)."""
    times = report["times"]
    headers = ["Criterion", "Examples", "Accuracy", "Kappa"] + (["Self-agreement"] if times > 1 else [])
    rows = []
    for name, e in [*report["criteria"].items(), ("(all)", report["overall"])]:
        row = [name, e["examples"], f"{e['accuracy']:.0%}", _kappa(e["kappa"])]
        rows.append(row + ([f"{e['self_agreement']:.0%}"] if times > 1 else []))
    lines = [f"Judge calibration on {source}"
             + (f" ({times} verdicts per example, majority kept)" if times > 1 else ""),
             "", tabulate(rows, headers=headers), "", "Confusion matrix (rows: human, columns: judge):"]
    matrix = report["overall"]["confusion"]["matrix"]
    lines.append(tabulate([[label, *counts] for label, counts in zip(("passed", "failed"), matrix, strict=True)],
                          headers=["", "passed", "failed", "inconclusive"]))
    disagreements = [(name, d) for name, e in report["criteria"].items() for d in e["disagreements"]]
    if disagreements:
        lines += ["", f"Disagreements ({len(disagreements)}):"]
        for name, d in disagreements:
            text = " ".join(str(d["text"]).split())
            text = text if len(text) <= 100 else text[:99] + "…"
            lines.append(f"  - {name}: human {d['human']}, judge {d['judge']} ({d['source']})")
            lines.append(f"    {text!r}")
            if d["reasoning"]:
                lines.append(f"    judge: {d['reasoning']}")
    return "\n".join(lines) + "\n"
