"""Collecting playbook files as pytest items.

Files whose path relative to the rootdir matches ``[tool.fabtest] playbooks`` (default
``scenarios/playbooks/*.playbook.{json,yaml,yml}``; ``*`` stays inside one directory, ``**``
crosses directories, ``{a,b}`` are alternatives) become a :class:`PlaybookFile` with one
:class:`PlaybookItem` per playbook (one per iteration with ``--fabtest-iterations``). The item
runs :func:`fabtest.playbook.run.run_playbook` with the session's judge and simulator, is skipped
with the reason when an LLM it needs is missing, and fails with a short message (no traceback).
Its :class:`ScenarioResult` reaches the report's ``user_properties`` (the small reporter plugin
below), so it is recorded into the experiment exactly like a feature scenario.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.errors import FabtestError
from fabtest.pytest_plugin import not_run

RESULT_KEY = pytest.StashKey[dict[str, Any]]()
DEFAULT_PATTERN = "scenarios/playbooks/*.playbook.{json,yaml,yml}"
_REPORTER_NAME = "fabtest-playbooks"


def collect_playbook(session: Any, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    pattern = getattr(session.settings, "playbooks", None) or DEFAULT_PATTERN
    rootdir = Path(str(parent.config.rootpath))
    if not matches(pattern, file_path, rootdir):
        return None
    pm = parent.config.pluginmanager
    if not pm.has_plugin(_REPORTER_NAME):
        parent.config.addinivalue_line("markers", "fabtest_playbook: a playbook run (collected by fabtest)")
        pm.register(_Reporter(), _REPORTER_NAME)
    return PlaybookFile.from_parent(parent, path=file_path)


# -- the glob -------------------------------------------------------------------------------------


def expand_braces(pattern: str) -> list[str]:
    """``a.{json,yaml}`` -> ``["a.json", "a.yaml"]`` (nested and repeated groups too)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    out: list[str] = []
    for option in m.group(1).split(","):
        out.extend(expand_braces(pattern[: m.start()] + option + pattern[m.end():]))
    return out


@functools.lru_cache(maxsize=64)
def _compile(pattern: str) -> re.Pattern[str]:
    alternatives = []
    for alt in expand_braces(pattern):
        regex, i = "", 0
        while i < len(alt):
            if alt.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif alt.startswith("**", i):
                regex += ".*"
                i += 2
            elif alt[i] == "*":
                regex += "[^/]*"
                i += 1
            elif alt[i] == "?":
                regex += "[^/]"
                i += 1
            else:
                regex += re.escape(alt[i])
                i += 1
        alternatives.append(regex)
    return re.compile("(?:" + "|".join(alternatives) + r")\Z")


def matches(pattern: str, file_path: Path, rootdir: Path) -> bool:
    """Does ``file_path`` match the glob (relative to ``rootdir``, or absolute)?"""
    path = Path(file_path)
    candidates = [path.as_posix()]
    try:
        candidates.insert(0, path.relative_to(rootdir).as_posix())
    except ValueError:
        pass
    regex = _compile(pattern.replace("\\", "/").removeprefix("./"))
    return any(regex.match(c) for c in candidates)


# -- collection -----------------------------------------------------------------------------------


