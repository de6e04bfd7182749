"""Turn-by-turn differences between two recorded conversations of one scenario.

When a scenario changes outcome between two experiments, the first question is where the two
conversations part: did the (simulated) user say something else, did the agent answer differently,
or did it call other tools? :func:`first_difference` finds that turn and :func:`diff_scenarios` pairs
the turns from there on, as plain data; ``experiment/compare.py`` renders it side by side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ConversationDiff", "TurnPair", "diff_scenarios", "first_difference", "pick_runs", "tool_summary"]

Part = Literal["user", "agent", "tools", "length"]

#: Turns shown before the first difference, for context.
CONTEXT_TURNS = 1


def tool_summary(turn: dict[str, Any]) -> list[str]:
    """The tool calls of a recorded turn as ``name(args)`` lines (results left out: too long)."""
    out = []
    for call in turn.get("tool_calls") or []:
        if isinstance(call, dict):
            args = ", ".join(f"{k}={v!r}" for k, v in sorted((call.get("arguments") or {}).items()))
            out.append(f"{call.get('name')}({args})")
    return out


def _norm(text: Any) -> str:
    return " ".join(str(text or "").split())


def first_difference(base: Sequence[dict[str, Any]], cur: Sequence[dict[str, Any]]) -> tuple[int, Part] | None:
    """The first turn (1-based) where the transcripts differ and what differs there: the user turn,
    then the agent's response, then its tool calls; ``length`` when one conversation simply goes on
    longer. None when they are the same (whitespace aside)."""
    for number, (a, b) in enumerate(zip(base, cur, strict=False), start=1):
        if _norm(a.get("user")) != _norm(b.get("user")) or _hashes(a, "user_files") != _hashes(b, "user_files"):
            return number, "user"
        if _norm(a.get("agent")) != _norm(b.get("agent")) or _hashes(a, "agent_files") != _hashes(b, "agent_files"):
            return number, "agent"
        if tool_summary(a) != tool_summary(b):
            return number, "tools"
    if len(base) != len(cur):
        return min(len(base), len(cur)) + 1, "length"
    return None


def _hashes(turn: dict[str, Any], key: str) -> list[Any]:
    """The contents of a message's files (a photo with other bytes is another message)."""
    return [f.get("sha256") for f in turn.get(key) or [] if isinstance(f, dict)]


@dataclass
class TurnPair:
    """Turn ``number`` on both sides (None where that side has no such turn)."""

    number: int
    baseline: dict[str, Any] | None
    current: dict[str, Any] | None


@dataclass
class ConversationDiff:
    scenario_id: str
    name: str
    baseline_passed: bool | None
    current_passed: bool | None
    first: int | None  # first differing turn, None when the conversations are the same
    part: Part | None
    pairs: list[TurnPair] = field(default_factory=list)
    #: the iterations shown: a run whose outcome differs on each side when there is one (``pick_runs``)
    baseline_iteration: int | None = None
    current_iteration: int | None = None

    @property
    def what(self) -> str:
        return {"user": "the user turn differs", "agent": "the agent's response differs",
                "tools": "the agent's tool calls differ", "length": "one conversation goes on longer",
                None: "the conversations are the same"}[self.part]

    def first_sides(self, width: int = 160) -> tuple[str, str] | None:
        """What each side has at the first differing turn, in the part that differs (the user's
        message, the agent's reply, or its tool calls), each shortened to ``width`` characters: the
        "why" that fabtest-compare and the view's comparison show inline under a changed scenario.
        None when the conversations are the same."""
        pair = next((p for p in self.pairs if p.number == self.first), None)
        if pair is None:
            return None

        def side(turn: dict[str, Any] | None) -> str:
            if turn is None:
                return "(no such turn)"
            if self.part == "tools":
                text = "; ".join(tool_summary(turn)) or "(no tool calls)"
            else:
                text = _norm(turn.get("user" if self.part == "user" else "agent"))
            return text if len(text) <= width else text[:width - 1] + "…"

        return side(pair.baseline), side(pair.current)


def _runs(entries: Iterable[Any], scenario_id: str) -> list[dict[str, Any]]:
    runs = [e for e in entries if isinstance(e, dict) and e.get("id") == scenario_id and not e.get("skipped")]
    return sorted(runs, key=lambda e: e.get("iteration") or 1)


def pick_runs(base: Sequence[dict[str, Any]],
              cur: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The two runs worth diffing: a passing baseline run against a failing current run (a newly
    failing or flaky scenario), else a failing baseline run against a passing current one (newly
    passing), else the first run of each. Iteration 1 against iteration 1 showed two passing runs
    of a scenario listed as newly failing, "the same"."""
    for want_base, want_cur in ((True, False), (False, True)):
        b = next((e for e in base if bool(e.get("passed")) is want_base), None)
        c = next((e for e in cur if bool(e.get("passed")) is want_cur), None)
        if b is not None and c is not None:
            return b, c
    return (base[0] if base else None), (cur[0] if cur else None)


def _turns(entry: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [t for t in (entry or {}).get("transcript") or [] if isinstance(t, dict)]


def diff_scenarios(base_doc: dict[str, Any], cur_doc: dict[str, Any],
                   scenario_ids: Sequence[str]) -> list[ConversationDiff]:
    """The conversation diff of each scenario id both experiments ran (the runs ``pick_runs`` picks); an id
    may be a unique prefix or an exact name. Unknown ids raise ``KeyError`` naming them."""
    base_entries = [e for e in base_doc.get("scenario_results") or [] if isinstance(e, dict)]
    cur_entries = [e for e in cur_doc.get("scenario_results") or [] if isinstance(e, dict)]
    cur_ids = {e.get("id") for e in cur_entries}
    shared = {e.get("id"): e.get("name") for e in base_entries if e.get("id") in cur_ids}
    out = []
    for wanted in scenario_ids:
        matches = [i for i, n in shared.items() if i == wanted or n == wanted or str(i).startswith(wanted)]
        if len(matches) != 1:
            problem = "no scenario both experiments ran" if not matches else f"{len(matches)} scenarios"
            raise KeyError(f"--scenario {wanted!r}: {problem} matches it (give its id, a unique id prefix or its name)")
        sid = str(matches[0])
        out.append(_diff(sid, *pick_runs(_runs(base_entries, sid), _runs(cur_entries, sid))))
    return out


def _diff(scenario_id: str, base: dict[str, Any] | None, cur: dict[str, Any] | None) -> ConversationDiff:
    a, b = _turns(base), _turns(cur)
    found = first_difference(a, b)
    diff = ConversationDiff(scenario_id, str((cur or base or {}).get("name", scenario_id)),
                            (base or {}).get("passed"), (cur or {}).get("passed"),
                            found[0] if found else None, found[1] if found else None,
                            baseline_iteration=(base or {}).get("iteration") or (1 if base else None),
                            current_iteration=(cur or {}).get("iteration") or (1 if cur else None))
    if found:
        start = max(1, found[0] - CONTEXT_TURNS)
        for number in range(start, max(len(a), len(b)) + 1):
            diff.pairs.append(TurnPair(number, a[number - 1] if number <= len(a) else None,
                                       b[number - 1] if number <= len(b) else None))
    return diff
