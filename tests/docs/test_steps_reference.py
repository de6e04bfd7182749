"""docs/reference/steps.md explains each step with an example and what it records (issue 31): the
examples of its "Each step" tables are steps of the built-in vocabulary, and every built-in
assertion has one there, so a new step cannot ship without its row."""

from __future__ import annotations

import re

from test_docs_examples import DOCS, _builtin_steps

PAGE = DOCS / "reference" / "steps.md"
_EXAMPLE = re.compile(r"`((?:Given|When|Then) [^`]+)`")


def _table_examples() -> list[tuple[str, str]]:
    section = PAGE.read_text(encoding="utf-8").split("## Each step: an example and what it records", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Step")]
    found = []
    for row in rows:
        example = row.split(" | ")[1]  # the Example column
        for text in _EXAMPLE.findall(example):
            keyword, _, rest = text.partition(" ")
            found.append((keyword.lower(), rest.replace("\\|", "|")))
    return found


def test_every_example_in_the_tables_is_a_builtin_step() -> None:
    vocabulary = _builtin_steps()
    examples = _table_examples()
    assert len(examples) >= 30
    unknown = [f"{kind} {text}" for kind, text in examples
               if not any(parser.is_matching(text) for parser in vocabulary[kind])]
    assert not unknown, f"examples in {PAGE.name} that no built-in step matches: {unknown}"


def test_every_builtin_assertion_has_a_row_with_an_example() -> None:
    vocabulary = _builtin_steps()
    examples = [text for kind, text in _table_examples() if kind == "then"]
    missing = [getattr(parser, "name", str(parser)) for parser in vocabulary["then"]
               if not any(parser.is_matching(text) for text in examples)]
    assert not missing, f"built-in Then steps without an example in {PAGE.name}'s tables: {missing}"
