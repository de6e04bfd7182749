"""Scenario sets: a scenario tagged ``@scenario_set:NAME`` runs once per record of a data file.

The file is ``scenarios/NAME.json`` (or ``.yaml`` / ``.yml``) under the project's base directory,
holding a list of records or ``{"scenarios": [...]}``. A record::

    {"id": "berlin-10", "name": "Berlin, ten people", "goal": "Book a room for 10 in Berlin",
     "persona": "A busy office manager",
     "context": {"date": "12 March"},               # or [{"fact": "date", "value": "12 March"}]
     "verification": {"call_tool": "book_venue", "reached_topic": "booking", "max_turns": 8}}

``goal`` is required; ``id`` defaults to the record's 1-based position; ``name`` to the id.
Problems raise :class:`ScenarioSetError` with one line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest._internal.datafile import read_data_file
from fabtest.errors import UsageError

EXTENSIONS = (".json", ".yaml", ".yml")
_KNOWN_VERIFICATION = {"call_tool": str, "reached_topic": str, "max_turns": int}


class ScenarioSetError(UsageError):
    """A scenario set file is missing or malformed: one line naming the file."""


@dataclass(frozen=True)
class Verification:
    """A record's ``verification`` as typed values: hard expectations checked when its scenario ends."""

    call_tool: str | None = None
    reached_topic: str | None = None
    max_turns: int | None = None


@dataclass(frozen=True)
class ScenarioRecord:
    """One row of a scenario set."""

    id: str
    name: str
    goal: str
    persona: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    verification: dict[str, Any] = field(default_factory=dict)
    set_name: str = ""
    index: int = 0
    source: str = ""
    explicit_id: bool = True
    #: what kind of case this is (``prompt_injection``, ``refund``...): coverage and hold rates per category
    category: str | None = None

    @property
    def hash(self) -> str:
        return record_hash(self)

    @property
    def checks(self) -> Verification:
        """``verification`` typed (its keys and value types were validated when the file was read)."""
        return Verification(**{k: v for k, v in self.verification.items() if v is not None})

    @property
    def facts(self) -> list[tuple[str, Any]]:
        """``context`` as (fact, value) pairs, in order."""
        return list(self.context.items())

    def to_dict(self) -> dict[str, Any]:
        data = {"id": self.id, "name": self.name, "goal": self.goal, "persona": self.persona,
                "context": dict(self.context), "verification": dict(self.verification)}
        return {**data, "category": self.category} if self.category is not None else data


def record_hash(record: ScenarioRecord | dict[str, Any]) -> str:
    """8 hex chars identifying a record: from its id when it has one, else from its content.

    Keyed on the id, a record keeps its stable id when its goal or persona is edited; records
    without an explicit id fall back to their goal, persona, context and verification.
    """
    if isinstance(record, ScenarioRecord):
        rid = record.id if record.explicit_id else None
        content = {"goal": record.goal, "persona": record.persona, "context": record.context,
                   "verification": record.verification}
    else:
        rid = record.get("id")
        context = record.get("context") or {}
        if isinstance(context, list):
            context = {str(i.get("fact")): i.get("value") for i in context if isinstance(i, dict)}
        goal = record.get("goal")
        content = {"goal": goal.strip() if isinstance(goal, str) else goal, "persona": record.get("persona"),
                   "context": context, "verification": record.get("verification") or {}}
    if rid is not None:
        basis = f"id:{rid}"
    else:
        basis = "content:" + json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(basis.encode("utf-8")).hexdigest()[:8]


def scenario_set_paths(name: str, base_dir: str | os.PathLike[str]) -> list[Path]:
    """The files tried for set ``name``, in order."""
    base = Path(base_dir)
    dirs = [base / "scenarios"]
    if base.name == "scenarios":
        dirs.append(base)
    return [d / f"{name}{ext}" for d in dirs for ext in EXTENSIONS]


def load_scenario_set(name: str, base_dir: str | os.PathLike[str] = ".") -> list[ScenarioRecord]:
    """The records of scenario set ``name`` (ScenarioSetError when missing or malformed): a data file
    under ``scenarios/``, or ``module:attr`` naming records in Python (see :func:`generated_records`)."""
    if ":" in name:
        return generated_records(name)
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ScenarioSetError(f"scenario set name {name!r} is not a plain file name")
    tried = scenario_set_paths(name, base_dir)
    path = next((p for p in tried if p.is_file()), None)
    if path is None:
        raise ScenarioSetError(f"scenario set {name!r} not found; tried {', '.join(str(p) for p in tried)}")
    return parse_scenario_set(path, name)


