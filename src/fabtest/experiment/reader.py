"""Experiment files read back (docs/reference/experiment-json.md): found by id or prefix, checked,
and turned back into the models.

Loading turns a document back into the models losslessly, so reports and comparisons can be
regenerated from a file alone; a file that is not an experiment is one :class:`ExperimentFileError`
line naming it. The lean readers (``read_index``, ``read_document(lean=True)``, ``read_entries``)
parse only the rows a caller needs: a comparison of two large files never holds their transcripts.
What the file holds and how it is written is :mod:`fabtest.experiment.export`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabtest.errors import ExperimentFileError
from fabtest.experiment.export import DETAIL_KEYS, REQUIRED_KEYS, document_path
from fabtest.experiment.model import ExperimentInfo, ScenarioResult
from fabtest.experiment.scenario_index import RowSink, lean_entry, read_lean

__all__ = [
    "ExperimentFileError",
    "MUTANTS_SUFFIX",
    "TRACE_SUFFIX",
    "info_from_experiment",
    "list_experiment_files",
    "load_document",
    "read_document",
    "read_entries",
    "read_index",
    "resolve_experiment",
    "result_from_entry",
    "traces_dir",
]


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
    data.setdefault("judge_settings", judge.get("settings") or {})
    data.setdefault("simulator_settings", simulator.get("settings") or {})
    return ExperimentInfo.model_validate(data)


def _nested_detail(detail: Any) -> Any:
    """Undo ``_flat_detail``: keys beside the record keys go back under ``data`` (older nested files too)."""
    if not isinstance(detail, dict):
        return detail
    out = {k: v for k, v in detail.items() if k in DETAIL_KEYS}
    data = dict(detail.get("data") or {}) if isinstance(detail.get("data"), dict) else {}
    data.update({k: v for k, v in detail.items() if k not in DETAIL_KEYS and k != "data"})
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
