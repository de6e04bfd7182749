"""What a recorded feature scenario's setup says today: its agent and its topic tables.

A result records neither ``Given the agent "name"`` nor the topics' triggers; the feature file
does, and replay wants the agent as the project configures it *now* (the point is to try a changed
agent) and topics classified as a run would classify them. So the scenario's Feature Background,
Rule Background and own steps are read with the Gherkin parser pytest-bdd uses: the last
``the agent "NAME"`` among them wins, and every ``the topics:`` table applies in order, as they do
when the steps run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.errors import UsageError
from fabtest.experiment.model import ScenarioResult

__all__ = ["FeatureSetup", "feature_setup"]

_AGENT_STEP = re.compile(r'^the agent "(?P<name>[^"]*)"$')


@dataclass
class FeatureSetup:
    """The agent a scenario names (None: the project's default) and its topic tables (header first)."""

    agent: str | None = None
    topic_tables: list[list[list[str]]] = field(default_factory=list)


def _is_scenario(node: dict[str, Any], result: ScenarioResult) -> bool:
    """Outlines and scenario-set runs add " (k=v)" or " [record]" to the scenario's name."""
    name = str(node.get("name", ""))
    return result.name == name or result.name.startswith((f"{name} (", f"{name} ["))


def _steps(feature: dict[str, Any], result: ScenarioResult) -> list[dict[str, Any]]:
    """The steps that run for ``result``, in order: backgrounds first, then the scenario's own."""
    steps: list[dict[str, Any]] = []
    for child in feature.get("children") or []:
        if "background" in child:
            steps += child["background"].get("steps") or []
        elif "scenario" in child and result.rule is None and _is_scenario(child["scenario"], result):
            steps += child["scenario"].get("steps") or []
        elif "rule" in child and child["rule"].get("name") == result.rule:
            for inner in child["rule"].get("children") or []:
                if "background" in inner:
                    steps += inner["background"].get("steps") or []
                elif "scenario" in inner and _is_scenario(inner["scenario"], result):
                    steps += inner["scenario"].get("steps") or []
    return steps


def feature_setup(rootdir: Path, result: ScenarioResult) -> FeatureSetup:
    """The setup of ``result``'s scenario in its feature file (empty for other sources). Raises
    UsageError when the recorded feature file is gone or no longer parses."""
    setup = FeatureSetup()
    if not result.feature_file.endswith(".feature"):
        return setup
    try:
        text = (rootdir / result.feature_file).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"{result.feature_file}: cannot read the scenario's feature file "
                         f"({exc.strerror or exc})") from None
    from gherkin.errors import CompositeParserException, ParserError
    from gherkin.parser import Parser

    try:
        document: Any = Parser().parse(text)  # plain dicts; gherkin's TypedDicts do not help here
    except (CompositeParserException, ParserError) as exc:
        raise UsageError(f"{result.feature_file}: does not parse: {str(exc).splitlines()[0]}") from None
    for step in _steps(document.get("feature") or {}, result):
        words = str(step.get("text", "")).strip()
        if match := _AGENT_STEP.match(words):
            setup.agent = match["name"]
        elif words == "the topics:" and step.get("dataTable"):
            rows = step["dataTable"].get("rows") or []
            setup.topic_tables.append([[str(c.get("value", "")) for c in row.get("cells") or []] for row in rows])
    return setup
