"""``fabtest init``: a project's first green run, offline, in one command.

A new user should not assemble a pyproject table, an agent, features and an offline judge from
a long manual before seeing anything pass. ``fabtest init`` writes the smallest set that works
(``pytest features/`` green with no key) and says the one step to a real model
(``export GEMINI_API_KEY=...``): the offline script is ``[tool.fabtest] offline_llm``, which a
configured key always takes precedence over, so nothing has to be edited to switch.

It never overwrites: every file it would write is checked first, and if one exists (or the
pyproject already has a ``[tool.fabtest]`` table) nothing is written and the one line names it.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from fabtest.errors import UsageError

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
    files that exist and get text added at the end (the pyproject's new table)."""

    root: Path
    files: dict[str, str]
    append: dict[str, str]
    agent: str


def _fabtest_table(agent: str) -> str:
    return (
        "\n[tool.fabtest]\n"
        "# The agent under test: \"module:attribute\" (a function of the messages, an object with chat(), or a factory).\n"
        f"agent = \"{agent}\"\n"
        "# The simulated user and the judge while no key is set; export GEMINI_API_KEY=... to use the real model.\n"
        f"offline_llm = \"{OFFLINE_SCRIPT}\"\n"
    )


def plan_init(root: Path, *, agent: str | None = None) -> InitPlan:
    """Decide every file to write under ``root``; raises :class:`UsageError` (one line naming the file)
    when one exists, the pyproject has a fabtest table or is not valid TOML, or ``agent`` does not import."""
    root = root.resolve()
    if agent is not None:
        _check_agent(root, agent)
    files: dict[str, str] = {}
    append: dict[str, str] = {}
    pyproject = root / "pyproject.toml"
    table = _fabtest_table(agent or STUB_TARGET)
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8-sig"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{pyproject}: not valid TOML ({exc}); fix it, then run fabtest init again") from None
        if "fabtest" in (data.get("tool") or {}):
            raise UsageError(f"{pyproject}: already has a [tool.fabtest] table; nothing was written")
        append["pyproject.toml"] = table
    else:
        # the pytest table makes this directory pytest's rootdir wherever pytest is started below it
        files["pyproject.toml"] = "[tool.pytest.ini_options]\naddopts = \"-ra\"\n" + table
    if agent is None:
        files[f"{STUB_MODULE}.py"] = _STUB
    files[FEATURE] = _FEATURE
    files[OFFLINE_SCRIPT] = _OFFLINE
    for name in files:
        if (root / name).exists():
            raise UsageError(f"{root / name}: already exists; fabtest init never overwrites, so nothing was written")
    return InitPlan(root=root, files=files, append=append, agent=agent or STUB_TARGET)


def _check_agent(root: Path, spec: str) -> None:
    """``--agent`` must import from the project directory, as pytest will import it."""
    from fabtest._internal.targets import import_object

    added = str(root) not in sys.path
    if added:
        sys.path.insert(0, str(root))
    try:
        import_object(spec, where="fabtest init --agent")
    finally:
        if added:
            sys.path.remove(str(root))


def write_init(plan: InitPlan) -> list[str]:
    """Write the plan; returns one line per file saying what it is."""
    for name, text in plan.files.items():
        path = plan.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for name, text in plan.append.items():
        with open(plan.root / name, "a", encoding="utf-8") as handle:
            handle.write(text)
    what = {
        "pyproject.toml": "a [tool.fabtest] table" + (" (added at the end)" if plan.append else " (new file)"),
        f"{STUB_MODULE}.py": "a stand-in agent: replace it with yours, or rerun init with --agent module:attr",
        FEATURE: "a first scripted and a first simulated scenario",
        OFFLINE_SCRIPT: "the scripted simulated user and judge used while no key is set",
    }
    return [f"  {name:<36} {what[name]}" for name in [*plan.append, *plan.files]]


def next_steps(plan: InitPlan) -> str:
    """What to run next: the offline run, then the one step to a real model."""
    return ("Next:\n"
            "  pytest features/                  runs both scenarios offline (no key needed)\n"
            "  export GEMINI_API_KEY=...         the one step to a real model: the simulated user and the judge\n"
            "                                    become Gemini; run pytest features/ again\n"
            + ("" if plan.agent != STUB_TARGET else
               f"  Plug in your agent: set agent = \"module:attr\" in pyproject.toml (now {STUB_TARGET!r})\n"))
