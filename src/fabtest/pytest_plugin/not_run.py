"""Never green by accident: scenarios that could not run make the run fail unless allowed.

A scenario that needs an LLM that is not configured (no key for the judge, the simulator or a
built-in agent's model) is skipped with the reason. Skips alone would leave pytest's exit status
at 0, so a CI job whose secret went missing would pass having tested nothing. So each such skip
is tagged with what was missing (``llm``), the controller counts them, the summary says so
first, and the run ends with :data:`EXIT_NOT_RUN` unless the user allowed that kind of skip
(``--fabtest-allow-skip=llm`` or ``[tool.fabtest] allow_skip = ["llm"]``). A run with failures
keeps pytest's exit status 1: a failure says more than a skip.

The same holds for a run whose scenarios all ran but whose judged checks were every one skipped or
inconclusive (no judge, a judge outage, unusable answers: :func:`fabtest.experiment.stats.unjudged`):
its soft-only scenarios "passed" having tested nothing, so it counts as not run for want of ``llm``.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["EXIT_NOT_RUN", "NOT_RUN_PROPERTY", "SKIP_KINDS", "NotRun", "allowed_kinds", "skip_for", "tag_report"]

#: pytest's exit status when scenarios could not run and that was not allowed (pytest uses 0-5).
EXIT_NOT_RUN = 6
#: The kinds of skip a user may allow: ``llm`` (no key or endpoint for an LLM a scenario needs) and
#: ``simulator`` (the simulated user left its role on every try: engine/simulation.py).
SKIP_KINDS = ("llm", "simulator")
NOT_RUN_PROPERTY = "fabtest_not_run"
_KIND_ATTR = "fabtest_not_run"
_WHAT = {"llm": "an LLM they need is not configured",
         "simulator": "the simulated user left its role on every try (invalid simulation)"}


def skip_for(kind: str, reason: str) -> BaseException:
    """A pytest skip at the scenario's line, tagged as a scenario that could not run for want of ``kind``."""
    exc = pytest.skip.Exception(reason, _use_item_location=True)
    setattr(exc, _KIND_ATTR, kind)
    return exc


def tag_report(report: pytest.TestReport, call: pytest.CallInfo[Any]) -> None:
    """Carry the tag of :func:`skip_for` on the report (plain data: it crosses to the xdist controller)."""
    kind = getattr(call.excinfo.value, _KIND_ATTR, None) if call.excinfo is not None else None
    if kind is not None and report.skipped:
        report.user_properties.append((NOT_RUN_PROPERTY, kind))


def allowed_kinds(config: pytest.Config, settings: Any) -> set[str]:
    """``--fabtest-allow-skip`` (repeatable, comma-separated) and ``allow_skip`` together; an unknown
    kind is a usage error naming the known ones."""
    given = [part.strip() for value in config.getoption("--fabtest-allow-skip", None) or []
             for part in value.split(",")]
    unknown = [kind for kind in given if kind and kind not in SKIP_KINDS]
    if unknown:
        raise pytest.UsageError(f"--fabtest-allow-skip {unknown[0]!r}: unknown kind of skip; known: "
                                f"{', '.join(SKIP_KINDS)}")
    return {kind for kind in given if kind} | set(getattr(settings, "allow_skip", None) or [])


class NotRun:
    """The controller's count of scenarios that could not run, by kind."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.by_kind: dict[str, list[str]] = {}
        #: judged checks of a run that rated none of them (0: some were rated, or none were asked for)
        self.unjudged = 0

    def add(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == NOT_RUN_PROPERTY and report.when == "call":
                self.by_kind.setdefault(str(value), []).append(report.nodeid)

    @property
    def fails_run(self) -> bool:
        unjudged = bool(self.unjudged) and "llm" not in self.allowed
        return unjudged or any(kind not in self.allowed for kind in self.by_kind)

    def exit_status(self, status: int) -> int:
        """The run's exit status: :data:`EXIT_NOT_RUN` instead of a green 0 (or 5) when not allowed."""
        if self.fails_run and status in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            return EXIT_NOT_RUN
        return status

    def summary_lines(self) -> list[str]:
        """What the summary says first: how many did not run, why, and how the run ends."""
        lines = []
        if self.unjudged:
            first = (f"fabtest: not one of the {self.unjudged} judged check(s) was rated: every one was skipped or "
                     "inconclusive (no judge LLM, a judge outage or unusable answers: see each check's reason)")
            lines.append(f"{first}; allowed by allow_skip/--fabtest-allow-skip=llm" if "llm" in self.allowed else
                         f"{first}. The run fails (exit status {EXIT_NOT_RUN}): nothing judged is nothing tested; "
                         "configure the judge, or allow it with --fabtest-allow-skip=llm or "
                         "[tool.fabtest] allow_skip = [\"llm\"]")
        for kind, nodeids in self.by_kind.items():
            first = f"fabtest: {len(nodeids)} scenario(s) did not run: {_WHAT.get(kind, kind)} (see the skip reasons)"
            if kind in self.allowed:
                lines.append(f"{first}; allowed by allow_skip/--fabtest-allow-skip={kind}")
            else:
                lines.append(f"{first}. The run fails (exit status {EXIT_NOT_RUN}): configure it (export "
                             "GEMINI_API_KEY=..., or an offline script as [tool.fabtest] offline_llm, with "
                             f"agent_model: for built-in agents), or allow it with --fabtest-allow-skip={kind} or "
                             f"[tool.fabtest] allow_skip = [\"{kind}\"]")
        return lines
