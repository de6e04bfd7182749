"""Which scenario a pytest item runs, as the engine's :class:`~fabtest.engine.result.ScenarioIdentity`.

Building the result itself is the engine's (:mod:`fabtest.engine.result`); this module only reads
the item: its pytest-bdd template (feature, rule, name, an Outline example's values) and its
parameters (scenario-set record, iteration).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from fabtest.engine.result import ScenarioIdentity
from fabtest.pytest_plugin.collect import template_of
from fabtest.pytest_plugin.stash_keys import ITERATION_KEY

__all__ = ["PENDING_PROPERTY", "RESULT_PROPERTY", "identity_of", "relative_to_root"]

#: the report's user property carrying a finished scenario's result (plain data, survives xdist)
RESULT_PROPERTY = "fabtest_result"
#: the user property saying which scenario a worker started, so a crash still records it
PENDING_PROPERTY = "fabtest_pending"


def crashed_message(nodeid: str) -> str:
    """The failure of a scenario whose worker died before it finished."""
    return f"{nodeid}: the scenario never finished (its worker crashed)"


def identity_of(item: pytest.Item) -> ScenarioIdentity:
    """The scenario ``item`` runs, read from its template and its parameters."""
    template = template_of(getattr(item, "obj", None))
    callspec = getattr(item, "callspec", None)
    params: dict[str, Any] = callspec.params if callspec is not None else {}
    filename = template.feature.filename if template is not None else str(item.path)
    return ScenarioIdentity(
        feature=template.feature.name if template is not None else "",
        name=_scenario_name(item, template, params),
        rule=template.rule.name if template is not None and template.rule is not None else None,
        record=params.get("fabtest_record"),
        iteration=item.stash.get(ITERATION_KEY, None) or int(params.get("fabtest_iteration", 1)),
        nodeid=item.nodeid,
        feature_file=relative_to_root(item.config, filename),
        steps=_steps(template, params),
    )


def _steps(template: Any, params: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The scenario's steps as the feature file words them (background first, an Outline's example
    values filled in): what the conversation page shows beside the transcript."""
    if template is None:
        return ()
    try:
        steps = template.render(params.get("_pytest_bdd_example") or {}).steps
    except Exception:  # a template pytest-bdd cannot render loses its steps, not its result
        return ()
    out = []
    for step in steps:
        shown: dict[str, Any] = {"keyword": str(step.keyword).strip(), "text": str(step.name)}
        if step.docstring is not None:
            shown["docstring"] = str(step.docstring)
        if step.datatable is not None:
            shown["table"] = [[str(cell) for cell in row] for row in step.datatable.raw()]
        out.append(shown)
    return tuple(out)


def _scenario_name(item: pytest.Item, template: Any, params: dict[str, Any]) -> str:
    if template is None:
        return item.name
    name: str = template.name
    example = params.get("_pytest_bdd_example")
    if example:
        name += " (" + ", ".join(f"{k}={v}" for k, v in example.items()) + ")"
    return name


def relative_to_root(config: pytest.Config, filename: str) -> str:
    """``filename`` relative to the project root, so results and messages match across machines."""
    try:
        return os.path.relpath(filename, str(config.rootpath)) if filename else filename
    except ValueError:
        return filename
