"""Every core, automatically: more conversations at once than one process sustains go to -n workers.

One process runs its conversations on one core (the GIL): at 1,000 at once it needs about 37 ms of
CPU per conversation (docs/performance.md), so past a few hundred at once the process, not the LLM,
sets the pace: N conversations at once of T seconds each keep N x c / T of a core busy, full from N
= T / c (about 216 at 2 s per call, T about 8 s; docs/concurrency.md). When the requested
``concurrency`` is at least :data:`PER_PROCESS` and the machine has more than one core, fabtest asks
pytest-xdist for one worker per core (``-n``), or more where a worker would hold more than
:data:`MOST_PER_WORKER` conversations, and gives each worker its share of the conversations at once,
before pytest parses its options. It is exactly ``-n``: the workers share the one LLM-call
limit (``max_concurrency``), the controller writes one experiment, and the header line says so.
Nothing happens when the run names ``-n`` itself (or ``-p no:xdist``), inside a worker, with
``--fabtest-until-decided`` (one process), on one core, or with ``FABTEST_AUTO_WORKERS=0``.

What it does not do: it does not measure what one process sustains (the threshold is fixed, from
that rule at 2 s per call: the workers start before any scenario ran, so nothing is measured yet);
it decides before collection, so it cannot count the scenarios selected; and it does not move
scenarios between workers once they started.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from fabtest.pytest_plugin.options import has_fabtest_table

__all__ = ["MOST_PER_WORKER", "PER_PROCESS", "header", "spread"]

#: conversations at once from which one process is CPU-bound (bench_scale.py at 2 s per call)
PER_PROCESS = 256
#: the most conversations at once one worker is given: past that, more workers than cores. A
#: process's CPU per conversation grows with its threads (they hand the GIL to one another): at
#: 5,000 at once on 2 cores, 2 workers of 2,500 took 13.5x the critical path and 40.6 ms of CPU
#: per conversation, 4 of 1,250 took 8.2x and 31.3 ms (bench_scale.py, one sitting)
MOST_PER_WORKER = 1250
#: the stash key of the header line's words
_WORDS = pytest.StashKey[str]()


def spread(config: pytest.Config, args: list[str]) -> None:
    """Add ``-n <cores> --fabtest-concurrency <share>`` to ``args`` when the run asks for more
    conversations at once than one process sustains (``pytest_load_initial_conftests``)."""
    known = config.known_args_namespace
    if os.environ.get("FABTEST_AUTO_WORKERS", "") == "0" or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # asked not to, or a worker (xdist names it before its options are parsed)
    root = Path(str(config.rootpath))
    if not (getattr(known, "fabtest", False) or has_fabtest_table(root / "pyproject.toml")):
        return  # not a fabtest run
    if not hasattr(known, "numprocesses") or known.numprocesses is not None or getattr(known, "dist", "no") != "no":
        return  # no xdist, or the run says how many workers itself
    if getattr(known, "fabtest_until_decided", None):
        return
    cores = os.cpu_count() or 1
    wanted = _requested(known, root)
    if cores < 2 or wanted < PER_PROCESS:
        return
    workers = max(min(cores, math.ceil(wanted / (PER_PROCESS // 2))), math.ceil(wanted / MOST_PER_WORKER))
    share = math.ceil(wanted / workers)
    args += ["-n", str(workers), "--fabtest-concurrency", str(share)]
    config.stash[_WORDS] = (f"fabtest: {wanted} conversations at once are more than one process sustains "
                            f"(from {PER_PROCESS}): spread over {workers} worker processes of {share} "
                            "(-n, one LLM-call limit, one experiment; FABTEST_AUTO_WORKERS=0 keeps one process)")


def header(config: pytest.Config) -> str | None:
    """The header line's words when the run was spread, else None."""
    return config.stash.get(_WORDS, None)


def _requested(known: Any, root: Path) -> int:
    """The concurrency the run asks for: ``--fabtest-concurrency``, else ``[tool.fabtest]`` (with
    ``FABTEST_CONCURRENCY``); 1 when it cannot tell (a broken file is reported later, as usual)."""
    given = getattr(known, "fabtest_concurrency", None)
    if isinstance(given, int):
        return given
    try:
        from fabtest.config.settings import Settings

        return Settings.load(root).concurrency
    except Exception:  # the real load in pytest_configure reports the problem in one line
        return 1
