"""examples/photo_claims (docs/how-to/files.md) runs as written: the agent reads the photo it is sent
and replies with a claim form, checked by the file steps; in-process, offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "photo_claims"


def test_the_photo_claims_example_passes_and_records_its_files(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("results", "__pycache__"))
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--fabtest-experiment-id", "exp_photo")
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "results" / "exp_photo.json").read_text())
    photo = next(s for s in doc["scenario_results"] if s["name"] == "A photo of the damaged lamp")
    [turn] = photo["transcript"]
    assert "64x48 photo of a mostly red lamp" in turn["agent"]
    assert [f["name"] for f in turn["user_files"]] == ["lamp.png"]
    assert [f["name"] for f in turn["agent_files"]] == ["claim-1.txt"]
    kept = pytester.path / "results" / "files" / turn["user_files"][0]["sha256"]
    assert kept.read_bytes() == (EXAMPLE / "features" / "files" / "lamp.png").read_bytes()
