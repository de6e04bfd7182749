"""Experiment files read back are untrusted: a versioned model checks them before anything uses them.

An experiment may be hand-edited, produced by another tool or another fabtest, or cut short by a
full disk. Every reader (``show``, ``report``, ``compare``, ``list``) goes through
:func:`document_problem`, so a wrong type is one line naming the file and the JSON path (exit 2)
instead of a traceback deep in a renderer, and a ``format_version`` this fabtest does not know is
refused rather than misread. The models describe the fields fabtest itself reads; unknown keys
are allowed (other tools add their own), values are strict (no ``"5"`` for 5, no ``"yes"`` for
true).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["FORMAT_VERSIONS", "document_problem", "file_is_complete", "json_schema"]

#: The format versions this fabtest reads (a file without ``format_version`` is refused).
FORMAT_VERSIONS = (1,)

_Rate = float | None


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


def _rate(value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 1:
        raise ValueError(f"must be a fraction from 0 to 1, got {value!r}")
    return value


class _RoleSettings(_Doc):
    temperature: float | None = None
    samples: int | None = Field(default=None, ge=1)
    samples_per_criterion: dict[str, int] = Field(default_factory=dict)
    context_turns: int | None = Field(default=None, ge=0)
    max_file_bytes: int | None = Field(default=None, ge=0)
    fidelity: str | None = None


class _Role(_Doc):
    provider: str | None = None
    model: str | None = None
    #: what can change a verdict: the judge's temperature, samples, samples_per_criterion and
    #: context_turns; the simulator's temperature and fidelity mode
    settings: _RoleSettings | None = None


class _Experiment(_Doc):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
    timestamp: str | None = None
    name: str | None = None
    tags: list[str] = Field(default_factory=list)
    git_commit: str | None = None
    git_branch: str | None = None
    git_dirty: bool | None = None
    config_hash: str | None = None
    criteria_hash: str | None = None
    topic_graph_hash: str | None = None
    judge: _Role | None = None
    simulator: _Role | None = None
    iterations: int = Field(default=1, ge=1)
    interrupted: bool = False
    shard: str | None = Field(default=None, pattern=r"^[1-9][0-9]*/[1-9][0-9]*$")  # one CI shard's part (fabtest merge)
    source: str | None = None  # "production": fabtest score's logged conversations


class _Spread(_Doc):
    mean: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    std: float | None = None


class _Usage(_Doc):
    calls: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class _Counts(_Doc):
    evaluated: int = Field(default=0, ge=0)
    passed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    inconclusive: int = Field(default=0, ge=0)
    not_applicable: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)


class _Summary(_Doc):
    total_scenarios: int = Field(default=0, ge=0)
    passed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)
    completion_rate: _Rate = None
    evaluation_rate: _Rate = None
    backtracking_rate: _Rate = None
    avg_turns: float | None = Field(default=None, ge=0)
    avg_topics: float | None = Field(default=None, ge=0)
    failure_types: dict[str, int] = Field(default_factory=dict)
    evaluations: _Counts | None = None
    skipped_checks: int = Field(default=0, ge=0)
    turns: _Spread | None = None
    topics: _Spread | None = None
    tokens: dict[str, _Usage] = Field(default_factory=dict)
    duration_s: float | None = Field(default=None, ge=0)

    _rates = field_validator("completion_rate", "evaluation_rate", "backtracking_rate")(_rate)


class _Criterion(_Counts):
    rate: _Rate = None

    _rates = field_validator("rate")(_rate)


class _Check(_Doc):
    type: str | None = None
    mode: str | None = None
    criterion: str | None = None
    status: str | None = None
    passed: bool | None = None
    turn: int | None = None
    details: Any = None


class _CheckBlock(_Doc):
    passed: int = Field(default=0, ge=0)
    total: int = Field(default=0, ge=0)
    rate: _Rate = None
    details: list[_Check] = Field(default_factory=list)

    _rates = field_validator("rate")(_rate)


class _ToolCall(_Doc):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None


class _Turn(_Doc):
    number: int
    user: str
    agent: str
    tool_calls: list[_ToolCall] = Field(default_factory=list)
    topic: str | None = None
    duration_s: float = 0.0


class _Step(_Doc):
    """A Gherkin step as written (``Given``, ``When``, ... and its text; a playbook's ``Step N``)."""

    keyword: str
    text: str
    docstring: str | None = None
    table: list[list[str]] | None = None


class _Production(_Doc):
    """``fabtest score``: the logged conversation a run judged."""

    conversation: str
    timestamp: str | None = None
    source: str | None = None
    format: str | None = None
    content_hash: str | None = None


class _Scenario(_Doc):
    id: str
    name: str | None = None
    passed: bool
    skipped: bool = False
    skip_reason: str | None = None
    iteration: int = Field(default=1, ge=1)
    turns: int = Field(default=0, ge=0)
    topics_visited: list[str] = Field(default_factory=list)
    topic_path: list[str] = Field(default_factory=list)
    failure_type: str | None = None  # other tools may add types; renderers escape it
    failure_message: str | None = None
    feature: str | None = None
    rule: str | None = None
    record_id: str | None = None
    evaluations: _CheckBlock | list[_Check] | None = None
    expectations: _CheckBlock | list[_Check] | None = None
    transcript: list[_Turn] = Field(default_factory=list)
    steps: list[_Step] = Field(default_factory=list)
    duration_s: float | None = Field(default=None, ge=0)
    production: _Production | None = None


class _Run(_Doc):
    iteration: int = Field(ge=1)
    scenarios: int = Field(default=0, ge=0)
    completion_rate: _Rate = None
    evaluation_rate: _Rate = None

    _rates = field_validator("completion_rate", "evaluation_rate")(_rate)


class _ScenarioStability(_Doc):
    id: str | None = None
    name: str | None = None
    label: str | None = None
    passes: int = Field(default=0, ge=0)
    runs: int = Field(default=0, ge=0)
    pass_rate: _Rate = None
    pass_at_k: _Rate = None
    pass_hat_k: _Rate = None


class _Variance(_Doc):
    std_kind: str | None = None
    runs: list[_Run] = Field(default_factory=list)
    completion_rate: _Spread | None = None
    evaluation_rate: _Spread | None = None
    scenarios: list[_ScenarioStability] = Field(default_factory=list)
    flaky: list[str] = Field(default_factory=list)


class _Document(_Doc):
    experiment: _Experiment
    summary: _Summary
    criteria_results: dict[str, _Criterion] = Field(default_factory=dict)
    scenario_results: list[_Scenario]
    variance: _Variance | None = None
    #: required: every experiment fabtest ever wrote has one; a file without it is something else.
    #: Last, so a file with other problems too is told about those first.
    format_version: int

    @field_validator("format_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value not in FORMAT_VERSIONS:
            known = ", ".join(str(v) for v in FORMAT_VERSIONS)
            raise ValueError(f"{value} is not supported (this fabtest reads version {known}); "
                             "read it with the fabtest that wrote it")
        return value


def json_schema() -> dict[str, Any]:
    """The JSON Schema of what every reader requires of an experiment file, published as
    docs/reference/experiment.schema.json (tests keep the two equal): the same models, so a file
    that validates against it is one fabtest reads. Keys fabtest does not read are allowed."""
    schema = _Document.model_json_schema()
    schema["properties"]["format_version"] = {"type": "integer", "enum": list(FORMAT_VERSIONS)}
    schema.pop("title", None)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "fabtest experiment",
            "description": "results/<id>.json, as every fabtest reader requires it (docs/reference/experiment-json.md)",
            **schema}


_BRANCHES = {"int", "str", "float", "bool", "none", "nullable"}


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part) in _BRANCHES or str(part).startswith("_") or (str(part).endswith("]") and "[" in str(part)):
            continue  # a union branch pydantic names (int, list[...], a model), not a place in the file
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def document_problem(doc: Any) -> str | None:
    """``json.path: what is wrong`` for the first problem of an experiment document, else None."""
    try:
        _Document.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # a union reports one error per branch: show the one that got furthest into the value
        first = max(errors, key=lambda e: (tuple(str(p) for p in e["loc"][:1]), len(e["loc"]))) \
            if len({e["loc"][:2] for e in errors}) == 1 else errors[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "string_pattern_mismatch":
            message = "must be a plain name (letters, digits, '_', '.' and '-')"
        where = _where(tuple(first["loc"]))
        if first["type"] == "missing" and where == "format_version":
            return ("format_version: required: every experiment fabtest writes has one, so this is not a fabtest "
                    "experiment file (or it was edited); add \"format_version\": 1 if it is one")
        if first["type"] == "missing":
            return f"{where}: required"
        got = "" if first["type"].startswith("value_error") else f", got {_shown(first.get('input'))}"
        return f"{where}: {message}{got}"
    return None


def file_is_complete(path: Path) -> bool:
    """The file ends the way ``write_document`` ends it (``]`` then ``}``): half a file is not whole."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64))
            tail = handle.read()
    except OSError:
        return False
    return tail.rstrip().endswith(b"}") and tail.rstrip()[:-1].rstrip().endswith(b"]")
