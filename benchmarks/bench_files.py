"""Files in the conversation (issue 39): what a 1 MB image costs a run.

Runs scenarios that each send the same 1 MB PNG-named file, over several iterations, through the
engine with a FakeGemini judge that judges every turn, and reports:

- reads: how many times the file was read (FileLoader.reads; the goal: 1 per run);
- hashes: how many sha256 digests of 1 MB were computed (the goal: 1 per run, not per judge call);
- memory: the peak traced memory with 1 iteration and with N (the goal: no growth with N,
  the bytes are one shared object, not a copy per turn).

    python benchmarks/bench_files.py [--iterations 10] [--scenarios 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any
from unittest import mock

from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.conversation import AgentResponse
from fabtest.engine.attachments import FileLoader, FileRef
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.llm.base import LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.testing import FakeGemini

MB = 1_000_000


def _agent(messages: Any) -> AgentResponse:
    return AgentResponse(f"got {len(messages[-1].attachments)} file(s)")


def run(folder: Path, loader: FileLoader, llm: Any, fake: FakeGemini, *, iterations: int, scenarios: int) -> None:
    for _ in range(iterations):
        for _ in range(scenarios):
            state = ScenarioState(settings=Settings(), rootdir=folder, workdir=folder, context={},
                                  llms=LLMRoles(judge=llm), where="bench", default_agent=_agent, files=loader)
            state.user_sends("is this covered?", [FileRef("photo.png")])
            state.user_says("and now?")
            state.satisfy(Criterion("looks", "The agent looked at the photo"), "should", "conversation")
            state.finish()
            fake.reset()  # the fake server (in this process) would otherwise keep every request's 1.3 MB body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--scenarios", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.scenarios = 1, 1
    verdict = {"verdicts": [{"criterion": "looks", "reasoning": "ok", "verdict": "passed"}]}
    judged = [0]

    def answer(request: Any) -> Any:
        judged[0] += any("inlineData" in part for c in request.contents for part in c.get("parts", []))
        return verdict

    with tempfile.TemporaryDirectory() as tmp, FakeGemini(handler=answer) as fake:
        folder = Path(tmp)
        (folder / "photo.png").write_bytes(os.urandom(MB))
        llm = GeminiLLM(LLMSettings(max_retries=0, base_url=fake.base_url), api_key="k")
        real_sha256 = hashlib.sha256
        big_hashes = [0]

        def counting_sha256(data: bytes = b"", **kwargs: Any) -> Any:
            if len(data) >= MB:
                big_hashes[0] += 1
            return real_sha256(data, **kwargs)

        peaks = {}
        for n in (1, args.iterations):
            loader = FileLoader()
            big_hashes[0] = 0
            tracemalloc.start()
            with mock.patch("fabtest.conversation.hashlib.sha256", counting_sha256):
                run(folder, loader, llm, fake, iterations=n, scenarios=args.scenarios)
            peaks[n] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"iterations={n:>3} scenarios={args.scenarios}: reads={loader.reads} sha256(1 MB)={big_hashes[0]} "
                  f"judge calls with the file inline so far={judged[0]} peak traced memory={peaks[n] / MB:.1f} MB")
        print(f"memory ratio {args.iterations} iterations / 1 iteration: {peaks[args.iterations] / peaks[1]:.2f}")


if __name__ == "__main__":
    main()
