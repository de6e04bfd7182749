"""The criterion robustness audit in words (``fabtest rejudge --perturb``, judging/perturb.py):
one table for the command and for the console summary (``fabtest show``), and an HTML panel for
the report and ``fabtest view``, so the three say the same."""

from __future__ import annotations

from html import escape
from typing import Any

from tabulate import tabulate

__all__ = ["KIND_ORDER", "robustness_html", "robustness_lines"]

KIND_ORDER = ("unchanged", "reworded", "examples", "no context", "other model")


def _cell(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "-"
    return f"{entry['moved']}/{entry['judgements']}"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"


def _rows(audit: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    criteria = audit.get("criteria") or {}
    kinds = [k for k in KIND_ORDER if any(k in (c.get("by_kind") or {}) for c in criteria.values())]
    rows = []
    for name, c in criteria.items():
        kind_cells = [_cell((c.get("by_kind") or {}).get(k)) for k in kinds]
        rows.append([name, str(c.get("checks")), *kind_cells, _pct(c.get("move_rate")),
                     "FLAGGED" if c.get("flagged") else ""])
    return ["Criterion", "Checks", *kinds, "Moved", "Flag"], rows


def robustness_lines(audit: dict[str, Any]) -> list[str]:
    """The audit as text: per criterion, moved/judged per perturbation, the move rate, the flags
    and the self-preference warnings."""
    max_move = float(audit.get("max_move") or 0)
    if not audit.get("criteria"):
        return ["Criterion robustness: nothing to perturb (no judged 'satisfy' checks matched)."]
    headers, rows = _rows(audit)
    lines = [f"Criterion robustness ({audit.get('times', 1)} judgement(s) per check and perturbation; "
             f"flag above {max_move:.0%} moved)",
             *("  " + line for line in tabulate(rows, headers=headers).splitlines())]
    lines.append("  Moved: perturbed judgements unlike the recorded verdict (the 'unchanged' control not counted).")
    for name in audit.get("flagged") or []:
        c = audit["criteria"][name]
        lines.append(f"  FLAGGED: {name!r} moved in {_pct(c['move_rate'])} of its perturbed judgements "
                     f"({c['moved']}/{c['judgements']}), above {max_move:.0%}")
    for warning in audit.get("warnings") or []:
        lines.append(f"  WARNING: {warning}")
    return lines


def robustness_html(audit: dict[str, Any] | None) -> str:
    """The audit as a panel (empty without one)."""
    if not isinstance(audit, dict) or not audit.get("criteria"):
        return ""
    headers, rows = _rows(audit)
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    notes = "".join(f'<p class="muted">{escape(w)}</p>' for w in audit.get("warnings") or [])
    flagged = audit.get("flagged") or []
    summary = (f"{len(flagged)} flagged above {float(audit.get('max_move') or 0):.0%} moved: {', '.join(flagged)}"
               if flagged else "no criterion flagged")
    return (f'<h2>Criterion robustness</h2><div class="panel"><p>{escape(summary)}</p>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            '<p class="muted">moved/judged per perturbation (fabtest rejudge --perturb); '
            f"the unchanged control is not counted in Moved.</p>{notes}</div>")
