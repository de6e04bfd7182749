"""Loading the plugin (every pytest run, ``--collect-only`` included) does not load the heavy libraries.

google-genai, httpx, mcp, acp and scipy are imported when a run first needs them; this checks
module loading, not time (no timing assertions).
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("google.genai", "httpx", "mcp", "acp", "scipy", "asyncio")
_PROBE = """
import json, sys
import fabtest, fabtest.experiment, fabtest.llm, fabtest.agents
import fabtest.pytest_plugin.plugin
print(json.dumps(sorted(m for m in sys.argv[1:] if m in sys.modules)))
"""


def test_importing_the_plugin_loads_no_heavy_library() -> None:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *HEAVY], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
