"""Reading a JSON or YAML file the user wrote, with one-line errors that name file and line.

Playbooks and scenario sets share this so a syntax error reads the same wherever it happens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


def read_data_file(path: Path, error: type[Exception]) -> Any:
    """Parse ``path`` as JSON (``.json``) or YAML (anything else); problems raise ``error``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise error(f"{path}: {where}invalid YAML: {exc.problem or exc.context or 'syntax error'}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
