"""An experiment's runs as one small compressed script, loaded by the pages that need it.

``exp/<id>/runs.js`` sets ``window.fabtestData["runs:<id>"]`` to the gzip of a JSON object keyed by
:func:`run_key` (``<scenario slug>-r<iteration>``), 7 bits of it per ASCII character of a string
(:func:`ascii7`: 8/7 of the gzip's size where base64 is 4/3; read as UTF-8, as the pages declare
and the server sends it). A
``<script>`` file, not JSON: a static build opened from ``file://`` cannot ``fetch``, but it can
load a script. ``view.js`` unpacks it with the browser's ``DecompressionStream``;
:func:`unpack_script` does the same in Python.

- Served, each run's value is its searchable text (:func:`search_text`): the transcript search of
  the experiment's page and of every comparison it is in loads it on the first word typed, so no
  page carries the transcripts twice.
- In a static build, each value is ``[title, header, body, text]``: the run's whole conversation
  page, rendered by the same Python as when served, which ``exp/<id>/conversation.html#<run key>``
  shows, and its searchable text last (gzip finds it in the body just before, so it costs little).
  Tens of thousands of conversation files were most of a static build's size (issue 31: 500
  experiments in at most 50 MB).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping
from typing import Any

from fabtest._internal import redaction
from fabtest.view.layout import e, experiment_path, page, scenario_slug

__all__ = ["RUNS", "SHELL", "ascii7", "pack_key", "pack_path", "pack_script", "packed_links", "run_key", "search_index",
           "search_text", "shell_page", "unpack_script"]

RUNS = "runs.js"
SHELL = "conversation.html"


def run_key(scenario_id: str, iteration: int) -> str:
    """One run's name inside its experiment (its conversation page's file name without ``.html``)."""
    return f"{scenario_slug(scenario_id)}-r{int(iteration)}"


def pack_key(experiment_id: str) -> str:
    return f"runs:{experiment_id}"


def pack_path(experiment_id: str, name: str = RUNS) -> str:
    """``exp/<id>/<name>``: beside the experiment's conversations."""
    return experiment_path(experiment_id)[: -len(".html")] + "/" + name


def search_text(entry: Mapping[str, Any]) -> str:
    """What the transcript search matches in one run: every user and agent message, tool names and
    arguments, and the failure message, lower-cased."""
    parts = [str(entry.get("failure_message") or "")]
    for t in entry.get("transcript") or []:
        if isinstance(t, dict):
            parts += [str(t.get("user") or ""), str(t.get("agent") or "")]
            parts += [f"{c.get('name')} {_compact(c.get('arguments'))}"
                      for c in t.get("tool_calls") or [] if isinstance(c, dict)]
    return " ".join(parts).lower()


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def search_index(doc: Mapping[str, Any]) -> dict[str, str]:
    """Every run's searchable text by its :func:`run_key` (what ``runs.js`` holds when served)."""
    return {run_key(str(x.get("id")), x.get("iteration") or 1): search_text(x)
            for x in doc.get("scenario_results") or [] if isinstance(x, dict)}


def pack_script(key: str, data: Any) -> bytes:
    """A script that hands ``data`` (JSON, gzipped, :func:`ascii7`) to ``view.js`` under ``key``."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if redaction.secrets():  # the server redacts what it sends, but cannot see inside the gzip
        text = redaction.redact(text)
    packed = ascii7(gzip.compress(text.encode(), compresslevel=9, mtime=0)).translate(_ESCAPES)
    return f"(window.fabtestData=window.fabtestData||{{}})[{json.dumps(key)}]=\"{packed}\";\n".encode()


#: the code points a string literal cannot hold as they are (NUL, line breaks, quote, backslash)
#: move up by 128: two bytes of UTF-8 each, as an escape would take, and ``view.js`` keeps 7 bits
_ESCAPES = {c: chr(0x80 | c) for c in (0, 10, 13, 34, 92)}


def ascii7(data: bytes) -> str:
    """``data`` 7 bits per character (code points 0-127, big-endian, the last one zero-padded):
    ``ceil(8n / 7)`` characters, one byte of UTF-8 each; ``view.js`` reads ``floor(7 * length / 8)``
    bytes back from their code points' low 7 bits."""
    padded = data + bytes(-len(data) % 7)
    chars: list[str] = []
    for i in range(0, len(padded), 7):
        n = int.from_bytes(padded[i:i + 7], "big")
        chars.extend(chr((n >> shift) & 127) for shift in range(49, -1, -7))
    return "".join(chars[: -(-len(data) * 8 // 7)])


def unpack_script(script: str) -> Any:
    """The data a :func:`pack_script` script holds (what ``view.js`` unpacks in the browser)."""
    literal = script[script.index("=", script.index("]")) + 1: script.rindex('"') + 1]
    text = json.loads(literal, strict=False)  # the raw control characters ascii7 uses
    return json.loads(gzip.decompress(_bytes7(text)))


def _bytes7(text: str) -> bytes:
    out = bytearray()
    acc = bits = 0
    for c in text:
        acc, bits = ((acc << 7) | (ord(c) & 127)) & 0x7FFF, bits + 7
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 255)
    return bytes(out)


_CONVERSATION_LINK = re.compile(r'href="([^"]*?exp/[^/"]+/)([A-Za-z0-9_.-]+-r\d+)\.html"')


def packed_links(html: str) -> str:
    """A static build's links to conversations: ``exp/<id>/<run>.html`` -> ``exp/<id>/conversation.html#<run>``."""
    return _CONVERSATION_LINK.sub(lambda m: f'href="{m.group(1)}{SHELL}#{m.group(2)}"', html)


def shell_page(experiment_id: str) -> str:
    """``exp/<id>/conversation.html`` of a static build: shows the run its ``#<run key>`` names, from ``runs.js``."""
    body = (f'<div id="packed" data-src="{RUNS}" data-key="{e(pack_key(experiment_id))}">'
            '<p class="muted">Loading the conversation (it needs JavaScript)…</p></div>')
    return page(f"fabtest view · {experiment_id}", "../../", body, '<div id="packed-header"></div>')
