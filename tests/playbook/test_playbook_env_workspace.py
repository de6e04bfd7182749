"""${VAR} interpolation, redaction and the per-run workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabtest.playbook.load import PlaybookError, validate_playbook
from fabtest.playbook.secrets import REDACTED, Redactor, interpolate
from fabtest.playbook.workspace import Workspace


def playbook(**extra):
    data = {
        "name": "secret",
        "env": ["API_TOKEN", "SITE"],
        "steps": [{"user_input": "use token ${API_TOKEN} at ${SITE}", "expected_outcome": "mentions ${SITE}"}],
        "persona": {
            "initial_user_input": "hi ${SITE}",
            "context": "Token is ${API_TOKEN}; ${NOT_LISTED} stays",
            "success_criteria": {
                "llm_checks": ["agent connects to ${SITE}"],
                "flow_contains": ["${SITE}"],
                "files_exist": ["${SITE}.yaml"],
                "files_contain": {"${SITE}.yaml": ["token: ${API_TOKEN}"]},
                "tool_calls_contain": {"write_file": ["${SITE}"]},
            },
        },
    }
    data.update(extra)
    return validate_playbook(data, source="pb.yaml")


def test_interpolation_fills_listed_variables_everywhere():
    pb, secrets = interpolate(playbook(), {"API_TOKEN": "s3cr3t-tok", "SITE": "dc1", "OTHER": "x"})
    assert pb.steps[0].user_input == "use token s3cr3t-tok at dc1"
    assert pb.steps[0].expected_outcome == "mentions dc1"
    assert pb.persona.initial_user_input == "hi dc1"
    assert pb.persona.context == "Token is s3cr3t-tok; ${NOT_LISTED} stays"
    crit = pb.persona.success_criteria
    assert crit.llm_checks == ["agent connects to dc1"] and crit.flow_contains == ["dc1"]
    assert crit.files_exist == ["dc1.yaml"] and crit.files_contain == {"dc1.yaml": ["token: s3cr3t-tok"]}
    assert crit.tool_calls_contain == {"write_file": ["dc1"]}
    assert pb.source == "pb.yaml" and pb.name == "secret"
    assert secrets == ["s3cr3t-tok", "dc1"]


def test_missing_variable_is_an_error_naming_it():
    with pytest.raises(PlaybookError) as info:
        interpolate(playbook(), {"SITE": "dc1"})
    assert str(info.value) == "pb.yaml: env: variable API_TOKEN not set (the playbook needs them)"
    with pytest.raises(PlaybookError, match="variables API_TOKEN, SITE not set"):
        interpolate(playbook(), {})


def test_interpolation_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("API_TOKEN", "t0ken")
    monkeypatch.setenv("SITE", "dc9")
    pb, secrets = interpolate(playbook())
    assert pb.persona.initial_user_input == "hi dc9" and "t0ken" in secrets


def test_redactor_replaces_every_secret():
    r = Redactor(["s3cr3t", "s3cr3t-long", "", "  "])
    assert r.redact("a s3cr3t-long b s3cr3t c") == f"a {REDACTED} b {REDACTED} c"
    data = {"msg": "tok s3cr3t", "list": ["s3cr3t", 3, None, ("s3cr3t",)], "s3cr3t": True, 5: 1.5}
    assert r.redact_obj(data) == {"msg": f"tok {REDACTED}", "list": [REDACTED, 3, None, (REDACTED,)],
                                  REDACTED: True, 5: 1.5}
    assert data["msg"] == "tok s3cr3t"  # the original is not modified
    assert Redactor([]).redact("s3cr3t") == "s3cr3t" and not Redactor([])
    assert Redactor(["a.b"]).redact("a.b axb") == f"{REDACTED} axb"  # values are literal, not regexes


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "skills" / "fast").mkdir(parents=True)
    (root / "skills" / "fast" / "SKILL.md").write_text("skill")
    (root / "GEMINI.md").write_text("context")
    (tmp_path / "outside.txt").write_text("secret")
    return root


def test_workspace_links_paths_and_is_removed_after_a_pass(repo, tmp_path):
    with Workspace(["skills/fast", "GEMINI.md"], repo_root=repo, base_dir=tmp_path) as ws:
        path = ws.path
        assert path.is_dir() and path != repo
        assert (path / "skills" / "fast").is_symlink()
        assert (path / "skills" / "fast" / "SKILL.md").read_text() == "skill"
        assert (path / "GEMINI.md").resolve() == (repo / "GEMINI.md").resolve()
        (path / "out.txt").write_text("agent output")
    assert not path.exists()
    assert (repo / "skills" / "fast" / "SKILL.md").exists()  # removal never follows links into the repo
    assert ws.kept_path is None


def test_each_workspace_is_fresh(repo, tmp_path):
    with Workspace([], repo_root=repo, base_dir=tmp_path) as a, Workspace([], repo_root=repo, base_dir=tmp_path) as b:
        assert a.path != b.path and list(a.path.iterdir()) == []


def test_workspace_kept_on_failure(repo, tmp_path, capsys):
    with Workspace(["GEMINI.md"], repo_root=repo, base_dir=tmp_path) as ws:
        ws.mark_failed()
        path = ws.path
    assert path.exists() and ws.kept_path == path
    assert f"workspace kept at {path}" in capsys.readouterr().err
    with pytest.raises(RuntimeError):
        with Workspace([], repo_root=repo, base_dir=tmp_path, announce=False) as ws2:
            raise RuntimeError("boom")
    assert ws2.kept_path is not None and ws2.kept_path.exists()


@pytest.mark.parametrize("bad,reason", [
    ("../outside.txt", "is outside the repository"),
    ("skills/../../outside.txt", "is outside the repository"),
    ("..", "is outside the repository"),
    (".", "is outside the repository"),
    ("/etc/passwd", "is absolute"),
    ("missing/file.txt", "does not exist in"),
    ("", "empty path"),
])
def test_link_paths_escaping_or_missing_are_refused(repo, tmp_path, bad, reason):
    before = set(os.listdir(tmp_path))
    with pytest.raises(PlaybookError) as info:
        Workspace(["GEMINI.md", bad], repo_root=repo, base_dir=tmp_path, source="pb.yaml").open()
    assert str(info.value).startswith("pb.yaml: tmpdir.link_paths[1]: ")
    assert reason in str(info.value)
    assert set(os.listdir(tmp_path)) == before  # nothing was created


def test_workspace_close_returns_kept_path(repo, tmp_path):
    ws = Workspace([], repo_root=repo, base_dir=tmp_path, announce=False).open()
    kept = ws.close(passed=False)
    assert isinstance(kept, Path) and kept.exists()
    ws2 = Workspace([], repo_root=repo, base_dir=tmp_path).open()
    p = ws2.path
    assert ws2.close(passed=True) is None and not p.exists()
