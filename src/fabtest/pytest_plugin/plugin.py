"""The pytest plugin (``pytest11`` entry point): the hooks and fixtures, wiring to the engine.

Options, opting in and the settings they make are :mod:`fabtest.pytest_plugin.options`'s: fabtest
stays dormant unless the project opts in, and a dormant run behaves as if it were not installed.

Flow: ``pytest_configure`` reads ``[tool.fabtest]``; ``pytest_collect_file`` turns ``.feature``
files into modules; the ``fabtest_scenario`` fixture gives each scenario the engine's state; after
the call phase ``pytest_runtest_makereport`` lets the engine finish the scenario and say how it
ended (:mod:`fabtest.engine.outcome`, DESIGN section 3), translates that into the pytest report and
attaches the engine's result (:mod:`fabtest.engine.result`) as plain data, so it survives
pytest-xdist; the controller records it and writes the experiment at the end of the session.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.exceptions import StepDefinitionNotFoundError

from fabtest import tracing
from fabtest.agents.boundary import agent_traceback
from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.engine import transcript
from fabtest.engine.outcome import Outcome, conclude, failure_message
from fabtest.engine.result import build_result
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import AgentError, FabtestError, UsageError, failure_type_of
from fabtest.pytest_plugin import hints, not_run, options, steps
from fabtest.pytest_plugin.collect import FeatureModule, template_of
from fabtest.pytest_plugin.results import (
    PENDING_PROPERTY,
    RESULT_PROPERTY,
    crashed_message,
    identity_of,
    relative_to_root,
)
from fabtest.pytest_plugin.session import FabtestSession

SESSION_KEY = pytest.StashKey[FabtestSession]()
STATE_KEY = pytest.StashKey[ScenarioState]()
WHERE_KEY = pytest.StashKey[str]()
STEP_KEY = pytest.StashKey[str]()
SPAN_KEY = pytest.StashKey["tracing.ScenarioSpan | None"]()  # the scenario's span, with --fabtest-otel
ENDED_KEY = pytest.StashKey[pytest.Session]()  # the session that ended: its final exit status arms the exit guard


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    if not options.opted_in(config):
        if any(options.names_feature(arg) for arg in config.args):
            config.pluginmanager.register(options.DormantHint(), "fabtest-dormant-hint")
        return
    try:
        settings = options.settings_from_options(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    # `agent = "myapp.bot:Bot"` names a module of the project: import it from the project root,
    # as `python -m pytest` would, also when plain `pytest` runs without a rootdir conftest.
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.insert(0, root)
    experiment_id = config.getoption("--fabtest-experiment-id")
    if experiment_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", experiment_id):
        raise pytest.UsageError(f"--fabtest-experiment-id {experiment_id!r}: use letters, digits, '_', '.' and '-' "
                                "(it names results/<id>.json)")
    iterations = config.getoption("--fabtest-iterations")
    if iterations is not None and iterations < 1:
        raise pytest.UsageError(f"--fabtest-iterations {iterations}: run every scenario at least once (N >= 1)")
    from fabtest.experiment.coverage import CoverageFloorError, parse_floor

    try:
        floors = dict(parse_floor(text) for text in config.getoption("--fabtest-min-coverage"))
    except CoverageFloorError as exc:
        raise pytest.UsageError(str(exc)) from None
    if floors and config.getoption("--fabtest-no-results"):
        raise pytest.UsageError("--fabtest-min-coverage needs the experiment: drop --fabtest-no-results")
    config.addinivalue_line("markers", "fabtest_scenario_set(name): expand a scenario over a scenario set")
    config.pluginmanager.register(steps, "fabtest-steps")
    if settings.otel:
        try:
            tracing.enable(where=f"{settings.source or 'pyproject.toml'} [tool.fabtest] otel")
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    session = FabtestSession(config, settings, coverage_floors=floors)
    session.fake_llm()  # a bad --fabtest-fake-llm script or offline_llm is a usage error before anything runs
    session.check_offline_llm()
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "fabtest-session")
    from fabtest.pytest_plugin import progress

    progress.register(config, settings, session.llm_calls_in_flight)
    _register_concurrency(config, settings.concurrency)


def _register_concurrency(config: pytest.Config, limit: int) -> None:
    """``concurrency`` above 1: the scheduler of :mod:`fabtest.pytest_plugin.concurrency.protocol` takes the
    scenarios' protocol over; 1 leaves pytest's own, exactly as before."""
    config.addinivalue_line("markers", "fabtest_serial(reason): run this scenario alone, not concurrently")
    if limit <= 1:
        return
    from fabtest.pytest_plugin.concurrency.protocol import ConcurrentScenarios, concurrency_blocker

    blocker = concurrency_blocker(config)
    if blocker is not None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"fabtest: concurrency = {limit} is off for this run: {blocker}; scenarios run one by one"), stacklevel=2)
        return
    config.pluginmanager.register(ConcurrentScenarios(config, limit), "fabtest-concurrency")


def _active(config: pytest.Config) -> bool:
    return SESSION_KEY in config.stash


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[ENDED_KEY] = session


def pytest_unconfigure(config: pytest.Config) -> None:
    from fabtest._internal import exit_guard
    from fabtest.agents.cli_agent import kill_all_groups

    if (ended := config.stash.get(ENDED_KEY, None)) is not None:
        if _active(config):
            exit_guard.arm(int(ended.exitstatus))  # the process exits soon after, whatever threads an agent left
        else:
            exit_guard.update(int(ended.exitstatus))  # an outer run's status wins over an inner one's

    kill_all_groups()  # no CLI agent process outlives the run (also on xdist workers, Ctrl-C)
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
        config.pluginmanager.unregister(session)
    tracing.shutdown()  # the spans still batched are exported before the process ends


# -- collection -----------------------------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    session = parent.config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    if file_path.suffix == ".feature" and session.settings.collect_features:
        return FeatureModule.from_parent(parent, path=file_path)
    return session.collect_playbook(file_path, parent)


# pytest's own marks that fail without their arguments
_NOT_MARKERS = frozenset({"parametrize"})


@pytest.hookimpl(tryfirst=True)
def pytest_bdd_apply_tag(tag: str, function: Any) -> Any:
    """Gherkin tags become registered markers (so ``--strict-markers`` works); scenario sets expand."""
    from pytest_bdd.utils import CONFIG_STACK

    config = CONFIG_STACK[-1] if CONFIG_STACK else None
    if config is None or not _active(config):
        return None  # dormant: pytest-bdd's own tag handling
    if tag.startswith("scenario_set:"):
        return pytest.mark.fabtest_scenario_set(tag.split(":", 1)[1])(function)
    name, _, value = tag.partition(":")  # @owner:alice becomes the marker owner("alice"): -m owner works
    if not name or name.startswith("_") or name in _NOT_MARKERS:  # "" from a lone "@"
        # pytest refuses these as markers (private names; marks that need arguments): the tag still
        # reaches the scenario's context and results, it only cannot be selected with -m
        return function
    config.addinivalue_line("markers", f"{name}: Gherkin tag @{name}")
    mark = getattr(pytest.mark, name)
    return (mark(value) if value else mark)(function)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not _active(metafunc.config) or template_of(metafunc.function) is None:
        return
    session = metafunc.config.stash[SESSION_KEY]
    # Steps reach these fixtures dynamically, so they are not in the scenario's static closure.
    for name in ("fabtest_record", "fabtest_iteration"):
        if name not in metafunc.fixturenames:
            metafunc.fixturenames.append(name)
    marker = metafunc.definition.get_closest_marker("fabtest_scenario_set")
    if marker is not None:
        try:
            records = session.scenario_set(marker.args[0], Path(str(metafunc.definition.path)))
        except UsageError as exc:
            raise pytest.Collector.CollectError(str(exc)) from None
        metafunc.parametrize("fabtest_record", records, ids=[r.id for r in records], indirect=True)
    if session.iterations > 1:
        metafunc.parametrize("fabtest_iteration", range(1, session.iterations + 1),
                             ids=[f"iter{i}" for i in range(1, session.iterations + 1)], indirect=True)


# -- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture
def fabtest_iteration(request: pytest.FixtureRequest) -> int:
    """The iteration number of this run of the scenario (1 unless ``--fabtest-iterations``)."""
    return int(getattr(request, "param", 1))


@pytest.fixture
def fabtest_record(request: pytest.FixtureRequest) -> dict[str, Any] | None:
    """The scenario-set record this run was expanded for, if any (as the data file spells it)."""
    record = _record_of(request.node)
    return record.to_dict() if record is not None else None


def _record_of(item: pytest.Item) -> ScenarioRecord | None:
    """The validated record a scenario-set run was expanded for (its ``fabtest_record`` parameter)."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("fabtest_record") if callspec is not None else None


