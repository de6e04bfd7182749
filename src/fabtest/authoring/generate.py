"""``fabtest generate``: draft scenario-set records aimed at what the suite never exercised.

What the project declares (topic graph, the agent's tools, criteria, existing records) and what the
last experiment's ``coverage`` says was never reached, called or evaluated go into one prompt; the
judge-side LLM answers with structured records (goal, persona, facts, expected tool, topic,
category, and which gaps each aims at). Drafts that repeat an existing record (same id, or a goal
close to one) are dropped, and the rest are written to a *new* file for review, never over one
(README "Generating scenarios"). The prompt is built from sorted inputs, so under the LLM cache
(``llm_cache = "on"``) the same project gives the same drafts; ``FakeLLM.scenarios`` scripts it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from fabtest._internal.words import article
from fabtest.config.scenario_sets import EXTENSIONS, ScenarioRecord, ScenarioSetError, parse_scenario_set
from fabtest.errors import UsageError
from fabtest.llm.base import LLM
from fabtest.llm.calls import LLMCall, llm_call
from fabtest.llm.schema import ORDERED

__all__ = ["Declared", "Draft", "Drafts", "build_prompt", "declared_from", "draft_records", "write_records"]

_SIMILAR = 0.85  # a draft goal this close to an existing one (difflib ratio) is a duplicate

SYSTEM_PROMPT = """\
You design test scenarios for a conversational AI agent. Each scenario is a simulated user with a \
goal that a real user of this agent could have. Answer with a single JSON object and nothing else."""

PROMPT = """\
WHAT THE AGENT IS FOR
{description}

TOPICS OF ITS CONVERSATIONS (topic: what characterises it -> topics that may follow)
{topics}

TOOLS OF THE AGENT (declared, or called in the last run)
{tools}

QUALITY CRITERIA
{criteria}

WHAT THE CURRENT TESTS NEVER EXERCISED (aim at these first)
{gaps}

EXISTING SCENARIOS (do not repeat these)
{existing}

Write {count} new scenarios, each a different situation. Prefer scenarios that reach the untested \
topics, make the agent call the untested tools, and give the untested criteria something to judge.
For each, first plan it: "aims_at" (which of the untested items above it targets), "category" (a \
short label for the kind of case); then write it: "id" (lowercase-with-dashes), "name", "goal" (what \
the user wants, one or two sentences), "persona" (who the user is and how they talk), "facts" (what \
the user knows, as short key/value strings), "expected_tool" (a tool above the agent should call, or \
null), "topic" (a declared topic the conversation should reach, or null).
JSON: {{"records": [{{"aims_at": [], "category": "...", "id": "...", "name": "...", "goal": "...", \
"persona": "...", "facts": {{}}, "expected_tool": null, "topic": null}}]}}"""


class Draft(BaseModel):
    """One drafted scenario as the LLM writes it: the plan (what it aims at, its category) before
    the scenario it plans (llm/schema.py: fields written in declaration order, reasoning first)."""

    model_config = ORDERED
    aims_at: list[str] = Field(default_factory=list)
    category: str | None = None
    id: str
    name: str = ""
    goal: str
    persona: str | None = None
    facts: dict[str, str] = Field(default_factory=dict)
    expected_tool: str | None = None
    topic: str | None = None


class Drafts(BaseModel):
    model_config = ORDERED
    records: list[Draft]


@dataclass(frozen=True)
class Declared:
    """What the project declares and what its last run never exercised (the prompt's inputs)."""

    topics: Mapping[str, tuple[str, Sequence[str]]] = field(default_factory=dict)  # name -> (characteristic, next)
    tools: Sequence[str] = ()
    criteria: Mapping[str, str] = field(default_factory=dict)
    gaps: Mapping[str, Sequence[str]] = field(default_factory=dict)  # kind -> names never exercised
    existing: Sequence[ScenarioRecord] = ()


def declared_from(settings_criteria: Mapping[str, str], settings_topics: Sequence[Any],
                  experiment: Mapping[str, Any] | None,
                  scenarios_dir: Path) -> Declared:
    """The prompt's inputs: ``[tool.fabtest]`` criteria and topics, the experiment's configuration and
    ``coverage`` (declared tools, what was never exercised), and every record under ``scenarios_dir``.

    The experiment is a file read back, so each part is checked for the shape it must have: a part of
    the wrong type is one line naming its JSON path, not a traceback."""
    doc = experiment or {}
    config = _table(doc, "configuration")
    raw_criteria = _table(config, "criteria", "configuration.")
    criteria = {str(name): (value if isinstance(value, str) else str(value))
                for name, value in {**raw_criteria, **settings_criteria}.items()}
    topics: dict[str, tuple[str, Sequence[str]]] = {}
    for i, t in enumerate(_list(config, "topics", "configuration.")):
        if not isinstance(t, Mapping) or not isinstance(t.get("name"), str):
            raise UsageError(f"the experiment's configuration.topics[{i}] is {_kind(t)}, expected a table with a "
                             "'name' string")
        topics[t["name"]] = (str(t.get("characteristic") or ""), _names(t, "successors", f"configuration.topics[{i}]."))
    for row in settings_topics:
        topics[row.topic] = (row.characteristic, tuple(n.strip() for n in (row.next or "").split(",") if n.strip()))
    coverage = _table(doc, "coverage")
    tools_part = _table(coverage, "tools", "coverage.")
    # a tool the agent called without declaring it is still one of its tools: a draft may expect it
    # (an agent that declares none still shows generate what it can do; issue 27 point 13)
    called = {c.get("name") for r in doc.get("scenario_results") or [] if isinstance(r, dict)
              for t in r.get("transcript") or [] if isinstance(t, dict)
              for c in t.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("name"), str)}
    tools = sorted({*_table(tools_part, "called", "coverage.tools."),
                    *_names(tools_part, "never_called", "coverage.tools."),
                    *_names(tools_part, "undeclared_called", "coverage.tools."), *(str(name) for name in called)})
    gaps = {kind: list(_names(_table(coverage, kind, "coverage."), key, f"coverage.{kind}."))
            for kind, key in (("topics", "never_reached"), ("transitions", "never_taken"), ("tools", "never_called"),
                              ("criteria", "never_evaluated"))}
    return Declared(topics=topics, tools=tools, criteria=criteria, gaps={k: v for k, v in gaps.items() if v},
                    existing=_existing_records(scenarios_dir))


