"""``fabtest init``: a project's first green run, offline, in one command.

A new user should not assemble a pyproject table, an agent, features and an offline judge from
a long manual before seeing anything pass. ``fabtest init`` writes the smallest set that works
(``pytest features/`` green with no key) and says the one step to a real model
(``export GEMINI_API_KEY=...``): the offline script is ``[tool.fabtest] offline_llm``, which a
configured key always takes precedence over, so nothing has to be edited to switch.

It never overwrites: every file it would write is checked first, and if one exists (or the
pyproject already has a ``[tool.fabtest]`` table) nothing is written and the one line names it.
What it writes is parsed back first (invalid TOML is never written), it writes all of its files or
none, and never through a link that leads out of the project.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fabtest._internal.words import article
from fabtest.cli.common import EXIT_OK, fail
from fabtest.errors import UsageError

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["InitPlan", "plan_init", "write_init"]

STUB_MODULE = "my_agent"
STUB_TARGET = f"{STUB_MODULE}:agent"
FEATURE = "features/getting_started.feature"
OFFLINE_SCRIPT = "features/offline_llm.yaml"

_STUB = '''"""A stand-in agent for fabtest's first run: replace ``agent`` with a call into your own agent.

fabtest calls ``agent(messages)`` once per user turn with the whole conversation so far (objects
with ``.role`` "user" or "agent" and ``.content``); return the reply text (or a
fabtest.AgentResponse to report tool calls). Point [tool.fabtest] agent in pyproject.toml at
your real agent instead ("module:attribute") and delete this file.
"""


def agent(messages):
    last = messages[-1].content
    return f"Hello! I am a stand-in agent. You said: {last!r}. How can I help you further?"
'''

_FEATURE = '''Feature: Getting started with fabtest
  Two first scenarios written by `fabtest init`: edit them to describe what your agent must do.

  # A scripted conversation: you write the user's messages, fabtest checks the replies.
  # Runs with no LLM at all.
  Scenario: The agent answers a greeting
    When the user says "Hello!"
    Then the response must match "[A-Za-z0-9]"

  # A simulated user (an LLM) pursues a goal; a judge (an LLM) scores the replies.
  # Without GEMINI_API_KEY both are the scripted stand-in in features/offline_llm.yaml;
  # with the key set, the real model plays both and nothing else changes.
  Scenario: A simulated user talks to the agent
    Given a simulated user with the goal "Find out what the agent can help with"
    And the simulation takes at most 4 turns
    When the simulated user talks to the agent
    Then every response should satisfy "The agent replies politely"
    And the goal must be achieved
'''

_OFFLINE = '''# The offline stand-in for the simulated user and the judge (fabtest.testing.FakeLLM's script).
# [tool.fabtest] offline_llm points here; it answers only while no key is configured, so a run with
# GEMINI_API_KEY set uses the real model. Keys: simulated_user, verdicts, intents, goal_achieved,
# topic, grounded, agent_model (see fabtest's docs, "Set up": the offline script).
simulated_user:
  lines:
    - "Hi! What can you help me with?"
  then: "Thanks, that's all I needed."
verdicts:
  default: passed
goal_achieved: true
'''


@dataclass(frozen=True)
class InitPlan:
    """What ``fabtest init`` will write: file (relative to the project) -> text; ``append`` are
    files that exist and get text added at the end (the pyproject's new table), and ``replace``
    their whole new text, already parsed back (:func:`_checked_toml`)."""

    root: Path
    files: dict[str, str]
    append: dict[str, str]
    agent: str
    replace: dict[str, str] = field(default_factory=dict)
    #: the framework table key (``langgraph``, ...) when ``agent`` names a framework object or its factory
    framework: str | None = None


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string: a quote or a backslash in a module name must not end it
    (JSON's escapes are a subset of TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def _agent_value(agent: str, framework: str | None) -> str | dict[str, str]:
    """What ``agent`` reads back as: the target, or a framework table naming it (docs/frameworks.md)."""
    return {framework: agent} if framework else agent


def _fabtest_table(agent: str, framework: str | None = None) -> str:
    if framework:
        line = (f"# The agent under test: a {framework} object (or a function returning one), run by fabtest's "
                "adapter (see fabtest's docs, \"Agents built with a framework\").\n"
                f"agent = {{ {framework} = {_toml_string(agent)} }}\n")
    else:
        line = ("# The agent under test: \"module:attribute\" (a function of the messages, an object with chat(), "
                "or a factory).\n"
                f"agent = {_toml_string(agent)}\n")
    return (
        "\n[tool.fabtest]\n"
        + line +
        "# The simulated user and the judge while no key is set; export GEMINI_API_KEY=... to use the real model.\n"
        f"offline_llm = {_toml_string(OFFLINE_SCRIPT)}\n"
    )


def _checked_toml(path: Path, text: str, agent: str | dict[str, str]) -> str:
    """``text`` if it parses and holds the table init means to write; else one line why not.

    What init writes is validated by parsing it back before anything touches the disk: an existing
    pyproject that defines ``tool`` inline (``tool = {...}``) cannot take a ``[tool.fabtest]`` table
    appended, and the new file must hold exactly the agent that was asked for."""
    try:
        table = tomllib.loads(text).get("tool", {}).get("fabtest", {})
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: adding a [tool.fabtest] table would make it invalid TOML ({exc}; is 'tool' "
                         "an inline table?): add the table by hand; nothing was written") from None
    if table.get("agent") != agent or table.get("offline_llm") != OFFLINE_SCRIPT:
        raise UsageError(f"{path}: the [tool.fabtest] table would not read back as written (agent "
                         f"{agent!r}); nothing was written")
    return text


def _check_target(root: Path, name: str) -> None:
    """Every file init writes stays inside ``root``: no component may be a link (dangling or not)
    that leads out of it, nor a file where a directory is needed."""
    path = root
    parts = Path(name).parts
    for i, part in enumerate(parts):
        path = path / part
        last = i == len(parts) - 1
        if path.is_symlink():
            target = Path(os.path.realpath(path))
            if not target.is_relative_to(root) or (last and not path.exists()):
                raise UsageError(f"{path}: is a link to {target}; fabtest init never writes through a link out of "
                                 f"{root}, so nothing was written")
        if not last and path.exists() and not path.is_dir():
            raise UsageError(f"{path}: is a file, but fabtest init needs a directory there; nothing was written")


def plan_init(root: Path, *, agent: str | None = None) -> InitPlan:
    """Decide every file to write under ``root``; raises :class:`UsageError` (one line naming the file)
    when one exists, the pyproject has a fabtest table or is not valid TOML, or ``agent`` does not import."""
    if not root.is_dir():
        raise UsageError(f"{root}: {'is not a directory' if root.exists() else 'no such directory'}; "
                         "nothing was written")
    root = root.resolve()
    framework = _check_agent(root, agent) if agent is not None else None
    files: dict[str, str] = {}
    append: dict[str, str] = {}
    replace: dict[str, str] = {}
    pyproject = root / "pyproject.toml"
    target = agent or STUB_TARGET
    table = _fabtest_table(target, framework)
    expected = _agent_value(target, framework)
    _check_target(root, "pyproject.toml")
    if pyproject.is_file():
        try:
            original = pyproject.read_text(encoding="utf-8-sig")
            data = tomllib.loads(original)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{pyproject}: not valid TOML ({exc}); fix it, then run fabtest init again") from None
        except OSError as exc:
            raise UsageError(f"{pyproject}: cannot read it ({exc.strerror or exc}); nothing was written") from None
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise UsageError(f"{pyproject}: 'tool' is {article(type(tool).__name__)}, not a table, so it cannot hold "
                             "[tool.fabtest]; nothing was written")
        if "fabtest" in tool:
            raise UsageError(f"{pyproject}: already has a [tool.fabtest] table; nothing was written")
        append["pyproject.toml"] = table
        joined = original if not original or original.endswith("\n") else original + "\n"
        replace["pyproject.toml"] = _checked_toml(pyproject, joined + table, expected)
    elif pyproject.exists() or pyproject.is_symlink():
        raise UsageError(f"{pyproject}: already exists and is not a file; nothing was written")
    else:
        # the pytest table makes this directory pytest's rootdir wherever pytest is started below it
        files["pyproject.toml"] = _checked_toml(pyproject, "[tool.pytest.ini_options]\naddopts = \"-ra\"\n" + table,
                                                expected)
    if agent is None:
        files[f"{STUB_MODULE}.py"] = _STUB
    files[FEATURE] = _FEATURE
    files[OFFLINE_SCRIPT] = _OFFLINE
    for name in files:
        _check_target(root, name)
        if os.path.lexists(root / name):
            raise UsageError(f"{root / name}: already exists; fabtest init never overwrites, so nothing was written")
    return InitPlan(root=root, files=files, append=append, agent=target, replace=replace, framework=framework)


def _check_agent(root: Path, spec: str) -> str | None:
    """``--agent`` must import from the project directory, as pytest will import it. A module that
    calls ``exit()`` on import is an error: pytest would stop the run the same way. Returns the
    framework table key when it names a framework's object or a factory of one (a LangGraph graph
    wired as a plain agent would be called with the messages and fail every scenario)."""
    from fabtest._internal.targets import import_object
    from fabtest.agents.frameworks import framework_key_of

    added = str(root) not in sys.path
    if added:
        sys.path.insert(0, str(root))
    try:
        return framework_key_of(import_object(spec, where="fabtest init --agent"))
    except SystemExit as exc:
        raise UsageError(f"fabtest init --agent {spec}: importing it called exit({exc.code!r}); an agent module must "
                         "not exit when imported (pytest would stop too); nothing was written") from None
    finally:
        if added:
            sys.path.remove(str(root))


def write_init(plan: InitPlan) -> list[str]:
    """Write the plan all or nothing; returns one line per file saying what it is.

    Each file is first written in full to a temp file beside it; only when all are written are they
    renamed into place, the pyproject last. Any failure (a read-only directory, a full disk) removes
    what was written, temp files and new directories included, and raises one :class:`UsageError` line."""
    texts = {**plan.files, **plan.replace}  # new files first, the pyproject's replacement last
    made_dirs: list[Path] = []
    staged: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    current = plan.root
    try:
        for name, text in texts.items():
            current = plan.root / name
            if name in plan.replace and current.is_symlink():  # a link inside the project (checked): keep it
                current = Path(os.path.realpath(current))
            for parent in reversed(current.parents):
                if parent.is_relative_to(plan.root) and not parent.exists():
                    parent.mkdir()
                    made_dirs.append(parent)
            staged.append((_stage(current, text), current))
        for temp, path in staged:
            current = path
            is_new = path.is_relative_to(plan.root) and path.relative_to(plan.root).as_posix() in plan.files
            if is_new and os.path.lexists(path):  # appeared since the plan: never overwrite
                raise FileExistsError(errno.EEXIST, "it appeared while fabtest init ran", str(path))
            os.replace(temp, path)
            if is_new:
                placed.append(path)
    except OSError as exc:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        for path in placed:
            path.unlink(missing_ok=True)
        for directory in reversed(made_dirs):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise UsageError(f"{current}: cannot write ({exc.strerror or exc}); nothing was written") from None
    what = {
        "pyproject.toml": "a [tool.fabtest] table" + (" (added at the end)" if plan.append else " (new file)")
                          + (f"; the agent as a {plan.framework} table" if plan.framework else ""),
        f"{STUB_MODULE}.py": "a stand-in agent: replace it with yours, or rerun init with --agent module:attr",
        FEATURE: "a first scripted and a first simulated scenario",
        OFFLINE_SCRIPT: "the scripted simulated user and judge used while no key is set",
    }
    return [f"  {name:<36} {what[name]}" for name in [*plan.append, *plan.files]]


def _stage(path: Path, text: str) -> Path:
    """``text`` in a temp file beside ``path``, flushed to disk (an existing file's mode is kept)."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".init-tmp")
    temp = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if path.is_file():
            os.chmod(temp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(temp, 0o666 & ~_umask())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def next_steps(plan: InitPlan) -> str:
    """What to run next: the offline run, the one step to a real model, and where to see the runs."""
    return ("Next:\n"
            "  pytest features/                  runs both scenarios offline (no key needed)\n"
            "  export GEMINI_API_KEY=...         the one step to a real model: the simulated user and the judge\n"
            "                                    become Gemini; run pytest features/ again\n"
            "  fabtest view                      every run in your browser: what failed, and each conversation\n"
            + ("" if plan.agent != STUB_TARGET else
               f"  Plug in your agent: set agent = \"module:attr\" in pyproject.toml (now {STUB_TARGET!r})\n"))


def _cmd_init(args: argparse.Namespace) -> int:
    from fabtest.errors import UsageError

    try:
        plan = plan_init(Path(args.dir), agent=args.agent)
        lines = write_init(plan)
    except UsageError as exc:
        return fail(str(exc), "fabtest init")
    print(f"fabtest init: wrote in {plan.root}:")
    print("\n".join(lines))
    print(next_steps(plan), end="")
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest init``."""
    p = sub.add_parser("init", help="set up fabtest in this project: a [tool.fabtest] table, first features, an "
                                    "offline script (pytest features/ is green with no key); never overwrites")
    p.add_argument("--agent", metavar="MODULE:ATTR", default=None,
                   help="use this existing agent (must import from the project directory) instead of a stub")
    p.add_argument("--dir", default=".", help="the project directory (default: the current directory)")
    p.set_defaults(func=_cmd_init)
