"""What the built-in agent knows and can do: Python functions as tools, Agent Skills as instructions.

A Python tool is declared from its signature (a pydantic model of its parameters gives the JSON
schema, and validates and coerces the model's arguments before the call) and its docstring. A
skill is a directory with a ``SKILL.md`` (optional YAML front matter with ``name`` and
``description``, then the instructions); its other files are listed in the instructions and read
on demand through the ``read_skill_file`` tool, so a large skill costs tokens only when used.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError, create_model

from fabtest.agents.builtin_models import ToolSpec
from fabtest.errors import UsageError

__all__ = ["PythonTool", "Skill", "load_skills", "python_tools", "skill_file_tool", "skills_instructions"]

SKILL_FILE_TOOL = "read_skill_file"
_MAX_SKILL_FILES = 50


@dataclass
class PythonTool:
    """A Python function the model may call."""

    spec: ToolSpec
    func: Callable[..., Any]
    params: Any  # the pydantic model of the parameters

    def __call__(self, arguments: Mapping[str, Any]) -> Any:
        try:
            validated = self.params.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ValueError(f"invalid arguments for {self.spec.name}: "
                             + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
        return self.func(**{name: getattr(validated, name) for name in self.params.model_fields})


def python_tools(value: Any, *, where: str) -> list[PythonTool]:
    """Tools from a callable, a list of callables, or a mapping of name to callable."""
    if callable(value) and not isinstance(value, (list, tuple, Mapping)):
        items: list[tuple[str | None, Any]] = [(None, value)]
    elif isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(None, v) for v in value]
    else:
        raise UsageError(f"{where}: tools must name a list of functions (or a dict of name to function), "
                         f"got {type(value).__name__}")
    return [_python_tool(name, func, where=where) for name, func in items]


def _python_tool(name: str | None, func: Any, *, where: str) -> PythonTool:
    if not callable(func):
        raise UsageError(f"{where}: tools contains {func!r}, which is not a function")
    name = name or getattr(func, "__name__", None)
    if not name or name == "<lambda>":
        raise UsageError(f"{where}: tools contains a function without a name; use a dict {{name: function}}")
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = Any if param.annotation is param.empty else param.annotation
        fields[param.name] = (annotation, ... if param.default is param.empty else param.default)
    try:
        params = create_model(f"{name}_arguments", **fields)
        schema = params.model_json_schema()
    except Exception as exc:  # an annotation pydantic cannot describe
        raise UsageError(f"{where}: tool {name!r}: cannot describe its parameters as JSON schema: {exc}") from None
    schema.pop("title", None)
    description = inspect.cleandoc(func.__doc__ or "") or name
    return PythonTool(ToolSpec(name, description, schema), func, params)


@dataclass(frozen=True)
class Skill:
    """One Agent Skill directory."""

    name: str
    description: str
    body: str
    root: Path
    files: tuple[str, ...]


def load_skills(dirs: list[str], *, root: Path, where: str) -> list[Skill]:
    """Read every ``SKILL.md``; a missing directory or file, or bad front matter, is a one-line error."""
    skills = []
    for index, entry in enumerate(dirs):
        path = (root / entry).resolve()
        skill_md = path / "SKILL.md"
        if not skill_md.is_file():
            raise UsageError(f"{where}: skills[{index}]: {entry!r} has no SKILL.md "
                             f"(looked for {skill_md}); a skill is a directory with a SKILL.md")
        text = skill_md.read_text(encoding="utf-8")
        meta: dict[str, Any] = {}
        body = text
        if text.startswith("---"):
            head, sep, rest = text[3:].partition("\n---")
            if not sep:
                raise UsageError(f"{skill_md}: the front matter opened with --- is never closed")
            try:
                meta = yaml.safe_load(head) or {}
            except yaml.YAMLError as exc:
                raise UsageError(f"{skill_md}: invalid YAML front matter: {exc}".replace("\n", " ")) from None
            if not isinstance(meta, dict):
                raise UsageError(f"{skill_md}: the front matter must be a mapping with name and description")
            body = rest.lstrip("\n")
        files = sorted(str(p.relative_to(path)) for p in path.rglob("*")
                       if p.is_file() and p.name != "SKILL.md" and not p.name.startswith("."))
        skills.append(Skill(name=str(meta.get("name") or path.name), description=str(meta.get("description") or ""),
                            body=body.strip(), root=path, files=tuple(files[:_MAX_SKILL_FILES])))
    return skills


def skills_instructions(skills: list[Skill]) -> str:
    """The skills as a section of the system instruction."""
    parts = []
    for skill in skills:
        lines = [f"## Skill: {skill.name}"]
        if skill.description:
            lines.append(skill.description)
        lines.append(skill.body)
        if skill.files:
            lines.append(f"Files of this skill (read one with {SKILL_FILE_TOOL}(skill={skill.name!r}, path=...)): "
                         + ", ".join(skill.files))
        parts.append("\n\n".join(lines))
    return "\n\n".join(parts)


def skill_file_tool(skills: list[Skill]) -> PythonTool | None:
    """The ``read_skill_file`` tool, when some skill has files besides its SKILL.md."""
    by_name = {s.name: s for s in skills if s.files}
    if not by_name:
        return None

    def read_skill_file(skill: str, path: str) -> str:
        """Read a file that belongs to one of your skills."""
        found = by_name.get(skill)
        if found is None:
            raise ValueError(f"no skill {skill!r} with files; skills: {', '.join(sorted(by_name))}")
        if path not in found.files:
            raise ValueError(f"skill {skill!r} has no file {path!r}; its files: {', '.join(found.files)}")
        return (found.root / path).read_text(encoding="utf-8", errors="replace")

    return _python_tool(SKILL_FILE_TOOL, read_skill_file, where="skills")
