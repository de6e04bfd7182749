"""Every reader of results files redacts the LLM keys its process holds (issue 30, secrets): a file
written by an older fabtest or another tool may still hold the GEMINI_API_KEY value an agent echoed;
``fabtest show``, ``report``, ``view --build`` and ``fabtest-compare`` (text, markdown, HTML) show
``***`` instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.experiments import make_doc, make_result

from fabtest.experiment.export import write_document

KEY = "AIzaOLD-leaked-key-7f3a9c"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for exp_id, passed in (("exp_a", True), ("exp_b", False)):
        result = make_result(f"scenario {KEY}", passed=passed, failure_type=None if passed else "assertion")
        result.failure_message = None if passed else f"agent said: your key is {KEY}"
        write_document(make_doc(exp_id, [result], name=f"run with {KEY}"), out)
    assert KEY in (out / "exp_b.json").read_text(encoding="utf-8")  # as an unredacted writer left it
    return out


def _run(results: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    env["GEMINI_API_KEY"] = KEY
    done = subprocess.run([sys.executable, "-m", "fabtest.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=results.parent, env=env)
    return done.stdout + done.stderr


@pytest.mark.parametrize("args", [["show", "exp_b"], ["list"], ["compare", "exp_a", "exp_b"],
                                  ["compare", "exp_a", "exp_b", "--format", "markdown"],
                                  ["compare", "exp_a", "exp_b", "--format", "json"]])
def test_terminal_output_redacts_the_llm_key(results: Path, args: list[str]) -> None:
    output = _run(results, *args, "--results-dir", str(results))
    assert KEY not in output and "***" in output, output


def test_written_pages_redact_the_llm_key(results: Path, tmp_path: Path) -> None:
    _run(results, "report", "exp_b", "--results-dir", str(results), "-o", str(tmp_path / "r.html"))
    _run(results, "compare", "exp_a", "exp_b", "--results-dir", str(results), "--html", str(tmp_path / "c.html"))
    _run(results, "view", str(results), "--build", str(tmp_path / "site"))
    pages = [tmp_path / "r.html", tmp_path / "c.html", *(tmp_path / "site").rglob("*.html")]
    assert len(pages) > 4
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert KEY not in text, page
    # a static build's conversations are gzipped inside exp/<id>/runs.js: grep cannot see them, unpack them
    from fabtest.view.packs import unpack_script

    packs = sorted((tmp_path / "site").glob("exp/*/runs.js"))
    assert len(packs) == 2
    for pack in packs:
        unpacked = json.dumps(unpack_script(pack.read_text(encoding="utf-8")), ensure_ascii=False)
        assert KEY not in unpacked and "scenario ***" in unpacked, pack
