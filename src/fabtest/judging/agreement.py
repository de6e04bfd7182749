"""Agreement statistics between two raters: Cohen's kappa and the confusion matrix.

Kappa is a few lines (Cohen 1960): observed agreement corrected for the agreement expected by chance
from each rater's label frequencies. It is written out here rather than pulling in scikit-learn for
one function, and tested against published worked examples (tests/judging/test_calibrate.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["cohen_kappa", "confusion_matrix"]


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two equally long label sequences; None when it is undefined (no items, or
    both raters used one and the same label for everything, so chance agreement is 1)."""
    if len(first) != len(second):
        raise ValueError(f"kappa needs two sequences of one length, got {len(first)} and {len(second)}")
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    count_a, count_b = Counter(first), Counter(second)
    expected = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def confusion_matrix(truth: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> list[list[int]]:
    """``matrix[i][j]``: items labelled ``labels[i]`` by ``truth`` and ``labels[j]`` by ``predicted``."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for a, b in zip(truth, predicted, strict=True):
        matrix[index[a]][index[b]] += 1
    return matrix
