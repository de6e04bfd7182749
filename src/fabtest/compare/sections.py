"""The one order of a comparison's sections, shared by the console, Markdown, HTML and ``fabtest view``.

What changed comes first on every surface: the verdict, then what moved (scenario by scenario,
``compare.moved``), then the scenarios that changed, then the gate, and only then the tables a
reviewer consults. Each renderer builds its sections by name and lays them out with :func:`ordered`,
so no surface can drift into an order of its own (tests/compare/test_compare_sections.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

__all__ = ["SECTIONS", "ordered"]

#: every section a comparison can show, in the order every surface shows them (a surface leaves out
#: what it does not have: the console's gate goes to stderr, the Markdown has no conversation pages)
SECTIONS: tuple[str, ...] = (
    "verdict",        # the one line (worse / not worse / undecided, and why; on the console and in Markdown the
                      # command writes it first), then which experiments
    "moved",          # "Checkout: 2/10 runs fail 'add_to_cart' now (was 0/10)"
    "changes",        # newly failing, quality regressed, newly passing, improved, changed
    "gate",           # each gated metric: counts, test, decision
    "runs",           # every scenario's runs on both sides (fabtest view)
    "comparability",  # topic graph, criteria, scenarios, judge, simulator
    "metrics",        # completion, turns, topics, evaluation
    "criteria",       # per criterion, soft then hard
    "checks",         # deterministic checks
    "apart",          # added and removed scenarios, and each whole experiment
    "variance",       # per-iteration spread
    "diffs",          # the conversations side by side
    "cost",
    "coverage",
)

T = TypeVar("T")


def ordered(parts: Mapping[str, Sequence[T]]) -> list[T]:
    """The parts of a surface joined in :data:`SECTIONS` order; a name outside it is a bug."""
    unknown = set(parts) - set(SECTIONS)
    if unknown:
        raise ValueError(f"comparison sections not in SECTIONS: {sorted(unknown)}")
    return [item for name in SECTIONS for item in parts.get(name, ())]
