"""Data the pages load when they need it, as small compressed scripts shared by every page.

Two kinds, both ``<script>`` files (a static build opened from ``file://`` cannot ``fetch``, but it
can load a script):

- ``exp/<id>/search.js``: each run's searchable text (user and agent messages, tool calls, the
  failure message), read by the transcript search of the experiment's page and of every comparison
  it is in; loaded on the first word typed, so the pages themselves carry no transcript twice;
- ``exp/<id>/conversations.js`` (static build only): every conversation page of the experiment,
  rendered by the same Python as when served, shown by ``exp/<id>/conversation.html#<run>``. Tens
  of thousands of conversation files were most of a static build's size (issue 31: 500
  experiments in at most 50 MB).

Each script sets ``window.fabtestData[key]`` to the base64 of the gzip of the JSON; ``view.js``
unpacks it with the browser's ``DecompressionStream``.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from typing import Any

from fabtest._internal import redaction
from fabtest.view.layout import experiment_path, scenario_slug

__all__ = ["CONVERSATIONS", "SEARCH", "pack_path", "pack_script", "run_key", "search_index", "search_text"]

SEARCH = "search.js"
CONVERSATIONS = "conversations.js"


def run_key(scenario_id: str, iteration: int) -> str:
    """One run's name inside its experiment (its conversation page's file name without ``.html``)."""
    return f"{scenario_slug(scenario_id)}-r{int(iteration)}"


def pack_path(experiment_id: str, name: str) -> str:
    """``exp/<id>/<name>``: a pack lives beside the experiment's conversations."""
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
    """Every run's searchable text by its :func:`run_key`."""
    return {run_key(str(x.get("id")), x.get("iteration") or 1): search_text(x)
            for x in doc.get("scenario_results") or [] if isinstance(x, dict)}


def pack_script(key: str, data: Any) -> bytes:
    """A script that hands ``data`` (JSON, gzipped, base64) to ``view.js`` under ``key``."""
    text = json.dumps(data, ensure_ascii=False)
    if redaction.secrets():  # the server redacts what it sends, but cannot see inside the gzip
        text = redaction.redact(text)
    packed = base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()
    return (f"(window.fabtestData=window.fabtestData||{{}})[{json.dumps(key)}]=\"{packed}\";\n").encode()
