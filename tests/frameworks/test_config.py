"""One table key per framework: the one-line errors a user meets before any scenario runs."""

from __future__ import annotations

import pytest

from fabtest.agents import frameworks
from fabtest.errors import UsageError

from .helpers import build


@pytest.mark.parametrize(("key", "extra"), [("adk", "adk"), ("langgraph", "langgraph"),
                                            ("openai_agents", "openai-agents"), ("pydantic_ai", "pydantic-ai")])
def test_a_missing_extra_is_one_line_naming_the_pip_install(key: str, extra: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frameworks, "installed_version", lambda dist: None)
    with pytest.raises(UsageError) as caught:
        build(key, "shop:agent")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("pyproject.toml: [tool.fabtest.agents.shop]: ")
    assert message.endswith(f"is not installed: pip install 'pytest-fabtest[{extra}]'")


@pytest.mark.parametrize("key", sorted(frameworks.FRAMEWORKS))
@pytest.mark.parametrize("version", ["0.0.1", "99.0", "not-a-version"])
def test_an_unsupported_version_is_one_line_naming_the_supported_range(key: str, version: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    framework = frameworks.FRAMEWORKS[key]
    monkeypatch.setattr(frameworks, "installed_version", lambda dist: version if dist == framework.dist else None)
    with pytest.raises(UsageError, match=r"^[^\n]*$") as caught:
        build(key, "shop:agent")
    assert f"{framework.dist} {version} is installed" in str(caught.value)
    assert f"supports {framework.dist}>={framework.minimum},<{framework.below}" in str(caught.value)


def test_the_supported_ranges_are_the_extras_pins() -> None:
    """The range an adapter accepts is the one its extra installs (pyproject.toml), so they cannot drift."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for framework in frameworks.FRAMEWORKS.values():
        assert framework.supported in extras[framework.extra], framework.key


def test_unknown_keys_and_two_frameworks_are_named() -> None:
    with pytest.raises(UsageError, match=r"unknown key 'modle' for a PydanticAI agent \(allowed: pydantic_ai, context, model, tools\)"):
        build("pydantic_ai", "shop:agent", modle="x")
    # the article is the name's: "for a the OpenAI Agents SDK agent" was the pre-flight's line
    with pytest.raises(UsageError, match=r"unknown key 'modle' for an OpenAI Agents SDK agent \("):
        build("openai_agents", "shop:agent", modle="x")
    with pytest.raises(UsageError, match=r"give one of adk, langgraph, openai_agents, pydantic_ai, got adk and langgraph"):
        build("adk", "a:b", langgraph="c:d")
    with pytest.raises(UsageError, match=r"model must be a string"):
        build("langgraph", "a:b", model=3)


def test_a_feature_run_without_the_extra_says_which_extra_to_install(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frameworks, "installed_version", lambda dist: None)
    pytester.makefile(".toml", pyproject='[tool.fabtest]\nresults_dir = "results"\n'
                                         '[tool.fabtest.agents.shop]\nlanggraph = "shop:graph"\n')
    pytester.makefile(".feature", shop='Feature: Shop\n  Scenario: Hello\n    Given the agent "shop"\n'
                                       '    When the user says "hi"\n    Then the response must match "hi"\n')
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret != 0
    # the pre-flight says it before the first scenario (a table that cannot build stops the run)
    out = result.stdout.str() + result.stderr.str()
    assert ("[tool.fabtest.agents] shop: langgraph needs LangGraph (langgraph), which is not installed: "
            "pip install 'pytest-fabtest[langgraph]'") in out


def test_a_misspelt_target_stops_the_run_in_the_preflight_with_a_did_you_mean(pytester: pytest.Pytester,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, every scenario failed one by one and a 0 % experiment was written (issue 31).

    The target is checked before LangGraph is imported, so this runs without the langgraph extra (with
    only '.[dev]' it said "needs LangGraph" instead, and failed the README's test command): the
    installed version is stubbed as the lowest supported one."""
    framework = frameworks.FRAMEWORKS["langgraph"]
    monkeypatch.setattr(frameworks, "installed_version", lambda dist: framework.minimum if dist == framework.dist else None)
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nresults_dir = "results"\n'
                                         '[tool.fabtest.agents.shop]\nlanggraph = "shop:grpah"\n')
    pytester.makepyfile(shop="graph = object()\n")
    feature = 'Feature: Shop\n  Scenario: S{n}\n    Given the agent "shop"\n    When the user says "hi"\n'
    pytester.makefile(".feature", shop="".join(feature.replace("Feature: Shop\n", "Feature: Shop\n" if n == 1 else "")
                                               .format(n=n) for n in (1, 2)))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != 0
    assert "ERROR: fabtest pre-flight: [tool.fabtest.agents] shop: langgraph: agent 'shop:grpah': module 'shop' has no " \
           "attribute 'grpah' (did you mean 'graph'?)" in out
    assert not (pytester.path / "results").exists() or not list((pytester.path / "results").glob("exp_*.json"))
