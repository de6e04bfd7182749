"""What a playbook run leaves behind: its :class:`ScenarioResult` and, after a failure, its trace.

Both go through the run's :class:`Redactor` first, so the values of the playbook's ``env``
variables (and the agent tables' secrets) never reach a result, a trace or an experiment file.
A trace is written to ``<results_dir>/traces/<experiment id>.<playbook name>.trace.json``
(``<playbook name>.trace.json`` without an experiment id; ``.iterN`` before ``.trace.json`` for
iteration N > 1), never beside the experiments.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from fabtest._internal.files import atomic_writer
from fabtest.conversation import Turn, jsonable
from fabtest.engine.outcome import Outcome
from fabtest.engine.result import ScenarioIdentity, scenario_result
from fabtest.engine.simulator import SimulatorConfig
from fabtest.experiment.model import CheckRecord, ScenarioResult
from fabtest.playbook.load import Playbook
from fabtest.playbook.outcome import PlaybookOutcome
from fabtest.playbook.secrets import Redactor

__all__ = ["FEATURE", "build_result", "trace_file_name", "turn_data", "write_trace"]

#: The feature name playbook results are filed under (stable ids, experiment grouping).
FEATURE = "playbook"
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


_MAX_SLUG = 80  # with a 128-character experiment id the name stays well under the 255 bytes a file system allows


def trace_file_name(playbook_name: str, experiment_id: str | None = None, iteration: int = 1) -> str:
    """A file name for the trace; a very long playbook name is cut, with a hash of the whole name
    so two long names that share their start still get two files (never "File name too long")."""
    slug = _SLUG.sub("_", playbook_name).strip("._") or "playbook"
    if len(slug) > _MAX_SLUG:
        digest = hashlib.sha256(playbook_name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        slug = f"{slug[:_MAX_SLUG]}-{digest}"
    if iteration > 1:
        slug += f".iter{iteration}"
    return f"{experiment_id}.{slug}.trace.json" if experiment_id else f"{slug}.trace.json"


def turn_data(turn: Turn) -> dict[str, Any]:
    """One exchange as the trace shows it."""
    return {
        "turn": turn.number,
        "response": turn.response.text,
        "tool_calls": [{"name": c.name, "arguments": c.arguments, "result": c.result} for c in turn.tool_calls],
        "duration_s": round(turn.duration_s, 3),
    }


def write_trace(results: Path, outcome: PlaybookOutcome, trace: dict[str, Any], redactor: Redactor, *,
                experiment_id: str | None, iteration: int, agent_meta: dict[str, Any]) -> Path:
    """Write a failed run's trace (redacted) and return its path."""
    from fabtest.experiment.reader import traces_dir

    path = traces_dir(results) / trace_file_name(outcome.name, experiment_id, iteration)
    outcome.trace_path = path
    outcome.failure_message = (outcome.failure_message or "failed") + f"\n  trace: {path}"
    kept = outcome.workspace_path
    doc = {
        "playbook": outcome.name, "file": outcome.source, "mode": outcome.mode, "experiment_id": experiment_id,
        "iteration": iteration, "passed": False, "failure_type": outcome.failure_type,
        "failure_message": outcome.failure_message, "workspace": str(kept) if kept else None,
        "agent": agent_meta, **trace,
    }
    with atomic_writer(path) as handle:
        json.dump(redactor.redact_obj(jsonable(doc)), handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    return path


def build_result(outcome: PlaybookOutcome, playbook: Playbook, redactor: Redactor, *, nodeid: str, iteration: int,
                 agent_meta: dict[str, Any], sim_config: SimulatorConfig | None) -> ScenarioResult:
    """The run as one scenario of the experiment, filed under the feature ``playbook``."""
    conv = outcome.conversation
    criteria = {f"{playbook.name}: step {i}": s.expected_outcome for i, s in enumerate(playbook.steps, start=1)}
    if playbook.persona is not None:
        criteria.update({text: text for text in playbook.persona.success_criteria.llm_checks})
    identity = ScenarioIdentity(feature=FEATURE, name=playbook.name, nodeid=nodeid or outcome.source,
                                feature_file=outcome.source, iteration=iteration)
    ended = Outcome(outcome.status, outcome.failure_type, outcome.failure_message, outcome.skip_reason)
    result = scenario_result(
        identity, ended, duration_s=outcome.duration_s, conversation=conv,
        expectations=[CheckRecord.model_validate(c.to_dict()) for c in outcome.checks],
        steps=[{"keyword": f"Step {i}", "text": s.user_input, "expected": s.expected_outcome}
               for i, s in enumerate(playbook.steps, start=1)],
        criteria=criteria,
        simulator=sim_config.to_fingerprint() if sim_config is not None else None,
        agent_metadata={**agent_meta, "playbook_mode": outcome.mode,
                        **({"agent_model": playbook.agent_model} if playbook.agent_model else {}),
                        **({"evaluator_model": playbook.evaluator_model} if playbook.evaluator_model else {})},
    )
    return ScenarioResult.model_validate(redactor.redact_obj(result.model_dump(mode="json")))