def generated_records(spec: str) -> list[ScenarioRecord]:
    """The records a Python source yields (docs/how-to/scenario-sets.md): ``module:attr`` names a list of
    records, or a function (a generator, say) returning them, each a dict as a data file spells it.
    Records are validated as a file's are; ids are stable as long as the source yields the same ids
    (or, without ids, the same order)."""
    from fabtest._internal.targets import import_object

    try:
        source = import_object(spec, where="scenario set", what="source")
    except UsageError as exc:
        raise ScenarioSetError(str(exc)) from None
    try:
        data = source() if callable(source) else source
        data = list(data) if not isinstance(data, (dict, str, bytes)) else data
    except TypeError as exc:
        raise ScenarioSetError(f"expected records (an iterable of dicts) or a function returning them; "
                               f"got {_kind(source)} ({exc})") from None
    except Exception as exc:  # the user's generator failed: say so in one line
        raise ScenarioSetError(f"the source raised {type(exc).__name__}: {exc}") from exc
    return _records(Path(spec), spec, data)


def parse_scenario_set(path: Path, name: str | None = None) -> list[ScenarioRecord]:
    return _records(path, name or path.stem, _read(path))


def _records(path: Path, name: str, data: Any) -> list[ScenarioRecord]:
    if isinstance(data, dict):
        if "scenarios" not in data:
            raise ScenarioSetError(f"{path}: expected a list of records or {{\"scenarios\": [...]}}")
        data = data["scenarios"]
    if not isinstance(data, list):
        raise ScenarioSetError(f"{path}: expected a list of records, got {_kind(data)}")
    if not data:
        raise ScenarioSetError(f"{path}: the scenario set has no records")
    records: list[ScenarioRecord] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(data):
        record = _record(path, name, index, raw)
        if record.id in seen:
            raise ScenarioSetError(
                f"{path}: record {index + 1}: duplicate id {record.id!r} (also record {seen[record.id] + 1})"
            )
        seen[record.id] = index
        records.append(record)
    return records


def _read(path: Path) -> Any:
    return read_data_file(path, ScenarioSetError)


def _record(path: Path, set_name: str, index: int, raw: Any) -> ScenarioRecord:
    if not isinstance(raw, dict):
        raise ScenarioSetError(f"{path}: record {index + 1}: expected an object, got {_kind(raw)}")
    explicit = raw.get("id") is not None
    rid = str(raw["id"]) if explicit else str(index + 1)
    label = f"record {index + 1} (id {rid!r})" if explicit else f"record {index + 1}"
    if isinstance(raw.get("id"), (dict, list, bool)) or (explicit and not rid.strip()):
        raise ScenarioSetError(f"{path}: record {index + 1}: id must be a non-empty string or number")
    goal = raw.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        problem = ("has no goal" if goal is None or (isinstance(goal, str) and not goal.strip())
                   else "goal must be a string")
        raise ScenarioSetError(f"{path}: {label} {problem}")
    name = raw.get("name", rid)
    if not isinstance(name, (str, int, float)):
        raise ScenarioSetError(f"{path}: {label}: name must be a string")
    persona = raw.get("persona")
    if persona is not None and not isinstance(persona, str):
        raise ScenarioSetError(f"{path}: {label}: persona must be a string")
    context = _context(path, label, raw.get("context"))
    verification = raw.get("verification")
    verification = {} if verification is None else verification
    if not isinstance(verification, dict):
        raise ScenarioSetError(f"{path}: {label}: verification must be an object, got {_kind(verification)}")
    unknown = sorted(set(verification) - set(_KNOWN_VERIFICATION))
    if unknown:
        raise ScenarioSetError(f"{path}: {label}: unknown verification key(s) {', '.join(unknown)}; "
                               f"expected {', '.join(_KNOWN_VERIFICATION)}")
    for key, kind in _KNOWN_VERIFICATION.items():
        value = verification.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, int) and value < 1):
            need = "a positive integer" if kind is int else "a string"
            raise ScenarioSetError(f"{path}: {label}: verification.{key} must be {need}, got {value!r}")
    category = raw.get("category")
    if category is not None and (not isinstance(category, str) or not category.strip()):
        raise ScenarioSetError(f"{path}: {label}: category must be a non-empty string")
    unknown = sorted(set(raw) - {"id", "name", "goal", "persona", "context", "verification", "category"})
    if unknown:
        raise ScenarioSetError(f"{path}: {label}: unexpected key {unknown[0]!r}")
    return ScenarioRecord(
        id=rid, name=str(name), goal=goal.strip(), persona=persona, context=context,
        verification=dict(verification), set_name=set_name, index=index, source=str(path), explicit_id=explicit,
        category=category.strip() if category is not None else None,
    )


def _context(path: Path, label: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list):
        out: dict[str, Any] = {}
        for i, item in enumerate(value):
            if not isinstance(item, dict) or "fact" not in item or "value" not in item:
                raise ScenarioSetError(f"{path}: {label}: context[{i}] must be {{\"fact\": ..., \"value\": ...}}")
            out[str(item["fact"])] = item["value"]
        return out
    raise ScenarioSetError(f"{path}: {label}: context must be an object or a list of "
                           f"{{fact, value}}, got {_kind(value)}")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string",
            type(None): "nothing"}.get(type(value), type(value).__name__)
