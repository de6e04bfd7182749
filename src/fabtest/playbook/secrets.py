"""``${VAR}`` substitution for the variables a playbook lists in ``env``, and redaction of their values.

Only variables named in the playbook's ``env`` list are substituted (other ``${...}`` text is left
alone), in ``steps`` and ``persona`` (every string, including ``files_contain`` /
``tool_calls_contain`` keys). A listed variable that is not set is a :class:`PlaybookError`
before anything runs. The substituted values are secrets: they are registered with
:mod:`fabtest._internal.redaction` (so the recorder, the LLM cache, logs and console redact them) and
returned, for the run's own :class:`Redactor` over every trace, result and message it writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from fabtest._internal import redaction
from fabtest._internal.redaction import REDACTED, Redactor
from fabtest.playbook.load import Playbook, PlaybookError

__all__ = ["REDACTED", "Redactor", "interpolate"]
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
    redaction.register(*secrets)
    return filled, secrets
