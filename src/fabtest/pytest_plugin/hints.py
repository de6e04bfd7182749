"""What to write instead when a step matches no step definition.

pytest-bdd only says "Step definition is not found" and names the step by the *type* it looked up,
which for ``And``/``But`` is the keyword above it (``When "the response must ..."``). A user needs
the step as written, on its own line, and the likely fix: the same text under another keyword,
the quotes fabtest expects (double quotes, not 'single' or “smart” ones, and not none), or the
closest step of the vocabulary (built-in and the project's own steps, whatever pytest-bdd sees).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["UNMATCHED_KEY", "closest", "fail_on_unmatched_step", "unmatched_step_message"]

#: The one-line message for the step that matched nothing, set when pytest-bdd reports it.
UNMATCHED_KEY = pytest.StashKey[str]()
#: on a collector (a feature file): the (type, text) of its steps a definition was found for
_MATCHED_KEY = pytest.StashKey[set[tuple[str, str]]]()

_KEYWORDS = {"given": "Given", "when": "When", "then": "Then"}
_CONTINUATIONS = ("And", "But", "*")
_SMART = re.compile(r"[“”„‟«»]([^“”„‟«»\"]*)[“”„‟«»]|[‘‚]([^‘’‚]*)[’‘]")
_SINGLE = re.compile(r"(?<!\w)'([^']*)'(?!\w)")
_QUOTED = re.compile(r'"[^"]*"')
_TAIL = ("List every step with `fabtest steps`, or define your own (pytest-bdd @given/@when/@then) "
         "in a conftest.py")


def unmatched_step_message(node: pytest.Item, where: str, step: Any) -> str:
    """``where: no step definition matches this step (KEYWORD text); <hint>. <how to list steps>``, for the
    step of the scenario ``node`` (its visible step definitions are the ones a hint can propose)."""
    keyword = str(step.keyword).strip() or _KEYWORDS.get(step.type, "Step")
    try:
        hint = "; ".join(_hints(node, keyword, step))
    except Exception:  # a user's step parser that raises must not hide the real error
        hint = ""
    return (f"{where}: no step definition matches this step ({keyword} {step.name})"
            + (f"; {hint}" if hint else "") + f". {_TAIL}")


def fail_on_unmatched_step(request: pytest.FixtureRequest, feature: Any, scenario: Any, where: str) -> None:
    """Raise pytest-bdd's StepDefinitionNotFoundError for the scenario's first step no definition
    matches, with the message :func:`unmatched_step_message` words, before any step runs."""
    from pytest_bdd.exceptions import StepDefinitionNotFoundError
    from pytest_bdd.scenario import find_fixturedefs_for_step

    manager = request._fixturemanager  # as pytest-bdd finds a step's definition
    parent = request.node.parent
    # steps found for another item of the same file (its iterations, its other scenarios): pytest-bdd
    # looks through every fixture of the session for each step, which at 1,000 scenarios at once
    # was a twentieth of the run's work
    matched = parent.stash.setdefault(_MATCHED_KEY, set()) if parent is not None else set()
    for step in scenario.steps:
        if (step.type, step.name) in matched:
            continue
        if next(iter(find_fixturedefs_for_step(step, manager, request.node)), None) is None:
            message = unmatched_step_message(request.node, f"{where}{step.line_number}", step)
            request.node.stash[UNMATCHED_KEY] = message
            raise StepDefinitionNotFoundError(message)
        matched.add((step.type, step.name))


def _hints(node: pytest.Item, keyword: str, step: Any) -> list[str]:
    looked_up = _KEYWORDS.get(step.type, str(step.type).capitalize())
    steps = list(_visible_steps(node))
    hints: list[str] = []
    other = next((ctx for ctx in steps if ctx.type not in (None, step.type) and ctx.parser.is_matching(step.name)),
                 None)
    if other is not None:
        kind = _KEYWORDS.get(other.type, str(other.type))
        if keyword in _CONTINUATIONS:
            hints.append(f'"{keyword}" continues the {looked_up} step above, but this is a {kind} step: '
                         f"write {kind} {step.name}")
        else:
            hints.append(f"this is a {kind} step, not a {looked_up} step: write {kind} {step.name}")
    else:
        fixed = _requoted(step.name, step.type, steps)
        if fixed is not None:
            hints.append(f"did you mean: {looked_up} {fixed}? (quoted values use double quotes \"...\")")
        elif (hidden := _hidden_definition(step, steps)) is not None:
            hints.append(hidden)
        else:
            if _SMART.search(step.name) or _SINGLE.search(step.name):
                hints.append("quoted values use double quotes (\"...\"), not 'single' or “smart” quotes")
            near = closest(step.name, step.type, steps)
            if near:
                hints.append(f"closest step: {near}")
    return hints


def _hidden_definition(step: Any, visible: list[Any]) -> str | None:
    """Where a step definition that matches the step is written when this scenario cannot see it: a step
    defined in a test module is a fixture of that module only, not of the feature fabtest collects."""
    from pytest_bdd.steps import step_function_context_registry

    shown = {id(ctx) for ctx in visible}
    for ctx in list(step_function_context_registry.values()):
        if id(ctx) in shown or ctx.type not in (None, step.type) or not ctx.parser.is_matching(step.name):
            continue
        module = getattr(ctx.step_func, "__module__", "") or "a module"
        if module.startswith("pytest_bdd"):
            continue
        return (f"the step defined in {module} matches it, but only that module's tests see it: move it to a "
                "conftest.py (or set collect_features = false if test modules bind these features with scenarios())")
    return None


def closest(text: str, step_type: str, steps: list[Any]) -> str | None:
    """The example line of the step most like ``text`` (quoted values aside), or None if none is close."""
    wanted = _shape(_normalised(text))
    best: tuple[float, str] | None = None
    for ctx in steps:
        if ctx.type not in (None, step_type):
            continue
        for example in _examples(ctx):
            body = example.split(" ", 1)[1] if example.split(" ", 1)[0] in _KEYWORDS.values() else example
            score = difflib.SequenceMatcher(None, wanted, _shape(body)).ratio()
            if best is None or score > best[0]:
                best = (score, example if example != body else f"{_KEYWORDS.get(step_type, '')} {body}".strip())
    return best[1] if best is not None and best[0] >= 0.6 else None


def _requoted(text: str, step_type: str, steps: list[Any]) -> str | None:
    """``text`` with its quotes fixed so that a step matches it, if one simple fix does."""
    candidates = [_normalised(text)] if _normalised(text) != text else []
    if '"' not in text:
        words = text.split(" ")
        for i in range(1, len(words)):  # quote the rest of the line, then one word
            candidates.append(" ".join(words[:i]) + ' "' + " ".join(words[i:]) + '"')
        for i in range(1, len(words)):
            candidates.append(" ".join([*words[:i], f'"{words[i]}"', *words[i + 1:]]))
    for candidate in candidates:
        if any(ctx.type in (None, step_type) and ctx.parser.is_matching(candidate) for ctx in steps):
            return candidate
    return None


def _normalised(text: str) -> str:
    """Smart and single quotes around a value become double quotes."""
    text = _SMART.sub(lambda m: '"' + (m.group(1) if m.group(1) is not None else m.group(2)) + '"', text)
    return _SINGLE.sub(lambda m: '"' + m.group(1) + '"', text)


def _shape(text: str) -> str:
    return _QUOTED.sub('""', text).lower()


def _examples(ctx: Any) -> list[str]:
    from pytest_bdd import parsers

    from fabtest.pytest_plugin.vocabulary import BUILTIN_EXAMPLES, BUILTIN_MODULES, readable_pattern

    func = ctx.step_func
    if getattr(func, "__module__", "") in BUILTIN_MODULES:
        example = BUILTIN_EXAMPLES.get(getattr(func, "__name__", ""))
        return [example, *_other_forms(example, ctx)] if example else []
    pattern = getattr(ctx.parser, "name", None)
    if pattern and isinstance(ctx.parser, parsers.re):  # the project's regex step, as a line one would write
        return [readable_pattern(str(pattern))]
    return [str(pattern)] if pattern else []


_MODAL = re.compile(r"\b(must|should)( not)?\b")


def _other_forms(example: str, ctx: Any) -> list[str]:
    """The example with its "must"/"should" and "not" changed, for each form the step also accepts: one
    example per step (``must not match``) made ``must mach`` look closest to ``must not match``."""
    keyword, _, body = example.partition(" ")
    forms = []
    for modal in ("must", "must not", "should", "should not"):
        other = _MODAL.sub(modal, body, count=1)
        if other != body and ctx.parser.is_matching(other):
            forms.append(f"{keyword} {other}")
    return forms


def _visible_steps(node: pytest.Item) -> Iterator[Any]:
    """The step definitions pytest-bdd could use for this item (fabtest's, conftests', modules')."""
    from pytest_bdd.compat import get_fixture_names, getfixturedefs
    from pytest_bdd.steps import StepNamePrefix, step_function_context_registry

    manager = node.session._fixturemanager  # pytest-bdd looks its steps up the same way
    seen: set[int] = set()
    for name in get_fixture_names(manager):
        if not name.startswith(StepNamePrefix.step_def.value):
            continue
        for fixturedef in getfixturedefs(manager, name, node) or ():
            ctx = step_function_context_registry.get(fixturedef.func)
            if ctx is None or id(ctx) in seen or getattr(ctx.step_func, "__module__", "").startswith("pytest_bdd"):
                continue
            seen.add(id(ctx))
            yield ctx
