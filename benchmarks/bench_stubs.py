"""What a stubbed tool call costs fabtest: CPU per call, stubbed vs the agent's own call (issue 29).

    python benchmarks/bench_stubs.py [--calls 20000]

Target: a stubbed call adds at most 1 ms of fabtest CPU over the agent's own call. Three paths,
each timed with ``time.process_time`` over many calls inside a scenario's tool session:

* ``@fabtest.tool``: a decorated Python function, stubbed (``returns``) and real (recorded), against
  the bare function;
* ``table stub``: the same with a two-row argument table (``/regex/`` and exact) to match;
* ``LangGraph ToolNode``: one ````invoke`` of a one-node graph (a ToolNode) on a tool call with fabtest's wrapper installed,
  stubbed and real, against a ToolNode without the wrapper.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from tabulate import tabulate

import fabtest
from fabtest.agents import stubs
from fabtest.agents.stubs import ToolStub, ToolStubs
from fabtest.engine.checks import ArgExpectation


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - started) / calls * 1e6


def lookup(phone: str) -> dict[str, str]:
    """The account of a phone number."""
    return {"phone": phone, "plan": "real"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    calls = 200 if args.quick else args.calls
    decorated = fabtest.tool(lookup)
    answer = ToolStubs()
    answer.define(ToolStub("lookup", "bench", result={"plan": "basic"}))
    table = ToolStubs()
    table.define(ToolStub("lookup", "bench", cases=(
        ((ArgExpectation.parse("phone", "/^030/", where="bench"),), {"plan": "unlimited"}),
        ((ArgExpectation.parse("phone", "0176", where="bench"),), {"plan": "basic"}))))
    rows = []
    bare = per_call_us(lambda: lookup("0176"), calls)
    with stubs.session(ToolStubs()) as recorded:
        real = per_call_us(lambda: decorated("0176"), calls)
        recorded.clear()
    with stubs.session(answer) as recorded:
        stubbed = per_call_us(lambda: decorated("0176"), calls)
        recorded.clear()
    with stubs.session(table) as recorded:
        tabled = per_call_us(lambda: decorated("0176"), calls)
    rows += [["@fabtest.tool, real call (recorded)", bare, real, real - bare],
             ["@fabtest.tool, stubbed (returns)", bare, stubbed, stubbed - bare],
             ["@fabtest.tool, table stub (2 rows)", bare, tabled, tabled - bare]]
    try:
        rows += langgraph_rows(max(calls // 20, 200), answer)
    except ImportError:
        rows.append(["LangGraph ToolNode", "not installed", "", ""])
    print(tabulate(rows, headers=["path", "agent's own call (us)", "with fabtest (us)", "added (us)"],
                   floatfmt=".1f"))
    worst = max(r[3] for r in rows if isinstance(r[3], float))
    print(f"\nworst added CPU per call: {worst / 1000:.3f} ms (target: at most 1 ms)")


def langgraph_rows(calls: int, answer: ToolStubs) -> list[list[object]]:
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from fabtest.agents.langgraph import _intercept

    lookup_tool = tool(lookup)

    def graph(intercepted: bool) -> object:
        node = ToolNode([lookup_tool])
        if intercepted:
            _intercept(node)
        builder = StateGraph(MessagesState)
        builder.add_node("tools", node)
        builder.add_edge(START, "tools")
        return builder.compile()

    plain, wrapped = graph(False), graph(True)
    message = {"messages": [AIMessage("", tool_calls=[{"name": "lookup", "args": {"phone": "0176"}, "id": "c1"}])]}
    own = per_call_us(lambda: plain.invoke(message), calls)
    with stubs.session(ToolStubs()):
        real = per_call_us(lambda: wrapped.invoke(message), calls)
    with stubs.session(answer) as recorded:
        stubbed = per_call_us(lambda: wrapped.invoke(message), calls)
        recorded.clear()
    return [["LangGraph ToolNode, real call", own, real, real - own],
            ["LangGraph ToolNode, stubbed", own, stubbed, stubbed - own]]


if __name__ == "__main__":
    main()
