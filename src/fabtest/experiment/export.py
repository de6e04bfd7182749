"""The experiment JSON document (docs/reference/experiment-json.md): build, write atomically, load.

What the file holds is made here: ``document_head`` (every section but the scenarios),
``scenario_entry`` (one scenario) and ``index_row``; its bytes are written by one function,
``write_streamed``. Every experiment file reaches it through
:meth:`fabtest.experiment.spool.Spool.write` (a run, ``recover``, ``merge``, ``rejudge``,
``replay``), which streams the entries from a spill file; ``build_document`` and
``write_document`` are the same document held in memory, for tests and small tools.

The document is the contract other tools read, so its top-level keys and the documented keys of
each scenario are fixed; everything else a user might need (iterations, transcripts, tokens,
durations, variance) is added next to them. Loading turns a document back into the models
losslessly, so reports and comparisons can be regenerated from a file alone.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabtest._internal.files import atomic_writer
from fabtest.errors import ExperimentFileError
from fabtest.experiment import cost, stats
from fabtest.experiment.attribution import Attributions, attribute_variance
from fabtest.experiment.coverage import coverage_of
from fabtest.experiment.fingerprint import experiment_fingerprints, merge_configuration
from fabtest.experiment.model import ExperimentInfo, ScenarioResult
from fabtest.experiment.scenario_index import INDEX_FIELDS, RowSink, entry_topics, index_row, lean_entry, read_lean

__all__ = [
    "FORMAT_VERSION",
    "REQUIRED_KEYS",
    "ExperimentFileError",
    "build_document",
    "costing_of",
    "document_head",
    "dump_json",
    "index_row",
    "info_from_experiment",
    "result_from_entry",
    "scenario_entry",
    "write_streamed",
    "document_path",
    "list_experiment_files",
    "load_document",
    "new_experiment_id",
    "read_document",
    "read_entries",
    "read_index",
    "entry_topics",
    "resolve_experiment",
    "traces_dir",
    "write_document",
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


_DETAIL_KEYS = ("type", "mode", "criterion", "status", "passed", "turn", "details")


def _flat_detail(detail: dict[str, Any]) -> dict[str, Any]:
    """A check as docs/reference/experiment-json.md lays it out: ``{"type", "tool"|"topic"|"max", "actual",
    "passed", ...}`` at the top level.

    The check's ``data`` keys go beside ``type``. The rare key that would replace a record key
    (``type``, ``passed``, ``data`` …) stays under ``data`` so the document remains lossless.
    """
    data = detail.pop("data", None) or {}
    out = dict(detail)
    clashing = {k: v for k, v in data.items() if k in _DETAIL_KEYS or k == "data"}
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
        else experiment_fingerprints(configs)
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
            "judge": _llm_entry(info.judge_provider, info.judge_model, info.judge_note),
            "simulator": _llm_entry(info.simulator_provider, info.simulator_model, info.simulator_note),
            "iterations": iterations,
            "interrupted": info.interrupted,
            **({"prices": dict(info.prices)} if info.prices else {}),  # [tool.fabtest.prices], so a reload costs alike
            **({"shard": info.shard} if info.shard else {}),  # one shard's part of a CI run (fabtest merge)
            # --fabtest-until-decided: the baseline, the budget, the runs added and the sequential decision
            **({"until_decided": info.until_decided} if info.until_decided else {}),
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


TRACE_SUFFIX = ".trace.json"  # playbook traces: results/traces/, or beside experiments in older versions
MUTANTS_SUFFIX = ".mutants.json"  # `fabtest mutate ID` writes <id>.mutants.json beside the experiment


def traces_dir(results_dir: str | os.PathLike[str]) -> Path:
    """Where per-run files (playbook traces) go: a subdirectory, so experiments stay alone."""
    return Path(results_dir) / "traces"


def list_experiment_files(results_dir: str | os.PathLike[str]) -> list[Path]:
    """Experiment files in a results directory, oldest first (by modification time, then name)."""
    directory = Path(results_dir)
    if not directory.is_dir():
        return []
    files = [p for p in directory.glob("*.json")
             if not p.name.startswith(".") and not p.name.endswith((TRACE_SUFFIX, MUTANTS_SUFFIX)) and p.is_file()]
    return sorted(files, key=lambda p: (p.stat().st_mtime, p.name))


def resolve_experiment(ref: str | os.PathLike[str], results_dir: str | os.PathLike[str] = "results") -> Path:
    """A path, an exact experiment id, or a unique id prefix → the experiment file."""
    text = os.fspath(ref)
    as_path = Path(text)
    if as_path.is_file():
        return as_path
    directory = Path(results_dir)
    exact = document_path(directory, text)
    if exact.is_file():
        return exact
    if text.endswith(".json") or os.sep in text or (os.altsep and os.altsep in text):
        raise ExperimentFileError(f"{text}: no such file")
    files = list_experiment_files(directory)
    candidates = [p for p in files if p.stem.startswith(text)]
    if not candidates and not text.startswith("exp_"):  # ids may be typed without their exp_ prefix
        candidates = [p for p in files if p.stem.startswith("exp_" + text)]
    if not candidates:
        raise ExperimentFileError(f"{text}: no experiment with this id or prefix in {directory}/")
    if len(candidates) > 1:
        names = ", ".join(sorted(p.stem for p in candidates))
        raise ExperimentFileError(f"{text}: ambiguous experiment prefix, candidates: {names}")
    return candidates[0]


def _check_shape(path: Path, doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ExperimentFileError(f"{path}: not an experiment file (top level is not a JSON object)")
    for key in REQUIRED_KEYS:
        if key not in doc:
            raise ExperimentFileError(f"{path}: not an experiment file (missing key '{key}')")
    if not isinstance(doc["experiment"], dict) or "id" not in doc["experiment"]:
        raise ExperimentFileError(f"{path}: not an experiment file (missing key 'experiment.id')")
    if not isinstance(doc["summary"], dict):
        raise ExperimentFileError(f"{path}: not an experiment file ('summary' is not an object)")
    if not isinstance(doc["scenario_results"], list):
        raise ExperimentFileError(f"{path}: not an experiment file ('scenario_results' is not a list)")
    for key in ("completion_rate", "evaluation_rate", "avg_turns", "avg_topics"):
        value = doc["summary"].get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ExperimentFileError(f"{path}: summary.{key}: expected a number or null, got {value!r}")
    for index, entry in enumerate(doc["scenario_results"]):
        if not isinstance(entry, dict):
            raise ExperimentFileError(f"{path}: scenario_results[{index}]: expected an object")
        for key in ("id", "passed"):
            if key not in entry:
                raise ExperimentFileError(f"{path}: scenario_results[{index}]: missing key '{key}'")
        if not isinstance(entry["passed"], bool):
            raise ExperimentFileError(f"{path}: scenario_results[{index}].passed: expected true or false, "
                                      f"got {entry['passed']!r}")
    doc.setdefault("criteria_results", {})
    return doc


def read_index(ref: str | os.PathLike[str], results_dir: str | os.PathLike[str],
               sink: RowSink) -> tuple[Path, dict[str, Any]]:
    """``read_document(lean=True)`` without the lean entries: each checked ``scenario_index`` row
    (``index_row``'s fields, count maps shared and read-only) goes to ``sink`` in batches as it is
    parsed, and the document has ``"lean": true`` and no entries. A file in another layout is read
    whole instead (no ``"lean"`` key; ``sink`` may have had rows from the failed lean read: a caller
    adds up the document's entries afresh)."""
    from fabtest.experiment.validate import file_is_complete  # pydantic schemas: only when reading

    path = resolve_experiment(ref, results_dir)
    doc = read_lean(path, sink)
    if doc is None:
        return path, _read_whole(path)
    if not file_is_complete(path):  # header and index alone are not the whole experiment
        raise ExperimentFileError(f"{path}: truncated (the scenario results end before the file does); "
                                  "rerun, or recover it from its journal")
    _check_shape(path, doc)
    _validated(path, doc)  # the entries were checked row by row
    return path, doc


def read_document(
    ref: str | os.PathLike[str], results_dir: str | os.PathLike[str] = "results", lean: bool = False
) -> tuple[Path, dict[str, Any]]:
    """Resolve and parse an experiment file into its raw dict, checking the top-level shape only.

    No models are built. With ``lean=True`` scenario entries carry only what comparisons and
    listings need (id, name, iteration, passed, skipped, turns, failure_type, evaluation counts)
    and the document has ``"lean": true``; files not in the written layout are parsed in full.
    """
    if lean:
        entries: list[dict[str, Any]] = []
        path, doc = read_index(ref, results_dir, lambda batch: entries.extend(map(lean_entry, batch)))
        if doc.get("lean"):
            doc["scenario_results"] = entries
        return path, doc
    path = resolve_experiment(ref, results_dir)
    return path, _read_whole(path)


def _read_whole(path: Path) -> dict[str, Any]:
    """The whole file parsed and validated (any layout; the index is dropped)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ExperimentFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ExperimentFileError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except UnicodeDecodeError as exc:
        raise ExperimentFileError(f"{path}: not valid JSON (not UTF-8 text at byte {exc.start})") from None
    except RecursionError:
        raise ExperimentFileError(f"{path}: not an experiment file (JSON nested too deeply to read)") from None
    del raw
    if isinstance(doc, dict):
        doc.pop("scenario_index", None)
    return _validated(path, _check_shape(path, doc))


def read_entries(path: str | os.PathLike[str], ids: Iterable[str]) -> list[dict[str, Any]] | None:
    """The whole ``scenario_results`` entries of these stable ids, in file order, from a file in
    ``write_document``'s layout, parsing only those lines (a comparison diffs a few changed
    scenarios of 100,000): the file is read in blocks (never a whole line of the index) and one
    regular-expression pass finds the entry lines that start with a wanted id. None when the file
    is in another layout."""
    wanted = sorted({sid.encode("utf-8") for sid in ids})
    # each entry is one line that starts with its id (plain: example:<hex>, so no escapes to match)
    pattern = re.compile(b'\n\\{"id": "(?:' + b"|".join(map(re.escape, wanted)) + b')"')
    found: list[dict[str, Any]] = []
    try:
        with open(path, "rb", buffering=0) as handle:
            if handle.seek(0, os.SEEK_END) < len(_RESULTS_END):
                return None
            handle.seek(-len(_RESULTS_END), os.SEEK_END)
            if handle.read() != _RESULTS_END:
                return None
            handle.seek(0)
            carry, started = b"", False
            while block := handle.read(_BLOCK):
                if not started:  # the header line, found without holding the long index line
                    data = carry + block
                    at = data.find(_RESULTS_START)
                    if at < 0:
                        carry = data[-len(_RESULTS_START):]
                        continue
                    started, carry, block = True, b"", data[at + len(_RESULTS_START):]
                    if not wanted:
                        break
                # the line that spans two blocks is joined; the lines inside a block are searched in place
                first = block.find(b"\n")
                if first < 0:
                    carry += block
                    continue
                lines = [carry + block[:first]]
                cut = block.rfind(b"\n")
                lines += (block[m.start() + 1:block.find(b"\n", m.start() + 1)]
                          for m in pattern.finditer(block, first, cut))
                found += (json.loads(line.rstrip().removesuffix(b",")) for line in lines if pattern.match(b"\n" + line))
                carry = block[cut + 1:]
    except (OSError, ValueError):
        return None
    return found if started else None


_RESULTS_START = b'\n"scenario_results": ['
_RESULTS_END = b"\n]\n}\n"
_BLOCK = 1 << 22


def _validated(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """The versioned model (experiment/validate.py) accepts it, or one line naming file and field."""
    from fabtest.experiment.validate import document_problem

    problem = document_problem({k: v for k, v in doc.items() if k != "lean"})
    if problem:
        raise ExperimentFileError(f"{path}: {problem}")
    return doc


def _llm_entry(provider: str | None, model: str | None, note: str | None) -> dict[str, Any]:
    """``{provider, model}``, plus ``note`` when the role is a demo or scripted stand-in."""
    entry: dict[str, Any] = {"provider": provider, "model": model}
    if note:
        entry["note"] = note
    return entry


def info_from_experiment(experiment: dict[str, Any]) -> ExperimentInfo:
    """The ``experiment`` section of a document back into its model (ValidationError when it is not one)."""
    data = dict(experiment)
    judge = data.pop("judge", None) or {}
    simulator = data.pop("simulator", None) or {}
    data.setdefault("judge_provider", judge.get("provider"))
    data.setdefault("judge_model", judge.get("model"))
    data.setdefault("simulator_provider", simulator.get("provider"))
    data.setdefault("simulator_model", simulator.get("model"))
    data.setdefault("judge_note", judge.get("note"))
    data.setdefault("simulator_note", simulator.get("note"))
    return ExperimentInfo.model_validate(data)


def _nested_detail(detail: Any) -> Any:
    """Undo ``_flat_detail``: keys beside the record keys go back under ``data`` (older nested files too)."""
    if not isinstance(detail, dict):
        return detail
    out = {k: v for k, v in detail.items() if k in _DETAIL_KEYS}
    data = dict(detail.get("data") or {}) if isinstance(detail.get("data"), dict) else {}
    data.update({k: v for k, v in detail.items() if k not in _DETAIL_KEYS and k != "data"})
    return {**out, "data": data}


def result_from_entry(entry: dict[str, Any]) -> ScenarioResult:
    """A ``scenario_results`` entry back into its model (ValidationError when it is not one)."""
    data = dict(entry)
    for key in ("evaluations", "expectations"):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("details", [])
        if isinstance(value, list):
            data[key] = [_nested_detail(d) for d in value]
    return ScenarioResult.model_validate(data)


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


def load_document(
    ref: str | os.PathLike[str], results_dir: str | os.PathLike[str] = "results"
) -> tuple[ExperimentInfo, list[ScenarioResult], dict[str, Any]]:
    """Load an experiment (path, id or unique id prefix) back into the models, plus the raw dict."""
    path, doc = read_document(ref, results_dir)
    try:
        info = info_from_experiment(doc["experiment"])
    except ValidationError as exc:
        raise ExperimentFileError(f"{path}: invalid experiment ({_one_line(exc)})") from None
    results: list[ScenarioResult] = []
    for index, entry in enumerate(doc["scenario_results"]):
        try:
            results.append(result_from_entry(entry if isinstance(entry, dict) else {}))
        except ValidationError as exc:
            raise ExperimentFileError(f"{path}: invalid scenario_results[{index}] ({_one_line(exc)})") from None
    return info, results, doc
