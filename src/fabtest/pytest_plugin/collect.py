"""Direct collection: ``pytest features/`` turns each ``.feature`` file into a module of scenarios.

Each file becomes a synthetic module whose test functions are built by ``pytest_bdd.scenario``, so
everything pytest-bdd offers (step lookup through fixtures, outlines, Rules, Backgrounds, hooks)
works unchanged and users extend the vocabulary with ordinary pytest-bdd steps in a conftest.
"""

from __future__ import annotations

import difflib
import functools
import re
import types
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd import scenario as bdd_scenario
from pytest_bdd.feature import get_feature
from pytest_bdd.parser import Feature, FeatureParser, Rule, ScenarioTemplate, get_tag_names
from pytest_bdd.scenario import get_python_name_generator, scenario_wrapper_template_registry

from fabtest.engine.attachments import FileLoader
from fabtest.experiment.stable_id import canonical_path

_ENCODING = "utf-8-sig"
_KEYWORD_LINE = re.compile(r"^\s*(Scenario Outline|Scenario Template|"
                           r"Scenario|Example|Examples|Background|Rule)\b(?!\s*:)")

# canonical Feature::Rule::Scenario path -> "file:line" of the first scenario collected with it
_SEEN_KEY = pytest.StashKey[dict[str, str]]()
#: the run's file loader: collection checks (and keeps) every file a step sends
FILE_LOADER_KEY = pytest.StashKey[FileLoader]()


