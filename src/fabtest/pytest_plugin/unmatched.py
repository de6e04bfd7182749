"""Every step of every scenario that will run is matched to a step definition at collection.

pytest-bdd looks a step's definition up only when the step is reached, so a typo in the third turn
was found after the agent had run the two above it (and every other scenario had run too). Once
collection is over, every selected scenario's steps are looked up the way pytest-bdd will look them
up (the definitions visible to the scenario: fabtest's, the conftests', plugins', the module's),
and each file with a step that matches none gets a collection error, one line per step with the
hint of :mod:`fabtest.pytest_plugin.hints`: pytest stops before anything runs (exit 2), as for a
feature that does not parse. Deselected scenarios and those marked skip, skipif or xfail (not
expected to pass: a step not written yet is their business) are not checked.
"""

from __future__ import annotations

from typing import Any

import pytest

from fabtest.pytest_plugin import hints
from fabtest.pytest_plugin.collect import template_of
from fabtest.pytest_plugin.results import relative_to_root

__all__ = ["report_unmatched_steps"]

_NOT_EXPECTED_TO_PASS = ("skip", "skipif", "xfail")


def report_unmatched_steps(config: pytest.Config, items: list[pytest.Item]) -> int:
    """Report a collection error per file with a step no definition matches; the number of files."""
    errors: dict[str, tuple[pytest.Collector | None, list[str]]] = {}
    visible: dict[str, list[Any]] = {}  # the step definitions a module's scenarios see, looked up once
    reported: set[tuple[str, int]] = set()  # an Outline's step line once, for its first Examples row
    for item in items:
        template = template_of(getattr(item, "obj", None))
        if template is None or any(item.get_closest_marker(name) for name in _NOT_EXPECTED_TO_PASS):
            continue
        callspec = getattr(item, "callspec", None)
        example = callspec.params.get("_pytest_bdd_example", {}) if callspec is not None else {}
        where = relative_to_root(config, template.feature.filename)
        owner = item.getparent(pytest.Module) or item.parent
        key = owner.nodeid if owner is not None else item.nodeid
        if key not in visible:
            visible[key] = _step_definitions(item)
        for step in template.render(example or {}).steps:
            if (where, step.line_number) in reported or any(
                    ctx.type in (None, step.type) and ctx.parser.is_matching(step.name) for ctx in visible[key]):
                continue
            reported.add((where, step.line_number))
            lines = errors.setdefault(where, (owner if isinstance(owner, pytest.Collector) else None, []))[1]
            lines.append(hints.unmatched_step_message(item, f"{where}:{step.line_number}", step))
    for where, (owner, lines) in errors.items():
        report = pytest.CollectReport(owner.nodeid if owner is not None else where, "failed", "\n".join(lines), [])
        config.hook.pytest_collectreport(report=report)
    return len(errors)


def _step_definitions(item: pytest.Item) -> list[Any]:
    """Every step definition visible to ``item``, as pytest-bdd's ``find_fixturedefs_for_step`` finds
    them (pytest decides the visibility), without going through every fixture again for each step."""
    from pytest_bdd.compat import get_fixture_names, getfixturedefs
    from pytest_bdd.steps import step_function_context_registry

    manager = item.session._fixturemanager  # as pytest-bdd finds a step's definition
    found = []
    for name in get_fixture_names(manager):
        for fixturedef in getfixturedefs(manager, name, item) or ():
            ctx = step_function_context_registry.get(fixturedef.func)
            if ctx is not None:
                found.append(ctx)
    return found
