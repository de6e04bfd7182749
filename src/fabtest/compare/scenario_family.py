"""The gate's per-scenario hypotheses: a regression concentrated in one scenario is seen, not pooled away.

A scenario that falls from 10/10 to 3/10 among steady ones moves pooled completion by a few points;
tested on its own it is a p of 0.0015. So each shared scenario adds to the gate's one family its
completion, its overall evaluation (every soft check of a run), each deterministic check and each
``must`` criterion, each a one-sided Fisher's exact test on its runs. Tarone's rule keeps this
cheap in power: a hypothesis whose margins cannot reach the level (a scenario run once, or steady
at 100 % on both sides) costs no alpha. Such hypotheses are not even built (their adjusted p could
never fall below alpha), so a comparison of 100,000 single runs adds none.

``tables`` lists (metric, label, scenario id, baseline [passed, runs], current [passed, runs]);
``label_changes`` uses the same family, both ways, to decide which per-scenario changes the
reports may call "regressed" or "improved".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from functools import lru_cache

from fabtest.compare.compute import Comparison, drop_p_value
from fabtest.compare.inference import adjust
from fabtest.compare.read import ScenarioTally

__all__ = ["Table", "fisher", "label_changes", "reachable", "tables"]

#: (metric, label, scenario id, baseline (passed, runs), current (passed, runs))
Table = tuple[str, str, str, tuple[int, int], tuple[int, int]]


@lru_cache(maxsize=65_536)
def fisher(bp: int, bn: int, cp: int, cn: int) -> tuple[float, float] | None:
    """(one-sided Fisher p of a drop, the smallest p these margins allow), cached: most scenarios
    share a handful of tables. None when a side has no runs."""
    p = drop_p_value(bp, bn, cp, cn)
    if p is None:
        return None
    s = bp + cp
    most = min(bn, s)
    least = drop_p_value(most, bn, s - most, cn)
    return p, 1.0 if least is None else least  # not ``or 1.0``: a p that underflows to 0 is no "nothing to test"


def tables(base: Mapping[str, ScenarioTally], cur: Mapping[str, ScenarioTally], hard: AbstractSet[str]) -> Iterator[Table]:
    """Every per-scenario table of the shared scenarios (both maps have the same ids)."""
    for sid, b in base.items():
        c = cur[sid]
        if not b.runs or not c.runs:
            continue
        name = repr(c.name)
        yield "completion", f"completion of scenario {name}", sid, (b.passes, b.runs), (c.passes, c.runs)
        if b.eval_runs and c.eval_runs:
            yield ("evaluation", f"overall evaluation of scenario {name}", sid, (b.eval_clean, b.eval_runs),
                   (c.eval_clean, c.eval_runs))
        for kind, wanted in (("checks", None), ("criteria", hard)):
            if kind == "criteria" and not hard:
                continue
            b_runs, c_runs = b.run_counts(kind), c.run_counts(kind)
            for label, pair in b_runs.items():
                other = c_runs.get(label)
                if other is None or (wanted is not None and label not in wanted):
                    continue
                what = "check" if kind == "checks" else "must criterion"
                yield (f"{'check' if kind == 'checks' else 'criterion'}:{label}", f"{what} {label!r} in scenario {name}",
                       sid, (pair[0], pair[1]), (other[0], other[1]))


def reachable(found: tuple[float, float] | None, alpha: float) -> bool:
    """True when a hypothesis could ever be rejected at ``alpha`` (its smallest p is below it)."""
    return found is not None and found[1] < alpha


def label_changes(c: Comparison, alpha: float, found_worse: AbstractSet[str]) -> None:
    """Keeps in ``quality_regressed`` only the scenarios whose evaluation drop the gate's family
    found (``found_worse``: their ids), and in ``quality_improved`` only those the same family,
    run the other way, finds; every other change moves to ``changed_not_significant``. Each kept
    change is labelled "regressed" or "improved", the others "changed, not significant"."""
    changes = [*c.quality_regressed, *c.quality_improved, *c.changed_not_significant]  # idempotent: relabel all
    better = _improved(c, alpha) if any((s.current or 0) > (s.baseline or 0) for s in changes) else set()
    c.quality_regressed, c.quality_improved, c.changed_not_significant = [], [], []
    for s in changes:
        up = (s.current or 0) > (s.baseline or 0)
        if not up and s.id in found_worse:
            s.label = "regressed"
            c.quality_regressed.append(s)
        elif up and s.id in better:
            s.label = "improved"
            c.quality_improved.append(s)
        else:
            s.label = "changed, not significant"
            c.changed_not_significant.append(s)
    c.quality_improved.sort(key=lambda s: -((s.current or 0) - (s.baseline or 0)))
    c.quality_regressed.sort(key=lambda s: (s.current or 0) - (s.baseline or 0))
    c.changed_not_significant.sort(key=lambda s: (s.name, s.id))


def _improved(c: Comparison, alpha: float) -> set[str]:
    """Ids of the scenarios whose overall evaluation rose significantly, in the family of every
    per-scenario evaluation and completion table tested the other way."""
    if c.tallies is None:
        return set()
    base, cur = c.tallies
    tested: list[tuple[str, float, float]] = []
    for metric, _, sid, b, k in tables(base, cur, frozenset()):
        found = fisher(k[0], k[1], b[0], b[1])  # current above baseline
        if reachable(found, alpha):
            assert found is not None
            tested.append((sid if metric == "evaluation" else "", *found))
    adjusted = adjust([p for _, p, _ in tested], [m for _, _, m in tested], alpha)
    return {sid for (sid, _, _), p in zip(tested, adjusted, strict=True) if sid and p < alpha}
