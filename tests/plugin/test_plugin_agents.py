"""Agents: plain callables, AgentResponse with tool calls, factories, classes, ``around()``,
``metadata()``, the ``fabtest_agent`` fixture, ``with_context``, named agents and HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fabtest import AgentError, AgentTimeout, Message
from fabtest.agents.http import HttpAgent
from fabtest.demo.server import make_server

AGENTS = '''
import contextlib
import json
from pathlib import Path

from fabtest import AgentResponse, ToolCall

LOG = Path(__file__).parent / "log.jsonl"


def log(**fields):
    with LOG.open("a") as fh:
        fh.write(json.dumps(fields) + "\\n")


def plain(messages):
    assert all(m.role in ("user", "agent") for m in messages)
    return f"plain: {messages[-1].content} ({len(messages)} messages)"


def with_tools(messages):
    return AgentResponse(
        text="Found Spreeblick Loft",
        tool_calls=[ToolCall("search_venues", {"city": "Berlin", "capacity": 12}, result=[{"id": "ber-spree"}]),
                    ToolCall("check_availability", {"venue_id": "ber-spree", "date": "12 March"}, result=True)],
    )


class Counter:
    """Counts its own calls: a fresh one per scenario starts at 1."""

    def __init__(self, context):
        self.context = context
        self.calls = 0

    def chat(self, messages, on_tool_call=None):
        self.calls += 1
        return AgentResponse(text=f"call {self.calls} for {self.context['scenario']}")


def factory(context):
    log(kind="factory", **{k: context[k] for k in ("scenario", "feature", "feature_file", "line", "tags",
                                                             "iteration", "workdir")})
    return Counter(context)


class Built:
    @classmethod
    def build(cls, context):
        log(kind="class-build", scenario=context["scenario"])
        agent = cls()
        agent.scenario = context["scenario"]
        return agent

    def chat(self, messages, on_tool_call=None):
        return AgentResponse(text="built for " + self.scenario)


class Managed:
    def __init__(self, context):
        self.scenario = context["scenario"]

    @contextlib.contextmanager
    def around(self):
        log(kind="enter", scenario=self.scenario)
        try:
            yield
        finally:
            log(kind="exit", scenario=self.scenario)

    def chat(self, messages, on_tool_call=None):
        log(kind="chat", scenario=self.scenario)
        return AgentResponse(text="managed reply")

    def metadata(self):
        return {"model": "demo-1", "version": 3, "scenario": self.scenario}


def managed(ctx):
    return Managed(ctx)


def ctx_factory(context):
    def reply(messages):
        return f"db={context.get('db')} tenant={context.get('tenant')} scenario={context['scenario']}"
    return reply


def special(messages):
    return "special: " + messages[-1].content
'''

PYPROJECT = '''
agent = "mybot:factory"

[tool.fabtest.agents]
plain = "mybot:plain"
tools = "mybot:with_tools"
built = "mybot:Built"
managed = "mybot:managed"
counter = "mybot:factory"
'''

AGENT_FEATURE = '''
@agents
Feature: Agent kinds
  Scenario: Plain callable
    Given the agent "plain"
    When the user says "hi"
    And the user says "again"
    Then the response must match "^plain: again \\(3 messages\\)$"
    And the agent must not call "search_venues"

  Scenario: Callable returning tool calls
    Given the agent "tools"
    When the user says "find me a room"
    Then the agent must call "search_venues" with:
      | argument | value  |
      | city     | Berlin |
      | capacity | 12     |
    And the agent must call "check_availability"
    And the response must match "Spreeblick"

  @counted @slow
  Scenario: Factory first
    When the user says "one"
    And the user says "two"
    And the user says "three"
    Then the response must match "^call 3 for Factory first$"

  Scenario: Factory second
    When the user says "one"
    Then the response must match "^call 1 for Factory second$"

  Scenario: Class with build
    Given the agent "built"
    When the user says "hi"
    Then the response must match "^built for Class with build$"

  Scenario: Around and metadata
    Given the agent "managed"
    When the user says "hi"
    And the user says "hi again"
    Then the response must match "managed reply"

  Scenario: Around exits when the scenario fails
    Given the agent "managed"
    When the user says "hi"
    Then the response must match "something else"
'''


def _line(needle: str) -> int:
    return next(i for i, line in enumerate(AGENT_FEATURE.lstrip("\n").splitlines(), 1) if needle in line)


def _agents_project(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENTS)
    project.feature("features/agents.feature", AGENT_FEATURE)


@pytest.fixture
def agents_run(shared_run):
    return shared_run("agent-kinds", _agents_project, "features")


def test_agent_kinds_run(agents_run):
    agents_run.assert_outcomes(passed=6, failed=1)
    by_name = agents_run.scenarios
    assert [n for n, r in by_name.items() if not r["passed"]] == ["Around exits when the scenario fails"]


def test_plain_callable_gets_the_whole_conversation(agents_run):
    entry = agents_run.scenarios["Plain callable"]
    assert [t["agent"] for t in entry["transcript"]] == ["plain: hi (1 messages)", "plain: again (3 messages)"]
    assert entry["agent_metadata"] == {"callable": "mybot:plain"}


def test_callable_returning_agent_response_records_tool_calls(agents_run):
    turn = agents_run.scenarios["Callable returning tool calls"]["transcript"][0]
    assert turn["tool_calls"] == [
        {"name": "search_venues", "arguments": {"city": "Berlin", "capacity": 12}, "result": [{"id": "ber-spree"}],
         "metadata": {}},
        {"name": "check_availability", "arguments": {"venue_id": "ber-spree", "date": "12 March"}, "result": True,
         "metadata": {}},
    ]


def test_factory_is_called_once_per_scenario_with_the_scenario_context(agents_run):
    calls = [e for e in agents_run.log if e["kind"] == "factory"]
    by_scenario = {e["scenario"]: e for e in calls}
    # once per scenario, even with three turns; never for scenarios that name another agent
    assert sorted(e["scenario"] for e in calls) == ["Factory first", "Factory second"]
    first = by_scenario["Factory first"]
    assert first["feature"] == "Agent kinds"
    assert first["feature_file"].endswith("features/agents.feature")
    assert first["line"] == _line("Scenario: Factory first")
    assert by_scenario["Factory second"]["line"] == _line("Scenario: Factory second")
    assert first["tags"] == ["agents", "counted", "slow"]
    assert by_scenario["Factory second"]["tags"] == ["agents"]
    assert first["iteration"] == 1
    # each scenario gets its own working directory: the scenario's pytest tmp_path
    assert first["workdir"] != by_scenario["Factory second"]["workdir"]
    assert Path(first["workdir"]).name.startswith("test_factory_first")
    assert Path(by_scenario["Factory second"]["workdir"]).name.startswith("test_factory_second")
    # a fresh agent per scenario: the second scenario's counter starts again at 1
    transcripts = agents_run.scenarios
    assert [t["agent"] for t in transcripts["Factory first"]["transcript"]] == [
        "call 1 for Factory first", "call 2 for Factory first", "call 3 for Factory first"]
    assert transcripts["Factory second"]["transcript"][0]["agent"] == "call 1 for Factory second"


def test_class_with_build_is_built_per_scenario(agents_run):
    assert [e["scenario"] for e in agents_run.log if e["kind"] == "class-build"] == ["Class with build"]


def test_around_is_entered_before_and_exited_after_the_scenario(agents_run):
    events = [(e["kind"], e["scenario"]) for e in agents_run.log if e["kind"] in ("enter", "exit", "chat")]
    ok, failing = "Around and metadata", "Around exits when the scenario fails"
    assert [k for k, s in events if s == ok] == ["enter", "chat", "chat", "exit"]
    assert [k for k, s in events if s == failing] == ["enter", "chat", "exit"]


def test_metadata_is_recorded_in_the_results(agents_run):
    by_name = agents_run.scenarios
    assert by_name["Around and metadata"]["agent_metadata"] == {"model": "demo-1", "version": 3,
                                                               "scenario": "Around and metadata"}
    assert by_name["Around exits when the scenario fails"]["agent_metadata"]["model"] == "demo-1"
    # agents without metadata() record an empty mapping
    assert by_name["Factory first"]["agent_metadata"] == {}


# -- fabtest_agent fixture and with_context ----------------------------------------------------------------
def test_fabtest_agent_fixture_overrides_the_default_for_its_directory(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENTS)
    project.write("features/special/conftest.py", '''
        import pytest

        import mybot


        @pytest.fixture
        def fabtest_agent():
            return mybot.special
    ''')
    project.feature("features/special/special.feature", '''
        Feature: Special
          Scenario: Fixture agent
            When the user says "hi"
            Then the response must match "^special: hi$"

          Scenario: A named agent still wins over the fixture
            Given the agent "plain"
            When the user says "hi"
            Then the response must match "^plain: hi"
    ''')
    project.feature("features/normal.feature", '''
        Feature: Normal
          Scenario: Default agent
            When the user says "hi"
            Then the response must match "^call 1 for Default agent$"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=3)
    assert [e["scenario"] for e in project.log() if e["kind"] == "factory"] == ["Default agent"]


def test_with_context_merges_keyword_arguments_into_the_context(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENTS)
    project.write("features/conftest.py", '''
        import pytest

        import fabtest


        @pytest.fixture
        def db():
            return "sqlite-memory"


        @pytest.fixture
        def fabtest_agent(db):
            return fabtest.with_context("mybot:ctx_factory", db=db, tenant="acme")
    ''')
    project.feature("features/ctx.feature", '''
        Feature: Context
          Scenario: Fixture values reach the factory
            When the user says "hi"
            Then the response must match "^db=sqlite-memory tenant=acme scenario=Fixture values reach the factory$"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=1)


def test_with_context_builds_directly():
    import fabtest

    seen: dict[str, Any] = {}

    def factory(context):
        seen.update(context)
        return lambda messages: "ok"

    target = fabtest.with_context(factory, db="x")
    agent = target.build({"scenario": "S", "db": "overridden"})
    assert agent.chat([Message("user", "hi")]).text == "ok"
    assert seen == {"scenario": "S", "db": "x"}


def test_given_the_agent_picks_from_the_agents_table(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENTS)
    project.feature("features/named.feature", '''
        Feature: Named
          Background:
            Given the agent "built"

          Scenario: From the background
            When the user says "hi"
            Then the response must match "^built for From the background$"

          Scenario: Scenario step redefines the agent
            Given the agent "plain"
            When the user says "hi"
            Then the response must match "^plain: hi"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=2)
    assert [e["scenario"] for e in project.log() if e["kind"] == "class-build"] == ["From the background"]


# -- HTTP ----------------------------------------------------------------------------------------------------
@pytest.fixture
def demo_server() -> Iterator[str]:
    server = make_server(0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _FaultHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/slow":
            time.sleep(1.0)
            self._reply(200, json.dumps({"text": "late"}).encode(), "application/json")
        elif self.path == "/boom":
            self._reply(500, b"internal kaboom", "text/plain")
        elif self.path == "/html":
            self._reply(200, b"<html>not json</html>", "text/html")
        elif self.path == "/notext":
            self._reply(200, json.dumps({"answer": "hi"}).encode(), "application/json")
        elif self.path == "/nested":
            body = {"data": {"reply": "nested hi", "calls": [{"name": "lookup", "arguments": {"q": "x"}}]}}
            self._reply(200, json.dumps(body).encode(), "application/json")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (timeout test)


@pytest.fixture
def fault_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FaultHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_agent_against_the_demo_server_returns_tool_calls(demo_server):
    agent = HttpAgent(demo_server + "/chat", timeout=5)
    seen = []
    try:
        reply = agent.chat([Message("user", "I need a room in Berlin for 10 people on 12 March")],
                           on_tool_call=seen.append)
    finally:
        agent.close()
    assert "Spreeblick Loft" in reply.text
    search = [c for c in reply.tool_calls if c.name == "search_venues"]
    assert search and search[0].arguments["city"] == "Berlin" and search[0].arguments["capacity"] == 10
    assert isinstance(search[0].result, list) and search[0].result
    assert [c.name for c in seen] == [c.name for c in reply.tool_calls]
    assert agent.metadata()["adapter"] == "http"


def test_http_agent_in_a_feature(project, demo_server):
    project.pyproject(f'''
        agent = "mybot:factory"

        [tool.fabtest.agents]
        venue_http = {{ http = "{demo_server}/chat", timeout = 5 }}
        missing_http = {{ http = "{demo_server}/nope" }}
    ''')
    project.agent(AGENTS)
    project.feature("features/http.feature", '''
        Feature: HTTP
          Scenario: Venue search over HTTP
            Given the agent "venue_http"
            When the user says "I need a room in Berlin for 10 people on 12 March"
            Then the agent must call "search_venues" with:
              | argument | value  |
              | city     | Berlin |
              | capacity | >= 10  |
            And the response must match "Spreeblick Loft"
            When the user says "Spreeblick Loft please"
            Then the agent must call "check_availability" with:
              | argument | value   |
              | venue_id | /^ber-/ |
            And the conversation must include a call to "search_venues"

          Scenario: HTTP error status
            Given the agent "missing_http"
            When the user says "hi"
            Then the response must match "never"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=1, failed=1)
    by_name = project.scenarios()
    ok = by_name["Venue search over HTTP"]
    assert ok["turns"] == 2
    assert ok["agent_metadata"]["adapter"] == "http"
    assert ok["agent_metadata"]["url"] == f"{demo_server}/chat"
    assert "search_venues" in [c["name"] for c in ok["transcript"][0]["tool_calls"]]
    failed = by_name["HTTP error status"]
    assert failed["failure_type"] == "error"
    assert "404" in failed["failure_message"]
    assert "Traceback" not in project.output(result)


def test_http_timeout_is_agent_timeout(fault_server):
    agent = HttpAgent(fault_server + "/slow", timeout=0.2)
    with pytest.raises(AgentTimeout, match=r"did not answer within 0.2s"):
        agent.chat([Message("user", "hi")])
    agent.close()


def test_http_500_is_agent_error_with_status(fault_server):
    agent = HttpAgent(fault_server + "/boom")
    with pytest.raises(AgentError, match=r"answered 500: internal kaboom") as info:
        agent.chat([Message("user", "hi")])
    assert not isinstance(info.value, AgentTimeout)
    agent.close()


def test_http_non_json_is_agent_error(fault_server):
    agent = HttpAgent(fault_server + "/html")
    with pytest.raises(AgentError, match=r"non-JSON.*<html>"):
        agent.chat([Message("user", "hi")])
    agent.close()


def test_http_missing_text_field_is_agent_error(fault_server):
    agent = HttpAgent(fault_server + "/notext")
    with pytest.raises(AgentError, match=r"no string field 'text'"):
        agent.chat([Message("user", "hi")])
    agent.close()


def test_http_custom_fields(fault_server):
    agent = HttpAgent(fault_server + "/nested", text_field="data.reply", tool_calls_field="data.calls")
    reply = agent.chat([Message("user", "hi")])
    agent.close()
    assert reply.text == "nested hi"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("lookup", {"q": "x"})]


def test_http_unreachable_is_agent_error():
    import socket

    with socket.socket() as sock:  # bound but not listening: refused, and no other test can take the port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        agent = HttpAgent(f"http://127.0.0.1:{port}/chat", timeout=2)
        with pytest.raises(AgentError, match="unreachable"):
            agent.chat([Message("user", "hi")])
        agent.close()


def test_agent_table_with_factory_and_env_expansion(project, monkeypatch):
    monkeypatch.setenv("FABTEST_TEST_TENANT", "globex")
    project.pyproject('''
        agent = "mybot:factory"

        [tool.fabtest.agents]
        tenanted = { factory = "mybot:ctx_factory", db = "pg", tenant = "${FABTEST_TEST_TENANT}" }
    ''')
    project.agent(AGENTS)
    project.feature("features/table.feature", '''
        Feature: Table
          Scenario: Table agent
            Given the agent "tenanted"
            When the user says "hi"
            Then the response must match "^db=pg tenant=globex scenario=Table agent$"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=1)


def test_given_the_agent_after_the_first_turn_is_not_silently_ignored(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENTS)
    project.feature("features/late.feature", '''
        Feature: Late
          Scenario: Late agent
            When the user says "hi"
            Given the agent "plain"
            When the user says "again"
            Then the response must match "^plain: again"
    ''')
    result = project.run("features")
    out = project.output(result)
    # a usage error naming the step, not a confusing failure of a later assertion
    assert result.ret == 1
    assert "features/late.feature:4" in out and "comes after the conversation started" in out, out
    assert "ExpectationFailed" not in out