def _kind(value: Any) -> str:
    return "null" if value is None else article(type(value).__name__)


def _table(parent: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
    """``parent[key]`` if it is a table; missing or null is empty; anything else is one line."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"the experiment's {where}{key} is {_kind(value)}, expected a table")
    return value


def _list(parent: Mapping[str, Any], key: str, where: str = "") -> Sequence[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"the experiment's {where}{key} is {_kind(value)}, expected a list")
    return value


def _names(parent: Mapping[str, Any], key: str, where: str = "") -> tuple[str, ...]:
    """``parent[key]`` as a list of names (strings); one line naming the entry otherwise."""
    values = _list(parent, key, where)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise UsageError(f"the experiment's {where}{key}[{i}] is {_kind(value)}, expected a name (a string)")
    return tuple(values)


def _existing_records(scenarios_dir: Path) -> list[ScenarioRecord]:
    records: list[ScenarioRecord] = []
    if not scenarios_dir.is_dir():
        return records
    for path in sorted(p for p in scenarios_dir.iterdir() if p.suffix in EXTENSIONS):
        try:
            records += parse_scenario_set(path)
        except ScenarioSetError as exc:
            raise UsageError(f"an existing scenario set does not load: {exc}") from None
    return records


def build_prompt(declared: Declared, description: str, count: int) -> str:
    """The generation prompt (deterministic for the same inputs: everything listed sorted)."""
    topics = "\n".join(f"- {name}: {char or '(no description)'} -> {', '.join(nxt) or '(end)'}"
                       for name, (char, nxt) in sorted(declared.topics.items())) or "(none declared)"
    tools = "\n".join(f"- {t}" for t in sorted(declared.tools)) or "(none declared)"
    criteria = "\n".join(f"- {n}: {d}" for n, d in sorted(declared.criteria.items())) or "(none declared)"
    gaps = "\n".join(f"- {kind}: {', '.join(sorted(names))}" for kind, names in sorted(declared.gaps.items())) \
        or "(nothing known: no experiment yet, or everything was exercised)"
    existing = "\n".join(f"- {r.id}: {r.goal}" for r in sorted(declared.existing, key=lambda r: r.id)) or "(none)"
    return PROMPT.format(description=description.strip() or "(not described: infer it from the topics and tools)",
                         topics=topics, tools=tools, criteria=criteria, gaps=gaps, existing=existing, count=count)


def draft_records(llm: LLM, declared: Declared, *, description: str = "",
                  count: int = 5) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Ask ``llm`` for ``count`` drafts; returns the new records (scenario-set dicts), one line per
    draft dropped (a duplicate, or beyond ``count``), and one line per part of a kept record left out
    (an unknown key, an expected tool or topic the project does not declare): apart, so that a record
    that is written is never reported as dropped."""
    prompt = build_prompt(declared, description, count)
    call = LLMCall("scenarios", subject=prompt, goal=description or None)
    with llm_call(call):
        completion = llm.complete_json(prompt, Drafts, system=SYSTEM_PROMPT)
    if completion.parsed is None:
        raise UsageError("the LLM gave no usable scenarios (its answer did not fit the records schema)")
    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    notes: list[str] = []
    ids = {r.id for r in declared.existing}
    goals = [_norm(r.goal) for r in declared.existing]
    unknown = _unknown_keys(completion.text)
    for i, draft in enumerate(completion.parsed.records):
        record_id = _slug(draft.id or draft.name or draft.goal)
        why = _duplicate(record_id, draft.goal, ids, goals) or _beyond(len(kept), count)
        if why:
            dropped.append(f"{record_id}: {why}")
            continue
        if unknown.get(i):  # said, not dropped silently: the schema (docs/coverage.md) has no such field
            keys = ", ".join(repr(k) for k in unknown[i])
            notes.append(f"{record_id}: unknown key(s) {keys} in the draft (not in the draft schema); left out")
        ids.add(record_id)
        goals.append(_norm(draft.goal))
        kept.append(_record(draft, record_id, declared, notes))
    return kept, dropped, notes


_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _unknown_keys(text: str) -> dict[int, list[str]]:
    """Per draft (by position), the keys of the LLM's answer that the draft schema has no field for
    (pydantic ignores them when it validates): e.g. ``tags`` or ``verification``, which a draft
    cannot set. An answer that is not plain JSON (a cached one, say) reports nothing."""
    fenced = _FENCE.match(text or "")
    try:
        answer = json.loads(fenced.group(1) if fenced else (text or "").strip())
    except ValueError:
        return {}
    records = answer.get("records") if isinstance(answer, dict) else None
    if not isinstance(records, list):
        return {}
    known = set(Draft.model_fields)
    return {i: sorted(set(r) - known) for i, r in enumerate(records) if isinstance(r, dict) and set(r) - known}


def _record(draft: Draft, record_id: str, declared: Declared, notes: list[str]) -> dict[str, Any]:
    verification: dict[str, Any] = {}
    if draft.expected_tool:
        if draft.expected_tool in declared.tools or not declared.tools:
            verification["call_tool"] = draft.expected_tool
        else:
            notes.append(f"{record_id}: expected tool {draft.expected_tool!r} is not declared; "
                         "left out of verification")
    if draft.topic:
        if draft.topic in declared.topics:
            verification["reached_topic"] = draft.topic
        else:
            notes.append(f"{record_id}: topic {draft.topic!r} is not declared; left out of verification")
    record: dict[str, Any] = {"id": record_id, "name": draft.name or record_id, "goal": draft.goal.strip()}
    if draft.persona:
        record["persona"] = draft.persona.strip()
    if draft.facts:
        record["context"] = dict(draft.facts)
    if verification:
        record["verification"] = verification
    if draft.category:
        record["category"] = draft.category.strip()
    aims = _aims(draft.aims_at, declared, record_id, notes)
    if aims:
        record["aims_at"] = aims
    return record


def _beyond(kept: int, count: int) -> str | None:
    """The prompt asked for ``count`` records: the LLM's extra ones are not written."""
    return f"beyond --count {count} (the LLM wrote more than it was asked for)" if kept >= count else None


def _aims(aims: Sequence[str], declared: Declared, record_id: str, notes: list[str]) -> list[str]:
    """The gaps a draft says it aims at, kept only if they are what the prompt listed as gaps (one
    line each, no newline that would end the comment they are written in)."""
    listed = {name for names in declared.gaps.values() for name in names} | {
        f"{kind}: {name}" for kind, names in declared.gaps.items() for name in names}  # as the prompt lists them
    kept: list[str] = []
    for aim in aims:
        if aim in listed and aim not in kept:
            kept.append(aim)
        else:
            notes.append(f"{record_id}: aims_at {_one_line(aim)!r} is not one of the untested items listed; left out")
    return kept


def _one_line(text: str) -> str:
    """``text`` on one line, control characters out (what is quoted in a note or a YAML comment)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:200]


def _duplicate(record_id: str, goal: str, ids: set[str], goals: list[str]) -> str | None:
    if record_id in ids:
        return "an existing record has this id"
    close = difflib.get_close_matches(_norm(goal), goals, n=1, cutoff=_SIMILAR)
    return f"its goal repeats an existing one ({close[0]!r})" if close else None


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))[:60] or "scenario"


def write_records(records: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write the drafts as a new scenario set; an existing file is never overwritten."""
    if path.suffix not in EXTENSIONS:
        raise UsageError(f"{path}: a scenario set is a {', '.join(EXTENSIONS)} file")
    if path.exists():
        raise UsageError(f"{path} exists: fabtest generate never overwrites; pass --out with a new file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = [{k: v for k, v in r.items() if k != "aims_at"} for r in records]
    header = "".join(f"# {_one_line(str(r['id']))}: aims at {_one_line(', '.join(map(str, r['aims_at'])))}\n"
                     for r in records if r.get("aims_at"))
    with open(path, "x", encoding="utf-8") as handle:  # "x": a file that appeared meanwhile is not replaced
        if path.suffix == ".json":
            handle.write(json.dumps(clean, indent=2, ensure_ascii=False) + "\n")
        else:
            handle.write("# Drafted by fabtest generate: review before committing.\n" + header)
            handle.write(yaml.safe_dump(clean, sort_keys=False, allow_unicode=True))
    return path
