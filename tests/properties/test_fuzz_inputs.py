"""Fuzzing what users and other tools hand to fabtest: feature text, playbooks and results files.

Whatever the input, the answer is a result or a one-line error: never a traceback, never an
INTERNALERROR, exit codes only from the contract (0 ok, 1 a gate or a test failed, 2 bad input;
pytest adds 4 for a usage error and 5 for nothing collected). Examples are bounded so the whole
file stays well under 30 s.
"""

from __future__ import annotations

import copy
import json
import os
import re
import textwrap
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fabtest.cli import compare_main, main

#: FABTEST_FUZZ_EXAMPLES=500 fuzzes longer, with fresh random examples (the default run is repeatable).
_LONG = int(os.environ.get("FABTEST_FUZZ_EXAMPLES", "0") or 0)
#: The default run does not shrink a failing example (time); a long run does, to report a minimal one.
_PHASES = list(Phase) if _LONG else [Phase.explicit, Phase.reuse, Phase.generate]
FUZZ = settings(max_examples=_LONG or 25, deadline=None, derandomize=not _LONG, phases=_PHASES,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
SLOW_FUZZ = settings(FUZZ, max_examples=max(1, _LONG // 2) if _LONG else 12)
#: A traceback in any form: Python's, pytest's INTERNALERROR, or a frame line of pytest's short report.
_TRACE = re.compile(r"Traceback \(most recent call last\)|INTERNALERROR|\S+\.py:\d+: in \S+")

# -- pieces ------------------------------------------------------------------------------------------
_word = st.text(alphabet="abcdefghij XYZ_-:0123456789", min_size=0, max_size=12)
_wild = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
#: Tags users write, and pytest's own marker names, which a tag becomes.
_tag = st.one_of(_word, st.sampled_from(["wip", "_wip", "parametrize", "skip", "xfail", "usefixtures", "skipif",
                                         "filterwarnings", "slow", "a-b", "1x", "scenario_set:missing", "owner:"]))
_quoted = st.one_of(_word, _wild, st.sampled_from(['"', '\\"', "(", "[a-", "*", "\\", "${X}", "<p>", "é€😀"]))


def _step(draw: st.DrawFn) -> str:
    """A fabtest step (or a near miss) with odd arguments, sometimes followed by a table or docstring."""
    q = draw(_quoted)
    mode = draw(st.sampled_from(["should", "must", "shall"]))
    keyword = draw(st.sampled_from(["Given", "When", "Then", "And", "But", "*"]))
    step = draw(st.sampled_from([
        f'the agent "{q}"', f'the criterion "{q}" means "{q}"', "the criteria:", "the topics:",
        f'a simulated user with the goal "{q}"', f"the simulation takes at most {q} turns",
        f'the user says "{q}"', "the user says:", "the simulated user talks to the agent",
        f'the response {mode} match "{q}"', f'the response {mode} not match "{q}"',
        f'the response {mode} satisfy "{q}"', f'the agent {mode} call "{q}"', f'the agent {mode} call "{q}" with:',
        f"the conversation {mode} take at most {q} turns", f'the transcript {mode} contain "{q}"',
        f'the file "{q}" {mode} exist', f'the conversation {mode} reach the topic "{q}"', q,
    ]))
    lines = [f"    {keyword} {step}"]
    if step.endswith(":") or draw(st.integers(0, 5)) == 0:
        if draw(st.booleans()):
            header = draw(st.sampled_from(["criterion | description", "argument | value", "fact | value",
                                           "topic | characteristic | triggers | next", "a"]))
            lines.append(f"      | {header} |")
            for _ in range(draw(st.integers(0, 2))):
                cells = draw(st.lists(_quoted.map(lambda c: c.replace("|", "\\|").replace("\n", " ")),
                                      min_size=1, max_size=4))
                lines.append("      | " + " | ".join(cells) + " |")
        else:
            lines += ['      """', f"      {draw(_quoted)}", '      """']
    return "\n".join(lines)


def _tags(draw: st.DrawFn, indent: str) -> list[str]:
    tags = draw(st.lists(_tag, max_size=2))
    return [indent + " ".join(f"@{t}" for t in tags)] if tags else []


@st.composite
def feature_texts(draw: st.DrawFn) -> str:
    """A Feature with an optional Background and a few scenarios, then a few lines broken or inserted."""
    lines = [*_tags(draw, ""), f"Feature: {draw(_quoted)}"]
    if draw(st.booleans()):
        lines += ["  Background:", *(draw(st.composite(_step)()) for _ in range(draw(st.integers(1, 2))))]
    for _ in range(draw(st.integers(1, 3))):
        outline = draw(st.integers(0, 4)) == 0
        lines += [*_tags(draw, "  "), f"  Scenario{' Outline' if outline else ''}: {draw(_quoted)}"]
        lines += [draw(st.composite(_step)()) for _ in range(draw(st.integers(0, 4)))]
        if outline:
            lines += ["    Examples:", "      | x |", f"      | {draw(_word)} |"]
    text = "\n".join(lines).split("\n")
    for _ in range(draw(st.integers(0, 2))):  # damage: drop, duplicate or insert a line
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["drop", "dup", "insert"]))
        if action == "insert":
            text.insert(at, draw(st.sampled_from(["Scenario without colon", "Examples:", "Rule: r", "|", '"""',
                                                  "Feature: again", "\ufeff", "\t", ""])) + draw(_word))
        elif text and at < len(text):
            text[at:at + 1] = [] if action == "drop" else [text[at], text[at]]
    prefix = draw(st.sampled_from(["", "", "\ufeff", "# language: en\n"]))
    return prefix + "\n".join(text) + "\n"


# -- feature text through a real pytest run -------------------------------------------------------------
PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "fuzzbot:echo"
results_dir = "results"
agent_timeout = 5
scenario_timeout = 10
"""
FUZZBOT = "def echo(context):\n    return lambda messages: 'echo: ' + str(messages[-1].content)[:200]\n"
_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_AGENT",
        "FABTEST_RESULTS_DIR", "FABTEST_LLM_CACHE")
_RUNS = count()


@pytest.fixture
def fuzz_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    pytester.makefile(".toml", pyproject=textwrap.dedent(PYPROJECT))
    (pytester.path / "fuzzbot.py").write_text(FUZZBOT, encoding="utf-8")
    return pytester


def _assert_clean_pytest(result: pytest.RunResult, text: str) -> None:
    output = result.stdout.str() + "\n" + result.stderr.str()
    assert result.ret in (0, 1, 2, 4, 5), f"exit {result.ret} for\n{text}\n{output[-3000:]}"
    found = _TRACE.search(output)
    assert found is None, f"{found.group(0) if found else ''} for\n{text}\n{output[-3000:]}"


@SLOW_FUZZ
@given(text=feature_texts())
def test_feature_text_never_crashes_a_run(fuzz_project: pytest.Pytester, text: str) -> None:
    folder = fuzz_project.path / f"run{next(_RUNS)}"
    folder.mkdir()
    (folder / "fuzz.feature").write_text(text, encoding="utf-8")
    result = fuzz_project.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                    "--fabtest-no-results", str(folder))
    _assert_clean_pytest(result, text)


# -- playbooks through `fabtest run` ------------------------------------------------------------------
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=False), _word, _wild)
_json = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(_word, inner, max_size=3)), max_leaves=8)
_KEYS = ["name", "description", "steps", "user_input", "expected_outcome", "env", "link_paths", "persona",
         "success_criteria", "files_exist", "files_contain", "max_turns", "timeout", "agent_model", "tags"]


@st.composite
def playbooks(draw: st.DrawFn) -> Any:
    """A playbook close to the schema, with a few fields replaced, dropped or added."""
    doc: dict[str, Any] = {
        "name": draw(st.sampled_from(["fuzz", "", "a b", "x" * 300])),
        "steps": [{"user_input": draw(_word), "expected_outcome": draw(_word)}
                  for _ in range(draw(st.integers(0, 2)))],
    }
    steps = doc["steps"]
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(_KEYS))
        target = doc if not steps or draw(st.booleans()) else steps[0]
        if draw(st.booleans()):
            target[key] = draw(_json)
        else:
            target.pop(key, None)
    return draw(st.one_of(st.just(doc), st.just(doc), _json))


def _one_line_errors(err: str, prog: str) -> None:
    lines = err.splitlines()
    assert lines, "no error message"
    assert all(line.startswith(f"{prog}: error: ") for line in lines), err
    assert "Traceback" not in err


@FUZZ
@given(doc=playbooks(), as_yaml=st.booleans())
def test_a_playbook_file_is_run_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], doc: Any,
                                                       as_yaml: bool) -> None:
    root = tmp_path_factory.mktemp("pb")
    monkeypatch.chdir(root)
    monkeypatch.setenv("FABTEST_GEMINI_CLI", str(root / "no-such-cli"))  # pre-flight stops a valid one: nothing runs
    for name in _ENV + ("FABTEST_PLAYBOOK_AGENT",):
        monkeypatch.delenv(name, raising=False)
    path = root / ("fuzz.playbook.yaml" if as_yaml else "fuzz.playbook.json")
    path.write_text(yaml.safe_dump(doc) if as_yaml else json.dumps(doc), encoding="utf-8")
    capsys.readouterr()
    code = main(["run", str(path)])
    out, err = capsys.readouterr()
    assert code == 2, (code, doc, out, err)
    _one_line_errors(err, "fabtest run")
    assert "[1/" not in out  # refused before anything ran


# -- results files through show / report / compare ----------------------------------------------------
def _valid_doc() -> dict[str, Any]:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "experiment"))
    from support.experiments import make_doc, make_result

    return make_doc("exp_fuzz01", [make_result("a"), make_result("b", passed=False), make_result("c", turns=4)])


_VALID = _valid_doc()


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):
            found += _paths(value, prefix + (index,))
    return found


_ALL_PATHS = _paths(_VALID)
#: The header and summary are read by every command: mutate them more often than a transcript line.
_TOP_PATHS = [p for p in _ALL_PATHS if p[0] != "scenario_results" or len(p) <= 3]
_ODD = st.sampled_from(["a", "<script>x</script>", [1], {}, None, -1, 1e308, True, "99", ""])


@st.composite
def results_docs(draw: st.DrawFn) -> Any:
    """A valid experiment with a few values replaced or removed, or something else entirely."""
    doc = copy.deepcopy(_VALID)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.one_of(st.sampled_from(_TOP_PATHS), st.sampled_from(_ALL_PATHS)))
        parent: Any = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(st.one_of(_ODD, _json))
        except (KeyError, IndexError, TypeError):
            continue
    return draw(st.one_of(st.just(doc), st.just(doc), st.just(doc), _json))


@FUZZ
@given(doc=results_docs(), command=st.sampled_from(["show", "report", "compare"]))
def test_a_results_file_is_shown_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                        capsys: pytest.CaptureFixture[str], doc: Any,
                                                        command: str) -> None:
    results = tmp_path_factory.mktemp("results")
    (results / "exp_good01.json").write_text(json.dumps(_VALID | {"experiment": {**_VALID["experiment"],
                                                                                "id": "exp_good01"}}))
    (results / "exp_fuzz01.json").write_text(json.dumps(doc), encoding="utf-8")
    capsys.readouterr()
    try:
        if command == "compare":
            code, prog = compare_main(["exp_good01", "exp_fuzz01", "--results-dir", str(results)]), "fabtest-compare"
        else:
            code, prog = main([command, "exp_fuzz01", "--results-dir", str(results)]), "fabtest"
    except SystemExit as exc:  # argparse only
        code, prog = int(exc.code or 0), "fabtest"
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        _one_line_errors(err, prog)
    assert "Traceback" not in out + err
    if command == "report" and code == 0:
        html = (results / "exp_fuzz01.html").read_text(encoding="utf-8")
        assert "<script>x</script>" not in html
