"""The judge and simulator LLMs as ``[tool.fabtest]`` configures them, for any front end.

Each role gets its provider when one is available (a key, an OpenAI-compatible endpoint, a
``replay`` cache), else ``offline_llm`` (``module:attr`` or a FakeLLM script file), else nothing
with the reason, so a scenario that needs it is skipped naming the variable to set (README
"Running without a key"). An ``offline_llm`` whose script covers ``agent_model`` also plays
built-in agents' models where no key is set (``LLMRoles.agent_model``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

from fabtest.agents.builtin_models import StandInModel
from fabtest.config.settings import Settings
from fabtest.engine.scenario import LLMRoles
from fabtest.llm.base import LLM, LLMNotConfigured
from fabtest.llm.retry_budget import RetryBudget

__all__ = ["configured_llm", "configured_llms", "is_offline_script", "offline_script", "stand_in"]


def configured_llms(settings: Settings, root: Path, *, max_concurrency: int | None = None,
                    retry_budget: RetryBudget | None = None) -> LLMRoles:
    """Both roles, sharing one retry budget; a bad ``offline_llm`` raises :class:`~fabtest.errors.UsageError`."""
    budget = retry_budget if retry_budget is not None else RetryBudget(settings.retry_budget)
    roles = LLMRoles()
    for role in ("judge", "simulator"):
        try:
            llm = configured_llm(settings, root, role, max_concurrency=max_concurrency, retry_budget=budget)
        except LLMNotConfigured as exc:
            setattr(roles, f"{role}_reason", str(exc))
        else:
            setattr(roles, role, llm)
    if settings.offline_llm:  # it may also play built-in agents' models where no key is set
        from fabtest.llm.factory import load_llm_object

        roles.agent_model = stand_in(offline_script(settings, root) if is_offline_script(settings.offline_llm)
                                     else load_llm_object(settings.offline_llm,
                                                          where=f"{settings.source} [tool.fabtest] offline_llm"),
                                     always=False)
    return roles


def stand_in(llm: Any, *, always: bool) -> StandInModel | None:
    """``llm`` as the built-in agents' model when its script covers it (FakeLLM ``agent_model``), else None."""
    return StandInModel(llm, always=always) if getattr(llm, "scripts_agent_model", False) else None


def configured_llm(settings: Settings, root: Path, role: Literal["judge", "simulator"], *, model: str | None = None,
                   max_concurrency: int | None = None, retry_budget: RetryBudget | None = None) -> LLM:
    """One role's LLM (``model`` overrides the configured model); raises
    :class:`~fabtest.llm.base.LLMNotConfigured` without credentials."""
    from fabtest.llm.factory import role_llm  # the providers load on first use (README "Performance")

    configured = settings.judge if role == "judge" else settings.simulator
    if model:
        configured = configured.model_copy(update={"model": model})
    script = is_offline_script(settings.offline_llm)
    try:
        return role_llm(configured.llm_settings(max_concurrency or settings.max_concurrency),
                        offline_llm=None if script else settings.offline_llm, cache_mode=settings.llm_cache,
                        cache_dir=str(root / settings.cache_dir), backoff_base_s=configured.backoff,
                        retry_budget=retry_budget)
    except LLMNotConfigured:
        if not script:
            raise
    return offline_script(settings, root)


def is_offline_script(spec: str | None) -> bool:
    """``offline_llm`` names a FakeLLM script file (``.yaml``/``.yml``/``.json``), not ``module:attr``."""
    return bool(spec) and Path(str(spec)).suffix.lower() in (".yaml", ".yml", ".json")


def offline_script(settings: Settings, root: Path) -> LLM:
    """The FakeLLM of an ``offline_llm`` script file (relative to the project root); a bad script
    raises :class:`~fabtest.errors.UsageError` naming the file and key."""
    from fabtest.testing.scripted import load_fake_llm

    fake = load_fake_llm(str(settings.offline_llm), root=root, where=f"{settings.source} [tool.fabtest] offline_llm")
    fake.note = f"scripted offline stand-in ({settings.offline_llm}), not a real model: set a key for one"
    return cast(LLM, fake)
