"""A person's labels of judged checks and whole runs, saved next to the experiment in ``fabtest calibrate``'s format.

``fabtest view`` lets a reader mark a judged check right or wrong (with a comment) where they read
it. Each mark becomes one labelled example of ``<results>/<experiment id>.labels.yaml``: the
criterion, what the judge was shown (the turn's exchange, or the whole conversation for a check on
it), the person's verdict (the judge's, or its opposite when they marked it wrong) and, for the
record, the judge's verdict, the comment and where it came from. ``fabtest calibrate FILE`` reads
the file as it is (docs/view.md, "Review and label"), so labels made while reading become the
judge's calibration set. Marking the same check again replaces its label. A mark on a whole run
(``kind: conversation``, :func:`label_conversation`) says whether the run's outcome is right.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fabtest._internal import redaction
from fabtest._internal.datafile import read_data_file
from fabtest._internal.files import locked, write_text_atomic
from fabtest.errors import FabtestError
from fabtest.experiment.stats import LLM_JUDGED_TYPES
from fabtest.judging.agreement import cohen_kappa

__all__ = ["LabelError", "agreement", "as_goal", "judged_checks", "label_check", "label_conversation", "label_key",
           "labels_path", "read_labels"]

_ID = re.compile(r"[A-Za-z0-9_.-]+")


class LabelError(FabtestError, ValueError):
    """A label request that cannot be saved (the message says why)."""


def labels_path(results_dir: Path, experiment_id: str) -> Path:
    """``<results>/<id>.labels.yaml``; an id that is not a plain file name is refused, so the file
    is always inside the results directory."""
    if not _ID.fullmatch(experiment_id) or experiment_id.startswith("."):
        raise LabelError(f"experiment id {experiment_id!r} is not a plain file name")
    return results_dir / f"{experiment_id}.labels.yaml"


def judged_checks(entry: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """The checks of one run a person can label: the judge's (LLM-judged types) that passed or
    failed, with their index among the run's evaluations then expectations."""
    checks = [d for block in (entry.get("evaluations"), entry.get("expectations"))
              for d in ((block or {}).get("details", []) if isinstance(block, dict) else block or [])
              if isinstance(d, dict)]
    return [(i, c) for i, c in enumerate(checks)
            if c.get("type") in LLM_JUDGED_TYPES and c.get("status") in ("passed", "failed")]


def read_labels(path: Path) -> list[dict[str, Any]]:
    """The examples of a labels file, for showing them (none when it does not exist yet). A file that
    cannot be read shows none rather than taking the pages down; a click on it says what is wrong
    (:func:`label_check` refuses to write it)."""
    if not path.exists():
        return []
    try:
        data = read_data_file(path, LabelError)
    except LabelError:
        return []
    examples = data.get("examples") if isinstance(data, dict) else None
    return [x for x in examples or [] if isinstance(x, dict)]


def label_check(results_dir: Path, doc_head: Mapping[str, Any], entry: Mapping[str, Any], check: int,
                right: bool, comment: str = "") -> dict[str, Any]:
    """Save a person's mark on check ``check`` of ``entry`` (an index from :func:`judged_checks`)
    and return the label written."""
    found = dict(judged_checks(entry)).get(check)
    if found is None:
        raise LabelError(f"check {check} of {entry.get('id')} run {entry.get('iteration') or 1} is not a judged check "
                         "that passed or failed")
    judge = str(found["status"])
    turns = _turns(entry)
    turn = next((t for t in turns if t.get("number") == found.get("turn")), None)
    label: dict[str, Any] = {"criterion": str(found.get("criterion")), "verdict": judge if right else _opposite(judge)}
    if turn is not None:
        label.update(scope="response", user=str(turn.get("user") or ""), response=str(turn.get("agent") or ""))
    else:
        label.update(scope="conversation", transcript=_exchanges(turns))
    label.update(judge=judge, comment=comment.strip(), scenario=str(entry.get("id")),
                 iteration=int(entry.get("iteration") or 1), check=check)
    _save(results_dir, doc_head, label)
    return label


def label_conversation(results_dir: Path, doc_head: Mapping[str, Any], entry: Mapping[str, Any], right: bool,
                       comment: str = "") -> dict[str, Any]:
    """Save a person's mark on a whole run: is its outcome (passed or failed, fabtest's verdict on the
    run) right? The label's ``verdict`` is the outcome the person says the run deserves, ``judge``
    the recorded outcome. With the simulated user's ``goal`` the label also carries it, and
    ``fabtest calibrate`` judges the transcript again with the goal prompt (the judgement behind
    ``the goal must be achieved``); without one, against the scenario's Then steps."""
    if entry.get("skipped"):
        raise LabelError(f"run {entry.get('iteration') or 1} of {entry.get('id')} was skipped: no outcome to mark")
    turns = _turns(entry)
    if not turns:
        raise LabelError(f"run {entry.get('iteration') or 1} of {entry.get('id')} has no transcript to judge")
    outcome = "passed" if entry.get("passed") else "failed"
    goal = as_goal(entry)
    label: dict[str, Any] = {"kind": "conversation", "criterion": "goal achieved" if goal else "scenario outcome",
                             "verdict": outcome if right else _opposite(outcome), "scope": "conversation"}
    if goal:
        label["goal"] = goal
    else:
        steps = [st for st in entry.get("steps") or [] if isinstance(st, dict)]
        then = next((i for i, st in enumerate(steps) if st.get("keyword") == "Then"), len(steps))
        expected = [str(st.get("text")) for st in steps[then:]]  # the Then step and the And / But after it
        label["description"] = ("The agent does what the scenario " + repr(str(entry.get("name")))
                                + " expects" + (": " + "; ".join(expected) if expected else ""))
    label.update(transcript=_exchanges(turns), judge=outcome, comment=comment.strip(), scenario=str(entry.get("id")),
                 iteration=int(entry.get("iteration") or 1))
    _save(results_dir, doc_head, label)
    return label


