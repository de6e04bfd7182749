"""Optional dependencies: a missing one is a one-line error naming the extra that brings it.

``pip install pytest-fabtest`` installs what every user needs; adapters that pull a large or
version-sensitive SDK are extras, so fabtest never upgrades a package a project pins for its own
code (an MCP server written for mcp 1.x, say). Using such an adapter without its package is
reported before the run (the pre-flight builds the agent tables) and names the extra to install.
"""

from __future__ import annotations

import importlib.util

from fabtest.errors import UsageError

__all__ = ["DISTRIBUTION", "EXTRAS", "install_command", "require_extra"]

#: fabtest's name on PyPI (the import name stays ``fabtest``): ``fabtest`` there is an unrelated 2012 project
DISTRIBUTION = "pytest-fabtest"

#: extra -> (the module it provides, what it is for): pyproject.toml's [project.optional-dependencies]
EXTRAS = {
    "mcp": ("mcp", "MCP servers of built-in agents (mcp = [...])"),
    "acp": ("acp", "agents over the Agent Client Protocol (acp = [...], the Gemini CLI over ACP)"),
    "a2a": ("a2a", "agents over the A2A protocol (a2a = \"URL\")"),
    "ag-ui": ("ag_ui", "agents over the AG-UI protocol (ag_ui = \"URL\")"),
    "realtime": ("websockets", "voice agents over the OpenAI Realtime protocol (realtime = \"wss://...\")"),
    "pdf": ("pypdf", "checks on the text of a PDF the agent replies with"),
    "voice": ("pocketsphinx", "voice scenarios (offline text to speech and speech recognition)"),
}


def require_extra(extra: str, *, where: str, module: str | None = None) -> None:
    """Raise :class:`UsageError` naming ``pip install 'pytest-fabtest[EXTRA]'`` when the extra's module
    (or ``module``, another package the extra brings) is missing."""
    default, purpose = EXTRAS[extra]
    module = module or default
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(f"{where}: {purpose} need the {module!r} package, which is not installed: "
                         f"{install_command(extra)}")


def install_command(extra: str) -> str:
    """The command that installs fabtest with ``extra``, under fabtest's distribution name."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
