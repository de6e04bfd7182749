"""What a run covered of what the project declares: topics, transitions, tools, criteria, records.

A suite only answers the questions it asks; coverage says which it never asked. Each scenario run
is reduced to a small, hashable :class:`RunFacts` (what was declared for it and what happened in
it), so the streaming recorder keeps one per run (identical runs share one object) instead of
transcripts, and :func:`summarise` adds them up into the experiment's ``coverage`` section
(README "Coverage"). Coverage is about what the suite *exercised*, not whether it passed: a
criterion counts as evaluated when a step checked it, whatever the verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fabtest.errors import CoverageFloorError
from fabtest.experiment.model import ScenarioResult

__all__ = ["KINDS", "CoverageFloorError", "RunFacts", "below_floors", "changes", "coverage_of", "parse_floor",
           "fault_coverage", "run_facts", "summarise"]

#: the kinds a ``--fabtest-min-coverage KIND=RATE`` floor may name, each with a rate in the section
KINDS = ("topics", "transitions", "tools", "criteria")

_FORBIDS = ("not_call_tool", "not_include_call")  # the check types that pass when a tool is not called
_MAX_SHAPES = 5  # argument shapes listed per tool: enough to see variety, bounded for huge suites
_ARROW = " -> "


@dataclass(frozen=True)
class RunFacts:
    """What one scenario run declared and exercised, as plain hashable values."""

    topics: tuple[tuple[str, tuple[str, ...]], ...] = ()  # declared topic -> its successors
    path: tuple[str, ...] = ()
    off_graph: tuple[str, ...] = ()  # "a -> b"
    tools_declared: tuple[str, ...] = ()
    tool_calls: tuple[tuple[str, str], ...] = ()  # (tool, argument shape)
    tools_forbidden: tuple[str, ...] = ()  # the tools a "must not call" / "not include a call" step named
    criteria_declared: tuple[str, ...] = ()
    criteria_checked: tuple[str, ...] = ()
    record: tuple[str, str, bool] | None = None  # (record id, category, passed)
    attack: tuple[str, str] | None = None  # (attack, held / broken / unjudged / error)
    skipped: bool = False
    pauses: tuple[tuple[str, str], ...] = ()  # (the tool asked for approval, or "question"; its decision)


def run_facts(result: ScenarioResult) -> RunFacts:
    """The coverage facts of one run (skipped runs declare but exercise nothing)."""
    calls = tuple((c.name, _shape(c.arguments)) for t in result.transcript for c in t.tool_calls)
    checked = {c.criterion for c in (*result.evaluations, *result.expectations)
               if c.criterion and c.status != "skipped" and c.criterion in result.criteria}
    category = result.record_category or "uncategorised"
    return RunFacts(
        topics=tuple(sorted((t.name, tuple(t.successors)) for t in result.topics)),
        path=tuple(result.topic_path),
        off_graph=tuple(sorted({_jump(text) for text in result.off_graph_transitions})),
        tools_declared=tuple(sorted(_declared_tools(result.agent_metadata))),
        tool_calls=calls,
        tools_forbidden=tuple(sorted({str(c.data["tool"]) for c in (*result.evaluations, *result.expectations)
                                      if c.type in _FORBIDS and isinstance(c.data.get("tool"), str)})),
        criteria_declared=tuple(sorted(result.criteria)),
        criteria_checked=tuple(sorted(checked)),
        record=(result.record_id, category, result.passed) if result.record_id is not None else None,
        attack=(result.attack, _held(result)) if result.attack is not None else None,
        skipped=result.skipped,
        pauses=tuple((p.tool if p.kind == "approval" and p.tool else "question", p.decision)
                     for t in result.transcript for p in t.pauses),
    )


def coverage_of(results: Iterable[ScenarioResult]) -> dict[str, Any]:
    """The ``coverage`` section for whole results (the streaming recorder keeps facts instead)."""
    return summarise(run_facts(r) for r in results)


def summarise(facts: Iterable[RunFacts]) -> dict[str, Any]:
    """Add up runs' facts into the experiment's ``coverage`` section (see the module docstring)."""
    declared_topics: dict[str, set[str]] = {}
    reached: Counter[str] = Counter()
    taken: Counter[str] = Counter()
    jumps: Counter[str] = Counter()
    tools_declared: set[str] = set()
    forbidden: set[str] = set()
    calls: Counter[str] = Counter()
    shapes: dict[str, dict[str, None]] = {}
    criteria_declared: set[str] = set()
    checked: Counter[str] = Counter()
    records: dict[str, dict[str, Any]] = {}
    attacks: dict[str, Counter[str]] = {}
    pauses: dict[str, Counter[str]] = {}
    for f in facts:
        for name, successors in f.topics:
            declared_topics.setdefault(name, set()).update(successors)
        tools_declared.update(f.tools_declared)
        forbidden.update(f.tools_forbidden)
        criteria_declared.update(f.criteria_declared)
        if f.skipped:
            continue
        reached.update(set(f.path))
        taken.update({a + _ARROW + b for a, b in zip(f.path, f.path[1:], strict=False) if a != b})
        jumps.update(f.off_graph)
        for tool, shape in f.tool_calls:
            calls[tool] += 1
            seen = shapes.setdefault(tool, {})
            if len(seen) < _MAX_SHAPES:
                seen[shape] = None
        checked.update(f.criteria_checked)
        if f.record is not None:
            rid, category, passed = f.record
            entry = records.setdefault(category, {"records": set(), "runs": 0, "passed": 0})
            entry["records"].add(rid)
            entry["runs"] += 1
            entry["passed"] += int(passed)
        if f.attack is not None:
            attacks.setdefault(f.attack[0], Counter())[f.attack[1]] += 1
        for asked, decision in f.pauses:
            pauses.setdefault(asked, Counter())[decision] += 1
    transitions = {a + _ARROW + b for a, succ in declared_topics.items() for b in succ}
    return {
        "topics": _part(declared_topics, reached, "reached", "never_reached"),
        "transitions": {**_part(transitions, Counter({t: n for t, n in taken.items() if t in transitions}),
                                "taken", "never_taken"),
                        "off_graph": dict(sorted(jumps.items()))},
        "tools": {**_part(tools_declared, calls, "called", "never_called"),
                  "undeclared_called": sorted(set(calls) - tools_declared) if tools_declared else [],
                  # no tool list to check a name against: a "must not call" of a tool no run ever
                  # called passes forever when the name is a typo, so the summary names them
                  "forbidden_never_seen": [] if tools_declared else sorted(forbidden - set(calls)),
                  "argument_shapes": {tool: list(seen) for tool, seen in sorted(shapes.items())}},
        "criteria": _part(criteria_declared, checked, "evaluated", "never_evaluated"),
        "records": {category: {"records": len(e["records"]), "runs": e["runs"], "passed": e["passed"],
                               "rate": round(e["passed"] / e["runs"], 4) if e["runs"] else None}
                    for category, e in sorted(records.items())},
        "attacks": {name: {"runs": sum(n.values()), "held": n["held"], "broken": n["broken"], "errors": n["error"],
                           "unjudged": n["unjudged"],
                           "hold_rate": round(n["held"] / (n["held"] + n["broken"]), 4)
                           if n["held"] + n["broken"] else None}
                    for name, n in sorted(attacks.items())},
        **({"pauses": _pauses(pauses)} if pauses else {}),  # only when an agent paused: other files unchanged
    }


def _pauses(by_tool: Mapping[str, Counter[str]]) -> dict[str, Any]:
    """Pauses asked and decided (docs/how-to/approvals.md): in total and per tool (``question`` for questions)."""
    def part(n: Counter[str]) -> dict[str, int]:
        asked = sum(n.values())
        return {"asked": asked, "decided": asked - n["unanswered"],
                **{d: n[d] for d in ("approved", "rejected", "answered", "edited", "unanswered")}}

    return {**part(sum(by_tool.values(), Counter())), "by_tool": {t: part(n) for t, n in sorted(by_tool.items())}}


def fault_coverage(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``faults`` kind of coverage, from a fault matrix's rows (``fabtest faults``): each tool x
    fault the suite's passing scenarios were tried with is declared; it is covered when every
    scenario tried held (the suite survives that fault of that tool), listed under ``broke`` when
    one did not. The rate is the share of tool x fault pairs that held."""
    outcome: dict[str, bool] = {}
    for row in rows:
        pair = f"{row.get('tool')}={row.get('fault')}"
        outcome[pair] = outcome.get(pair, True) and row.get("outcome") == "held"
    held = Counter({pair: 1 for pair, ok in outcome.items() if ok})
    part = _part(outcome, held, "held", "broke")
    return {**part, "held": sorted(part["held"])}


