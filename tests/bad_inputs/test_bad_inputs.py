"""Every file of the bad-input corpus, through the real entry point, gives ONE line naming the file
and the place (line, JSON path or key), and never a Python traceback.

``corpus/`` holds the files; ``CASES`` says, per file, how it is used and what the error line
must contain. Entry points: pytest on a throwaway project (features, scenario sets, pyproject
settings), ``fabtest run`` (playbooks) and ``fabtest-compare`` (experiment files).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.bad_inputs import (
    BASE_ARGS,
    GOOD_AGENT,
    GOOD_FEATURE,
    GOOD_PYPROJECT,
    assert_one_line_holds,
    clean_env,
    write_file,
)

CORPUS = Path(__file__).parent / "corpus"
# corpus file -> the texts the one error line must hold (the file, the place, the problem)
CASES: dict[str, tuple[str, ...]] = {
    # features: a collection error or the failing scenario's one-line message
    "features/gherkin_unclosed_docstring.feature": ("gherkin_unclosed_docstring.feature", "Line number: "),
    "features/gherkin_unknown_keyword.feature": ("gherkin_unknown_keyword.feature", "Line number: 5", "Whereupon"),
    "features/topics_unknown_successor.feature": ("topics_unknown_successor.feature:4", "farewelll"),
    "features/topics_unreachable.feature": ("topics_unreachable.feature:4", "orphan", "unreachable"),
    "features/topics_self_loop.feature": ("topics_self_loop.feature:4", "greeting", "itself"),
    "features/topics_duplicate.feature": ("topics_duplicate.feature:4", 'duplicate topic "greeting"'),
    "features/topics_bad_trigger_regex.feature": ("topics_bad_trigger_regex.feature:4", "(hello"),
    "features/with_table_bad_comparison.feature": ("with_table_bad_comparison.feature:5", "ten"),
    "features/with_table_empty_argument.feature": ("with_table_empty_argument.feature:5", "empty argument name"),
    "features/with_table_three_columns.feature": ("with_table_three_columns.feature:5", "note"),
    "features/regex_unbalanced.feature": ("regex_unbalanced.feature:5", "invalid regular expression '[a-'"),
    "features/regex_bad_repeat.feature": ("regex_bad_repeat.feature:5", "invalid regular expression '*hello'"),
    "features/empty.feature": ("empty.feature", 'no "Feature:" found'),
    "features/outline_without_examples.feature": ("outline_without_examples.feature:2", "no Examples"),
    "features/criterion_typo.feature": ("criterion_typo.feature:7", 'did you mean "friendly"'),
    # scenario sets: named by a feature tagged @scenario_set:<stem>
    "scenario_sets/duplicate_id.json": ("duplicate_id.json", "record 3", "duplicate id 'berlin'"),
    "scenario_sets/no_goal.yaml": ("no_goal.yaml", "record 2", "has no goal"),
    "scenario_sets/invalid_json.json": ("invalid_json.json", "line 3", "invalid JSON"),
    "scenario_sets/bad_verification.json": ("bad_verification.json", "record 1", "verification.max_turns"),
    "scenario_sets/unknown_verification.json": ("unknown_verification.json", "record 1", "call_tol"),
    "scenario_sets/<missing>": ("sets.feature", "@scenario_set:absent", "not found"),
    # pyproject.toml settings
    "pyproject/unknown_key.toml": ("pyproject.toml", "unknown key 'agnet_timeout'"),
    "pyproject/wrong_type.toml": ("pyproject.toml", "agent_timeout"),
    "pyproject/invalid_toml.toml": ("pyproject.toml", "line 3"),
    "pyproject/judge_unknown_key.toml": ("pyproject.toml", "judge.modle"),
    "pyproject/judge_wrong_type.toml": ("pyproject.toml", "judge.max_retries"),
    # playbooks, through `fabtest run`
    "playbooks/missing_expected_outcome.yaml": ("missing_expected_outcome.yaml", "steps[1].expected_outcome", "required"),
    "playbooks/invalid_yaml.yaml": ("invalid_yaml.yaml", "line ", "invalid YAML"),
    "playbooks/wrong_type.json": ("wrong_type.json", "timeout", "expected integer, got string"),
    "playbooks/unknown_key.json": ("unknown_key.json", "steps[0].expectd", "unexpected key"),
    "playbooks/invalid_json.json": ("invalid_json.json", "line 2", "invalid JSON"),
    # experiment files, through `fabtest-compare`
    "experiments/<missing>": ("nowhere.json", "no such file"),
    "experiments/<ambiguous>": ("exp_abc", "ambiguous", "exp_abc111", "exp_abc222"),
    "experiments/not_json.json": ("not_json.json", "not valid JSON", "line 1"),
    "experiments/missing_summary.json": ("missing_summary.json", "'summary'"),
    "experiments/missing_experiment_id.json": ("missing_experiment_id.json", "experiment.id"),
    "experiments/results_not_a_list.json": ("results_not_a_list.json", "scenario_results"),
    "experiments/top_level_list.json": ("top_level_list.json", "not a JSON object"),
    "experiments/scenario_not_an_object.json": ("scenario_not_an_object.json", "scenario_results[0]"),
    "experiments/scenario_without_id.json": ("scenario_without_id.json", "scenario_results[0]", "id"),
    "experiments/wrong_value_types.json": ("wrong_value_types.json", "scenario_results[0].passed", "'yes'"),
    "experiments/no_format_version.json": ("no_format_version.json", "format_version: required",
                                           "not a fabtest experiment file"),
}


def test_every_corpus_file_has_a_case() -> None:
    files = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
             if p.is_file() and p.suffix != ".py"}  # .py files are helper agents for other corpus modules
    assert files == {c for c in CASES if "<" not in c}


def _run_pytest(pytester: pytest.Pytester, case: str) -> str:
    root = pytester.path
    write_file(root, "goodbot.py", GOOD_AGENT)
    write_file(root, "pyproject.toml", GOOD_PYPROJECT)
    kind, name = case.split("/", 1)
    if kind == "features":
        shutil.copy(CORPUS / case, root / name)
        write_file(root, "fine.feature", GOOD_FEATURE)
    elif kind == "scenario_sets":
        stem = "absent" if name == "<missing>" else Path(name).stem
        if name != "<missing>":
            (root / "scenarios").mkdir()
            shutil.copy(CORPUS / case, root / "scenarios" / name)
        write_file(root, "sets.feature", f'''
            Feature: Sets
              @scenario_set:{stem}
              Scenario: From the set
                Given a simulated user from the scenario
                When the user says "hi"
            ''')
    elif kind == "pyproject":
        shutil.copy(CORPUS / case, root / "pyproject.toml")
        write_file(root, "fine.feature", GOOD_FEATURE)
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", str(root)) if kind == "pyproject" else \
        pytester.runpytest(*BASE_ARGS, "-q", str(root))
    assert result.ret != 0
    return result.stdout.str() + "\n" + result.stderr.str()


def _run_cli(tmp_path: Path, case: str) -> str:
    kind, name = case.split("/", 1)
    results = tmp_path / "results"
    results.mkdir()
    if kind == "playbooks":
        write_file(tmp_path, "pyproject.toml", GOOD_PYPROJECT)
        shutil.copy(CORPUS / case, tmp_path / name)
        cmd = [sys.executable, "-c", "import sys; from fabtest.cli import main; sys.exit(main())", "run", name]
    else:
        good = {"format_version": 1, "experiment": {"id": "exp_good"}, "summary": {"total_scenarios": 0},
                "scenario_results": []}
        (results / "exp_good.json").write_text(json.dumps(good), encoding="utf-8")
        if name == "<missing>":
            ref = "nowhere.json"
        elif name == "<ambiguous>":
            for suffix in ("111", "222"):
                doc = {**good, "experiment": {"id": f"exp_abc{suffix}"}}
                (results / f"exp_abc{suffix}.json").write_text(json.dumps(doc), encoding="utf-8")
            ref = "exp_abc"
        else:
            shutil.copy(CORPUS / case, tmp_path / name)
            ref = name
        compare = shutil.which("fabtest-compare")
        cmd = [compare] if compare else [sys.executable, "-c", "import sys; from fabtest.cli import compare_main; sys.exit(compare_main())"]
        cmd += ["exp_good", ref, "--results-dir", str(results)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    return proc.stdout + "\n" + proc.stderr


@pytest.mark.parametrize("case", CASES)
def test_bad_input_gives_one_line_naming_file_and_place(case: str, pytester: pytest.Pytester, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    kind = case.split("/", 1)[0]
    output = _run_cli(tmp_path, case) if kind in ("playbooks", "experiments") else _run_pytest(pytester, case)
    assert "Traceback" not in output, output
    assert_one_line_holds(output, CASES[case])
