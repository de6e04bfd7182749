"""Every exception fabtest raises on purpose is in the one tree of ``fabtest.errors``.

The seven that lived apart (issue 26) keep their old import paths and their builtin base, so
``except ValueError`` around a topic table still works, and ``except FabtestError`` now sees them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fabtest.errors as errors
from fabtest.engine.topics import TopicGraph, TopicGraphError, TriggerError
from fabtest.experiment.coverage import CoverageFloorError, parse_floor
from fabtest.experiment.reader import ExperimentFileError
from fabtest.experiment.merge import MergeError
from fabtest.experiment.recorder import JournalError
from fabtest.llm.limits import TransientFailure

SRC = Path(errors.__file__).parent


@pytest.mark.parametrize(("cls", "builtin"), [
    (TopicGraphError, ValueError), (TriggerError, ValueError), (CoverageFloorError, ValueError),
    (ExperimentFileError, Exception), (MergeError, Exception), (JournalError, Exception),
    (TransientFailure, Exception),
])
def test_the_former_strays_are_fabtest_errors_defined_in_errors_py(cls: type, builtin: type) -> None:
    assert issubclass(cls, errors.FabtestError) and issubclass(cls, builtin)
    assert cls.__module__ == "fabtest.errors" and getattr(errors, cls.__name__) is cls
    assert errors.failure_type_of(cls("x")) == "error"


def test_a_bad_value_raises_one_of_them() -> None:
    with pytest.raises(errors.FabtestError, match="KIND=RATE"):
        parse_floor("topics")
    with pytest.raises(errors.FabtestError):
        TopicGraph.from_table([{"topic": "a", "next": "nowhere"}], where="test")


def test_no_public_exception_class_outside_the_tree() -> None:
    """A new ``class XError(Exception)`` anywhere in src/ fails here: derive it from FabtestError."""
    strays = []
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # exceptions are module-level classes
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if bases & {"Exception", "ValueError", "RuntimeError", "KeyError", "TypeError", "OSError"} \
                        and node.name != "FabtestError" and not bases & {"FabtestError"}:
                    strays.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    assert strays == []
