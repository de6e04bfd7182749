"""A package's exports are its imports: ``__all__`` and the lazy names come from one place.

``fabtest.agents``, ``fabtest.experiment`` and ``fabtest.llm`` import their costly names under
``if TYPE_CHECKING:``; ``fabtest._internal.lazy`` reads those imports, so a name added there is
exported and importable on first use without a second list to keep in step.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import fabtest.agents
import fabtest.experiment
import fabtest.llm
from fabtest._internal.lazy import _imports


def test_the_exports_are_the_imports_eager_and_lazy() -> None:
    eager, lazy = _imports(textwrap.dedent("""
        from typing import TYPE_CHECKING
        from fabtest.a import One, two as Two
        from fabtest._internal import lazy as _lazy
        if TYPE_CHECKING:
            from fabtest.b import Three
    """))
    assert eager == ["One", "Two"] and lazy == {"Three": "fabtest.b"}


@pytest.mark.parametrize(("package", "names"), [
    (fabtest.agents, {"Agent", "CallableAgent", "AcpAgent", "HttpAgent"}),
    (fabtest.experiment, {"stable_id", "Recorder", "ScenarioResult", "ExperimentFileError", "build_document"}),
    (fabtest.llm, {"LLM", "LLMError", "GeminiLLM", "OpenAICompatLLM", "salted", "PROVIDERS"}),
])
def test_every_exported_name_resolves(package: object, names: set[str]) -> None:
    exported = package.__all__  # type: ignore[attr-defined]
    assert names <= set(exported) and not [n for n in exported if n.startswith("_")]
    for name in exported:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        package.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_a_lazy_name_is_imported_on_first_use_only() -> None:
    code = ("import sys, fabtest.agents as a; before = 'fabtest.agents.http' in sys.modules; a.HttpAgent; "
            "print(before, 'fabtest.agents.http' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
