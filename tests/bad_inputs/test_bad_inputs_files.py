"""Bad files and options of the file-handling areas (issue 10): playbooks, scenario sets, settings,
experiment files and journals. Each case goes through a real entry point (``fabtest run``,
``fabtest-compare``/``report``/``recover``, the pytest plugin, the scenario-set loader) and must
give ONE line naming the file (or option) and the place, with the documented exit code, and never
a traceback. Inputs are inline here (each case is a few lines) so the corpus stays readable.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import compare_main, main

STEPS = {"name": "ok", "steps": [{"user_input": "hi", "expected_outcome": "hello"}]}
GOOD_EXP = {"format_version": 1, "experiment": {"id": "exp_good"}, "summary": {"total_scenarios": 0},
            "scenario_results": []}


def _persona(criteria: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "p", "persona": {"context": "c", "initial_user_input": "hi", "success_criteria": criteria, **extra}}


def _bomb(levels: int = 9) -> str:
    text = 'name: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for n in "bcdefghijk"[:levels - 1]:
        text += f"{n}: &{n} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = n
    return text


@dataclass
class Case:
    kind: str  # playbook | run_option | scenario_set | settings | pytest | experiment | report | journal
    file: str
    content: str | bytes | dict[str, Any] | list[Any]
    expected: tuple[str, ...]
    args: tuple[str, ...] = ()
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int = 2


def _escape_link(root: Path) -> None:
    (root / "repo_link").symlink_to("/etc")  # a link inside the repository to a directory outside it


CASES: dict[str, Case] = {
    # -- playbooks, through `fabtest run` (exit 2, before anything runs) ----------------------------
    "playbook/files_exist_escaping": Case("playbook", "pb.json", _persona({"files_exist": ["../../../../etc/shadow"]}),
                                          ("pb.json", "persona.success_criteria.files_exist[0]", "outside the workspace")),
    "playbook/files_exist_absolute": Case("playbook", "pb.json", _persona({"files_exist": ["/etc/shadow"]}),
                                          ("pb.json", "files_exist[0]", "is absolute")),
    "playbook/files_exist_second_absolute": Case("playbook", "pb.yaml", _persona({"files_exist": ["a.txt", "/etc/passwd"]}),
                                                 ("pb.yaml", "files_exist[1]", "is absolute")),
    "playbook/files_exist_dotdot_middle": Case("playbook", "pb.json", _persona({"files_exist": ["a/../../b"]}),
                                               ("pb.json", "files_exist[0]", "outside the workspace")),
    "playbook/files_exist_windows_drive": Case("playbook", "pb.json", _persona({"files_exist": ["C:\\Windows\\win.ini"]}),
                                               ("pb.json", "files_exist[0]", "is absolute")),
    "playbook/files_exist_unc": Case("playbook", "pb.json", _persona({"files_exist": ["\\\\server\\share\\x"]}),
                                     ("pb.json", "files_exist[0]", "is absolute")),
    "playbook/files_exist_home": Case("playbook", "pb.json", _persona({"files_exist": ["~/.ssh/id_rsa"]}),
                                      ("pb.json", "files_exist[0]", "is absolute")),
    "playbook/files_exist_empty": Case("playbook", "pb.json", _persona({"files_exist": [" "]}),
                                       ("pb.json", "files_exist[0]", "empty path")),
    "playbook/files_contain_absolute": Case("playbook", "pb.json", _persona({"files_contain": {"/etc/hostname": ["x"]}}),
                                            ("pb.json", 'files_contain["/etc/hostname"]', "is absolute")),
    "playbook/files_contain_escaping": Case("playbook", "pb.json", _persona({"files_contain": {"../../x.txt": ["x"]}}),
                                            ("pb.json", 'files_contain["../../x.txt"]', "outside the workspace")),
    "playbook/link_paths_absolute": Case("playbook", "pb.json", {**STEPS, "tmpdir": {"link_paths": ["/etc"]}},
                                         ("pb.json", "tmpdir.link_paths[0]", "is absolute")),
    "playbook/link_paths_escaping": Case("playbook", "pb.json", {**STEPS, "tmpdir": {"link_paths": ["../.."]}},
                                         ("pb.json", "tmpdir.link_paths[0]", "outside the repository")),
    "playbook/link_paths_missing": Case("playbook", "pb.json", {**STEPS, "tmpdir": {"link_paths": ["nope"]}},
                                        ("pb.json", "tmpdir.link_paths[0]", "does not exist")),
    "playbook/link_paths_symlink_out": Case("playbook", "pb.json", {**STEPS, "tmpdir": {"link_paths": ["repo_link"]}},
                                            ("pb.json", "tmpdir.link_paths[0]", "outside the repository"),
                                            setup=_escape_link),
    "playbook/alias_bomb": Case("playbook", "pb.yaml", _bomb(), ("pb.yaml", "invalid YAML", "alias bomb")),
    "playbook/alias_count": Case("playbook", "pb.yaml", "a: &a x\nb: [" + ",".join(["*a"] * 10_001) + "]\n",
                                 ("pb.yaml", "invalid YAML", "aliases")),
    "playbook/python_tag": Case("playbook", "pb.yaml", "name: !!python/object/apply:os.system ['true']\n",
                                ("pb.yaml", "line 1", "invalid YAML")),
    "playbook/tab_indent": Case("playbook", "pb.yaml", "name: x\nsteps:\n\t- user_input: hi\n",
                                ("pb.yaml", "line 3", "invalid YAML")),
    "playbook/not_utf8": Case("playbook", "pb.yaml", b"name: caf\xe9\n", ("pb.yaml", "not UTF-8")),
    "playbook/json_trailing_comma": Case("playbook", "pb.json", '{"name": "x",}', ("pb.json", "line 1", "invalid JSON")),
    "playbook/json_deep": Case("playbook", "pb.json", "[" * 100_000 + "]" * 100_000, ("pb.json", "invalid JSON")),
    "playbook/top_level_list": Case("playbook", "pb.json", [STEPS], ("pb.json", "(top level)", "expected object")),
    "playbook/empty_yaml": Case("playbook", "pb.yaml", "", ("pb.yaml", "(top level)", "expected object, got null")),
    "playbook/missing_name": Case("playbook", "pb.json", {"steps": STEPS["steps"]}, ("pb.json", "name", "required")),
    "playbook/step_not_object": Case("playbook", "pb.json", {"name": "x", "steps": ["hi"]},
                                     ("pb.json", "steps[0]", "expected object")),
    "playbook/timeout_zero": Case("playbook", "pb.json", {**STEPS, "timeout": 0}, ("pb.json", "timeout", ">= 1")),
    "playbook/timeout_huge": Case("playbook", "pb.json", {**STEPS, "timeout": 10**30}, ("pb.json", "timeout", "at most")),
    "playbook/timeout_float": Case("playbook", "pb.json", {**STEPS, "timeout": 1.5}, ("pb.json", "timeout", "integer")),
    "playbook/max_turns_huge": Case("playbook", "pb.json", _persona({"flow_contains": ["x"]}, max_turns=10**9),
                                    ("pb.json", "persona.max_turns", "at most")),
    "playbook/env_not_list": Case("playbook", "pb.json", {**STEPS, "env": "TOKEN"}, ("pb.json", "env", "expected array")),
    "playbook/env_unset": Case("playbook", "pb.json", {**STEPS, "env": ["FABTEST_SURELY_UNSET_VAR"]},
                               ("pb.json", "env", "FABTEST_SURELY_UNSET_VAR", "not set")),
    "playbook/tmpdir_wrong_type": Case("playbook", "pb.json", {**STEPS, "tmpdir": ["x"]}, ("pb.json", "tmpdir", "expected object")),
    "playbook/persona_no_criteria": Case("playbook", "pb.json", {"name": "p", "persona": {"context": "c"}},
                                         ("pb.json", "persona.success_criteria", "required")),
    "playbook/wrong_extension": Case("playbook", "pb.txt", "name: x\n", ("pb.txt", "unsupported playbook file type")),
    "playbook/is_a_directory": Case("playbook", "dir.yaml", "", ("dir.yaml", "is a directory"),
                                    setup=lambda root: (root / "dir.yaml").mkdir()),
    "playbook/missing_file": Case("playbook", "absent.yaml", "", ("absent.yaml", "file not found"),
                                  setup=lambda root: None),
    # -- `fabtest run` options and settings (exit 2, before the playbook runs) ---------------------
    "run_option/experiment_id_path": Case("run_option", "pb.json", STEPS, ("--experiment-id", "../../X", "letters, digits"),
                                          args=("--experiment-id", "../../X")),
    "run_option/experiment_id_space": Case("run_option", "pb.json", STEPS, ("--experiment-id", "a b"),
                                           args=("--experiment-id", "a b")),
    "run_option/experiment_id_dot": Case("run_option", "pb.json", STEPS, ("--experiment-id", "'.hidden'"),
                                         args=("--experiment-id", ".hidden")),
    "run_option/results_dir_is_a_file": Case("run_option", "pb.json", STEPS, ("results_dir", "is a file"),
                                             args=("--results-dir", "taken"),
                                             setup=lambda root: (root / "taken").write_text("x")),
    "run_option/results_dir_under_a_file": Case("run_option", "pb.json", STEPS, ("results_dir", "cannot create"),
                                                args=("--results-dir", "taken/results"),
                                                setup=lambda root: (root / "taken").write_text("x")),
    "run_option/results_dir_unwritable": Case("run_option", "pb.json", STEPS, ("results_dir", "/proc/fabtest"),
                                              args=("--results-dir", "/proc/fabtest")),
    # -- scenario sets, through the loader the plugin uses -------------------------------------------
    "scenario_set/alias_bomb": Case("scenario_set", "venues.yaml", _bomb().replace("name:", "x:"),
                                    ("venues.yaml", "invalid YAML", "alias bomb")),
    "scenario_set/not_utf8": Case("scenario_set", "venues.json", b'[{"id": "caf\xe9"}]', ("venues.json", "not UTF-8")),
    "scenario_set/json_deep": Case("scenario_set", "venues.json", "[" * 100_000, ("venues.json", "invalid JSON")),
    "scenario_set/python_tag": Case("scenario_set", "venues.yaml", "- !!python/name:os.system\n",
                                    ("venues.yaml", "line 1", "invalid YAML")),
    "scenario_set/scalar": Case("scenario_set", "venues.yaml", "just text\n", ("venues.yaml", "expected a list")),
    "scenario_set/empty_list": Case("scenario_set", "venues.json", "[]", ("venues.json", "no records")),
    "scenario_set/record_not_object": Case("scenario_set", "venues.json", [1], ("venues.json", "record 1", "expected an object")),
    # -- [tool.fabtest] settings (UsageError naming pyproject.toml and the key) ----------------------
    "settings/agent_timeout_inf": Case("settings", "pyproject.toml", "[tool.fabtest]\nagent_timeout = inf\n",
                                       ("pyproject.toml", "agent_timeout", "finite")),
    "settings/agent_timeout_nan": Case("settings", "pyproject.toml", "[tool.fabtest]\nagent_timeout = nan\n",
                                       ("pyproject.toml", "agent_timeout", "finite")),
    "settings/agent_timeout_1e300": Case("settings", "pyproject.toml", "[tool.fabtest]\nagent_timeout = 1e300\n",
                                         ("pyproject.toml", "agent_timeout", "less than or equal")),
    "settings/scenario_timeout_negative": Case("settings", "pyproject.toml", "[tool.fabtest]\nscenario_timeout = -1\n",
                                               ("pyproject.toml", "scenario_timeout", "greater than 0")),
    "settings/judge_timeout_inf": Case("settings", "pyproject.toml", "[tool.fabtest.judge]\ntimeout = inf\n",
                                       ("pyproject.toml", "judge.timeout", "finite")),
    "settings/simulator_timeout_huge": Case("settings", "pyproject.toml", "[tool.fabtest.simulator]\ntimeout = 1e20\n",
                                            ("pyproject.toml", "simulator.timeout", "less than or equal")),
    "settings/judge_backoff_negative": Case("settings", "pyproject.toml", "[tool.fabtest.judge]\nbackoff = -1\n",
                                            ("pyproject.toml", "judge.backoff", "greater than or equal")),
    "settings/judge_temperature": Case("settings", "pyproject.toml", "[tool.fabtest.judge]\ntemperature = 7\n",
                                       ("pyproject.toml", "judge.temperature", "less than or equal")),
    "settings/max_retries_huge": Case("settings", "pyproject.toml", "[tool.fabtest.judge]\nmax_retries = 100000\n",
                                      ("pyproject.toml", "judge.max_retries", "less than or equal")),
    "settings/max_concurrency_zero": Case("settings", "pyproject.toml", "[tool.fabtest]\nmax_concurrency = 0\n",
                                          ("pyproject.toml", "max_concurrency", "greater than or equal")),
    "settings/env_agent_timeout_inf": Case("settings", "pyproject.toml", "[tool.fabtest]\n",
                                           ("FABTEST_AGENT_TIMEOUT", "agent_timeout", "finite"),
                                           env={"FABTEST_AGENT_TIMEOUT": "inf"}),
    "settings/definitions_alias_bomb": Case("settings", "pyproject.toml", '[tool.fabtest]\ndefinitions_file = "defs.yaml"\n',
                                            ("defs.yaml", "invalid YAML", "alias bomb"),
                                            setup=lambda root: (root / "defs.yaml").write_text(_bomb())),
    "settings/definitions_not_mapping": Case("settings", "pyproject.toml", '[tool.fabtest]\ndefinitions_file = "defs.yaml"\n',
                                             ("defs.yaml", "expected a mapping"),
                                             setup=lambda root: (root / "defs.yaml").write_text("- a\n")),
    # -- the pytest plugin: options and results_dir, one usage error before any scenario (exit 4) ----
    "pytest/agent_timeout_option_inf": Case("pytest", "pyproject.toml", "", ("--fabtest-agent-timeout", "finite"),
                                            args=("--fabtest-agent-timeout", "inf"), exit_code=4),
    "pytest/agent_timeout_option_huge": Case("pytest", "pyproject.toml", "", ("--fabtest-agent-timeout", "less than"),
                                             args=("--fabtest-agent-timeout", "1e300"), exit_code=4),
    "pytest/scenario_timeout_option_nan": Case("pytest", "pyproject.toml", "", ("--fabtest-scenario-timeout", "finite"),
                                               args=("--fabtest-scenario-timeout", "nan"), exit_code=4),
    "pytest/judge_timeout_inf": Case("pytest", "pyproject.toml", "[tool.fabtest.judge]\ntimeout = inf\n",
                                     ("pyproject.toml", "judge.timeout", "finite"), exit_code=4),
    "pytest/results_dir_is_a_file": Case("pytest", "pyproject.toml", '[tool.fabtest]\nresults_dir = "taken"\n',
                                         ("results_dir", "taken", "is a file"), exit_code=4,
                                         setup=lambda root: (root / "taken").write_text("x")),
    "pytest/results_dir_unwritable": Case("pytest", "pyproject.toml", '[tool.fabtest]\nresults_dir = "/proc/fabtest"\n',
                                          ("results_dir", "/proc/fabtest"), exit_code=4),
    "pytest/experiment_id_path": Case("pytest", "pyproject.toml", "", ("--fabtest-experiment-id", "../../X"),
                                      args=("--fabtest-experiment-id", "../../X"), exit_code=4),
    # -- experiment files, through fabtest-compare (exit 2, one line naming file and field) ----------
    "experiment/format_version_99": Case("experiment", "bad.json", {**GOOD_EXP, "format_version": 99},
                                         ("bad.json", "format_version: 99 is not supported")),
    "experiment/criterion_html": Case("experiment", "bad.json",
                                      {**GOOD_EXP, "criteria_results": {"c": {"evaluated": "<img src=x onerror=alert(1)>"}}},
                                      ("bad.json", "criteria_results.c.evaluated", "valid integer")),
    "experiment/variance_iteration_script": Case("experiment", "bad.json",
                                                 {**GOOD_EXP, "variance": {"runs": [{"iteration": "<script>"}]}},
                                                 ("bad.json", "variance.runs[0].iteration", "valid integer")),
    "experiment/rate_above_one": Case("experiment", "bad.json", {**GOOD_EXP, "summary": {"completion_rate": 1.5}},
                                      ("bad.json", "summary.completion_rate", "from 0 to 1")),
    "experiment/rate_nan": Case("experiment", "bad.json", json.dumps(GOOD_EXP).replace('"total_scenarios": 0',
                                                                                      '"evaluation_rate": NaN'),
                                ("bad.json", "summary.evaluation_rate", "finite")),
    "experiment/count_as_string": Case("experiment", "bad.json", {**GOOD_EXP, "summary": {"passed": "3"}},
                                       ("bad.json", "summary.passed", "valid integer")),
    "experiment/id_with_path": Case("experiment", "bad.json", {**GOOD_EXP, "experiment": {"id": "../../X"}},
                                    ("bad.json", "experiment.id", "plain name")),
    "experiment/tags_not_list": Case("experiment", "bad.json", {**GOOD_EXP, "experiment": {"id": "e", "tags": "nightly"}},
                                     ("bad.json", "experiment.tags", "valid list")),
    "experiment/iterations_zero": Case("experiment", "bad.json", {**GOOD_EXP, "experiment": {"id": "e", "iterations": 0}},
                                       ("bad.json", "experiment.iterations", "greater than or equal to 1")),
    "experiment/interrupted_string": Case("experiment", "bad.json",
                                          {**GOOD_EXP, "experiment": {"id": "e", "interrupted": "no"}},
                                          ("bad.json", "experiment.interrupted", "valid boolean")),
    "experiment/turns_negative": Case("experiment", "bad.json",
                                      {**GOOD_EXP, "scenario_results": [{"id": "a", "passed": True, "turns": -1}]},
                                      ("bad.json", "scenario_results[0].turns", "greater than or equal to 0")),
    "experiment/failure_message_number": Case("experiment", "bad.json",
                                              {**GOOD_EXP, "scenario_results": [{"id": "a", "passed": False,
                                                                                  "failure_message": 5}]},
                                              ("bad.json", "scenario_results[0].failure_message", "valid string")),
    "experiment/turn_without_agent": Case("experiment", "bad.json",
                                          {**GOOD_EXP, "scenario_results": [{"id": "a", "passed": True, "transcript": [
                                              {"number": 1, "user": "hi"}]}]},
                                          ("bad.json", "scenario_results[0].transcript[0].agent", "required")),
    "experiment/tokens_calls_string": Case("experiment", "bad.json",
                                           {**GOOD_EXP, "summary": {"tokens": {"judge": {"calls": "many"}}}},
                                           ("bad.json", "summary.tokens.judge.calls", "valid integer")),
    "experiment/check_details_not_list": Case("experiment", "bad.json",
                                              {**GOOD_EXP, "scenario_results": [{"id": "a", "passed": True,
                                                                                  "evaluations": {"details": "x"}}]},
                                              ("bad.json", "scenario_results[0].evaluations", "details")),
    "experiment/truncated_half": Case("experiment", "exp_half.json", "", ("exp_half.json", "truncated"),
                                      setup=lambda root: _half_experiment(root)),
    # -- fabtest report on untrusted files ---------------------------------------------------------
    "report/criterion_html": Case("report", "bad.json",
                                  {**GOOD_EXP, "criteria_results": {"c": {"evaluated": "<img src=x onerror=alert(1)>"}}},
                                  ("bad.json", "criteria_results.c.evaluated")),
    "report/format_version_99": Case("report", "bad.json", {**GOOD_EXP, "format_version": 99},
                                     ("bad.json", "format_version")),
    # -- journals, through fabtest recover -----------------------------------------------------------
    "journal/format_version_99": Case("journal", ".exp_j.journal.jsonl",
                                      '{"kind": "header", "format_version": 99, "info": {"id": "exp_j", "timestamp": "t"}}\n',
                                      (".exp_j.journal.jsonl", "line 1", "format_version: 99 is not supported")),
    "journal/format_version_string": Case("journal", ".exp_j.journal.jsonl",
                                          '{"kind": "header", "format_version": "1", "info": {"id": "exp_j", "timestamp": "t"}}\n',
                                          (".exp_j.journal.jsonl", "line 1", "format_version: '1' is not supported")),
}


def _half_experiment(root: Path) -> None:
    """A real experiment file cut in the middle of its scenario results (a full disk, a bad copy)."""
    from fabtest.experiment.export import build_document, write_document
    from fabtest.experiment.model import ExperimentInfo, ScenarioResult

    results = [ScenarioResult(id=f"example:{i:012x}", name=f"s{i}", passed=True) for i in range(10)]
    path = write_document(build_document(ExperimentInfo(id="exp_half", timestamp="2026-01-01T00:00:00Z"), results), root)
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b'"scenario_results": [') + 200])


def _write(path: Path, content: Any) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content) if path.suffix != ".yaml" else _yaml(content), encoding="utf-8")


def _yaml(content: Any) -> str:
    import yaml

    return yaml.safe_dump(content)


GOOD_AGENT = "from fabtest import AgentResponse\n\ndef build(context):\n    return lambda m: AgentResponse(text='hello')\n"
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'
FEATURE = 'Feature: F\n  Scenario: S\n    When the user says "hi"\n    Then the response must match "hello"\n'


def _run(case: Case, root: Path, capsys: pytest.CaptureFixture[str], pytester: pytest.Pytester) -> tuple[int, str, str]:
    if case.kind in ("playbook", "run_option"):
        (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
        if case.setup is None or "absent" not in case.file:
            if not (root / case.file).exists():
                _write(root / case.file, case.content)
        code = main(["run", case.file, *case.args])
    elif case.kind == "scenario_set":
        from fabtest.config.scenario_sets import ScenarioSetError, load_scenario_set

        (root / "scenarios").mkdir()
        _write(root / "scenarios" / case.file, case.content)
        try:
            load_scenario_set(Path(case.file).stem, root / "scenarios")
        except ScenarioSetError as exc:
            print(f"error: {exc}", file=__import__("sys").stderr)
            code = 2
        else:
            code = 0
    elif case.kind == "settings":
        from fabtest.errors import UsageError
        from fabtest.config.settings import Settings

        _write(root / "pyproject.toml", case.content)
        try:
            Settings.load(root, environ=case.env)
        except UsageError as exc:
            print(f"error: {exc}", file=__import__("sys").stderr)
            code = 2
        else:
            code = 0
    elif case.kind == "pytest":
        (root / "goodbot.py").write_text(GOOD_AGENT, encoding="utf-8")
        text = PYPROJECT + ('[tool.fabtest]\nagent = "goodbot:build"\n' if "[tool.fabtest]" not in str(case.content)
                            else "") + str(case.content).replace("[tool.fabtest]\n", '[tool.fabtest]\nagent = "goodbot:build"\n')
        (root / "pyproject.toml").write_text(text, encoding="utf-8")
        (root / "f.feature").write_text(FEATURE, encoding="utf-8")
        result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-q", *case.args)
        return int(result.ret), result.stdout.str(), result.stderr.str()
    elif case.kind in ("experiment", "report"):
        results = root / "results"
        results.mkdir()
        (results / "exp_good.json").write_text(json.dumps(GOOD_EXP), encoding="utf-8")
        if not (root / case.file).exists():
            _write(root / case.file, case.content)
        if case.kind == "experiment":
            code = compare_main(["exp_good", str(root / case.file), "--results-dir", str(results)])
        else:
            code = main(["report", str(root / case.file), "-o", str(root / "out.html")])
    elif case.kind == "journal":
        results = root / "results"
        results.mkdir()
        _write(results / case.file, case.content)
        code = main(["recover", "--results-dir", str(results)])
    else:  # pragma: no cover
        raise AssertionError(case.kind)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", CASES)
def test_bad_file_or_option_gives_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_RESULTS_DIR",
                "FABTEST_AGENT_TIMEOUT", "FABTEST_PLAYBOOK_AGENT"):
        monkeypatch.delenv(var, raising=False)
    root = pytester.path if case.kind == "pytest" else tmp_path
    monkeypatch.chdir(root)
    if case.setup is not None:
        case.setup(root)
    code, out, err = _run(case, root, capsys, pytester)
    output = out + "\n" + err
    assert code == case.exit_code, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    lines = [line for line in output.splitlines() if all(text in line for text in case.expected)]
    assert lines, f"no single line holds all of {case.expected}:\n{output}"
    if case.kind not in ("pytest",):
        assert err.strip().count("\n") == 0, f"expected one line on stderr:\n{err}"


def test_there_are_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60


# -- good inputs that used to fail ---------------------------------------------------------------


def test_a_utf8_bom_is_fine_in_playbooks_scenario_sets_and_settings(tmp_path: Path) -> None:
    from fabtest.playbook.load import load_playbook
    from fabtest.config.scenario_sets import load_scenario_set
    from fabtest.config.settings import Settings

    bom = "\ufeff"
    (tmp_path / "pb.yaml").write_text(bom + "name: bom\nsteps:\n  - user_input: hi\n    expected_outcome: ok\n",
                                      encoding="utf-8")
    (tmp_path / "pb.json").write_text(bom + json.dumps(STEPS), encoding="utf-8")
    assert load_playbook(tmp_path / "pb.yaml").name == "bom" and load_playbook(tmp_path / "pb.json").name == "ok"
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "venues.yaml").write_text(bom + "- id: a\n  goal: book a room\n", encoding="utf-8")
    assert [r.id for r in load_scenario_set("venues", tmp_path / "scenarios")] == ["a"]
    (tmp_path / "defs.yaml").write_text(bom + "criteria:\n  friendly: warm\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(bom + textwrap.dedent('''
        [tool.fabtest]
        agent_timeout = 5
        definitions_file = "defs.yaml"
        '''), encoding="utf-8")
    settings = Settings.load(tmp_path, environ={})
    assert settings.agent_timeout == 5 and settings.criteria == {"friendly": "warm"}


def test_yaml_aliases_within_the_limits_still_work(tmp_path: Path) -> None:
    from fabtest.playbook.load import load_playbook

    (tmp_path / "pb.yaml").write_text(textwrap.dedent('''
        name: anchors
        steps:
          - &greet {user_input: hi, expected_outcome: a greeting}
          - *greet
        '''), encoding="utf-8")
    assert len(load_playbook(tmp_path / "pb.yaml").steps) == 2


def test_a_whole_experiment_is_still_read_lean_and_in_full(tmp_path: Path) -> None:
    from fabtest.experiment.export import build_document, write_document
    from fabtest.experiment.reader import read_document
    from fabtest.experiment.model import ExperimentInfo, ScenarioResult

    results = [ScenarioResult(id=f"example:{i:012x}", name=f"s{i}", passed=True) for i in range(3)]
    path = write_document(build_document(ExperimentInfo(id="exp_whole", timestamp="2026-01-01T00:00:00Z"), results),
                          tmp_path)
    assert len(read_document(path, tmp_path, lean=True)[1]["scenario_results"]) == 3
    assert len(read_document(path, tmp_path)[1]["scenario_results"]) == 3
    assert os.path.exists(path)