class FeatureModule(pytest.Module):
    """A ``.feature`` file collected as if it were a test module."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        items = list(super().collect())
        for item in items:
            template = template_of(getattr(item, "obj", None))
            # skips and reports point at the scenario's line, not pytest-bdd's code
            if template is not None and isinstance(item, pytest.Item):
                item.reportinfo = functools.partial(_scenario_location, self.path, template)  # type: ignore[method-assign]
        return items

    def _getobj(self) -> types.ModuleType:
        path = Path(self.path)
        module = types.ModuleType(f"fabtest_feature_{_slug(path)}")
        module.__file__ = str(path)
        try:  # utf-8-sig: a byte order mark written by some editors is not part of "Feature:"
            feature = get_feature(str(path.parent), path.name, encoding=_ENCODING)
            templates = _all_templates(path, feature)
        except Exception as exc:  # any parse failure is the user's file
            raise self.CollectError(_parse_error(path, exc)) from None
        missing = _keyword_without_colon(path, feature, templates)
        if missing is not None:
            line, keyword = missing
            raise self.CollectError(f'{_relative_path(self, path)}:{line}: "{keyword}" needs a colon ("{keyword}: '
                                    'name"); '
                                    "without it the line is read as description text and its scenario is lost")
        problem = _file_problem(self, path, templates)
        if problem is not None:
            raise self.CollectError(problem)
        used: set[str] = set()
        for template in self._unique_templates(path, feature, templates):
            name = template.name
            if template.keyword.strip() in ("Scenario Outline", "Scenario Template") and not any(template.examples):
                raise self.CollectError(f"{_relative_path(self, path)}:{template.line_number}: Scenario Outline "
                                        f'"{name}" has no Examples table, so its <placeholders> would stay literal')
            unknown = _unknown_placeholder(template)
            if unknown is not None:
                raise self.CollectError(f"{_relative_path(self, path)}:{unknown}")
            if feature.scenarios.get(name) is template:
                func = bdd_scenario(str(path), name, features_base_dir=str(path.parent))(_noop)
            else:  # the same name under another Rule: pytest-bdd keeps one scenario per name
                from pytest_bdd.scenario import _get_scenario_decorator

                func = _get_scenario_decorator(feature, str(path), template, name)(_noop)
            attr = next(n for n in get_python_name_generator(name) if n not in used)
            used.add(attr)
            func.__name__ = attr
            func.__module__ = module.__name__
            setattr(module, attr, func)
        return module


    def _unique_templates(self, path: Path, feature: Feature,
                          templates: list[ScenarioTemplate]) -> list[ScenarioTemplate]:
        """Every scenario of the file, in order, each with a stable id no other collected scenario has.

        The stable id is ``Feature::Rule::Scenario`` (it survives moves and reordering), so two
        scenarios that share it would be merged in results and comparisons: a collection error.
        """
        seen = self.config.stash.setdefault(_SEEN_KEY, {})
        here = _relative_path(self, path)
        for template in templates:
            rule = template.rule.name if template.rule is not None else None
            key = canonical_path(feature.name, rule, template.name)
            location = f"{here}:{template.line_number}"
            first = seen.setdefault(key, location)
            if first != location:
                within = "Rule" if rule else "Feature"
                raise self.CollectError(
                    f'{location}: scenario "{template.name.strip()}" has the same {within} and name as {first}, '
                    "so both would get one stable id in results and comparisons; rename one of them"
                    + ("" if rule else ", or put them under different Rules"))
        return templates


def _file_problem(node: pytest.Collector, path: Path, templates: list[ScenarioTemplate]) -> str | None:
    """The first file a step of the feature sends that cannot be sent (missing, too big, ...)."""
    from fabtest.pytest_plugin.file_steps import check_feature_files

    loader = node.config.stash.get(FILE_LOADER_KEY, None) or FileLoader()
    steps: dict[int, tuple[str, int, Any]] = {}
    for template in templates:
        for step in template.steps:  # a Background's steps come with every scenario: checked once
            rows = [[cell.value for cell in row.cells] for row in step.datatable.rows] if step.datatable else None
            steps.setdefault(step.line_number, (step.name, step.line_number, rows))
    return check_feature_files(path, list(steps.values()), loader, _relative_path(node, path))


def feature_templates(path: Path) -> list[ScenarioTemplate]:
    """Every scenario of a feature file, or none when it does not parse (collection reports that)."""
    try:
        return _all_templates(path, get_feature(str(path.parent), path.name, encoding=_ENCODING))
    except Exception:  # the collector words the parse error
        return []


def _all_templates(path: Path, feature: Feature) -> list[ScenarioTemplate]:
    """All scenarios, with repeated names too (pytest-bdd's ``feature.scenarios`` keeps the last of
    each name, which would drop the others silently)."""
    parser = FeatureParser(str(path.parent), path.name, encoding=_ENCODING)
    document = parser._parse_feature_file()  # the one parse that sees every scenario
    templates: list[ScenarioTemplate] = []
    for child in document.feature.children:
        if child.scenario:
            templates.append(_known(feature, parser.parse_scenario(child.scenario, feature, None)))
        elif child.rule:
            rule_data = child.rule
            background = next((parser.parse_background(c.background) for c in rule_data.children if c.background), None)
            rule = Rule(keyword=rule_data.keyword, name=rule_data.name, description=rule_data.description,
                        tags=get_tag_names(rule_data.tags), background=background)
            templates.extend(_known(feature, parser.parse_scenario(c.scenario, feature, rule))
                             for c in rule_data.children if c.scenario)
    return templates


_PLACEHOLDER = re.compile(r"<([A-Za-z_][\w .-]*)>")


def _unknown_placeholder(template: ScenarioTemplate) -> str | None:
    """``LINE: message`` for the first ``<name>`` of an outline that an Examples table has no column
    for: pytest-bdd would leave it literal, and the step would run with the text ``<autor>``."""
    own = [step for step in template.steps if step.background is None]
    texts = [(template.line_number, template.name)]
    for step in own:
        texts.append((step.line_number, step.name))
        if step.docstring:
            texts.append((step.line_number, step.docstring))
        if step.datatable is not None:
            texts.extend((cell.location.line, cell.value) for row in step.datatable.rows for cell in row.cells)
    for examples in template.examples:
        if not examples:
            continue
        columns = list(examples.example_params)
        for line, text in texts:
            for name in _PLACEHOLDER.findall(text or ""):
                if name in columns:
                    continue
                close = difflib.get_close_matches(name, columns, n=1, cutoff=0.6)
                hint = f"; did you mean <{close[0]}>?" if close else "; add the column or fix the name"
                table = f"the Examples table at line {examples.line_number}" if examples.line_number else "Examples"
                return (f"{line}: the placeholder <{name}> has no column in {table} "
                        f"(columns: {', '.join(columns)}){hint}")
    return None


def _keyword_without_colon(path: Path, feature: Feature, templates: list[ScenarioTemplate]) -> tuple[int, str] | None:
    """The first ``Scenario name`` (no colon) line that Gherkin swallowed as description text.

    Only English keywords, and only lines inside a description: anywhere else Gherkin itself
    already reports the line as a syntax error.
    """
    if feature.language not in ("", "en"):
        return None
    descriptions = [feature.description]
    for template in templates:
        descriptions.append(template.description)
        if template.rule is not None:
            descriptions.append(template.rule.description)
    described = {line.strip() for text in descriptions for line in (text or "").splitlines() if line.strip()}
    for number, line in enumerate(path.read_text(encoding=_ENCODING).splitlines(), start=1):
        match = _KEYWORD_LINE.match(line)
        if match and line.strip() in described:
            return number, match.group(1)
    return None


def _known(feature: Feature, template: ScenarioTemplate) -> ScenarioTemplate:
    """pytest-bdd's own template for the scenario it kept, so ``scenario()`` binds the same object."""
    kept = feature.scenarios.get(template.name)
    return kept if kept is not None and kept.line_number == template.line_number else template


def _parse_error(path: Path, exc: Exception) -> str:
    """One line naming the file and line of a malformed feature (gherkin's message has both)."""
    if isinstance(exc, KeyError):  # pytest-bdd found no "feature" in the parsed document
        return f'{path}: no "Feature:" found (the file is empty or only has comments)'
    text = " ".join(str(exc).split())
    return text if str(path.name) in text else f"{path}: {text}"


def _relative_path(node: pytest.Collector, path: Path) -> str:
    try:
        return str(path.relative_to(node.config.rootpath))
    except ValueError:
        return str(path)


def _scenario_location(path: Path, template: Any) -> tuple[Path, int, str]:
    return path, template.line_number - 1, f"Scenario: {template.name}"


def _noop() -> None:
    """Body of a directly collected scenario: the steps do all the work."""


def _slug(path: Path) -> str:
    return "".join(c if c.isalnum() else "_" for c in str(path.with_suffix("")))[-120:]


def is_scenario_function(obj: Any) -> bool:
    """True for any pytest-bdd scenario test function (ours or the user's ``scenarios()``)."""
    return registry_has(obj)


def registry_has(obj: Any) -> bool:
    try:
        return obj in scenario_wrapper_template_registry
    except TypeError:
        return False


def template_of(obj: Any) -> Any:
    try:
        return scenario_wrapper_template_registry.get(obj)
    except TypeError:
        return None