class PlaybookFile(pytest.File):
    """One playbook file; a bad file is a collection error with the one-line PlaybookError."""

    def collect(self) -> Iterator[pytest.Item]:
        from fabtest.playbook.load import load_playbook

        playbook = load_playbook(self.path)
        session = _fabtest_session(self.config)
        iterations = getattr(session, "iterations", 1) if session is not None else 1
        if iterations <= 1:
            yield PlaybookItem.from_parent(self, name=playbook.name, playbook_name=playbook.name, iteration=1)
            return
        for i in range(1, iterations + 1):
            yield PlaybookItem.from_parent(self, name=f"{playbook.name}[iter{i}]", playbook_name=playbook.name,
                                           iteration=i)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from fabtest.playbook.load import PlaybookError

        if isinstance(excinfo.value, PlaybookError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class PlaybookItem(pytest.Item):
    def __init__(self, *, playbook_name: str, iteration: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.playbook_name = playbook_name
        self.iteration = iteration
        self.add_marker(pytest.mark.fabtest_playbook)

    def runtest(self) -> None:
        from fabtest.playbook.load import PlaybookError
        from fabtest.playbook.run import run_playbook

        session = _fabtest_session(self.config)
        assert session is not None, "the fabtest plugin is not configured"
        roles = session.llms.llm_roles()
        if self.iteration > 1 or getattr(session, "iterations", 1) > 1:
            roles = session.llms.salted(roles, self.iteration)
        rootdir = Path(str(self.config.rootpath))
        results_dir = Path(session.settings.results_dir)
        if not results_dir.is_absolute():
            results_dir = rootdir / results_dir
        try:
            outcome = run_playbook(
                self.path, judge_llm=roles.judge, simulator_llm=roles.simulator, repo_root=rootdir,
                results_dir=results_dir, settings=session.settings, experiment_id=_experiment_id(session),
                nodeid=self.nodeid, iteration=self.iteration,
                write_trace=not self.config.getoption("--fabtest-no-results", False),
            )
        except PlaybookError as exc:
            self.stash[RESULT_KEY] = _error_result(self, str(exc))
            raise
        assert outcome.result is not None
        self.stash[RESULT_KEY] = outcome.result.model_dump(mode="json")
        if outcome.skipped:
            why = {"judge": roles.judge_reason, "simulator": roles.simulator_reason}
            reasons = list(dict.fromkeys(  # the judge and the simulator often miss the same key
                why[role] for role in why if role in (outcome.skip_reason or "") and why[role]))
            raise not_run.skip_for("llm", (outcome.skip_reason or "an LLM is missing")
                                   + (f" ({'; '.join(reasons)})" if reasons else ""))
        if not outcome.passed:
            # the class of what ended the run says its failure type; the message is the redacted one
            raise type(outcome.error or FabtestError())(outcome.failure_message or "the playbook failed") from None

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, FabtestError):
            return (f"{self.path.name}: playbook {self.playbook_name!r} failed "
                    f"[{excinfo.value.failure_type}]: {excinfo.value}")
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"playbook: {self.playbook_name}"


def _fabtest_session(config: pytest.Config) -> Any:
    # by its plugin name, not the plugin's stash key: importing the plugin module here would be a cycle
    return config.pluginmanager.get_plugin("fabtest-session")


def _experiment_id(session: Any) -> str | None:
    """The experiment id for the trace file name: the option, else the controller's recorder."""
    config = session.config
    explicit = config.getoption("--fabtest-experiment-id", None)
    if explicit:
        return str(explicit)
    if getattr(session, "is_worker", False) or config.getoption("--fabtest-no-results", False):
        return None
    try:
        return str(session.recording.recorder().experiment_id)
    except Exception:  # only a file name depends on it
        return None


def _error_result(item: PlaybookItem, message: str) -> dict[str, Any]:
    from fabtest.engine.outcome import Outcome
    from fabtest.engine.result import ScenarioIdentity, scenario_result
    from fabtest.playbook.record import FEATURE

    # PlaybookError messages name variables, never their values.
    identity = ScenarioIdentity(feature=FEATURE, name=item.playbook_name, nodeid=item.nodeid,
                                feature_file=str(item.path), iteration=item.iteration)
    return scenario_result(identity, Outcome.failed("error", message), duration_s=0.0).model_dump(mode="json")


class _Reporter:
    """Puts a playbook item's result on its call-phase report (once: not on setup/teardown)."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        if call.when != "call" or not isinstance(item, PlaybookItem):
            return
        report: pytest.TestReport = outcome.get_result()
        result = item.stash.get(RESULT_KEY, None)
        if result is None:
            return
        from fabtest.pytest_plugin.results import RESULT_PROPERTY

        if report.outcome == "skipped" and not result.get("skipped"):
            result = {**result, "skipped": True, "passed": False}
        report.user_properties.append((RESULT_PROPERTY, result))
