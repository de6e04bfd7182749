"""fabtest's command-line options, whether a run opted in, and the settings they make together.

fabtest is installed into environments it does not own, so it stays dormant (only its options are
registered) unless the project opts in: a ``[tool.fabtest]`` table in the rootdir's pyproject.toml,
``--fabtest`` or ``-p fabtest``. A dormant run behaves exactly as if fabtest were not installed.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from fabtest.config.settings import Settings
from fabtest.errors import UsageError

__all__ = ["DormantHint", "add_options", "has_fabtest_table", "names_feature", "opted_in", "settings_from_options",
           "validate_run_options"]


#: more iterations than this is a typo (or a run that would never end), said before anything runs
MAX_ITERATIONS = 10_000


def _iterations(text: str) -> int:
    """``--fabtest-iterations``: a whole number from 1 to :data:`MAX_ITERATIONS`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_ITERATIONS:,} iterations, got {value:,}")
    return value


def _budget(text: str) -> Any:
    """``--fabtest-budget``: scenario runs (``200``) or dollars (``$5``, ``5usd``)."""
    from fabtest.pytest_plugin.until_decided import parse_budget

    try:
        return parse_budget(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_options(parser: pytest.Parser) -> None:
    """Every ``--fabtest-*`` option (registered also when fabtest stays dormant)."""
    group = parser.getgroup("fabtest", "fabtest: behaviour tests for conversational agents")
    group.addoption("--fabtest", action="store_true", default=False,
                    help="enable fabtest for this run (without a [tool.fabtest] table in pyproject.toml)")
    group.addoption("--fabtest-iterations", type=_iterations, default=None, metavar="N",
                    help=f"run every scenario N times (pass rate, pass@k, variance; 1 to {MAX_ITERATIONS:,})")
    group.addoption("--fabtest-experiment", default=None, metavar="NAME", help="a name for this experiment")
    group.addoption("--fabtest-experiment-id", default=None, metavar="ID", help="use this experiment id")
    group.addoption("--fabtest-shard", default=None, metavar="I/N",
                    help="record this run as shard I of N (fabtest merge combines the parts); pytest-split's "
                         "--splits/--group are read too")
    group.addoption("--fabtest-tag", action="append", default=[], metavar="TAG", help="tag the experiment (repeatable)")
    group.addoption("--fabtest-results-dir", default=None, metavar="DIR", help="where results/<id>.json goes")
    group.addoption("--fabtest-no-results", action="store_true", help="do not write an experiment file")
    group.addoption("--fabtest-min-coverage", action="append", default=[], metavar="KIND=RATE",
                    help="fail the run when coverage of KIND (topics, transitions, tools, criteria) is below RATE "
                         "(e.g. tools=0.8; repeatable)")
    group.addoption("--fabtest-until-decided", action="store_true", default=False,
                    help="after the suite, run more iterations of the scenarios whose gated metrics are still "
                         "undecided against --fabtest-baseline, until decided or --fabtest-budget is spent "
                         "(anytime-valid e-values; docs/gates.md)")
    group.addoption("--fabtest-baseline", default=None, metavar="EXP",
                    help="the experiment --fabtest-until-decided decides against (id, id prefix or path)")
    group.addoption("--fabtest-budget", type=_budget, default=None, metavar="RUNS|$USD",
                    help="the most --fabtest-until-decided may add: scenario runs (200) or dollars ($5, 5usd; "
                         "at each scenario's recorded cost per run)")
    group.addoption("--fabtest-agent", default=None, metavar="MODULE:ATTR", help="the default agent")
    group.addoption("--fabtest-agent-timeout", type=float, default=None, metavar="S", help="timeout per agent call")
    group.addoption("--fabtest-concurrency", type=int, default=None, metavar="N",
                    help="scenarios in flight at once in this process (per -n worker); 1: one by one")
    group.addoption("--fabtest-scenario-timeout", type=float, default=None, metavar="S", help="timeout per scenario")
    group.addoption("--fabtest-fake-llm", nargs="?", const="", default=None, metavar="SCRIPT",
                    help="judge and simulate with fabtest.testing.FakeLLM: a script (.yaml/.json) or module:attr; "
                         "with no value, an empty fake that the fabtest_fake_llm fixture scripts")
    group.addoption("--fabtest-fault", action="append", default=[], metavar="TOOL=KIND",
                    help="inject a fault into TOOL in every scenario (timeout, error, empty, malformed, injection; "
                         "approve, reject: every approval of TOOL the agent asks for); repeatable. "
                         "`fabtest faults` runs the whole matrix")
    group.addoption("--fabtest-allow-skip", action="append", default=[], metavar="KIND",
                    help="scenarios skipped for want of KIND (llm: no key or endpoint; simulator: the simulated "
                         "user left its role on every try) do not fail the run "
                         "(without it such skips end the run with exit status 6); repeatable or comma-separated")
    group.addoption("--fabtest-interactive", action="store_true", default=False,
                    help="a person plays the simulated user at the terminal (needs -s; scenarios run one at a time)")
    group.addoption("--fabtest-otel", action="store_true", default=None,
                    help="export OpenTelemetry traces (OTEL_EXPORTER_OTLP_*; needs pytest-fabtest[otel])")
    group.addoption("--fabtest-no-preflight", action="store_true",
                    help="skip the pre-flight check of agents and LLMs before the first scenario")
    group.addoption("--fabtest-retry-budget", type=float, default=None, metavar="RATIO",
                    help="retries may add at most RATIO times the calls made (default 0.1)")
    group.addoption("--fabtest-llm-cache", choices=["on", "off", "replay"], default=None,
                    help="record/replay cache of LLM calls under .fabtest/cache")
    group.addoption("--fabtest-progress", choices=["auto", "live", "lines", "off"], default=None,
                    help="progress display: a live status line on a terminal, plain periodic lines in logs "
                         "(auto: live on a terminal without -s, else lines), or off")
    group.addoption("--fabtest-progress-every", type=float, default=None, metavar="S",
                    help="seconds between two progress lines in the lines mode (default 30)")
    for role in ("judge", "simulator"):
        group.addoption(f"--fabtest-{role}-provider", choices=["gemini", "openai"], default=None,
                        help=f"{role} LLM provider")
        group.addoption(f"--fabtest-{role}-model", default=None, metavar="MODEL", help=f"{role} LLM model")
        group.addoption(f"--fabtest-{role}-temperature", type=float, default=None, help=f"{role} LLM temperature")


_PLUGIN_NAMES = frozenset({"fabtest", "fabtest.pytest_plugin.plugin"})
_TABLE_LINE = re.compile(r"^\s*\[\[?\s*tool\s*\.\s*fabtest\b", re.MULTILINE)


def opted_in(config: pytest.Config) -> bool:
    """True when this run asked for fabtest: ``--fabtest``, ``-p fabtest`` or ``[tool.fabtest]``."""
    if config.getoption("--fabtest", False):
        return True
    if _PLUGIN_NAMES.intersection(getattr(config.option, "plugins", None) or []):
        return True
    return has_fabtest_table(Path(str(config.rootpath)) / "pyproject.toml")


def has_fabtest_table(pyproject: Path) -> bool:
    """A ``[tool.fabtest]`` table (even empty) in ``pyproject``; an unparsable file that spells the
    table out still counts, so its TOML error is reported instead of silently ignored."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return bool(_TABLE_LINE.search(text))
    tool = data.get("tool")
    return isinstance(tool, dict) and "fabtest" in tool


def names_feature(arg: str) -> bool:
    return arg.split("::", 1)[0].endswith(".feature")


class DormantHint:
    """Registered only when fabtest is dormant and a ``.feature`` file was named: say how to opt in."""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(
            "fabtest is installed but not enabled for this project, so .feature files are not collected by it: "
            "add a [tool.fabtest] table to pyproject.toml or run with --fabtest")


def settings_from_options(config: pytest.Config) -> Settings:
    """``[tool.fabtest]`` with the command line's ``--fabtest-*`` values over it, validated alike."""
    settings = Settings.load(Path(config.rootpath))
    opt = config.getoption
    updates: dict[str, Any] = {}
    for name, key in (("--fabtest-results-dir", "results_dir"), ("--fabtest-agent", "agent"),
                      ("--fabtest-agent-timeout", "agent_timeout"), ("--fabtest-scenario-timeout", "scenario_timeout"),
                      ("--fabtest-llm-cache", "llm_cache"), ("--fabtest-retry-budget", "retry_budget"),
                      ("--fabtest-concurrency", "concurrency"), ("--fabtest-otel", "otel")):
        if opt(name) is not None:
            updates[key] = opt(name)
    if opt("--fabtest-interactive", False):
        updates["concurrency"] = 1  # one person, one terminal: the scenarios run one at a time
        updates["simulator_fidelity"] = "off"  # a person is not checked for staying in a simulator's role
    for role in ("judge", "simulator"):
        changes = {field: opt(f"--fabtest-{role}-{field}") for field in ("provider", "model", "temperature")}
        changes = {k: v for k, v in changes.items() if v is not None}
        if changes:
            updates[role] = {**getattr(settings, role).model_dump(), **changes}
    if not updates:
        return settings
    try:  # validated like the pyproject values: --fabtest-agent-timeout 0 is an error, not a hang
        checked = Settings.model_validate({**settings.model_dump(), **updates})
    except ValidationError as exc:
        err = exc.errors()[0]  # ("judge", "temperature") is --fabtest-judge-temperature
        option = "--fabtest-" + "-".join(str(part).replace("_", "-") for part in err["loc"][:2])
        raise UsageError(f"{option}: {err['msg']}") from None
    checked.source = settings.source
    return checked


def validate_run_options(config: pytest.Config) -> dict[str, float]:
    """The options that argparse cannot check alone, checked before anything runs (a usage error,
    exit 4): the experiment id names a file, at least one iteration, coverage floors that parse and
    have an experiment to measure. Returns the floors (``--fabtest-min-coverage``: kind -> least rate)."""
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
    if config.getoption("--fabtest-interactive"):
        if config.getoption("capture", None) != "no":
            raise pytest.UsageError("--fabtest-interactive needs the terminal: add -s "
                                    "(pytest would capture what you type)")
        if config.getoption("numprocesses", None) or hasattr(config, "workerinput"):
            raise pytest.UsageError("--fabtest-interactive plays one conversation at a time at this terminal: drop -n")
    return floors
