"""One real spoken round trip, no speech mocked (docs/how-to/voice.md): examples/voice_receptionist's
booking scenario, where Piper speaks the caller's words, the example agent hears them with
PocketSphinx and answers with Piper, and fabtest hears the answer with PocketSphinx. Offline: the
voice and the models come inside the packages of pytest-fabtest[voice]."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("piper", reason="needs pytest-fabtest[voice]")
pytest.importorskip("pocketsphinx", reason="needs pytest-fabtest[voice]")

EXAMPLE = Path(__file__).parents[2] / "examples" / "voice_receptionist"


def test_the_receptionist_hears_a_spoken_booking_and_is_heard_back(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("results", "__pycache__"))
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-k", "booking", "--fabtest-experiment-id", "exp_real")
    result.assert_outcomes(passed=1, deselected=1)
    doc = json.loads((pytester.path / "results" / "exp_real.json").read_text())
    [turn] = doc["scenario_results"][0]["transcript"]
    assert turn["user"] == "book a table for two tonight"
    assert "table" in turn["agent"].split()  # PocketSphinx heard Piper's "Your table for two is booked ..."
    voice = turn["voice"]
    assert voice["agent_text"] == "Your table for two is booked for tonight."
    assert 0 <= voice["word_error_rate"] < 0.6
    assert voice["reply_audio_ms"] > 1000 and voice["agent_audio"]["sample_rate"] == 22050
    assert (pytester.path / "results" / "files" / voice["user_audio"]["sha256"]).is_file()