@pytest.fixture
def fabtest_agent() -> Any:
    """Override in a conftest to return an agent or a factory for the scenarios below it."""
    return None


@pytest.fixture(scope="session")
def fabtest_fake_llm(pytestconfig: pytest.Config) -> Any:
    """The :class:`fabtest.testing.FakeLLM` of ``--fabtest-fake-llm`` (the judge and simulator of every
    feature and playbook in this run), to script further or to inspect ``calls``; None without it."""
    return pytestconfig.stash[SESSION_KEY].fake_llm()


@pytest.fixture(scope="session")
def fabtest_llms(pytestconfig: pytest.Config) -> Iterator[LLMRoles]:
    """The session's judge and simulator LLMs, built once (clients stay alive)."""
    yield pytestconfig.stash[SESSION_KEY].llm_roles()


@pytest.fixture
def fabtest_scenario(request: pytest.FixtureRequest, tmp_path: Path, fabtest_llms: LLMRoles, fabtest_agent: Any,
                     fabtest_iteration: int, fabtest_record: dict[str, Any] | None) -> Iterator[ScenarioState]:
    """The running scenario's state: configuration, agent, conversation, checks."""
    session: FabtestSession = request.config.stash[SESSION_KEY]
    item = request.node
    template = template_of(getattr(item, "obj", None))
    context: dict[str, Any] = {
        "scenario": template.name if template else item.name,
        "feature": template.feature.name if template else "",
        "feature_file": template.feature.filename if template else str(item.path),
        "line": template.line_number if template else None,
        "tags": sorted(item.keywords.get("fabtest_tags", set()) or _tags(template)),
        "iteration": fabtest_iteration,
        "workdir": str(tmp_path),
        "cwd": str(tmp_path),  # the name CLI adapters read: a CLI agent runs in the scenario's directory
    }
    if fabtest_record is not None:
        context["record"] = fabtest_record
    record = _record_of(item)
    state = ScenarioState(
        settings=session.settings, rootdir=Path(str(request.config.rootpath)), workdir=tmp_path, context=context,
        llms=session.salted(fabtest_llms, fabtest_iteration), default_agent=fabtest_agent or session.settings.agent,
        where=item.stash.get(WHERE_KEY, str(item.path)), record=record,
        on_late=lambda late: session.late.expect(item.nodeid, late),  # soft verdicts follow the result
    )
    state.criteria.update(session.project_criteria())
    state.topics = session.project_topics()
    item.stash[STATE_KEY] = state
    if tracing.enabled():  # the steps run inside the scenario's span; it ends with the result (_report_call)
        identity = identity_of(item)
        item.stash[SPAN_KEY] = tracing.start_scenario(identity.shown_name, {
            "fabtest.scenario.id": identity.stable_id, "fabtest.feature": identity.feature,
            "fabtest.scenario.iteration": identity.iteration, "code.filepath": identity.feature_file})
    try:
        yield state
    finally:
        tracing.scenario_active(item.stash.get(SPAN_KEY, None))
        state.close()