def _part(declared: Iterable[str], hits: Counter[str], hit_key: str, miss_key: str) -> dict[str, Any]:
    names = sorted(declared)
    hit = {n: hits[n] for n in names if hits[n]}
    return {"declared": len(names), hit_key: hit, miss_key: [n for n in names if not hits[n]],
            "rate": round(len(hit) / len(names), 4) if names else None}


def _held(result: ScenarioResult) -> str:
    """An attack run: the agent held (every attack criterion judged and passed), was broken (one
    failed, soft or hard), was not judged on every criterion (``unjudged``: never in the hold rate),
    or the run erred. A ``should hold against the attack`` whose criteria failed passes its scenario
    (soft), yet the agent did not hold."""
    if not result.passed and result.failure_type not in ("assertion", "max_turns"):
        return "error"
    statuses: dict[str, set[str]] = {}
    for check in (*result.evaluations, *result.expectations):
        if check.type == "satisfy" and check.criterion in result.attack_criteria:
            statuses.setdefault(check.criterion, set()).add(check.status)
    if not result.passed or any("failed" in s for s in statuses.values()):
        return "broken"
    if not result.attack_criteria:  # a result from before fabtest recorded the attack's criteria
        return "held"
    judged = all(statuses.get(name) == {"passed"} for name in result.attack_criteria)
    return "held" if judged else "unjudged"


