"""The ``pytest11`` entry point registers fabtest: a bare project needs no conftest and no imports."""

from __future__ import annotations

import json

MYBOT = '''
def build(context):
    def reply(messages):
        return "Hello! You said: " + messages[-1].content
    return reply
'''

FEATURE = '''
Feature: Bare project
  Scenario: Greets
    When the user says "hi"
    Then the response must match "^Hello! You said: hi$"
    And the agent must not call "anything"
'''


def test_bare_project_runs_green_in_a_subprocess(project):
    # exactly three files: no conftest.py, no test module, no [tool.pytest.ini_options]
    project.write("pyproject.toml", '[tool.fabtest]\nagent = "mybot:build"\nresults_dir = "out/results"\n')
    project.write("mybot.py", MYBOT)
    project.write("features/bare.feature", FEATURE)
    assert sorted(str(p.relative_to(project.path)) for p in project.path.rglob("*") if p.is_file()) == [
        "features/bare.feature", "mybot.py", "pyproject.toml"]
    # run in a fresh interpreter: nothing from this test process (already-loaded plugins) can leak in
    result = project.pytester.runpytest_subprocess("-p", "no:cacheprovider", "features")
    assert result.ret == 0, project.output(result)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins:*fabtest-*", "*fabtest experiment*"])
    # results_dir from [tool.fabtest] is relative to the project
    files = [p for p in (project.path / "out" / "results").glob("*.json") if not p.name.startswith(".")]
    assert len(files) == 1
    doc = json.loads(files[0].read_text(encoding="utf-8"))
    assert doc["summary"]["passed"] == 1
    assert doc["scenario_results"][0]["name"] == "Greets"


def test_disabling_the_plugin_by_its_entry_point_name_stops_feature_collection(project):
    project.pyproject()
    project.agent(MYBOT)
    project.feature("features/bare.feature", FEATURE)
    result = project.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:unraisableexception", "features",
                                        "-p", "no:fabtest")
    assert result.ret == 5, project.output(result)  # no tests collected: nothing else turns .feature files into tests
    assert not project.results_dir.exists()


def test_no_results_option_writes_no_experiment_but_still_summarises(project, tmp_path, monkeypatch):
    """--fabtest-no-results writes nothing, yet the run still ends with its summary (issue 31):
    recorded in a scratch directory that is gone afterwards."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    project.pyproject()
    project.agent(MYBOT)
    project.feature("features/bare.feature", FEATURE)
    result = project.run("features", "--fabtest-no-results")
    result.assert_outcomes(passed=1)
    assert not project.results_dir.exists()
    out = result.stdout.str()
    assert "fabtest experiment" in out and "Completion Rate:  100.0% (1/1)" in out, out
    assert "Results not saved (--fabtest-no-results)" in out and "fabtest-compare" not in out
    assert not [p for p in scratch.iterdir() if p.name.startswith("fabtest-unsaved-")]


def test_agent_option_overrides_pyproject(project):
    project.pyproject('agent = "mybot:nothing_here"')
    project.agent(MYBOT + '''

def other(messages):
    return "Other agent"
''')
    project.feature("features/x.feature", '''
        Feature: X
          Scenario: Uses the option
            When the user says "hi"
            Then the response must match "^Other agent$"
    ''')
    result = project.run("features", "--fabtest-agent", "mybot:other")
    result.assert_outcomes(passed=1)


def test_iterations_run_every_scenario_n_times_with_a_fresh_agent(project):
    project.pyproject()
    project.agent('''
        import json
        from pathlib import Path


        def build(context):
            with (Path(__file__).parent / "log.jsonl").open("a") as fh:
                fh.write(json.dumps({"iteration": context["iteration"]}) + "\\n")
            return lambda messages: "ok"
    ''')
    project.feature("features/x.feature", '''
        Feature: X
          Scenario: Repeated
            When the user says "hi"
            Then the response must match "ok"
    ''')
    result = project.run("features", "--fabtest-iterations", "3", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_repeated?iter1?*PASSED*", "*test_repeated?iter3?*PASSED*"])
    assert sorted(e["iteration"] for e in project.log()) == [1, 2, 3]
    results = project.experiment()["scenario_results"]
    assert sorted(r["iteration"] for r in results) == [1, 2, 3]
    assert len({r["id"] for r in results}) == 1, "iterations share the scenario's stable id"


def test_the_summary_comes_after_pytests_line_per_failure(project):
    """Hundreds of failures print hundreds of 'FAILED ...' lines: fabtest's summary (with the
    failures grouped) comes after them, above the final counts, not scrolled away (issue 31)."""
    project.pyproject()
    project.agent(MYBOT)
    project.feature("features/bare.feature", FEATURE.replace('"^Hello! You said: hi$"', '"^Goodbye$"'))
    result = project.run("features", "--fabtest-iterations", "3")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert out.index("short test summary info") < out.index("fabtest experiment") < out.rindex("3 failed"), out
    assert "Failures: 3 failed runs in 1 scenario, 1 distinct (scenario, failing step)" in out
    assert "3x  Greets [assertion]" in out
