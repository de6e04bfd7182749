"""Turning a finished scenario into a :class:`~fabtest.experiment.model.ScenarioResult` (plain data).

A front end says which scenario ran with a small :class:`ScenarioIdentity` (the pytest plugin
builds it from the test item, :func:`fabtest.run` from its arguments, a playbook from its name),
so building the result needs no test runner. :func:`scenario_result` is the one place a result is
assembled, for a feature's scenario (:func:`build_result`), a playbook
(:func:`fabtest.playbook.record.build_result`) and a scenario that errored before it ran. The
result travels as ``model_dump(mode="json")``: inside the pytest report (it survives
pytest-xdist) and into the experiment JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.conversation import Conversation, jsonable
from fabtest.engine.outcome import Outcome
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import describe
from fabtest.experiment.model import CheckRecord, ScenarioResult, TopicRecord, turn_records, usage_records
from fabtest.experiment.stable_id import stable_id

__all__ = ["ScenarioIdentity", "build_result", "scenario_result"]


@dataclass(frozen=True)
class ScenarioIdentity:
    """Which scenario ran: what its stable id and its name in the experiment are made of."""

    feature: str
    name: str  # as shown, with a Scenario Outline example's values
    rule: str | None = None
    #: the scenario-set record this run was expanded for, if any
    record: ScenarioRecord | None = None
    iteration: int = 1
    nodeid: str = ""
    feature_file: str = ""  # relative to the project root, so results match across machines
    #: the Gherkin steps (``ScenarioResult.steps``): keyword, text, doc string or table
    steps: tuple[dict[str, Any], ...] = ()

    @property
    def record_id(self) -> str | None:
        return self.record.id if self.record is not None else None

    @property
    def shown_name(self) -> str:
        """A scenario-set run is shown by its record's name (its id when it has none)."""
        record = self.record
        return f"{self.name} [{record.name or record.id}]" if record is not None else self.name

    @property
    def stable_id(self) -> str:
        return stable_id(self.feature, self.rule, self.name, self.record_id)


def build_result(identity: ScenarioIdentity, state: ScenarioState | None, outcome: Outcome, *,
                 duration_s: float) -> ScenarioResult:
    """The scenario's result; never raises, so no scenario can take a session down (INTERNALERROR).

    ``state`` is None for a scenario that failed or was skipped before any fabtest step ran.
    """
    if state is None:
        return _bare(identity, outcome, duration_s)
    try:
        return _full(identity, state, outcome, duration_s)
    except Exception as exc:  # the boundary validates agent data; this is the last guard
        message = f"fabtest could not record this scenario's conversation ({describe(exc)})"
        broken = Outcome.failed("error", "\n".join(m for m in (outcome.failure_message, message) if m))
        return _bare(identity, broken, duration_s)


def scenario_result(identity: ScenarioIdentity, outcome: Outcome, *, duration_s: float,
                    conversation: Conversation | None = None, **fields: Any) -> ScenarioResult:
    """A result: which scenario ran and how it ended, the record of its ``conversation`` (turns,
    topics, checks, transcript, usage; none for a scenario that never talked) and what only the
    front end knows (``fields``: configuration, metadata; a field given here replaces the one
    made from the identity or the conversation, e.g. a playbook's own ``expectations``)."""
    record = _head(identity, outcome, duration_s)
    if conversation is not None:
        record.update((key, make(conversation)) for key, make in _FROM_CONVERSATION.items() if key not in fields)
    record.update(fields)
    return ScenarioResult(**record)


#: the result's fields a conversation fills, each made only when the caller does not give it
_FROM_CONVERSATION: dict[str, Callable[[Conversation], Any]] = {
    "turns": lambda conv: len(conv.turns),
    "topics_visited": lambda conv: conv.topics_visited,
    "topic_path": lambda conv: conv.topic_path,
    "backtracked": lambda conv: conv.backtracked,
    "off_graph_transitions": lambda conv: conv.off_graph_transitions,
    "evaluations": lambda conv: [CheckRecord.model_validate(c.to_dict()) for c in conv.evaluations],
    "expectations": lambda conv: [CheckRecord.model_validate(c.to_dict()) for c in conv.expectations],
    "transcript": turn_records,
    "history": lambda conv: [{"role": m.role, "content": m.content} for m in conv.history],
    "usage": usage_records,
}


def _bare(identity: ScenarioIdentity, outcome: Outcome, duration_s: float) -> ScenarioResult:
    return scenario_result(identity, outcome, duration_s=duration_s)


def _head(identity: ScenarioIdentity, outcome: Outcome, duration_s: float) -> dict[str, Any]:
    return {
        "id": identity.stable_id, "name": identity.shown_name, "nodeid": identity.nodeid,
        "feature": identity.feature, "feature_file": identity.feature_file, "rule": identity.rule,
        "record_id": identity.record_id, "iteration": identity.iteration,
        "record_category": identity.record.category if identity.record is not None else None,
        "passed": outcome.passed, "skipped": outcome.skipped, "skip_reason": outcome.skip_reason,
        "failure_type": outcome.failure_type, "failure_message": outcome.failure_message,
        "duration_s": round(duration_s, 4), "steps": list(identity.steps),
    }


def _with_role_models(records: dict[str, Any], state: ScenarioState) -> dict[str, Any]:
    """The judge's and the simulator's model on the scenario's own usage, so a scenario read alone
    (a merged shard, a playbook's judge model, a compared pair) says which model spent the tokens."""
    from fabtest.llm.factory import describe_llm

    if state.late is not None and "judge" not in records:  # its calls come later (late.merge adds them):
        from fabtest.experiment.model import UsageRecord

        records["judge"] = UsageRecord()  # named now, as when one call was in time (results stay identical)
    for role in ("judge", "simulator"):
        record = records.get(role)
        if record is not None and record.model is None:
            record.model = describe_llm(getattr(state.llms, role, None))[1]
    return records


def _full(identity: ScenarioIdentity, state: ScenarioState, outcome: Outcome, duration_s: float) -> ScenarioResult:
    conv = state.conversation
    return scenario_result(
        identity, outcome, duration_s=duration_s, conversation=conv,
        usage=_with_role_models(usage_records(conv), state),
        criteria={c.name: c.description for c in state.criteria.values()},
        topics=[TopicRecord(**r) for r in state.topics.topic_records()] if state.topics else [],
        simulator=state.simulator_config.to_fingerprint() if state.simulator_config.goal else None,
        agent_metadata=jsonable(state.agent_metadata()),
        attack=state.simulator_config.attack,
        attack_criteria=_attack_criteria(state.simulator_config.attack),
        simulation=_simulation(state),
    )


def _attack_criteria(name: str | None) -> list[str]:
    from fabtest.redteam import attack

    return [criterion for criterion, _ in attack(name).criteria] if name is not None else []


def _simulation(state: ScenarioState) -> dict[str, Any] | None:
    """The simulated conversations tried and whether the last one was valid (None: no simulation)."""
    tries = [dict(t) for t in state.simulations]
    return {"valid": bool(tries[-1]["valid"]), "tries": tries} if tries else None
