"""What the adapters of agents behind a protocol (``a2a = "URL"``, ``ag_ui = "URL"``) share.

Their table is checked before any request: a misspelt key with its likely spelling, a URL that is
not one, a bad timeout or header table, a bad ``tools`` list and the missing extra are each one line
naming the table. Their ``metadata()`` has the declared tools, and their HTTP connections end with
the scenario (:class:`RemoteAgent`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Mapping, Set
from typing import Any

from fabtest._internal.extras import require_extra
from fabtest.agents.base import declared_tools
from fabtest.errors import UsageError, did_you_mean

__all__ = ["RemoteAgent", "check_protocol_table"]


def check_protocol_table(table: Mapping[str, Any], *, keys: Set[str], key: str, label: str, url_is: str,
                         extra: str, where: str) -> None:
    """Raise UsageError for the first problem of ``table`` (``key`` holds the URL, ``url_is`` says what it is)."""
    unknown = sorted(set(table) - keys)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} in {label} agent table"
                         f"{did_you_mean(unknown[0], sorted(keys))}; known: {', '.join(sorted(keys))}")
    url = table.get(key)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UsageError(f"{where}: {key} must be {url_is} (http:// or https://), got {url!r}")
    timeout = table.get("timeout", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise UsageError(f"{where}: timeout must be a positive number of seconds, got {timeout!r}")
    headers = table.get("headers", {})
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        raise UsageError(f"{where}: headers must be a table of strings, got {headers!r}")
    declared_tools(table.get("tools"), where=where)
    require_extra(extra, where=where)


class RemoteAgent:
    """The scenario-long part of a protocol adapter: ``around()`` closes its connections (``aclose``)
    when the scenario ends, and ``metadata()`` lists the tools the table declares."""

    tools: list[str] | None = None

    async def aclose(self) -> None:
        """Close the scenario's connections; safe to call twice."""

    @contextlib.asynccontextmanager
    async def around(self) -> AsyncIterator[None]:
        """The scenario: its HTTP connections are closed when it ends."""
        try:
            yield
        finally:
            await self.aclose()

    def with_tools(self, meta: dict[str, Any]) -> dict[str, Any]:
        if self.tools is not None:
            meta["tools"] = list(self.tools)
        return meta
