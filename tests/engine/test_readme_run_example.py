"""The README's "Using fabtest without Gherkin" example runs as written (offline, FakeLLM)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_runs(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using fabtest without Gherkin", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "A room in Berlin for 10 people -> Hall 7 in Berlin seats 10 people for 300 EUR a day. Shall I book it?",
        "Yes, book it -> Booked Hall 7, reference B-42.",
    ]
