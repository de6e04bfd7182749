"""What the judge reads: judge input tokens and judge calls per agent turn, on the benchmarks' scenarios.

    python benchmarks/bench_judge_tokens.py [--scenarios 5]
    PYTHONPATH=/path/to/another/checkout/src python benchmarks/bench_judge_tokens.py   # its figure, for a before/after

Issue 27 made the judge see more of each turn (every tool call with its arguments and result, the
two turns before a response criterion's turn, each message quoted, the agent's purpose) and must
keep the prompts lean: at most 1.5x the judge input tokens per turn of before, and 1.00 judge call
per agent turn where every criterion is soft. Three projects, every LLM call answered at once by
FakeGemini (the figures count what is sent, not how long it takes):

* **suite**: bench_suite.py's scenario: 6 simulated turns, 3 ``every response should satisfy``
  criteria, a topic graph decided by triggers; the agent calls ``finish`` (no result) on turn 6.
* **soft**: bench_soft.py's scenario: 3 turns, 2 soft criteria per turn.
* **tools**: the suite's scenario with an agent that calls a search tool on every turn (a result of
  about 500 characters), plus a conversation criterion and the goal check.

Tokens are counted two ways over every request whose system prompt is the judge's (criteria,
goal, intent, grounding, topic): characters / 4 (close to a real tokenizer on English and JSON),
and FakeGemini's own count (words; what the experiment records as the judge's input tokens).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
import bench_soft  # noqa: E402
import bench_suite  # noqa: E402
from _common import SIM_PYPROJECT, clean_env, finishing_agent, kind_of, run_pytest, write  # noqa: E402

import fabtest  # noqa: E402
from fabtest.testing import FakeGemini  # noqa: E402
from fabtest.testing.fake_gemini import FakeRequest, count_tokens  # noqa: E402

TOOLS_AGENT = '''
from fabtest import AgentResponse, ToolCall

VENUES = [{"id": f"ber-{i}", "name": f"Venue {i}", "city": "Berlin", "capacity": 10 + i, "price_per_day": 300 + 10 * i}
          for i in range(5)]


def build(context):
    def chat(messages):
        n = sum(1 for m in messages if m.role == "user")
        calls = [ToolCall("search_venues", {"city": "Berlin", "people": 10}, VENUES)]
        if n >= 6:
            calls.append(ToolCall("finish", {"turn": n}, {"ok": True}))
        return AgentResponse(text=f"Step {n}: I found {len(VENUES)} venues in Berlin. Which one would you like?",
                             tool_calls=calls)
    return chat
'''

TOOLS_FEATURE = bench_suite.FEATURE.replace(
    '    And every response should satisfy "on_topic"\n',
    '    And every response should satisfy "on_topic"\n'
    '    And the conversation should satisfy "The agent never repeats a question"\n'
    '    And the goal should be achieved\n')


def _judge(request: FakeRequest) -> bool:
    return "evaluator" in request.system or "classify which topic" in request.system


def handler(request: FakeRequest) -> Any:
    """The benchmarks' user and judge (every criterion passes, every goal is met), answered at once."""
    kind = kind_of(request)
    if kind == "simulator":
        said = request.prompt.count("You: ")
        return {"message": f"Message {said + 1} of my request.", "goal_complete": False}
    if kind == "criteria":
        return bench_suite.all_criteria_pass(request)
    return {"reasoning": "fine", "verdict": "passed"}


def measure(name: str, fake: FakeGemini, root: Path) -> list[Any]:
    fake.reset()
    _, proc = run_pytest(root, ["features", "--fabtest-experiment-id", "exp_tokens"], clean_env(fake.env()))
    if proc.returncode != 0:
        raise SystemExit(f"{name}: pytest failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    doc = json.loads((root / "results" / "exp_tokens.json").read_text())
    turns = sum(r["turns"] for r in doc["scenario_results"])
    judge = [r for r in fake.requests if _judge(r)]
    chars = sum(len(r.system) + len(r.prompt) for r in judge)
    words = sum(count_tokens(r.text) for r in judge)
    return [name, len(doc["scenario_results"]), turns, len(judge), f"{len(judge) / turns:.2f}",
            f"{chars / 4 / turns:.0f}", f"{words / turns:.0f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.scenarios = 1
    rows = []
    with FakeGemini(handler=handler) as fake:
        with tempfile.TemporaryDirectory(prefix="fabtest-bench-") as tmp:
            root = Path(tmp)
            bench_suite.make_project(root, args.scenarios)
            rows.append(measure("suite (6 turns, 3 soft/turn)", fake, root))
        with tempfile.TemporaryDirectory(prefix="fabtest-bench-") as tmp:
            root = Path(tmp)
            write(root, "pyproject.toml", bench_soft.PYPROJECT)
            write(root, "softagent.py", finishing_agent(bench_soft.TURNS))
            write(root, "features/soft.feature", bench_soft.FEATURE)
            rows.append(measure("soft (3 turns, 2 soft/turn)", fake, root))
        with tempfile.TemporaryDirectory(prefix="fabtest-bench-") as tmp:
            root = Path(tmp)
            bench_suite.make_project(root, args.scenarios)
            write(root, "pyproject.toml", SIM_PYPROJECT)
            write(root, "benchagent.py", TOOLS_AGENT)
            write(root, "features/bench.feature", TOOLS_FEATURE)
            rows.append(measure("tools (suite + search results, conversation, goal)", fake, root))
    print(f"Judge input per agent turn, fabtest {fabtest.__version__} from {Path(fabtest.__file__).parent}")
    print(tabulate(rows, headers=["project", "scenarios", "agent turns", "judge calls", "judge calls/turn",
                                  "judge tokens/turn (chars/4)", "judge tokens/turn (FakeGemini words)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
