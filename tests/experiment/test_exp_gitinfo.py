import shutil
import subprocess

import pytest

from fabtest.experiment.gitinfo import GitInfo, git_info


def test_outside_a_repository_everything_is_none(tmp_path):
    assert git_info(tmp_path) == GitInfo(None, None, None)
    assert git_info(tmp_path / "does-not-exist") == GitInfo(None, None, None)


def test_without_git_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert git_info(tmp_path) == GitInfo(None, None, None)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_inside_a_repository(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (tmp_path / "f.txt").write_text("one")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "init")
    info = git_info(tmp_path)
    assert info.commit and len(info.commit) == 40
    assert info.branch == "main" and info.dirty is False
    (tmp_path / "untracked.txt").write_text("x")
    assert git_info(tmp_path).dirty is False  # untracked files do not count
    (tmp_path / "f.txt").write_text("two")
    assert git_info(tmp_path).dirty is True
