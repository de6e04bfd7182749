"""Importing what configuration names as ``module:attr``: agents, tools, offline LLMs.

Low in the layers (it needs only :mod:`fabtest.errors`), so settings, LLM factories and agent
adapters can all resolve a target without importing the agent registry.
"""

from __future__ import annotations

import importlib
from typing import Any

from fabtest.errors import UsageError, describe, did_you_mean

__all__ = ["import_object"]


def import_object(spec: str, *, where: str, what: str = "agent") -> Any:
    """Import ``module:attr`` (or ``module.attr``), with a one-line error naming ``where`` and
    ``what`` is imported (an offline LLM is not an "agent")."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise UsageError(f"{where}: {what} {spec!r} is not of the form 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's config problem
        raise UsageError(f"{where}: {what} {spec!r} does not import: {describe(exc)}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if not n.startswith("_")]
            raise UsageError(f"{where}: {what} {spec!r}: module {module_name!r} has no attribute {attr!r}"
                             f"{did_you_mean(part, names)}") from None
    return obj
