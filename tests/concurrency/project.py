"""A throwaway project for the concurrency tests, run in a subprocess by pytester.

The agents prove concurrency by observation, never by timing: a barrier lets a chat through only
when N scenarios are in flight at once (a sequential run breaks it after 20 s instead of hanging),
and every agent writes what it saw to ``events.jsonl``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

BASE_ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--fabtest-no-preflight")

BOTS = '''
import asyncio
import contextlib
import json
import logging
import os
import pathlib
import threading
import time

EVENTS = pathlib.Path(__file__).with_name("events.jsonl")
_lock = threading.Lock()
#: passes only when BARRIER chats wait at once, i.e. that many scenarios are in flight together
BARRIER = threading.Barrier(int(os.environ.get("BARRIER", "4")), timeout=20)


def event(**fields):
    with _lock, EVENTS.open("a") as f:
        f.write(json.dumps(fields) + "\\n")


class Bot:
    """Behaves by the scenario's name: "barrier ..." waits at the barrier, "hang ..." sleeps past
    the agent timeout, "fail ..." says something no step expects; every one prints and logs."""

    def __init__(self, context):
        self.name = context["scenario"]
        self.ticket = context.get("ticket")

    @contextlib.contextmanager
    def around(self):
        event(kind="enter", scenario=self.name)
        yield
        event(kind="exit", scenario=self.name)

    def chat(self, messages):
        if self.ticket is not None:
            self.ticket["agent"] = self.name
        if self.name.startswith("barrier"):
            BARRIER.wait()
        if self.name.startswith("hang"):
            time.sleep(3)
        print(f"stdout of {self.name}")
        logging.getLogger("bots").warning("log of %s", self.name)
        word = "nonsense" if self.name.startswith("fail") else "hello"
        return f"{word} from {self.name}: {messages[-1].content}"


_arrived = []
_all_in = {}


class AsyncBot:
    """An async agent: its chat passes only when ASYNC_PARTIES chats are in flight on one loop."""

    def __init__(self, context):
        self.name = context["scenario"]

    async def chat(self, messages):
        loop = asyncio.get_running_loop()
        gate = _all_in.setdefault("gate", asyncio.Event())
        _arrived.append(self.name)
        if len(_arrived) == int(os.environ.get("ASYNC_PARTIES", "3")):
            gate.set()
        await asyncio.wait_for(gate.wait(), 20)
        event(kind="async", scenario=self.name, loop=id(loop), thread=threading.current_thread().name)
        return f"hello from {self.name}: {messages[-1].content}"
'''

CONFTEST = '''
import itertools

import pytest
from pytest_bdd import parsers, then, when

import bots
from fabtest import with_context

_tickets = itertools.count(1)
_stamps = itertools.count(1)


@pytest.fixture
def ticket(request):
    """Function-scoped, requested by the fabtest_agent fixture below (set up with the scenario)."""
    value = {"n": next(_tickets)}
    print(f"setup of {request.node.name}")
    yield value
    print(f"teardown of {request.node.name}")
    bots.event(kind="ticket-teardown", n=value["n"], owner=value.get("owner"))


@pytest.fixture
def stamp():
    """Function-scoped, first requested by a step while the scenario runs."""
    value = {"n": next(_stamps), "owner": None}
    yield value
    bots.event(kind="stamp-teardown", n=value["n"], owner=value["owner"])


@pytest.fixture(autouse=True)
def not_thread_safe(request):
    """How a fixture says its scenario must run alone."""
    if "fixture_serial" in request.node.name:
        request.applymarker(pytest.mark.fabtest_serial("the fixture is not thread-safe"))


@pytest.fixture
def fabtest_agent(ticket):
    return with_context("bots:Bot", ticket=ticket)


@when(parsers.parse('I take a stamp as "{who}"'), target_fixture="taken")
def take_stamp(stamp, ticket, who):
    assert stamp["owner"] is None, f"stamp {stamp['n']} was already taken by {stamp['owner']}"
    stamp["owner"] = ticket["owner"] = who
    return {"who": who, "stamp": stamp["n"]}


@then(parsers.parse('my stamp and ticket are "{who}"\\'s'))
def check_stamp(taken, stamp, ticket, who):
    assert taken == {"who": who, "stamp": stamp["n"]}, (taken, stamp)
    assert stamp["owner"] == ticket["owner"] == ticket["agent"] == who, (stamp, ticket)
'''


def scenario(name: str, *, says: str = "hi", tags: str = "", stamp: bool = True) -> str:
    steps = [f'When I take a stamp as "{name}"'] if stamp else []
    steps.append(f'When the user says "{says}"')
    if stamp:
        steps.append(f"Then my stamp and ticket are \"{name}\"'s")
    steps.append(f'Then the response must match "hello from {name}"')
    head = f"  {tags}\n" if tags else ""
    return head + f"  Scenario: {name}\n" + "".join(f"    {s}\n" for s in steps)


def feature(title: str, *scenarios: str) -> str:
    return f"Feature: {title}\n" + "\n".join(scenarios)


def make_project(pytester: pytest.Pytester, features: dict[str, str], *, concurrency: int = 4,
                 extra: str = "", conftest: str = CONFTEST) -> Path:
    pytester.makepyprojecttoml(textwrap.dedent(f'''
        [tool.pytest.ini_options]
        pythonpath = ["."]

        [tool.fabtest]
        agent = "bots:Bot"
        results_dir = "results"
        concurrency = {concurrency}
        agent_timeout = 0.5

        [tool.fabtest.agents]
        async_bot = "bots:AsyncBot"
    ''') + extra)
    pytester.makepyfile(bots=BOTS)
    pytester.makeconftest(conftest)
    (pytester.path / "features").mkdir(exist_ok=True)
    for name, text in features.items():
        (pytester.path / "features" / name).write_text(text)
    return pytester.path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("features", *BASE_ARGS, *args, timeout=120)


def events(path: Path) -> list[dict[str, Any]]:
    file = path / "events.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


def experiment(path: Path) -> dict[str, Any]:
    (file,) = [p for p in (path / "results").glob("*.json") if not p.name.startswith(".")]
    return json.loads(file.read_text())
