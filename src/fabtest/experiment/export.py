"""The experiment JSON document (docs/reference/experiment-json.md): build it and write it atomically.

What the file holds is made here: ``document_head`` (every section but the scenarios),
``scenario_entry`` (one scenario) and ``index_row``; its bytes are written by one function,
``write_streamed``. Every experiment file reaches it through
:meth:`fabtest.experiment.spool.Spool.write` (a run, ``recover``, ``merge``, ``rejudge``,
``replay``), which streams the entries from a spill file; ``build_document`` and
``write_document`` are the same document held in memory, for tests and small tools.

The document is the contract other tools read, so its top-level keys and the documented keys of
each scenario are fixed; everything else a user might need (iterations, transcripts, tokens,
durations, variance) is added next to them. Reading it back is :mod:`fabtest.experiment.reader`.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from fabtest._internal.files import atomic_writer
from fabtest.experiment import cost, stats
from fabtest.experiment.attribution import Attributions, attribute_variance
from fabtest.experiment.coverage import coverage_of
from fabtest.experiment.fingerprint import experiment_fingerprints, merge_configuration
from fabtest.experiment.model import ExperimentInfo, ScenarioResult
from fabtest.experiment.scenario_index import INDEX_FIELDS, entry_topics, index_row

__all__ = [
    "FORMAT_VERSION",
    "REQUIRED_KEYS",
    "build_document",
    "recorded_settings",
    "costing_of",
    "document_head",
    "dump_json",
    "index_row",
    "scenario_entry",
    "write_streamed",
    "document_path",
    "new_experiment_id",
    "entry_topics",
    "write_document",
    "DETAIL_KEYS",
]

FORMAT_VERSION = 1
REQUIRED_KEYS = ("experiment", "summary", "scenario_results")
_DIGITS = 4

#: models per role and the price table: what a scenario's cost needs (``costing_of``)
Costing = tuple[dict[str, str | None], dict[str, cost.Price]]
#: the flakiness attribution (experiment/attribution.py), over whole results
Attribute = Callable[[Sequence[ScenarioResult]], Attributions]


def new_experiment_id() -> str:
    """``exp_`` plus 6 random hex digits: short enough to type, unique enough per results dir."""
    return "exp_" + secrets.token_hex(3)


def _r(value: float | None) -> float | None:
    return None if value is None else round(float(value), _DIGITS)


def _round_spread(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: _r(v) for k, v in values.items()}


def _summary(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    comp = stats.completion(results)
    ev = stats.evaluation(results)
    eff = stats.efficiency(results)
    ground = stats.grounding(results)
    summary: dict[str, Any] = {
        # total_scenarios counts every run, skipped ones included; the rates are over what they say.
        "total_scenarios": comp["total"],
        "passed": comp["passed"],
        "failed": comp["failed"],
        "skipped": comp["skipped"],
        "counted_scenarios": comp["counted"],  # passed + failed: completion_rate and avg_turns are over these
        "topic_graph_scenarios": eff["topic_graph_scenarios"],  # avg_topics is over these only
        "completion_rate": _r(comp["rate"]),
        "evaluation_rate": _r(ev["rate"]),
        "avg_turns": _r(eff["turns"]["mean"]),
        "avg_topics": _r(eff["topics"]["mean"]),
        "failure_types": comp["failure_types"],
        "backtracking_rate": _r(eff["backtracking_rate"]),
        "evaluations": {k: ev[k] for k in ("evaluated", "passed", "failed", "inconclusive", "not_applicable",
                                           "skipped")},
        "skipped_checks": stats.skipped_checks(results),
        "turns": _round_spread(eff["turns"]),
        "topics": _round_spread(eff["topics"]),
        "tokens": stats.tokens(results),
        "duration_s": _r(sum(r.duration_s for r in results)),
        "unique_scenarios": len({r.id for r in results}),
    }
    spoken = stats.voice(results)
    if spoken is not None:  # written only when a turn was spoken, so text runs' files are unchanged
        summary["voice"] = {**spoken, "time_to_first_audio_ms": _round_spread(spoken["time_to_first_audio_ms"]),
                            "reply_audio_ms": _round_spread(spoken["reply_audio_ms"]),
                            "word_error_rate": _r(spoken["word_error_rate"])}
    validity = stats.simulator_validity(results)
    if validity is not None:
        summary["simulator_validity"] = {**validity, "rate": _r(validity["rate"])}
    if ground["by_source"]:
        summary["grounding"] = {
            "by_source": {
                src: {**e, "rate": _r(e["rate"]), "claim_rate": _r(e["claim_rate"])}
                for src, e in ground["by_source"].items()
            },
            "worst_scenarios": [{**s, "ungrounded_rate": _r(s["ungrounded_rate"])} for s in ground["worst_scenarios"]],
        }
    return summary


DETAIL_KEYS = ("type", "mode", "criterion", "status", "passed", "turn", "details")


def _flat_detail(detail: dict[str, Any]) -> dict[str, Any]:
    """A check as docs/reference/experiment-json.md lays it out: ``{"type", "tool"|"topic"|"max", "actual",
    "passed", ...}`` at the top level.

    The check's ``data`` keys go beside ``type``. The rare key that would replace a record key
    (``type``, ``passed``, ``data`` …) stays under ``data`` so the document remains lossless.
    """
    data = detail.pop("data", None) or {}
    out = dict(detail)
    clashing = {k: v for k, v in data.items() if k in DETAIL_KEYS or k == "data"}
    out.update((k, v) for k, v in data.items() if k not in clashing)
    if clashing:
        out["data"] = clashing
    return out


def scenario_entry(result: ScenarioResult, costing: Costing, dumped: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``scenario_results`` entry (the documented keys first, docs/reference/experiment-json.md).

    ``dumped``: the result's ``model_dump(mode="json")`` when the caller has made it already (the
    recorder journals it first); it is consumed.
    """
    dumped = result.model_dump(mode="json") if dumped is None else dumped
    dumped["cost"] = cost.scenario_cost(result, *costing)
    evaluations = stats.scenario_check_summary(result.evaluations, by_criterion=True)
    expectations = stats.scenario_check_summary(result.expectations, by_criterion=False)
    evaluations["rate"] = _r(evaluations["rate"])
    expectations["rate"] = _r(expectations["rate"])
    evaluations["details"] = [_flat_detail(d) for d in dumped.pop("evaluations")]
    expectations["details"] = [_flat_detail(d) for d in dumped.pop("expectations")]
    head = {k: dumped.pop(k) for k in ("id", "name", "passed", "turns", "topics_visited", "failure_type",
                                       "failure_message")}
    return {**head, "evaluations": evaluations, "expectations": expectations, **dumped}


