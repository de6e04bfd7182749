"""Steps mode: every user_input goes to the agent, every expected_outcome is judged on that exchange."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import AgentResponse
from fabtest.experiment.stable_id import stable_id
from fabtest.llm.base import LLMBadOutput
from fabtest.playbook import run_playbook

from .helpers import EXAMPLES, REPO, BookingAgent, Recording, write_playbook


def test_steps_example_passes_against_the_demo_cli(llm: Any, tmp_path: Path, fake: Any) -> None:
    outcome = run_playbook(EXAMPLES / "book_berlin.playbook.json", agent_factory="fabtest.demo.fake_cli:build_cli_agent",
                           judge_llm=llm, simulator_llm=None, repo_root=REPO, results_dir=tmp_path / "results")
    assert outcome.passed, outcome.failure_message
    assert outcome.failure_type is None and outcome.trace_path is None
    assert outcome.workspace_path is None  # removed after a pass
    assert len(outcome.conversation.turns) == 4
    assert [c.status for c in outcome.checks] == ["passed"] * 4
    # one stateless judge call per step, each showing only its own exchange
    judged = [r.prompt for r in fake.requests if "LATEST EXCHANGE" in r.prompt]
    assert len(judged) == 4
    assert "Yes, please book it." not in judged[0] and "Hi, I need a meeting room." not in judged[3]
    result = outcome.result
    assert result is not None and result.passed and result.turns == 4
    assert result.id == stable_id("playbook", None, "book_berlin")
    assert [e.status for e in result.expectations] == ["passed"] * 4
    assert not (tmp_path / "results").exists()  # no trace after a pass


def test_a_failing_step_halts_the_run_and_leaves_a_trace(llm: Any, tmp_path: Path) -> None:
    # the offline judge passes a "price" criterion only when the reply quotes one (€): step 2 fails
    path = write_playbook(tmp_path, {"name": "halts", "steps": [
        {"user_input": "Hi, I need a meeting room.", "expected_outcome": "The agent is friendly"},
        {"user_input": "I need it in Berlin.", "expected_outcome": "The agent quotes a price per day"},
        {"user_input": "Mitte Meeting Hub, please.", "expected_outcome": "anything"},
    ]})
    agents = Recording()
    outcome = run_playbook(path, agent_factory=agents, judge_llm=llm, simulator_llm=None, repo_root=tmp_path,
                           results_dir=tmp_path / "results", experiment_id="exp_abc")
    assert not outcome.passed and outcome.failure_type == "assertion"
    assert outcome.failure_message.startswith("step 2 of 3 failed: expected 'The agent quotes a price per day'")
    assert agents.received == ["Hi, I need a meeting room.", "I need it in Berlin."]  # step 3 never sent
    assert outcome.trace_path == tmp_path / "results" / "traces" / "exp_abc.halts.trace.json"
    trace = json.loads(outcome.trace_path.read_text())
    assert [s["step"] for s in trace["steps"]] == [1, 2]
    step = trace["steps"][1]
    assert step["input"] == "I need it in Berlin." and step["verdict"] == "failed" and step["reasoning"]
    assert "Which" in step["response"] or "?" in step["response"]
    assert trace["failure_type"] == "assertion" and trace["steps"][0]["verdict"] == "passed"
    # the workspace is kept after a failure, and the message says where
    assert outcome.workspace_path is not None and outcome.workspace_path.is_dir()
    assert f"workspace kept at {outcome.workspace_path}" in outcome.failure_message
    assert outcome.result is not None and outcome.result.failure_type == "assertion" and outcome.result.turns == 2


def test_the_trace_is_named_after_the_playbook_without_an_experiment(llm: Any, tmp_path: Path) -> None:
    path = write_playbook(tmp_path, {"name": "no exp", "steps": [
        {"user_input": "Hi", "expected_outcome": "The agent quotes a price"}]})
    outcome = run_playbook(path, agent_factory=BookingAgent, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    assert outcome.failure_type == "assertion"
    assert outcome.trace_path == tmp_path / "results" / "traces" / "no_exp.trace.json" and outcome.trace_path.is_file()


def test_a_hung_cli_agent_is_a_timeout(llm: Any, tmp_path: Path) -> None:
    path = write_playbook(tmp_path, {"name": "hangs", "timeout": 1, "steps": [
        {"user_input": "Hi", "expected_outcome": "anything"}]})

    def hung(context: dict[str, Any]) -> CliAgent:
        return CliAgent([sys.executable, "-c", "import time; time.sleep(30)"], output_format="text",
                        timeout_s=context["timeout"], cwd=context["cwd"], kill_grace_s=0.2)

    outcome = run_playbook(path, agent_factory=hung, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    assert outcome.failure_type == "timeout", outcome.failure_message
    assert "timed out after 1s" in outcome.failure_message and outcome.duration_s < 10
    trace = json.loads(outcome.trace_path.read_text())
    assert trace["steps"][0]["error"].startswith("timeout")


def test_a_hung_python_agent_is_a_timeout(llm: Any, tmp_path: Path) -> None:
    import threading

    release = threading.Event()

    class Hung:
        def __init__(self, context: dict[str, Any]) -> None:
            pass

        def chat(self, messages: Any, on_tool_call: Any = None) -> AgentResponse:
            release.wait(20)
            return AgentResponse("late")

    path = write_playbook(tmp_path, {"name": "hangs2", "timeout": 1, "steps": [
        {"user_input": "Hi", "expected_outcome": "anything"}]})
    try:
        outcome = run_playbook(path, agent_factory=Hung, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    finally:
        release.set()
    assert outcome.failure_type == "timeout" and outcome.duration_s < 5


def test_a_crashing_agent_and_a_failing_judge_are_errors(llm: Any, tmp_path: Path) -> None:
    class Crashes:
        def __init__(self, context: dict[str, Any]) -> None:
            pass

        def chat(self, messages: Any, on_tool_call: Any = None) -> AgentResponse:
            raise RuntimeError("boom")

    path = write_playbook(tmp_path, {"name": "errs", "steps": [{"user_input": "Hi", "expected_outcome": "x"}]})
    outcome = run_playbook(path, agent_factory=Crashes, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    assert outcome.failure_type == "error" and "boom" in outcome.failure_message

    class BrokenLLM:
        provider, model = "fake", "broken"

        def complete(self, *a: Any, **k: Any) -> Any:
            raise LLMBadOutput("nonsense")

        complete_json = complete

    outcome = run_playbook(path, agent_factory=BookingAgent, judge_llm=BrokenLLM(), simulator_llm=None,
                           repo_root=tmp_path)
    assert outcome.failure_type == "error" and "the judge failed" in outcome.failure_message


def test_missing_llm_is_a_skip_with_the_reason(tmp_path: Path) -> None:
    path = write_playbook(tmp_path, {"name": "skips", "steps": [{"user_input": "Hi", "expected_outcome": "x"}]})
    built = Recording()
    outcome = run_playbook(path, agent_factory=built, judge_llm=None, simulator_llm=None, repo_root=tmp_path)
    assert outcome.skipped and not outcome.passed and "judge" in outcome.skip_reason
    assert built.agents == [] and outcome.result is not None and outcome.result.skipped


def test_evaluator_model_rebuilds_the_judge_with_that_model(llm: Any, tmp_path: Path, fake: Any) -> None:
    path = write_playbook(tmp_path, {"name": "model", "evaluator_model": "gemini-9-test", "steps": [
        {"user_input": "Hi", "expected_outcome": "The agent is friendly"}]})
    outcome = run_playbook(path, agent_factory=BookingAgent, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    assert outcome.passed, outcome.failure_message
    assert {r.model for r in fake.requests} == {"gemini-9-test"}


def test_link_paths_are_visible_in_the_agents_workspace(llm: Any, tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "venue.md").write_text("how to book", encoding="utf-8")
    path = write_playbook(tmp_path / "pb", {"name": "links", "tmpdir": {"link_paths": ["skills"]}, "steps": [
        {"user_input": "Hi", "expected_outcome": "anything"}]})
    seen: dict[str, Any] = {}

    def factory(context: dict[str, Any]) -> BookingAgent:
        seen["text"] = (Path(context["cwd"]) / "skills" / "venue.md").read_text()
        seen["cwd"] = Path(context["cwd"])
        return BookingAgent(context)

    outcome = run_playbook(path, agent_factory=factory, judge_llm=llm, simulator_llm=None, repo_root=tmp_path)
    assert outcome.passed and seen["text"] == "how to book"
    assert not seen["cwd"].exists() and (tmp_path / "skills" / "venue.md").is_file()  # removed, links not followed


def test_a_step_sends_its_files_and_a_missing_one_is_one_line(llm: Any, tmp_path: Path) -> None:
    from fabtest.playbook.load import PlaybookError, load_playbook

    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "room.png").write_bytes(b"\x89PNG fake")
    seen: list[list[str]] = []

    class Photos:
        def __init__(self, context: dict[str, Any]) -> None:
            pass

        def chat(self, messages: Any, on_tool_call: Any = None) -> AgentResponse:
            seen.append([f"{a.name}:{a.size}" for a in messages[-1].attachments])
            return AgentResponse("Hello, I see your room photo.")

    path = write_playbook(tmp_path, {"name": "photo", "steps": [
        {"user_input": "Hi, I need a meeting room like this.", "expected_outcome": "The agent is friendly",
         "files": ["files/room.png"]}]})
    outcome = run_playbook(path, agent_factory=Photos, judge_llm=llm, simulator_llm=None, repo_root=tmp_path,
                           results_dir=tmp_path / "results")
    assert seen == [["room.png:9"]], outcome.failure_message
    assert [f.name for f in outcome.conversation.turns[0].attachments] == ["room.png"]
    missing = write_playbook(tmp_path, {"name": "missing", "steps": [
        {"user_input": "hi", "expected_outcome": "x", "files": ["files/nope.png"]}]}, name="missing")
    try:
        load_playbook(missing)
    except PlaybookError as exc:
        assert str(exc).startswith(f'{missing}: steps[0].files: the file "files/nope.png" does not exist')
    else:
        raise AssertionError("a missing file must be a PlaybookError")
