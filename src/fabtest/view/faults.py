"""The fault matrices ``fabtest faults`` wrote (``<results>/faults/<id>.faults.json``) as one page:
per matrix, the faults coverage and the scenario x tool x fault table, the broken cells first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabtest.view.layout import e, page

__all__ = ["FAULTS_PATH", "faults_page", "read_matrices"]

FAULTS_PATH = "faults.html"


def read_matrices(results_dir: Path) -> list[dict[str, Any]]:
    """Every readable fault matrix under ``results_dir/faults``, newest first (unreadable ones skipped)."""
    found = []
    for path in sorted((results_dir / "faults").glob("*.faults.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
            found.append({**doc, "file": path.name})
    return found


def faults_page(matrices: list[dict[str, Any]]) -> str:
    if not matrices:
        body = ('<p class="muted">No fault matrix yet: <code>fabtest faults features/</code> runs each passing '
                "scenario again once per tool it called and per fault, and writes it here.</p>")
        return page("fabtest view · faults", "", body, active=FAULTS_PATH)
    return page("fabtest view · faults", "", "".join(_matrix(m) for m in matrices), active=FAULTS_PATH)


_ROW_CLASS = {"broke": "down", "held": "up"}  # a pair not injectable says nothing of the agent: no colour


def _matrix(doc: dict[str, Any]) -> str:
    coverage = (doc.get("coverage") or {}).get("faults") or {}
    rate = coverage.get("rate")
    head = (f'<h2 id="{e(doc.get("baseline"))}">Fault matrix {e(doc.get("baseline"))}</h2>'
            f'<p>resilience: {e(doc.get("held"))} held, {e(doc.get("broke"))} broke'
            + (f', {e(doc.get("not_injectable"))} not injectable' if doc.get("not_injectable") else "")
            + f', over {e(doc.get("runs"))} '
            f'fault run(s) ({e(", ".join(map(str, doc.get("faults") or [])))})'
            + (f'; faults coverage <b>{rate:.0%}</b> of {e(coverage.get("declared"))} tool x fault pair(s)'
               if isinstance(rate, (int, float)) else "") + "</p>")
    rows = sorted((r for r in doc["rows"] if isinstance(r, dict)), key=lambda r: r.get("outcome") != "broke")
    cells = "".join(
        f'<tr class="{_ROW_CLASS.get(str(r.get("outcome")), "")}"><td>{e(r.get("scenario"))}</td>'
        f'<td><code>{e(r.get("tool"))}</code></td><td>{e(r.get("fault"))}</td><td>{e(r.get("outcome"))}</td>'
        f'<td>{e(r.get("check"))}</td></tr>' for r in rows)
    return (head + '<table class="faults"><thead><tr><th>scenario</th><th>tool</th><th>fault</th><th>outcome</th>'
            f"<th>failing check</th></tr></thead><tbody>{cells}</tbody></table>")
