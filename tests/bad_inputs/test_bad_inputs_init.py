"""``fabtest init`` on hostile projects (issue 30): what it writes is parsed back before it is written,
it writes all of its files or none, never through a link out of the project, and every refusal is one
line (exit 2) that leaves the directory exactly as it was."""

from __future__ import annotations

import errno
import os
import sys
import tomllib
from pathlib import Path

import pytest

from fabtest.cli import main


def _tree(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        out[key] = f"-> {os.readlink(path)}" if path.is_symlink() else (path.read_bytes() if path.is_file() else "dir")
    return out


def _refused(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    before = _tree(root)
    assert main(["init", "--dir", str(root), *extra]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "nothing was written" in lines[0], err
    assert _tree(root) == before  # not one file added, changed or left half-written
    return lines[0]


@pytest.mark.parametrize("pyproject", ['tool = {black = {line-length = 100}}\n',
                                       '[project]\nname = "x"\ntool.black.line-length = 100\n[tool2]\n'])
def test_an_inline_tool_table_is_not_appended_to(tmp_path: Path, capsys, pyproject: str) -> None:
    (tmp_path / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    if pyproject.startswith("tool ="):
        assert "invalid TOML" in _refused(tmp_path, capsys)
    else:  # dotted keys then a table: appending [tool.fabtest] is valid, and it is checked so
        assert main(["init", "--dir", str(tmp_path)]) == 0
        assert tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["fabtest"]["agent"] == "my_agent:agent"


@pytest.mark.parametrize("tool", ['tool = "fabtest"', "tool = 3", 'tool = ["fabtest"]'])
def test_a_tool_key_that_is_not_a_table_is_named_not_mistaken_for_a_fabtest_table(tmp_path: Path, capsys,
                                                                                    tool: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f'{tool}\n', encoding="utf-8")
    line = _refused(tmp_path, capsys)
    assert "'tool' is a" in line and "not a table" in line and "already has" not in line


def test_a_string_that_mentions_the_table_is_not_the_table(tmp_path: Path, capsys) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndescription = "see [tool.fabtest] below"\n',
                                             encoding="utf-8")
    assert main(["init", "--dir", str(tmp_path)]) == 0
    assert "already has" not in capsys.readouterr().err


@pytest.mark.parametrize("module", ['we"ird', "back\\slash"])
def test_an_agent_module_name_with_a_quote_or_backslash_is_written_as_valid_toml(tmp_path: Path, capsys,
                                                                                 monkeypatch, module: str) -> None:
    (tmp_path / f"{module}.py").write_text("def agent(messages):\n    return 'hi'\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    assert main(["init", "--dir", str(tmp_path), "--agent", f"{module}:agent"]) == 0, capsys.readouterr().err
    table = tomllib.loads((tmp_path / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["fabtest"]
    assert table["agent"] == f"{module}:agent"


def test_an_agent_module_that_exits_on_import_is_an_error(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "quitter.py").write_text("exit(3)\n", encoding="utf-8")
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    line = _refused(tmp_path, capsys, "--agent", "quitter:agent")
    assert "exit(3)" in line and "quitter:agent" in line


def test_a_dangling_link_out_of_the_project_is_not_written_through(tmp_path: Path, capsys) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "features").mkdir(parents=True)
    outside.mkdir()
    (project / "features" / "getting_started.feature").symlink_to(outside / "stolen.feature")
    line = _refused(project, capsys)
    assert "link" in line and not (outside / "stolen.feature").exists()


def test_a_directory_link_out_of_the_project_is_not_written_through(tmp_path: Path, capsys) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "features").symlink_to(outside)
    assert "link" in _refused(project, capsys)
    assert list(outside.iterdir()) == []


def test_a_pyproject_link_out_of_the_project_is_not_appended_to(tmp_path: Path, capsys) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside.toml"
    project.mkdir()
    outside.write_text('[project]\nname = "x"\n', encoding="utf-8")
    (project / "pyproject.toml").symlink_to(outside)
    assert "link" in _refused(project, capsys)
    assert outside.read_text(encoding="utf-8") == '[project]\nname = "x"\n'


@pytest.mark.parametrize("where", ["features is a file", "dir is a file", "dir is missing"])
def test_a_file_where_a_directory_is_needed_is_one_line(tmp_path: Path, capsys, where: str) -> None:
    if where == "features is a file":
        (tmp_path / "features").write_text("not a directory\n", encoding="utf-8")
        assert "features: is a file" in _refused(tmp_path, capsys)
        return
    target = tmp_path / "target"
    if where == "dir is a file":
        target.write_text("x", encoding="utf-8")
    assert main(["init", "--dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and str(target) in err


@pytest.mark.parametrize("failing", ["stage 1", "stage 3", "replace 2", "replace pyproject"])
def test_a_full_disk_or_read_only_directory_leaves_nothing_behind(tmp_path: Path, capsys, monkeypatch,
                                                                  failing: str) -> None:
    """Any write failing (ENOSPC, EROFS) removes every file and directory init had made, and keeps the
    existing pyproject as it was."""
    import fabtest.cli.init as init

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    kind, _, at = failing.partition(" ")
    calls = {"stage": 0, "replace": 0}
    real_stage, real_replace = init._stage, os.replace

    def stage(path: Path, text: str) -> Path:
        calls["stage"] += 1
        if kind == "stage" and str(calls["stage"]) == at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_stage(path, text)

    def replace(src: str | Path, dst: str | Path) -> None:
        calls["replace"] += 1
        if kind == "replace" and (str(calls["replace"]) == at or (at == "pyproject" and
                                                                   Path(dst).name == "pyproject.toml")):
            raise OSError(errno.EROFS, "Read-only file system")
        real_replace(src, dst)

    monkeypatch.setattr(init, "_stage", stage)
    monkeypatch.setattr(init.os, "replace", replace)
    line = _refused(tmp_path, capsys)
    assert "cannot write" in line and ("No space left" in line or "Read-only" in line)


def test_a_pyproject_link_inside_the_project_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    (tmp_path / "pyproject.toml").symlink_to(Path("config") / "pyproject.toml")
    assert main(["init", "--dir", str(tmp_path)]) == 0
    assert (tmp_path / "pyproject.toml").is_symlink()
    assert "agent" in tomllib.loads((tmp_path / "config" / "pyproject.toml").read_text())["tool"]["fabtest"]
