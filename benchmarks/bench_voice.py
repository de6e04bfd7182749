"""Voice benchmark: does speech work for other conversations delay a fast voice agent's first audio?

    python benchmarks/bench_voice.py [--conversations 8] [--turns 3] [--latency 0.3] [--tts piper]

A throwaway project holds voice scenarios (issue 41, docs/how-to/voice.md) of ``--turns`` spoken
turns each. The agent is fast and steady: it waits ``--latency`` seconds (``asyncio.sleep``, a
model's time to first token) and then streams the user's own audio back in 100 ms chunks, so the
recogniser has speech to hear. Real speech on both sides: Piper speaks every user turn and
PocketSphinx hears every reply, one voice and one recogniser per process, on the scenarios' threads.

The same scenarios run twice with ``--fabtest-concurrency``: one conversation alone, then
``--conversations`` at once. The table shows the time to first audio each turn recorded (the
experiment's ``voice.time_to_first_audio_ms``) against the agent's real value (``--latency``):
the target is at most 20 % above it with 8 conversations at once on 2 cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
from _common import clean_env, run_pytest, write  # noqa: E402

AGENT = '''
import asyncio

import fabtest

LATENCY = {latency}


class Fast:
    """Answers after LATENCY seconds with the caller's own audio, in 100 ms chunks."""

    async def respond(self, audio):
        await asyncio.sleep(LATENCY)
        step = audio.sample_rate // 10 * 2
        for start in range(0, len(audio.pcm), step):
            yield fabtest.Audio(audio.pcm[start:start + step], audio.sample_rate)


def build(context):
    return Fast()
'''

PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "voiceagent:build"
results_dir = "results"
voice = true
concurrency = {concurrency}

[tool.fabtest.speech]
tts = "{tts}"
'''

LINES = ["book a table for two tonight", "what time do you open", "do you have a vegan menu",
         "can i bring my dog", "thank you goodbye"]


def feature(conversations: int, turns: int) -> str:
    scenarios = []
    for n in range(conversations):
        says = "\n".join(f'    When the user says "{LINES[(n + t) % len(LINES)]}"' for t in range(turns))
        scenarios.append(f"  Scenario: caller {n + 1}\n{says}\n")
    return "Feature: Voice load\n" + "\n".join(scenarios)


def run(root: Path, conversations: int, concurrency: int, args: argparse.Namespace) -> dict[str, float | int]:
    write(root, "pyproject.toml", PYPROJECT.format(concurrency=concurrency, tts=args.tts))
    write(root, "voiceagent.py", AGENT.format(latency=args.latency))
    write(root, "features/load.feature", feature(conversations, args.turns))
    wall, proc = run_pytest(root, ["features", "--fabtest-experiment-id", "exp_bench", "-p", "no:randomly"],
                            clean_env())
    path = root / "results" / "exp_bench.json"
    if not path.is_file():
        raise SystemExit(f"the voice run wrote no experiment:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    doc = json.loads(path.read_text())
    firsts = [t["voice"]["time_to_first_audio_ms"] for s in doc["scenario_results"] for t in s["transcript"]
              if t.get("voice") and t["voice"].get("time_to_first_audio_ms") is not None]
    if not firsts:
        raise SystemExit(f"no voice turn recorded a first audio:\n{proc.stdout[-2000:]}")
    return {"conversations": conversations, "turns": len(firsts), "passed": doc["summary"]["passed"],
            "median_ms": statistics.median(firsts), "p95_ms": sorted(firsts)[max(0, -(-len(firsts) * 95 // 100) - 1)],
            "max_ms": max(firsts), "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.3, help="the agent's own time to first audio, seconds")
    parser.add_argument("--tts", default="piper", choices=["piper", "espeak"])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 2 conversations of 1 turn at once (not alone), eSpeak NG")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.turns, args.tts = 2, 1, "espeak"
    if importlib.util.find_spec("pocketsphinx") is None or importlib.util.find_spec("piper") is None:
        print("bench_voice: needs pytest-fabtest[voice] (pip install 'pytest-fabtest[voice]'); nothing measured")
        return
    real = args.latency * 1000
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(args.conversations, args.conversations)] if args.quick else [(1, 1), (args.conversations,) * 2]
        for conversations, concurrency in runs:
            root = Path(tmp) / f"c{conversations}"
            root.mkdir()
            r = run(root, conversations, concurrency, args)
            rows.append([r["conversations"], r["turns"], r["passed"], f"{r['median_ms']:.0f}", f"{r['p95_ms']:.0f}",
                         f"{r['max_ms']:.0f}", f"{(r['median_ms'] / real - 1) * 100:+.1f} %",
                         f"{(r['p95_ms'] / real - 1) * 100:+.1f} %", f"{r['wall_s']:.1f}"])
    print(f"time to first audio of an agent whose real value is {real:.0f} ms; {args.turns} turns a conversation, "
          f"{args.tts} + pocketsphinx, {os.cpu_count()} CPUs")
    print(tabulate(rows, headers=["at once", "turns", "passed", "median ms", "p95 ms", "max ms",
                                  "median vs real", "p95 vs real", "wall s"]))


if __name__ == "__main__":
    main()
