"""Runs voided by a late simulator-fidelity review run again at the end of the run, not waited on.

The judge's fidelity review of a simulated conversation goes on in the background, like a soft
verdict (``ScenarioState.review_later``): the scenario's next steps and the next scenario do not
wait for it. When it finds that the simulated user left its role after the scenario had ended,
the run is voided (its result skipped, ``experiment/late.py``) and its scenario is queued here: once
every scenario of the main loop has run and the reviews still out are in, each voided run runs
again as the same test (node id and iteration), with the tries it has left, and its result takes
the voided one's place in the experiment (``simulation.tries`` keeps the voided try). pytest shows
such a scenario twice: its first report stands (a pass on a voided run; a failure waited for the
review and became a skip), then the run again. docs/explanation/soft-verdicts.md tells the story.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from fabtest.pytest_plugin.stash_keys import ITERATION_KEY, VOIDED_KEY

if TYPE_CHECKING:
    from fabtest.pytest_plugin.session import FabtestSession

__all__ = ["Requeue"]

#: the reason a re-run scenario runs alone under ``concurrency`` (after every other scenario ended)
_ALONE = "a run again of a scenario whose simulator-fidelity review voided its first run"


class Requeue:
    """After the main loop: wait for the reviews still out, then run every voided run again (repeatedly:
    a re-run may be voided too while it has tries left)."""

    def __init__(self, fabtest: FabtestSession) -> None:
        self.fabtest = fabtest

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        result = yield
        while not (session.shouldstop or session.shouldfail):
            self.fabtest.late.wait()
            voided = self.fabtest.late.take_voided()
            if not voided:
                break
            items = {item.nodeid: item for item in session.items if isinstance(item, pytest.Function)}
            for nodeid, tries in voided.items():
                item = items.get(nodeid)
                if item is not None and not (session.shouldstop or session.shouldfail):
                    clone = _clone(item, tries)
                    clone.ihook.pytest_runtest_protocol(item=clone, nextitem=None)
        return result


def _clone(item: pytest.Function, tries: list[dict[str, Any]]) -> pytest.Function:
    """The same test (node id, iteration) again, carrying the tries its voided run made."""
    clone = pytest.Function.from_parent(item.parent, name=item.name, callspec=getattr(item, "callspec", None),
                                        callobj=item.obj, fixtureinfo=item._fixtureinfo,
                                        originalname=item.originalname)
    if ITERATION_KEY in item.stash:
        clone.stash[ITERATION_KEY] = item.stash[ITERATION_KEY]
    clone.stash[VOIDED_KEY] = tries
    clone.add_marker(pytest.mark.fabtest_serial(_ALONE))
    return clone
