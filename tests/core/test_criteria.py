"""Criteria: declared vs ad-hoc, examples from tables and docstrings, inheritance."""

from __future__ import annotations

import pytest

from fabtest.config.criteria import (
    Criterion,
    criterion_from_text,
    merge,
    parse_criterion_text,
    parse_examples_table,
    resolve,
)


def test_resolve_declared_and_ad_hoc() -> None:
    friendly = Criterion("friendly", "The agent is warm and polite")
    assert resolve("friendly", {"friendly": friendly}) is friendly
    ad_hoc = resolve("The agent never asks twice", {"friendly": friendly})
    assert ad_hoc.name == ad_hoc.description == "The agent never asks twice"
    assert ad_hoc.ad_hoc and not friendly.ad_hoc


def test_examples_table_with_and_without_header() -> None:
    rows = [["example", "verdict"], ["Hi! Happy to help.", "good"], ["What do you want", "Bad"]]
    assert parse_examples_table(rows) == (["Hi! Happy to help."], ["What do you want"])
    assert parse_examples_table(rows[1:]) == (["Hi! Happy to help."], ["What do you want"])


def test_examples_table_rejects_unknown_verdict() -> None:
    with pytest.raises(ValueError, match="verdict must be 'good' or 'bad'"):
        parse_examples_table([["example", "verdict"], ["Hello", "maybe"]])


def test_docstring_form() -> None:
    text = """
    The agent is warm
    and polite.
    Good: "Hi there, happy to help!"
    bad: What.
    """
    assert parse_criterion_text(text) == ("The agent is warm and polite.", ["Hi there, happy to help!"], ["What."])
    criterion = criterion_from_text("friendly", text)
    assert criterion.good_examples == ["Hi there, happy to help!"]
    assert criterion.to_fingerprint()["bad_examples"] == ["What."]


def test_merge_accumulates_and_redefines() -> None:
    parent = {"a": Criterion("a", "A"), "b": Criterion("b", "B")}
    child = {"b": Criterion("b", "B2"), "c": Criterion("c", "C")}
    merged = merge(parent, child)
    assert list(merged) == ["a", "b", "c"]
    assert merged["b"].description == "B2"
    assert parent["b"].description == "B"


def test_criterion_needs_description() -> None:
    with pytest.raises(ValueError):
        Criterion("x", "  ")