def costing_of(info: ExperimentInfo) -> Costing:
    """The experiment's models per role and its price table: what a scenario's cost needs."""
    return {"judge": info.judge_model, "simulator": info.simulator_model}, cost.price_table(info.prices)


def _variance(results: Sequence[ScenarioResult], attribute: Attribute) -> dict[str, Any]:
    runs = stats.run_rates(results)
    per_scenario = stats.iteration_stats(results)
    found = attribute(results)
    return {
        "std_kind": runs["std_kind"],
        "runs": [
            {**r, "completion_rate": _r(r["completion_rate"]), "evaluation_rate": _r(r["evaluation_rate"])}
            for r in runs["runs"]
        ],
        "completion_rate": _round_spread(runs["completion_rate"]),
        "evaluation_rate": _round_spread(runs["evaluation_rate"]),
        "scenarios": [
            {**s, **{k: _r(s[k]) for k in ("pass_rate", "pass_at_k", "pass_hat_k")}} for s in per_scenario
        ],
        "flaky": [s["id"] for s in per_scenario if s["label"] == "flaky"],
        # simulator / agent / judge / undetermined, with the turn and evidence (experiment/attribution.py)
        "flaky_causes": [a.to_dict() for a in found.scenarios],
        # soft criteria whose verdict differs between runs, and why (a soft flip never fails a scenario)
        "flaky_criteria": [c.to_dict() for c in found.criteria],
    }


