"""The pytest plugin (``pytest11`` entry point): the hooks and fixtures, wiring to the engine.

Only wiring: each hook hands its work to the module that owns it. Options, opting in, their
validation and the settings they make are :mod:`fabtest.pytest_plugin.options`'s (fabtest stays
dormant unless the project opts in); the run's state is :class:`~fabtest.pytest_plugin.session.FabtestSession`'s.

Flow: ``pytest_configure`` reads ``[tool.fabtest]``; ``pytest_collect_file`` turns ``.feature``
files into modules; the ``fabtest_scenario`` fixture gives each scenario the engine's state; after
each phase ``pytest_runtest_makereport`` hands the report to :mod:`fabtest.pytest_plugin.reports`,
where the engine finishes the scenario and its ending becomes the pytest report with the engine's
result attached as plain data (it survives pytest-xdist); the controller records it and writes the
experiment at the end of the session.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest import tracing
from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.engine import faults, stubbing
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import FabtestError, UsageError
from fabtest.pytest_plugin import (
    auto_workers,
    file_steps,
    hints,
    not_run,
    options,
    pause_steps,
    reports,
    steps,
    tool_steps,
    unmatched,
    until_decided,
    voice_steps,
)
from fabtest.pytest_plugin.collect import FILE_LOADER_KEY, FeatureModule, template_of
from fabtest.pytest_plugin.results import identity_of, relative_to_root
from fabtest.pytest_plugin.session import FabtestSession
from fabtest.pytest_plugin.stash_keys import (
    ENDED_KEY,
    ITERATION_KEY,
    SPAN_KEY,
    STATE_KEY,
    STEP_KEY,
    VOIDED_KEY,
    WHERE_KEY,
)

SESSION_KEY = pytest.StashKey[FabtestSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """More conversations at once than one process sustains: -n workers (``auto_workers.py``)."""
    auto_workers.spread(early_config, args)


def pytest_report_header(config: pytest.Config) -> str | None:
    return auto_workers.header(config)


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
    floors = options.validate_run_options(config)
    until_decided.check_options(config)
    config.addinivalue_line("markers", "fabtest_scenario_set(name): expand a scenario over a scenario set")
    config.pluginmanager.register(steps, "fabtest-steps")
    config.pluginmanager.register(tool_steps, "fabtest-tool-steps")
    config.pluginmanager.register(file_steps, "fabtest-file-steps")
    config.pluginmanager.register(pause_steps, "fabtest-pause-steps")
    config.pluginmanager.register(voice_steps, "fabtest-voice-steps")
    try:
        stubbing.project_stubs(settings)  # a broken [tool.fabtest.stubs] table: one line before anything runs
        faults.parse_faults(config.getoption("--fabtest-fault"))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.otel:
        try:
            tracing.enable(where=f"{settings.source or 'pyproject.toml'} [tool.fabtest] otel")
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    session = FabtestSession(config, settings, coverage_floors=floors)
    session.llms.fake_llm()  # a bad --fabtest-fake-llm script or offline_llm is a usage error before anything runs
    session.llms.check_offline_llm()
    config.stash[SESSION_KEY] = session
    config.stash[FILE_LOADER_KEY] = session.files  # collection checks the files steps send, and keeps them
    config.pluginmanager.register(session, "fabtest-session")
    from fabtest.pytest_plugin import progress

    progress.register(config, settings, session.llms.llm_calls_in_flight)
    if warning := settings.judge.sampling_warning():
        config.issue_config_time_warning(pytest.PytestConfigWarning(f"fabtest: {warning}"), stacklevel=2)
    _register_concurrency(config, settings.concurrency)
    from fabtest.pytest_plugin.requeue import Requeue

    config.pluginmanager.register(Requeue(session), "fabtest-requeue")  # outside concurrency's loop: after its drain
    if config.getoption("--fabtest-until-decided") and not session.is_worker:
        if hasattr(config, "workerinput") or config.getoption("numprocesses", None):
            raise pytest.UsageError("--fabtest-until-decided runs its extra iterations in one process: drop -n")
        config.pluginmanager.register(until_decided.UntilDecided(config, session.recording, session.iterations,
                                                                 session.summary.notes, session.settle_late),
                                      "fabtest-until-decided")


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


@pytest.hookimpl(trylast=True)  # after -k / -m deselected what will not run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A step no definition matches is a collection error (file:line, what to write), before anything runs."""
    if _active(config):
        unmatched.report_unmatched_steps(config, items)


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
    if tag == "production":  # only Then steps: fabtest score applies them to logged conversations
        function = pytest.mark.skip(reason="@production: judged on logged conversations by fabtest score "
                                           "(docs/how-to/production.md), not run against the agent")(function)
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
    """The iteration number of this run of the scenario (1 unless ``--fabtest-iterations``, or an
    extra run of ``--fabtest-until-decided``)."""
    extra = request.node.stash.get(ITERATION_KEY, None)
    return extra if extra is not None else int(getattr(request, "param", 1))


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
    return pytestconfig.stash[SESSION_KEY].llms.fake_llm()


