"""The judge and simulator LLMs of a command that asks them outside a test run (rejudge, calibrate,
replay, mutate, generate, import), built from ./pyproject.toml as a test run builds them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fabtest.llm.base import LLM

if TYPE_CHECKING:
    from fabtest.config.settings import Settings

__all__ = ["configured_llm", "judge_llm"]


def judge_llm(judge_model: str | None) -> LLM:
    """The judge LLM as ./pyproject.toml configures it (``judge_model`` overrides the model)."""
    from fabtest.config.settings import Settings

    return configured_llm(Settings.load(Path.cwd()), Path.cwd(), "judge", judge_model)


def configured_llm(settings: Settings, root: Path, role: Literal["judge", "simulator"],
                   model: str | None = None) -> LLM:
    """The judge or simulator LLM as ``settings`` configure it (``model`` overrides the model);
    raises LLMNotConfigured without credentials."""
    from fabtest.engine import llms

    # `offline_llm = "tests.fakes:judge"` names a module of the project: importable from the project
    # root, as under pytest and `fabtest run`, without PYTHONPATH=.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return llms.configured_llm(settings, root, role, model=model)
