"""Loading playbooks: JSON/YAML files validated against ``schema.json``, then a pydantic model.

Every problem is a :class:`PlaybookError` with ONE line naming the file and the place, e.g.
``playbooks/login.yaml: steps[2].expected_outcome: required``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from fabtest._internal.datafile import read_data_file
from fabtest.errors import UsageError

SCHEMA_PATH = Path(__file__).with_name("schema.json")
EXTENSIONS = (".json", ".yaml", ".yml")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PlaybookError(UsageError):
    """A playbook cannot be used: one line naming the file and the place."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tmpdir(_Model):
    link_paths: list[str] = Field(default_factory=list)


class Step(_Model):
    user_input: str
    expected_outcome: str
    #: files sent with ``user_input``, relative to the playbook file (docs/how-to/files.md)
    files: list[str] = Field(default_factory=list)


class SuccessCriteria(_Model):
    llm_checks: list[str] = Field(default_factory=list)
    flow_contains: list[str] = Field(default_factory=list)
    files_exist: list[str] = Field(default_factory=list)
    files_contain: dict[str, list[str]] = Field(default_factory=dict)
    tool_calls_contain: dict[str, list[str]] = Field(default_factory=dict)


class Persona(_Model):
    context: str
    success_criteria: SuccessCriteria
    initial_user_input: str | None = None
    max_turns: int = 10


class Playbook(_Model):
    name: str
    agent_model: str | None = None  # wins over FABTEST_AGENT_MODEL: agents/cli.py agent_model()
    evaluator_model: str | None = None
    tmpdir: Tmpdir | None = None
    timeout: int = 60
    env: list[str] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    persona: Persona | None = None
    #: The file it was loaded from (not part of the schema; excluded from dumps).
    source: str | None = Field(default=None, exclude=True)

    @property
    def mode(self) -> str:
        """``"steps"`` (scripted) when steps are given, else ``"persona"`` (autonomous)."""
        return "steps" if self.steps else "persona"

    @property
    def link_paths(self) -> list[str]:
        return list(self.tmpdir.link_paths) if self.tmpdir else []


@lru_cache(maxsize=1)
def playbook_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def load_playbook(path: str | Path) -> Playbook:
    """Read, parse and validate one playbook file (``.json``, ``.yaml`` or ``.yml``)."""
    path = Path(path)
    data = parse_file(path)
    return validate_playbook(data, source=str(path))


def parse_file(path: Path) -> Any:
    if path.suffix.lower() not in EXTENSIONS:
        raise PlaybookError(f"{path}: unsupported playbook file type {path.suffix or '(none)'!r}; "
                            "use .json, .yaml or .yml")
    return read_data_file(path, PlaybookError)


def validate_playbook(data: Any, *, source: str = "<playbook>") -> Playbook:
    """Validate parsed data against the schema and build the model (PlaybookError on problems)."""
    validator = jsonschema.Draft7Validator(playbook_schema())
    errors = list(validator.iter_errors(data))
    if errors:
        error = min(errors, key=_error_order)
        raise PlaybookError(f"{source}: {describe_error(error)}")
    try:
        playbook = Playbook.model_validate({**data, "source": source})
    except Exception as exc:  # schema and model should agree; be safe anyway
        raise PlaybookError(f"{source}: {_one_line(str(exc))}") from None
    _check_workspace_paths(playbook, source)
    _check_bounds(playbook, source)
    _check_files(playbook, source)
    return playbook


def _check_files(playbook: Playbook, source: str) -> None:
    """Every file a step sends can be sent (read when the step runs): one line naming it otherwise."""
    from fabtest.engine.attachments import FileLoader, FileRef

    base = Path(source).parent
    for index, step in enumerate(playbook.steps):
        for path in step.files:
            try:
                FileLoader().check(base, FileRef(path), where=f"{source}: steps[{index}].files")
            except UsageError as exc:
                raise PlaybookError(str(exc)) from None


#: A week: a larger per-call timeout overflows the OS timers (and is surely a typo).
MAX_TIMEOUT_S = 7 * 24 * 3600
MAX_TURNS = 1000


