"""Which tests are ``slow``: the ones that run pytest, fabtest, an agent CLI or a browser in a
subprocess, or a whole project end to end. ``pytest -m "not slow" tests -n 2`` leaves them out:
the inner loop of docs/development.md. CI runs everything.

One list here rather than a ``pytestmark`` line in each module: a module moves in or out by one
line, measured with ``--durations`` (docs/development.md says how).
"""

from __future__ import annotations

#: directories (under tests/) whose every test is slow
SLOW_DIRS = (
    "acp", "bad_inputs", "citizen", "cli_agent", "concurrency", "e2e", "faults", "interrupt", "playbook_run",
)

#: modules (under tests/) whose every test is slow
SLOW_MODULES = (
    "ab/test_ab_cli.py",
    "benchmarks/test_benchmarks_quick.py",
    "builtin_agent/test_builtin_feature.py",
    "builtin_agent/test_builtin_mcp.py",
    "compare/test_gate_family.py",
    "cost/test_cost_e2e.py",
    "coverage/test_coverage.py",
    "coverage/test_generate.py",
    "coverage/test_redteam.py",
    "docs/test_docs_examples.py",
    "experiment/test_exp_report_html.py",
    "experiment/test_shard_processes.py",
    "frameworks/test_examples.py",
    "judging/test_replay.py",
    "judging/test_samples_per_criterion.py",
    "judging/test_sampling_rejudge.py",
    "llm/test_gc_freeze.py",
    "llm/test_shared_limit.py",
    "llm/test_warmup.py",
    "onboarding/test_init.py",
    "onboarding/test_never_green.py",
    "onboarding/test_wheel_quick_start.py",
    "otel/test_otel.py",
    "plugin/test_fault_matrix.py",
    "plugin/test_lazy_imports.py",
    "plugin/test_parallel_limits.py",
    "plugin/test_plugin_entry_point.py",
    "plugin/test_plugin_project_setup_errors.py",
    "plugin/test_progress.py",
    "plugin/test_spare_hypothesis.py",
    "preflight/test_preflight.py",
    "production/test_import_all.py",
    "properties/test_fuzz_inputs.py",
    "protocols/test_protocol_features.py",
    "secrets/test_secrets_everywhere.py",
    "view/test_view_browser.py",
    "voice/test_real_speech.py",
)


#: single tests (``module::function``, every parameter) of otherwise quick modules
SLOW_TESTS = (
    "core/test_bounded_regex_and_off_graph.py::test_a_catastrophic_match_is_stopped_and_names_the_pattern",
    "core/test_bounded_regex_and_off_graph.py::test_triggers_and_argument_matchers_are_bounded",
    "cost/test_cost_unit.py::test_an_acp_agent_prices_its_quota_tokens_with_the_model_it_was_started_with",
    "docs/test_docs_screenshots.py::test_the_files_shot_is_of_a_conversation_with_a_thumbnail_and_a_file_link",
    "frameworks/test_adk.py::test_a_turn_maps_the_events_calls_responses_usage_and_model",
    "llm/test_factory.py::test_importing_fabtest_llm_does_not_import_google_genai",
    "offline/test_cli_friction.py::test_fabtest_steps_survives_a_feature_that_does_not_collect",
    "plugin/test_plugin_bad_input.py::test_bad_input_fails_only_its_own_scenario",
    "plugin/test_plugin_checks.py::test_every_failing_must_fails_its_scenario_and_says_why",
    "plugin/test_plugin_collection.py::test_xdist_runs_features_and_results_reach_the_controller",
    "view/test_view_labels_no_loss.py::test_two_writers_at_once_keep_every_label",
)


def is_slow(relative: str, function: str = "") -> bool:
    """``relative``: a test file's path under tests/, with forward slashes; ``function``: the
    test's name without its parameters."""
    return (relative.split("/", 1)[0] in SLOW_DIRS or relative in SLOW_MODULES
            or f"{relative}::{function}" in SLOW_TESTS)
