"""The files' bytes kept once per content (issue 39), and read back for a replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabtest.config.settings import Settings
from fabtest.conversation import AgentResponse, Attachment, Conversation, Turn
from fabtest.errors import UsageError
from fabtest.experiment import file_store
from fabtest.experiment.model import turn_records
from fabtest.replay.conversations import ReplayEnv

LAMP = Attachment.from_bytes(b"\x89PNG fake", name="lamp.png")


def test_bytes_are_kept_once_per_content_and_read_back_for_a_replay(tmp_path: Path) -> None:
    conversation = Conversation(turns=[Turn(1, "a", AgentResponse("b", attachments=[LAMP]), attachments=(LAMP,)),
                                       Turn(2, "c", AgentResponse("d"), attachments=(LAMP,))])
    assert file_store.keep(tmp_path / "results", file_store.conversation_files(conversation)) == 1
    assert file_store.keep(tmp_path / "results", [LAMP]) == 0  # already kept: not written again
    [first, _] = turn_records(conversation)
    env = ReplayEnv(Settings(results_dir="results"), tmp_path)
    [back] = env.recorded_files(first.user_files, where="turn 1")
    assert back == LAMP and back.data == LAMP.data
    other = Attachment.from_bytes(b"gone", name="gone.pdf")
    lost = turn_records(Conversation(turns=[Turn(1, "a", AgentResponse("b"), attachments=(other,))]))[0]
    with pytest.raises(UsageError, match="turn 1: the bytes of the file 'gone.pdf'"):
        env.recorded_files(lost.user_files, where="turn 1")


def test_a_recorded_conversation_gets_its_files_back_for_the_judge(tmp_path: Path) -> None:
    from fabtest.engine import transcript
    from fabtest.experiment.model import ScenarioResult, conversation_of

    conversation = Conversation(turns=[Turn(1, "look", AgentResponse("a lamp", attachments=[LAMP]),
                                            attachments=(LAMP,))])
    file_store.keep(tmp_path, [LAMP])
    result = ScenarioResult(id="example:1", name="s", passed=True, transcript=turn_records(conversation))
    back = conversation_of(result, files_dir=tmp_path)
    assert back.turns[0].attachments == (LAMP,) and back.turns[0].response.attachments == [LAMP]
    assert transcript.for_judge(back).files == (LAMP,)  # rejudge shows the judge the run's files again
    assert conversation_of(result).turns[0].attachments == ()  # without the results directory: text only
