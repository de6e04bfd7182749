"""The judge and simulator a playbook needs: which roles, the simulated user's settings, and its
``evaluator_model`` when it names one."""

from __future__ import annotations

import dataclasses
from typing import Any

from fabtest.engine.simulator import SimulatorConfig
from fabtest.llm.base import LLM
from fabtest.playbook.load import Playbook

__all__ = ["needed_llms", "simulator_config", "with_model"]

GOAL_TEMPLATE = "Get the agent to do what you came for, as described under WHO YOU ARE."


def needed_llms(playbook: Playbook) -> list[tuple[str, str]]:
    """``(role, why)`` for every LLM role the playbook cannot run without."""
    needs: list[tuple[str, str]] = []
    if playbook.steps or (playbook.persona and playbook.persona.success_criteria.llm_checks):
        needs.append(("judge", "judging the steps" if playbook.steps else "the llm_checks"))
    if playbook.persona is not None:
        needs.append(("simulator", "the simulated user (persona)"))
    return needs


def with_model(llm: LLM | None, model: str | None, built: list[Any]) -> LLM | None:
    """``llm`` talking to ``model`` instead (same provider settings, cache and retries); every LLM
    built here is appended to ``built`` so the run closes it."""
    if llm is None or not model or getattr(llm, "model", None) == model:
        return llm
    from fabtest.llm.cache import CachedLLM

    if isinstance(llm, CachedLLM):
        inner = with_model(llm.inner, model, built)
        if inner is llm.inner or inner is None:
            return llm
        return CachedLLM(inner, cache_dir=llm.cache_dir, mode=llm.mode, salt=llm.salt)
    settings = getattr(llm, "settings", None)
    from fabtest.llm.base import LLMSettings
    from fabtest.llm.factory import build_llm

    if not isinstance(settings, LLMSettings):
        return llm  # a custom LLM object: it knows its own model

    options: dict[str, Any] = {}
    policy = getattr(llm, "_policy", None)
    if policy is not None:
        options = {"backoff_base_s": policy.backoff_base_s, "backoff_max_s": policy.backoff_max_s}
    new = build_llm(dataclasses.replace(settings, model=model), **options)
    built.append(new)
    return new


def simulator_config(playbook: Playbook) -> SimulatorConfig:
    """The simulated user of a persona: a goal built from the playbook, ``context`` as its persona."""
    persona = playbook.persona
    assert persona is not None
    goal = GOAL_TEMPLATE
    if persona.initial_user_input:
        goal += f' Your first message was: "{persona.initial_user_input}".'
    if persona.success_criteria.llm_checks:
        goal += " You are done when: " + "; ".join(persona.success_criteria.llm_checks) + "."
    return SimulatorConfig(goal=goal, persona=persona.context, max_turns=persona.max_turns)
