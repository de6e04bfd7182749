"""The steps about files in the conversation (docs/how-to/files.md): sending files, giving them to
the simulated user, and checking the files the agent replies with.

A module of its own beside ``steps.py`` (registered the same way): the files' words in one place.
The files a step names are checked at collection (``collect.py`` calls :func:`check_feature_files`),
so a missing one stops the run before any scenario starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_bdd import given, parsers, then, when

from fabtest.engine import attachments as att
from fabtest.engine import checks
from fabtest.engine.file_checks import check_reply_files, file_text, matching_files
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import UsageError

__all__ = ["check_feature_files"]

MODE = r"(?P<mode>should|must)"
_PLACEHOLDER = re.compile(r"<[^<>]+>")


@when(parsers.re(att.FILE_STEP.pattern))
def _when_sends(fabtest_scenario: ScenarioState, files: str, text: str) -> None:
    refs = [att.FileRef(p) for p in att.parse_file_list(files)]
    fabtest_scenario.user_sends(text.replace('\\"', '"'), refs)


@when(parsers.re(att.FILES_TABLE_STEP.pattern))
def _when_sends_table(fabtest_scenario: ScenarioState, text: str, datatable: list[list[str]] | None = None) -> None:
    refs = att.table_files(datatable or [], where=fabtest_scenario.where)
    fabtest_scenario.user_sends(text.replace('\\"', '"'), refs)


@given(parsers.re(att.HAS_FILES_STEP.pattern))
def _given_has_files(fabtest_scenario: ScenarioState, files: str) -> None:
    fabtest_scenario.give_files([att.FileRef(p) for p in att.parse_file_list(files)])


@then(parsers.re(r'the agent ' + MODE + r' (?P<neg>not )?reply with (?P<what>a file|an image)'
                 r'(?: matching "(?P<pattern>[^"]*)")?'))
def _then_reply_file(fabtest_scenario: ScenarioState, mode: str, neg: str | None, what: str,
                     pattern: str | None) -> None:
    state = fabtest_scenario
    turn = state.last_turn
    result = check_reply_files(turn.response.attachments, image=what == "an image", pattern=pattern)
    passed, details = result
    kind = "not_reply_file" if neg else "reply_file"
    label = f"{kind}:{'image' if what == 'an image' else 'file'}{':' + pattern if pattern else ''}"
    state.deterministic(kind, "must" if mode == "must" else "should", label, (passed != bool(neg), details),
                        turn=turn.number)


@then(parsers.re(r"the agent's file " + r'"(?P<pattern>[^"]*)" ' + MODE + r' (?P<neg>not )?(?P<verb>contain|match) '
                 r'"(?P<text>.*)"'))
def _then_file_text(fabtest_scenario: ScenarioState, pattern: str, mode: str, neg: str | None, verb: str,
                    text: str) -> None:
    """The text of the file(s) the last reply carried whose name matches ``pattern`` (``*.pdf``)."""
    state = fabtest_scenario
    turn = state.last_turn
    found = matching_files(turn.response.attachments, pattern=pattern)
    kind = f"{'not_' if neg else ''}file_{verb}"
    if not found:
        passed, details = False, check_reply_files(turn.response.attachments, pattern=pattern)[1]
    else:
        texts = [t for f in found if (t := file_text(f)) is not None]
        if not texts:
            passed, details = False, f"{', '.join(f.describe() for f in found)} holds no text"
        elif verb == "match":
            regex = checks.compile_regex(text, where=state.where)
            passed, details = checks.check_regex("\n".join(texts), regex, where=state.where)
            passed = passed != bool(neg)
        else:
            has = any(text in t for t in texts)
            passed = has != bool(neg)
            details = f"{', '.join(f.name for f in found)} {'contains' if has else 'does not contain'} {text!r}"
    state.deterministic(kind, "must" if mode == "must" else "should", f"{kind}:{pattern}:{text}", (passed, details),
                        turn=turn.number)


def check_feature_files(feature_path: Path, steps: list[tuple[str, int, Any]], loader: att.FileLoader,
                        where_prefix: str) -> str | None:
    """The first problem with a file a feature's steps name, as ``file:line: ...``, or None.

    ``steps`` holds ``(text, line, datatable rows or None)``; each file is loaded (and kept by
    ``loader`` for the run, so checking it here costs no second read later).
    """
    base = feature_path.parent
    for text, line, rows in steps:
        where = f"{where_prefix}:{line}"
        try:
            refs = att.files_in_step(text, rows, where=where)
            refs = [r for r in refs or [] if not _PLACEHOLDER.search(r.path)]  # an outline's: checked when run
            if refs:
                loader.load_all(base, refs, where=where)
        except UsageError as exc:
            return f"{exc} (step: {text.strip()})"
    return None