@pytest.fixture(scope="session")
def fabtest_llms(pytestconfig: pytest.Config) -> Iterator[LLMRoles]:
    """The session's judge and simulator LLMs, built once (clients stay alive)."""
    yield pytestconfig.stash[SESSION_KEY].llms.llm_roles()


@pytest.fixture
def fabtest_scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, fabtest_llms: LLMRoles,
                     fabtest_agent: Any, fabtest_iteration: int,
                     fabtest_record: dict[str, Any] | None) -> Iterator[ScenarioState]:
    """The running scenario's state: configuration, agent, conversation, checks."""
    session: FabtestSession = request.config.stash[SESSION_KEY]
    item = request.node
    tmp_path = _scenario_dir(tmp_path_factory, item.name)
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
        llms=session.llms.salted(fabtest_llms, fabtest_iteration),
        default_agent=fabtest_agent or session.settings.agent,
        where=item.stash.get(WHERE_KEY, str(item.path)), record=record,
        on_late=lambda late: session.late.expect(item.nodeid, late),  # soft verdicts follow the result
        files=session.files,
        simulation_key=(identity_of(item).stable_id, fabtest_iteration),
    )
    state.simulations.extend(dict(t) for t in item.stash.get(VOIDED_KEY, ()))  # a run again after a voided one
    state.criteria.update(session.project_criteria())
    for stub in stubbing.project_stubs(session.settings):  # the level above every Background
        state.define_stub(stub)
    forced, state.forced_decisions = faults.parse_faults(request.config.getoption("--fabtest-fault"))
    for stub in forced:  # over every level
        state.tool_stubs.force(stub)
    state.topics = session.project_topics()
    item.stash[STATE_KEY] = state
    if tracing.enabled():  # the steps run inside the scenario's span; it ends with the result (reports.py)
        identity = identity_of(item)
        item.stash[SPAN_KEY] = tracing.start_scenario(identity.shown_name, {
            "fabtest.scenario.id": identity.stable_id, "fabtest.feature": identity.feature,
            "fabtest.scenario.iteration": identity.iteration, "code.filepath": identity.feature_file})
    try:
        yield state
    finally:
        tracing.scenario_active(item.stash.get(SPAN_KEY, None))
        try:
            state.close()
        finally:  # the item lives to the end of the run; its conversation, agent and checks need not
            if STATE_KEY in item.stash:
                del item.stash[STATE_KEY]


def _scenario_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """The scenario's own temporary directory (``workdir``), under pytest's base temporary
    directory and named after the test as ``tmp_path``'s are. Made with one ``mkdir``: ``tmp_path``
    lists the base directory for the next number, links ``<name>current`` to it and resolves it,
    which at 1,000 scenarios at once was a tenth of the main thread's time (docs/performance.md)."""
    prefix = re.sub(r"[\W]", "_", name)[:30]
    return Path(tempfile.mkdtemp(prefix=prefix, dir=factory.getbasetemp()))


def _tags(template: Any) -> set[str]:
    if template is None:
        return set()
    rule_tags = template.rule.tags if template.rule is not None else set()
    return set(template.tags) | set(template.feature.tags) | set(rule_tags)


def pytest_bdd_before_scenario(request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
    """Before the first step: fail at a step no definition matches (collection reports it, unless the
    scenario is marked skip/xfail or the run goes on after collection errors); skip when the scenario
    needs an LLM not configured."""
    if not _active(request.config):
        return
    hints.fail_on_unmatched_step(request, feature, scenario,
                                 f"{relative_to_root(request.config, feature.filename)}:")
    needs = steps.needed_llms([step.name for step in scenario.steps])
    if not needs:
        return
    roles = request.config.stash[SESSION_KEY].llms.llm_roles()
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
    index = next((i for i, s in enumerate(scenario.steps) if s is step), len(scenario.steps))
    following = scenario.steps[index + 1:index + 2]
    request.node.stash[voice_steps.NEXT_STEP_KEY] = following[0].name if following else ""  # a barge-in ahead
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
        request.node.stash[hints.UNMATCHED_KEY] = hints.unmatched_step_message(request.node, where, step)


def _step_level(feature: Any, scenario: Any, step: Any) -> tuple[str, int]:
    """Which level a step is written at: a criterion may be defined once per level."""
    for kind, owner in (("Feature Background", feature), ("Rule Background", getattr(scenario, "rule", None))):
        background = getattr(owner, "background", None)
        if background is not None and any(s.line_number == step.line_number for s in background.steps):
            return kind, background.line_number
    return "Scenario", 0


# -- outcomes ---------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The engine says a scenario needs an LLM that is not configured (NeedsLLM); pytest calls it a skip."""
    try:
        return (yield)
    except FabtestError as exc:
        if not exc.skips or not _active(item.config):
            raise
        # reported at the scenario (file:line), not at this line of the plugin; NeedsLLM is "llm",
        # InvalidSimulation "simulator" (the simulated user left its role on every try)
        raise not_run.skip_for(getattr(exc, "not_run_kind", "llm"), str(exc)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """The engine's ending of the scenario, in pytest's report (``reports.py``)."""
    if not _active(item.config):
        yield
        return
    with reports.spare_traceback(item, call):
        outcome = yield
    reports.translate(item, outcome.get_result(), call)
