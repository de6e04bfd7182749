"""The gate's per-scenario hypotheses: a regression concentrated in one scenario is seen, not pooled away.

A scenario that falls from 10/10 to 3/10 among steady ones moves pooled completion by a few points;
tested on its own it is a p of 0.0015. So each shared scenario adds to the gate its completion,
each deterministic check and each ``must`` criterion, each a one-sided Fisher's exact test on its
runs (``tables``). Tarone's rule keeps this cheap in power: a hypothesis whose margins cannot reach
the level (a scenario run once, or steady at 100 % on both sides) costs no alpha. Such hypotheses
are not even built (their adjusted p could never fall below alpha), so a comparison of 100,000
single runs adds none.

The per-scenario quality changes the reports list (a scenario's evaluation rate moving by 5 points
or more) are labelled "regressed" or "improved" only when a family of their own finds them: each
scenario's overall evaluation (every soft check of a run), tested one way and then the other, each
direction Holm-Tarone at alpha (``label_changes``). The rest are "changed, not significant".
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


def tables(base: Mapping[str, ScenarioTally], cur: Mapping[str, ScenarioTally], hard: AbstractSet[str],
           quality: bool = False) -> Iterator[Table]:
    """Every per-scenario table of the shared scenarios (both maps have the same ids): the gate's
    (completion, checks, ``must`` criteria), or with ``quality`` the overall evaluation of each."""
    for sid, b in base.items():
        c = cur[sid]
        if not b.runs or not c.runs:
            continue
        name = repr(c.name)
        if quality:
            if b.eval_runs and c.eval_runs:
                yield ("evaluation", f"overall evaluation of scenario {name}", sid, (b.eval_clean, b.eval_runs),
                       (c.eval_clean, c.eval_runs))
            continue
        yield "completion", f"completion of scenario {name}", sid, (b.passes, b.runs), (c.passes, c.runs)
        for kind, wanted in (("checks", None), ("criteria", hard)):
            if kind == "criteria" and not hard:
                continue
            b_runs, c_runs = b.run_counts(kind), c.run_counts(kind)
            for label, pair in b_runs.items():
                other = c_runs.get(label)
                if other is None or (wanted is not None and label not in wanted):
                    continue
                what = "check" if kind == "checks" else "must criterion"
                yield (f"{'check' if kind == 'checks' else 'criterion'}:{label}",
                       f"{what} {label!r} in scenario {name}",
                       sid, (pair[0], pair[1]), (other[0], other[1]))


def reachable(found: tuple[float, float] | None, alpha: float) -> bool:
    """True when a hypothesis could ever be rejected at ``alpha`` (its smallest p is below it)."""
    return found is not None and found[1] < alpha


def label_changes(c: Comparison, alpha: float) -> None:
    """Keeps in ``quality_regressed`` and ``quality_improved`` only the scenarios whose evaluation
    change the quality family finds; every other change moves to ``changed_not_significant``.
    Each change is labelled "regressed", "improved" or "changed, not significant" (idempotent)."""
    changes = [*c.quality_regressed, *c.quality_improved, *c.changed_not_significant]
    worse = _found(c, alpha, down=True) if any((s.current or 0) < (s.baseline or 0) for s in changes) else set()
    better = _found(c, alpha, down=False) if any((s.current or 0) > (s.baseline or 0) for s in changes) else set()
    c.quality_regressed, c.quality_improved, c.changed_not_significant = [], [], []
    for s in changes:
        up = (s.current or 0) > (s.baseline or 0)
        if not up and s.id in worse:
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


def _found(c: Comparison, alpha: float, down: bool) -> set[str]:
    """Ids of the scenarios whose overall evaluation fell (``down``) or rose significantly, Holm-Tarone
    over every scenario's evaluation tested that way."""
    if c.tallies is None:
        return set()
    tested: list[tuple[str, float, float]] = []
    for _, _, sid, b, k in tables(*c.tallies, frozenset(), quality=True):
        found = fisher(b[0], b[1], k[0], k[1]) if down else fisher(k[0], k[1], b[0], b[1])
        if reachable(found, alpha):
            assert found is not None
            tested.append((sid, *found))
    adjusted = adjust([p for _, p, _ in tested], [m for _, _, m in tested], alpha)
    return {sid for (sid, _, _), p in zip(tested, adjusted, strict=True) if p < alpha}