def document_head(info: ExperimentInfo, results: Sequence[ScenarioResult],
                  configs: Sequence[ScenarioResult] | None = None,
                  attribute: Attribute = attribute_variance, coverage: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every section of the experiment but ``scenario_results`` (``variance`` last, when iterated).

    ``results`` need only what the sections read (the recorder passes slim copies, see
    experiment/spool.py); ``configs``: results that carry every distinct configuration (default:
    ``results``; the union is the same); ``attribute``: the flakiness attribution, which reads
    whole transcripts (the recorder's reads the flaky scenarios' runs back from its spill file);
    ``coverage``: the section when already added up (the recorder keeps each run's facts, not its
    transcript), else computed from ``results``.
    """
    configs = results if configs is None else configs
    config_h, criteria_h, topic_h = (
        (info.config_hash, info.criteria_hash, info.topic_graph_hash)
        if info.config_hash and info.criteria_hash and info.topic_graph_hash
        else experiment_fingerprints(configs, recorded_settings(info))
    )
    iterations = max([info.iterations, *(r.iteration for r in results)]) if results else info.iterations
    criteria, topics, simulators = merge_configuration(configs)
    costing = costing_of(info)
    doc: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "experiment": {
            "id": info.id,
            "timestamp": info.timestamp,
            "name": info.name,
            "tags": list(info.tags),
            "git_commit": info.git_commit,
            "git_branch": info.git_branch,
            "git_dirty": info.git_dirty,
            "config_hash": config_h,
            "criteria_hash": criteria_h,
            "topic_graph_hash": topic_h,
            "judge": _llm_entry(info.judge_provider, info.judge_model, info.judge_note, info.judge_settings),
            "simulator": _llm_entry(info.simulator_provider, info.simulator_model, info.simulator_note,
                                    info.simulator_settings),
            "iterations": iterations,
            "interrupted": info.interrupted,
            **({"prices": dict(info.prices)} if info.prices else {}),  # [tool.fabtest.prices], so a reload costs alike
            **({"shard": info.shard} if info.shard else {}),  # one shard's part of a CI run (fabtest merge)
            # --fabtest-until-decided: the baseline, the budget, the runs added and the sequential decision
            **({"until_decided": info.until_decided} if info.until_decided else {}),
            **({"ab": info.ab} if info.ab else {}),  # fabtest ab: this experiment's arm, ref and commit
            **({"source": info.source} if info.source else {}),  # "production": fabtest score's logged conversations
        },
        "summary": {**_summary(results), "cost": cost.experiment_cost(results, *costing)},
        "criteria_results": {
            name: {**entry, "rate": _r(entry["rate"])} for name, entry in stats.criteria_performance(results).items()
        },
        "checks_results": {
            name: {**entry, "rate": _r(entry["rate"])} for name, entry in stats.checks_performance(results).items()
        },
        "coverage": coverage if coverage is not None else coverage_of(results),
        "configuration": {
            "criteria": criteria,
            "topics": [t.model_dump(mode="json") for t in topics],
            "simulator": [json.loads(s) for s in simulators],
        },
    }
    if iterations > 1:
        doc["variance"] = _variance(results, attribute)
    return doc


def build_document(info: ExperimentInfo, results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """The whole experiment as plain JSON-ready data.

    Fingerprints missing from ``info`` (empty strings) are computed from the results. A
    ``variance`` section is added when the experiment ran scenarios more than once.
    """
    results = list(results)
    doc = document_head(info, results)
    variance = doc.pop("variance", None)
    costing = costing_of(info)
    doc["scenario_results"] = [scenario_entry(r, costing) for r in results]
    if variance is not None:
        doc["variance"] = variance
    return doc


def document_path(results_dir: str | os.PathLike[str], experiment_id: str) -> Path:
    return Path(results_dir) / f"{experiment_id}.json"


def dump_json(value: Any) -> str:
    """JSON text as the experiment file spells it (one line; rows and entries are written as such)."""
    return json.dumps(value, ensure_ascii=False, default=str)


_dump = dump_json


def write_document(doc: dict[str, Any], results_dir: str | os.PathLike[str]) -> Path:
    """Write ``results/<id>.json`` atomically: a temp file in the same directory, then os.replace.

    A reader (or a crash) never sees half a file. Layout (still plain JSON): one top-level key per
    line, a compact ``scenario_index`` before ``scenario_results``, and one scenario per line, so
    ``read_document(lean=True)`` can stop reading before the transcripts.
    """
    entries = doc.get("scenario_results") or []
    head = {k: v for k, v in doc.items() if k not in ("scenario_results", "scenario_index")}
    return write_streamed(head, (_dump(index_row(e)) for e in entries), (_dump(e) for e in entries), results_dir)


def write_streamed(head: dict[str, Any], rows: Iterable[str], entries: Iterable[str],
                   results_dir: str | os.PathLike[str]) -> Path:
    """``write_document``'s file from text: ``rows`` are the index rows and ``entries`` the scenario
    entries, each already one line of JSON, copied as they come (the recorder streams them from
    its spill file, so no transcript is held or parsed again). Same bytes as ``write_document``."""
    directory = Path(results_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = document_path(directory, head["experiment"]["id"])
    with atomic_writer(target) as handle:
        handle.write("{\n")
        for key, value in head.items():
            handle.write(f"{_dump(key)}: {_dump(value)},\n")
        handle.write(f'"scenario_index": {{"fields": {_dump(list(INDEX_FIELDS))}, "rows": [')
        handle.write(", ".join(rows))
        handle.write("]},\n")
        handle.write('"scenario_results": [')
        for i, entry in enumerate(entries):
            handle.write(("\n" if i == 0 else ",\n") + entry)
        handle.write("\n]\n}\n")
    _fsync_dir(directory)
    return target


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

def _llm_entry(provider: str | None, model: str | None, note: str | None,
               settings: dict[str, Any]) -> dict[str, Any]:
    """``{provider, model}``, plus ``note`` when the role is a demo or scripted stand-in and
    ``settings`` when they were recorded (what can change a verdict: ``Settings.verdict_settings``)."""
    entry: dict[str, Any] = {"provider": provider, "model": model}
    if note:
        entry["note"] = note
    if settings:
        entry["settings"] = dict(settings)
    return entry


def recorded_settings(info: ExperimentInfo) -> dict[str, Any]:
    """The judge's and simulator's recorded settings, as ``config_hash`` covers them ({}: none recorded)."""
    return {role: values for role, values in (("judge", info.judge_settings), ("simulator", info.simulator_settings))
            if values}
