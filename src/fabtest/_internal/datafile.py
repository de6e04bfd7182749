"""Reading a JSON or YAML file the user wrote, with one-line errors that name file and line.

Playbooks, scenario sets and definition files share this so a syntax error reads the same
wherever it happens. The YAML loader is the safe one and also refuses "billion laughs": aliases
are cheap to write and expensive to expand, so the expanded size of the document is bounded
before any Python object is built. A UTF-8 byte order mark (editors on Windows add one) is fine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_ALIASES", "MAX_NODES", "YamlTooLarge", "read_data_file", "safe_load_yaml"]

#: Nodes the document may have once every alias is expanded (a big scenario set has ~10,000).
MAX_NODES = 1_000_000
#: Aliases (``*name``) a document may use at all.
MAX_ALIASES = 10_000


class YamlTooLarge(yaml.YAMLError):
    """The document expands beyond :data:`MAX_NODES` or uses more than :data:`MAX_ALIASES` aliases."""


class _CountingComposer(yaml.SafeLoader):
    """The safe loader, counting aliases while it composes (composing itself is linear in the text)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # yaml's own signature
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise YamlTooLarge(f"more than {MAX_ALIASES} aliases (a YAML alias bomb?); write the values out")
        return super().compose_node(parent, index)


def _expanded_size(root: yaml.Node) -> int:
    """Nodes after expanding aliases (shared nodes counted each time), stopping past the limit."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done or not children:
            total = 1 + sum(sizes.get(id(c), 0) for c in children)
            if total > MAX_NODES:
                raise YamlTooLarge(f"expands to more than {MAX_NODES:,} values (a YAML alias bomb?); "
                                   "write the values out")
            sizes[id(node)] = total
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def safe_load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with the alias-bomb limits above (raises a ``yaml.YAMLError``)."""
    loader = _CountingComposer(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_data_file(path: Path, error: type[Exception]) -> Any:
    """Parse ``path`` as JSON (``.json``) or YAML (anything else); problems raise ``error``."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: a byte order mark is not content
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise error(f"{path}: invalid JSON: nested too deeply") from None
    try:
        return safe_load_yaml(text)
    except YamlTooLarge as exc:
        raise error(f"{path}: invalid YAML: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise error(f"{path}: {where}invalid YAML: {exc.problem or exc.context or 'syntax error'}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise error(f"{path}: invalid YAML: nested too deeply") from None