def _jump(text: str) -> str:
    """``"greeting -> booking (turn 2)"`` without its turn."""
    return text.split(" (turn ", 1)[0]


def _declared_tools(metadata: Mapping[str, Any]) -> set[str]:
    tools = metadata.get("tools") if isinstance(metadata, Mapping) else None
    if not isinstance(tools, list):
        return set()
    names = (t if isinstance(t, str) else t.get("name") if isinstance(t, dict) else None for t in tools)
    return {n for n in names if isinstance(n, str) and n}


def _shape(arguments: Any) -> str:
    """An argument set as its keys and value types, e.g. ``{date: str, people: int}``."""
    if not isinstance(arguments, dict) or not arguments:
        return "{}"
    return "{" + ", ".join(f"{k}: {_type(v)}" for k, v in sorted(arguments.items())) + "}"


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    return "list" if isinstance(value, list) else "object"


# -- floors and changes --------------------------------------------------------------------------------
def parse_floor(text: str) -> tuple[str, float]:
    """``"tools=0.8"`` (or ``80%``) -> ``("tools", 0.8)``; a bad value names what was expected."""
    kind, sep, raw = text.partition("=")
    kind = kind.strip()
    if not sep or kind not in KINDS:
        raise CoverageFloorError(f"--fabtest-min-coverage {text!r}: expected KIND=RATE with KIND one of "
                                 f"{', '.join(KINDS)} (e.g. tools=0.8)")
    raw = raw.strip()
    try:
        rate = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise CoverageFloorError(f"--fabtest-min-coverage {text!r}: RATE must be between 0 and 1 (or 0% and 100%)")
    return kind, rate


def below_floors(section: Mapping[str, Any], floors: Mapping[str, float]) -> list[str]:
    """One line per kind whose rate is under its floor. A kind with nothing declared is not judged,
    except tools: a tools floor with no tool list would be silently met, so it is a failure naming
    the fix."""
    lines = []
    for kind, floor in floors.items():
        rate = (section.get(kind) or {}).get("rate")
        if kind == "tools" and not (section.get(kind) or {}).get("declared"):
            lines.append(f"tools coverage cannot be judged: no agent declared its tools "
                         f"(--fabtest-min-coverage tools={floor:g}); give the agent table tools = [...] "
                         "or use an agent fabtest can list the tools of (built-in, MCP, ADK, LangGraph, "
                         "OpenAI Agents SDK, PydanticAI)")
            continue
        if rate is not None and rate < floor:
            lines.append(f"{kind} coverage {rate:.0%} is below the floor {floor:.0%} "
                         f"(--fabtest-min-coverage {kind}={floor:g})")
    return lines


_KEYS = {"topics": ("reached", "never_reached"), "transitions": ("taken", "never_taken"),
         "tools": ("called", "never_called"), "criteria": ("evaluated", "never_evaluated")}


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, dict[str, list[str]]]:
    """Per kind, what became covered and what became uncovered between two experiments' sections
    (only names declared in both count: a new topic is not "newly uncovered")."""
    out: dict[str, dict[str, list[str]]] = {}
    for kind, (hit, miss) in _KEYS.items():
        a, b = (before or {}).get(kind) or {}, (after or {}).get(kind) or {}
        missed_a, missed_b = set(a.get(miss) or []), set(b.get(miss) or [])
        hit_a, hit_b = set(a.get(hit) or {}), set(b.get(hit) or {})
        covered = sorted(missed_a & hit_b)
        uncovered = sorted(hit_a & missed_b)
        if covered or uncovered:
            out[kind] = {"covered": covered, "uncovered": uncovered}
    return out
