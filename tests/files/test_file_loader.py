"""Each file a run sends is read and hashed once and shared (issue 39's performance rule), and what
cannot be sent is one line naming the file and where."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabtest.config.settings import Settings
from fabtest.conversation import Attachment
from fabtest.engine.attachments import FileLoader, FileRef, files_in_step
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import UsageError


def test_scenarios_share_one_read_and_one_object(tmp_path: Path) -> None:
    (tmp_path / "photo.png").write_bytes(b"\x89PNG" + os.urandom(1000))
    loader = FileLoader()
    turns = []
    for _ in range(3):  # three scenario runs (iterations) of one run
        state = ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                              where="f.feature:3", default_agent=lambda messages: "ok", files=loader)
        turns.append(state.user_sends("hi", [FileRef("photo.png")]))
        state.finish()
    assert loader.reads == 1
    assert turns[0].attachments[0] is turns[2].attachments[0]  # one object: the bytes are never copied
    (tmp_path / "photo.png").write_bytes(b"\x89PNG other")  # changed on disk: read again
    assert loader.load(tmp_path, FileRef("photo.png"), where="x").data == b"\x89PNG other" and loader.reads == 2


@pytest.mark.parametrize(("name", "data", "cap", "message"), [
    ("nope.png", None, 100, 'f:3: the file "nope.png" does not exist'),
    ("big.pdf", b"x" * 101, 100, 'f:3: the file "big.pdf" is 101 B, over the limit of 100 B ([tool.fabtest] max_file_bytes)'),
    ("blob.zzz", b"x", 100, 'f:3: cannot tell the type of the file "blob.zzz" from its name'),
])
def test_what_cannot_be_sent_is_one_line(tmp_path: Path, name: str, data: bytes | None, cap: int, message: str) -> None:
    if data is not None:
        (tmp_path / name).write_bytes(data)
    with pytest.raises(UsageError) as caught:
        FileLoader(max_bytes=cap).load(tmp_path, FileRef(name), where="f:3")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_type_column_sends_a_file_whose_name_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "scan").write_bytes(b"x")
    [ref] = files_in_step('the user sends these files with "hi":', [["file", "type"], ["scan", "image/heic"]], where="f")
    assert FileLoader().load(tmp_path, ref, where="f").mime_type == "image/heic"
    refs = files_in_step('the user sends "a.pdf", "b.png" and "c.txt" with "three"', None, where="f")
    assert [r.path for r in refs or []] == ["a.pdf", "b.png", "c.txt"]


def test_an_attachment_from_bytes_guesses_its_type_and_hashes_once() -> None:
    file = Attachment.from_bytes(b"%PDF-1.4", name="policy.pdf")
    assert (file.mime_type, file.size, len(file.sha256)) == ("application/pdf", 8, 64)
    assert "data" not in repr(file) and file == Attachment.from_bytes(b"%PDF-1.4", name="policy.pdf")
    with pytest.raises(TypeError, match="data must be bytes"):
        Attachment("a.txt", "text/plain", "text")  # type: ignore[arg-type]
