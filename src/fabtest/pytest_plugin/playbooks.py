"""Collecting playbook files as pytest items (filled in by the playbook runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def collect_playbook(session: Any, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return None
