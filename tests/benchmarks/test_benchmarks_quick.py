"""Every benchmark in benchmarks/ runs, in its ``--quick`` mode: benchmarks are product code, and one
that reaches into fabtest (a renamed ``fake_gemini._Handler`` crashed bench_scale.py) must break
here, not the next time someone measures. The quick runs measure nothing worth reading: each is
a smoke test of the benchmark's code path; the numbers are never asserted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
NEEDS = {"bench_acp.py": "gemini"}  # the real Gemini CLI, an npm package CI does not install


@pytest.mark.parametrize("name", sorted(p.name for p in BENCHMARKS.glob("bench_*.py")))
def test_the_benchmark_runs_in_its_quick_mode(name: str, tmp_path: Path) -> None:
    if name in NEEDS and shutil.which(NEEDS[name]) is None:
        pytest.skip(f"{name} needs {NEEDS[name]!r} on PATH")
    keys = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in keys}
    done = subprocess.run([sys.executable, str(BENCHMARKS / name), "--quick"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{name} --quick exited {done.returncode}:\n{output}"
    assert done.stdout.strip(), f"{name} --quick printed no table"
