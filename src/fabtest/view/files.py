"""The conversation's files in ``fabtest view``: thumbnails and links on a conversation page, and
the bytes served from ``results/files/<sha256>`` (:mod:`fabtest.experiment.file_store`).

A file is addressed as ``files/<sha256>/<name>``: the hash finds the bytes, the name gives the
browser a file name and an extension. Only raster images are served as what they are (an
``<img>`` thumbnail links to the full image); any other file (an HTML page, an SVG, a PDF an
agent wrote) is served as a download, so nothing an agent produced can run script on the view's
origin, where a page can save labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fabtest.conversation import human_size
from fabtest.experiment.file_store import file_path
from fabtest.experiment.fmt import num
from fabtest.view.layout import e

__all__ = ["FILE_PATH", "file_links", "file_page", "referenced_files", "voice_side"]

#: ``files/<sha256>/<name>``
FILE_PATH = re.compile(r"files/([0-9a-f]{64})/([A-Za-z0-9._-]{1,120})")
#: the types shown inline (raster images: no script can run in them)
_INLINE = {"image/png", "image/jpeg", "image/gif", "image/webp"}
#: a voice turn's audio (WAV, what fabtest keeps), played in the page
_AUDIO = {"audio/wav", "audio/x-wav", "audio/wave"}


def _safe_name(name: str) -> str:
    return (re.sub(r"[^A-Za-z0-9._-]", "_", name) or "file")[-120:].lstrip(".") or "file"


def file_url(root: str, record: Mapping[str, Any]) -> str:
    return f"{root}files/{record.get('sha256')}/{_safe_name(str(record.get('name') or 'file'))}"


def file_links(root: str, records: Any) -> str:
    """A message's files: a thumbnail per image, a link per other file, each with its type and size."""
    shown = []
    for record in records or []:
        if not isinstance(record, Mapping) or not re.fullmatch(r"[0-9a-f]{64}", str(record.get("sha256"))):
            continue
        url = e(file_url(root, record))
        name, mime = e(record.get("name")), str(record.get("mime_type") or "")
        size = human_size(int(record.get("size") or 0))
        if mime in _INLINE:
            shown.append(f'<a class="file" href="{url}"><img class="thumb" src="{url}" alt="{name}" loading="lazy">'
                         f'<span class="muted">{name} · {e(size)}</span></a>')
        else:
            shown.append(f'<a class="file" href="{url}" download>📎 {name} <span class="muted">{e(mime)} · '
                         f'{e(size)}</span></a>')
    return f'<div class="files">{"".join(shown)}</div>' if shown else ""


def file_page(results_dir: Path, sha256: str, name: str) -> tuple[bytes, str] | None:
    """The bytes and content type of ``files/<sha256>/<name>``, or None when not kept."""
    try:
        data = file_path(results_dir, sha256).read_bytes()
    except (OSError, ValueError):
        return None
    import mimetypes

    guessed = mimetypes.guess_type(name, strict=False)[0] or ""
    if guessed in _AUDIO:
        return data, "audio/wav"
    return data, guessed if guessed in _INLINE else "application/octet-stream"


def voice_side(root: str, voice: Any, side: str) -> str:
    """One side of a voice turn (``side``: ``user`` or ``agent``): a player of its audio, and for the
    agent the times, the agent's own words and the word error rate beside the transcript."""
    if not isinstance(voice, Mapping):
        return ""
    record = voice.get(f"{side}_audio")
    player = ""
    if isinstance(record, Mapping) and re.fullmatch(r"[0-9a-f]{64}", str(record.get("sha256"))):
        player = (f'<audio class="voice" controls preload="none" src="{e(file_url(root, record))}"></audio>'
                  f'<span class="muted"> {e(num(float(record.get("duration_ms") or 0) / 1000, 1))} s</span>')
    if side == "user":
        return f'<div class="files">{player}</div>' if player else ""
    facts = []
    first = voice.get("time_to_first_audio_ms")
    facts.append(f"first audio after {num(first, 0)} ms" if isinstance(first, int | float) else "no audio")
    if voice.get("interrupted"):
        facts.append("interrupted by the user")
    if isinstance(voice.get("word_error_rate"), int | float):
        facts.append(f"word error rate {num(voice['word_error_rate'], 2)}")
    said = (f'<div class="muted">the agent\'s own words: {e(voice.get("agent_text"))}</div>'
            if voice.get("agent_text") else "")
    return f'<div class="files">{player}</div><div class="muted">{e(" · ".join(facts))}</div>{said}'



def referenced_files(doc: Mapping[str, Any]) -> Iterator[str]:
    """The ``files/<sha256>/<name>`` paths an experiment's conversations link to (for a static build)."""
    seen: set[str] = set()
    for entry in doc.get("scenario_results") or []:
        for turn in (entry.get("transcript") or []) if isinstance(entry, Mapping) else []:
            voice = turn.get("voice") if isinstance(turn, Mapping) else None
            spoken = [voice.get(k) for k in ("user_audio", "agent_audio")] if isinstance(voice, Mapping) else []
            for key in ("user_files", "agent_files", "voice"):
                records = spoken if key == "voice" else (turn.get(key) or []) if isinstance(turn, Mapping) else []
                for record in records:
                    path = file_url("", record) if isinstance(record, Mapping) else ""
                    if FILE_PATH.fullmatch(path) and path not in seen:
                        seen.add(path)
                        yield path
