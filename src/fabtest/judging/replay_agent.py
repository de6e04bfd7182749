"""Which agent a recorded feature scenario talks to today, read from its feature file.

A result does not record ``Given the agent "name"``; the feature file does, and replay wants the
agent as the project configures it *now* (the point is to try a changed agent). So the scenario's
Feature Background, Rule Background and own steps are read with the Gherkin parser pytest-bdd uses,
and the last ``the agent "NAME"`` among them wins, as it does when the steps run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fabtest.errors import UsageError
from fabtest.experiment.model import ScenarioResult

__all__ = ["feature_agent_name"]

_AGENT_STEP = re.compile(r'^the agent "(?P<name>[^"]*)"$')


def _steps(node: dict[str, Any]) -> list[str]:
    return [str(step.get("text", "")) for step in node.get("steps") or []]


def _is_scenario(node: dict[str, Any], result: ScenarioResult) -> bool:
    """Outlines and scenario-set runs add " (k=v)" or " [record]" to the scenario's name."""
    name = str(node.get("name", ""))
    return result.name == name or result.name.startswith((f"{name} (", f"{name} ["))


def feature_agent_name(rootdir: Path, result: ScenarioResult) -> str | None:
    """The agent name the scenario's steps choose, or None (the project's default agent). Raises
    UsageError when the recorded feature file is gone or no longer parses."""
    if not result.feature_file.endswith(".feature"):
        return None
    path = rootdir / result.feature_file
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"{result.feature_file}: cannot read the scenario's feature file ({exc.strerror or exc})") from None
    from gherkin.errors import CompositeParserException, ParserError
    from gherkin.parser import Parser

    try:
        document: Any = Parser().parse(text)  # plain dicts; gherkin's TypedDicts do not help here
        feature: dict[str, Any] = document.get("feature") or {}
    except (CompositeParserException, ParserError) as exc:
        raise UsageError(f"{result.feature_file}: does not parse: {str(exc).splitlines()[0]}") from None
    steps: list[str] = []
    for child in feature.get("children") or []:
        if "background" in child:
            steps += _steps(child["background"])
        elif "scenario" in child and _is_scenario(child["scenario"], result) and result.rule is None:
            steps += _steps(child["scenario"])
        elif "rule" in child and child["rule"].get("name") == result.rule:
            for inner in child["rule"].get("children") or []:
                if "background" in inner:
                    steps += _steps(inner["background"])
                elif "scenario" in inner and _is_scenario(inner["scenario"], result):
                    steps += _steps(inner["scenario"])
    names = [m["name"] for m in map(_AGENT_STEP.match, steps) if m]
    return names[-1] if names else None
