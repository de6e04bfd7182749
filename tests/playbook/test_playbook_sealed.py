"""Sealed workspace: success criteria never read outside the workspace, links never leave the repo,
and a failed ``files_contain`` never quotes the file (issue 10, item 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabtest.playbook.load import PlaybookError, validate_playbook
from fabtest.playbook.workspace import Workspace, workspace_file


def _persona(criteria: dict[str, Any]) -> dict[str, Any]:
    return {"name": "p", "persona": {"context": "c", "success_criteria": criteria, "max_turns": 1,
                                     "initial_user_input": "hi"}}


@pytest.mark.parametrize(("criteria", "where", "what"), [
    ({"files_exist": ["../../../../etc/shadow"]}, "persona.success_criteria.files_exist[0]", "outside the workspace"),
    ({"files_exist": ["ok.txt", "/etc/shadow"]}, "persona.success_criteria.files_exist[1]", "is absolute"),
    ({"files_exist": ["a/../../b"]}, "persona.success_criteria.files_exist[0]", "outside the workspace"),
    ({"files_exist": ["C:\\Windows\\win.ini"]}, "persona.success_criteria.files_exist[0]", "is absolute"),
    ({"files_exist": ["~/.ssh/id_rsa"]}, "persona.success_criteria.files_exist[0]", "is absolute"),
    ({"files_exist": [""]}, "persona.success_criteria.files_exist[0]", "empty path"),
    ({"files_contain": {"/etc/hostname": ["x"]}}, 'persona.success_criteria.files_contain["/etc/hostname"]',
     "is absolute"),
    ({"files_contain": {"../secret.txt": ["x"]}}, 'persona.success_criteria.files_contain["../secret.txt"]',
     "outside the workspace"),
])
def test_absolute_and_escaping_criteria_paths_are_one_line_schema_errors(criteria: dict[str, Any], where: str,
                                                                          what: str) -> None:
    with pytest.raises(PlaybookError) as info:
        validate_playbook(_persona(criteria), source="pb.json")
    message = str(info.value)
    assert message.startswith(f"pb.json: {where}: ") and what in message and "\n" not in message


def test_paths_inside_the_workspace_are_fine() -> None:
    playbook = validate_playbook(_persona({"files_exist": ["out/a.txt", "./b", "x/../c"],
                                           "files_contain": {"d/e.txt": ["x"]}}))
    assert playbook.persona is not None


def test_workspace_file_refuses_a_planted_symlink_out_of_the_workspace(tmp_path: Path) -> None:
    ws, repo, outside = tmp_path / "ws", tmp_path / "repo", tmp_path / "outside.txt"
    ws.mkdir()
    repo.mkdir()
    outside.write_text("secret", encoding="utf-8")
    (repo / "data.txt").write_text("fine", encoding="utf-8")
    (ws / "leak").symlink_to(outside)
    (ws / "data.txt").symlink_to(repo / "data.txt")
    (ws / "own.txt").write_text("mine", encoding="utf-8")
    assert workspace_file(ws, "leak", repo) is None
    assert workspace_file(ws, "../outside.txt", repo) is None
    assert workspace_file(ws, str(outside), repo) is None
    assert workspace_file(ws, "data.txt", repo) == ws / "data.txt"  # a link into the repository
    assert workspace_file(ws, "own.txt", repo) == ws / "own.txt"


def test_link_paths_resolve_symlinks_and_refuse_targets_outside_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (repo / "escape").symlink_to(tmp_path / "elsewhere")
    (repo / "etc_link").symlink_to("/etc/hostname")
    (repo / "real").mkdir()
    (repo / "inner").symlink_to(repo / "real")
    for index, rel in enumerate(["escape", "etc_link"]):
        with pytest.raises(PlaybookError) as info:
            Workspace([rel], repo_root=repo, source="pb.yaml").resolve_link(index, rel)
        assert f"pb.yaml: tmpdir.link_paths[{index}]: {rel!r} is a symlink to" in str(info.value)
        assert "outside the repository" in str(info.value)
    assert Workspace(["inner"], repo_root=repo).resolve_link(0, "inner") == repo / "inner"


def test_a_failed_files_contain_names_the_file_and_the_needle_but_never_quotes_the_file(tmp_path: Path) -> None:
    from fabtest.playbook.criteria import deterministic as _deterministic
    from fabtest.conversation import Conversation

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("PRIVATE-CONTENT-123 and more", encoding="utf-8")
    playbook = validate_playbook(_persona({"files_contain": {"notes.txt": ["Munich"]}}))
    assert playbook.persona is not None
    checks = _deterministic(playbook.persona.success_criteria, Conversation(), ws, tmp_path)
    assert len(checks) == 1 and checks[0].status != "passed"
    text = json.dumps([c.__dict__ if hasattr(c, "__dict__") else str(c) for c in checks], default=str)
    assert "notes.txt" in text and "Munich" in text
    assert "PRIVATE" not in text


def test_feature_file_checks_stay_in_the_working_directory_and_never_quote_content(tmp_path: Path) -> None:
    from fabtest.engine.checks import check_file

    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("PRIVATE-CONTENT", encoding="utf-8")
    (work / "link").symlink_to(tmp_path / "secret.txt")
    (work / "notes.txt").write_text("PRIVATE-CONTENT here", encoding="utf-8")
    for rel in ("../secret.txt", str(tmp_path / "secret.txt"), "link"):
        ok, message = check_file(work, rel, "PRIVATE")
        assert not ok and "outside" in message and "PRIVATE-CONTENT" not in message
    ok, message = check_file(work, "notes.txt", "Munich")
    assert not ok and "Munich" in message and "PRIVATE" not in message
    assert check_file(work, "notes.txt", "here")[0]
