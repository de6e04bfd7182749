"""fabtest score on production logs: parsing memory against file size, and judging at judge concurrency.

1. Parsing: an OTLP/JSON export (JSON Lines, one line per turn of one conversation, the
   conversations interleaved as a collector writes them, every chat span carrying the whole
   history) of ~10 MB and ~100 MB (``--quick``: ~2 and ~10 MB) is read by ``read_logs`` in a fresh
   process; the table gives each file's size, conversations, time and peak RSS. Flat memory means
   the RSS of the large file is close to the small one's (the ratio of RSS growth to size growth).
2. Scoring: N logged conversations (3 turns, one soft criterion per turn plus one conversation
   criterion: 4 judge calls each, 1 batch per turn) judged by ``fabtest score`` against FakeGemini
   answering after LATENCY seconds, with ``max_concurrency`` C; the ideal is C calls in flight, so
   conversations/s near C / (4 x LATENCY). Nothing reaches the internet.

    python benchmarks/bench_production_logs.py          # ~3 min
    python benchmarks/bench_production_logs.py --quick  # ~30 s
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

_PARSE = ("import resource, sys, time\n"
          "from fabtest.production.logs import read_logs\n"
          "t = time.perf_counter()\n"
          "n = sum(1 for _ in read_logs([sys.argv[1]]))\n"
          "print(n, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n")


def _kv(key: str, value: object) -> dict:
    return {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": str(value)}}


def _text(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def write_export(path: Path, megabytes: float, *, turns: int = 6, open_at_once: int = 50) -> None:
    """An OTLP JSON Lines export of about ``megabytes``, ``open_at_once`` conversations interleaved."""
    filler = "The Spree Loft has 12 seats, a projector and a view over the river. " * 8
    target, written, conv = megabytes * 1e6, 0, 0
    with path.open("w") as out:
        while written < target:
            batch = list(range(conv, conv + open_at_once))
            conv += open_at_once
            for turn in range(turns):
                for c in batch:
                    history = []
                    for t in range(turn + 1):
                        history.append(_text("user", f"turn {t}: {filler}"))
                        if t < turn:
                            history.append(_text("assistant", filler))
                    span = {"traceId": f"{c:032x}", "spanId": f"{turn:016x}", "name": "chat m",
                            "startTimeUnixNano": str(1_767_250_800_000_000_000 + (c * 100 + turn) * 10**9),
                            "endTimeUnixNano": str(1_767_250_800_500_000_000 + (c * 100 + turn) * 10**9),
                            "attributes": [_kv("gen_ai.operation.name", "chat"),
                                           _kv("gen_ai.conversation.id", f"c{c}"),
                                           _kv("gen_ai.input.messages", json.dumps(history)),
                                           _kv("gen_ai.output.messages", json.dumps([_text("assistant", filler)])),
                                           _kv("gen_ai.usage.input_tokens", 100),
                                           _kv("gen_ai.usage.output_tokens", 20)]}
                    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n"
                    out.write(line)
                    written += len(line)


def parse_row(path: Path) -> list[object]:
    out = subprocess.run([sys.executable, "-c", _PARSE, str(path)], capture_output=True, text=True, check=True)
    n, seconds, rss = out.stdout.split()
    size = path.stat().st_size / 1e6
    return [f"{size:.0f} MB", int(n), f"{float(seconds):.1f} s", f"{float(size) / float(seconds):.1f} MB/s",
            f"{float(rss):.0f} MiB"]


def score_row(work: Path, conversations: int, latency: float, concurrency: int) -> list[object]:
    from fabtest.demo.offline_llm import offline_gemini

    logs = work / "chats.jsonl"
    with logs.open("w") as out:
        for c in range(conversations):
            messages = []
            for t in range(3):
                messages += [{"role": "user", "content": f"conversation {c} turn {t}"},
                             {"role": "assistant", "content": "Noted, thank you."}]
            out.write(json.dumps({"id": f"c{c}", "messages": messages}) + "\n")
    (work / "live.feature").write_text('@production\nFeature: Live\n  Scenario: Judged\n'
                                       '    Then every response should satisfy "polite"\n'
                                       '    And the conversation should satisfy "helpful"\n')
    (work / "pyproject.toml").write_text(f"[tool.fabtest]\nmax_concurrency = {concurrency}\n")
    with offline_gemini() as server:  # answers every criterion batch as the judge would
        server.latency = latency
        env = {**os.environ, **server.env(), "FABTEST_RESULTS_DIR": str(work / f"results-{concurrency}")}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "fabtest.cli", "score", str(logs), str(work / "live.feature"),
                               "--format", "json"], cwd=work, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        calls, peak = server.request_count, server.max_in_flight
    if done.returncode != 0 or json.loads(done.stdout)["conversations_scored"] != conversations:
        raise SystemExit(f"fabtest score did not judge every conversation:\n{done.stdout}\n{done.stderr}")
    ideal = concurrency / latency
    return [conversations, concurrency, f"{latency:.2f} s", calls, peak, f"{wall:.1f} s",
            f"{calls / wall:.1f}", f"{ideal:.1f}", f"{calls / wall / ideal:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-prod-") as tmp:
        work = Path(tmp)
        rows = []
        for mb in ((2, 10) if args.quick else (10, 100)):
            path = work / f"export-{mb}.jsonl"
            write_export(path, mb)
            rows.append(parse_row(path))
            path.unlink()
        print(tabulate(rows, headers=["export", "conversations", "parse", "speed", "peak RSS"]))
        rss = [float(str(r[4]).split()[0]) for r in rows]
        size = [float(str(r[0]).split()[0]) for r in rows]
        print(f"\nRSS growth / size growth: {(rss[1] - rss[0]) / (size[1] - size[0]):.3f} MiB per MB "
              f"(flat: near 0; whole-file parsing: above 1)\n")
        scored = [score_row(work, 40 if args.quick else 200, 0.2, c) for c in ((4, 16) if args.quick else (8, 32))]
        print(tabulate(scored, headers=["conversations", "max_concurrency", "judge latency", "judge calls",
                                        "max in flight", "wall", "calls/s", "ideal calls/s", "ratio"]))


if __name__ == "__main__":
    main()
