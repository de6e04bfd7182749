"""The published package works: the sdist and wheel build, and README's quick start runs on the wheel.

An editable install hides packaging mistakes (a template left out of ``package-data``, a module
outside ``packages.find``, a console script naming a moved function): the suite imports ``src/``
directly. This test builds the sdist and, from it, the wheel (``python -m build``, as a release
would), installs the wheel into a fresh virtualenv and runs README's quick start there, offline.

Offline: the fresh virtualenv gets the wheel with ``--no-deps --no-index``; its dependencies come
from this environment through a ``.pth`` file listing this interpreter's site-packages (after the
virtualenv's own, so ``fabtest`` is imported from the wheel, which the test checks).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

pytestmark = pytest.mark.slow  # also listed in tests/support/slow.py


def _quick_start_commands() -> list[list[str]]:
    """README's Quick start commands, without the reader's own steps (installing, setting a key)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's Quick start has no bash block"
    commands = []
    for line in block[1].splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] not in ("pip", "export"):
            commands.append(words)
    return commands


def _outer_site_dirs() -> list[str]:
    """This interpreter's site-packages directories (where the dependencies are), not ``src/``."""
    return [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="python -m build needs the 'build' package (the dev extra)")
    out = tmp_path_factory.mktemp("dist")
    # a copy of what the build reads: two xdist workers may build at once, and the checkout stays clean
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(SRC, source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    # --no-isolation: offline, with this environment's setuptools (the dev extra pins a new enough one)
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_sdist_and_wheel_carry_the_distribution_name_and_the_package_data(built: Path) -> None:
    import tarfile
    import zipfile

    (wheel,) = built.glob("pytest_fabtest-*.whl")
    (sdist,) = built.glob("pytest_fabtest-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("fabtest/py.typed", "fabtest/playbook/schema.json", "fabtest/pytest_plugin/plugin.py"):
        assert needed in names, f"{needed} is missing from {wheel.name}"
    assert {"fabtest/view/assets/view.css", "fabtest/view/assets/view.js"} <= names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "\nName: pytest-fabtest\n" in zipfile.ZipFile(wheel).read(metadata).decode()
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "fabtest = fabtest.cli:main" in text and "fabtest-compare = fabtest.cli:compare_main" in text
    assert "[pytest11]" in text
    with tarfile.open(sdist) as tar:
        assert any(m.name.endswith("src/fabtest/playbook/schema.json") for m in tar.getmembers())


def test_readme_quick_start_is_green_on_the_installed_wheel(built: Path, tmp_path: Path) -> None:
    (wheel,) = built.glob("pytest_fabtest-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                                "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies: this environment's, searched after the wheel's own site-packages
    (Path(site) / "zz_dependencies.pth").write_text("\n".join(_outer_site_dirs()) + "\n")

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "GEMINI_", "GOOGLE_", "PYTHON", "COV_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    project = tmp_path / "project"
    project.mkdir()

    where = subprocess.run([str(python), "-c", "import fabtest; print(fabtest.__file__)"], cwd=project, env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(site) and not where.stdout.startswith(str(SRC)), where.stdout

    commands = _quick_start_commands()
    assert [c[0] for c in commands] == ["fabtest", "pytest", "pytest"], commands
    fabtest = env_dir / "bin" / "fabtest"
    assert fabtest.exists() and (env_dir / "bin" / "fabtest-compare").exists(), "the wheel installs no commands"
    for words in commands[:2]:  # the second pytest is the same run with a real key
        # fabtest: the wheel's console script; pytest: the dependency's, run by the new interpreter
        argv = [str(fabtest), *words[1:]] if words[0] == "fabtest" else [str(python), "-m", *words, "-p", "no:cacheprovider"]
        ran = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, f"{shlex.join(words)} failed:\n{ran.stdout[-4000:]}\n{ran.stderr[-2000:]}"
    assert re.search(r"=+ \d+ passed", ran.stdout) and not re.search(r"\d+ (failed|error)", ran.stdout.splitlines()[-1])
    assert list((project / "results").glob("*.json")), "the quick start wrote no experiment"
