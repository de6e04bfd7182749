"""Framework overhead per turn: fabtest vs plain pytest-bdd running the same no-op steps.

    python benchmarks/bench_overhead.py [--scenarios 200] [--turns 5]

Three projects with the same features (N scenarios of T turns, each turn a ``When the user
says`` and a ``Then the response should ...`` step):

* ``pytest-bdd``: fabtest disabled (``-p no:fabtest``), the steps are pytest-bdd no-ops;
* ``fabtest (deterministic)``: the real fabtest steps with an instant agent; the Then step is a
  regex check;
* ``fabtest (judge, 0 ms)``: the Then step is a soft criterion judged through the real
  google-genai client by a FakeGemini with zero latency (one judge call per turn).

Each is run twice (1 scenario and N scenarios) so that pytest start-up cancels out:
per turn = (wall(N) - wall(1)) / ((N - 1) * T).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
from _common import all_criteria_pass, clean_env, kind_of, run_pytest, write  # noqa: E402

from fabtest.testing import FakeGemini  # noqa: E402
from fabtest.testing.fake_gemini import FakeRequest  # noqa: E402

AGENT = '''
def build(context):
    def chat(messages):
        return "Hello, happy to help."
    return chat
'''

PLAIN_STEPS = '''
from pytest_bdd import parsers, scenarios, then, when

scenarios("features")


@when(parsers.re(r'the user says "(?P<text>.*)"'))
def _says(text):
    pass


@then(parsers.re(r'the response should (?P<rest>.*)'))
def _then(rest):
    pass
'''


def feature(scenarios: int, turns: int, then_step: str) -> str:
    lines = ["Feature: Overhead", ""]
    for s in range(scenarios):
        lines.append(f"  Scenario: Scenario {s}")
        for t in range(turns):
            lines.append(f'    When the user says "message {t}"')
            lines.append(f"    Then {then_step}")
        lines.append("")
    return "\n".join(lines) + "\n"


PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "ovagent:build"
results_dir = "results"
'''


def make(root: Path, variant: str, scenarios: int, turns: int) -> None:
    write(root, "pyproject.toml", PYPROJECT)
    write(root, "ovagent.py", AGENT)
    then_step = 'the response should satisfy "polite"' if variant == "judge" else 'the response should match "(?i)hello"'
    (root / "features").mkdir(parents=True, exist_ok=True)
    (root / "features" / "overhead.feature").write_text(feature(scenarios, turns, then_step), encoding="utf-8")
    if variant == "plain":
        write(root, "test_plain.py", PLAIN_STEPS)


def handler(request: FakeRequest) -> object:
    return all_criteria_pass(request) if kind_of(request) == "criteria" else "OK"


def measure(variant: str, scenarios: int, turns: int, fake: FakeGemini | None) -> tuple[float, float, float]:
    walls = []
    for n in (1, scenarios):
        with tempfile.TemporaryDirectory(prefix="fabtest-overhead-") as tmp:
            root = Path(tmp)
            make(root, variant, n, turns)
            if variant == "plain":
                args = ["-p", "no:fabtest", "test_plain.py"]
                env = clean_env()
            else:
                args = ["features"]
                env = clean_env(fake.env() if fake is not None else None)
            wall, proc = run_pytest(root, args, env)
            if proc.returncode != 0 or f"{n} passed" not in proc.stdout:
                raise SystemExit(f"{variant}: pytest failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
            walls.append(wall)
    per_turn = (walls[1] - walls[0]) / ((scenarios - 1) * turns)
    return walls[0], walls[1], per_turn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.scenarios, args.turns = 2, 1
    rows = []
    plain = measure("plain", args.scenarios, args.turns, None)
    det = measure("deterministic", args.scenarios, args.turns, None)
    with FakeGemini(handler=handler, latency=0.0) as fake:
        judged = measure("judge", args.scenarios, args.turns, fake)
        judge_calls = sum(1 for r in fake.requests if kind_of(r) == "criteria")
    for label, (w1, wn, per_turn) in (("pytest-bdd, no-op steps", plain), ("fabtest, deterministic check", det),
                                      ("fabtest, soft judge 0 ms", judged)):
        rows.append([label, f"{w1:.2f}", f"{wn:.2f}", f"{per_turn * 1000:.2f}", f"{per_turn / plain[2]:.1f}x",
                     f"{(per_turn - plain[2]) * 1000:.2f}"])
    print(f"Overhead: {args.scenarios} scenarios x {args.turns} turns (When + Then per turn), instant agent; "
          f"judge variant made {judge_calls} judge calls")
    print(tabulate(rows, headers=["variant", "wall 1 scen s", f"wall {args.scenarios} scen s", "ms/turn",
                                  "vs pytest-bdd", "fabtest overhead ms/turn"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
