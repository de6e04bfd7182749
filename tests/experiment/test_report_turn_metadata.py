"""The HTML transcript shows what the agent said about each reply and tool call, and off-graph jumps."""

from __future__ import annotations

from support.experiments import make_doc, make_result

from fabtest.experiment.model import ToolCallRecord, TurnRecord
from fabtest.report.html import render_experiment_html


def test_turn_and_tool_call_metadata_and_off_graph_jumps_are_shown_escaped() -> None:
    result = make_result("Jumps", passed=False, failure_type="assertion")
    result = result.model_copy(update={"transcript": [TurnRecord(
        number=1, user="book it", agent="booked", topic="booking", duration_s=0.25, off_graph=True,
        metadata={"model": "bot-<1>", "request_id": "req-42"},
        tool_calls=[ToolCallRecord(name="book_venue", arguments={"v": 1}, metadata={"latency_ms": 7})])]})
    html = render_experiment_html(make_doc("exp_meta01", [result]))
    assert "model: bot-&lt;1&gt; · request_id: req-42" in html
    assert "latency_ms: 7" in html
    assert "off-graph jump" in html and "agent 0.25s" in html


def test_the_console_summary_counts_off_graph_jumps() -> None:
    from fabtest.report.console import render_summary

    jumped = make_result("Jumps").model_copy(update={"off_graph_transitions": ["greeting -> booking (turn 1)"]})
    assert "Off-graph jumps:   1 in 1 scenario(s)" in render_summary(make_doc("exp_meta02", [jumped, make_result("Ok")]))
    assert "Off-graph" not in render_summary(make_doc("exp_meta03", [make_result("Ok")]))
