"""Cost from recorded tokens: the price table, overrides, unknown models, per-role JSON and compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabtest.conversation import AgentResponse, Conversation, TokenUsage, Turn
from fabtest.compare.compute import compare
from fabtest.compare.render import render_markdown, render_text
from fabtest.experiment.cost import DEFAULT_PRICES, PRICES_TAKEN, price_table
from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.reader import read_document
from fabtest.experiment.model import TurnRecord, UsageRecord, usage_records
from fabtest.report.console import render_summary
from fabtest.config.settings import Settings
from fabtest.errors import UsageError
from support.experiments import make_info, make_result


def _with_agent(result, *, model: str | None, inp: int, out: int):
    meta = {"usage": {"input_tokens": inp, "output_tokens": out}}
    if model:
        meta["model"] = model
    turn = TurnRecord(number=1, user="hi", agent="hello", metadata=meta)
    return result.model_copy(update={"transcript": [turn]})


def test_defaults_are_dated_and_cover_the_models_fabtest_names() -> None:
    assert {"gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite", "gemini-2.0-flash"} <= set(DEFAULT_PRICES)
    assert all(PRICES_TAKEN in p.source for p in DEFAULT_PRICES.values())


def test_judge_agent_and_total_are_priced_per_role() -> None:
    # judge: 300 in / 40 out on gemini-2.0-flash (0.10 / 0.40); agent: 1000 / 200 on gemini-2.5-flash (0.30 / 2.50)
    result = _with_agent(make_result("Greeting"), model="gemini-2.5-flash", inp=1000, out=200)
    doc = build_document(make_info(), [result])
    judge = (300 * 0.10 + 40 * 0.40) / 1e6
    agent = (1000 * 0.30 + 200 * 2.50) / 1e6
    entry = doc["scenario_results"][0]
    assert entry["cost"]["roles"]["judge"] == {"model": "gemini-2.0-flash", "usd": pytest.approx(judge)}
    assert entry["cost"]["roles"]["agent"] == {"model": "gemini-2.5-flash", "usd": pytest.approx(agent)}
    assert entry["cost"]["usd"] == pytest.approx(judge + agent) and entry["cost"]["complete"] is True
    spent = doc["summary"]["cost"]
    assert spent["total_usd"] == pytest.approx(judge + agent) and spent["complete"] is True
    assert spent["currency"] == "USD" and spent["unpriced"] == []
    assert set(spent["prices"]) == {"gemini-2.0-flash", "gemini-2.5-flash"}
    # the existing keys stay
    assert doc["summary"]["tokens"]["judge"] == {"calls": 2, "input_tokens": 300, "output_tokens": 40}
    assert {"id", "name", "passed", "usage", "evaluations"} <= set(entry)


def test_a_price_override_replaces_the_default() -> None:
    info = make_info(prices={"gemini-2.0-flash": {"input": 1.0, "output": 10.0}})
    doc = build_document(info, [make_result("Greeting")])
    assert doc["summary"]["cost"]["total_usd"] == pytest.approx((300 * 1.0 + 40 * 10.0) / 1e6)
    assert doc["summary"]["cost"]["prices"]["gemini-2.0-flash"]["source"] == "[tool.fabtest.prices]"
    assert doc["experiment"]["prices"] == {"gemini-2.0-flash": {"input": 1.0, "output": 10.0}}


def test_an_unknown_model_shows_tokens_and_na_never_zero() -> None:
    result = _with_agent(make_result("Greeting"), model="my-local-llama", inp=500, out=50)
    doc = build_document(make_info(), [result])
    spent = doc["summary"]["cost"]
    assert spent["complete"] is False
    assert spent["roles"]["agent"]["usd"] is None and spent["roles"]["agent"]["input_tokens"] == 500
    assert spent["unpriced"] == [{"role": "agent", "model": "my-local-llama", "input_tokens": 500, "output_tokens": 50}]
    assert spent["total_usd"] == pytest.approx((300 * 0.10 + 40 * 0.40) / 1e6)  # the judge alone
    assert doc["scenario_results"][0]["cost"]["roles"]["agent"]["usd"] is None
    text = render_summary(doc)
    assert "n/a" in text and "priced tokens only" in text
    notes = [line for line in text.splitlines() if "my-local-llama" in line and "Note:" in line]
    assert len(notes) == 1 and '[tool.fabtest.prices] "my-local-llama" = { input = ' in notes[0]


def test_an_agent_without_a_model_is_unpriced_and_says_how_to_name_it() -> None:
    doc = build_document(make_info(), [_with_agent(make_result("Greeting"), model=None, inp=10, out=5)])
    text = render_summary(doc)
    assert "(not reported)" in text
    assert 'without naming its model' in text and '"model"' in text


def test_console_usage_table_has_cost_and_an_agent_row() -> None:
    doc = build_document(make_info(), [_with_agent(make_result("Greeting"), model="gemini-2.5-flash", inp=1000, out=200)])
    lines = render_summary(doc).splitlines()
    header = next(line for line in lines if "Cost (USD)" in line)
    assert "Model" in header and "Input tokens" in header
    agent_row = next(line for line in lines if line.strip().startswith("agent "))
    assert "gemini-2.5-flash" in agent_row and "$0.0008" in agent_row
    assert any(line.strip() == "Total cost: $0.000846" for line in lines)


def test_usage_records_sum_agent_turn_usage_with_its_model() -> None:
    conv = Conversation()
    conv.add_usage("judge", TokenUsage(calls=1, input_tokens=5, output_tokens=1))
    for n, (inp, out) in enumerate([(100, 10), (200, 20)], start=1):
        conv.turns.append(Turn(number=n, user="u", response=AgentResponse(
            text="a", metadata={"model": "gemini-2.5-pro", "usage": {"calls": 2, "input_tokens": inp, "output_tokens": out}})))
    conv.turns.append(Turn(number=3, user="u", response=AgentResponse(text="a", metadata={"usage": "lots"})))
    records = usage_records(conv)
    assert records["agent"] == UsageRecord(calls=4, input_tokens=300, output_tokens=30, model="gemini-2.5-pro")
    assert records["judge"].input_tokens == 5


def test_openai_style_usage_counts_too() -> None:
    conv = Conversation()
    conv.turns.append(Turn(number=1, user="u", response=AgentResponse(
        text="a", metadata={"usage": {"prompt_tokens": 7, "completion_tokens": 3}})))
    assert usage_records(conv)["agent"] == UsageRecord(calls=1, input_tokens=7, output_tokens=3)


def test_html_report_shows_cost(tmp_path: Path) -> None:
    from fabtest.report.html import render_experiment_html

    doc = build_document(make_info(), [_with_agent(make_result("Greeting"), model="mystery", inp=9, out=1)])
    page = render_experiment_html(doc)
    assert "LLM usage and cost" in page and "Total cost" in page and "mystery" in page and "n/a" in page


def test_compare_reports_the_cost_delta_over_shared_scenarios(tmp_path: Path) -> None:
    a = [_with_agent(make_result("Greeting"), model="gemini-2.5-flash", inp=1000, out=100), make_result("Removed one")]
    b = [_with_agent(make_result("Greeting"), model="gemini-2.5-flash", inp=3000, out=100), make_result("Added one")]
    for exp_id, results in (("exp_aaaaaa", a), ("exp_bbbbbb", b)):
        write_document(build_document(make_info(exp_id), results), tmp_path)
    base = read_document("exp_aaaaaa", tmp_path, lean=True)[1]
    cur = read_document("exp_bbbbbb", tmp_path, lean=True)[1]
    assert base.get("lean") is True and "cost_usd" in base["scenario_results"][0]
    comparison = compare(base, cur)
    judge = (300 * 0.10 + 40 * 0.40) / 1e6
    assert comparison.cost["scenarios"] == 1 and comparison.cost["unpriced"] == 0
    assert comparison.cost["baseline_usd"] == pytest.approx(judge + (1000 * 0.30 + 100 * 2.50) / 1e6)
    assert comparison.cost["delta_usd"] == pytest.approx(2000 * 0.30 / 1e6)
    text = render_text(comparison)
    assert "Cost, 1 shared scenario(s): $0.000596 → $0.001196 (+$0.000600, x2.01)" in text
    assert "Cost, 1 shared scenario(s)" in render_markdown(comparison)
    assert json.loads(json.dumps(comparison.to_dict()))["cost"]["scenarios"] == 1


def test_compare_leaves_out_scenarios_unpriced_on_either_side() -> None:
    a = build_document(make_info("exp_aaaaaa"), [_with_agent(make_result("Greeting"), model="x", inp=5, out=5)])
    b = build_document(make_info("exp_bbbbbb"), [make_result("Greeting")])
    spent = compare(a, b).cost
    assert spent["scenarios"] == 0 and spent["unpriced"] == 1
    assert "not compared (1 shared scenario(s) have tokens without a price)" in render_text(compare(a, b))


def test_prices_table_in_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest.prices]\n"my-model" = { input = 0.5, output = 1.5 }\n')
    settings = Settings.load(tmp_path, environ={})
    assert price_table(settings.prices)["my-model"].output == 1.5
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest.prices]\n"my-model" = { input = -1, output = 1.5 }\n')
    with pytest.raises(UsageError, match=r"prices\.my-model\.input"):
        Settings.load(tmp_path, environ={})
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest.prices]\n"my-model" = { input = 1, outptu = 1.5 }\n')
    with pytest.raises(UsageError, match=r"prices\.my-model\.(outptu|output)"):
        Settings.load(tmp_path, environ={})


def test_gemini_cli_stats_are_priced_per_model() -> None:
    """The CLI's result.stats.models splits a turn by model (it routes some requests elsewhere)."""
    from fabtest.agents.cli_agent import parse_stream_json

    stdout = "\n".join(json.dumps(e) for e in [
        {"type": "init", "session_id": "s1", "model": "gemini-2.5-pro"},
        {"type": "message", "role": "assistant", "content": "Done."},
        {"type": "result", "status": "success", "stats": {
            "total_tokens": 1600, "input_tokens": 1400, "output_tokens": 200, "cached": 0, "input": 1400,
            "duration_ms": 5, "tool_calls": 0, "models": {
                "gemini-2.5-pro": {"total_tokens": 1100, "input_tokens": 1000, "output_tokens": 100},
                "gemini-2.5-flash-lite": {"total_tokens": 500, "input_tokens": 400, "output_tokens": 100}}}},
    ])
    reply = parse_stream_json(stdout)
    conv = Conversation()
    conv.turns.append(Turn(number=1, user="u", response=reply))
    result = make_result("Greeting").model_copy(update={
        "usage": usage_records(conv), "transcript": [TurnRecord(number=1, user="u", agent=reply.text, metadata=reply.metadata)]})
    assert result.usage["agent"] == UsageRecord(calls=1, input_tokens=1400, output_tokens=200, model=None)
    doc = build_document(make_info(), [result])
    lines = {(ln["role"], ln["model"]): ln for ln in doc["summary"]["cost"]["lines"]}
    assert lines[("agent", "gemini-2.5-pro")]["usd"] == pytest.approx((1000 * 1.25 + 100 * 10.0) / 1e6)
    assert lines[("agent", "gemini-2.5-flash-lite")]["usd"] == pytest.approx((400 * 0.10 + 100 * 0.40) / 1e6)
    agent = doc["scenario_results"][0]["cost"]["roles"]["agent"]
    assert agent["model"] is None and set(agent["models"]) == {"gemini-2.5-pro", "gemini-2.5-flash-lite"}
    assert doc["summary"]["cost"]["complete"] is True


