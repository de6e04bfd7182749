"""The demo venue tools as an MCP server (official ``mcp`` SDK), for the built-in agent example.

``python -m fabtest.demo.mcp_server`` speaks MCP over stdio (what ``mcp = [{ command = [...] }]``
starts); ``--http PORT`` serves streamable HTTP on ``http://127.0.0.1:PORT/mcp`` instead. The
tools are the demo agent's own functions, so results match ``features/`` run in-process.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fabtest.demo import agent as _venues


def build_server() -> Any:
    """An ``MCPServer`` with ``search_venues``, ``check_availability`` and ``book_venue``."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("fabtest-demo-venues", instructions="Search, check and book event venues.")

    @server.tool()
    def search_venues(city: str, capacity: int) -> list[dict[str, Any]]:
        """Venues in a city that hold at least `capacity` people, smallest first, with their price per day."""
        return _venues.search_venues(city, capacity)

    @server.tool()
    def check_availability(venue_id: str, date: str) -> dict[str, Any]:
        """Whether the venue is free on the date (for example "12 March")."""
        return _venues.check_availability(venue_id, date)

    @server.tool()
    def book_venue(venue_id: str, date: str, people: int) -> dict[str, Any]:
        """Book the venue for a date and a number of people; returns a confirmation number."""
        return _venues.book_venue(venue_id, date, people)

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the demo venue tools over MCP (stdio, or HTTP on loopback).")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args(argv)
    server = build_server()
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
