"""Serve the site on 127.0.0.1 (``fabtest view``) or write it as static files (``--build``)."""

from __future__ import annotations

import json
import sys
import threading
import webbrowser
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from fabtest._internal import redaction
from fabtest.view.catalog import Catalog
from fabtest.view.labels import LabelError
from fabtest.view.site import Site

__all__ = ["build_site", "make_server", "serve"]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "fabtest-view"
        timeout = 10  # seconds a connection may sit silent: a body shorter than announced cannot hold a thread

        def do_GET(self) -> None:  # (http.server's name)
            if not _served_host(self.headers.get("Host"), int(getattr(self.server, "server_port", 0))):
                # DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 would read
                # every transcript; only the names this server is reached by are answered
                self._send(421, b"fabtest view: this server answers only http://127.0.0.1:PORT/ and "
                                b"http://localhost:PORT/", "text/plain; charset=utf-8")
                return
            path = urlsplit(self.path).path
            try:
                page = site.render(path)
            except Exception as exc:  # one bad file must not take the server down: the page says what failed
                body = f"fabtest view: cannot render {path}: {type(exc).__name__}: {exc}".encode()
                self._send(500, body, "text/plain; charset=utf-8")
                return
            if page is None:
                self._send(404, f"fabtest view: no page {path}".encode(), "text/plain; charset=utf-8")
                return
            body = page.body if path.startswith("/files/") else _redacted(page.body)  # a file's bytes as kept
            self._send(200, body, page.content_type)

        def do_POST(self) -> None:  # (http.server's name)
            """``/label`` only: a person's mark on a judged check, saved in the results directory.
            A cross-site page cannot post here: the Host must be this server's, an Origin (browsers
            send one) must be too, and the body must be ``application/json``, which a form on another
            site cannot send without a CORS preflight this server never answers."""
            port = int(getattr(self.server, "server_port", 0))
            origin = self.headers.get("Origin")
            if (not _served_host(self.headers.get("Host"), port)
                    or (origin is not None and not _served_host(urlsplit(origin).netloc, port))
                    or urlsplit(origin or "http://x").scheme != "http"):
                self._send(403, b"fabtest view: labels are accepted from this server's own pages only",
                           "text/plain; charset=utf-8")
                return
            given = self.headers.get("Content-Length") or "0"
            length = int(given) if given.isdigit() else 0
            if (urlsplit(self.path).path != "/label"
                    or not (self.headers.get("Content-Type") or "").startswith("application/json")
                    or not 0 < length <= 65536):
                self._send(400, b"fabtest view: POST /label with a JSON body", "text/plain; charset=utf-8")
                return
            try:
                answer = site.label(json.loads(self.rfile.read(length)))
            except (LabelError, ValueError, OSError) as exc:
                self._send(400, _redacted(json.dumps({"error": str(exc)}).encode()), "application/json")
                return
            except RecursionError:  # JSON nested deeper than Python's stack: a bad body like any other
                self._send(400, b'{"error": "the JSON body is nested too deeply"}', "application/json")
                return
            self._send(200, _redacted(json.dumps(answer).encode()), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")  # a new run shows on reload
            self.send_header("X-Content-Type-Options", "nosniff")  # a kept file is never sniffed into a page
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # (http.server's name)
            return  # quiet: the terminal shows the URL, not every request

    return Handler


def _redacted(body: bytes) -> bytes:
    """A page with every registered secret (the LLM keys this process holds) replaced: a results file
    written by an older fabtest or another tool may still hold one."""
    if not redaction.secrets():
        return body
    return redaction.redact(body.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _served_host(host: str | None, port: int) -> bool:
    """True for the Host names this server is reached by: ``127.0.0.1:PORT`` and ``localhost:PORT``
    (any case; the port left out only on port 80, as a browser does)."""
    if not host:
        return False
    name, _, given = host.strip().lower().rpartition(":") if ":" in host else (host.strip().lower(), "", "")
    if not name:
        name, given = given, ""
    return name in {"127.0.0.1", "localhost"} and (given == str(port) or (given == "" and port == 80))


def make_server(results_dir: str | Path, port: int = 0) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 (``port`` 0: any free one) over ``results_dir``; not started."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(Site(Catalog(Path(results_dir)))))
    server.daemon_threads = True
    return server


def serve(results_dir: str | Path, port: int = 0, open_browser: bool = True,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted, printing the URL (and opening it unless ``open_browser`` is False)."""
    server = make_server(results_dir, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    print(f"fabtest view: serving {results_dir} at {url} (Ctrl+C to stop)", flush=True)
    if ready:
        ready(url)
    if open_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("fabtest view: stopped", file=sys.stderr)
    finally:
        server.server_close()


def build_site(results_dir: str | Path, out: str | Path) -> int:
    """Write every page under ``out`` (open ``out/index.html``); returns the number of files."""
    site = Site(Catalog(Path(results_dir)))
    root = Path(out)
    written = 0
    for path, page in site.pages():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(page.body if path.startswith("files/") else _redacted(page.body))
        written += 1
    return written
