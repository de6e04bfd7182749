"""Stable example ids that survive file moves, line changes and reordering (docs/explanation/experiments.md).

Position-based ids (``features/x.feature::line``) change whenever a file is edited, which would
break cross-experiment comparison. The id is therefore derived only from the logical name of the
scenario: ``Feature::Rule::Scenario`` plus, for scenario-set records, ``@scenario_<hash>``.
"""

from __future__ import annotations

import hashlib

__all__ = ["canonical_path", "record_suffix", "stable_id"]

_HASH_LEN = 12


def _sha12(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_LEN]


def record_suffix(record_id: str) -> str:
    """``@scenario_<12 hex>`` for one scenario-set record, from its record id alone."""
    return f"@scenario_{_sha12(str(record_id))}"


def canonical_path(feature: str, rule: str | None, scenario: str, record_id: str | None = None) -> str:
    """``Feature::Rule::Scenario`` (rule left out when None) with the record suffix when given.

    Names are stripped so that indentation or trailing blanks in a ``.feature`` file do not
    change the id.
    """
    parts = [feature.strip()]
    if rule is not None and rule.strip():
        parts.append(rule.strip())
    parts.append(scenario.strip())
    # "::" inside a name is escaped so Feature "A::B" + Scenario "C" differs from A / rule B / C;
    # names without "::" keep the ids they always had.
    path = "::".join(part.replace("::", ":\\:") for part in parts)
    if record_id is not None:
        path += record_suffix(record_id)
    return path


def stable_id(feature: str, rule: str | None, scenario: str, record_id: str | None = None) -> str:
    """``example:<12 hex>``: sha256 of the canonical path, independent of file path and order."""
    return f"example:{_sha12(canonical_path(feature, rule, scenario, record_id))}"
