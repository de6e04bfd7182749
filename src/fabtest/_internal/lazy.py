"""A package's exports, some imported on first use, written once: in the package's own imports.

A package ``__init__`` imports the cheap names at the top and the costly ones inside
``if TYPE_CHECKING:`` (so type checkers and readers see every name where it comes from);
:func:`exports` reads that file once and gives its ``__all__`` (every name imported from fabtest)
and a module ``__getattr__`` that imports the ``TYPE_CHECKING`` names on first use. This is the
pattern of scientific-python's SPEC 1 (``lazy_loader.attach_stub``), reading the ``__init__``
instead of a stub, so no list of names is kept by hand in step with the imports.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path

__all__ = ["exports"]


def exports(package: str, init_file: str) -> tuple[list[str], Callable[[str], object]]:
    """``(__all__, __getattr__)`` for ``package`` from the imports of its ``__init__.py``."""
    eager, lazy = _imports(Path(init_file).read_text(encoding="utf-8"))

    def __getattr__(name: str) -> object:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return sorted([*eager, *lazy], key=lambda n: (not n[:1].isupper(), n)), __getattr__


def _imports(source: str) -> tuple[list[str], dict[str, str]]:
    """The names imported from fabtest at the top level (eager) and under ``if TYPE_CHECKING:``
    (lazy: name -> module)."""
    eager: list[str] = []
    lazy: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fabtest."):
            eager += [name for alias in node.names if not (name := alias.asname or alias.name).startswith("_")]
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    lazy.update({alias.asname or alias.name: inner.module for alias in inner.names})
    return eager, lazy


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
