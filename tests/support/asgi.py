"""An ASGI app served on 127.0.0.1 by uvicorn on a thread of the test process, for protocol servers built
with their own SDK (A2A, AG-UI): one server per test module, no subprocess."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def serve(app_for: Callable[[str], Any]) -> Iterator[str]:
    """Serve ``app_for(url)`` on a free loopback port for the block and yield that base URL
    (``http://127.0.0.1:PORT``): the app knows its own address (an A2A card names it)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app_for(url), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="asgi-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
