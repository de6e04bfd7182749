"""The criterion robustness audit's file: ``results/robustness/<experiment id>.json``.

``fabtest rejudge EXP --perturb`` (judging/perturb.py) writes it; ``fabtest show``, ``fabtest
report`` and ``fabtest view`` read it back beside the experiment and show the flagged criteria. It
lives in a subdirectory, as playbook traces do, so listing experiments (``*.json``) never takes it
for one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fabtest._internal.files import write_text_atomic

__all__ = ["ROBUSTNESS_DIR", "attach_robustness", "earlier_flags", "read_robustness", "robustness_path",
           "write_robustness"]

ROBUSTNESS_DIR = "robustness"


def robustness_path(results_dir: str | os.PathLike[str], experiment_id: str) -> Path:
    return Path(results_dir) / ROBUSTNESS_DIR / f"{experiment_id}.json"


def write_robustness(audit: dict[str, Any], results_dir: str | os.PathLike[str], experiment_id: str) -> Path:
    path = robustness_path(results_dir, experiment_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(audit, indent=2, ensure_ascii=False) + "\n")
    return path


def read_robustness(results_dir: str | os.PathLike[str], experiment_id: str) -> dict[str, Any] | None:
    """The audit of ``experiment_id``, or None when there is none (or it cannot be read: the
    experiment is still worth showing without it)."""
    path = robustness_path(results_dir, experiment_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def attach_robustness(doc: dict[str, Any], results_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``doc`` with its audit under ``robustness`` when one was written; without one (a run that just
    ended: the audit is made afterwards), the criteria it used that the latest earlier audit of each
    flagged, under ``robustness_flags`` (a copy; ``doc`` unchanged)."""
    exp_id = (doc.get("experiment") or {}).get("id") if isinstance(doc.get("experiment"), dict) else None
    audit = read_robustness(results_dir, str(exp_id)) if exp_id else None
    if audit:
        return {**doc, "robustness": audit}
    flags = earlier_flags(results_dir, list(doc.get("criteria_results") or {}))
    return {**doc, "robustness_flags": flags} if flags else doc


def earlier_flags(results_dir: str | os.PathLike[str], criteria: list[str]) -> list[dict[str, Any]]:
    """For each of ``criteria``, the newest audit in ``results/robustness/`` that judged it; the ones
    that audit flagged (its verdicts moved with the wording more than ``--max-move``), with the
    audit's experiment and figures: a run's verdicts on such a criterion may be noise."""
    audits = sorted(Path(results_dir, ROBUSTNESS_DIR).glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    out, seen = [], set()
    for path in audits:
        audit = read_robustness(results_dir, path.stem) or {}
        judged: dict[str, Any] = audit["criteria"] if isinstance(audit.get("criteria"), dict) else {}
        for name in criteria:
            if name in seen or name not in judged:
                continue
            seen.add(name)
            c = judged[name]
            if isinstance(c, dict) and c.get("flagged"):
                out.append({"criterion": name, "experiment": path.stem, "move_rate": c.get("move_rate"),
                            "moved": c.get("moved"), "judgements": c.get("judgements")})
    return out
