"""The pauses of a recorded run (``transcript[i].pauses``, docs/how-to/approvals.md) as a line of
text: one wording for the view, the Markdown diff and compare's text diff."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["pause_line"]


def pause_line(pause: Mapping[str, Any]) -> str:
    """``asked approval of refund {"order": "A1"}: rejected (no receipt) in turn 2``."""
    if pause.get("kind") == "question":
        asked = f"asked {json.dumps(pause.get('question') or '', ensure_ascii=False)}"
    else:
        args = json.dumps(pause.get("arguments") or {}, ensure_ascii=False, sort_keys=True)
        asked = f"asked approval of {pause.get('tool')} {args}"
    decision = str(pause.get("decision") or "unanswered")
    said = pause.get("answer") if decision == "answered" else pause.get("reason")
    if decision == "edited":
        said = json.dumps(pause.get("edited_arguments") or {}, ensure_ascii=False, sort_keys=True)
    when = f" in turn {pause['decided_in_turn']}" if pause.get("decided_in_turn") else ""
    return f"{asked}: {decision}" + (f" ({said})" if said else "") + when
