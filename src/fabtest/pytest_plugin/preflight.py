"""The pre-flight check in pytest terms: what the collected items need, and when to check it.

Without xdist the check runs after collection (the items are known, so only the LLMs their
steps use are probed). Under xdist the controller runs it once, when the first worker reports
its collection; it has node ids only, so it reads the feature files of those ids.

The agents' checks are local and quick (an import, a TCP handshake): they run before the first
scenario, and a problem stops the run as a usage error (exit 4) before anything is spent. The LLM
probes are a network round trip each (seconds under load) and would delay every run by that:
:class:`LLMProbes` sends them on a thread of their own while the first scenarios start. A probe
that fails stops the run: no scenario starts after it, those in flight are abandoned, no
experiment is written, and the run ends with exit 4 and the pre-flight line. A failure a probe
finds (a rejected key, an unknown model, an unreachable host) fails the scenarios' own calls as
well, so what started meanwhile spends nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fabtest.engine.preflight import (
    Needs,
    PreflightFailed,
    check_llms,
    configuration_problems,
    configured_agents,
    reachability_problems,
)
from fabtest.pytest_plugin.collect import feature_templates, template_of

__all__ = ["LLMProbes", "check_items", "check_nodeids", "enabled"]


def enabled(config: pytest.Config) -> bool:
    """False with ``--fabtest-no-preflight`` or ``--collect-only``."""
    return not (config.getoption("--fabtest-no-preflight", False) or config.getoption("collectonly", False))


#: ``session.shouldstop`` while a failed probe stops the run (the pre-flight line follows at the end)
STOPPING = "fabtest pre-flight failed (see the error below)"


class LLMProbes:
    """The judge's and the simulator's pre-flight calls, on a thread beside the first scenarios."""

    def __init__(self, check: Callable[[], list[str]], stop: Callable[[str], None]) -> None:
        self.failure: PreflightFailed | None = None
        self._stop = stop
        self._thread = threading.Thread(target=self._run, args=(check,), name="fabtest-preflight", daemon=True)
        self._thread.start()

    def _run(self, check: Callable[[], list[str]]) -> None:
        try:
            problems = check()
        except Exception as exc:  # a crash of the check is reported as its result
            problems = [f"the LLM check crashed: {type(exc).__name__}: {exc}"]
        if problems:
            self.failure = PreflightFailed(problems)
            self._stop(STOPPING)

    def result(self, *, wait: bool = True) -> PreflightFailed | None:
        """The failure, or None; ``wait`` for the probes still out (each is bounded by its timeout
        and at most two retries), else only what is known now (an interrupted run)."""
        if wait:
            self._thread.join()
        return self.failure


def check_items(fabtest_session: Any, items: list[pytest.Item], stop: Callable[[str], None]) -> LLMProbes | None:
    """Pre-flight for the items collected in this process; the LLM probes it started, if any."""
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
    return _check(fabtest_session, needs, stop, scenarios=scenarios, playbooks=playbooks)


def check_nodeids(fabtest_session: Any, ids: list[str], stop: Callable[[str], None]) -> LLMProbes | None:
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
    return _check(fabtest_session, needs, stop, scenarios=scenarios, playbooks=playbooks)


def _located(fabtest_session: Any, template: Any) -> list[tuple[str, str]]:
    """A scenario's steps as ``(text, file:line)``, the file relative to the rootdir."""
    from fabtest.pytest_plugin.results import relative_to_root

    path = relative_to_root(fabtest_session.config, template.feature.filename)
    return [(step.name, f"{path}:{step.line_number}") for step in template.steps]


def _check(fabtest_session: Any, needs: Needs, stop: Callable[[str], None], *, scenarios: bool,
           playbooks: bool) -> LLMProbes | None:
    settings = fabtest_session.settings
    if not (scenarios or playbooks):
        return None
    needs.agents = configured_agents(settings, scenarios=scenarios, playbooks=playbooks, needs=needs)
    if fabtest_session.config.getoption("--fabtest-fake-llm", None) is not None:
        needs.judge = needs.simulator = False  # a scripted fake answers for both: nothing to probe
    problems = configuration_problems(settings, needs) or reachability_problems(needs)
    if problems:
        raise pytest.UsageError(str(PreflightFailed(problems))) from None
    if not (needs.judge or needs.simulator) or settings.llm_cache == "replay":
        return None
    return LLMProbes(lambda: check_llms(settings, needs, cache_mode=settings.llm_cache,
                                        llm_for=fabtest_session.llms.role_llm), stop)