def _tags(template: Any) -> set[str]:
    if template is None:
        return set()
    rule_tags = template.rule.tags if template.rule is not None else set()
    return set(template.tags) | set(template.feature.tags) | set(rule_tags)


def pytest_bdd_before_scenario(request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
    """Skip before the first step when a scenario cannot run without an LLM that is not configured."""
    if not _active(request.config):
        return
    needs = steps.needed_llms([step.name for step in scenario.steps])
    if not needs:
        return
    roles = request.config.stash[SESSION_KEY].llm_roles()
    for role, what in needs:
        if getattr(roles, role) is None:
            # reported at the scenario (file:line), not at this line of the plugin
            raise not_run.skip_for("llm", f"{what} needs the {role} LLM: {getattr(roles, role + '_reason')}")


def pytest_bdd_before_step(request: pytest.FixtureRequest, feature: Any, scenario: Any, step: Any) -> None:
    if not _active(request.config):
        return
    where = f"{relative_to_root(request.config, feature.filename)}:{step.line_number}"
    request.node.stash[WHERE_KEY] = where
    request.node.stash[STEP_KEY] = f"{step.keyword} {step.name}"
    request.node.stash[steps.LEVEL_KEY] = _step_level(feature, scenario, step)
    table = getattr(step, "datatable", None)
    request.node.stash[steps.ROW_LINES_KEY] = [row.location.line for row in table.rows] if table is not None else []
    state = request.node.stash.get(STATE_KEY, None)
    if state is not None:
        state.where = where


def pytest_bdd_step_func_lookup_error(request: pytest.FixtureRequest, feature: Any, scenario: Any, step: Any,
                                      exception: Exception) -> None:
    if _active(request.config):  # the step as written, with what to write instead (pytest_plugin/hints.py)
        where = f"{relative_to_root(request.config, feature.filename)}:{step.line_number}"
        request.node.stash[hints.UNMATCHED_KEY] = hints.unmatched_step_message(request, where, step)


def _step_level(feature: Any, scenario: Any, step: Any) -> tuple[str, int]:
    """Which level a step is written at: a criterion may be defined once per level."""
    for kind, owner in (("Feature Background", feature), ("Rule Background", getattr(scenario, "rule", None))):
        background = getattr(owner, "background", None)
        if background is not None and any(s.line_number == step.line_number for s in background.steps):
            return kind, background.line_number
    return "Scenario", 0


# -- outcomes ---------------------------------------------------------------------------------------
_SHORT = (FabtestError, StepDefinitionNotFoundError)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The engine says a scenario needs an LLM that is not configured (NeedsLLM); pytest calls it a skip."""
    try:
        return (yield)
    except FabtestError as exc:
        if not exc.skips or not _active(item.config):
            raise
        # reported at the scenario (file:line), not at this line of the plugin
        raise not_run.skip_for("llm", str(exc)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    if not _active(item.config):
        return
    report: pytest.TestReport = outcome.get_result()
    not_run.tag_report(report, call)
    if call.when == "setup" and template_of(getattr(item, "obj", None)) is not None:
        _report_setup(item, report, call.duration)
    elif call.when == "call":
        _report_call(item, report, call)


def _report_setup(item: pytest.Item, report: pytest.TestReport, duration: float) -> None:
    if report.passed:
        # Who is running, so the controller can record the scenario even if its worker dies.
        message = crashed_message(item.nodeid)
        prop = PENDING_PROPERTY
    elif report.failed:  # a fixture (fabtest_agent, a server) failed before the first step
        crash = getattr(report.longrepr, "reprcrash", None)
        message = f"{item.nodeid}: setup failed" + (f": {crash.message}" if crash is not None else "")
        prop = RESULT_PROPERTY
    else:  # skipped before it ran (a skip marker from a tag or a conftest): recorded with its reason
        skipped = Outcome("skipped", skip_reason=_skip_reason(report))
        result = build_result(identity_of(item), None, skipped, duration_s=duration)
        report.user_properties.append((RESULT_PROPERTY, result.model_dump(mode="json")))
        return
    result = build_result(identity_of(item), None, Outcome.failed("error", message), duration_s=duration)
    report.user_properties.append((prop, result.model_dump(mode="json")))


def _report_call(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """The engine finishes the scenario and says how it ended; this turns that into the pytest report."""
    state = item.stash.get(STATE_KEY, None)
    exc = call.excinfo.value if call.excinfo is not None else None
    if state is not None and not isinstance(exc, (pytest.skip.Exception, KeyboardInterrupt)):
        ending = conclude(state, exc)
        if exc is None and ending is not None:  # the late work failed a scenario whose steps passed
            exc = ending
            report.outcome = "failed"
    # a scenario or test function; other items (playbooks) word their own failure in repr_failure
    if exc is not None and isinstance(exc, _SHORT) and report.outcome == "failed" and isinstance(item, pytest.Function):
        report.longrepr = _short_message(item, exc)
        if isinstance(exc, AgentError) and item.config.option.tbstyle == "long" and (frames := agent_traceback(exc)):
            report.sections.append(("fabtest agent traceback", frames))  # --tb=long: the failing line in the agent
    if state is not None and report.outcome == "failed" and state.conversation.turns \
            and not isinstance(exc, UsageError):  # a bad input is about the file, not the conversation
        report.sections.append(("fabtest conversation", transcript.render(state.conversation)))
    if state is None and template_of(getattr(item, "obj", None)) is None:
        return  # not a scenario (an ordinary test, or a pytest-bdd scenario without fabtest steps)
    result = build_result(identity_of(item), state, _outcome(item, report, exc), duration_s=call.duration)
    tracing.end_scenario(item.stash.get(SPAN_KEY, None), result)
    report.user_properties.append((RESULT_PROPERTY, result.model_dump(mode="json")))


def _outcome(item: pytest.Item, report: pytest.TestReport, exc: BaseException | None) -> Outcome:
    """pytest's verdict in the engine's words (a skip's reason, a failure's type and message)."""
    if report.outcome == "skipped":
        return Outcome("skipped", skip_reason=_skip_reason(report))
    if report.outcome == "passed":
        return Outcome("passed")
    if exc is None:
        return Outcome.failed(None, None)
    return Outcome.failed(failure_type_of(exc), _short_message(item, exc))


def _short_message(item: pytest.Item, exc: BaseException) -> str:
    """The failure as the engine words it, or pytest-bdd's unmatched step with what to write instead."""
    if isinstance(exc, StepDefinitionNotFoundError) and hints.UNMATCHED_KEY in item.stash:
        return item.stash[hints.UNMATCHED_KEY]
    if isinstance(exc, StepDefinitionNotFoundError):
        location, unmatched = item.stash.get(WHERE_KEY, ""), item.stash.get(STEP_KEY, "")
        return (f"{location}: no step definition matches this step"
                f" ({unmatched}). Expected one of the steps `fabtest steps` lists,"
                " or a step of your own (pytest-bdd @given/@when/@then) in a conftest.py")
    return failure_message(exc, where=item.stash.get(WHERE_KEY, ""), step=item.stash.get(STEP_KEY, ""))


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