def as_goal(entry: Mapping[str, Any]) -> str:
    """The simulated user's goal of a run ('' without a simulated user)."""
    sim = entry.get("simulator")
    return str(sim.get("goal") or "") if isinstance(sim, dict) else ""


def _opposite(verdict: str) -> str:
    return "failed" if verdict == "passed" else "passed"


def _turns(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [t for t in entry.get("transcript") or [] if isinstance(t, dict)]


def _exchanges(turns: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"user": str(t.get("user") or ""), "agent": str(t.get("agent") or "")} for t in turns]


def label_key(label: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a label is about: a run's check, or a whole run (marking it again replaces the label)."""
    if label.get("kind") == "conversation":
        return (label.get("scenario"), label.get("iteration"), "conversation")
    return (label.get("scenario"), label.get("iteration"), label.get("check"))


def _save(results_dir: Path, doc_head: Mapping[str, Any], label: dict[str, Any]) -> None:
    """Add ``label`` to the experiment's labels file, replacing the one about the same thing.

    The file is read and written back under its lock (two ``fabtest view`` servers on one results
    folder each keep every label they answered for); what it held stays: the other labels, the
    criteria written by hand (their descriptions win over the experiment's) and its leading comment.
    A file that is not a labels file is refused, never overwritten. Secrets are redacted first."""
    exp_id = str(doc_head["experiment"].get("id"))
    path = labels_path(results_dir, exp_id)
    config = doc_head.get("configuration")
    criteria = config.get("criteria") if isinstance(config, dict) else None
    criteria = criteria if isinstance(criteria, dict) else {}
    label.update(redaction.redact_obj(label))  # the caller returns it too: the answer holds no secret either
    with locked(path):
        head, body = _for_update(path)
        examples = [x for x in body.get("examples") or [] if label_key(x) != label_key(label)]
        examples.append(label)
        used = {str(x.get("criterion")) for x in examples}
        kept = dict(body.get("criteria") or {})
        kept.update({k: str(v) for k, v in criteria.items() if k in used and k not in kept and isinstance(v, str)})
        body = {**body, "criteria": kept, "examples": examples}
        own = f"# Labels of experiment {exp_id} made in fabtest view: fabtest calibrate {path.name}\n"
        text = (head or own) + yaml.dump(body, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        write_text_atomic(path, text)  # a reader never sees half a file


def _for_update(path: Path) -> tuple[str, dict[str, Any]]:
    """The labels file's leading comment lines and its data, checked: a file of another shape raises."""
    if not path.exists():
        return "", {}
    data = read_data_file(path, LabelError)
    text = path.read_text(encoding="utf-8-sig")
    head = "".join(line for line in _leading_comments(text))
    problem = ""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problem = f"it holds a {_kind(data)}"
    elif not isinstance(data.get("examples") or [], list):
        problem = f"'examples:' is a {_kind(data['examples'])}"
    elif any(not isinstance(x, dict) for x in data.get("examples") or []):
        problem = "an entry of 'examples:' is not a mapping"
    elif not isinstance(data.get("criteria") or {}, dict):
        problem = f"'criteria:' is a {_kind(data['criteria'])}"
    if problem:
        raise LabelError(f"{path}: not a labels file: {problem}; expected a mapping with 'examples:' (a list of "
                         "labels) and optionally 'criteria:' (name: description). The file was left as it is: fix "
                         "or move it, then mark again")
    return head, data


def _leading_comments(text: str) -> list[str]:
    """The comment lines a file starts with (kept as written when the file is written again)."""
    lines = []
    for line in text.split("\n"):
        if not line.startswith("#"):
            break
        lines.append(line + "\n")
    return lines


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "mapping"
    return "list" if isinstance(value, list) else f"scalar ({type(value).__name__})"


class _Dumper(yaml.SafeDumper):
    """YAML that reads back as written: a string holding a character YAML reads as a line break (NEL,
    LS, PS, CR) or another control character is written double-quoted, where it is escaped; plain
    style would fold it into a space."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    special = any(c in "\x85\u2028\u2029\r\ufeff" or (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0
                  for c in value)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if special else None)


_Dumper.add_representer(str, _represent_str)


def agreement(examples: list[dict[str, Any]]) -> dict[str, Any]:
    """How often the judge agreed with the labels so far: count, agreement rate and Cohen's kappa."""
    pairs = [(str(x.get("verdict")), str(x.get("judge"))) for x in examples if x.get("judge") in ("passed", "failed")]
    if not pairs:
        return {"labels": 0, "agreement": None, "kappa": None}
    people, judge = [p for p, _ in pairs], [j for _, j in pairs]
    return {"labels": len(pairs), "agreement": sum(p == j for p, j in pairs) / len(pairs),
            "kappa": cohen_kappa(people, judge)}
