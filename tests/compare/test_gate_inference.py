"""The statistics of the gate's three outcomes (compare/inference.py) against published values and
brute force."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from fabtest.compare.compute import drop_p_value
from fabtest.compare.inference import adjust, newcombe_lower, stratified_drop, tarone_k, wilson


def test_wilson_matches_the_published_intervals():
    # Newcombe (1998), table I: 81/263 -> 0.2553-0.3662; 15/148 -> 0.0624-0.1605; 0/20 -> 0-0.1611
    for (x, n), (lo, hi) in (((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)), ((0, 20), (0.0, 0.1611))):
        got = wilson(x, n)
        assert got is not None and got[0] == pytest.approx(lo, abs=1e-4) and got[1] == pytest.approx(hi, abs=1e-4)
    assert wilson(0, 0) is None


def test_newcombe_hybrid_score_matches_the_published_example():
    # Newcombe (1998), method 10, example (a): 56/70 - 48/80, 95 % interval 0.0524 to 0.3339; its lower
    # bound is our one-sided bound at alpha 0.025 (current 56/70, baseline 48/80)
    assert newcombe_lower([48, 80], [56, 70], 0.025) == pytest.approx(0.0524, abs=1e-4)
    assert newcombe_lower([0, 0], [1, 1], 0.05) is None


def test_the_stratified_test_is_fisher_for_one_scenario_and_exact_for_several():
    rng = random.Random(5)
    for _ in range(200):
        bn, cn = rng.randint(1, 12), rng.randint(1, 12)
        bp, cp = rng.randint(0, bn), rng.randint(0, cn)
        found = stratified_drop([(bp, bn, cp, cn)])
        if found is not None:
            assert found[0] == pytest.approx(drop_p_value(bp, bn, cp, cn), abs=1e-12) and found[2] == "exact"
    # brute force over every table with the margins of two scenarios
    strata = [(4, 5, 2, 5), (3, 4, 1, 3)]
    observed = sum(s[0] for s in strata)

    def pmf(bn: int, cn: int, m1: int, k: int) -> float:
        return math.comb(bn, k) * math.comb(cn, m1 - k) / math.comb(bn + cn, m1)

    total = 0.0
    ranges = [range(max(0, bp + cp - cn), min(bn, bp + cp) + 1) for bp, bn, cp, cn in strata]
    for ks in itertools.product(*ranges):
        if sum(ks) >= observed:
            total += math.prod(pmf(bn, cn, bp + cp, k) for (bp, bn, cp, cn), k in zip(strata, ks, strict=True))
    found = stratified_drop(strata)
    assert found is not None and found[0] == pytest.approx(total, abs=1e-12)
    assert stratified_drop([(5, 5, 5, 5), (0, 3, 0, 3)]) is None  # no scenario can tell the sides apart


def test_holm_tarone_is_the_textbook_procedure():
    def slow(p_values, p_mins, alpha):
        order = sorted(range(len(p_values)), key=lambda i: p_values[i])
        remaining, out, running = set(order), [1.0] * len(p_values), 0.0
        for i in order:
            k = next((k for k in range(1, len(remaining) + 1)
                      if sum(1 for j in remaining if p_mins[j] < alpha / k) <= k), max(1, len(remaining)))
            running = max(running, min(1.0, k * p_values[i]))
            out[i] = running
            remaining.discard(i)
        return out

    rng = random.Random(9)
    for _ in range(500):
        n = rng.randint(1, 25)
        ps = [rng.choice([rng.random(), rng.random() * 0.01, 1.0]) for _ in range(n)]
        mins = [min(p, rng.choice([0.0, rng.random() * 0.1, rng.random(), 0.5])) for p in ps]
        assert adjust(ps, mins, 0.05) == pytest.approx(slow(ps, mins, 0.05))
    assert tarone_k([0.5, 0.9], 0.05) == 1 and tarone_k([0.0] * 4, 0.05) == 4
