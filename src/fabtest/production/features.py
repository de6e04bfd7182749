"""The ``@production`` features ``fabtest score`` applies: their scenarios, each a list of ``Then`` steps.

A production scenario judges a conversation that already happened, so it can only have outcome
steps (``Then`` and the ``And`` / ``But`` after one) and criterion definitions; a ``When`` or any
other ``Given`` would ask fabtest to act, and is one line naming the file and line (exit 2)
before anything is read or judged. A step the score vocabulary does not have is refused the same
way. Scenarios run when the Feature, its Rule or the Scenario is tagged ``@production``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.errors import UsageError
from fabtest.production.vocabulary import Step, is_definition, matching

__all__ = ["ProductionScenario", "load_features"]

TAG = "@production"


@dataclass
class ProductionScenario:
    """One scenario of a ``@production`` feature: who it is (for its stable id) and its steps."""

    feature: str
    name: str
    rule: str | None
    feature_file: str
    line: int
    #: criterion definitions (Backgrounds first), then the checks
    definitions: list[Step] = field(default_factory=list)
    checks: list[Step] = field(default_factory=list)

    def gherkin_steps(self) -> list[dict[str, Any]]:
        """The steps as ``ScenarioResult.steps`` records them."""
        return [{"keyword": "Given" if s in self.definitions else "Then", "text": s.text,
                 **({"table": s.table} if s.table else {})} for s in [*self.definitions, *self.checks]]


def _steps(raw: list[dict[str, Any]], where: str) -> tuple[list[Step], list[Step]]:
    definitions: list[Step] = []
    checks: list[Step] = []
    kind = ""
    for step in raw:
        kind = kind if step.get("keywordType") == "Conjunction" else str(step.get("keywordType", ""))
        text = str(step.get("text", "")).strip()
        line = f"{where}:{step['location']['line']}"
        table = [[str(c.get("value", "")) for c in row.get("cells") or []]
                 for row in (step.get("dataTable") or {}).get("rows") or []]
        parsed = Step(text, line, table)
        if kind == "Context" and is_definition(text):
            definitions.append(parsed)
        elif kind != "Outcome":
            raise UsageError(f"{line}: a @production scenario has only Then steps (it judges a conversation that "
                             f"already happened): {step.get('keyword', '').strip()} {text}")
        elif matching(text) is None:
            raise UsageError(f"{line}: not a step fabtest score can check on a logged conversation: Then {text} "
                             "(docs/how-to/production.md lists them)")
        else:
            checks.append(parsed)
    return definitions, checks


def _tags(node: dict[str, Any]) -> set[str]:
    return {str(t.get("name")) for t in node.get("tags") or []}


def load_features(paths: list[str], rootdir: Path) -> list[ProductionScenario]:
    """Every ``@production`` scenario in ``paths``; UsageError for a file that does not parse, a step
    a production scenario cannot have, or no production scenario at all."""
    from gherkin.errors import CompositeParserException, ParserError
    from gherkin.parser import Parser

    out: list[ProductionScenario] = []
    for raw in paths:
        path = Path(raw)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise UsageError(f"{raw}: cannot read the feature ({exc.strerror or exc})") from None
        try:
            document: Any = Parser().parse(text)
        except (CompositeParserException, ParserError) as exc:
            raise UsageError(f"{raw}: does not parse: {str(exc).splitlines()[0]}") from None
        where = _relative(path, rootdir)
        feature = document.get("feature") or {}
        found = _scenarios(feature, str(feature.get("name", "")), where, TAG in _tags(feature))
        if not found:
            raise UsageError(f"{raw}: no @production scenario (tag the Feature or a Scenario @production)")
        out += found
    return out


def _relative(path: Path, rootdir: Path) -> str:
    try:
        return path.resolve().relative_to(rootdir.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _scenarios(node_with_children: dict[str, Any], feature: str, where: str, tagged: bool, rule: str | None = None,
               background: tuple[list[Step], list[Step]] = ([], [])) -> list[ProductionScenario]:
    out: list[ProductionScenario] = []
    defs, checks = list(background[0]), list(background[1])
    for child in node_with_children.get("children") or []:
        if "background" in child:
            more = _steps(child["background"].get("steps") or [], where)
            defs, checks = defs + more[0], checks + more[1]
        elif "rule" in child:
            node = child["rule"]
            out += _scenarios(node, feature, where, tagged or TAG in _tags(node), str(node.get("name", "")),
                              (defs, checks))
        elif "scenario" in child:
            node = child["scenario"]
            if not (tagged or TAG in _tags(node)):
                continue
            if node.get("examples"):
                raise UsageError(f"{where}:{node['location']['line']}: a @production Scenario Outline is not "
                                 "supported: write one Scenario per check set")
            own = _steps(node.get("steps") or [], where)
            out.append(ProductionScenario(feature, str(node.get("name", "")), rule, where,
                                          int(node["location"]["line"]),
                                          defs + own[0], checks + own[1]))
    return out
