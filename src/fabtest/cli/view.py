"""``fabtest view``: browse a results directory on 127.0.0.1, or build it as a static site."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from fabtest.cli.common import EXIT_OK, fail, results_dir_of

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _port(text: str) -> int:
    """A TCP port for ``fabtest view --port``: 0 (any free one) to 65535, else a usage error."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a port number: {text!r} (use e.g. 8000, or 0 for any free port)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {text!r} (0 to 65535; 0 picks any free port)")
    return port


def _cmd_view(args: argparse.Namespace) -> int:
    from fabtest._internal.redaction import register_project_secrets
    from fabtest.view import build_site, serve

    register_project_secrets()  # ${VAR} values too: pages, labels and their answers never show them
    results_dir = results_dir_of(args)
    if not Path(results_dir).is_dir():
        return fail(f"{results_dir}: no such directory (give the results directory: "
                    "fabtest view RESULTS_DIR, or run pytest first)", "fabtest view")
    if args.build:
        try:
            count = build_site(results_dir, args.build)
        except OSError as exc:
            return fail(f"cannot write {args.build}: {exc.strerror or exc}", "fabtest view")
        print(f"fabtest view: {count} files written to {args.build} (open {Path(args.build) / 'index.html'})")
        return EXIT_OK
    try:
        serve(results_dir, args.port, open_browser=not args.no_open)
    except OSError as exc:
        return fail(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", "fabtest view")
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest view``."""
    p = sub.add_parser("view",
                       help="browse experiments, trends, comparisons and conversations (or --build a static site)")
    p.add_argument("results_dir", nargs="?", default=None, metavar="RESULTS_DIR",
                   help="the results directory (default: [tool.fabtest] results_dir)")
    p.add_argument("--build", default=None, metavar="DIR",
                   help="write the site as static files to DIR instead of serving it")
    p.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: any free port)")
    p.add_argument("--no-open", action="store_true", help="do not open the browser; just print the URL")
    p.set_defaults(func=_cmd_view)
