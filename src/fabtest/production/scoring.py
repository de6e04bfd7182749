"""Judge logged conversations with the ``Then`` steps of ``@production`` scenarios, as a test run would.

Each (conversation, scenario) pair is one run of that scenario: a
:class:`~fabtest.engine.scenario.ScenarioState` whose conversation is the logged one (no agent is
built or called), the scenario's steps applied in order (:mod:`.vocabulary`), then
:func:`~fabtest.engine.outcome.conclude` and :func:`~fabtest.engine.result.build_result` as for
any feature: a failed ``must`` fails the run and stops its later steps, soft criteria of a turn
share one judge call. The runs go through a thread pool of ``max_concurrency`` workers, the cap a
test run puts on LLM calls in flight, with a bounded window of conversations in memory; results
are yielded as they finish (the spool orders them by scenario and iteration).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.engine.outcome import conclude, ended
from fabtest.engine.result import ScenarioIdentity, build_result
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import UsageError
from fabtest.experiment.cost import find_price, price_table
from fabtest.experiment.model import ScenarioResult
from fabtest.llm.base import LLM
from fabtest.llm.cache import salted
from fabtest.production.features import ProductionScenario
from fabtest.production.logged import LoggedConversation
from fabtest.production.vocabulary import apply, define

__all__ = ["ScoreEnv", "score_conversation", "score_all"]


@dataclass
class ScoreEnv:
    """What every scored run shares: the project's settings, the judge and the limits."""

    settings: Settings
    rootdir: Path
    judge: LLM | None = None
    judge_reason: str = "not configured"
    #: USD the judge may spend (None: no limit); conversations not started once it is spent are left
    budget_usd: float | None = None
    spent_usd: float = 0.0
    unpriced: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge(self, result: ScenarioResult) -> None:
        usage = result.usage.get("judge")
        if usage is None or not (usage.input_tokens or usage.output_tokens):
            return
        price = find_price(price_table(self.settings.prices), self.judge.model if self.judge else None)
        with self._lock:
            if price is None:
                self.unpriced = True
            else:
                self.spent_usd += price.usd(usage.input_tokens, usage.output_tokens)

    @property
    def spent(self) -> bool:
        return self.budget_usd is not None and self.spent_usd >= self.budget_usd


def score_conversation(conversation: LoggedConversation, scenario: ProductionScenario, env: ScoreEnv, *,
                       iteration: int) -> ScenarioResult:
    """One run of ``scenario`` on ``conversation``. UsageError (a bad regex, a bad table) propagates."""
    judge = salted(env.judge, f"production/{conversation.id}/{conversation.content_hash()}") if env.judge else None
    state = ScenarioState(settings=env.settings, rootdir=env.rootdir, workdir=env.rootdir, llms=LLMRoles(
        judge=judge, judge_reason=env.judge_reason), where=f"{scenario.feature_file}:{scenario.line}", context={
        "scenario": scenario.name, "feature": scenario.feature, "feature_file": scenario.feature_file,
        "line": scenario.line, "tags": ["production"], "iteration": iteration, "conversation": conversation.id})
    state.criteria.update({n: Criterion(n, text) for n, text in env.settings.criteria.items()})
    state.conversation = conversation.conversation()
    started = time.perf_counter()
    exc: BaseException | None = None
    where = text = ""
    try:
        for step in scenario.definitions:
            define(state, step)
        for step in scenario.checks:
            where, text = step.where, step.text
            apply(state, step)
    except UsageError:
        raise
    except Exception as error:  # how the run ended (a failed must, the judge down): its outcome
        exc = error
    exc = conclude(state, exc)
    identity = ScenarioIdentity(feature=scenario.feature, name=scenario.name, rule=scenario.rule, iteration=iteration,
                                nodeid=f"{scenario.feature_file}::{scenario.name}",
                                feature_file=scenario.feature_file, steps=tuple(scenario.gherkin_steps()))
    result = build_result(identity, state, ended(exc, where=where, step=f"Then {text}"),
                          duration_s=time.perf_counter() - started)
    result.production = {"conversation": conversation.id, "timestamp": conversation.timestamp,
                         "source": conversation.source, "format": conversation.format,
                         "content_hash": conversation.content_hash()}
    return result


def score_all(conversations: Iterable[tuple[int, LoggedConversation]], scenarios: list[ProductionScenario],
              env: ScoreEnv, *, workers: int, on_done: Callable[[LoggedConversation, list[ScenarioResult]], None]
              ) -> Iterator[ScenarioResult]:
    """Every scenario on every ``(iteration, conversation)``, ``workers`` conversations at a time; at most
    twice that many are held in memory. Stops taking new conversations once the budget is spent."""
    def one(iteration: int, conversation: LoggedConversation) -> tuple[LoggedConversation, list[ScenarioResult]]:
        results = [score_conversation(conversation, s, env, iteration=iteration) for s in scenarios]
        for result in results:
            env.charge(result)
        return conversation, results

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fabtest-score") as pool:
        pending: set[Future[tuple[LoggedConversation, list[ScenarioResult]]]] = set()

        def drain(block_until: int) -> Iterator[ScenarioResult]:
            nonlocal pending
            while len(pending) > block_until:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    conversation, results = future.result()
                    on_done(conversation, results)
                    yield from results

        try:
            for iteration, conversation in conversations:
                if env.spent:
                    break
                pending.add(pool.submit(one, iteration, conversation))
                yield from drain(2 * workers - 1)
            yield from drain(0)
        finally:
            for future in pending:
                future.cancel()
