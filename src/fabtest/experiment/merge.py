"""``fabtest merge``: one experiment from the parts that the shards of one CI run wrote.

Each shard (``--fabtest-shard i/n``, or pytest-split's ``--splits n --group i``) records its
shard in ``experiment.shard``. Merging checks that the parts belong together: the same
experiment id or name, the same git commit, no shard twice. The stored fingerprints are over the
scenarios a part ran, so shards that ran different scenarios legitimately differ there; what
must not differ is the configuration itself, so each scenario's configuration is fingerprinted:
a criterion or topic defined differently in two parts, or one scenario run with another
configuration, is refused (naming the part and ``experiment.criteria_hash`` /
``topic_graph_hash`` / ``config_hash``). The summary, fingerprints and sections are recomputed.

Parts are read one entry at a time (the experiment file has one scenario per line) into a
:class:`~fabtest.experiment.spool.Spool`, so merging 4 × 100,000 results holds no transcript.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabtest.errors import MergeError
from fabtest.experiment.export import costing_of
from fabtest.experiment.fingerprint import canonical_json
from fabtest.experiment.model import ExperimentInfo, ScenarioResult
from fabtest.experiment.reader import (
    ExperimentFileError,
    info_from_experiment,
    load_document,
    read_index,
    result_from_entry,
)
from fabtest.experiment.spool import Spool

__all__ = ["MergeError", "merge_parts", "parse_shard", "shard_from_options"]

_SHARD = re.compile(r"(\d+)/(\d+)")
_ENTRIES_START = '"scenario_results": ['


def parse_shard(text: str) -> str:
    """``i/n`` with 1 ≤ i ≤ n, normalised; ValueError (one line) otherwise."""
    match = _SHARD.fullmatch(text.strip())
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ValueError(f"--fabtest-shard {text!r}: expected i/n with 1 <= i <= n (e.g. 2/4)")
    return f"{int(match.group(1))}/{int(match.group(2))}"


def shard_from_options(shard: str | None, splits: Any = None, group: Any = None) -> str | None:
    """The shard of this run: ``--fabtest-shard``, else pytest-split's ``--splits``/``--group``."""
    if shard:
        return parse_shard(shard)
    if splits and group:
        return parse_shard(f"{group}/{splits}")
    return None


class _Configurations:
    """Every definition seen so far (as a digest) and the part that made it."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[bytes, str]] = {}

    def conflict(self, key: str, value: Any, part: str) -> str | None:
        """The part that defined ``key`` differently, or None (and remember this definition)."""
        digest = hashlib.sha256(canonical_json(value).encode("utf-8")).digest()
        known = self._seen.setdefault(key, (digest, part))
        return known[1] if known[0] != digest else None

    def check(self, result: ScenarioResult, where: str, part: str) -> None:
        for field, items, hash_name in (("criteria", result.criteria.items(), "criteria_hash"),
                                        ("topics", ((t.name, t.model_dump(mode="json")) for t in result.topics),
                                         "topic_graph_hash")):
            for name, value in items:
                other = self.conflict(f"{field}.{name}", value, part)
                if other:
                    raise MergeError(f"{where}: experiment.{hash_name} differs: {field} {name!r} is defined "
                                     f"differently in {other}; rerun the shards on one configuration")
        config = {"criteria": result.criteria, "topics": [t.model_dump(mode="json") for t in result.topics],
                  "simulator": result.simulator}
        other = self.conflict(f"scenario.{result.id}", config, part)
        if other:
            raise MergeError(f"{where}: experiment.config_hash differs: scenario {result.name!r} ran with another "
                             f"configuration in {other}; rerun the shards on one configuration")


def merge_parts(parts: Sequence[str | os.PathLike[str]], results_dir: str | os.PathLike[str],
                experiment_id: str | None = None) -> Path:
    """Write the merged experiment into ``results_dir``; MergeError when the parts do not belong together."""
    if not parts:
        raise MergeError("no experiment parts given")
    heads: list[tuple[Path, ExperimentInfo]] = []
    lean: dict[Path, bool] = {}
    for ref in parts:
        path, info, lean[path] = _head(ref, results_dir)
        if heads:
            _check_identity(path, info, heads)
        heads.append((path, info))
    first = heads[0][1]
    merged = first.model_copy(update={
        "id": experiment_id or first.id, "shard": None, "config_hash": "", "criteria_hash": "", "topic_graph_hash": "",
        "interrupted": any(i.interrupted for _, i in heads),
        "iterations": max(i.iterations for _, i in heads),
        "tags": list(dict.fromkeys(t for _, i in heads for t in i.tags)),
    })
    configurations = _Configurations()
    spool = Spool(results_dir, merged.id, costing_of(merged))
    try:
        for path, _ in heads:
            for index, result in enumerate(_results(path, lean[path])):
                configurations.check(result, f"{path}: scenario_results[{index}]", str(path))
                spool.add(result)
        return spool.write(merged, results_dir)
    finally:
        spool.close()


def _head(ref: str | os.PathLike[str], results_dir: str | os.PathLike[str]) -> tuple[Path, ExperimentInfo, bool]:
    """A part's path, identity, and whether it is in the one-scenario-per-line layout."""
    try:
        path, doc = read_index(ref, results_dir, lambda rows: None)  # the header; entries are streamed later
        return path, info_from_experiment(doc["experiment"]), bool(doc.get("lean"))
    except ExperimentFileError as exc:
        raise MergeError(str(exc)) from None
    except ValidationError as exc:
        raise MergeError(f"{os.fspath(ref)}: experiment: {exc.errors()[0].get('msg', 'invalid')}") from None


def _check_identity(path: Path, info: ExperimentInfo, heads: list[tuple[Path, ExperimentInfo]]) -> None:
    first_path, head = heads[0]
    if info.id != head.id and (not info.name or info.name != head.name):
        raise MergeError(f"{path}: experiment.id: {info.id!r} (name {info.name!r}) is not the experiment of "
                         f"{first_path} ({head.id!r}, name {head.name!r}); merge parts of one run only")
    if info.git_commit != head.git_commit:
        raise MergeError(f"{path}: experiment.git_commit: {info.git_commit} differs from {head.git_commit} in "
                         f"{first_path}; merge parts that ran the same code")
    for other_path, other in heads:
        if info.shard and info.shard == other.shard:
            raise MergeError(f"{path}: experiment.shard: {info.shard} is also the shard of {other_path}; "
                             "give each shard's part once")


def _results(path: Path, lean: bool) -> Iterator[ScenarioResult]:
    """A part's results one at a time: line by line in the written layout, else from the whole file."""
    if not lean:
        try:
            yield from load_document(path)[1]
        except ExperimentFileError as exc:
            raise MergeError(str(exc)) from None
        return
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(_ENTRIES_START):
                break
        for index, line in enumerate(handle):
            text = line.rstrip().removesuffix(",")
            if text == "]":
                return
            try:
                yield result_from_entry(json.loads(text))
            except (ValueError, ValidationError) as exc:
                why = exc.errors()[0].get("msg", "invalid") if isinstance(exc, ValidationError) else "not valid JSON"
                raise MergeError(f"{path}: scenario_results[{index}]: {why}") from None
