"""How big is ``fabtest view --build`` for many experiments? (issue 31: 500 experiments in at most 50 MB)

    python benchmarks/bench_view_size.py [--experiments 500] [--scenarios 10] [--iterations 5] [--turns 4]
                                         [--words 1.0] [--keep DIR]

Writes ``--experiments`` experiments through the real export path (``build_document`` and
``write_document``, as the recorder does), each of ``--scenarios`` scenarios run ``--iterations``
times: ``--turns`` turns (a user message of 12-30 words, a reply of 30-70, times ``--words``, drawn
at random from the words of the docs with their frequency, so no two runs say the same) with a tool
call and its result, a judged criterion per turn with the judge's reasoning, a goal check on the
whole conversation, the simulated user's goal and persona and the feature's steps. Two branches, a
criterion that slips in the last third. Then builds the static site and prints its total size and
the size per kind of file (lists and trends, experiments, conversations, comparisons, the runs
packs, shared assets), with the largest file of each kind.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.model import CheckRecord, ExperimentInfo, ScenarioResult, ToolCallRecord, TurnRecord
from fabtest.experiment.stable_id import stable_id
from fabtest.view.server import build_site

_DOCS = Path(__file__).resolve().parents[1] / "docs"
#: the words of the docs, each as often as the docs use it: the runs' messages are drawn from them
#: (so word frequencies are English-like and no two runs say the same; gzip gets no free ride from
#: identical transcripts, and random word order compresses worse than real replies do)
_WORDS = [w for f in sorted(_DOCS.rglob("*.md")) for w in re.findall(r"[A-Za-z]+", f.read_text())]


#: how long the messages are: 1.0 is the default (replies of 30-70 words), 0.5 half as long
_SCALE = [1.0]


def _text(rng: random.Random, low: int, high: int) -> str:
    words = rng.choices(_WORDS, k=max(1, round(rng.randint(low, high) * _SCALE[0])))
    return " ".join(words).capitalize() + "."


def _result(rng: random.Random, s: int, it: int, slipped: bool, count: int) -> ScenarioResult:
    name = f"Book a room for a team of {s + 2}"
    friendly = "failed" if slipped and (s + it) % 3 == 0 else "passed"
    turns, checks = [], []
    for n in range(1, count + 1):
        call = ToolCallRecord(name="find_rooms", arguments={"people": s + 2, "day": rng.choice(["monday", "tuesday"]),
                                                            "after": f"{rng.randint(8, 17)}:00"},
                              result={"rooms": [{"id": f"R{rng.randint(100, 999)}", "seats": rng.randint(4, 20),
                                                 "projector": rng.random() < 0.5}]})
        turns.append(TurnRecord(number=n, user=_text(rng, 12, 30), agent=_text(rng, 30, 70),
                                tool_calls=[call], duration_s=round(rng.uniform(0.3, 3), 3), topic="booking",
                                metadata={"model": "gemini-2.5-flash",
                                          "usage": {"input_tokens": rng.randint(500, 3000),
                                                    "output_tokens": rng.randint(50, 400)}}))
        status = friendly if n == count else "passed"
        checks.append(CheckRecord(type="satisfy", mode="should", criterion="friendly", status=status,
                                  passed=status == "passed", turn=n, details=_text(rng, 15, 35)))
    goal = CheckRecord(type="goal", mode="must", criterion="goal achieved", status="passed", passed=True,
                       details=_text(rng, 15, 35), data={"goal": "book a room with a projector"})
    return ScenarioResult(
        id=stable_id("Rooms", None, name), name=name, feature="Rooms", feature_file="features/rooms.feature",
        iteration=it, passed=True, turns=count, evaluations=checks, expectations=[goal], transcript=turns,
        duration_s=round(rng.uniform(2, 12), 3), criteria={"friendly": "The agent is warm and polite"},
        topic_path=["booking"],
        simulator={"goal": "book a room with a projector for the team", "persona": "a busy office manager",
                   "facts": {"team size": str(s + 2)}},
        steps=[{"keyword": "Given", "text": "a simulated user with the goal \"book a room with a projector\""},
               {"keyword": "When", "text": "the conversation runs for at most 4 turns"},
               {"keyword": "Then", "text": "every response should satisfy \"friendly\""},
               {"keyword": "And", "text": "the goal must be achieved"}],
    )


def write_experiments(root: Path, experiments: int, scenarios: int, iterations: int, turns: int = 4) -> None:
    for n in range(experiments):
        info = ExperimentInfo(id=f"exp_{n:04d}",
                              timestamp=f"2026-{1 + n // 28 % 12:02d}-{1 + n % 28:02d}T10:{n % 60:02d}:00Z",
                              name=f"prompt v{n}", tags=["nightly"], git_branch="main" if n % 4 else "feature",
                              git_commit=f"{n:08x}", iterations=iterations)
        slipped = n >= experiments * 2 // 3
        rng = random.Random(n)
        results = [_result(rng, s, it, slipped, turns) for s in range(scenarios) for it in range(1, iterations + 1)]
        write_document(build_document(info, results), root)


def _kind(path: str) -> str:
    if path.startswith("assets/"):
        return "shared assets"
    if path.endswith(".js"):
        return "runs packs (conversations, search)"
    if path.startswith("compare/"):
        return "comparisons"
    if path.startswith("exp/"):
        return "conversations" if path.count("/") >= 2 else "experiments"
    return "lists and trends"


def measure(site: Path) -> tuple[int, dict[str, list[int]], dict[str, tuple[int, str]]]:
    """Total bytes, the sizes per kind, and the largest file per kind."""
    sizes: dict[str, list[int]] = defaultdict(list)
    largest: dict[str, tuple[int, str]] = {}
    for f in site.rglob("*"):
        if f.is_file():
            rel, size = f.relative_to(site).as_posix(), f.stat().st_size
            kind = _kind(rel)
            sizes[kind].append(size)
            if size > largest.get(kind, (0, ""))[0]:
                largest[kind] = (size, rel)
    return sum(sum(v) for v in sizes.values()), sizes, largest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experiments", type=int, default=500)
    parser.add_argument("--scenarios", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--words", type=float, default=1.0, help="message length factor (0.5: half as long)")
    parser.add_argument("--keep", type=Path, help="build the site here and keep it (default: a temporary directory)")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    if args.quick:
        args.experiments, args.scenarios, args.iterations, args.turns = 2, 2, 1, 1
    with tempfile.TemporaryDirectory() as tmp:
        results, out = Path(tmp) / "results", args.keep or Path(tmp) / "site"
        if args.keep and out.exists():
            shutil.rmtree(out)
        started = time.perf_counter()
        _SCALE[0] = args.words
        write_experiments(results, args.experiments, args.scenarios, args.iterations, args.turns)
        wrote = time.perf_counter() - started
        started = time.perf_counter()
        files = build_site(results, out)
        built = time.perf_counter() - started
        total, sizes, largest = measure(out)
        data = sum(f.stat().st_size for f in results.glob("*.json"))
        rows = [[kind, len(v), f"{sum(v) / 1e6:.1f}", f"{sum(v) / len(v) / 1e3:.1f}", largest[kind][1]]
                for kind, v in sorted(sizes.items(), key=lambda kv: -sum(kv[1]))]
        print(f"{args.experiments} experiments × {args.scenarios} scenarios × {args.iterations} iterations, "
              f"{args.turns} turns, message length × {args.words} "
              f"({data / 1e6:.1f} MB of experiment JSON, written in {wrote:.0f} s)")
        print(f"static build: {files} files, {total / 1e6:.1f} MB, in {built:.0f} s")
        print(tabulate(rows, headers=["kind", "files", "MB", "KB per file", "largest"]))


if __name__ == "__main__":
    main()
