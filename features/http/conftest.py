"""Serve the demo agent over HTTP for the features in this directory.

A ``fabtest_agent`` fixture overrides ``[tool.fabtest] agent`` for everything below this folder;
returning a table ``{"http": url}`` selects the HTTP adapter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from fabtest.demo.server import make_server


@pytest.fixture(scope="session")
def demo_server_url() -> Iterator[str]:
    server = make_server(0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/chat"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fabtest_agent(demo_server_url: str) -> dict[str, object]:
    return {"http": demo_server_url, "timeout": 10}