def test_an_acp_agent_prices_its_quota_tokens_with_the_model_it_was_started_with(tmp_path: Path) -> None:
    import sys
    import uuid

    from fabtest.agents.acp import AcpAgent
    from fabtest.conversation import Message

    echo = Path(__file__).parent.parent / "acp" / "echo_agent.py"
    agent = AcpAgent([sys.executable, str(echo)], cwd=tmp_path, env={"FABTEST_ACP_MARKER": uuid.uuid4().hex},
                     model="gemini-2.5-flash")
    with agent.around():
        reply = agent.chat([Message("user", "hello there")])
    assert reply.metadata["model"] == "gemini-2.5-flash" and reply.metadata["usage"]["input_tokens"] == 2
    conv = Conversation()
    conv.turns.append(Turn(number=1, user="hello there", response=reply))
    assert usage_records(conv)["agent"] == UsageRecord(calls=1, input_tokens=2, output_tokens=2, model="gemini-2.5-flash")


@pytest.mark.parametrize("bad", ["x", {"lines": "x"}, {"lines": [{"role": "agent"}]}, {"lines": [5]},
                                 {"lines": [{"role": "a", "calls": 1, "input_tokens": 1, "output_tokens": 1, "usd": "1"}]}])
def test_a_hand_edited_cost_block_falls_back_to_the_tokens_table(bad) -> None:
    from fabtest.report.html import render_experiment_html

    doc = build_document(make_info(), [make_result("Greeting")])
    doc["summary"]["cost"] = bad
    text = render_summary(doc)
    assert "LLM Usage" in text and "Cost (USD)" not in text
    assert "LLM usage" in render_experiment_html(doc)


def test_a_bad_price_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject='[tool.fabtest.prices]\n"my-model" = { input = "cheap", output = 1 }\n')
    pytester.makefile(".feature", x='Feature: X\n  Scenario: Y\n    When the user says "hi"\n')
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*pyproject.toml*prices.my-model.input*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
