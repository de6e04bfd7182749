"""What a run has done so far, as one line: the model behind the progress display.

A long concurrent run (hundreds of scenarios, many at once) otherwise shows a row of dots that says
nothing about what is in flight, what it has cost or when it will end. This module only counts and
renders; it never touches the terminal, pytest or the clock (every method takes ``now``), so it is
tested as plain data. :mod:`fabtest.pytest_plugin.progress` feeds it from pytest's report hooks and
decides where the line goes (README / docs "Performance": the progress display).

The estimate of what is left is throughput, not per-scenario time: finished tests divided by the
time since the first one started, so concurrency and ``-n`` are in it without knowing either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabtest.experiment.cost import Price, scenario_cost, scenario_tokens
from fabtest.experiment.model import ScenarioResult

__all__ = ["Progress", "Snapshot", "format_duration", "render"]


@dataclass(frozen=True)
class Snapshot:
    """The numbers of one moment; ``None`` where nothing is known yet."""

    total: int | None
    done: int
    failed: int
    running: int
    llm_in_flight: int | None
    tokens: int
    usd: float
    cost_complete: bool
    elapsed_s: float
    left_s: float | None


@dataclass
class Progress:
    """Counts tests as pytest reports them: started, finished, failed; tokens and cost of results."""

    started_at: float
    role_models: Mapping[str, str | None] = field(default_factory=dict)
    prices: Mapping[str, Price] = field(default_factory=dict)
    total: int | None = None
    done: int = 0
    tokens: int = 0
    usd: float = 0.0
    cost_complete: bool = True
    _running: dict[str, float] = field(default_factory=dict)
    _failed: set[str] = field(default_factory=set)
    _first_start: float | None = None

    def start(self, nodeid: str, now: float) -> None:
        """A test began (``pytest_runtest_logstart``)."""
        self._running[nodeid] = now
        if self._first_start is None:
            self._first_start = now

    def failed_phase(self, nodeid: str) -> None:
        """Some phase of the test failed (setup, call or teardown): it counts once."""
        self._failed.add(nodeid)

    def add_result(self, result: Mapping[str, Any]) -> None:
        """A scenario's result (the report's ``fabtest_result`` property): its tokens and cost."""
        try:
            self._add(ScenarioResult.model_validate(result))
        except ValueError:
            return  # not a result of ours

    def add_late(self, verdict: Mapping[str, Any]) -> None:
        """Soft verdicts judged after their scenario (a ``fabtest_late`` entry): the judge tokens they cost."""
        try:
            self._add(ScenarioResult(id="late", name="late", passed=True, usage=verdict.get("usage") or {}))
        except ValueError:
            return

    def _add(self, result: ScenarioResult) -> None:
        cost = scenario_cost(result, self.role_models, self.prices)
        self.tokens += scenario_tokens(result)
        self.usd += cost["usd"] or 0.0
        self.cost_complete = self.cost_complete and bool(cost["complete"])

    def finish(self, nodeid: str) -> None:
        """The test's last report is in (``pytest_runtest_logfinish``)."""
        if self._running.pop(nodeid, None) is not None:
            self.done += 1

    def left_s(self, now: float) -> float | None:
        """Seconds until the last test ends at the pace so far; None before the first one finished."""
        if self.total is None or not self.done or self._first_start is None:
            return None
        rate = self.done / max(1e-9, now - self._first_start)
        return max(0, self.total - self.done) / rate

    def snapshot(self, now: float, llm_in_flight: int | None = None) -> Snapshot:
        return Snapshot(total=self.total, done=self.done, failed=len(self._failed), running=len(self._running),
                        llm_in_flight=llm_in_flight, tokens=self.tokens, usd=self.usd,
                        cost_complete=self.cost_complete, elapsed_s=now - self.started_at, left_s=self.left_s(now))


def format_duration(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:05``."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 1_000:
        return f"{count / 1_000:.1f}k"
    return str(count)


def render(snap: Snapshot) -> str:
    """One line, e.g. ``fabtest 12/96 done, 1 failed, 32 running, 8 LLM calls in flight, 45.2k tokens,
    $0.0123, 0:41 elapsed, ~2:10 left``."""
    parts = [f"fabtest {snap.done}/{snap.total if snap.total is not None else '?'} done"]
    parts.append(f"{snap.failed} failed")
    parts.append(f"{snap.running} running")
    if snap.llm_in_flight is not None:
        parts.append(f"{snap.llm_in_flight} LLM call{'' if snap.llm_in_flight == 1 else 's'} in flight")
    parts.append(f"{_tokens(snap.tokens)} tokens")
    parts.append(f"${snap.usd:.4f}" + ("" if snap.cost_complete else " (some tokens unpriced)"))
    parts.append(f"{format_duration(snap.elapsed_s)} elapsed")
    if snap.left_s is not None:
        parts.append(f"~{format_duration(snap.left_s)} left")
    return ", ".join(parts)
