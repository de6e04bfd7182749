"""``${VAR}`` substitution for the variables a playbook lists in ``env``, and redaction of their values.

Only variables named in the playbook's ``env`` list are substituted (other ``${...}`` text is left
alone), in ``steps`` and ``persona`` (every string, including ``files_contain`` /
``tool_calls_contain`` keys). A listed variable that is not set is a :class:`PlaybookError`
before anything runs. The substituted values are secrets: pass them to :class:`Redactor` and
redact every trace, result and log line before it is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from fabtest.playbook.load import Playbook, PlaybookError

REDACTED = "***"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def interpolate(playbook: Playbook, environ: Mapping[str, str] | None = None) -> tuple[Playbook, list[str]]:
    """Return the playbook with ``${VAR}`` filled in for its ``env`` variables, and their values."""
    environ = os.environ if environ is None else environ
    source = playbook.source or "<playbook>"
    missing = [name for name in playbook.env if name not in environ]
    if missing:
        names = ", ".join(missing)
        noun = "variable" if len(missing) == 1 else "variables"
        raise PlaybookError(f"{source}: env: {noun} {names} not set (the playbook needs them)")
    values = {name: str(environ[name]) for name in playbook.env}

    def sub(value: Any) -> Any:
        if isinstance(value, str):
            return _VAR.sub(lambda m: values.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [sub(v) for v in value]
        if isinstance(value, dict):
            return {sub(k): sub(v) for k, v in value.items()}
        return value

    data = playbook.model_dump()
    for key in ("steps", "persona"):
        data[key] = sub(data[key])
    filled = Playbook.model_validate({**data, "source": playbook.source})
    secrets = sorted({v for v in values.values() if v.strip()}, key=len, reverse=True)
    return filled, secrets


class Redactor:
    """Replaces every secret value with ``***`` in text and in JSON-like data."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and s.strip()}
        self.secrets = sorted(unique, key=len, reverse=True)  # longest first: overlapping values
        self._pattern = re.compile("|".join(re.escape(s) for s in self.secrets)) if self.secrets else None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def redact(self, text: str) -> str:
        if self._pattern is None or not isinstance(text, str):
            return text
        return self._pattern.sub(REDACTED, text)

    def redact_obj(self, value: Any) -> Any:
        """A copy of dicts/lists/tuples/strings with secrets redacted (keys too); other values as is."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {self.redact(k) if isinstance(k, str) else k: self.redact_obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_obj(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.redact_obj(v) for v in value)
        return value
