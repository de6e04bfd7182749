"""The pre-flight check in pytest terms: what the collected items need, and when to check it.

Without xdist the check runs after collection (the items are known, so only the LLMs their
steps use are probed). Under xdist the controller runs it once, when the first worker reports
its collection and before any test is scheduled; it has node ids only, so it reads the
feature files of those ids. A failure stops the run as a usage error (exit 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabtest.preflight import Needs, PreflightFailed, configured_agents, run_preflight
from fabtest.pytest_plugin.collect import feature_templates, template_of

__all__ = ["check_items", "check_nodeids", "enabled"]


def enabled(config: pytest.Config) -> bool:
    """False with ``--fabtest-no-preflight`` or ``--collect-only``."""
    return not (config.getoption("--fabtest-no-preflight", False) or config.getoption("collectonly", False))


def check_items(fabtest_session: Any, items: list[pytest.Item]) -> None:
    """Pre-flight for the items collected in this process."""
    from fabtest.pytest_plugin.playbooks import PlaybookItem

    needs = Needs()
    scenarios = playbooks = False
    for item in items:
        if isinstance(item, PlaybookItem):
            playbooks = needs.judge = needs.simulator = True
            continue
        template = template_of(getattr(item, "obj", None))
        if template is not None:
            scenarios = True
            needs.add_scenario(_located(fabtest_session, template))
    _check(fabtest_session, needs, scenarios=scenarios, playbooks=playbooks)


def check_nodeids(fabtest_session: Any, ids: list[str]) -> None:
    """Pre-flight on the xdist controller, from the node ids a worker collected."""
    from fabtest.pytest_plugin.playbooks import DEFAULT_PATTERN, matches

    root = Path(str(fabtest_session.config.rootpath))
    pattern = fabtest_session.settings.playbooks or DEFAULT_PATTERN
    needs = Needs()
    scenarios = playbooks = False
    for file in dict.fromkeys(nodeid.split("::", 1)[0] for nodeid in ids):
        path = root / file
        if path.suffix == ".feature":
            scenarios = True
            for template in feature_templates(path):  # every scenario of a file any worker runs
                needs.add_scenario(_located(fabtest_session, template))
        elif matches(pattern, path, root):
            playbooks = needs.judge = needs.simulator = True
    _check(fabtest_session, needs, scenarios=scenarios, playbooks=playbooks)


def _located(fabtest_session: Any, template: Any) -> list[tuple[str, str]]:
    """A scenario's steps as ``(text, file:line)``, the file relative to the rootdir."""
    from fabtest.pytest_plugin.results import relative_to_root

    path = relative_to_root(fabtest_session.config, template.feature.filename)
    return [(step.name, f"{path}:{step.line_number}") for step in template.steps]


def _check(fabtest_session: Any, needs: Needs, *, scenarios: bool, playbooks: bool) -> None:
    settings = fabtest_session.settings
    if not (scenarios or playbooks):
        return
    needs.agents = configured_agents(settings, scenarios=scenarios, playbooks=playbooks, needs=needs)
    if fabtest_session.config.getoption("--fabtest-fake-llm", None) is not None:
        needs.judge = needs.simulator = False  # a scripted fake answers for both: nothing to probe
    try:
        run_preflight(settings, needs, cache_mode=settings.llm_cache)
    except PreflightFailed as exc:
        raise pytest.UsageError(str(exc)) from None
