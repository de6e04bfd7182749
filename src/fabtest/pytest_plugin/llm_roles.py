"""The run's judge and simulator: built once per process, within this process's share of the limits.

Part of :class:`fabtest.pytest_plugin.session.FabtestSession` (one job each: this module the LLM
roles, ``recording.py`` the experiment, ``summary.py`` what the terminal shows at the end). Under
``pytest -n N`` the workers draw LLM slots from one pool their controller created and split the
retry budget (README "Performance").
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fabtest import tracing
from fabtest.config.settings import Settings
from fabtest.engine.llms import stand_in
from fabtest.engine.scenario import LLMRoles
from fabtest.errors import UsageError

#: workerinput key: the directory of the run's shared LLM slots (fabtest.llm.shared_limit).
LLM_SLOTS_KEY = "fabtest_llm_slots"


class SessionLLMs:
    """The judge and simulator of one pytest process, the fake of ``--fabtest-fake-llm``, the slot
    pool and the retry budget."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self._roles: LLMRoles | None = None
        self._roles_lock = threading.Lock()
        self._fake: Any = None
        self.retry_budget = self._make_retry_budget()
        self._llm_slots: str | None = None  # controller: the slot directory its workers share
        self._share_llm_slots()

    def fake_llm(self) -> Any:
        """The fake of ``--fabtest-fake-llm`` (built once per process), or None."""
        spec = self.config.getoption("--fabtest-fake-llm", None)
        if spec is None:
            return None
        if self._fake is None:
            from fabtest.testing.scripted import FakeLLM, load_fake_llm

            try:
                self._fake = load_fake_llm(spec, root=Path(str(self.config.rootpath))) if spec else FakeLLM()
            except UsageError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._fake

    def check_offline_llm(self) -> None:
        """``[tool.fabtest] offline_llm`` that does not import is a usage error before anything runs."""
        if self.settings.offline_llm:
            from fabtest._internal.targets import import_object
            from fabtest.engine.llms import is_offline_script, offline_script

            try:
                if is_offline_script(self.settings.offline_llm):
                    offline_script(self.settings, Path(str(self.config.rootpath)))
                else:
                    import_object(self.settings.offline_llm, where=f"{self.settings.source} [tool.fabtest] offline_llm",
                                  what="LLM")
            except UsageError as exc:
                raise pytest.UsageError(str(exc)) from None

    def llm_roles(self) -> LLMRoles:
        """Build the judge and simulator once: the ``--fabtest-fake-llm`` fake for both, else each
        role's provider, else ``[tool.fabtest] offline_llm``; a missing key leaves the role empty
        with a reason (precedence: README "Running without a key")."""
        with self._roles_lock:  # scenarios in flight at once (concurrency) ask from their own threads
            return self._llm_roles()

    def _llm_roles(self) -> LLMRoles:
        if self._roles is None:
            from fabtest.engine.llms import configured_llms

            limit = self.concurrency_share()
            fake = self.fake_llm()
            if fake is not None:
                roles = LLMRoles(judge=fake, simulator=fake, agent_model=stand_in(fake, always=True))
            else:
                try:
                    roles = configured_llms(self.settings, Path(str(self.config.rootpath)), max_concurrency=limit,
                                            retry_budget=self.retry_budget)
                except UsageError as exc:
                    raise pytest.UsageError(str(exc)) from None
            if self.config.getoption("--fabtest-interactive", False):
                from fabtest.pytest_plugin.interactive import InteractiveUser

                roles.simulator = InteractiveUser(roles.simulator)  # a person decides each simulated-user turn
                roles.simulator_reason = ""
            roles.judge = tracing.traced(roles.judge, "judge")
            roles.simulator = tracing.traced(roles.simulator, "simulator")
            roles.executor = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="fabtest-judge")
            self._roles = roles
        return self._roles

    def _make_retry_budget(self) -> Any:
        """This process's share of the suite's retry budget (see fabtest.llm.retry_budget)."""
        from fabtest.llm.retry_budget import RETRY_BUDGET_FLOOR, RetryBudget

        workers = int(getattr(self.config, "workerinput", {}).get("workercount", 1) or 1)
        return RetryBudget(self.settings.retry_budget, floor=max(1, RETRY_BUDGET_FLOOR // workers))

    def concurrency_share(self) -> int:
        """Calls this process may have in flight: all of ``max_concurrency`` when the ``-n`` workers
        share one slot pool (fabtest.llm.shared_limit), else 1/N of it, so the whole suite stays
        inside the provider's limit, not N times over."""
        from fabtest.llm.limits import shares_across_processes

        workers = int(getattr(self.config, "workerinput", {}).get("workercount", 1) or 1)
        if shares_across_processes():
            return self.settings.max_concurrency
        return max(1, self.settings.max_concurrency // workers)

    def _share_llm_slots(self) -> None:
        """An xdist worker draws LLM slots from the pool its controller created (README "Performance")."""
        pool = getattr(self.config, "workerinput", {}).get(LLM_SLOTS_KEY)
        if pool:
            from fabtest.llm.limits import share_across_processes

            share_across_processes(pool)

    def llm_calls_in_flight(self) -> int | None:
        """The run's LLM calls in flight now: this process's, or under ``-n`` every worker's (slot
        files); None under ``-n`` where slots are not shared (no ``fcntl``: unknown here)."""
        if self._llm_slots is not None:
            from fabtest.llm.shared_limit import busy_slots

            return busy_slots(self._llm_slots)
        if self.config.pluginmanager.has_plugin("dsession"):
            return None
        from fabtest.llm.limits import calls_in_flight

        return calls_in_flight()

    def configure_node(self, node: Any) -> None:
        """xdist controller: one slot pool for the run, handed to every worker it starts."""
        from fabtest.llm import shared_limit

        if not shared_limit.available():
            return
        if self._llm_slots is None:
            self._llm_slots = str(shared_limit.create_pool_dir())
        node.workerinput[LLM_SLOTS_KEY] = self._llm_slots

    @staticmethod
    def salted(roles: LLMRoles, iteration: int) -> LLMRoles:
        """The iteration is part of the cache key, so repeated runs stay independent."""
        from fabtest.llm.cache import salted

        return LLMRoles(
            judge=salted(roles.judge, f"iteration-{iteration}") if roles.judge else None,
            simulator=salted(roles.simulator, f"iteration-{iteration}") if roles.simulator else None,
            judge_reason=roles.judge_reason, simulator_reason=roles.simulator_reason, executor=roles.executor,
            agent_model=roles.agent_model,
        )

    def role_llm(self, role: str) -> Any:
        """The run's own judge or simulator (the pre-flight probes it: same client, same connection)."""
        return getattr(self.llm_roles(), role)

    def close(self) -> None:
        if self._llm_slots is not None:
            from fabtest.llm.shared_limit import remove_pool_dir

            remove_pool_dir(self._llm_slots)
        if self._roles is not None and self._roles.executor is not None:
            self._roles.executor.shutdown(wait=False, cancel_futures=True)
