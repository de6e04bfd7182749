"""``fabtest ab`` end to end on a tiny git project (a Python agent, scripted scenarios, offline).

Few and small: each starts pytest processes (slow, tests/support/slow.py). The arms' own code is
checked with the trap an editable install sets: the package's ``src/`` on a ``.pth`` path (here a
``sitecustomize`` that adds a site directory holding one, which is what ``pip install -e .`` of a
src-layout project leaves behind), pointing at the working tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fabtest.cli import ab as ab_command
from fabtest.cli import main

PYPROJECT = """
[project]
name = "shopbot"
version = "0"

[tool.fabtest]
agent = "shopbot.agent:agent"
results_dir = "results"
"""

FEATURE = """
Feature: Shop
  Scenario: Add to cart
    When the user says "Add the red shoes"
    Then the response must match "(?i)cart"

  Scenario: Greet
    When the user says "Hello"
    Then the response must match "(?i)cart|hello"
"""

AGENT = """
import time

def agent(messages):
    time.sleep({sleep})
    return {answer!r}
"""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


def _project(root: Path, answer: str, feature: str = FEATURE, sleep: float = 0.0) -> None:
    (root / "src" / "shopbot").mkdir(parents=True, exist_ok=True)
    (root / "features").mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "src" / "shopbot" / "__init__.py").write_text("")
    (root / "src" / "shopbot" / "agent.py").write_text(AGENT.format(answer=answer, sleep=sleep))
    (root / "features" / "shop.feature").write_text(textwrap.dedent(feature))
    (root / ".gitignore").write_text("results/\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git project whose committed agent passes both scenarios; the working tree's fails them."""
    root = tmp_path / "proj"
    root.mkdir()
    _project(root, "Added to cart.")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a good agent")
    _project(root, "Sorry, no.")  # uncommitted: the working tree is dirty
    return root


def _editable_trap(tmp_path: Path, root: Path) -> dict[str, str]:
    """An environment in which ``import shopbot`` from anywhere finds the working tree's ``src/``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "shopbot-editable.pth").write_text(str(root / "src") + "\n")
    (site / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site)!r})\n")
    return {**os.environ, "PYTHONPATH": str(site)}


def _ab(root: Path, env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabtest.cli", "ab", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_a_ref_against_the_working_tree_runs_each_arms_own_agent(repo: Path, tmp_path: Path) -> None:
    env = _editable_trap(tmp_path, repo)
    # the trap is real: from a checkout of the commit, the package resolves to the working tree
    probe = subprocess.run([sys.executable, "-c", "import shopbot.agent as a; print(a.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == str(repo / "src" / "shopbot" / "agent.py")

    done = _ab(repo, env, "main", ".", "--iterations", "2", "--budget", "0", "--format", "json")
    assert done.returncode == 3, done.stderr[-3000:]  # 2 iterations and no budget: too few runs to decide
    data = json.loads(done.stdout)
    assert data["verdict"].startswith("undecided")
    section = data["ab"]
    assert section["runs"] == {"baseline": 4, "current": 4} and section["rounds"] == 1
    assert section["stopped"] == "no budget beyond the first pass"
    assert section["plan"] == {"first_pass": 2, "iterations": 2}  # no budget: the first pass is the whole plan
    completion = next(m for m in section["decision"]["metrics"] if m["metric"] == "completion")
    assert completion["baseline"] == [4, 4] and completion["current"] == [0, 4]  # each arm ran its own agent
    base, cur = (json.loads(Path(section["experiments"][arm]).read_text())["experiment"]
                 for arm in ("baseline", "current"))
    head = _git(repo, "rev-parse", "HEAD")
    decided = {"outcome": "undecided", "verdict": data["verdict"], "stopped": section["stopped"], "rounds": 1}
    assert base["ab"] == {"arm": "baseline", "ref": "main", "commit": head, "dirty": False,
                          "other": cur["id"], **decided}
    assert cur["ab"] == {"arm": "current", "ref": ".", "commit": head, "dirty": True, "other": base["id"], **decided}
    assert base["git_commit"] == head and cur["git_dirty"] is True
    assert data["gate"]["paired"]["outcome"] == "undecided" and data["gate"]["exit_code"] == 3
    assert _git(repo, "worktree", "list").count("\n") == 0  # the baseline's checkout is gone
    assert _git(repo, "status", "--porcelain") == "M src/shopbot/agent.py"  # the working tree untouched


def test_bad_input_is_one_line_and_exit_2(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(repo)

    def line(*args: str) -> str:
        assert main(["ab", *args]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
        return err

    assert "unknown git ref" in line("no-such-branch", ".")
    empty = _git(repo, "commit-tree", _git(repo, "mktree", "--missing"), "-m", "empty")  # a commit without the project
    assert "no project at the repository root in that commit" in line(empty, ".")
    assert "--budget" in line("main", ".", "--budget", "five")
    # the same tree with another feature: nothing shared (only pytest's collection runs)
    other = FEATURE.replace("Scenario: Add to cart", "Scenario: Checkout").replace("Scenario: Greet", "Scenario: Bye")
    _project(repo, "Sorry, no.", other)
    assert "the arms share no scenario" in line("main", ".")
    assert _git(repo, "worktree", "list").count("\n") == 0
    # what a budget must buy is known once collected (collection is the same code as above)
    monkeypatch.setattr(ab_command, "_collect",
                        lambda arms, args, scratch: {"baseline": {"a", "b"}, "current": {"a", "b"}})
    assert "cannot buy one more iteration of the 2 shared scenario(s) on both arms (4 runs)" in line(
        "main", ".", "--budget", "3")


def _default_sigint() -> None:
    """A test run in the background inherits SIGINT ignored; the command under test must not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_both_experiments_and_removes_the_worktree(repo: Path, tmp_path: Path) -> None:
    _project(repo, "Sorry, no.", sleep=1.0)  # a slow agent: the first pass is still running at Ctrl-C
    proc = subprocess.Popen([sys.executable, "-m", "fabtest.cli", "ab", "main", ".", "--iterations", "20"], cwd=repo,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_sigint)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "round 1: ...": collected, both arms' first pass started
    assert "round 1" in first, first
    time.sleep(8)  # a few scenarios of each arm run (3 s was too short on a loaded machine: one arm had none)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at the terminal sends (the arms have their own groups)
    err = first + proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 3, err[-2000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("fabtest ab: interrupted: both arms stopped") and last.endswith("worktrees removed")
    assert _git(repo, "worktree", "list").count("\n") == 0
    kept = sorted((repo / "results").glob("ab-*.json"))
    if "experiments kept" in last:  # pytest wrote what ran before it stopped
        assert {p.name.rsplit("-", 1)[1] for p in kept} == {"baseline.json", "current.json"}