def _check_bounds(playbook: Playbook, source: str) -> None:
    if playbook.timeout > MAX_TIMEOUT_S:
        raise PlaybookError(f"{source}: timeout: must be at most {MAX_TIMEOUT_S} seconds (a week), got "
                            f"{playbook.timeout}")
    if playbook.persona is not None and playbook.persona.max_turns > MAX_TURNS:
        raise PlaybookError(f"{source}: persona.max_turns: must be at most {MAX_TURNS}, got "
                            f"{playbook.persona.max_turns}")


def workspace_path_problem(rel: str) -> str | None:
    """Why ``rel`` cannot name a file inside the workspace (absolute, escaping, empty), else None."""
    if not rel.strip():
        return "empty path"
    if "\0" in rel:
        return f"{rel!r} contains a NUL character"
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or PureWindowsPath(rel).drive \
            or rel.startswith(("~", "\\")):
        return f"{rel!r} is absolute; success criteria name files relative to the workspace"
    depth = 0
    for part in rel.replace("\\", "/").split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return f"{rel!r} is outside the workspace ('..' climbs out of it)"
        elif part not in ("", "."):
            depth += 1
    return None


def _check_workspace_paths(playbook: Playbook, source: str) -> None:
    """``files_exist`` / ``files_contain`` name files in the workspace, never elsewhere on the machine."""
    criteria = playbook.persona.success_criteria if playbook.persona else None
    if criteria is None:
        return
    named = [(f"persona.success_criteria.files_exist[{i}]", rel) for i, rel in enumerate(criteria.files_exist)]
    named += [(format_path(["persona", "success_criteria", "files_contain", rel]), rel)
              for rel in criteria.files_contain]
    for where, rel in named:
        problem = workspace_path_problem(rel)
        if problem:
            raise PlaybookError(f"{source}: {where}: {problem}")


def format_path(parts: Any) -> str:
    """``["steps", 2, "expected_outcome"]`` -> ``steps[2].expected_outcome``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _IDENT.match(str(part)):
            out += f"[{json.dumps(str(part))}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def describe_error(error: jsonschema.ValidationError) -> str:
    """One line for one schema violation: ``<json path>: <what is wrong>``."""
    path = list(error.absolute_path)
    kind = error.validator
    if kind == "required":
        missing = _missing_property(error)
        note = " (needed when there are no steps)" if "then" in error.absolute_schema_path else ""
        return f"{format_path([*path, missing])}: required{note}"
    if kind == "additionalProperties":
        extra = _unexpected_properties(error)
        if extra:
            return f"{format_path([*path, extra[0]])}: unexpected key"
    where = format_path(path) or "(top level)"
    if kind == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        # A mapping's shape is not obvious from "object" (`tool_calls_contain: [...]`): say what it maps.
        shape = (error.schema or {}).get("description") if expected == "object" and path else None
        hint = f" ({shape.rstrip('.')})" if isinstance(shape, str) else ""
        return f"{where}: expected {expected}, got {_json_type(error.instance)}{hint}"
    if kind == "anyOf" and not path:
        return f"{where}: needs 'steps' or 'persona'"
    if kind == "minimum":
        return f"{where}: must be >= {error.validator_value}, got {error.instance!r}"
    return f"{where}: {_one_line(error.message)}"


def _missing_property(error: jsonschema.ValidationError) -> str:
    instance = error.instance if isinstance(error.instance, dict) else {}
    for name in error.validator_value:
        if name not in instance:
            return str(name)
    return str(error.validator_value[0])


def _unexpected_properties(error: jsonschema.ValidationError) -> list[str]:
    allowed = set((error.schema or {}).get("properties", {}))
    instance = error.instance if isinstance(error.instance, dict) else {}
    return sorted(str(k) for k in instance if k not in allowed)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _error_order(error: jsonschema.ValidationError) -> tuple[Any, ...]:
    """Report the first problem in document order; at one place, a wrong type before the rest."""
    key = tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.absolute_path)
    rank = {"type": 0, "required": 1, "additionalProperties": 2}.get(str(error.validator), 3)
    # A top-level anyOf/if error is reported after any concrete problem elsewhere.
    top = 1 if not error.absolute_path and error.validator in ("anyOf", "if") else 0
    return (top, key, rank)


def _one_line(text: str) -> str:
    return " ".join(text.split())
