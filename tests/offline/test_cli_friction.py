"""``fabtest steps`` lists the whole vocabulary; ``fabtest run`` imports the project root like pytest."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from pytest_bdd.steps import step_function_context_registry

import fabtest.pytest_plugin.file_steps as file_steps
import fabtest.pytest_plugin.pause_steps as pause_steps
import fabtest.pytest_plugin.steps as builtin_steps
import fabtest.pytest_plugin.tool_steps as tool_steps
import fabtest.pytest_plugin.voice_steps as voice_steps
from fabtest.cli import main
from fabtest.pytest_plugin.vocabulary import BUILTIN_EXAMPLES, BUILTIN_VARIANTS


def _builtin_contexts() -> dict[str, object]:
    contexts = {}
    for module, name in [(m, n) for m in (builtin_steps, tool_steps, file_steps, pause_steps, voice_steps) for n in dir(m)]:
        fixture = getattr(module, name)
        if name.startswith("pytestbdd_stepdef_"):
            func = getattr(fixture, "_get_wrapped_function", lambda: fixture)()
            context = step_function_context_registry.get(func)
            if context is not None:
                contexts[context.step_func.__name__] = context
    return contexts


def test_every_builtin_step_has_an_example_that_its_own_step_matches() -> None:
    contexts = _builtin_contexts()
    assert contexts, "no built-in steps found"
    assert set(contexts) == set(BUILTIN_EXAMPLES)
    for name, example in BUILTIN_EXAMPLES.items():
        context = contexts[name]
        keyword, text = example.split(" ", 1)
        assert keyword.lower() == context.type, example  # type: ignore[attr-defined]
        assert context.parser.is_matching(text), f"{name}: {example!r}"  # type: ignore[attr-defined]


def test_every_listed_variant_is_matched_by_its_own_step() -> None:
    """`every response ... satisfy`, `must not call`, `should "..."`: listed, and each one really works."""
    contexts = _builtin_contexts()
    assert set(BUILTIN_VARIANTS) <= set(contexts)
    for name in ("_then_satisfy", "_then_call", "_given_rule"):
        assert BUILTIN_VARIANTS[name]
    for name, variants in BUILTIN_VARIANTS.items():
        for variant in variants:
            keyword, text = variant.split(" ", 1)
            assert keyword.lower() == contexts[name].type, variant  # type: ignore[attr-defined]
            assert contexts[name].parser.is_matching(text), f"{name}: {variant!r}"  # type: ignore[attr-defined]


@pytest.fixture
def steps_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest]\nagent = "fabtest.demo:build_agent"\n', encoding="utf-8")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "order.feature").write_text(textwrap.dedent("""
        Feature: Pizza
          Scenario: Order
            When the user says "a large pepperoni"
            Then the pizza must be "pepperoni"
    """), encoding="utf-8")
    (tmp_path / "conftest.py").write_text(textwrap.dedent('''
        from pytest_bdd import given, parsers, then


        @then(parsers.parse('the pizza {mode} be "{kind}"'))
        def pizza_is(fabtest_scenario, mode, kind):
            pass


        @given("the oven is hot")
        def oven():
            """Given the oven is hot"""
    '''), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_fabtest_steps_lists_builtin_and_project_steps_with_an_example(steps_project: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["steps"]) == 0
    out = capsys.readouterr().out
    assert f"Built-in steps (fabtest): {len(BUILTIN_EXAMPLES)}" in out
    for example in BUILTIN_EXAMPLES.values():
        assert f"  {example}\n" in out
    assert 'also: Then every response must satisfy "concise"' in out
    assert 'also: Then the agent must not call "book_venue"' in out
    assert "Project steps: 2" in out
    assert 'Then the pizza must be "pepperoni"    [conftest.py:' in out  # example from the collected feature
    assert "Given the oven is hot    [conftest.py:" in out  # example from the docstring
    assert " trace" not in out  # pytest-bdd's own debugging step is not vocabulary


def test_fabtest_steps_survives_a_feature_that_does_not_collect(steps_project: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (steps_project / "features" / "broken.feature").write_text(
        "Feature: Broken\n  Scenario: Twice\n    When the user says \"a\"\n  Scenario: Twice\n"
        "    When the user says \"b\"\n", encoding="utf-8")
    assert main(["steps"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Built-in steps (fabtest):")  # no test ids, no warnings before the listing
    assert 'Then the pizza must be "pepperoni"' in captured.out  # the other features still give examples
    assert "::" not in captured.out + captured.err and "PytestAssertRewriteWarning" not in captured.out + captured.err
    assert "features/broken.feature:4" in captured.err and "did not collect" in captured.err


def test_fabtest_steps_reports_a_broken_conftest_in_one_line(steps_project: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (steps_project / "conftest.py").write_text("import no_such_module_here\n", encoding="utf-8")
    assert main(["steps"]) == 2
    err = capsys.readouterr().err
    assert "no_such_module_here" in err and err.strip().splitlines()[-1].startswith("fabtest steps: error:")


def test_fabtest_run_imports_the_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    """`playbook_agent = "pkg.bot:build"` and an offline_llm of the project import without PYTHONPATH=."""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "FABTEST_PLAYBOOK_AGENT", "PYTHONPATH", "FABTEST_RESULTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    package = tmp_path / "rootpkg_offline"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "bot.py").write_text("def build(context):\n    return lambda messages: 'Hello! Booked.'\n",
                                    encoding="utf-8")
    (package / "judge.py").write_text(
        "from fabtest.testing import FakeLLM\n\ndef llm():\n    return FakeLLM().verdicts(default='passed')\n",
        encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.fabtest]
        playbook_agent = "rootpkg_offline.bot:build"
        offline_llm = "rootpkg_offline.judge:llm"
    """), encoding="utf-8")
    (tmp_path / "hello.playbook.yaml").write_text(
        "name: hello\nsteps:\n  - user_input: hi\n    expected_outcome: The agent greets\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m.startswith("rootpkg_offline")]:
        monkeypatch.delitem(sys.modules, name)
    code = main(["run", "hello.playbook.yaml", "--experiment-id", "exp_root"])
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert "PASSED" in out and "Judge:      fake / scripted" in out
